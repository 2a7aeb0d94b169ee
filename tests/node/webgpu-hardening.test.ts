// WebGPU hardening (checklist items 13, 14, 16; item 16 for the backward too) on a real device (dawn.node + SwiftShader):
// injected faults (requestDevice refused, out-of-memory on buffer creation) that must end in a
// typed error and a call that recovers; guard words after every storage buffer that must survive
// odd-shaped runs (out-of-bounds GPU writes); and live GPU buffers / error scopes that must
// return to their baseline over many calls and create/run/dispose cycles.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, WebGPUError, type Attention, type AttentionOptions, type BackwardOptions, type GpuLike, type Tensor } from 'sdpa-web';
import { asCached, asScoredQuery } from './support/quantized.js';
import { randomMasks, randomTensor } from './support/tensors.js';
import { expectMatchesReference, expectResultMatchesReference } from './support/tolerance.js';
import { asHardware, testDevice } from './support/webgpu.js';

const STORAGE = 0x80, COPY_SRC = 0x4, COPY_DST = 0x8, MAP_READ = 0x1;

/** Rejects if `promise` has not settled within `ms`: an injected fault must never hang a call. */
function bounded<T>(promise: Promise<T>, ms: number, label: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${label}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const settled = (p: Promise<unknown>): Promise<unknown> => p.then(() => undefined, (e: unknown) => e);

/** A Proxy around a real device whose methods may be replaced (`overrides`), others bound to it. */
function proxyDevice(device: GPUDevice, overrides: Record<string, (target: GPUDevice, ...args: never[]) => unknown>): GPUDevice {
  return new Proxy(device, {
    get(target, name) {
      const own = typeof name === 'string' ? overrides[name] : undefined;
      if (own) return (...args: never[]) => own(target, ...args);
      const value = Reflect.get(target, name, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** The first `count` floats of `buffer`, read back through a staging buffer of the test's own. */
async function readFloats(device: GPUDevice, buffer: GPUBuffer, count: number): Promise<Float32Array> {
  const staging = device.createBuffer({ size: 4 * count, usage: MAP_READ | COPY_DST });
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(buffer, 0, staging, 0, 4 * count);
  device.queue.submit([encoder.finish()]);
  await staging.mapAsync(MAP_READ);
  const data = new Float32Array(staging.getMappedRange().slice(0));
  staging.destroy();
  return data;
}

let oracle: Attention;
beforeAll(async () => {
  oracle = await createAttention({ backend: 'scalar' });
});
afterAll(() => oracle.dispose());

describe('13. injected GPU faults: typed errors, no hang, recovery or fallback', () => {
  it("requestDevice rejecting: 'webgpu' rejects with kind 'unavailable' naming requestDevice; 'auto' falls back to SIMD and says why", async () => {
    const hardware = asHardware();
    const refusing: GpuLike = {
      requestAdapter: async () => {
        const adapter = (await hardware.requestAdapter())!;
        return { ...adapter, requestDevice: async () => Promise.reject(new Error('injected: device creation refused')) };
      },
    };
    const error = await bounded(settled(createAttention({ backend: 'webgpu', gpu: refusing })), 10_000, 'webgpu');
    expect(error).toBeInstanceOf(WebGPUError);
    expect((error as WebGPUError).kind).toBe('unavailable');
    expect((error as Error).message).toMatch(/requestDevice\(\) failed: .*injected: device creation refused/);

    const auto = await bounded(createAttention({ backend: 'auto', gpu: refusing }), 10_000, 'auto');
    expect(auto.backend).toBe('simd');
    expect(auto.fallbackReason).toMatch(/WebGPU is not available: GPUAdapter\.requestDevice\(\) failed: .*injected/);
    // The call after the fault works (on the CPU).
    await expectMatchesReference(auto, oracle, randomTensor([5, 8], 1), randomTensor([7, 8], 2), randomTensor([7, 4], 3), {}, { factor: 4 }, 'after fallback');
    auto.dispose();
  });

  it("out-of-memory reported by the 'out-of-memory' error scope: the call rejects with kind 'out-of-memory'; the next call succeeds", async () => {
    const device = await testDevice();
    // One call's buffer creation "runs out of memory" the way WebGPU reports it: the buffer
    // object exists, and the enclosing 'out-of-memory' error scope pops a GPUOutOfMemoryError.
    let armed = false;
    const scopes: { filter: string; oom: boolean }[] = [];
    const proxy = proxyDevice(device, {
      pushErrorScope: (t, filter: string) => {
        scopes.push({ filter, oom: false });
        t.pushErrorScope(filter as GPUErrorFilter);
      },
      popErrorScope: (t) => {
        const scope = scopes.pop()!;
        const real = t.popErrorScope();
        return scope.oom ? real.then(() => ({ message: 'injected: out of memory creating a buffer' })) : real;
      },
      createBuffer: (t, desc: GPUBufferDescriptor) => {
        if (armed && desc.usage & STORAGE) {
          const scope = [...scopes].reverse().find((s) => s.filter === 'out-of-memory');
          if (scope) scope.oom = true;
          armed = false;
        }
        return t.createBuffer(desc);
      },
    });
    const attn = await createAttention({ backend: 'webgpu', gpuDevice: proxy });
    const q = randomTensor([2, 19, 24], 1), k = randomTensor([2, 23, 24], 2), v = randomTensor([2, 23, 12], 3);
    armed = true;
    const error = await bounded(settled(attn.scaledDotProductAttention(q, k, v, { returnWeights: true })), 30_000, 'oom call');
    expect(error).toBeInstanceOf(WebGPUError);
    expect((error as WebGPUError).kind).toBe('out-of-memory');
    expect((error as Error).message).toMatch(/injected: out of memory/);
    expect(scopes).toEqual([]); // every scope the call pushed was popped
    expect(attn.webgpuInfo()!.jobsInFlight).toBe(0);
    await bounded(expectMatchesReference(attn, oracle, q, k, v, { returnWeights: true }, { factor: 4 }, 'after oom'), 30_000, 'next call');
    attn.dispose();
    device.destroy();
  });

  it("createBuffer throwing a RangeError (as Chromium does for some oversized buffers): kind 'out-of-memory', nothing leaks, the next call succeeds", async () => {
    const device = await testDevice();
    let armed = false;
    let live = 0, scopeDepth = 0;
    const proxy = proxyDevice(device, {
      pushErrorScope: (t, filter: string) => {
        scopeDepth++;
        t.pushErrorScope(filter as GPUErrorFilter);
      },
      popErrorScope: (t) => {
        scopeDepth--;
        return t.popErrorScope();
      },
      createBuffer: (t, desc: GPUBufferDescriptor) => {
        if (armed && desc.usage & STORAGE && desc.usage & COPY_SRC) {
          armed = false; // the output buffer of the first chunk, after the inputs were uploaded
          throw new RangeError('injected: Failed to execute createBuffer: out of memory');
        }
        const b = t.createBuffer(desc);
        live++;
        const destroy = b.destroy.bind(b);
        b.destroy = () => {
          live--;
          destroy();
        };
        return b;
      },
    });
    const attn = await createAttention({ backend: 'webgpu', gpuDevice: proxy });
    const q = randomTensor([3, 17, 20], 4), k = randomTensor([3, 29, 20], 5), v = randomTensor([3, 29, 9], 6);
    await attn.scaledDotProductAttention(q, k, v, { isCausal: true });
    const standing = live;  // the instance's stand-ins and reused upload buffers, until dispose
    for (let round = 0; round < 3; round++) {
      armed = true;
      const error = await bounded(settled(attn.scaledDotProductAttention(q, k, v, { isCausal: true })), 30_000, 'throwing call');
      expect(error).toBeInstanceOf(WebGPUError);
      expect((error as WebGPUError).kind).toBe('out-of-memory');
      expect((error as Error).message).toMatch(/injected: Failed to execute createBuffer/);
      expect(live, 'buffers of the failed call destroyed').toBe(standing);
      expect(scopeDepth, 'error scopes of the failed call popped').toBe(0);
      expect(attn.webgpuInfo()!.jobsInFlight).toBe(0);
      await bounded(expectMatchesReference(attn, oracle, q, k, v, { isCausal: true }, { factor: 4 }, 'after throw'), 30_000, 'next call');
      expect(live).toBe(standing);
    }
    attn.dispose();
    expect(live).toBe(0);
    device.destroy();
  });
});

describe('14. out-of-bounds canaries after every storage buffer', () => {
  it('guard words after each storage buffer (outputs, stats, weights, stand-ins, reused uploads) are unchanged after odd-shaped runs', async () => {
    const device = await testDevice();
    const GUARD = 4096; // bytes after the requested size, bound with the buffer (the bindings give no size)
    const pattern = new Uint32Array(GUARD / 4).map((_, i) => (0xdeadbeef ^ (i * 0x9e3779b1)) >>> 0);
    const held: { buffer: GPUBuffer; size: number; usage: number }[] = [];
    const proxy = proxyDevice(device, {
      createBuffer: (t, desc: GPUBufferDescriptor) => {
        if (!(desc.usage & STORAGE)) return t.createBuffer(desc);
        const buffer = t.createBuffer({ ...desc, size: desc.size + GUARD, usage: desc.usage | COPY_SRC | COPY_DST });
        t.queue.writeBuffer(buffer, desc.size, pattern);
        // Destroyed by the test once its guard has been read back.
        buffer.destroy = () => {
          held.push({ buffer, size: desc.size, usage: desc.usage });
        };
        return buffer;
      },
    });
    /** Reads back the guard of every storage buffer the last call let go; the ones changed. */
    const changedGuards = async (label: string): Promise<{ count: number; changed: string[] }> => {
      const buffers = held.splice(0);
      const staging = device.createBuffer({ size: GUARD * buffers.length, usage: MAP_READ | COPY_DST });
      const encoder = device.createCommandEncoder();
      buffers.forEach(({ buffer, size }, i) => encoder.copyBufferToBuffer(buffer, size, staging, i * GUARD, GUARD));
      device.queue.submit([encoder.finish()]);
      await bounded(staging.mapAsync(MAP_READ), 30_000, 'guard readback');
      const words = new Uint32Array(staging.getMappedRange());
      const changed: string[] = [];
      buffers.forEach(({ size, usage }, i) => {
        const guard = words.subarray((i * GUARD) / 4, ((i + 1) * GUARD) / 4);
        const first = guard.findIndex((w, j) => w !== pattern[j]);
        if (first >= 0) changed.push(`${label}: storage buffer ${i} (size ${size}, usage 0x${usage.toString(16)}) written at +${4 * first} past its end`);
      });
      staging.unmap();
      staging.destroy();
      for (const { buffer } of buffers) GPUBuffer.prototype.destroy.call(buffer);
      return { count: buffers.length, changed };
    };

    // The check itself sees a write past the end: one word in one guard, as an OOB store would leave.
    {
      const attn = await createAttention({ backend: 'webgpu', gpuDevice: proxy });
      const originalPush = held.push.bind(held);
      let corrupted = false;
      held.push = (...items) => {
        for (const item of items) {
          if (!corrupted && item.usage & COPY_SRC) {
            device.queue.writeBuffer(item.buffer, item.size + 8, new Uint32Array([0]));
            corrupted = true;
          }
        }
        return originalPush(...items);
      };
      await attn.scaledDotProductAttention(randomTensor([3, 5], 1), randomTensor([4, 5], 2), randomTensor([4, 3], 3));
      held.push = originalPush;
      const { changed } = await changedGuards('self-test');
      expect(changed).toHaveLength(1);
      expect(changed[0]).toMatch(/written at \+8 past its end/);
      attn.dispose();
    }

    const cases: { label: string; q: Tensor; k: Tensor; v: Tensor; options: AttentionOptions; gpuLimits?: Record<string, number> }[] = [];
    const shapes: [number, number, number, number][] = [[37, 53, 21, 13], [1, 1, 3, 1], [65, 7, 67, 129], [9, 130, 5, 33]];
    shapes.forEach(([lq, lk, e, ev], s) => {
      const q = randomTensor([2, 3, lq, e], 10 * s), k = randomTensor([2, 3, lk, e], 10 * s + 1), v = randomTensor([2, 3, lk, ev], 10 * s + 2);
      const { bool, additive } = randomMasks([2, 1, lq, lk], 10 * s + 3);
      cases.push({ label: `${lq}x${lk} e${e} ev${ev} weights`, q, k, v, options: { returnWeights: true } });
      cases.push({ label: `${lq}x${lk} e${e} ev${ev} bool mask + weights`, q, k, v, options: { attnMask: bool, returnWeights: true } });
      cases.push({ label: `${lq}x${lk} e${e} ev${ev} causal + weights`, q, k, v, options: { isCausal: 'bottom-right', returnWeights: true } });
      cases.push({ label: `${lq}x${lk} e${e} ev${ev} additive mask`, q, k, v, options: { attnMask: additive } });
    });
    // Split into chunks and grid parts (offsets into every buffer), GQA, weights.
    {
      const q = randomTensor([2, 6, 45, 19], 90), k = randomTensor([2, 2, 31, 19], 91), v = randomTensor([2, 2, 31, 11], 92);
      const { bool } = randomMasks([2, 1, 45, 31], 93);
      cases.push({
        label: 'split, gqa, bool mask, weights', q, k, v, options: { enableGqa: true, attnMask: bool, returnWeights: true },
        gpuLimits: { maxStorageBufferBindingSize: 2 * 45 * 19 * 4, maxComputeWorkgroupsPerDimension: 2 },
      });
    }
    const instances = new Map<string, Attention>();
    let checked = 0;
    for (const { label, q, k, v, options, gpuLimits } of cases) {
      const key = JSON.stringify(gpuLimits ?? {});
      if (!instances.has(key)) instances.set(key, await createAttention({ backend: 'webgpu', gpuDevice: proxy, gpuLimits }));
      await bounded(expectMatchesReference(instances.get(key)!, oracle, q, k, v, options, { factor: 4 }, label), 60_000, label);
      const { count, changed } = await changedGuards(label);
      expect(changed).toEqual([]);
      checked += count;
    }
    expect(checked).toBeGreaterThan(cases.length * 3);  // each call's output, statistics, weights, log-sum-exp
    // The instances' stand-ins for unused bindings and reused storage uploads live until
    // dispose: their guards too.
    for (const attn of instances.values()) attn.dispose();
    const standIns = await changedGuards('stand-ins and reused uploads, at dispose');
    expect(standIns.count).toBe(4 * instances.size);
    expect(standIns.changed).toEqual([]);
    device.destroy();
  });
});

describe('16. live GPU buffers and error scopes return to baseline', () => {
  function countingDevice(device: GPUDevice) {
    const counts = { created: 0, destroyed: 0, pushed: 0, popped: 0, breakBindGroups: false };
    const proxy = proxyDevice(device, {
      createBuffer: (t, desc: GPUBufferDescriptor) => {
        const b = t.createBuffer(desc);
        counts.created++;
        const destroy = b.destroy.bind(b);
        let once = false;
        b.destroy = () => {
          if (!once) counts.destroyed++;
          once = true;
          destroy();
        };
        return b;
      },
      pushErrorScope: (t, filter: string) => {
        counts.pushed++;
        t.pushErrorScope(filter as GPUErrorFilter);
      },
      popErrorScope: (t) => {
        counts.popped++;
        return t.popErrorScope();
      },
      // GPU-side validation failures on demand: a bind group missing its last binding.
      createBindGroup: (t, desc: GPUBindGroupDescriptor) =>
        t.createBindGroup(counts.breakBindGroups ? { ...desc, entries: [...desc.entries].slice(0, -1) } : desc),
    });
    return { proxy, counts };
  }

  it('1,000 calls (mixed shapes, with and without weights, some failing validation): every buffer created is destroyed', async () => {
    const device = await testDevice();
    const { proxy, counts } = countingDevice(device);
    const attn = await createAttention({ backend: 'webgpu', gpuDevice: proxy });
    // The instance's own buffers (its stand-ins for unused bindings, and from its first call the
    // two buffers it reuses for uploads) live until dispose; every buffer a call creates is
    // destroyed by the call.
    expect(counts.created - counts.destroyed).toBe(3);
    const standing = 3 + 2;
    let ok = 0, planErrors = 0, gpuErrors = 0;
    for (let c = 0; c < 1000; c++) {
      const lq = 1 + (c % 7), lk = 1 + ((c * 3) % 11), e = [4, 8, 5][c % 3]!, ev = [4, 3][c % 2]!;
      const q = randomTensor([lq, e], c), k = randomTensor([lk, e], c + 1), v = randomTensor([lk, ev], c + 2);
      const options: AttentionOptions = { returnWeights: c % 2 === 0, isCausal: c % 5 === 1 };
      if (c % 10 === 3) {
        // Input validation: mismatched E, rejected before any GPU work.
        const error = await bounded(settled(attn.scaledDotProductAttention(q, randomTensor([lk, e + 1], c), v, options)), 30_000, `call ${c}`);
        expect(error, `call ${c}`).toBeInstanceOf(Error);
        planErrors++;
      } else if (c % 10 === 7) {
        counts.breakBindGroups = true;
        const error = await bounded(settled(attn.scaledDotProductAttention(q, k, v, options)), 30_000, `call ${c}`);
        counts.breakBindGroups = false;
        expect(error, `call ${c}`).toBeInstanceOf(WebGPUError);
        expect((error as WebGPUError).kind).toBe('validation');
        gpuErrors++;
      } else {
        const result = await bounded(attn.scaledDotProductAttention(q, k, v, options), 30_000, `call ${c}`);
        expect(result.output.shape).toEqual([lq, ev]);
        if (c % 97 === 0) await expectMatchesReference(attn, oracle, q, k, v, options, { factor: 4 }, `call ${c}`);
        ok++;
      }
      expect(counts.created - counts.destroyed, `live buffers after call ${c}`).toBe(standing);
    }
    expect([ok, planErrors, gpuErrors]).toEqual([800, 100, 100]);
    expect(counts.created).toBeGreaterThan(2 * ok);  // each call's output and its staging buffer at least
    expect(counts.pushed).toBe(counts.popped);
    expect(attn.webgpuInfo()!.jobsInFlight).toBe(0);
    attn.dispose();
    expect(counts.created - counts.destroyed).toBe(0);
    device.destroy();
  });

  it('50 backward calls (variants, GPU outputs, some failing planning or validation): every buffer created is destroyed, error scopes balanced', async () => {
    const device = await testDevice();
    const { proxy, counts } = countingDevice(device);
    const attn = await createAttention({ backend: 'webgpu', gpuDevice: proxy });
    const standing = counts.created - counts.destroyed + 2;  // its stand-ins, and the reused upload buffers from the first call
    const variants: BackwardOptions[] = [
      {}, { isCausal: true }, { attnMask: randomMasks([5, 9], 1).additive, returnAttnMaskGrad: true }, { sinks: new Float32Array([0.5]) },
      { window: { left: 2 }, softcap: 3 },
    ];
    let ok = 0, planErrors = 0, gpuErrors = 0;
    for (let c = 0; c < 50; c++) {
      const e = [4, 8, 5][c % 3]!, ev = [4, 3][c % 2]!;
      const q = randomTensor([5, e], c), k = randomTensor([9, e], c + 1), v = randomTensor([9, ev], c + 2), dOut = randomTensor([5, ev], c + 3);
      const options = variants[c % variants.length]!;
      if (c % 10 === 3) {
        const error = await bounded(settled(attn.scaledDotProductAttentionBackward(q, k, v, randomTensor([5, ev + 1], c), options)), 30_000, `call ${c}`);
        expect(error, `call ${c}`).toBeInstanceOf(RangeError);
        planErrors++;
      } else if (c % 10 === 7) {
        counts.breakBindGroups = true;
        const error = await bounded(settled(attn.scaledDotProductAttentionBackward(q, k, v, dOut, options)), 30_000, `call ${c}`);
        counts.breakBindGroups = false;
        expect(error, `call ${c}`).toBeInstanceOf(WebGPUError);
        expect((error as WebGPUError).kind).toBe('validation');
        gpuErrors++;
      } else if (c % 2 === 0) {
        const g = await bounded(attn.scaledDotProductAttentionBackward(q, k, v, dOut, { ...options, outputLocation: 'gpu' }), 30_000, `call ${c}`);
        for (const name of ['dQuery', 'dKey', 'dValue'] as const) g[name].buffer.destroy();
        ok++;
      } else {
        const g = await bounded(attn.scaledDotProductAttentionBackward(q, k, v, dOut, options), 30_000, `call ${c}`);
        expect(g.dQuery.shape).toEqual([5, e]);
        ok++;
      }
      expect(counts.created - counts.destroyed, `live buffers after call ${c}`).toBe(standing);
    }
    expect([ok, planErrors, gpuErrors]).toEqual([40, 5, 5]);
    expect(counts.pushed).toBe(counts.popped);
    expect(attn.webgpuInfo()!.jobsInFlight).toBe(0);
    attn.dispose();
    expect(counts.created - counts.destroyed).toBe(0);
    device.destroy();
  });

  it('200 create/run/dispose cycles on one device: live buffers and error scopes back to baseline, the device survives', async () => {
    const device = await testDevice();
    const { proxy, counts } = countingDevice(device);
    const q = randomTensor([2, 9, 12], 1), k = randomTensor([2, 13, 12], 2), v = randomTensor([2, 13, 7], 3);
    for (let c = 0; c < 200; c++) {
      const attn = await createAttention({ backend: 'webgpu', gpuDevice: proxy, gpuLimits: c % 4 === 0 ? { maxComputeWorkgroupsPerDimension: 1 } : undefined });
      const result = await bounded(attn.scaledDotProductAttention(q, k, v, { returnWeights: c % 2 === 1 }), 30_000, `cycle ${c}`);
      expect(result.output.shape).toEqual([2, 9, 7]);
      attn.dispose();
      expect(counts.created - counts.destroyed, `live buffers after cycle ${c}`).toBe(0);
    }
    expect(counts.created).toBeGreaterThan(200 * 5);
    expect(counts.pushed).toBe(counts.popped);
    const stillAlive = await Promise.race([device.lost.then(() => false), new Promise((r) => setTimeout(() => r(true), 50))]);
    expect(stillAlive).toBe(true);
    const last = await createAttention({ backend: 'webgpu', gpuDevice: proxy });
    await expectMatchesReference(last, oracle, q, k, v, { returnWeights: true }, { factor: 4 }, 'after 200 cycles');
    last.dispose();
    device.destroy();
  });
});

describe('17. the buffers an instance reuses across calls', () => {
  it('a call whose uploads and uniforms outgrow them part-way (1,500 one-workgroup dispatches, 600 KiB of inputs): the regions taken before stay valid, the shared bind groups follow the new buffer', async () => {
    const device = await testDevice();
    const UNIFORM = 0x40;
    let uniformBuffers = 0;
    const proxy = proxyDevice(device, {
      createBuffer: (t, desc: GPUBufferDescriptor) => {
        if (desc.usage & UNIFORM) uniformBuffers++;
        return t.createBuffer(desc);
      },
    });
    const attn = await createAttention({ backend: 'webgpu', gpuDevice: proxy, gpuLimits: { maxComputeWorkgroupsPerDimension: 1 } });
    const small = [randomTensor([1, 1, 2, 4], 1), randomTensor([1, 1, 3, 4], 2), randomTensor([1, 1, 3, 4], 3)] as const;
    await expectMatchesReference(attn, oracle, ...small, {}, { factor: 4 }, 'first, small call');
    expect(uniformBuffers).toBe(1);
    // 300 rows × 5 key tiles of weights, one workgroup a dispatch: 1,500 dispatches' uniforms
    // (256 bytes each) in a buffer that starts at 64 KiB; inputs of 200 KiB each.
    const q = randomTensor([1, 1, 300, 170], 4), k = randomTensor([1, 1, 300, 170], 5), v = randomTensor([1, 1, 300, 170], 6);
    await bounded(expectMatchesReference(attn, oracle, q, k, v, { returnWeights: true, isCausal: true }, { factor: 4 }, 'outgrowing call'), 120_000, 'outgrowing call');
    expect(uniformBuffers, 'the uniforms buffer replaced part-way, more than once').toBeGreaterThanOrEqual(3);
    await expectMatchesReference(attn, oracle, ...small, {}, { factor: 4 }, 'small call after');
    attn.dispose();
    device.destroy();
  });

  it('a decode loop on a GPU KV cache of each dtype makes its bind groups and buffers once: later appends and GPU-resident steps make none, and every step matches the float64 reference', async () => {
    const device = await testDevice();
    const counts = { bindGroups: 0, buffers: 0 };
    const proxy = proxyDevice(device, {
      createBindGroup: (t, desc: GPUBindGroupDescriptor) => (counts.bindGroups++, t.createBindGroup(desc)),
      createBuffer: (t, desc: GPUBufferDescriptor) => (counts.buffers++, t.createBuffer(desc)),
    });
    const attn = await createAttention({ backend: 'webgpu', gpuDevice: proxy });
    const Hq = 4, Hkv = 2, E = 32, first = 260, steps = 6, options: AttentionOptions = { enableGqa: true };
    // Keys and values that float16 holds exactly; int8/int4 caches hold them rounded (asCached).
    const halves = (shape: number[], seed: number): Tensor => {
      const t = randomTensor(shape, seed);
      return { data: t.data.map((x) => Math.round(x * 256) / 256), shape };
    };
    const query = randomTensor([1, Hq, 1, E], 1);
    const gpuQuery = device.createBuffer({ size: query.data.byteLength, usage: STORAGE | COPY_DST });
    device.queue.writeBuffer(gpuQuery, 0, query.data as Float32Array<ArrayBuffer>);
    const out = device.createBuffer({ size: query.data.byteLength, usage: STORAGE | COPY_SRC | COPY_DST });
    for (const dtype of ['float32', 'float16', 'int8', 'int4'] as const) {
      const cache = attn.createKvCache({ batch: 1, kvHeads: Hkv, maxLength: first + steps, headDim: E, dtype });
      const keys = halves([1, Hkv, first + steps, E], 2), values = halves([1, Hkv, first + steps, E], 3);
      const rows = (t: Tensor, from: number, to: number): Tensor => {
        const data = new Float32Array(Hkv * (to - from) * E);
        for (let h = 0; h < Hkv; h++) data.set(t.data.subarray((h * (first + steps) + from) * E, (h * (first + steps) + to) * E), h * (to - from) * E);
        return { data, shape: [1, Hkv, to - from, E] };
      };
      cache.append(rows(keys, 0, first), rows(values, 0, first));
      for (let t = first; t < first + steps; t++) {
        const before = { ...counts };
        cache.append(rows(keys, t, t + 1), rows(values, t, t + 1));
        await attn.scaledDotProductAttention({ buffer: gpuQuery, shape: query.shape }, cache, { ...options, outputLocation: 'gpu', out });
        // From the second token on, the appends and steps bind what they bound the token before.
        if (t > first) expect({ ...counts }, `${dtype} cache, token ${t}: device objects made`).toEqual(before);
        const k = asCached(rows(keys, 0, t + 1), dtype), v = asCached(rows(values, 0, t + 1), dtype);
        expectResultMatchesReference({ output: { data: await readFloats(device, out, query.data.length), shape: query.shape } }, oracle, asScoredQuery(query, dtype), k, v, options, 4, `${dtype} cache, token ${t}`);
      }
      cache.dispose();
    }
    attn.dispose();
    device.destroy();
  });

  it('more bind groups than an instance keeps (300 output buffers), and a bind group whose call failed validation: the calls after still bind what they should', async () => {
    const device = await testDevice();
    let breakBindGroups = false;
    const proxy = proxyDevice(device, {
      // A bind group missing its last binding: the call fails validation.
      createBindGroup: (t, desc: GPUBindGroupDescriptor) => t.createBindGroup(breakBindGroups ? { ...desc, entries: [...desc.entries].slice(0, -1) } : desc),
    });
    const attn = await createAttention({ backend: 'webgpu', gpuDevice: proxy });
    const q = randomTensor([1, 2, 3, 8], 1), k = randomTensor([1, 2, 5, 8], 2), v = randomTensor([1, 2, 5, 8], 3);
    const upload = (t: Tensor): GPUBuffer => {
      const buffer = device.createBuffer({ size: t.data.byteLength, usage: STORAGE | COPY_DST | COPY_SRC });
      device.queue.writeBuffer(buffer, 0, t.data as Float32Array<ArrayBuffer>);
      return buffer;
    };
    const [gq, gk, gv] = [q, k, v].map(upload) as [GPUBuffer, GPUBuffer, GPUBuffer];
    const gpuCall = (out: GPUBuffer) =>
      attn.scaledDotProductAttention({ buffer: gq, shape: q.shape }, { buffer: gk, shape: k.shape }, { buffer: gv, shape: v.shape }, { outputLocation: 'gpu', out });
    const outs = Array.from({ length: 300 }, () => device.createBuffer({ size: q.data.byteLength, usage: STORAGE | COPY_SRC | COPY_DST }));
    for (const out of outs) await gpuCall(out);
    // The first output's bind group was dropped long ago; the last ones are still kept.
    for (const out of [outs[0]!, outs[299]!, outs[150]!]) {
      await gpuCall(out);
      expectResultMatchesReference({ output: { data: await readFloats(device, out, q.data.length), shape: q.shape } }, oracle, q, k, v, {}, 4, 'after 300 output buffers');
    }
    // A call whose bind group is broken fails; the same call after it makes a good one.
    const fresh = device.createBuffer({ size: q.data.byteLength, usage: STORAGE | COPY_SRC | COPY_DST });
    breakBindGroups = true;
    const error = await bounded(settled(gpuCall(fresh)), 30_000, 'broken bind group');
    breakBindGroups = false;
    expect(error).toBeInstanceOf(WebGPUError);
    await gpuCall(fresh);
    expectResultMatchesReference({ output: { data: await readFloats(device, fresh, q.data.length), shape: q.shape } }, oracle, q, k, v, {}, 4, 'after the failed call');
    attn.dispose();
    device.destroy();
  });

  it('an upload larger than the reused buffers hold (34 MB of keys) gets a buffer of its own, destroyed with its call', async () => {
    const device = await testDevice();
    const live = new Map<GPUBuffer, number>();  // buffer -> its size
    let largest = 0;
    const proxy = proxyDevice(device, {
      createBuffer: (t, desc: GPUBufferDescriptor) => {
        const b = t.createBuffer(desc);
        live.set(b, desc.size);
        largest = Math.max(largest, desc.size);
        const destroy = b.destroy.bind(b);
        b.destroy = () => {
          live.delete(b);
          destroy();
        };
        return b;
      },
    });
    const attn = await createAttention({ backend: 'webgpu', gpuDevice: proxy });
    const L = 133120, E = 64;  // 34 MB of keys, and of values, from the heap: over the 32 MiB the reused buffers hold
    const q = randomTensor([1, 1, 2, E], 7), k = randomTensor([1, 1, L, E], 8), v = randomTensor([1, 1, L, E], 9);
    await bounded(expectMatchesReference(attn, oracle, q, k, v, { isCausal: 'bottom-right' }, { factor: 4 }, 'large keys'), 120_000, 'large keys');
    expect(largest).toBeGreaterThanOrEqual(4 * L * E);
    // Between calls: the stand-ins and the reused buffers, none over 32 MiB.
    expect(Math.max(...live.values())).toBeLessThanOrEqual(32 << 20);
    const standing = live.size;
    await bounded(expectMatchesReference(attn, oracle, q, k, v, {}, { factor: 4 }, 'again'), 120_000, 'again');
    expect(live.size).toBe(standing);
    attn.dispose();
    expect(live.size).toBe(0);
    device.destroy();
  });
});
