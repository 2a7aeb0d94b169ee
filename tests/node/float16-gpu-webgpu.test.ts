// float16 on the 'webgpu' backend beyond the shared body (float16-webgpu.test.ts), on dawn.node +
// SwiftShader: every kernel (tiled, per-row, weights and score passes, split-K decode) on float16
// inputs with odd head dims (halves of a row straddling 4-byte words), calls cut into chunks,
// GPU-resident float16 inputs at offsets that are not word-aligned, float16 outputs on the GPU
// (rounded there, bit for bit as toFloat16 rounds on the CPU, neighbouring halves kept), the
// float16 GPU KV cache against one call on the concatenation, the unpack path forced with
// gpuLimits.shaderF16 = false, and the errors of bad float16 arguments.
// SwiftShader has no 'shader-f16': the test step webgpu_f16 runs this file again on lavapipe,
// where the f16-storage kernels run.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAttention,
  fromFloat16,
  toFloat16,
  type Attention,
  type AttentionOptions,
  type AttentionResult,
  type Float16Tensor,
  type GpuTensor,
  type Tensor,
} from 'sdpa-web';
import { expectFloat16ResultOf, randomHalf } from './support/float16-suite.js';
import { concatLengths, randomMasks } from './support/tensors.js';
import { expectResultMatchesReference } from './support/tolerance.js';
import { withDeviceAndOracle } from './support/webgpu.js';

const STORAGE = 0x80, COPY_SRC = 0x4, COPY_DST = 0x8, MAP_READ = 0x1;
const FACTOR = 4;

let device: GPUDevice;
let oracle: Attention;
withDeviceAndOracle({ maxComputeWorkgroupStorageSize: 32768 }, (d, o) => ([device, oracle] = [d, o]));

const FILL = 0xabcd; // what the bytes around a tensor in a test buffer hold

/** Halves (or floats) of `data` in a new buffer at byte `offset`, the rest of the buffer FILL. */
function toGpu(data: Uint16Array | Float32Array, shape: readonly number[], offset: number): GpuTensor {
  const size = Math.ceil((offset + data.byteLength) / 4) * 4 + 8;
  const bytes = new Uint16Array(size / 2).fill(FILL);
  new Uint8Array(bytes.buffer).set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), offset);
  const buffer = device.createBuffer({ size, usage: STORAGE | COPY_SRC | COPY_DST });
  device.queue.writeBuffer(buffer, 0, bytes);
  return { buffer, shape, offset, dtype: data instanceof Uint16Array ? 'float16' : 'float32' };
}

/** The whole of `buffer` as halves. */
async function halvesOf(buffer: GPUBuffer): Promise<Uint16Array> {
  const staging = device.createBuffer({ size: buffer.size, usage: MAP_READ | COPY_DST });
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(buffer, 0, staging, 0, buffer.size);
  device.queue.submit([encoder.finish()]);
  await staging.mapAsync(MAP_READ);
  const halves = new Uint16Array(staging.getMappedRange().slice(0));
  staging.destroy();
  return halves;
}

type Case = [string, number[], number[], number[], AttentionOptions];
const masks = randomMasks([1, 2, 20, 40], 9);
const CASES: Case[] = [
  ['odd dims over 90 keys', [1, 2, 70, 13], [1, 2, 90, 13], [1, 2, 90, 7], {}],
  ['GQA, causal, weights', [2, 4, 33, 16], [2, 2, 50, 16], [2, 2, 50, 9], { enableGqa: true, isCausal: true, returnWeights: true }],
  ['bool mask, window, scores', [1, 2, 20, 5], [1, 2, 40, 5], [1, 2, 40, 3], { attnMask: masks.bool, window: { left: 7, right: 2 }, returnScores: 'masked' }],
  ['additive mask, softcap, ALiBi, sinks', [1, 2, 20, 5], [1, 2, 40, 5], [1, 2, 40, 3], { attnMask: masks.additive, softcap: 5, alibi: true, sinks: new Float32Array([0.5, -1]) }],
  ['decode: split-K partials and merge, odd dims, GQA', [1, 4, 3, 11], [1, 2, 300, 11], [1, 2, 300, 5], { enableGqa: true, isCausal: 'bottom-right' }],
  ['head dim 150', [1, 1, 9, 150], [1, 1, 20, 150], [1, 1, 20, 3], {}],
];

