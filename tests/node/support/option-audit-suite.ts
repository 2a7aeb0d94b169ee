// Every option of the forward call, on one backend (tests/node/option-audit-<backend>.test.ts):
// each is honoured (the result changes as the float64 reference says, or shows the option's
// effect: `out` receives the output, …) or the call is rejected with a TypeError/RangeError
// naming it; none is accepted and ignored. The option list is the core's declaration
// (cpp/bindings/attention_options.def): an option added there without a case here fails the
// first test. Every case also asks for the log-sum-exp and checks it against the float64 one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, toFloat16, type Attention, type AttentionOptions, type BackendName, type GpuTensor, type Tensor } from 'sdpa-web';
import { randomMasks, randomTensor } from './tensors.js';
import { expectResultMatchesReference, maxAbsDiff } from './tolerance.js';

export interface OptionAuditOptions {
  /** f of the tolerance rule (support/tolerance.ts). */
  factor: number;
  /** Creates the backend under test (default: createAttention({ backend })). */
  create?: () => Promise<Attention>;
  /** The backend's name as `attn.backend` reports it. */
  backend: BackendName;
  /** WebGPU: the floats of a GPU-resident output, read back. */
  readGpu?: (tensor: GpuTensor) => Promise<Float32Array>;
}

const [B, H, Lq, Lk, E, Ev] = [2, 2, 5, 9, 8, 4];
const q = randomTensor([B, H, Lq, E], 1, -2, 2);
const k = randomTensor([B, H, Lk, E], 2, -2, 2);
const v = randomTensor([B, H, Lk, Ev], 3);
/** Document ids of `length` positions per batch, in runs of `run`. */
const documents = (length: number, run: number) => ({ data: new Int32Array(B * length).map((_, x) => Math.floor((x % length) / run)), shape: [B, length] });

type Case = (attn: Attention, oracle: Attention, audit: OptionAuditOptions) => Promise<void>;

/**
 * `options` on `attn` (with the log-sum-exp) match the float64 reference, and the reference says
 * they change the output of these inputs (from the output under `baseline`): honoured, not ignored.
 */
async function expectHonoured(attn: Attention, oracle: Attention, factor: number, options: AttentionOptions, label: string,
  inputs: { k: Tensor; v: Tensor } = { k, v }, baseline: AttentionOptions = {}): Promise<void> {
  const asked = { ...options, returnLogSumExp: true };
  const got = await attn.scaledDotProductAttention(q, inputs.k, inputs.v, asked);
  expectResultMatchesReference(got, oracle, q, inputs.k, inputs.v, asked, factor, label);
  const moved = maxAbsDiff(oracle.referenceAttention(q, inputs.k, inputs.v, options).output.data, oracle.referenceAttention(q, k, v, baseline).output.data);
  expect(moved, `${label}: the option changes the float64 output`).toBeGreaterThan(1e-3);
}

/** The call's rejection: an instance of `type` whose message matches `message`. */
async function expectRejected(call: Promise<unknown>, type: typeof TypeError | typeof RangeError, message: RegExp): Promise<void> {
  const error = await call.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(type);
  expect((error as Error).message).toMatch(message);
}

