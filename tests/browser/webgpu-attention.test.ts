/// <reference types="@webgpu/types" />
// The WebGPU backend in headless Chromium (navigator.gpu, SwiftShader): a representative subset of
// the shared test body (tests/node/support/attention-suite.ts, run in full on dawn.node), the same
// tolerance rule (4·e_ref + 1e-5·max(1, |V|max)) against the float64 reference, GPU-resident
// tensors and a GPU KV cache (flash-decoding), float16 (inputs, a float16 GPU cache, a float16
// output on the GPU; Float16Array in and out, on WebGPU and the scalar backend), int8/int4 GPU
// caches, the backward, and a fault.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAttention,
  fromFloat16,
  maxAbsDiff,
  toFloat16,
  toleranceBound,
  WebGPUError,
  type Attention,
  type AttentionOptions,
  type AttentionResult,
  type Float16Tensor,
  type Tensor,
} from 'sdpa-web';
import { levelsOf, roundThroughBlocks } from '../node/support/quantized.js';
import { randomMasks, randomTensor } from '../node/support/tensors.js';
import { expectMatchesReference, expectResultMatchesReference } from '../node/support/tolerance.js';

describe('WebGPU backend in Chromium', () => {
  let attn: Attention;
  let oracle: Attention;
  const check = (q: Tensor, k: Tensor, v: Tensor, options: AttentionOptions = {}, label = '') =>
    expectMatchesReference(attn, oracle, q, k, v, options, { factor: 4 }, label);

  beforeAll(async () => {
    attn = await createAttention({ backend: 'webgpu' });
    oracle = await createAttention({ backend: 'scalar' });
  });
  afterAll(() => {
    attn.dispose();
    oracle.dispose();
  });

  it("navigator.gpu gives SwiftShader's software adapter: 'auto' keeps SIMD and says why, 'webgpu' takes it", async () => {
    const adapter = await navigator.gpu.requestAdapter();
    expect(adapter).not.toBeNull();
    expect(adapter!.info.isFallbackAdapter).toBe(true);
    const auto = await createAttention();
    expect(auto.backend).toBe('simd');
    expect(auto.fallbackReason).toMatch(/software fallback/);
    auto.dispose();
    expect(attn.backend).toBe('webgpu');
  });

  it('matches the float64 reference over lengths straddling the tiles and head dims up to 256', async () => {
    const lengths = [1, 17, 63, 64, 65, 257];
    const dims = [[1, 8], [16, 15], [64, 100], [100, 64], [256, 256]] as const;
    let c = 0;
    for (const lq of lengths) {
      for (const lk of lengths) {
        const [e, ev] = dims[c % dims.length]!;
        const lead = c % 2 ? [2, 3] : [1];
        await check(randomTensor([...lead, lq, e], 3 * c, -2, 2), randomTensor([...lead, lk, e], 3 * c + 1, -2, 2),
          randomTensor([...lead, lk, ev], 3 * c + 2), { returnWeights: c % 3 === 0 }, `Lq=${lq} Lk=${lk} E=${e} Ev=${ev}`);
        c++;
      }
    }
  });

  it('bool and additive masks with broadcasting, both causal alignments, GQA', async () => {
    const q = randomTensor([2, 3, 33, 16], 10), k = randomTensor([2, 3, 70, 16], 11), v = randomTensor([2, 3, 70, 8], 12);
    for (const shape of [[2, 3, 33, 70], [1, 3, 1, 70], [2, 1, 33, 1], [70]]) {
      for (const [kind, mask] of Object.entries(randomMasks(shape, shape.length))) {
        await check(q, k, v, { attnMask: mask, returnWeights: true }, `${kind} mask [${shape}]`);
      }
    }
    for (const isCausal of ['top-left', 'bottom-right'] as const) {
      await check(randomTensor([2, 40, 16], 1), randomTensor([2, 100, 16], 2), randomTensor([2, 100, 8], 3), { isCausal, returnWeights: true }, `causal ${isCausal}`);
      await check(randomTensor([2, 100, 16], 4), randomTensor([2, 40, 16], 5), randomTensor([2, 40, 8], 6), { isCausal }, `causal ${isCausal} Lq > Lk`);
    }
    await check(randomTensor([2, 6, 40, 32], 40), randomTensor([2, 2, 90, 32], 41), randomTensor([2, 2, 90, 24], 42), { enableGqa: true, returnWeights: true }, 'gqa');
  });

  it('causal offsets (negative, at the tiles, beyond Lk), alone and composed with bool and additive masks', async () => {
    const q = randomTensor([2, 40, 16], 20), k = randomTensor([2, 100, 16], 21), v = randomTensor([2, 100, 8], 22);
    const masks = randomMasks([2, 40, 100], 23);
    for (const offset of [-41, -3, 0, 31, 64, 102]) {
      await check(q, k, v, { isCausal: { offset }, returnWeights: true }, `offset ${offset}`);
      await check(q, k, v, { isCausal: { offset }, attnMask: masks.bool }, `offset ${offset} + bool mask`);
      await check(q, k, v, { isCausal: { offset }, attnMask: masks.additive, returnWeights: true }, `offset ${offset} + additive mask`);
    }
  });

  it('fully masked rows give zeros, large logits stay finite', async () => {
    const q = randomTensor([6, 8], 50), k = randomTensor([70, 8], 51), v = randomTensor([70, 4], 52);
    const masked = await attn.scaledDotProductAttention(q, k, v, { attnMask: { data: new Uint8Array([1, 0, 1, 0, 0, 1]), shape: [6, 1] }, returnWeights: true });
    for (const row of [1, 3, 4]) expect([...masked.output.data.subarray(row * 4, row * 4 + 4)]).toEqual([0, 0, 0, 0]);
    const q100 = { data: new Float32Array(20).fill(100), shape: [20, 1] };
    const big = { data: new Float32Array(50).map((_, j) => 100 - j / 10), shape: [50, 1] };
    await check(q100, big, randomTensor([50, 3], 60), { scale: 1 }, 'logits 1e4');
  });

  it('GPU tensors in, the output left on the GPU, and flash-decoding on a GPU KV cache', async () => {
    const device = await (await navigator.gpu.requestAdapter())!.requestDevice();
    const gpuAttn = await createAttention({ backend: 'webgpu', gpuDevice: device });
    const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
    const toGpu = (t: Tensor) => {
      const buffer = device.createBuffer({ size: t.data.byteLength, usage });
      device.queue.writeBuffer(buffer, 0, t.data as Float32Array<ArrayBuffer>);
      return { buffer, shape: t.shape };
    };
    const read = async (buffer: GPUBuffer, floats: number) => {
      const staging = device.createBuffer({ size: 4 * floats, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
      const encoder = device.createCommandEncoder();
      encoder.copyBufferToBuffer(buffer, 0, staging, 0, 4 * floats);
      device.queue.submit([encoder.finish()]);
      await staging.mapAsync(GPUMapMode.READ);
      const data = new Float32Array(staging.getMappedRange().slice(0));
      staging.destroy();
      return data;
    };
    const q = randomTensor([1, 4, 1, 32], 1), k = randomTensor([1, 2, 300, 32], 2), v = randomTensor([1, 2, 300, 16], 3);
    const options: AttentionOptions = { enableGqa: true, isCausal: 'bottom-right' };
    const ref = oracle.referenceAttention(q, k, v, options).output.data;
    const cache = gpuAttn.createKvCache({ batch: 1, kvHeads: 2, maxLength: 320, headDim: 32, valueDim: 16 });
    cache.append(toGpu(k), toGpu(v));
    const onCache = await gpuAttn.scaledDotProductAttention(toGpu(q), cache, { enableGqa: true, isCausal: true, outputLocation: 'gpu' });
    const onTensors = await gpuAttn.scaledDotProductAttention(toGpu(q), toGpu(k), toGpu(v), { ...options, outputLocation: 'gpu' });
    const bound = toleranceBound(maxAbsDiff(oracle.scaledDotProductAttentionSync(q, k, v, options).output.data, ref), 4, v.data);
    for (const got of [await read(onCache.output.buffer as GPUBuffer, ref.length), await read(onTensors.output.buffer as GPUBuffer, ref.length)]) {
      expect(maxAbsDiff(got, ref)).toBeLessThanOrEqual(bound);
    }
    expect(gpuAttn.webgpuInfo()!.pipelines.join(' ')).toMatch(/decode-(partial|stream)/);
    cache.dispose();
    gpuAttn.dispose();
    device.destroy();
  });

  it('float16: halves from the CPU, a float16 GPU KV cache (odd head dims, split-K decode), a float16 output on the GPU', async () => {
    const device = await (await navigator.gpu.requestAdapter())!.requestDevice();
    const gpuAttn = await createAttention({ backend: 'webgpu', gpuDevice: device });
    expect(['shader-f16', 'unpack2x16float']).toContain(gpuAttn.webgpuInfo()!.float16);
    // Tensors of halves and their exact float32 twins.
    const pair = (shape: number[], seed: number, range: number): [Float16Tensor, Tensor] => {
      const data = toFloat16(randomTensor(shape, seed, -range, range).data);
      return [{ data, shape, dtype: 'float16' }, { data: fromFloat16(data), shape }];
    };
    const [hq, q] = pair([1, 4, 2, 13], 1, 2), [hk, k] = pair([1, 2, 300, 13], 2, 2), [hv, v] = pair([1, 2, 300, 7], 3, 1);
    const options: AttentionOptions = { enableGqa: true, isCausal: 'bottom-right' };
    const wide = await gpuAttn.scaledDotProductAttention(hq, hk, hv, { ...options, outputDtype: 'float32' });
    expectResultMatchesReference(wide as AttentionResult, oracle, q, k, v, options, 4, 'float16 inputs');
    const cache = gpuAttn.createKvCache({ batch: 1, kvHeads: 2, maxLength: 320, headDim: 13, valueDim: 7, dtype: 'float16' });
    cache.append(hk, hv);
    const onCache = await gpuAttn.scaledDotProductAttention(hq, cache, { enableGqa: true, isCausal: true, outputDtype: 'float32' });
    expect(onCache.output.data).toEqual(wide.output.data);
    const onGpu = await gpuAttn.scaledDotProductAttention(hq, cache, { enableGqa: true, isCausal: true, outputLocation: 'gpu' });
    expect(onGpu.output.dtype).toBe('float16');
    const n = wide.output.data.length;
    const staging = device.createBuffer({ size: onGpu.output.buffer.size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(onGpu.output.buffer as GPUBuffer, 0, staging, 0, staging.size);
    device.queue.submit([encoder.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    // Rounded on the GPU exactly as toFloat16 rounds on the CPU.
    expect(new Uint16Array(staging.getMappedRange().slice(0)).subarray(0, n)).toEqual(toFloat16(wide.output.data as Float32Array));
    expect(gpuAttn.webgpuInfo()!.pipelines.join(' ')).toMatch(/decode-(partial|stream):.*:k=f16:v=f16/);
    staging.destroy();
    onGpu.output.buffer.destroy();
    cache.dispose();
    gpuAttn.dispose();
    device.destroy();
  });

  it('int8 and int4 GPU KV caches: quantized on the GPU, split-K decode on both dot paths, prefill', async () => {
    const packedAvailable = navigator.gpu.wgslLanguageFeatures.has('packed_4x8_integer_dot_product');
    const unpacked = await createAttention({ backend: 'webgpu', gpuLimits: { packedIntegerDotProduct: false } });
    const key = randomTensor([1, 2, 300, 40], 31, -2, 2), value = randomTensor([1, 2, 300, 24], 32, -2, 2);
    for (const kind of ['int8', 'int4'] as const) {
      const dequantized = { key: { data: roundThroughBlocks(key.data, 40, levelsOf(kind)), shape: key.shape }, value: { data: roundThroughBlocks(value.data, 24, levelsOf(kind)), shape: value.shape } };
      for (const gpuAttn of [attn, unpacked]) {
        const cache = gpuAttn.createKvCache({ batch: 1, kvHeads: 2, maxLength: 300, headDim: 40, valueDim: 24, dtype: kind });
        cache.append(key, value);
        for (const [Lq, options] of [[1, { window: { left: 100 }, softcap: 3 }], [12, { isCausal: true }]] as const) {
          const query = randomTensor([1, 4, Lq, 40], 33 + Lq, -2, 2);
          const got = await gpuAttn.scaledDotProductAttention(query, cache, { enableGqa: true, ...options });
          const quantizedQuery = { data: roundThroughBlocks(query.data, 40, 127), shape: query.shape };
          const dense = { enableGqa: true, ...options, isCausal: 'isCausal' in options ? ('bottom-right' as const) : undefined };
          expectResultMatchesReference(got, oracle, quantizedQuery, dequantized.key, dequantized.value, dense, 4, `${kind} Lq ${Lq}`);
        }
        cache.dispose();
      }
    }
    // The streaming quantized kernel where the adapter has subgroups, else the tile kernel.
    const quantizedDecode = (p: string) => /^decode-(stream|partial)-quantized:/.test(p);
    const packedKey = attn.webgpuInfo()!.pipelines.find(quantizedDecode);
    expect(packedKey).toMatch(packedAvailable ? /:dot4=packed:/ : /:dot4=unpack:/);
    expect(unpacked.webgpuInfo()!.pipelines.find(quantizedDecode)).toMatch(/:dot4=unpack:/);
    unpacked.dispose();
  });

  it('Float16Array (this engine has it) needs no dtype, and the output comes back as a Float16Array, into out too', async () => {
    const Float16 = (globalThis as unknown as { Float16Array: new (buffer: ArrayBufferLike, offset?: number, length?: number) => ArrayBufferView & ArrayLike<number> }).Float16Array;
    expect(typeof Float16).toBe('function');
    const bits = (shape: number[], seed: number) => toFloat16(randomTensor(shape, seed).data);
    const [qb, kb, vb] = [bits([3, 9, 8], 40), bits([3, 70, 8], 41), bits([3, 70, 5], 42)];
    const view = (b: Uint16Array) => new Float16(b.buffer, b.byteOffset, b.length);
    for (const engine of [oracle, attn]) {
      const asBits = await engine.scaledDotProductAttention({ data: qb, shape: [3, 9, 8], dtype: 'float16' }, { data: kb, shape: [3, 70, 8], dtype: 'float16' }, { data: vb, shape: [3, 70, 5], dtype: 'float16' }, { isCausal: true });
      const native = await engine.scaledDotProductAttention({ data: view(qb), shape: [3, 9, 8] } as unknown as Float16Tensor, { data: view(kb), shape: [3, 70, 8] } as unknown as Float16Tensor, { data: view(vb), shape: [3, 70, 5] } as unknown as Float16Tensor, { isCausal: true });
      expect(native.output.data).toBeInstanceOf(Float16);
      expect(native.output.dtype).toBe('float16');
      const nativeBits = new Uint16Array(native.output.data.buffer, native.output.data.byteOffset, native.output.data.length);
      expect(nativeBits).toEqual(asBits.output.data);
      const out = new Float16(new ArrayBuffer(2 * 3 * 9 * 5));
      const into = await engine.scaledDotProductAttention({ data: view(qb), shape: [3, 9, 8] } as unknown as Float16Tensor, { data: view(kb), shape: [3, 70, 8] } as unknown as Float16Tensor, { data: view(vb), shape: [3, 70, 5] } as unknown as Float16Tensor, { isCausal: true, out });
      expect(into.output.data).toBe(out);
      expect(new Uint16Array(out.buffer)).toEqual(asBits.output.data);
    }
  });

  it('the backward on the GPU: within the rule of the float64 gradient (GQA, causal, additive mask with dAttnMask, sinks), and from GPU tensors to GPU outputs', async () => {
    const q = randomTensor([1, 4, 37, 16], 90, -2, 2), k = randomTensor([1, 2, 53, 16], 91, -2, 2), v = randomTensor([1, 2, 53, 8], 92);
    const dOut = randomTensor([1, 4, 37, 8], 93);
    const options = { enableGqa: true, isCausal: 'bottom-right' as const, attnMask: randomMasks([37, 53], 94).additive, returnAttnMaskGrad: true, sinks: new Float32Array([0.5, -1, 0, 1]) };
    const device = await (await navigator.gpu.requestAdapter())!.requestDevice();
    const mine = await createAttention({ backend: 'webgpu', gpuDevice: device });
    const got = await mine.scaledDotProductAttentionBackward(q, k, v, dOut, options);
    const ref = oracle.referenceAttentionBackward(q, k, v, dOut, options);
    const plain = oracle.scaledDotProductAttentionBackwardSync(q, k, v, dOut, options);
    for (const name of ['dQuery', 'dKey', 'dValue', 'dAttnMask', 'dSinks'] as const) {
      const bound = toleranceBound(maxAbsDiff(plain[name]!.data, ref[name]!.data), 4, ref[name]!.data);
      expect(maxAbsDiff(got[name]!.data, ref[name]!.data), name).toBeLessThanOrEqual(bound);
    }
    const upload = (t: Tensor) => {
      const buffer = device.createBuffer({ size: t.data.byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
      device.queue.writeBuffer(buffer, 0, t.data as Float32Array<ArrayBuffer>);
      return { buffer, shape: t.shape };
    };
    const onGpu = await mine.scaledDotProductAttentionBackward(upload(q), upload(k), upload(v), upload(dOut), { ...options, outputLocation: 'gpu' });
    const staging = device.createBuffer({ size: q.data.byteLength, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(onGpu.dQuery.buffer as GPUBuffer, 0, staging, 0, q.data.byteLength);
    device.queue.submit([encoder.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    expect(new Float32Array(staging.getMappedRange().slice(0))).toEqual(got.dQuery.data);
    staging.destroy();
    for (const name of ['dQuery', 'dKey', 'dValue'] as const) onGpu[name].buffer.destroy();
    mine.dispose();
    device.destroy();
  });

  it('calls in flight together all resolve; work split under lowered limits; device.destroy() rejects with device-lost', async () => {
    const cases = [0, 1, 2, 3, 4, 5].map((c) => [randomTensor([2, 10 + 20 * c, 16], c), randomTensor([2, 30 + 7 * c, 16], c + 9), randomTensor([2, 30 + 7 * c, 8], c + 19)] as const);
    const results = await Promise.all(cases.map(([q, k, v]) => attn.scaledDotProductAttention(q, k, v)));
    for (const [c, [q, k, v]] of cases.entries()) {
      const cpu = oracle.scaledDotProductAttentionSync(q, k, v);
      expect(Math.max(...results[c]!.output.data.map((x, i) => Math.abs(x - cpu.output.data[i]!)))).toBeLessThan(1e-5);
    }

    const small = await createAttention({ backend: 'webgpu', gpuLimits: { maxStorageBufferBindingSize: 90 * 32 * 4, maxComputeWorkgroupsPerDimension: 2 } });
    await expectMatchesReference(small, oracle, randomTensor([2, 6, 150, 32], 1), randomTensor([2, 2, 90, 32], 2), randomTensor([2, 2, 90, 16], 3),
      { enableGqa: true, returnWeights: true }, { factor: 4 }, 'split');
    small.dispose();

    const adapter = (await navigator.gpu.requestAdapter())!;
    const device = await adapter.requestDevice();
    const own = await createAttention({ backend: 'webgpu', gpuDevice: device });
    const pending = own.scaledDotProductAttention(randomTensor([200, 32], 1), randomTensor([300, 32], 2), randomTensor([300, 32], 3));
    device.destroy();
    const error = await pending.then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(WebGPUError);
    expect((error as WebGPUError).kind).toBe('device-lost');
    // The next call re-initializes on a new device from navigator.gpu.
    await expectMatchesReference(own, oracle, randomTensor([5, 8], 4), randomTensor([9, 8], 5), randomTensor([9, 4], 6), {}, { factor: 4 }, 'after loss');
    own.dispose();
  });
});