/**
 * Each case on `attn`, float16 inputs from the CPU: the float32 output (the float32 rule on the
 * widened inputs, weights and scores too) and the float16 one (the float16 rule).
 */
async function checkCases(attn: Attention, label: string, cases: Case[] = CASES): Promise<void> {
  let seed = 1;
  for (const [what, qs, ks, vs, options] of cases) {
    const q = randomHalf(qs, seed++, -2, 2), k = randomHalf(ks, seed++, -2, 2), v = randomHalf(vs, seed++);
    const wide = await attn.scaledDotProductAttention(q.half, k.half, v.half, { ...options, outputDtype: 'float32' });
    expectResultMatchesReference(wide as AttentionResult, oracle, q.float, k.float, v.float, options, FACTOR, `${label}, ${what}, float32 output`);
    const narrow = await attn.scaledDotProductAttention(q.half, k.half, v.half, options);
    expectFloat16ResultOf(oracle, FACTOR, narrow.output as Float16Tensor, q.float, k.float, v.float, options, [q.half, k.half, v.half], `${label}, ${what}, float16 output`);
    // Mixed types: a float32 query over float16 keys/values.
    const mixed = await attn.scaledDotProductAttention(q.float, k.half, v.half, options);
    expectResultMatchesReference(mixed, oracle, q.float, k.float, v.float, options, FACTOR, `${label}, ${what}, float32 query`);
  }
}

