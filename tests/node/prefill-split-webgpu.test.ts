// The prefill key split (webgpu_flash_key_splits in cpp/webgpu/plan.cpp): where the flash grid is
// small and the keys long, the flash kernels take one split of the keys per workgroup and write
// partial records that attention_decode_merge.wgsl combines. gpuLimits.prefillSplitKeys lowers
// the fewest keys a split holds (512) so that these small calls split too (into 2 to 19 splits of
// 1- to 64-key tiles). Every case runs the tiled kernel (E ≤ 128) or the per-row kernel (E > 128,
// or a 64-invocation cap) in split mode, checked against the float64 reference: masks (bool,
// additive, broadcast), causal alignments and offsets (rows and whole splits that see nothing),
// windows, softcap, ALiBi, sinks, documents, key lengths, GQA, log-sum-exp, NaN rows, Inf values
// behind hidden keys, float16 inputs, GPU-resident inputs and outputs, a KV cache read through
// its head strides; and two calls give the same bits. The backward's own forward (no saved output
// and log-sum-exp) splits the same way: its gradients meet the backward's rule.
import { describe, expect, it } from 'vitest';
import { createAttention, type Attention, type AttentionOptions, type BackwardOptions, type Float16Tensor, type GpuTensor, type Tensor } from 'sdpa-web';
import { expectGradientsMatch, GRADS } from './support/backward-suite.js';
import { expectFloat16ResultOf, randomHalf } from './support/float16-suite.js';
import { concatLengths, randomMasks, randomTensor } from './support/tensors.js';
import { expectResultMatchesReference } from './support/tolerance.js';
import { withDeviceAndOracle } from './support/webgpu.js';

const FACTOR = 4;
const STORAGE = 0x80, COPY_SRC = 0x4, COPY_DST = 0x8, MAP_READ = 0x1;

let device: GPUDevice;
let oracle: Attention;
withDeviceAndOracle({ maxComputeWorkgroupStorageSize: 32768 }, (d, o) => ([device, oracle] = [d, o]));

async function instance(caps: Record<string, number> = {}): Promise<Attention> {
  return createAttention({ backend: 'webgpu', gpuDevice: device, gpuLimits: { prefillSplitKeys: 16, ...caps } });
}

/** The flash pipelines an instance compiled in split mode, and whether the merge ran. */
function splitKernels(attn: Attention): { split: string[]; merge: boolean } {
  const keys = attn.webgpuInfo()!.pipelines;
  return { split: keys.filter((key) => key.startsWith('flash') && key.includes(':split')), merge: keys.some((key) => key.startsWith('decode-merge')) };
}