const CASES: Record<string, Case> = {
  attnMask: async (attn, oracle, { factor }) => {
    const masks = randomMasks([Lq, Lk], 10, 0.6);
    (masks.bool.data as Uint8Array).fill(0, 2 * Lk, 3 * Lk); // row 2 sees no key: log-sum-exp −Infinity
    (masks.additive.data as Float32Array).fill(-Infinity, 2 * Lk, 3 * Lk);
    await expectHonoured(attn, oracle, factor, { attnMask: masks.bool }, 'bool mask');
    await expectHonoured(attn, oracle, factor, { attnMask: masks.additive }, 'additive mask');
  },
  isCausal: async (attn, oracle, { factor }) => {
    for (const isCausal of [true, 'bottom-right', { offset: -2 }] as const) await expectHonoured(attn, oracle, factor, { isCausal }, `isCausal ${JSON.stringify(isCausal)}`);
  },
  scale: async (attn, oracle, { factor }) => expectHonoured(attn, oracle, factor, { scale: 0.3 }, 'scale 0.3'),
  softcap: async (attn, oracle, { factor }) => expectHonoured(attn, oracle, factor, { scale: 1, softcap: 0.5 }, 'softcap 0.5', { k, v }, { scale: 1 }),
  keyLengths: async (attn, oracle, { factor }) => expectHonoured(attn, oracle, factor, { keyLengths: new Int32Array([3, 0]) }, 'keyLengths [3, 0]'),
  window: async (attn, oracle, { factor }) => expectHonoured(attn, oracle, factor, { window: { left: 1, right: 0 } }, 'window'),
  alibi: async (attn, oracle, { factor }) => expectHonoured(attn, oracle, factor, { alibi: true }, 'alibi'),
  alibiSlopes: async (attn, oracle, { factor }) => expectHonoured(attn, oracle, factor, { alibiSlopes: new Float32Array([0.5, -0.25]) }, 'alibiSlopes'),
  sinks: async (attn, oracle, { factor }) => {
    await expectHonoured(attn, oracle, factor, { sinks: new Float32Array([1.5, -0.5]) }, 'sinks');
    // Rows that see no key: the log-sum-exp is the sink's logit (−Infinity for a −Infinity sink).
    await expectHonoured(attn, oracle, factor, { sinks: new Float32Array([1.5, -Infinity]), isCausal: { offset: -2 } }, 'sinks, rows seeing nothing', { k, v }, { isCausal: { offset: -2 } });
  },
  queryDocuments: async (attn, oracle, { factor }) => {
    await expectHonoured(attn, oracle, factor, { queryDocuments: documents(Lq, 2), keyDocuments: documents(Lk, 4) }, 'documents');
    await expectRejected(attn.scaledDotProductAttention(q, k, v, { queryDocuments: documents(Lq, 2) }), TypeError, /queryDocuments and keyDocuments go together/);
  },
  keyDocuments: async (attn, oracle, { factor }) => {
    await expectHonoured(attn, oracle, factor, { queryDocuments: documents(Lq, 5), keyDocuments: documents(Lk, 3) }, 'documents');
    await expectRejected(attn.scaledDotProductAttention(q, k, v, { keyDocuments: documents(Lk, 3) }), TypeError, /queryDocuments and keyDocuments go together/);
  },
  enableGqa: async (attn, oracle, { factor }) => {
    const shared = { k: randomTensor([B, 1, Lk, E], 20, -2, 2), v: randomTensor([B, 1, Lk, Ev], 21) };
    await expectRejected(attn.scaledDotProductAttention(q, shared.k, shared.v), RangeError, /enableGqa/);
    await expectHonoured(attn, oracle, factor, { enableGqa: true }, 'enableGqa', shared);
  },
  returnScores: async (attn, oracle, { factor }) => {
    expect((await attn.scaledDotProductAttention(q, k, v)).scores).toBeUndefined();
    for (const returnScores of ['scaled', 'softcapped', 'masked'] as const) {
      const options = { returnScores, softcap: 2, isCausal: true, returnLogSumExp: true };
      const got = await attn.scaledDotProductAttention(q, k, v, options);
      expectResultMatchesReference(got, oracle, q, k, v, options, factor, `returnScores ${returnScores}`);
    }
  },
  returnWeights: async (attn, oracle, { factor }) => {
    expect((await attn.scaledDotProductAttention(q, k, v)).weights).toBeUndefined();
    const options = { returnWeights: true, isCausal: { offset: -1 }, returnLogSumExp: true };
    expectResultMatchesReference(await attn.scaledDotProductAttention(q, k, v, options), oracle, q, k, v, options, factor, 'returnWeights');
  },
  returnLogSumExp: async (attn, oracle, { factor, backend }) => {
    expect((await attn.scaledDotProductAttention(q, k, v)).logSumExp).toBeUndefined();
    expect((await attn.scaledDotProductAttention(q, k, v, { returnLogSumExp: false })).logSumExp).toBeUndefined();
    const options = { returnLogSumExp: true, isCausal: { offset: -1 } };
    const got = await attn.scaledDotProductAttention(q, k, v, options);
    expect(got.logSumExp!.shape).toEqual([B, H, Lq]);
    expect(got.logSumExp!.data[0]).toBe(-Infinity); // row 0 sees no key
    expectResultMatchesReference(got, oracle, q, k, v, options, factor, 'returnLogSumExp');
    if (backend === 'webgpu') {
      await expectRejected(attn.scaledDotProductAttention(q, k, v, { returnLogSumExp: true, outputLocation: 'gpu' }), TypeError, /returnLogSumExp need outputLocation 'cpu'/);
    }
    await expectRejected(attn.scaledDotProductAttention(q, k, v, { returnLogSumExp: 1 as never }), TypeError, /returnLogSumExp must be a boolean/);
  },
  out: async (attn) => {
    const plain = await attn.scaledDotProductAttention(q, k, v, { isCausal: true });
    const out = new Float32Array(B * H * Lq * Ev).fill(7);
    const into = await attn.scaledDotProductAttention(q, k, v, { isCausal: true, out });
    expect(into.output.data).toBe(out);
    expect(out).toEqual(plain.output.data);
    await expectRejected(attn.scaledDotProductAttention(q, k, v, { out: new Float32Array(3) }), RangeError, /out has 3 elements/);
  },
  outputLocation: async (attn, _oracle, { backend, readGpu }) => {
    const plain = await attn.scaledDotProductAttention(q, k, v, { isCausal: true });
    expect((await attn.scaledDotProductAttention(q, k, v, { isCausal: true, outputLocation: 'cpu' })).output.data).toEqual(plain.output.data);
    if (backend === 'webgpu') {
      const { output } = await attn.scaledDotProductAttention(q, k, v, { isCausal: true, outputLocation: 'gpu' });
      expect(output.shape).toEqual(plain.output.shape);
      const gpuOutput = output as unknown as GpuTensor;
      expect(await readGpu!(gpuOutput)).toEqual(plain.output.data);
      gpuOutput.buffer.destroy();
    } else {
      await expectRejected(attn.scaledDotProductAttention(q, k, v, { outputLocation: 'gpu' }), TypeError, /outputLocation 'gpu' needs backend 'webgpu'/);
    }
    await expectRejected(attn.scaledDotProductAttention(q, k, v, { outputLocation: 'disk' as never }), TypeError, /outputLocation must be 'cpu' or 'gpu'/);
  },
  outputDtype: async (attn) => {
    const plain = await attn.scaledDotProductAttention(q, k, v, { isCausal: true });
    const half = await attn.scaledDotProductAttention(q, k, v, { isCausal: true, outputDtype: 'float16' });
    expect((half.output as { dtype?: string }).dtype).toBe('float16');
    expect(half.output.data).toEqual(toFloat16(plain.output.data as Float32Array));
    const single = await attn.scaledDotProductAttention(q, k, v, { isCausal: true, outputDtype: 'float32' });
    expect(single.output.data).toEqual(plain.output.data);
    await expectRejected(attn.scaledDotProductAttention(q, k, v, { outputDtype: 'float64' as never }), TypeError, /outputDtype must be 'float32' or 'float16'/);
  },
};

