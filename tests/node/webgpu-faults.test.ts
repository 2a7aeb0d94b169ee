// The WebGPU backend's choices and faults on a real device (dawn.node + SwiftShader):
// backend choice and fallback reasons, device loss during a call, validation errors, calls in
// flight together, pipeline caching, and work split to (lowered) device limits.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, WebGPUError, type Attention, type GpuLike } from 'sdpa-web';
import { randomMasks, randomTensor } from './support/tensors.js';
import { expectMatchesReference } from './support/tolerance.js';
import { asHardware, asSoftware, gpu, testDevice } from './support/webgpu.js';

const nullAdapter: GpuLike = { requestAdapter: async () => null };

let oracle: Attention;
beforeAll(async () => {
  oracle = await createAttention({ backend: 'scalar' });
});
afterAll(() => oracle.dispose());

describe('choosing the WebGPU backend', () => {
  it("without navigator.gpu: 'webgpu' rejects with a clear error, 'auto' falls back to SIMD and says why", async () => {
    const error = await createAttention({ backend: 'webgpu', gpu: null }).then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(WebGPUError);
    expect((error as WebGPUError).kind).toBe('unavailable');
    expect((error as Error).message).toMatch(/navigator\.gpu is not available/);

    const auto = await createAttention({ backend: 'auto', gpu: null });
    expect(auto.backend).toBe('simd');
    expect(auto.fallbackReason).toMatch(/WebGPU is not available: navigator\.gpu is not available/);
    expect(auto.availableBackends.find((b) => b.name === 'webgpu')).toMatchObject({ available: false });
    auto.dispose();
    // Node 20 has no navigator: the default ('auto', navigator.gpu) falls back the same way.
    const byDefault = await createAttention();
    expect(byDefault.backend).toBe('simd');
    expect(byDefault.fallbackReason).toMatch(/navigator\.gpu/);
    byDefault.dispose();
  });

  it('with a null adapter: rejects / falls back, naming requestAdapter', async () => {
    await expect(createAttention({ backend: 'webgpu', gpu: nullAdapter })).rejects.toThrow(/requestAdapter\(\) returned null/);
    const auto = await createAttention({ gpu: nullAdapter });
    expect(auto.backend).toBe('simd');
    expect(auto.fallbackReason).toMatch(/requestAdapter\(\) returned null/);
    auto.dispose();
  });

  it("'auto' passes over a software fallback adapter and says why; 'webgpu' still takes it", async () => {
    const auto = await createAttention({ gpu: asSoftware() });
    expect(auto.backend).toBe('simd');
    expect(auto.fallbackReason).toMatch(/software fallback \(SwiftShader.*\), slower than the SIMD backend/);
    auto.dispose();
    const forced = await createAttention({ backend: 'webgpu', gpu: asSoftware() });
    expect(forced.backend).toBe('webgpu');
    forced.dispose();
  });

  it("'auto' picks WebGPU when a hardware adapter exists, or uses the gpuDevice given", async () => {
    const auto = await createAttention({ gpu: asHardware() });
    expect(auto.backend).toBe('webgpu');
    expect(auto.fallbackReason).toBeUndefined();
    expect(auto.availableBackends.map((b) => [b.name, b.available])).toEqual([['webgpu', true], ['simd', true], ['scalar', true]]);
    auto.dispose();
    const device = await testDevice();
    const given = await createAttention({ backend: 'auto', gpuDevice: device, gpu: nullAdapter });
    expect(given.backend).toBe('webgpu');
    await expectMatchesReference(given, oracle, randomTensor([3, 8], 1), randomTensor([5, 8], 2), randomTensor([5, 4], 3), {}, { factor: 4 });
    given.dispose();
    device.destroy();
  });

  it('dispose() destroys a device the instance requested, never a gpuDevice handed in', async () => {
    const requested: GPUDevice[] = [];
    const recording: GpuLike = {
      requestAdapter: async () => {
        const adapter = (await gpu.requestAdapter())!;
        return {
          limits: adapter.limits,
          requestDevice: async (desc?: object) => {
            const device = await adapter.requestDevice(desc as GPUDeviceDescriptor);
            requested.push(device);
            return device;
          },
        };
      },
    };
    const attn = await createAttention({ backend: 'webgpu', gpu: recording });
    expect(requested).toHaveLength(1);
    attn.dispose();
    expect((await requested[0]!.lost).reason).toBe('destroyed');

    const mine = await testDevice();
    const borrowed = await createAttention({ backend: 'webgpu', gpuDevice: mine, gpu: recording });
    borrowed.dispose();
    const stillAlive = await Promise.race([mine.lost.then(() => false), new Promise((r) => setTimeout(() => r(true), 100))]);
    expect(stillAlive).toBe(true);
    mine.destroy();
  });

  it('the sync API is CPU-only and says so on a webgpu instance', async () => {
    const attn = await createAttention({ backend: 'webgpu', gpu });
    expect(() => attn.scaledDotProductAttentionSync(randomTensor([2, 4], 1), randomTensor([3, 4], 2), randomTensor([3, 4], 3))).toThrow(
      /CPU backends only.*'webgpu'/,
    );
    // explain, softmax, matmul and the float64 reference stay on the CPU and work.
    const stages = await attn.explain(randomTensor([2, 4], 1), randomTensor([3, 4], 2), randomTensor([3, 4], 3));
    expect(stages.weights.shape).toEqual([2, 3]);
    attn.dispose();
  });
});