describe('float16 kernels on webgpu (unpack2x16float on SwiftShader, f16 storage on lavapipe)', () => {
  it('every kernel: tiled, per-row, weights and score passes, split-K decode; webgpuInfo says which float16 path', async () => {
    const attn = await createAttention({ backend: 'webgpu', gpuDevice: device });
    const path = device.features.has('shader-f16') ? 'shader-f16' : 'unpack2x16float';
    // The webgpu_f16 test step runs this file on lavapipe to test the f16-storage kernels: there a
    // device without 'shader-f16' is a broken set-up, not a pass.
    if (process.env.SDPA_WEBGPU_SHADER_F16 === '1') expect(path).toBe('shader-f16');
    expect(attn.webgpuInfo()!.float16).toBe(path);
    await checkCases(attn, 'default limits');
    const kernels = attn.webgpuInfo()!.pipelines.filter((key) => key.includes(`:f16=${path}`)).map((key) => key.split(':')[0]);
    // Split-K decode streams K/V through subgroups where the device has them, else tiles them.
    const decode = attn.webgpuInfo()!.limits.subgroups ? 'decode-stream' : 'decode-partial';
    expect(new Set(kernels)).toEqual(new Set(['flash-tiled', 'flash', 'weights', 'scores', decode, 'decode-merge']));
    attn.dispose();
  });

  it('the per-row kernel everywhere (gpuLimits), and the unpack path forced with shaderF16: false', async () => {
    // 64 invocations still hold the tiled kernel's 16-row workgroups of these few-head calls; 2 KiB
    // of workgroup memory holds no 16-key tile of them (2.6 KiB at head dims padded to 16).
    const perRow = await createAttention({
      backend: 'webgpu', gpuDevice: device, gpuLimits: { maxComputeInvocationsPerWorkgroup: 64, maxComputeWorkgroupStorageSize: 2048, shaderF16: false },
    });
    expect(perRow.webgpuInfo()!.float16).toBe('unpack2x16float');
    expect(perRow.webgpuInfo()!.limits.shaderF16).toBe(false);
    // Without 'shader-f16' (SwiftShader, the vitest step) the per-row kernel's unpack loaders on
    // three cases; with it (lavapipe, the webgpu_f16 step, where each new pipeline is a cold LLVM
    // compile) what is new there is the forcing: one case.
    await checkCases(perRow, 'per-row, forced unpack', CASES.slice(0, device.features.has('shader-f16') ? 1 : 3));
    expect(perRow.webgpuInfo()!.pipelines.some((key) => key.startsWith('flash-tiled'))).toBe(false);
    perRow.dispose();
    await expect(createAttention({ backend: 'webgpu', gpuDevice: device, gpuLimits: { shaderF16: 'no' as never } })).rejects.toThrow(/gpuLimits.shaderF16 must be a boolean/);
  });

  it('calls cut into chunks read float16 slices that start mid-word', async () => {
    // 4 KiB bindings: chunks of a few heads or rows, each float16 slice bound from the aligned
    // offset before it (Params.query_base/key_base/value_base).
    const small = await createAttention({ backend: 'webgpu', gpuDevice: device, gpuLimits: { maxStorageBufferBindingSize: 4096 } });
    const cases: Case[] = [
      ['heads per chunk', [3, 5, 9, 13], [3, 5, 21, 13], [3, 5, 21, 7], {}],
      ['heads per chunk, rows of whole vectors', [3, 5, 9, 12], [3, 5, 21, 12], [3, 5, 21, 8], {}],
      ['rows of one head', [1, 1, 300, 13], [1, 1, 40, 13], [1, 1, 40, 7], { isCausal: true }],
    ];
    await checkCases(small, 'chunked', cases);
    // The same halves as GPU tensors at byte offset 2: each chunk's slice bound in place.
    for (const [what, qs, ks, vs, options] of cases) {
      const q = randomHalf(qs, 30, -2, 2), k = randomHalf(ks, 31, -2, 2), v = randomHalf(vs, 32);
      const fromCpu = await small.scaledDotProductAttention(q.half, k.half, v.half, { ...options, outputDtype: 'float32' });
      const gpuInputs = [q, k, v].map((t) => toGpu(t.half.data as Uint16Array, t.half.shape, 2));
      const fromGpu = await small.scaledDotProductAttention(gpuInputs[0]!, gpuInputs[1]!, gpuInputs[2]!, { ...options, outputDtype: 'float32' });
      expect(fromGpu.output.data, `${what}: GPU inputs`).toEqual(fromCpu.output.data);
      for (const t of gpuInputs) t.buffer.destroy();
    }
    small.dispose();
  });
});

