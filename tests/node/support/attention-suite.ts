// The one test body every backend runs (tests/node/attention-<backend>.test.ts instantiate it).
// Expected values always come from the float64 reference, never from numbers in the texts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, WebGPUError, type Attention, type AttentionOptions, type BackendName, type Tensor } from 'sdpa-web';
import { elements, randomMasks, randomTensor, rng, tensor } from './tensors.js';
import { expectMatchesReference, expectResultMatchesReference } from './tolerance.js';

export interface SuiteOptions {
  /** f of the tolerance rule (support/tolerance.ts). */
  factor: number;
  /** Creates the backend under test (default: createAttention({ backend })). */
  create?: () => Promise<Attention>;
}

// Lengths straddle every kernel's tiles (SIMD: 32 query rows, 64 keys; WebGPU tiles are in range too).
const LENGTHS = [1, 2, 3, 17, 31, 32, 33, 63, 64, 65, 127, 257, 1000];
const DIMS = [1, 8, 15, 16, 64, 100];
const DIM_PAIRS = DIMS.flatMap((e) => DIMS.filter((ev) => ev !== e).map((ev) => [e, ev] as const));
const BATCH_HEADS = [[1, 1], [2, 1], [1, 3], [2, 3]] as const;

export function defineAttentionSuite(backend: BackendName, { factor, create }: SuiteOptions): void {
  describe(`attention on the '${backend}' backend`, () => {
    let attn: Attention;
    let oracle: Attention;
    const check = (q: Tensor, k: Tensor, v: Tensor, options: AttentionOptions = {}, label = '') =>
      expectMatchesReference(attn, oracle, q, k, v, options, { factor }, label);

    beforeAll(async () => {
      attn = await (create ? create() : createAttention({ backend }));
      oracle = await createAttention({ backend: 'scalar' });
      expect(attn.backend).toBe(backend);
    });
    afterAll(() => {
      attn.dispose();
      oracle.dispose();
    });

    it('matches the float64 reference over lengths, head dims, batches and heads', async () => {
      // Every (Lq, Lk) pair; (E, Ev) with E ≠ Ev and (B, H) rotate through their lists.
      let c = 0;
      for (const lq of LENGTHS) {
        for (const lk of LENGTHS) {
          const [e, ev] = DIM_PAIRS[c % DIM_PAIRS.length]!;
          const [b, h] = BATCH_HEADS[c % BATCH_HEADS.length]!;
          // Keep the float64 reference cheap on the largest shapes.
          const [bb, hh, ee] = lq * lk >= 100_000 ? [1, 1, Math.min(e, 16)] : [b, h, e];
          const lead = [bb, hh];
          const q = randomTensor([...lead, lq, ee], 3 * c, -2, 2);
          const k = randomTensor([...lead, lk, ee], 3 * c + 1, -2, 2);
          const v = randomTensor([...lead, lk, ev], 3 * c + 2);
          await check(q, k, v, { returnWeights: c % 4 === 0 }, `B=${bb} H=${hh} Lq=${lq} Lk=${lk} E=${ee} Ev=${ev}`);
          c++;
        }
      }
    });

    it('accepts rank-2 and rank-3 inputs and keeps the leading dims in the output', async () => {
      for (const lead of [[], [2], [2, 3]]) {
        const q = randomTensor([...lead, 5, 8], 1);
        const k = randomTensor([...lead, 7, 8], 2);
        const v = randomTensor([...lead, 7, 4], 3);
        const { output, weights } = await attn.scaledDotProductAttention(q, k, v, { returnWeights: true });
        expect(output.shape).toEqual([...lead, 5, 4]);
        expect(weights!.shape).toEqual([...lead, 5, 7]);
        await check(q, k, v, { returnWeights: true }, `lead [${lead}]`);
      }
    });

    it('applies every mask broadcast shape, bool and additive', async () => {
      const [B, H, Lq, Lk] = [2, 3, 33, 70];
      const q = randomTensor([B, H, Lq, 16], 10);
      const k = randomTensor([B, H, Lk, 16], 11);
      const v = randomTensor([B, H, Lk, 8], 12);
      for (let bits = 0; bits < 16; bits++) {
        const full = [bits & 8 ? B : 1, bits & 4 ? H : 1, bits & 2 ? Lq : 1, bits & 1 ? Lk : 1];
        // PyTorch also allows dropping leading dims: try the shortest spelling of each shape too.
        const short = full.slice(full.findIndex((d, i) => d !== 1 || i === 3));
        const masks = randomMasks(full, 100 + bits);
        for (const [kind, mask] of Object.entries(masks)) {
          for (const shape of [full, short]) {
            await check(q, k, v, { attnMask: { data: mask.data, shape }, returnWeights: bits % 3 === 0 }, `${kind} mask [${shape}]`);
          }
        }
      }
    });

    it('a broadcast mask gives the same result as its expanded copy, bit for bit', async () => {
      const q = randomTensor([2, 2, 9, 8], 20), k = randomTensor([2, 2, 11, 8], 21), v = randomTensor([2, 2, 11, 5], 22);
      const small = randomMasks([2, 1, 1, 11], 23).bool;
      const expanded = new Uint8Array(2 * 2 * 9 * 11);
      for (let b = 0; b < 2; b++) for (let h = 0; h < 2; h++) for (let i = 0; i < 9; i++) for (let j = 0; j < 11; j++) {
        expanded[((b * 2 + h) * 9 + i) * 11 + j] = small.data[b * 11 + j]!;
      }
      const a = await attn.scaledDotProductAttention(q, k, v, { attnMask: small });
      const b = await attn.scaledDotProductAttention(q, k, v, { attnMask: { data: expanded, shape: [2, 2, 9, 11] } });
      expect(a.output.data).toEqual(b.output.data);
    });

    it('causal masking, top-left and bottom-right, with Lq < Lk and Lq > Lk', async () => {
      for (const [lq, lk] of [[40, 100], [100, 40], [65, 65], [1, 130], [130, 1]]) {
        const q = randomTensor([2, lq, 16], lq), k = randomTensor([2, lk, 16], lk + 1), v = randomTensor([2, lk, 8], lk + 2);
        for (const isCausal of [true, 'top-left', 'bottom-right'] as const) {
          await check(q, k, v, { isCausal, returnWeights: true }, `causal ${isCausal} ${lq}x${lk}`);
        }
      }
    });

    it('causal equals the explicit lower-triangular mask', async () => {
      const [lq, lk] = [6, 9];
      const q = randomTensor([lq, 4], 30), k = randomTensor([lk, 4], 31), v = randomTensor([lk, 3], 32);
      for (const [isCausal, offset] of [['top-left', 0], ['bottom-right', lk - lq]] as const) {
        const mask = new Uint8Array(lq * lk).map((_, x) => (x % lk <= Math.floor(x / lk) + offset ? 1 : 0));
        const a = await attn.scaledDotProductAttention(q, k, v, { isCausal });
        const b = await attn.scaledDotProductAttention(q, k, v, { attnMask: { data: mask, shape: [lq, lk] } });
        expect(a.output.data).toEqual(b.output.data);
      }
    });

    it('few heads and many (WebGPU: 16, 32 and 64 query rows a workgroup; causal tiles heaviest first over all heads), bit for bit with the mask', async () => {
      // B·H·⌈Lq/64⌉ workgroups of 64 rows: 5 (16 rows on WebGPU), 256 (32 rows: 512), 512 (64
      // rows). Each Lq leaves a partial last row tile. SwiftShader's time grows with the workgroups.
      for (const [B, H, Lq, Lk, rows] of [[1, 1, 257, 70, 16], [4, 64, 33, 64, 32], [4, 64, 65, 64, 64]] as const) {
        const q = randomTensor([B, H, Lq, 16], Lq, -2, 2), k = randomTensor([B, H, Lk, 16], Lq + 1, -2, 2), v = randomTensor([B, H, Lk, 8], Lq + 2);
        const label = `B=${B} H=${H} Lq=${Lq} Lk=${Lk}`;
        // Causal: on WebGPU through the trace, whose kernel key names the rows and whose output is the call's.
        let causal: Tensor;
        if (attn.backend === 'webgpu') {
          const trace = await attn.traceWebGpuOnlineSoftmax(q, k, v, { isCausal: true, row: Lq - 1 });
          expect(trace.kernel, label).toMatch(new RegExp(`^flash-tiled:.*:rows${rows}:.*:heaviest-first`));
          causal = trace.output;
        } else {
          causal = (await attn.scaledDotProductAttention(q, k, v, { isCausal: true })).output;
        }
        expectResultMatchesReference({ output: causal }, oracle, q, k, v, { isCausal: true }, factor, `${label} causal`);
        // The explicit lower-triangular mask runs its tiles in order: the same bits.
        const mask = new Uint8Array(Lq * Lk).map((_, x) => (x % Lk <= Math.floor(x / Lk) ? 1 : 0));
        const masked = await attn.scaledDotProductAttention(q, k, v, { attnMask: { data: mask, shape: [Lq, Lk] } });
        expect(causal.data, label).toEqual(masked.output.data);
        for (const options of [{}, { window: { left: 20, right: 0 } }] as AttentionOptions[]) {
          await check(q, k, v, options, `${label} ${JSON.stringify(options)}`);
        }
      }
    });

    it('grouped-query attention maps query head h to key/value head floor(h / (Hq/Hkv))', async () => {
      const q = randomTensor([2, 6, 40, 32], 40), k = randomTensor([2, 2, 90, 32], 41), v = randomTensor([2, 2, 90, 24], 42);
      await check(q, k, v, { enableGqa: true, returnWeights: true }, 'gqa 6/2');
      await check(q, randomTensor([2, 1, 90, 32], 43), randomTensor([2, 1, 90, 24], 44), { enableGqa: true, isCausal: true }, 'mqa');
    });

    it('fully masked rows give zeros, never NaN, and leave other rows unchanged', async () => {
      const q = randomTensor([6, 8], 50), k = randomTensor([70, 8], 51), v = randomTensor([70, 4], 52);
      const rowMask = { data: new Uint8Array([1, 0, 1, 0, 0, 1]), shape: [6, 1] };
      const masked = await attn.scaledDotProductAttention(q, k, v, { attnMask: rowMask, returnWeights: true });
      const plain = await attn.scaledDotProductAttention(q, k, v, { returnWeights: true });
      for (const row of [1, 3, 4]) {
        expect([...masked.output.data.subarray(row * 4, row * 4 + 4)]).toEqual([0, 0, 0, 0]);
        expect(masked.weights!.data.subarray(row * 70, row * 70 + 70).every((w) => w === 0)).toBe(true);
      }
      // With and without weights (the CPU backends' tile kernel, and their decode kernel for these 6 rows).
      const maskedOnly = await attn.scaledDotProductAttention(q, k, v, { attnMask: rowMask });
      const plainOnly = await attn.scaledDotProductAttention(q, k, v);
      for (const row of [0, 2, 5]) {
        expect(masked.output.data.subarray(row * 4, row * 4 + 4)).toEqual(plain.output.data.subarray(row * 4, row * 4 + 4));
        expect(maskedOnly.output.data.subarray(row * 4, row * 4 + 4)).toEqual(plainOnly.output.data.subarray(row * 4, row * 4 + 4));
      }
      // Additive -Infinity everywhere, and bottom-right causal with Lq > Lk, hide whole rows too.
      const minusInf = { data: new Float32Array(70).fill(-Infinity), shape: [70] };
      const allHidden = await attn.scaledDotProductAttention(q, k, v, { attnMask: minusInf });
      expect(allHidden.output.data.every((x) => x === 0)).toBe(true);
      const br = await attn.scaledDotProductAttention(randomTensor([5, 8], 53), randomTensor([2, 8], 54), randomTensor([2, 3], 55), { isCausal: 'bottom-right' });
      expect([...br.output.data.subarray(0, 9)]).toEqual(new Array(9).fill(0)); // rows 0..2 see no key
    });

    it('large logits (scores 90–100 and 1e4) do not overflow', async () => {
      // E = 1, scale 1: q·k spans 90..100.
      const q = { data: new Float32Array(20).fill(10), shape: [20, 1] };
      const k = { data: new Float32Array(50).map((_, j) => 9 + j / 49), shape: [50, 1] };
      const v = randomTensor([50, 3], 60);
      await check(q, k, v, { scale: 1, returnWeights: true }, 'logits 90-100');
      const big = { data: new Float32Array(50).map((_, j) => 100 - j / 10), shape: [50, 1] };
      const q100 = { data: new Float32Array(20).fill(100), shape: [20, 1] };
      const r = await attn.scaledDotProductAttention(q100, big, v, { scale: 1 });
      expect(r.output.data.every(Number.isFinite)).toBe(true);
      await check(q100, big, v, { scale: 1 }, 'logits 1e4');
    });

    it('Lk = 1 returns the value row exactly; scale = 0 returns the mean of V', async () => {
      const q = randomTensor([2, 7, 16], 70, -50, 50), k = randomTensor([2, 1, 16], 71), v = randomTensor([2, 1, 5], 72);
      const single = await attn.scaledDotProductAttention(q, k, v);
      for (let b = 0; b < 2; b++) for (let i = 0; i < 7; i++) {
        expect(single.output.data.subarray((b * 7 + i) * 5, (b * 7 + i + 1) * 5)).toEqual(v.data.subarray(b * 5, b * 5 + 5));
      }
      const k2 = randomTensor([2, 40, 16], 73), v2 = randomTensor([2, 40, 5], 74);
      const mean = await attn.scaledDotProductAttention(q, k2, v2, { scale: 0 });
      for (let b = 0; b < 2; b++) for (let c = 0; c < 5; c++) {
        let m = 0;
        for (let j = 0; j < 40; j++) m += v2.data[(b * 40 + j) * 5 + c]! / 40;
        for (let i = 0; i < 7; i++) expect(mean.output.data[(b * 7 + i) * 5 + c]).toBeCloseTo(m, 5);
      }
    });

    it('zero-size batches, heads and queries give empty outputs; Lk = 0 gives zeros', async () => {
      const empty = await attn.scaledDotProductAttention(randomTensor([0, 3, 4], 1), randomTensor([0, 5, 4], 2), randomTensor([0, 5, 2], 3));
      expect(empty.output.shape).toEqual([0, 3, 2]);
      expect(empty.output.data.length).toBe(0);
      const noKeys = await attn.scaledDotProductAttention(randomTensor([3, 4], 1), randomTensor([0, 4], 2), randomTensor([0, 2], 3));
      expect([...noKeys.output.data]).toEqual([0, 0, 0, 0, 0, 0]);
    });

    it('rejects bad input with a TypeError/RangeError naming the argument, and keeps working', async () => {
      const q = randomTensor([2, 3, 5, 8], 1), k = randomTensor([2, 3, 7, 8], 2), v = randomTensor([2, 3, 7, 4], 3);
      const bad: [string, () => Promise<unknown>, typeof TypeError | typeof RangeError, RegExp][] = [
        ['rank', () => attn.scaledDotProductAttention(randomTensor([8], 1), k, v), RangeError, /query must have shape/],
        ['key rank', () => attn.scaledDotProductAttention(q, randomTensor([7, 8], 2), v), RangeError, /key must have the same rank/],
        ['E', () => attn.scaledDotProductAttention(q, randomTensor([2, 3, 7, 9], 2), v), RangeError, /key must have shape.*E = 8/],
        ['Lk', () => attn.scaledDotProductAttention(q, k, randomTensor([2, 3, 6, 4], 3)), RangeError, /value must have shape/],
        ['gqa off', () => attn.scaledDotProductAttention(q, randomTensor([2, 1, 7, 8], 2), randomTensor([2, 1, 7, 4], 3)), RangeError, /enableGqa/],
        ['gqa divisibility', () => attn.scaledDotProductAttention(q, randomTensor([2, 2, 7, 8], 2), randomTensor([2, 2, 7, 4], 3), { enableGqa: true }), RangeError, /multiple/],
        ['mask', () => attn.scaledDotProductAttention(q, k, v, { attnMask: randomMasks([5, 6], 4).bool }), RangeError, /attnMask .* does not broadcast/],
        ['data length', () => attn.scaledDotProductAttention({ data: new Float32Array(3), shape: [2, 2] }, k, v), RangeError, /query.data has 3 elements/],
        ['non-integer dim', () => attn.scaledDotProductAttention({ data: new Float32Array(3), shape: [1.5, 2] }, k, v), RangeError, /query.shape must hold non-negative integers/],
        ['negative dim', () => attn.scaledDotProductAttention({ data: new Float32Array(0), shape: [-1, 2] }, k, v), RangeError, /non-negative/],
        ['NaN scale', () => attn.scaledDotProductAttention(q, k, v, { scale: NaN }), RangeError, /scale must be a finite number/],
        ['data type', () => attn.scaledDotProductAttention({ data: new Float64Array(80), shape: [2, 5, 8] } as never, k, v), TypeError, /query.data must be a Float32Array/],
        ['mask type', () => attn.scaledDotProductAttention(q, k, v, { attnMask: { data: new Int32Array(7), shape: [7] } as never }), TypeError, /attnMask.data must be a Uint8Array/],
        ['isCausal value', () => attn.scaledDotProductAttention(q, k, v, { isCausal: 'upper' as never }), TypeError, /isCausal must be/],
        ['not a tensor', () => attn.scaledDotProductAttention([1, 2, 3] as never, k, v), TypeError, /query must be a tensor/],
        ['scale type', () => attn.scaledDotProductAttention(q, k, v, { scale: '0.5' as never }), TypeError, /scale must be a number/],
        ['oversize weights', () => attn.scaledDotProductAttention(randomTensor([65536, 1], 6), randomTensor([65536, 1], 7), randomTensor([65536, 1], 8), { returnWeights: true }), RangeError, /2\^30 elements/],
      ];
      const heapBefore = attn.memoryStats().heapBytesInUse;
      for (const [label, call, type, message] of bad) {
        const error = await call().then(() => undefined, (e: unknown) => e);
        expect(error, label).toBeInstanceOf(type);
        expect((error as Error).message, label).toMatch(message);
      }
      expect(attn.memoryStats().heapBytesInUse).toBe(heapBefore);
      await check(q, k, v, {}, 'after errors');
    });

    it('an unknown option name is a TypeError naming it and the closest known name; the instance stays usable', async () => {
      const q = randomTensor([2, 9, 8], 1), k = randomTensor([2, 11, 8], 2), v = randomTensor([2, 11, 4], 3);
      await attn.scaledDotProductAttention(q, k, v, { isCausal: true });
      const heapBefore = attn.memoryStats().heapBytesInUse;
      const known =
        '(known: attnMask, isCausal, scale, softcap, keyLengths, window, alibi, alibiSlopes, sinks, queryDocuments, keyDocuments, enableGqa, returnScores, returnWeights, returnLogSumExp, out, outputLocation, outputDtype)';
      const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      const cases: [string, Record<string, unknown>, RegExp][] = [
        // The typo this guards against: ignored, it would give non-causal attention.
        ['isCasual', { isCasual: true }, /^unknown option 'isCasual' of scaledDotProductAttention; did you mean 'isCausal'\?/],
        // Set to undefined it is still a typo.
        ['isCasual: undefined', { isCasual: undefined }, /unknown option 'isCasual' .*did you mean 'isCausal'\?/],
        // PyTorch's spelling, and a correct name beside the wrong one.
        ['is_causal', { scale: 0.5, is_causal: true }, /unknown option 'is_causal' .*did you mean 'isCausal'\?/],
        ['returnWeight', { returnWeight: true }, /unknown option 'returnWeight' .*did you mean 'returnWeights'\?/],
        // The variants' names: a typo of each finds it.
        ['windows', { windows: { left: 3 } }, /unknown option 'windows' .*did you mean 'window'\?/],
        ['sink', { sink: new Float32Array(2) }, /unknown option 'sink' .*did you mean 'sinks'\?/],
        ['key_lengths', { key_lengths: new Int32Array(2) }, /unknown option 'key_lengths' .*did you mean 'keyLengths'\?/],
        ['alibiSlope', { alibiSlope: new Float32Array(2) }, /unknown option 'alibiSlope' .*did you mean 'alibiSlopes'\?/],
        // Nothing close: the known names, and no guess.
        ['frobnicate', { frobnicate: 1 }, new RegExp(`^unknown option 'frobnicate' of scaledDotProductAttention ${escape(known)}$`)],
      ];
      for (const [label, options, message] of cases) {
        const error = await attn.scaledDotProductAttention(q, k, v, options as AttentionOptions).then(() => undefined, (e: unknown) => e);
        expect(error, label).toBeInstanceOf(TypeError);
        expect((error as Error).message, label).toMatch(message);
        expect((error as Error).message, label).toContain(known);
        expect(attn.memoryStats().heapBytesInUse, label).toBe(heapBefore);
      }
      // Non-object options stay the TypeError they were.
      await expect(attn.scaledDotProductAttention(q, k, v, 3 as never)).rejects.toThrow(/options must be an object/);
      await check(q, k, v, { isCausal: true, returnWeights: true }, 'after unknown options');
      expect(attn.memoryStats().heapBytesInUse).toBe(heapBefore);
    });

    it('10,000 calls (some failing) leave the wasm heap at its baseline', async () => {
      const q = randomTensor([3, 4], 1), k = randomTensor([5, 4], 2), v = randomTensor([5, 2], 3);
      const wrong = randomTensor([5, 3], 4);
      await attn.scaledDotProductAttention(q, k, v, { returnWeights: true });
      const before = attn.memoryStats().heapBytesInUse;
      for (let i = 0; i < 10_000; i++) {
        if (i % 10 === 9) await attn.scaledDotProductAttention(q, wrong, v).catch(() => undefined);
        else await attn.scaledDotProductAttention(q, k, v, { returnWeights: i % 2 === 0, isCausal: i % 3 === 0 });
      }
      expect(attn.memoryStats().heapBytesInUse).toBe(before);
    });

    it('requests beyond wasm32 memory are RangeErrors (WebGPU: a typed error), and the instance survives', async () => {
      // Inputs of 2 × 1 GiB would fit JS but not one wasm32 heap alongside the output. WebGPU
      // writes them from the caller's arrays (no heap): the device's limits or memory decide.
      const n = 2 ** 28;
      const huge = { data: new Float32Array(n), shape: [n / 64, 64] };
      const error = await attn.scaledDotProductAttention(huge, huge, huge).then(() => undefined, (e: unknown) => e);
      if (attn.backend === 'webgpu') {
        if (error !== undefined) expect(error instanceof RangeError || error instanceof WebGPUError, String(error)).toBe(true);
      } else {
        expect(error).toBeInstanceOf(RangeError);
        expect((error as Error).message).toMatch(/WebAssembly memory/);
      }
      await check(randomTensor([3, 4], 1), randomTensor([5, 4], 2), randomTensor([5, 2], 3), {}, 'after oversize');
    });

    it('use after dispose throws, and so does a second dispose', async () => {
      const a = await (create ? create() : createAttention({ backend }));
      a.dispose();
      expect(() => a.dispose()).toThrow(/disposed/);
      await expect(a.scaledDotProductAttention(tensor([[1]]), tensor([[1]]), tensor([[1]]))).rejects.toThrow(/disposed/);
    });

    it('writes the output into options.out: the same array, the same bits, also when it aliases the query', async () => {
      const q = randomTensor([2, 3, 33, 8], 1), k = randomTensor([2, 3, 70, 8], 2), v = randomTensor([2, 3, 70, 8], 3);
      const bytes = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
      const fresh = await attn.scaledDotProductAttention(q, k, v, { isCausal: true, returnWeights: true });
      const out = new Float32Array(2 * 3 * 33 * 8).fill(7);
      for (let call = 0; call < 2; call++) {
        const into = await attn.scaledDotProductAttention(q, k, v, { isCausal: true, returnWeights: true, out });
        expect(into.output.data).toBe(out);
        expect(into.output.shape).toEqual(fresh.output.shape);
        expect(bytes(out).equals(bytes(fresh.output.data)), `call ${call}`).toBe(true);
        expect(bytes(into.weights!.data).equals(bytes(fresh.weights!.data))).toBe(true);
      }
      // out over the query's own memory (a subarray view, Ev = E): inputs are read before it is written.
      const backing = new Float32Array(10 + q.data.length);
      const aliased = { data: backing.subarray(10), shape: q.shape };
      aliased.data.set(q.data);
      const result = await attn.scaledDotProductAttention(aliased, k, v, { isCausal: true, out: aliased.data });
      expect(result.output.data).toBe(aliased.data);
      expect(bytes(aliased.data).equals(bytes(fresh.output.data))).toBe(true);
      // A wrong out is a TypeError/RangeError naming it, and is left untouched.
      const short = new Float32Array(out.length - 1).fill(7);
      const bad: [unknown, typeof TypeError | typeof RangeError, RegExp][] = [
        [short, RangeError, /out has 1583 elements but the output \[2, 3, 33, 8\] needs 1584/],
        [new Float64Array(out.length), TypeError, /out must be a Float32Array of 1584 elements .*got a Float64Array/],
        [Array.from(out), TypeError, /out must be a Float32Array/],
      ];
      for (const [wrong, type, message] of bad) {
        const error = await attn.scaledDotProductAttention(q, k, v, { out: wrong as Float32Array }).then(() => undefined, (e: unknown) => e);
        expect(error).toBeInstanceOf(type);
        expect((error as Error).message).toMatch(message);
      }
      expect(short.every((x) => x === 7)).toBe(true);
      // null means no destination, as for the other nullable options.
      const none = await attn.scaledDotProductAttention(q, k, v, { isCausal: true, out: null });
      expect(bytes(none.output.data).equals(bytes(fresh.output.data))).toBe(true);
    });

    it('handles inputs that are views into larger buffers', async () => {
      const backing = new Float32Array(100).map((_, i) => Math.sin(i));
      const q = { data: backing.subarray(3, 3 + 12), shape: [3, 4] };
      const k = { data: backing.subarray(20, 40), shape: [5, 4] };
      const v = { data: backing.subarray(50, 60), shape: [5, 2] };
      expect(elements(q.shape)).toBe(q.data.length);
      await check(q, k, v, { returnWeights: true }, 'subarray views');
    });

    // Causal offsets (query i sees keys j ≤ i + offset) and causality composed with a mask.
    describe(`causal offsets and causal + mask on the '${backend}' backend`, () => {
      it('offsets −3, 0, 5, Lk − Lq and Lk + 2 with Lq < Lk and Lq > Lk, alone and with a bool or additive mask', async () => {
        for (const [lq, lk] of [[40, 100], [100, 40], [70, 130]]) {
          const q = randomTensor([2, lq, 16], lq), k = randomTensor([2, lk, 16], lk + 1), v = randomTensor([2, lk, 8], lk + 2);
          const masks = randomMasks([2, lq, lk], lq + lk);
          for (const offset of [-3, 0, 5, lk - lq, lk + 2]) {
            const isCausal = { offset };
            await check(q, k, v, { isCausal, returnWeights: true }, `offset ${offset} ${lq}x${lk}`);
            await check(q, k, v, { isCausal, attnMask: masks.bool, returnWeights: offset === 5 }, `offset ${offset} + bool mask ${lq}x${lk}`);
            await check(q, k, v, { isCausal, attnMask: masks.additive, returnWeights: offset === 0 }, `offset ${offset} + additive mask ${lq}x${lk}`);
          }
        }
      });

      it("'top-left' and true are offset 0, 'bottom-right' is Lk − Lq, bit for bit", async () => {
        for (const [lq, lk] of [[6, 9], [9, 6]]) {
          const q = randomTensor([lq, 4], 30), k = randomTensor([lk, 4], 31), v = randomTensor([lk, 3], 32);
          const run = (isCausal: AttentionOptions['isCausal']) => attn.scaledDotProductAttention(q, k, v, { isCausal, returnWeights: true });
          const zero = await run({ offset: 0 });
          for (const named of [true, 'top-left'] as const) expect((await run(named)).output.data).toEqual(zero.output.data);
          expect((await run('bottom-right')).output.data).toEqual((await run({ offset: lk - lq })).output.data);
        }
      });

      it('an offset equals its explicit mask; rows that see no key (negative offsets) are zeros', async () => {
        const [lq, lk] = [6, 9];
        const q = randomTensor([2, lq, 4], 33), k = randomTensor([2, lk, 4], 34), v = randomTensor([2, lk, 3], 35);
        for (const offset of [-8, -3, -1, 0, 2, 3, 8, 11]) {
          const mask = new Uint8Array(lq * lk).map((_, x) => (x % lk <= Math.floor(x / lk) + offset ? 1 : 0));
          const a = await attn.scaledDotProductAttention(q, k, v, { isCausal: { offset }, returnWeights: true });
          const b = await attn.scaledDotProductAttention(q, k, v, { attnMask: { data: mask, shape: [lq, lk] }, returnWeights: true });
          expect(a.output.data, `offset ${offset}`).toEqual(b.output.data);
          expect(a.weights!.data, `offset ${offset} weights`).toEqual(b.weights!.data);
          for (let bi = 0; bi < 2; bi++) {
            for (let i = 0; i < Math.min(lq, -offset); i++) {
              expect([...a.output.data.subarray((bi * lq + i) * 3, (bi * lq + i + 1) * 3)], `offset ${offset} row ${i}`).toEqual([0, 0, 0]);
            }
          }
        }
      });

      it('isCausal with attnMask composes them: a key must pass both, an additive mask adds (no longer a TypeError)', async () => {
        const [lq, lk] = [7, 10];
        const q = randomTensor([2, lq, 8], 36), k = randomTensor([2, lk, 8], 37), v = randomTensor([2, lk, 4], 38);
        const masks = randomMasks([2, lq, lk], 39);
        for (const [isCausal, offset] of [[true, 0], ['top-left', 0], ['bottom-right', lk - lq], [{ offset: -2 }, -2], [{ offset: 4 }, 4]] as const) {
          const causal = (x: number) => x % lk <= Math.floor(x / lk) % lq + offset;
          const bool = { data: (masks.bool.data as Uint8Array).map((m, x) => (m && causal(x) ? 1 : 0)), shape: masks.bool.shape };
          const additive = { data: (masks.additive.data as Float32Array).map((m, x) => (causal(x) ? m : -Infinity)), shape: masks.additive.shape };
          for (const [kind, composed, explicit] of [['bool', masks.bool, bool], ['additive', masks.additive, additive]] as const) {
            const label = `${JSON.stringify(isCausal)} + ${kind} mask`;
            const a = await attn.scaledDotProductAttention(q, k, v, { isCausal, attnMask: composed, returnWeights: true });
            const b = await attn.scaledDotProductAttention(q, k, v, { attnMask: explicit, returnWeights: true });
            expect(a.output.data, label).toEqual(b.output.data);
            expect(a.weights!.data, label).toEqual(b.weights!.data);
            await check(q, k, v, { isCausal, attnMask: composed, returnWeights: true }, label);
          }
        }
      });

      it('isCausal.offset must be an integer: RangeError or TypeError naming it, and the heap is untouched', async () => {
        const q = randomTensor([3, 4], 1), k = randomTensor([5, 4], 2), v = randomTensor([5, 2], 3);
        await attn.scaledDotProductAttention(q, k, v, { isCausal: { offset: 1 } });
        const heapBefore = attn.memoryStats().heapBytesInUse;
        const bad: [unknown, typeof TypeError | typeof RangeError, RegExp][] = [
          [{ offset: 1.5 }, RangeError, /isCausal\.offset must be an integer; got 1\.5/],
          [{ offset: NaN }, RangeError, /isCausal\.offset must be an integer; got NaN/],
          [{ offset: Infinity }, RangeError, /isCausal\.offset/],
          [{ offset: '3' }, TypeError, /isCausal\.offset must be an integer number; got string 3/],
          [{ offset: null }, TypeError, /isCausal\.offset/],
          [{}, TypeError, /isCausal must be .*\{ offset: n \}/],
          [{ offest: 3 }, TypeError, /unknown option 'offest' of isCausal; did you mean 'offset'\?/],
          [{ offset: 3, ofset: 1 }, TypeError, /unknown option 'ofset' of isCausal/],
        ];
        for (const [isCausal, type, message] of bad) {
          const error = await attn.scaledDotProductAttention(q, k, v, { isCausal: isCausal as never }).then(() => undefined, (e: unknown) => e);
          expect(error, JSON.stringify(isCausal)).toBeInstanceOf(type);
          expect((error as Error).message).toMatch(message);
        }
        expect(attn.memoryStats().heapBytesInUse).toBe(heapBefore);
        // Offsets far beyond the lengths, up to ±2^53 and beyond, are valid: every key or none.
        const all = await attn.scaledDotProductAttention(q, k, v);
        for (const offset of [2 ** 53, 1e300]) expect((await attn.scaledDotProductAttention(q, k, v, { isCausal: { offset } })).output.data).toEqual(all.output.data);
        for (const offset of [-(2 ** 53), -1e300]) expect((await attn.scaledDotProductAttention(q, k, v, { isCausal: { offset } })).output.data.every((x) => x === 0)).toBe(true);
      });
    });

    // Softcap: score ← c·tanh(score / c) after the scale, before masks and causality.
    describe(`softcap on the '${backend}' backend`, () => {
      // The sync API is the CPU backends' (a 'webgpu' instance throws on it).
      if (backend !== 'webgpu') it('a sync call after one of the same shapes with other options runs with its own options', async () => {
        // The sync path reuses the last plan (sizes, validation) for an equal request; each call still runs its own options.
        const q = randomTensor([2, 20, 8], 71, -4, 4), k = randomTensor([2, 30, 8], 72, -4, 4), v = randomTensor([2, 30, 4], 73);
        const variants: AttentionOptions[] = [{}, { softcap: 5 }, { softcap: 0.5 }, { isCausal: { offset: 3 } }, { isCausal: { offset: -2 } }, { scale: 0.5 }];
        for (const options of variants) {
          const sync = attn.scaledDotProductAttentionSync(q, k, v, options).output.data;
          expect(sync, JSON.stringify(options)).toEqual((await attn.scaledDotProductAttention(q, k, v, options)).output.data);
        }
        const distinct = new Set(variants.map((o) => attn.scaledDotProductAttentionSync(q, k, v, o).output.data.join()));
        expect(distinct.size).toBe(variants.length);
      });

      it('softcap 0.5, 5 and 50 alone, with a bool or additive mask and with causal offsets, across the tiles', async () => {
        for (const [lq, lk] of [[33, 65], [70, 130]]) {
          const q = randomTensor([2, lq, 16], lq + 3, -4, 4), k = randomTensor([2, lk, 16], lk + 4, -4, 4), v = randomTensor([2, lk, 8], lk + 5);
          const masks = randomMasks([2, lq, lk], lq + lk + 1);
          for (const softcap of [0.5, 5, 50]) {
            const label = `softcap ${softcap} ${lq}x${lk}`;
            await check(q, k, v, { softcap, returnWeights: true }, label);
            await check(q, k, v, { softcap, attnMask: masks.bool, returnWeights: softcap === 5 }, `${label} + bool mask`);
            await check(q, k, v, { softcap, attnMask: masks.additive }, `${label} + additive mask`);
            for (const offset of [-3, 31, lk - lq]) {
              await check(q, k, v, { softcap, isCausal: { offset }, returnWeights: offset === 31 }, `${label} + offset ${offset}`);
            }
            await check(q, k, v, { softcap, isCausal: true, attnMask: masks.additive, returnWeights: true }, `${label} + causal + additive mask`);
          }
        }
      });

      it('logits of 1e4 are capped: finite, and as the reference', async () => {
        const big = { data: new Float32Array(50).map((_, j) => 100 - j / 10), shape: [50, 1] };
        const q100 = { data: new Float32Array(20).fill(100), shape: [20, 1] };
        const v = randomTensor([50, 3], 61);
        for (const softcap of [0.5, 5, 50]) {
          const r = await attn.scaledDotProductAttention(q100, big, v, { scale: 1, softcap, returnWeights: true });
          expect(r.output.data.every(Number.isFinite)).toBe(true);
          await check(q100, big, v, { scale: 1, softcap, returnWeights: true }, `logits 1e4, softcap ${softcap}`);
        }
      });

      it('softcap 0 is off, bit for bit', async () => {
        const q = randomTensor([2, 9, 8], 62), k = randomTensor([2, 11, 8], 63), v = randomTensor([2, 11, 4], 64);
        const plain = await attn.scaledDotProductAttention(q, k, v, { returnWeights: true });
        const zero = await attn.scaledDotProductAttention(q, k, v, { softcap: 0, returnWeights: true });
        expect(zero.output.data).toEqual(plain.output.data);
        expect(zero.weights!.data).toEqual(plain.weights!.data);
      });

      it('bad softcaps are a RangeError or TypeError naming softcap, and the heap is untouched', async () => {
        const q = randomTensor([3, 4], 1), k = randomTensor([5, 4], 2), v = randomTensor([5, 2], 3);
        await attn.scaledDotProductAttention(q, k, v, { softcap: 2 });
        const heapBefore = attn.memoryStats().heapBytesInUse;
        const bad: [unknown, typeof TypeError | typeof RangeError][] = [
          [-1, RangeError], [-0.5, RangeError], [NaN, RangeError], [Infinity, RangeError], [-Infinity, RangeError],
          [1e39, RangeError], [1e-50, RangeError], ['5', TypeError], [null, TypeError], [true, TypeError], [5n, TypeError],
        ];
        for (const [softcap, type] of bad) {
          const error = await attn.scaledDotProductAttention(q, k, v, { softcap: softcap as never }).then(() => undefined, (e: unknown) => e);
          expect(error, String(softcap)).toBeInstanceOf(type);
          expect((error as Error).message).toMatch(/softcap/);
        }
        expect(attn.memoryStats().heapBytesInUse).toBe(heapBefore);
      });
    });

    describe(`variants on the '${backend}' backend`, () => {
      const [B, H, Lq, Lk] = [2, 4, 40, 150];
      const q = randomTensor([B, H, Lq, 16], 70, -2, 2), k = randomTensor([B, H, Lk, 16], 71, -2, 2), v = randomTensor([B, H, Lk, 8], 72);
      /** Document ids: runs of `length` positions, `B × L`. */
      const runs = (L: number, length: number, shift = 0) => ({ data: new Int32Array(B * L).map((_, x) => Math.floor(((x % L) + shift) / length)), shape: [B, L] });

      it('windows of 0, 1, tile − 1, tile, tile + 1 and beyond Lk, each side and both, alone, causal and with offsets', async () => {
        let c = 0;
        for (const w of [0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 200]) {
          for (const window of [{ left: w }, { right: w }, { left: w, right: w }]) {
            const isCausal = ([false, true, 'bottom-right', { offset: -5 }, { offset: Lk + 2 }] as const)[c % 5];
            await check(q, k, v, { window, isCausal, returnWeights: c % 3 === 0 }, `window ${JSON.stringify(window)} causal ${JSON.stringify(isCausal)}`);
            c++;
          }
        }
      });

      it('keyLengths of 0, 1, Lk − 1 and Lk, bottom-right aligned per batch, with windows and masks', async () => {
        const { bool } = randomMasks([B, 1, Lq, Lk], 73);
        for (const lengths of [[0, Lk], [1, Lk - 1], [Lk, 64], [33, 0]]) {
          const keyLengths = new Int32Array(lengths);
          for (const extra of [{}, { isCausal: 'bottom-right' as const }, { isCausal: true }, { window: { left: 8 } }, { attnMask: bool, isCausal: 'bottom-right' as const }]) {
            await check(q, k, v, { keyLengths, ...extra, returnWeights: true }, `keyLengths [${lengths}] ${JSON.stringify(Object.keys(extra))}`);
          }
        }
        // 'bottom-right' aligns each batch's queries to its own last valid key: the last query row
        // of a batch with keyLengths n sees exactly the keys j < n.
        const r = await attn.scaledDotProductAttention(q, k, v, { keyLengths: new Int32Array([100, 41]), isCausal: 'bottom-right', returnWeights: true });
        const w = r.weights!.data;
        for (const [b, n] of [[0, 100], [1, 41]] as const) {
          const row = w.subarray(((b * H) * Lq + Lq - 1) * Lk, ((b * H) * Lq + Lq) * Lk);
          expect(row.subarray(0, n).every((x) => x > 0)).toBe(true);
          expect(row.subarray(n).every((x) => x === 0)).toBe(true);
        }
      });

      it("ALiBi: alibi: true is BLOOM's slopes for H a power of two and not; custom slopes; with causal and softcap", async () => {
        // Press et al. / BLOOM, computed here independently of the package.
        const bloom = (n: number): number[] => {
          const pow2 = (m: number) => Array.from({ length: m }, (_, h) => 2 ** (-8 * (h + 1) / m));
          const p = 2 ** Math.floor(Math.log2(n));
          return p === n ? pow2(n) : [...pow2(p), ...bloom(2 * p).filter((_, i) => i % 2 === 0).slice(0, n - p)];
        };
        for (const heads of [4, 6]) {
          const qh = randomTensor([1, heads, 20, 8], 74), kh = randomTensor([1, heads, 70, 8], 75), vh = randomTensor([1, heads, 70, 4], 76);
          const standard = await attn.scaledDotProductAttention(qh, kh, vh, { alibi: true, isCausal: 'bottom-right' });
          const given = await attn.scaledDotProductAttention(qh, kh, vh, { alibiSlopes: new Float32Array(bloom(heads)), isCausal: 'bottom-right' });
          expect(standard.output.data, `H = ${heads}`).toEqual(given.output.data);
          await check(qh, kh, vh, { alibi: true, returnWeights: true }, `alibi H = ${heads}`);
        }
        await check(q, k, v, { alibiSlopes: new Float32Array([1, 0.5, 0, -0.25]), isCausal: true, softcap: 3, returnWeights: true }, 'custom slopes');
      });

      it('sinks of −Infinity, 0 and 1e4: weights sum to less than 1; rows that see no key are zeros', async () => {
        for (const sinks of [[-Infinity, -Infinity, -Infinity, -Infinity], [0, 0.5, -1, 2], [1e4, 0, -Infinity, 3]]) {
          for (const extra of [{}, { isCausal: { offset: -3 } }, { window: { left: 2 }, isCausal: true }]) {
            await check(q, k, v, { sinks: new Float32Array(sinks), ...extra, returnWeights: true }, `sinks [${sinks}] ${JSON.stringify(extra)}`);
          }
        }
        const r = await attn.scaledDotProductAttention(q, k, v, { sinks: new Float32Array([0, 0, 0, 0]), isCausal: { offset: -3 }, returnWeights: true });
        for (let row = 0; row < Lq; row++) {
          const w = r.weights!.data.subarray(row * Lk, (row + 1) * Lk);
          const sum = w.reduce((a, x) => a + x, 0);
          if (row < 3) {
            expect(sum, `row ${row} sees no key`).toBe(0);
            expect(Array.from(r.output.data.subarray(row * 8, row * 8 + 8))).toEqual(new Array(8).fill(0));
          } else {
            expect(sum, `row ${row}`).toBeLessThan(1);
          }
        }
      });

      it('document ids: one document, one key per document, unsorted ids, with causal and GQA', async () => {
        const one = { queryDocuments: runs(Lq, 1e9), keyDocuments: runs(Lk, 1e9) };
        const plainResult = await attn.scaledDotProductAttention(q, k, v, { isCausal: true });
        expect((await attn.scaledDotProductAttention(q, k, v, { isCausal: true, ...one })).output.data).toEqual(plainResult.output.data);
        await check(q, k, v, { queryDocuments: runs(Lq, 1), keyDocuments: runs(Lk, 1), returnWeights: true }, 'one key per document');
        await check(q, k, v, { queryDocuments: runs(Lq, 10), keyDocuments: runs(Lk, 37), isCausal: 'bottom-right', returnWeights: true }, 'packed');
        const shuffled = (L: number, seed: number) => { const next = rng(seed); return { data: new Int32Array(B * L).map(() => Math.floor(next() * 3)), shape: [B, L] }; };
        await check(q, k, v, { queryDocuments: shuffled(Lq, 77), keyDocuments: shuffled(Lk, 78), returnWeights: true }, 'unsorted ids');
        const kv2 = { k: randomTensor([B, 2, Lk, 16], 79), v: randomTensor([B, 2, Lk, 8], 80) };
        await check(q, kv2.k, kv2.v, { enableGqa: true, queryDocuments: runs(Lq, 16), keyDocuments: runs(Lk, 64), isCausal: 'bottom-right' }, 'GQA');
      });

      it('every variant at once, with GQA, logits of 1e4 and a mask; each score stage', async () => {
        const big = { data: k.data.map((x) => x * 300), shape: k.shape };
        const { additive } = randomMasks([B, H, Lq, Lk], 81);
        const kv2 = { k: randomTensor([B, 2, Lk, 16], 82, -2, 2), v: randomTensor([B, 2, Lk, 8], 83) };
        const all: AttentionOptions = {
          isCausal: 'bottom-right', softcap: 20, window: { left: 70, right: 2 }, alibi: true, sinks: new Float32Array([0, 1, -2, 5]),
          keyLengths: new Int32Array([140, 90]), queryDocuments: runs(Lq, 25), keyDocuments: runs(Lk, 60, 10),
        };
        await check(q, big, v, { ...all, attnMask: additive, returnWeights: true }, 'all, logits 1e4');
        await check(q, kv2.k, kv2.v, { ...all, enableGqa: true, returnWeights: true }, 'all, GQA');
        for (const returnScores of ['scaled', 'softcapped', 'masked'] as const) {
          await check(q, big, v, { ...all, attnMask: additive, returnScores }, `scores ${returnScores}`);
          await check(q, k, v, { isCausal: true, returnScores }, `scores ${returnScores}, causal`);
        }
      });

      it('NaN and Inf outside the window, past the key length and in other documents are never read', async () => {
        const poisoned = { data: v.data.slice(), shape: v.shape };
        const keysPoisoned = { data: k.data.slice(), shape: k.shape };
        // Keys 120… of every head: hidden below by keyLengths 120, by the window, or by documents.
        for (let bh = 0; bh < B * H; bh++) {
          for (let j = 120; j < Lk; j++) {
            poisoned.data.fill(NaN, (bh * Lk + j) * 8, (bh * Lk + j + 1) * 8);
            keysPoisoned.data.fill(Infinity, (bh * Lk + j) * 16, (bh * Lk + j + 1) * 16);
          }
        }
        const ids = { data: new Int32Array(B * Lk).map((_, x) => (x % Lk >= 120 ? 1 : 0)), shape: [B, Lk] };
        for (const options of [
          { keyLengths: new Int32Array([120, 120]) },
          { window: { left: 30, right: 0 }, isCausal: { offset: 80 } },
          { queryDocuments: { data: new Int32Array(B * Lq), shape: [B, Lq] }, keyDocuments: ids },
        ] as AttentionOptions[]) {
          const r = await attn.scaledDotProductAttention(q, keysPoisoned, poisoned, options);
          expect(r.output.data.every(Number.isFinite), JSON.stringify(Object.keys(options))).toBe(true);
          await check(q, keysPoisoned, poisoned, options, `poisoned ${Object.keys(options)}`);
        }
      });

      it('bad values are a TypeError or RangeError naming the option, before anything is allocated', async () => {
        await attn.scaledDotProductAttention(q, k, v, { window: { left: 3 } });
        const heapBefore = attn.memoryStats().heapBytesInUse;
        const bad: [AttentionOptions, typeof TypeError | typeof RangeError, RegExp][] = [
          [{ window: { left: -1 } }, RangeError, /window\.left/],
          [{ window: { right: 1.5 } }, RangeError, /window\.right/],
          [{ window: { lef: 3 } as never }, TypeError, /unknown option 'lef' of window; did you mean 'left'/],
          [{ window: 3 as never }, TypeError, /window/],
          [{ keyLengths: new Int32Array([1]) }, RangeError, /keyLengths must hold one length per batch: 2/],
          [{ keyLengths: new Int32Array([1, Lk + 1]) }, RangeError, /keyLengths\[1\] must be an integer in \[0, Lk = 150\]/],
          [{ keyLengths: new Int32Array([-1, 3]) }, RangeError, /keyLengths\[0\]/],
          [{ keyLengths: [1, 2] as never }, TypeError, /keyLengths must be an Int32Array/],
          [{ alibiSlopes: new Float32Array(3) }, RangeError, /alibiSlopes must hold one value per query head: 4/],
          [{ alibiSlopes: new Float32Array([1, NaN, 0, 0]) }, RangeError, /alibiSlopes\[1\]/],
          [{ alibi: true, alibiSlopes: new Float32Array(4) }, TypeError, /alibi: true .* or alibiSlopes/],
          [{ alibi: 1 as never }, TypeError, /alibi/],
          [{ sinks: new Float32Array(5) }, RangeError, /sinks must hold one value per query head: 4/],
          [{ sinks: new Float32Array([0, NaN, 0, 0]) }, RangeError, /sinks\[1\]/],
          [{ sinks: new Float32Array([0, 0, Infinity, 0]) }, RangeError, /sinks\[2\]/],
          [{ sinks: new Float64Array(4) as never }, TypeError, /sinks must be a Float32Array/],
          [{ queryDocuments: runs(Lq, 4) }, TypeError, /queryDocuments and keyDocuments go together/],
          [{ queryDocuments: runs(Lq, 4), keyDocuments: { data: new Int32Array(Lk), shape: [1, Lk] } }, RangeError, /keyDocuments must have shape \[B, Lk\] = \[2, 150\]/],
          [{ queryDocuments: { data: new Float32Array(B * Lq), shape: [B, Lq] } as never, keyDocuments: runs(Lk, 4) }, TypeError, /queryDocuments\.data must be an Int32Array/],
          [{ queryDocuments: { data: new Int32Array(3), shape: [B, Lq] }, keyDocuments: runs(Lk, 4) }, RangeError, /queryDocuments\.data has 3 elements/],
          [{ returnScores: 'logits' as never }, TypeError, /returnScores must be 'scaled', 'softcapped' or 'masked'/],
        ];
        for (const [options, type, message] of bad) {
          const error = await attn.scaledDotProductAttention(q, k, v, options).then(() => undefined, (e: unknown) => e);
          expect(error, JSON.stringify(Object.keys(options))).toBeInstanceOf(type);
          expect((error as Error).message).toMatch(message);
        }
        expect(attn.memoryStats().heapBytesInUse).toBe(heapBefore);
        await check(q, k, v, { window: { left: 3 } }, 'after errors');
      });
    });
  });
}