describe('WebGPU faults', () => {
  it('device.destroy() during calls rejects them with a device-lost WebGPUError; the next call re-initializes', async () => {
    const device = await testDevice();
    const attn = await createAttention({ backend: 'webgpu', gpuDevice: device, gpu });
    const q = randomTensor([2, 4, 200, 32], 1), k = randomTensor([2, 4, 300, 32], 2), v = randomTensor([2, 4, 300, 32], 3);
    const inFlight = [0, 1, 2].map(() => attn.scaledDotProductAttention(q, k, v, { returnWeights: true }));
    device.destroy();
    const outcomes = await Promise.allSettled(inFlight);
    for (const o of outcomes) {
      expect(o.status).toBe('rejected');
      const reason = (o as PromiseRejectedResult).reason as WebGPUError;
      expect(reason).toBeInstanceOf(WebGPUError);
      expect(reason.kind).toBe('device-lost');
    }
    // Re-initialized on a new device from `gpu`.
    await expectMatchesReference(attn, oracle, randomTensor([5, 16], 4), randomTensor([9, 16], 5), randomTensor([9, 8], 6), { returnWeights: true }, { factor: 4 }, 'after loss');
    expect(attn.backend).toBe('webgpu');
    attn.dispose();
  });

  it("after a loss with no device to be had, 'auto' falls back to SIMD and 'webgpu' rejects", async () => {
    for (const backend of ['auto', 'webgpu'] as const) {
      const device = await testDevice();
      const attn = await createAttention({ backend, gpuDevice: device, gpu: nullAdapter });
      const q = randomTensor([40, 16], 7), k = randomTensor([50, 16], 8), v = randomTensor([50, 8], 9);
      const pending = attn.scaledDotProductAttention(q, k, v);
      device.destroy();
      await expect(pending).rejects.toBeInstanceOf(WebGPUError);
      if (backend === 'auto') {
        await expectMatchesReference(attn, oracle, q, k, v, {}, { factor: 2 }, 'fallback');
        expect(attn.backend).toBe('simd');
        expect(attn.fallbackReason).toMatch(/lost.*requestAdapter\(\) returned null/);
      } else {
        const error = await attn.scaledDotProductAttention(q, k, v).then(() => undefined, (e: unknown) => e);
        expect(error).toBeInstanceOf(WebGPUError);
        expect((error as WebGPUError).kind).toBe('unavailable');
        expect(attn.backend).toBe('webgpu');
      }
      attn.dispose();
    }
  });

  it('a validation error (here: a shader that fails to compile) rejects with kind "validation"; the next call recompiles', async () => {
    const device = await testDevice();
    let sabotage = true;
    // A device whose first shader module is broken, as a driver or shader bug would make it.
    const proxy = new Proxy(device, {
      get(target, name) {
        if (name === 'createShaderModule') {
          return (desc: GPUShaderModuleDescriptor) => target.createShaderModule(sabotage ? { ...desc, code: 'not wgsl' } : desc);
        }
        const value = Reflect.get(target, name, target) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const attn = await createAttention({ backend: 'webgpu', gpuDevice: proxy });
    const q = randomTensor([6, 8], 1), k = randomTensor([7, 8], 2), v = randomTensor([7, 8], 3);
    const error = await attn.scaledDotProductAttention(q, k, v).then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(WebGPUError);
    expect((error as WebGPUError).kind).toBe('validation');
    expect(attn.webgpuInfo()!.pipelines).toEqual([]); // the broken pipeline was not kept
    sabotage = false;
    await expectMatchesReference(attn, oracle, q, k, v, {}, { factor: 4 }, 'after validation error');
    attn.dispose();
    device.destroy();
  });
});

describe('WebGPU calls, caching and limits', () => {
  let attn: Attention;
  beforeAll(async () => {
    attn = await createAttention({ backend: 'webgpu', gpu });
  });
  afterAll(() => attn.dispose());

  it('many calls in flight at once all resolve correctly', async () => {
    const cases = Array.from({ length: 12 }, (_, c) => {
      const [lq, lk, e, ev] = [5 + 13 * c, 3 + 17 * c, [8, 16, 64][c % 3]!, [4, 32][c % 2]!];
      return {
        q: randomTensor([2, lq, e], 10 * c), k: randomTensor([2, lk, e], 10 * c + 1), v: randomTensor([2, lk, ev], 10 * c + 2),
        options: { isCausal: c % 3 === 1, returnWeights: c % 2 === 0 },
      };
    });
    const results = await Promise.all(cases.map(({ q, k, v, options }) => attn.scaledDotProductAttention(q, k, v, options)));
    for (const [c, { q, k, v, options }] of cases.entries()) {
      const cpu = oracle.scaledDotProductAttentionSync(q, k, v, options);
      expect(results[c]!.output.shape).toEqual(cpu.output.shape);
      let worst = 0;
      for (let x = 0; x < cpu.output.data.length; x++) worst = Math.max(worst, Math.abs(results[c]!.output.data[x]! - cpu.output.data[x]!));
      expect(worst, `case ${c}`).toBeLessThan(1e-5);
    }
    expect(attn.webgpuInfo()!.jobsInFlight).toBe(0);
  });

  it('caches pipelines by variant: repeated calls compile nothing new', async () => {
    const q = randomTensor([3, 20, 24], 1), k = randomTensor([3, 30, 24], 2), v = randomTensor([3, 30, 40], 3);
    await attn.scaledDotProductAttention(q, k, v, { isCausal: 'bottom-right' });
    const before = attn.webgpuInfo()!.pipelines;
    // E = 24 and Ev = 40 pad to 32 and 64, rows of whole vec4s; the key tile depends on the adapter's workgroup memory.
    expect(before).toContainEqual(expect.stringMatching(/^flash(-tiled)?:e32:ev64:bk\d+:rows\d+:mask=none:causal=1:stats=0:ranges=0:alibi=0:sinks=0:docs=0:vec4=qkv:heaviest-first$/));
    for (let i = 0; i < 5; i++) {
      await attn.scaledDotProductAttention(q, k, v, { isCausal: i % 2 ? 'top-left' : 'bottom-right' });
      await attn.scaledDotProductAttention(randomTensor([3, 7 + i, 20], 4), randomTensor([3, 9 + i, 20], 5), randomTensor([3, 9 + i, 36], 6), { isCausal: true });
    }
    expect(attn.webgpuInfo()!.pipelines).toEqual(before);
  });

  it('the workgroup caps choose the kernel: tiled where a key tile fits, else per-row, both right', async () => {
    const q = randomTensor([2, 70, 40], 1), k = randomTensor([2, 90, 40], 2), v = randomTensor([2, 90, 24], 3);
    const cases = [
      { gpuLimits: {}, kernel: /^flash-tiled:e64:ev32:bk\d+:/ },
      // 2 heads of 70 rows: 16 rows a workgroup, 64 invocations, within the cap.
      { gpuLimits: { maxComputeInvocationsPerWorkgroup: 128 }, kernel: /^flash-tiled:e64:ev32:bk\d+:rows16:/ },
      { gpuLimits: { maxComputeWorkgroupStorageSize: 4096 }, kernel: /^flash:e64:ev32:bk10:/ }, // 4096 / (4·(64 + 32))
    ];
    for (const { gpuLimits, kernel } of cases) {
      const capped = await createAttention({ backend: 'webgpu', gpu, gpuLimits });
      expect(capped.webgpuInfo()!.limits).toMatchObject(gpuLimits);
      for (const options of [{}, { isCausal: true, returnWeights: true }]) {
        await expectMatchesReference(capped, oracle, q, k, v, options, { factor: 4 }, JSON.stringify(gpuLimits));
      }
      expect(capped.webgpuInfo()!.pipelines.filter((key) => key.startsWith('flash'))).toEqual([expect.stringMatching(kernel), expect.stringMatching(kernel)]);
      capped.dispose();
    }
  });

  it('work beyond (lowered) buffer and dispatch limits is split into several buffers and dispatches', async () => {
    // Caps far below the device's force every kind of split on small, checkable problems:
    // whole heads per chunk, query rows of one head per chunk, and grids cut at 2 workgroups.
    const caps = [
      { maxStorageBufferBindingSize: 2 * 150 * 32 * 4, maxComputeWorkgroupsPerDimension: 2 }, // 2 heads of Q per chunk,
      { maxBufferSize: 90 * 32 * 4, maxComputeWorkgroupsPerDimension: 3 },
    ];
    for (const gpuLimits of caps) {
      const small = await createAttention({ backend: 'webgpu', gpu, gpuLimits });
      expect(small.webgpuInfo()!.limits).toMatchObject(gpuLimits);
      const q = randomTensor([2, 6, 150, 32], 1), k = randomTensor([2, 2, 90, 32], 2), v = randomTensor([2, 2, 90, 16], 3);
      await expectMatchesReference(small, oracle, q, k, v, { enableGqa: true, returnWeights: true }, { factor: 4 }, 'gqa + weights, split');
      await expectMatchesReference(small, oracle, q, k, v, { enableGqa: true, isCausal: 'bottom-right' }, { factor: 4 }, 'causal, split');
      for (const [kind, mask] of Object.entries(randomMasks([2, 1, 150, 90], 4))) {
        await expectMatchesReference(small, oracle, q, k, v, { enableGqa: true, attnMask: mask, returnWeights: true }, { factor: 4 }, `${kind} mask, split`);
      }
      small.dispose();
    }
  });

  it("work that cannot be split (one head's keys beyond the limit) is a RangeError, and the instance survives", async () => {
    const small = await createAttention({ backend: 'webgpu', gpu, gpuLimits: { maxStorageBufferBindingSize: 4096 } });
    const error = await small
      .scaledDotProductAttention(randomTensor([4, 64], 1), randomTensor([100, 64], 2), randomTensor([100, 64], 3))
      .then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(RangeError);
    expect((error as Error).message).toMatch(/maxStorageBufferBindingSize/);
    await expectMatchesReference(small, oracle, randomTensor([4, 8], 1), randomTensor([10, 8], 2), randomTensor([10, 8], 3), {}, { factor: 4 });
    small.dispose();
  });
});