describe('GPU-resident float16 tensors and outputs on webgpu', () => {
  let attn: Attention;
  beforeAll(async () => {
    attn = await createAttention({ backend: 'webgpu', gpuDevice: device });
  });
  afterAll(() => attn.dispose());

  it('inputs at byte offsets 0, 2, 6 and 258 (never word- or binding-aligned copies), outputs on the CPU and the GPU', async () => {
    const q = randomHalf([1, 3, 17, 13], 1, -2, 2), k = randomHalf([1, 3, 29, 13], 2, -2, 2), v = randomHalf([1, 3, 29, 7], 3);
    const options: AttentionOptions = { isCausal: 'bottom-right' };
    const onCpu = await attn.scaledDotProductAttention(q.half, k.half, v.half, { ...options, outputDtype: 'float32' });
    for (const offset of [0, 2, 6, 258]) {
      const [gq, gk, gv] = [toGpu(q.half.data as Uint16Array, q.half.shape, offset), toGpu(k.half.data as Uint16Array, k.half.shape, offset), toGpu(v.half.data as Uint16Array, v.half.shape, offset)];
      const wide = await attn.scaledDotProductAttention(gq, gk, gv, { ...options, outputDtype: 'float32' });
      expect(wide.output.data, `offset ${offset}`).toEqual(onCpu.output.data); // the same kernel on the same halves
      const narrow = await attn.scaledDotProductAttention(gq, gk, gv, options);
      expect(narrow.output.dtype).toBe('float16');
      expect(narrow.output.data, `offset ${offset}, float16 on the CPU`).toEqual(toFloat16(onCpu.output.data as Float32Array));
      // On the GPU: rounded there, bit for bit as toFloat16.
      const onGpu = await attn.scaledDotProductAttention(gq, gk, gv, { ...options, outputLocation: 'gpu' });
      expect(onGpu.output.dtype).toBe('float16');
      const n = onCpu.output.data.length;
      expect(onGpu.output.buffer.size).toBe(4 * Math.ceil(n / 2));
      expect((await halvesOf(onGpu.output.buffer as GPUBuffer)).subarray(0, n), `offset ${offset}, float16 on the GPU`).toEqual(toFloat16(onCpu.output.data as Float32Array));
      onGpu.output.buffer.destroy();
      for (const t of [gq, gk, gv]) t.buffer.destroy();
    }
    expectResultMatchesReference(onCpu as AttentionResult, oracle, q.float, k.float, v.float, options, FACTOR, 'GPU float16 inputs');
  });

  it('rows of whole vectors: read as vectors from byte offsets 0 and 264, a half at a time from offsets 2 and 6, the same bits', async () => {
    const cases: Case[] = [
      ['tiled prefill', [1, 3, 17, 16], [1, 3, 70, 16], [1, 3, 70, 8], { isCausal: 'bottom-right' }],
      ['split-K decode, GQA', [1, 4, 2, 16], [1, 2, 300, 16], [1, 2, 300, 8], { enableGqa: true, isCausal: 'bottom-right' }],
    ];
    for (const [what, qs, ks, vs, options] of cases) {
      const q = randomHalf(qs, 11, -2, 2), k = randomHalf(ks, 12, -2, 2), v = randomHalf(vs, 13);
      const onCpu = await attn.scaledDotProductAttention(q.half, k.half, v.half, { ...options, outputDtype: 'float32' });
      expectResultMatchesReference(onCpu as AttentionResult, oracle, q.float, k.float, v.float, options, FACTOR, `${what}, CPU halves`);
      for (const offset of [0, 2, 6, 264]) {
        const [gq, gk, gv] = [toGpu(q.half.data as Uint16Array, q.half.shape, offset), toGpu(k.half.data as Uint16Array, k.half.shape, offset), toGpu(v.half.data as Uint16Array, v.half.shape, offset)];
        const fromGpu = await attn.scaledDotProductAttention(gq, gk, gv, { ...options, outputDtype: 'float32' });
        expect(fromGpu.output.data, `${what}, offset ${offset}`).toEqual(onCpu.output.data);
        for (const t of [gq, gk, gv]) t.buffer.destroy();
      }
    }
    // The kernels of both cases compiled with vector bindings and without (the earlier tests' odd
    // head dims add scalar pipelines of their own).
    const float16 = attn.webgpuInfo()!.pipelines.filter((key) => key.includes(':q=f16:k=f16:v=f16:') && key.includes(':e16:ev16:'));
    const kernels = (vectors: boolean) => [...new Set(float16.filter((key) => key.includes(':vec4=qkv') === vectors).map((key) => key.split(':')[0]))];
    const decode = attn.webgpuInfo()!.limits.subgroups ? 'decode-stream' : 'decode-partial';
    expect(kernels(true).sort()).toEqual(['decode-merge', decode, 'flash-tiled'].sort());
    expect(kernels(false)).toEqual(expect.arrayContaining(['decode-merge', decode, 'flash-tiled']));
  });

  it("a float16 output into an out GPUBuffer: odd element counts, chunk boundaries mid-word, the halves after it kept", async () => {
    const small = await createAttention({ backend: 'webgpu', gpuDevice: device, gpuLimits: { maxStorageBufferBindingSize: 2048 } });
    for (const [label, engine] of [['one piece', attn], ['chunks of 2 KiB bindings', small]] as const) {
      const q = randomHalf([1, 5, 41, 13], 4, -2, 2), k = randomHalf([1, 5, 20, 13], 5, -2, 2), v = randomHalf([1, 5, 20, 7], 6);
      const n = 5 * 41 * 7; // odd: the last half shares its word with what follows
      const wide = await engine.scaledDotProductAttention(q.half, k.half, v.half, { outputDtype: 'float32' });
      const out = device.createBuffer({ size: 4 * Math.ceil(n / 2) + 8, usage: STORAGE | COPY_SRC | COPY_DST });
      device.queue.writeBuffer(out, 0, new Uint16Array(out.size / 2).fill(FILL));
      const into = await engine.scaledDotProductAttention(q.half, k.half, v.half, { outputLocation: 'gpu', out });
      expect(into.output.buffer).toBe(out);
      const halves = await halvesOf(out);
      expect(halves.subarray(0, n), label).toEqual(toFloat16(wide.output.data as Float32Array));
      expect(Array.from(halves.subarray(n)), `${label}: the halves after the output`).toEqual(new Array(halves.length - n).fill(FILL));
      // float32 inputs, a float16 output on the GPU.
      const f32 = await engine.scaledDotProductAttention(q.float, k.float, v.float, { outputLocation: 'gpu', outputDtype: 'float16' });
      expect((await halvesOf(f32.output.buffer as GPUBuffer)).subarray(0, n), `${label}, float32 inputs`).toEqual(toFloat16(wide.output.data as Float32Array));
      f32.output.buffer.destroy();
      out.destroy();
    }
    // No keys: zeros, written as halves (the half after them kept).
    const zeros = device.createBuffer({ size: 24, usage: STORAGE | COPY_SRC | COPY_DST });
    device.queue.writeBuffer(zeros, 0, new Uint16Array(12).fill(FILL));
    const noKey = { data: new Uint16Array(0), shape: [0, 5], dtype: 'float16' } as const;
    await attn.scaledDotProductAttention(randomHalf([3, 5], 7).half, noKey, { data: new Uint16Array(0), shape: [0, 3], dtype: 'float16' }, { outputLocation: 'gpu', out: zeros });
    expect(Array.from(await halvesOf(zeros))).toEqual([...new Array(9).fill(0), FILL, FILL, FILL]);
    zeros.destroy();
    small.dispose();
  });

  it('bad float16 GPU arguments are RangeErrors/TypeErrors naming them', async () => {
    const q = randomHalf([3, 5], 8), k = randomHalf([4, 5], 9), v = randomHalf([4, 3], 10);
    const gk = toGpu(k.half.data as Uint16Array, k.half.shape, 2);
    await expect(attn.scaledDotProductAttention(q.half, { ...gk, offset: 3 }, v.half)).rejects.toThrow(/key.offset must be a byte offset ≥ 0 and a multiple of 2 \(a float16 tensor\); got 3/);
    // 20 halves from byte 2 end at byte 42: the buffer must reach byte 44.
    const short = device.createBuffer({ size: 42, usage: STORAGE });
    await expect(attn.scaledDotProductAttention(q.half, { buffer: short, shape: [4, 5], offset: 2, dtype: 'float16' }, v.half)).rejects.toThrow(/key: shape \[4, 5\] needs 42 bytes from offset 2 \(to the end of its last 4-byte word/);
    await expect(attn.scaledDotProductAttention(q.half, { ...gk, dtype: 'float61' as never }, v.half)).rejects.toThrow(/key.dtype must be 'float32' or 'float16'; did you mean 'float16'/);
    const out = device.createBuffer({ size: 16, usage: STORAGE | COPY_DST });
    await expect(attn.scaledDotProductAttention(q.half, k.half, v.half, { outputLocation: 'gpu', out })).rejects.toThrow(/out is a 16-byte GPUBuffer but the float16 output \[3, 3\] needs 20 bytes/);
    await expect(attn.scaledDotProductAttention(q.half, k.half, v.half, { out: new Float32Array(9) })).rejects.toThrow(/out must be a Uint16Array or Float16Array/);
    for (const b of [gk.buffer, short, out]) b.destroy();
    // Still usable.
    const { output } = await attn.scaledDotProductAttention(q.half, k.half, v.half);
    expectFloat16ResultOf(oracle, FACTOR, output as Float16Tensor, q.float, k.float, v.float, {}, [q.half, k.half, v.half], 'after errors');
  });
});

describe('the float16 GPU KV cache', () => {
  let attn: Attention;
  beforeAll(async () => {
    attn = await createAttention({ backend: 'webgpu', gpuDevice: device });
  });
  afterAll(() => attn.dispose());

  for (const [E, Ev] of [[16, 8], [13, 7]] as const) {
    it(`E = ${E}, Ev = ${Ev}: appends of CPU float16/float32 and GPU float16 (offsets 0 and 2)/float32 tensors, each step equal to one call on the concatenation`, async () => {
      const [B, Hq, Hkv] = [2, 4, 2];
      const cache = attn.createKvCache({ batch: B, kvHeads: Hkv, maxLength: 400, headDim: E, valueDim: Ev, dtype: 'float16' });
      expect(cache.dtype).toBe('float16');
      const keys: Float32Array[] = [], values: Float32Array[] = [];
      let seed = 10 * E;
      const sources = ['cpu half', 'cpu float', 'gpu half', 'gpu half at 2', 'gpu float'] as const;
      const append = (n: number, source: (typeof sources)[number]) => {
        const k = randomHalf([B, Hkv, n, E], seed++), v = randomHalf([B, Hkv, n, Ev], seed++);
        const made: GpuTensor[] = [];
        const pick = (t: { half: Float16Tensor; float: Tensor }) => {
          if (source === 'cpu half') return t.half;
          // float32 rows are rounded to float16 (on the CPU, or on the GPU): the twins are halves already.
          if (source === 'cpu float') return t.float;
          const g = source === 'gpu float' ? toGpu(t.float.data, t.float.shape, 4) : toGpu(t.half.data as Uint16Array, t.half.shape, source === 'gpu half' ? 0 : 2);
          made.push(g);
          return g;
        };
        cache.append(pick(k), pick(v));
        for (const g of made) g.buffer.destroy();
        keys.push(k.float.data);
        values.push(v.float.data);
      };
      append(260, 'cpu half'); // a prompt: then each step has more than 256 keys (split-K decode)
      for (let step = 0; step < sources.length; step++) {
        append(step % 2 ? 2 : 1, sources[step]!);
        const q = randomHalf([B, Hq, 1, E], seed++);
        const options: AttentionOptions = { enableGqa: true, isCausal: true };
        const stepped = await attn.scaledDotProductAttention(q.half, cache, { ...options, outputDtype: 'float32' });
        const k = concatLengths(keys, B, Hkv, E), v = concatLengths(values, B, Hkv, Ev);
        const halfK: Float16Tensor = { data: toFloat16(k.data), shape: k.shape, dtype: 'float16' };
        const halfV: Float16Tensor = { data: toFloat16(v.data), shape: v.shape, dtype: 'float16' };
        const whole = await attn.scaledDotProductAttention(q.half, halfK, halfV, { enableGqa: true, isCausal: 'bottom-right', outputDtype: 'float32' });
        expect(stepped.output.data, `step ${step} (${sources[step]})`).toEqual(whole.output.data);
        expectResultMatchesReference(stepped as AttentionResult, oracle, q.float, k, v, { enableGqa: true, isCausal: 'bottom-right' }, FACTOR, `step ${step}`);
      }
      // Ragged: sequence 1 appends nothing.
      const k = randomHalf([B, Hkv, 3, E], seed++), v = randomHalf([B, Hkv, 3, Ev], seed++);
      cache.append(k.half, v.half, { lengths: [3, 0] });
      expect(Array.from(cache.lengths)).toEqual([cache.length, cache.length - 3]);
      const q = randomHalf([B, Hq, 1, E], seed++);
      const { output } = await attn.scaledDotProductAttention(q.half, cache, { enableGqa: true, isCausal: true });
      expect(output.dtype).toBe('float16');
      cache.dispose();
    });
  }

  it('a float16 GPU tensor appended to a float32 GPU cache is a TypeError naming the dtypes (nothing written); an odd-sized float16 cache', async () => {
    const cache = attn.createKvCache({ batch: 1, kvHeads: 1, maxLength: 8, headDim: 4 });
    const k = randomHalf([1, 1, 2, 4], 1), v = randomHalf([1, 1, 2, 4], 2);
    const gk = toGpu(k.half.data as Uint16Array, k.half.shape, 0);
    expect(() => cache.append(gk, v.half)).toThrow(/key is a float16 GPU tensor and this KvCache holds float32/);
    expect(cache.length).toBe(0);
    // CPU float16 rows are widened into a float32 cache.
    cache.append(k.half, v.half);
    const q = randomHalf([1, 1, 1, 4], 3);
    const got = await attn.scaledDotProductAttention(q.float, cache);
    expectResultMatchesReference(got, oracle, q.float, k.float, v.float, { isCausal: false }, FACTOR, 'float16 rows in a float32 cache');
    gk.buffer.destroy();
    cache.dispose();
    // A float16 cache of an odd number of halves (3 rows of 3): its last half is read with its word.
    const odd = attn.createKvCache({ batch: 1, kvHeads: 1, maxLength: 3, headDim: 3, dtype: 'float16' });
    const k3 = randomHalf([1, 1, 3, 3], 4), v3 = randomHalf([1, 1, 3, 3], 5), q3 = randomHalf([1, 1, 2, 3], 6);
    odd.append(k3.half, v3.half);
    const full = await attn.scaledDotProductAttention(q3.half, odd, { outputDtype: 'float32' });
    expectResultMatchesReference(full as AttentionResult, oracle, q3.float, k3.float, v3.float, {}, FACTOR, 'an odd-sized float16 cache');
    odd.dispose();
  });
});

describe('float16 logits near 65504 on the GPU path', () => {
  it('scores far past float16 range accumulate in float32 (no Inf, no NaN) on every kernel', async () => {
    const attn = await createAttention({ backend: 'webgpu', gpuDevice: device });
    for (const [what, qs, ks, vs] of [
      ['tiled', [1, 2, 40, 16], [1, 2, 70, 16], [1, 2, 70, 8]],
      ['per-row (E = 150)', [1, 1, 5, 150], [1, 1, 30, 150], [1, 1, 30, 4]],
      ['decode', [1, 2, 1, 16], [1, 2, 300, 16], [1, 2, 300, 8]],
    ] as const) {
      // Entries near ±250 (halves): q·k reaches 250²·E ≥ 1e6, with scale 1.
      const q = randomHalf([...qs], 20, -250, 250), k = randomHalf([...ks], 21, -250, 250), v = randomHalf([...vs], 22);
      const { output } = await attn.scaledDotProductAttention(q.half, k.half, v.half, { scale: 1 });
      const values = fromFloat16((output as Float16Tensor).data as Uint16Array);
      expect(values.every((x) => Number.isFinite(x)), what).toBe(true);
      expectFloat16ResultOf(oracle, FACTOR, output as Float16Tensor, q.float, k.float, v.float, { scale: 1 }, [q.half, k.half, v.half], what);
    }
    attn.dispose();
  });
});