export function defineOptionAuditSuite(audit: OptionAuditOptions): void {
  const { backend, create } = audit;
  describe(`every forward option is honoured or rejected on '${backend}'`, () => {
    let attn: Attention;
    let oracle: Attention;
    beforeAll(async () => {
      attn = await (create ? create() : createAttention({ backend }));
      oracle = await createAttention({ backend: 'scalar' });
      expect(attn.backend).toBe(backend);
    });
    afterAll(() => {
      attn.dispose();
      oracle.dispose();
    });

    it('has a case for each option the core declares', () => {
      const names = (attn as unknown as { module: { optionNames(): { forward: string[] } } }).module.optionNames().forward;
      expect([...names].sort()).toEqual(Object.keys(CASES).sort());
    });

    for (const [name, check] of Object.entries(CASES)) it(name, () => check(attn, oracle, audit));

    it('returnLogSumExp on every kernel shape: few keys, a key tile and more, a decode step, a wide head', async () => {
      const shapes: [string, number, number, number, AttentionOptions][] = [
        ['Lk 7', 9, 7, 8, { isCausal: true }],
        ['Lk 70', 70, 70, 16, { isCausal: { offset: -3 }, attnMask: randomMasks([70, 70], 30, 0.8).additive }],
        ['decode Lq 2, Lk 300', 2, 300, 16, { isCausal: 'bottom-right', sinks: new Float32Array([0.5, 2]) }],
        ['decode, no key', 2, 300, 16, { keyLengths: new Int32Array([0, 300]), window: { left: 40 } }],
        ['E 160', 6, 40, 160, { softcap: 3, alibi: true }],
        ['Lk 0', 3, 0, 8, { sinks: new Float32Array([0.5, -Infinity]) }],
      ];
      for (const [label, lq, lk, e, options] of shapes) {
        const qs = randomTensor([B, H, lq, e], lq, -1, 1), ks = randomTensor([B, H, lk, e], lk + 1, -1, 1), vs = randomTensor([B, H, lk, Ev], lk + 2);
        const asked = { ...options, returnLogSumExp: true };
        expectResultMatchesReference(await attn.scaledDotProductAttention(qs, ks, vs, asked), oracle, qs, ks, vs, asked, audit.factor, label);
      }
      if (backend === 'webgpu') {
        const writers = attn.webgpuInfo()!.pipelines.filter((key) => key.includes(':lse=1')).map((key) => key.split(':')[0]);
        expect(new Set(writers)).toEqual(new Set(['flash', 'flash-tiled', 'decode-merge']));
      }
    });
  });
}
