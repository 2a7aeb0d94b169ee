// GPU-resident tensors and the GPU KV cache on the 'webgpu' backend (dawn.node + SwiftShader):
// inputs `{ buffer, shape, offset? }` read in place, `outputLocation: 'gpu'` (a new buffer or an
// `out` GPUBuffer), against the float64 reference; a wrapped device showing that a chain of
// calls on GPU tensors and a GPU cache (float32, and int8/int4 quantized on the GPU) writes no
// tensor bytes with writeBuffer and maps nothing, with live GPU buffers flat over a decode loop; and the errors of bad buffers, a
// disposed cache and a lost device.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, WebGPUError, type Attention, type AttentionOptions, type GpuTensor, type Tensor } from 'sdpa-web';
import { randomTensor } from './support/tensors.js';
import { expectResultMatchesReference } from './support/tolerance.js';
import { testDevice } from './support/webgpu.js';

const STORAGE = 0x80, COPY_SRC = 0x4, COPY_DST = 0x8, MAP_READ = 0x1, UNIFORM = 0x40;

let device: GPUDevice;
let oracle: Attention;
beforeAll(async () => {
  device = await testDevice();
  oracle = await createAttention({ backend: 'scalar' });
});
afterAll(() => {
  oracle.dispose();
  device.destroy();
});

/** `t` uploaded to a new STORAGE buffer at byte `offset` (the test's own upload, on the real device). */
function toGpu(t: Tensor, offset = 0, usage = STORAGE | COPY_SRC | COPY_DST): GpuTensor {
  const buffer = device.createBuffer({ size: offset + Math.max(4, t.data.byteLength), usage });
  if (t.data.length) device.queue.writeBuffer(buffer, offset, t.data as Float32Array<ArrayBuffer>);
  return { buffer, shape: t.shape, offset };
}

async function fromGpu(t: GpuTensor): Promise<Tensor> {
  const n = t.shape.reduce((a, b) => a * b, 1);
  const staging = device.createBuffer({ size: Math.max(4, 4 * n), usage: MAP_READ | COPY_DST });
  const encoder = device.createCommandEncoder();
  if (n) encoder.copyBufferToBuffer(t.buffer as GPUBuffer, t.offset ?? 0, staging, 0, 4 * n);
  device.queue.submit([encoder.finish()]);
  await staging.mapAsync(MAP_READ);
  const data = new Float32Array(staging.getMappedRange().slice(0, 4 * n));
  staging.destroy();
  return { data, shape: t.shape };
}

/**
 * The device as the library sees it, counting what it does: bytes of each writeBuffer,
 * mapAsync calls, and live buffers (createBuffer minus destroy).
 */