type Case = [label: string, q: number[], k: number[], v: number[], options: AttentionOptions];
const masks = randomMasks([1, 2, 40, 300], 5);
const broadcastMasks = randomMasks([1, 1, 40, 300], 6);
const keyDocuments = new Int32Array(300).map((_, j) => (j < 70 ? 0 : j < 250 ? 1 : 2));
const CASES: Case[] = [
  ['plain', [1, 2, 40, 16], [1, 2, 300, 16], [1, 2, 300, 16], {}],
  ['causal top-left, square (rows and splits that see nothing of a split)', [1, 1, 200, 32], [1, 1, 200, 32], [1, 1, 200, 32], { isCausal: true, returnLogSumExp: true }],
  ['causal bottom-right, log-sum-exp', [1, 2, 40, 16], [1, 2, 300, 16], [1, 2, 300, 16], { isCausal: 'bottom-right', returnLogSumExp: true }],
  ['causal offset −30 (rows that see no key)', [1, 2, 40, 16], [1, 2, 300, 16], [1, 2, 300, 16], { isCausal: { offset: -30 }, returnLogSumExp: true }],
  ['window, softcap, ALiBi, sinks', [1, 2, 40, 32], [1, 2, 300, 32], [1, 2, 300, 32], {
    window: { left: 90, right: 5 }, softcap: 3, alibiSlopes: new Float32Array([0.05, 0.2]), sinks: new Float32Array([1, -0.5]), returnLogSumExp: true,
  }],
  ['key lengths (one empty), sinks', [2, 2, 24, 16], [2, 2, 300, 16], [2, 2, 300, 16], { keyLengths: new Int32Array([0, 201]), sinks: new Float32Array([0.5, -2]), returnLogSumExp: true }],
  ['bool mask', [1, 2, 40, 24], [1, 2, 300, 24], [1, 2, 300, 24], { attnMask: masks.bool }],
  ['additive mask, log-sum-exp', [1, 2, 40, 24], [1, 2, 300, 24], [1, 2, 300, 24], { attnMask: masks.additive, returnLogSumExp: true }],
  ['broadcast bool mask and causal', [1, 2, 40, 24], [1, 2, 300, 24], [1, 2, 300, 24], { attnMask: broadcastMasks.bool, isCausal: 'bottom-right' }],
  ['broadcast additive mask', [1, 2, 40, 24], [1, 2, 300, 24], [1, 2, 300, 24], { attnMask: broadcastMasks.additive }],
  ['GQA 2 per KV head, odd dims', [1, 4, 24, 13], [1, 2, 300, 13], [1, 2, 300, 7], { enableGqa: true, isCausal: 'bottom-right', returnLogSumExp: true }],
  ['documents', [1, 2, 40, 16], [1, 2, 300, 16], [1, 2, 300, 16], {
    queryDocuments: { data: new Int32Array(40).map((_, i) => (i < 10 ? 0 : i < 30 ? 1 : 2)), shape: [1, 40] },
    keyDocuments: { data: keyDocuments, shape: [1, 300] },
  }],
  ['E = 160: the per-row kernel', [1, 1, 20, 160], [1, 1, 300, 160], [1, 1, 300, 160], { isCausal: 'bottom-right', returnLogSumExp: true }],
];