function countingDevice(real: GPUDevice) {
  const counts = { writes: [] as number[], maps: 0, live: new Set<GPUBuffer>() };
  const queue = new Proxy(real.queue, {
    get(target, name) {
      if (name === 'writeBuffer') {
        return (buffer: GPUBuffer, offset: number, data: ArrayBufferView, dataOffset = 0, size?: number) => {
          const element = 'BYTES_PER_ELEMENT' in data ? (data as Float32Array).BYTES_PER_ELEMENT : 1;
          counts.writes.push(size !== undefined ? size * element : data.byteLength - dataOffset * element);
          target.writeBuffer(buffer, offset, data as ArrayBufferView<ArrayBuffer>, dataOffset, size);
        };
      }
      const value = Reflect.get(target, name, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const proxy = new Proxy(real, {
    get(target, name) {
      if (name === 'queue') return queue;
      if (name === 'createBuffer') {
        return (desc: GPUBufferDescriptor) => {
          const b = target.createBuffer(desc);
          counts.live.add(b);
          const destroy = b.destroy.bind(b), mapAsync = b.mapAsync.bind(b);
          b.destroy = () => {
            counts.live.delete(b);
            destroy();
          };
          b.mapAsync = (...args: Parameters<GPUBuffer['mapAsync']>) => {
            counts.maps++;
            return mapAsync(...args);
          };
          return b;
        };
      }
      const value = Reflect.get(target, name, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { proxy, counts };
}

describe('GPU-resident tensors on webgpu', () => {
  let attn: Attention;
  beforeAll(async () => {
    attn = await createAttention({ backend: 'webgpu', gpuDevice: device });
  });
  afterAll(() => attn.dispose());

  const cases: [string, number[], number[], number[], AttentionOptions][] = [
    ['plain', [2, 3, 19, 24], [2, 3, 23, 24], [2, 3, 23, 12], {}],
    ['causal, GQA', [1, 4, 7, 16], [1, 2, 30, 16], [1, 2, 30, 16], { isCausal: 'bottom-right', enableGqa: true }],
    ['softcap, window, sinks', [1, 2, 9, 8], [1, 2, 33, 8], [1, 2, 33, 8], { softcap: 5, window: { left: 4, right: 0 }, sinks: new Float32Array([0.5, -1]) }],
  ];
  for (const [what, qs, ks, vs, options] of cases) {
    it(`${what}: GPU inputs at offsets 0, 256 (bound in place) and 12 (copied on the GPU), CPU and GPU outputs`, async () => {
      const q = randomTensor(qs, 1), k = randomTensor(ks, 2), v = randomTensor(vs, 3);
      for (const offset of [0, 256, 12]) {
        const [gq, gk, gv] = [toGpu(q, offset), toGpu(k, offset), toGpu(v, offset)];
        const onCpu = await attn.scaledDotProductAttention(gq, gk, gv, options);
        expectResultMatchesReference(onCpu, oracle, q, k, v, options, 4, `${what} offset ${offset}, CPU output`);
        const onGpu = await attn.scaledDotProductAttention(gq, gk, gv, { ...options, outputLocation: 'gpu' });
        expect(onGpu.output.buffer.usage & (STORAGE | COPY_SRC)).toBe(STORAGE | COPY_SRC);
        expectResultMatchesReference({ output: await fromGpu(onGpu.output) }, oracle, q, k, v, options, 4, `${what} offset ${offset}, GPU output`);
        onGpu.output.buffer.destroy();
        // Mixed: a CPU query with GPU key/value, into a caller's `out` buffer.
        const out = device.createBuffer({ size: onCpu.output.data.byteLength + 64, usage: STORAGE | COPY_SRC | COPY_DST });
        const into = await attn.scaledDotProductAttention(q, gk, gv, { ...options, outputLocation: 'gpu', out });
        expect(into.output.buffer).toBe(out);
        expectResultMatchesReference({ output: await fromGpu(into.output) }, oracle, q, k, v, options, 4, `${what} offset ${offset}, out buffer`);
        for (const t of [gq, gk, gv]) t.buffer.destroy();
        out.destroy();
      }
    });
  }

  it('a call cut into chunks (small binding limit) reads GPU inputs and writes a GPU output piece by piece', async () => {
    const small = await createAttention({ backend: 'webgpu', gpuDevice: device, gpuLimits: { maxStorageBufferBindingSize: 4096 } });
    const q = randomTensor([2, 3, 40, 16], 4), k = randomTensor([2, 3, 50, 16], 5), v = randomTensor([2, 3, 50, 8], 6);
    const [gq, gk, gv] = [toGpu(q), toGpu(k), toGpu(v)];
    const got = await small.scaledDotProductAttention(gq, gk, gv, { outputLocation: 'gpu', isCausal: true });
    expectResultMatchesReference({ output: await fromGpu(got.output) }, oracle, q, k, v, { isCausal: true }, 4, 'chunked');
    for (const t of [gq, gk, gv, got.output]) t.buffer.destroy();
    small.dispose();
  });

  it('a GPU KV cache appended from GPU tensors and from arrays matches one call on the concatenation', async () => {
    const B = 2, Hkv = 2, Hq = 4, E = 16, Ev = 8;
    const cache = attn.createKvCache({ batch: B, kvHeads: Hkv, maxLength: 40, headDim: E, valueDim: Ev });
    const keys: Tensor[] = [], values: Tensor[] = [];
    for (let step = 0; step < 6; step++) {
      const n = step === 0 ? 5 : 1;
      const k = randomTensor([B, Hkv, n, E], 10 + step), v = randomTensor([B, Hkv, n, Ev], 20 + step);
      keys.push(k);
      values.push(v);
      if (step % 2) {
        const [gk, gv] = [toGpu(k), toGpu(v)];
        cache.append(gk, gv);
        gk.buffer.destroy();
        gv.buffer.destroy();
      } else {
        cache.append(k, v);
      }
      const q = randomTensor([B, Hq, 1, E], 30 + step);
      const got = await attn.scaledDotProductAttention(toGpu(q), cache, { enableGqa: true, isCausal: true, outputLocation: 'gpu' });
      const concat = (parts: Tensor[], dim: number): Tensor => {
        const L = parts.reduce((s, t) => s + t.shape[2]!, 0);
        const data = new Float32Array(B * Hkv * L * dim);
        for (let head = 0; head < B * Hkv; head++) {
          let at = head * L * dim;
          for (const t of parts) {
            const n = t.shape[2]!;
            data.set(t.data.subarray(head * n * dim, (head + 1) * n * dim), at);
            at += n * dim;
          }
        }
        return { data, shape: [B, Hkv, L, dim] };
      };
      const options: AttentionOptions = { enableGqa: true, isCausal: 'bottom-right' };
      expectResultMatchesReference({ output: await fromGpu(got.output) }, oracle, q, concat(keys, E), concat(values, Ev), options, 4, `step ${step}`);
      got.output.buffer.destroy();
    }
    cache.dispose();
  });

  it('bad buffers and locations are clear TypeErrors/RangeErrors', async () => {
    const q = randomTensor([1, 2, 4, 8], 1);
    const g = toGpu(q);
    const noStorage = { buffer: device.createBuffer({ size: 256, usage: COPY_DST | UNIFORM }), shape: [1, 2, 4, 8] };
    await expect(attn.scaledDotProductAttention(noStorage, g, g)).rejects.toThrow(/query\.buffer needs GPUBufferUsage STORAGE.*created with COPY_DST/);
    await expect(attn.scaledDotProductAttention(g, { ...g, offset: 6 }, g)).rejects.toThrow(RangeError);
    await expect(attn.scaledDotProductAttention(g, { ...g, offset: 6 }, g)).rejects.toThrow(/key\.offset must be .* multiple of 4; got 6/);
    await expect(attn.scaledDotProductAttention(g, g, { ...g, offset: 16 })).rejects.toThrow(/value: shape \[1, 2, 4, 8\] needs 256 bytes from offset 16, past the end of its 256-byte buffer/);
    await expect(attn.scaledDotProductAttention(g, { buffer: {} as GPUBuffer, shape: [1] }, g)).rejects.toThrow(/key\.buffer must be a GPUBuffer/);
    await expect(attn.scaledDotProductAttention(g, g, g, { outputLocation: 'gpu', returnWeights: true })).rejects.toThrow(/outputLocation 'gpu' returns the output only/);
    await expect(attn.scaledDotProductAttention(g, g, g, { outputLocation: 'GPU' as 'gpu' })).rejects.toThrow(/outputLocation must be 'cpu' or 'gpu'/);
    const tooSmall = device.createBuffer({ size: 64, usage: STORAGE | COPY_DST });
    await expect(attn.scaledDotProductAttention(g, g, g, { outputLocation: 'gpu', out: tooSmall })).rejects.toThrow(/out is a 64-byte GPUBuffer but the output \[1, 2, 4, 8\] needs 256 bytes/);
    const cpu = await createAttention({ backend: 'simd', threads: 1 });
    await expect(cpu.scaledDotProductAttention(q, g, q)).rejects.toThrow(/key is a GPU-resident tensor .* this instance uses 'simd'/);
    expect(() => cpu.scaledDotProductAttentionSync(q, q, q, { outputLocation: 'gpu' })).toThrow(/outputLocation 'gpu' needs backend 'webgpu'; this instance uses 'simd'/);
    await expect(attn.explain(q, q, q, { outputLocation: 'gpu' })).rejects.toThrow(/explain returns CPU arrays/);
    expect(() => cpu.referenceAttention(q, q, q, { outputLocation: 'gpu' })).toThrow(/referenceAttention returns CPU arrays/);
    const cpuCache = cpu.createKvCache({ batch: 1, kvHeads: 2, maxLength: 8, headDim: 8 });
    expect(() => cpuCache.append(g, g)).toThrow(/this KvCache is in wasm memory/);
    await expect(attn.scaledDotProductAttention(q, cpuCache)).rejects.toThrow(/this KvCache is in wasm memory/);
    const gpuCache = attn.createKvCache({ batch: 1, kvHeads: 2, maxLength: 8, headDim: 8 });
    await expect(cpu.scaledDotProductAttention(q, gpuCache)).rejects.toThrow(/this KvCache is in GPU memory/);
    const noCopySrc = toGpu(q, 0, STORAGE);
    expect(() => gpuCache.append(noCopySrc, noCopySrc)).toThrow(/key\.buffer needs GPUBufferUsage COPY_SRC \| STORAGE/);
    gpuCache.dispose();
    expect(() => gpuCache.append(q, q)).toThrow(/this KvCache was disposed/);
    await expect(attn.scaledDotProductAttention(q, gpuCache)).rejects.toThrow(/this KvCache was disposed/);
    expect(() => gpuCache.dispose()).toThrow(/this KvCache was disposed/);
    cpuCache.dispose();
    cpu.dispose();
    for (const b of [g.buffer, noStorage.buffer, tooSmall, noCopySrc.buffer]) b.destroy();
  });
});

describe('flash-decoding on webgpu (split-K partials merged by log-sum-exp)', () => {
  let attn: Attention;
  beforeAll(async () => {
    attn = await createAttention({ backend: 'webgpu', gpuDevice: device });
  });
  afterAll(() => attn.dispose());

  // Split boundaries: 128 keys a split, chosen from 256 keys (cpp/webgpu/plan.h).
  const variants: [string, (B: number, Hq: number, Lq: number, Lk: number) => AttentionOptions][] = [
    ['no options', () => ({})],
    ['causal bottom-right, GQA, softcap', () => ({ isCausal: 'bottom-right', enableGqa: true, softcap: 4 })],
    ['bool mask, ALiBi, sinks', (B, Hq, Lq, Lk) => ({
      attnMask: { data: Uint8Array.from({ length: Lq * Lk }, (_, i) => (i * 7919) % 5 !== 0 ? 1 : 0), shape: [Lq, Lk] },
      alibi: true,
      sinks: Float32Array.from({ length: Hq }, (_, h) => h - 1),
    })],
    ['additive mask, window, keyLengths (one batch sees one key, one none)', (B, Hq, Lq, Lk) => ({
      attnMask: { data: Float32Array.from({ length: Lk }, (_, j) => (j % 11 === 0 ? -Infinity : Math.sin(j))), shape: [Lk] },
      window: { left: 200, right: 0 },
      isCausal: 'bottom-right',
      keyLengths: Int32Array.from({ length: B }, (_, b) => [Lk, 1, 0][b % 3]!),
    })],
  ];
  for (const Lk of [255, 256, 257, 383, 384, 385, 700]) {
    it(`Lk = ${Lk}: Lq = 1, 3 and 9 (the flash kernel) against the reference, every variant`, async () => {
      const B = 3, Hq = 4, Hkv = 2, E = 24, Ev = 20;
      for (const Lq of [1, 3, 9]) {
        const q = randomTensor([B, Hq, Lq, E], Lk + Lq), k = randomTensor([B, Hq, Lk, E], 2 * Lk), v = randomTensor([B, Hq, Lk, Ev], 3 * Lk);
        for (const [what, make] of variants) {
          const options = make(B, Hq, Lq, Lk);
          const gqa = options.enableGqa;
          const kk = gqa ? { data: k.data.subarray(0, B * Hkv * Lk * E), shape: [B, Hkv, Lk, E] } : k;
          const vv = gqa ? { data: v.data.subarray(0, B * Hkv * Lk * Ev), shape: [B, Hkv, Lk, Ev] } : v;
          const got = await attn.scaledDotProductAttention(q, kk, vv, options);
          expectResultMatchesReference(got, oracle, q, kk, vv, options, 4, `Lk ${Lk} Lq ${Lq} ${what}`);
        }
      }
      const kernels = attn.webgpuInfo()!.pipelines.join(' ');
      expect(kernels).toMatch(Lk >= 256 ? /decode-(partial|stream):.*decode-merge:|decode-merge:.*decode-(partial|stream):/ : /flash/);
    });
  }
});

describe('a decode loop on a wrapped device', () => {
  it('GPU tensors and a GPU cache: no tensor bytes through writeBuffer, nothing mapped, live buffers flat over 32 steps', async () => {
    const real = await testDevice();
    const { proxy, counts } = countingDevice(real);
    const attn = await createAttention({ backend: 'webgpu', gpuDevice: proxy as unknown as GPUDevice });
    const B = 1, Hq = 8, Hkv = 2, E = 32, Ev = 32, prompt = 20;
    // Inputs made outside the library (the model's activations).
    const upload = (t: Tensor): GpuTensor => {
      const buffer = real.createBuffer({ size: t.data.byteLength, usage: STORAGE | COPY_SRC | COPY_DST });
      real.queue.writeBuffer(buffer, 0, t.data as Float32Array<ArrayBuffer>);
      return { buffer, shape: t.shape };
    };
    const cache = attn.createKvCache({ batch: B, kvHeads: Hkv, maxLength: 64, headDim: E, valueDim: Ev });
    const pk = upload(randomTensor([B, Hkv, prompt, E], 1)), pv = upload(randomTensor([B, Hkv, prompt, Ev], 2));
    const pq = upload(randomTensor([B, Hq, prompt, E], 3));
    cache.append(pk, pv);
    const out = real.createBuffer({ size: 4 * B * Hq * prompt * Ev, usage: STORAGE | COPY_SRC | COPY_DST });
    await attn.scaledDotProductAttention(pq, cache, { enableGqa: true, isCausal: true, outputLocation: 'gpu', out });
    // A chain: the prefill's output feeds the next call as its query (an output may not be an input's buffer).
    await expect(attn.scaledDotProductAttention({ buffer: out, shape: [B, Hq, prompt, E] }, cache, { enableGqa: true, outputLocation: 'gpu', out })).rejects.toThrow(/out is also the query's buffer/);
    const chained = await attn.scaledDotProductAttention({ buffer: out, shape: [B, Hq, prompt, E] }, cache, { enableGqa: true, outputLocation: 'gpu' });
    chained.output.buffer.destroy();
    const stepK = upload(randomTensor([B, Hkv, 1, E], 4)), stepV = upload(randomTensor([B, Hkv, 1, Ev], 5));
    const stepQ = upload(randomTensor([B, Hq, 1, E], 6));
    const stepOut = real.createBuffer({ size: 4 * B * Hq * Ev, usage: STORAGE | COPY_SRC | COPY_DST });
    const liveAt: number[] = [];
    for (let step = 0; step < 32; step++) {
      cache.append(stepK, stepV);
      await attn.scaledDotProductAttention(stepQ, cache, { enableGqa: true, isCausal: true, outputLocation: 'gpu', out: stepOut });
      liveAt.push(counts.live.size);
    }
    expect(new Set(liveAt).size, `live buffers per step ${liveAt.join(' ')}`).toBe(1);
    expect(counts.maps).toBe(0);
    // Only the uniform blocks (144 bytes) and the variants' words (16 bytes here) are written.
    expect(Math.max(...counts.writes)).toBeLessThanOrEqual(144);
    const smallestTensor = 4 * B * Hkv * E;
    expect(Math.max(...counts.writes)).toBeLessThan(smallestTensor);
    expect(cache.length).toBe(prompt + 32);
    // The result of the loop is right: the last step against the reference.
    const read = async (buffer: GPUBuffer, bytes: number) => {
      const staging = real.createBuffer({ size: bytes, usage: MAP_READ | COPY_DST });
      const encoder = real.createCommandEncoder();
      encoder.copyBufferToBuffer(buffer, 0, staging, 0, bytes);
      real.queue.submit([encoder.finish()]);
      await staging.mapAsync(MAP_READ);
      const data = new Float32Array(staging.getMappedRange().slice(0));
      staging.destroy();
      return data;
    };
    const keyRows = randomTensor([B, Hkv, prompt, E], 1), valueRows = randomTensor([B, Hkv, prompt, Ev], 2);
    const stepKey = randomTensor([B, Hkv, 1, E], 4), stepValue = randomTensor([B, Hkv, 1, Ev], 5);
    const L = prompt + 32;
    const dense = (p: Tensor, s: Tensor, dim: number): Tensor => {
      const data = new Float32Array(B * Hkv * L * dim);
      for (let h = 0; h < B * Hkv; h++) {
        data.set(p.data.subarray(h * prompt * dim, (h + 1) * prompt * dim), h * L * dim);
        for (let t = prompt; t < L; t++) data.set(s.data.subarray(h * dim, (h + 1) * dim), (h * L + t) * dim);
      }
      return { data, shape: [B, Hkv, L, dim] };
    };
    const options: AttentionOptions = { enableGqa: true, isCausal: 'bottom-right' };
    const output = { data: await read(stepOut, 4 * B * Hq * Ev), shape: [B, Hq, 1, Ev] };
    expectResultMatchesReference({ output }, oracle, randomTensor([B, Hq, 1, E], 6), dense(keyRows, stepKey, E), dense(valueRows, stepValue, Ev), options, 4, 'step 32');
    cache.dispose();
    attn.dispose();
    for (const b of [pk.buffer, pv.buffer, pq.buffer, stepK.buffer, stepV.buffer, stepQ.buffer, out, stepOut]) b.destroy();
    expect(counts.live.size, 'the cache destroyed its buffers').toBe(0);
    real.destroy();
  });

  it('GPU tensors into int8/int4 caches: quantized on the GPU, no tensor bytes through writeBuffer, nothing mapped, live buffers flat', async () => {
    const real = await testDevice();
    const { proxy, counts } = countingDevice(real);
    const attn = await createAttention({ backend: 'webgpu', gpuDevice: proxy as unknown as GPUDevice });
    const B = 1, Hq = 8, Hkv = 2, E = 32, prompt = 260;
    const upload = (t: Tensor): GpuTensor => {
      const buffer = real.createBuffer({ size: t.data.byteLength, usage: STORAGE | COPY_SRC | COPY_DST });
      real.queue.writeBuffer(buffer, 0, t.data as Float32Array<ArrayBuffer>);
      return { buffer, shape: t.shape };
    };
    const stepK = upload(randomTensor([B, Hkv, 1, E], 14)), stepV = upload(randomTensor([B, Hkv, 1, E], 15));
    const stepQ = upload(randomTensor([B, Hq, 1, E], 16));
    const stepOut = real.createBuffer({ size: 4 * B * Hq * E, usage: STORAGE | COPY_SRC | COPY_DST });
    for (const dtype of ['int8', 'int4'] as const) {
      const cache = attn.createKvCache({ batch: B, kvHeads: Hkv, maxLength: 300, headDim: E, dtype });
      cache.append(upload(randomTensor([B, Hkv, prompt, E], 12)), upload(randomTensor([B, Hkv, prompt, E], 13)));
      const liveAt: number[] = [];
      for (let step = 0; step < 8; step++) {
        cache.append(stepK, stepV);
        await attn.scaledDotProductAttention(stepQ, cache, { enableGqa: true, isCausal: true, outputLocation: 'gpu', out: stepOut });
        liveAt.push(counts.live.size);
      }
      expect(new Set(liveAt).size, `${dtype}: live buffers per step ${liveAt.join(' ')}`).toBe(1);
      // The streaming quantized kernel where the device has subgroups, else the tile kernel.
      const decode = attn.webgpuInfo()!.limits.subgroups ? 'decode-stream-quantized:' : 'decode-partial-quantized:';
      expect(attn.webgpuInfo()!.pipelines.some((key) => key.startsWith(decode))).toBe(true);
      cache.dispose();
    }
    expect(counts.maps).toBe(0);
    // Uniform blocks (at most 144 bytes), each batch's held/added counts and the variants' words.
    expect(Math.max(...counts.writes)).toBeLessThanOrEqual(144);
    attn.dispose();
    real.destroy();
  });

  it('a device lost under a GPU cache: appends and calls reject with a device-lost WebGPUError naming the cache', async () => {
    const real = await testDevice();
    const attn = await createAttention({ backend: 'webgpu', gpuDevice: real });
    const cache = attn.createKvCache({ batch: 1, kvHeads: 1, maxLength: 8, headDim: 8 });
    const k = randomTensor([1, 1, 2, 8], 1), q = randomTensor([1, 1, 1, 8], 2);
    cache.append(k, k);
    real.destroy();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const appendError = (() => {
      try {
        cache.append(k, k);
      } catch (e) {
        return e;
      }
    })();
    expect(appendError).toBeInstanceOf(WebGPUError);
    expect((appendError as WebGPUError).kind).toBe('device-lost');
    expect((appendError as Error).message).toMatch(/the GPU device holding this KvCache was lost/);
    const callError = await attn.scaledDotProductAttention(q, cache).then(() => undefined, (e: unknown) => e);
    expect(callError).toBeInstanceOf(WebGPUError);
    expect((callError as Error).message).toMatch(/this KvCache was lost|device was lost/);
    cache.dispose(); // still allowed: frees nothing more
    attn.dispose();
  });
});