describe('the prefill key split', () => {
  it.each([
    // 32 KiB: the tiled kernel, 64-key tiles at E ≤ 32 (16 rows), 5 splits of 300 keys; E = 160 the per-row kernel.
    ['the tiled kernel', {}, CASES],
    // 2 KiB: the per-row kernel everywhere, in tiles of 1 to 16 keys (up to 19 splits).
    ['the per-row kernel', { maxComputeWorkgroupStorageSize: 2048 }, CASES.filter((_, i) => [1, 3, 4, 5, 8, 9, 10, 11].includes(i))],
  ] as [string, Record<string, number>, Case[]][])('every variant on %s matches the float64 reference, through the merge', async (_, caps, cases) => {
    const attn = await instance(caps);
    let seed = 1;
    for (const [label, qs, ks, vs, options] of cases) {
      const q = randomTensor(qs, seed++), k = randomTensor(ks, seed++), v = randomTensor(vs, seed++);
      expectResultMatchesReference(await attn.scaledDotProductAttention(q, k, v, options), oracle, q, k, v, options, FACTOR, label);
    }
    const { split, merge } = splitKernels(attn);
    expect(merge).toBe(true);
    expect(split.some((key) => key.startsWith('flash-tiled:'))).toBe(caps.maxComputeWorkgroupStorageSize === undefined);
    expect(split.some((key) => key.startsWith('flash:'))).toBe(true);
    attn.dispose();
  });

  it('the records buffer the instance reuses: after a call whose every record is NaN, each split call writes every record its merge reads', async () => {
    // Key-split prefills (rows and whole splits that see nothing, an empty batch) and
    // flash-decoding steps (Lq ≤ 8 over 600 keys), each right after the same call on a NaN query.
    const attn = await instance();
    const cases: Case[] = [
      ...CASES.filter((_, i) => [0, 1, 3, 5].includes(i)),
      ['flash-decoding, GQA', [1, 4, 1, 16], [1, 2, 600, 16], [1, 2, 600, 16], { enableGqa: true, isCausal: 'bottom-right' }],
      ['flash-decoding, 3 rows, key lengths', [2, 2, 3, 16], [2, 2, 600, 16], [2, 2, 600, 16], { keyLengths: new Int32Array([450, 600]), isCausal: 'bottom-right' }],
    ];
    let seed = 100;
    for (const [label, qs, ks, vs, options] of cases) {
      const q = randomTensor(qs, seed++), k = randomTensor(ks, seed++), v = randomTensor(vs, seed++);
      const nan = await attn.scaledDotProductAttention({ data: new Float32Array(q.data.length).fill(Number.NaN), shape: q.shape }, k, v, options);
      expect(Array.from(nan.output.data).some(Number.isNaN), label).toBe(true);
      expectResultMatchesReference(await attn.scaledDotProductAttention(q, k, v, options), oracle, q, k, v, options, FACTOR, label);
    }
    expect(attn.webgpuInfo()!.pipelines.some((key) => key.startsWith('decode-'))).toBe(true);
    expect(splitKernels(attn).split.length).toBeGreaterThan(0);
    attn.dispose();
  });

  it('the default (512 keys a split) keeps these calls in one pass; weights, scores and decode-sized calls never split', async () => {
    const plain = await createAttention({ backend: 'webgpu', gpuDevice: device });
    const q = randomTensor([1, 2, 40, 16], 1), k = randomTensor([1, 2, 300, 16], 2), v = randomTensor([1, 2, 300, 16], 3);
    expectResultMatchesReference(await plain.scaledDotProductAttention(q, k, v, {}), oracle, q, k, v, {}, FACTOR, 'default');
    expect(splitKernels(plain)).toEqual({ split: [], merge: false });
    plain.dispose();
    const attn = await instance();
    const weights: AttentionOptions = { returnWeights: true, returnScores: 'masked', isCausal: true };
    expectResultMatchesReference(await attn.scaledDotProductAttention(q, k, v, weights), oracle, q, k, v, weights, FACTOR, 'weights');
    expect(splitKernels(attn).split).toEqual([]);
    attn.dispose();
  });

  it('NaN rows where a visible score is NaN; Inf values behind hidden keys are never read; zeros where nothing is seen', async () => {
    const attn = await instance();
    const q = randomTensor([1, 2, 24, 16], 4), k = randomTensor([1, 2, 300, 16], 5), v = randomTensor([1, 2, 300, 16], 6);
    k.data[(300 + 200) * 16] = Number.NaN; // head 1, key 200 (in the fourth 64-key split): every row of head 1 is NaN
    v.data.fill(Number.POSITIVE_INFINITY, 280 * 16, 300 * 16); // head 0, keys 280…299: hidden by the key length
    const options: AttentionOptions = { keyLengths: new Int32Array([280]) };
    const { output } = await attn.scaledDotProductAttention(q, k, v, options);
    expect(Array.from(output.data.subarray(0, 24 * 16)).every(Number.isFinite)).toBe(true);
    expect(Array.from(output.data.subarray(24 * 16)).every(Number.isNaN)).toBe(true);
    expectResultMatchesReference({ output } as never, oracle, q, k, v, options, FACTOR, 'NaN and hidden Inf');
    // An offset below −Lq: no row sees a key (zeros, log-sum-exp −∞) in any split.
    const none: AttentionOptions = { isCausal: { offset: -40 }, returnLogSumExp: true };
    const nothing = await attn.scaledDotProductAttention(q, k, v, none);
    expect(Array.from(nothing.output.data).every((x) => x === 0)).toBe(true);
    expect(Array.from(nothing.logSumExp!.data).every((x) => x === Number.NEGATIVE_INFINITY)).toBe(true);
    expect(splitKernels(attn).split.length).toBeGreaterThan(0);
    attn.dispose();
  });

  it('calls cut into chunks of rows (a binding of 128 KiB): each chunk\'s records, row offsets and causal rows', async () => {
    const attn = await instance({ maxStorageBufferBindingSize: 131072, maxBufferSize: 131072 });
    const q = randomTensor([1, 1, 400, 128], 20), k = randomTensor([1, 1, 200, 128], 21), v = randomTensor([1, 1, 200, 4], 22);
    for (const options of [{ returnLogSumExp: true }, { isCausal: 'bottom-right', returnLogSumExp: true }] as AttentionOptions[]) {
      expectResultMatchesReference(await attn.scaledDotProductAttention(q, k, v, options), oracle, q, k, v, options, FACTOR, `chunks ${JSON.stringify(options)}`);
    }
    expect(splitKernels(attn).split.length).toBeGreaterThan(0);
    attn.dispose();
  });

  it('two calls give the same bits', async () => {
    const attn = await instance({ maxComputeWorkgroupStorageSize: 8192 });
    const q = randomTensor([1, 2, 40, 32], 7), k = randomTensor([1, 2, 300, 32], 8), v = randomTensor([1, 2, 300, 32], 9);
    const options: AttentionOptions = { isCausal: 'bottom-right', sinks: new Float32Array([0.3, 1]), returnLogSumExp: true };
    const first = await attn.scaledDotProductAttention(q, k, v, options);
    const second = await attn.scaledDotProductAttention(q, k, v, options);
    expect(new Uint32Array(second.output.data.buffer)).toEqual(new Uint32Array(first.output.data.buffer));
    expect(new Uint32Array(second.logSumExp!.data.buffer)).toEqual(new Uint32Array(first.logSumExp!.data.buffer));
    expect(splitKernels(attn).split.length).toBeGreaterThan(0);
    attn.dispose();
  });

  it('float16 inputs', async () => {
    const attn = await instance();
    let seed = 40;
    for (const [label, qs, ks, vs, options] of [CASES[0]!, CASES[2]!, CASES[10]!, CASES[12]!]) {
      const q = randomHalf(qs, seed++), k = randomHalf(ks, seed++), v = randomHalf(vs, seed++);
      const { output } = await attn.scaledDotProductAttention(q.half, k.half, v.half, options);
      expectFloat16ResultOf(oracle, FACTOR, output as Float16Tensor, q.float, k.float, v.float, options, [q.half, k.half, v.half], `float16 ${label}`);
    }
    expect(splitKernels(attn).split.some((key) => key.includes(':q=f16'))).toBe(true);
    attn.dispose();
  });

  it('GPU-resident inputs and output', async () => {
    const attn = await instance();
    const q = randomTensor([1, 2, 40, 16], 50), k = randomTensor([1, 2, 300, 16], 51), v = randomTensor([1, 2, 300, 16], 52);
    const toGpu = (t: Tensor): GpuTensor => {
      const buffer = device.createBuffer({ size: t.data.byteLength, usage: STORAGE | COPY_DST });
      device.queue.writeBuffer(buffer, 0, t.data as Float32Array<ArrayBuffer>);
      return { buffer, shape: t.shape };
    };
    const inputs = [toGpu(q), toGpu(k), toGpu(v)] as const;
    const out = device.createBuffer({ size: 40 * 2 * 16 * 4, usage: STORAGE | COPY_SRC | COPY_DST });
    const options: AttentionOptions = { isCausal: 'bottom-right' };
    await attn.scaledDotProductAttention(inputs[0], inputs[1], inputs[2], { ...options, outputLocation: 'gpu', out });
    const staging = device.createBuffer({ size: out.size, usage: MAP_READ | COPY_DST });
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(out, 0, staging, 0, out.size);
    device.queue.submit([encoder.finish()]);
    await staging.mapAsync(MAP_READ);
    const output: Tensor = { data: new Float32Array(staging.getMappedRange().slice(0)), shape: [1, 2, 40, 16] };
    expectResultMatchesReference({ output } as never, oracle, q, k, v, options, FACTOR, 'GPU-resident');
    for (const b of [staging, out, ...inputs.map((t) => t.buffer)]) b.destroy();
    expect(splitKernels(attn).split.length).toBeGreaterThan(0);
    attn.dispose();
  });

  it('a KV cache read in place through its head strides (a prefill of 20 rows after 300 keys)', async () => {
    const attn = await instance();
    const [B, Hq, Hkv, E] = [1, 4, 2, 32];
    const cache = attn.createKvCache({ batch: B, kvHeads: Hkv, maxLength: 512, headDim: E });
    const keys = randomTensor([B, Hkv, 300, E], 60), values = randomTensor([B, Hkv, 300, E], 61);
    cache.append(keys, values);
    const moreKeys = randomTensor([B, Hkv, 20, E], 62), moreValues = randomTensor([B, Hkv, 20, E], 63);
    cache.append(moreKeys, moreValues);
    const q = randomTensor([B, Hq, 20, E], 64);
    const options: AttentionOptions = { enableGqa: true, isCausal: 'bottom-right', returnLogSumExp: true };
    const got = await attn.scaledDotProductAttention(q, cache, options);
    const k = concatLengths([keys.data, moreKeys.data], B, Hkv, E), v = concatLengths([values.data, moreValues.data], B, Hkv, E);
    expectResultMatchesReference(got, oracle, q, k, v, options, FACTOR, 'KV cache');
    expect(splitKernels(attn).split.length).toBeGreaterThan(0);
    cache.dispose();
    attn.dispose();
  });

  it("the backward's own forward splits its keys too: gradients within the backward's rule, the same bits twice and as from the saved split forward", async () => {
    const attn = await instance();
    const [lq, lk] = [40, 300];
    const q = randomTensor([2, 4, lq, 16], 70, -2, 2), k = randomTensor([2, 2, lk, 16], 71, -2, 2), v = randomTensor([2, 2, lk, 8], 72);
    const dOut = randomTensor([2, 4, lq, 8], 73);
    const ids = (L: number, n: number) => ({ data: new Int32Array(2 * L).map((_, x) => Math.floor((x % L) / n)), shape: [2, L] });
    const sinks = new Float32Array([0.5, -1, 0, 2]);
    const gqa = { enableGqa: true };
    const cases: [string, BackwardOptions][] = [
      // Rows 0…29 see no key; batch 1 sees 7 keys (its later splits are empty for every row).
      ['causal offset −30, key lengths, sinks', { ...gqa, isCausal: { offset: -30 }, keyLengths: new Int32Array([250, 7]), sinks }],
      ['window, documents, softcap, ALiBi', { ...gqa, window: { left: 90, right: 5 }, queryDocuments: ids(lq, 10), keyDocuments: ids(lk, 75), softcap: 3, alibi: true }],
    ];
    const names = (options: BackwardOptions) => [...GRADS, ...(options.sinks ? ['dSinks' as const] : [])];
    const firsts = [];
    for (const [label, options] of cases) {
      const first = await attn.scaledDotProductAttentionBackward(q, k, v, dOut, options);
      expectGradientsMatch(first, oracle.referenceAttentionBackward(q, k, v, dOut, options), oracle.scaledDotProductAttentionBackwardSync(q, k, v, dOut, options),
                           options, FACTOR, label);
      const again = await attn.scaledDotProductAttentionBackward(q, k, v, dOut, options);
      for (const name of names(options)) expect(again[name]!.data, `${label} ${name}: the same bits again`).toEqual(first[name]!.data);
      firsts.push(first);
    }
    // Only backward calls so far: their forwards compiled the split flash kernel and the merge.
    const { split, merge } = splitKernels(attn);
    expect(merge).toBe(true);
    expect(split.some((key) => key.startsWith('flash-tiled:') && key.includes(':lse=1'))).toBe(true);
    // That forward is the one scaledDotProductAttention runs (the same split and merge): given its
    // output and log-sum-exp, the backward gives the same bits.
    for (const [n, [label, options]] of cases.entries()) {
      const { output, logSumExp } = await attn.scaledDotProductAttention(q, k, v, { ...options, returnLogSumExp: true });
      const saved = await attn.scaledDotProductAttentionBackward(q, k, v, dOut, { ...options, output, logSumExp });
      for (const name of names(options)) expect(saved[name]!.data, `${label} ${name}: as from the saved forward`).toEqual(firsts[n]![name]!.data);
    }
    attn.dispose();
  });

  it('gpuLimits.prefillSplitKeys must be a positive integer', async () => {
    await expect(createAttention({ backend: 'webgpu', gpuDevice: device, gpuLimits: { prefillSplitKeys: 0 } })).rejects.toThrow(RangeError);
    await expect(createAttention({ backend: 'webgpu', gpuDevice: device, gpuLimits: { prefillSplitKeys: 2.5 } })).rejects.toThrow(/prefillSplitKeys must be a positive integer/);
    await expect(createAttention({ backend: 'webgpu', gpuDevice: device, gpuLimits: { prefillSplitKeys: '64' as never } })).rejects.toThrow(TypeError);
    const attn = await instance({ prefillSplitKeys: 64 });
    expect(attn.webgpuInfo()!.limits.prefillSplitKeys).toBe(64);
    attn.dispose();
  });
});
