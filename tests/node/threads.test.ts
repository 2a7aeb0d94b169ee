// The `threads` option of createAttention (simd backend): 1 and 2 threads agree with the float64
// reference (tolerance rule of tests/cpp/attention_test_support.h), the default, the fallback to
// one thread when the realm is not cross-origin isolated, and option validation. No timings here:
// speed is `npm run bench`.
import { availableParallelism } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { createAttention, type Tensor } from 'sdpa-web';
import { maxAbsDiff } from './support/tolerance.js';

function random(shape: number[], seed: number, scale = 1): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  const data = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    data[i] = ((s / 2 ** 32) * 2 - 1) * scale;
  }
  return { data, shape };
}

const cores = Math.min(16, availableParallelism());

describe('createAttention({ threads })', () => {
  afterEach(() => {
    delete (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated;
  });

  it('1 and 2 threads both match the float64 reference, in both builds', async () => {
    const q = random([2, 3, 150, 64], 1);
    const k = random([2, 3, 230, 64], 2);
    const v = random([2, 3, 230, 64], 3);
    for (const isCausal of [false, true]) {
      const scalar = await createAttention({ backend: 'scalar' });
      const ref = scalar.referenceAttention(q, k, v, { isCausal });
      const eRef = maxAbsDiff(scalar.scaledDotProductAttentionSync(q, k, v, { isCausal }).output.data, ref.output.data);
      const tolerance = 2 * eRef + 1e-5;
      for (const [threads, relaxedSimd] of [[1, true], [2, true], [1, false], [2, false]] as const) {
        const attn = await createAttention({ backend: 'simd', threads, relaxedSimd });
        expect(attn.threads).toBe(Math.min(threads, cores));
        expect(attn.relaxedSimd).toBe(relaxedSimd);
        const { output } = attn.scaledDotProductAttentionSync(q, k, v, { isCausal });
        expect(output.shape).toEqual([2, 3, 150, 64]);
        expect(maxAbsDiff(output.data, ref.output.data)).toBeLessThanOrEqual(tolerance);
        attn.dispose();
      }
      scalar.dispose();
    }
  });

  it('causal offsets, alone and composed with an additive mask, match the float64 reference on 1 and 2 threads', async () => {
    const q = random([2, 2, 150, 32], 11);
    const k = random([2, 2, 230, 32], 12);
    const v = random([2, 2, 230, 16], 13);
    const additive = random([150, 230], 14, 2);
    const scalar = await createAttention({ backend: 'scalar' });
    for (const offset of [-70, -33, 31, 64, 80, 300]) {
      for (const attnMask of [undefined, { data: additive.data.map((x) => (x < -1.5 ? -Infinity : x)), shape: additive.shape }]) {
        const options = { isCausal: { offset }, attnMask };
        const ref = scalar.referenceAttention(q, k, v, options);
        const eRef = maxAbsDiff(scalar.scaledDotProductAttentionSync(q, k, v, options).output.data, ref.output.data);
        for (const [threads, relaxedSimd] of [[1, true], [2, true], [2, false]] as const) {
          const attn = await createAttention({ backend: 'simd', threads, relaxedSimd });
          const { output } = attn.scaledDotProductAttentionSync(q, k, v, options);
          expect(maxAbsDiff(output.data, ref.output.data), `offset ${offset} threads ${threads}`).toBeLessThanOrEqual(2 * eRef + 1e-5);
          attn.dispose();
        }
      }
    }
    scalar.dispose();
  });

  it('the threaded module also returns weights and keeps the heap balanced', async () => {
    const attn = await createAttention({ backend: 'simd', threads: 2 });
    const q = random([4, 70, 16], 4);
    const kv = random([4, 90, 16], 5);
    const before = attn.memoryStats().heapBytesInUse;
    const { weights } = await attn.scaledDotProductAttention(q, kv, kv, { returnWeights: true });
    const ref = attn.referenceAttention(q, kv, kv);
    expect(maxAbsDiff(weights!.data, ref.weights.data)).toBeLessThan(1e-5);
    expect(attn.memoryStats().heapBytesInUse).toBe(before);
  });

  // Result arrays of 64 KiB and more are made while the helper threads run the kernel.
  it('makes large result arrays while the helpers run: the same values, and a failed allocation is thrown after the kernel', async () => {
    const attn = await createAttention({ backend: 'simd', threads: 2 });
    const q = random([1, 2, 512, 64], 6);
    const kv = random([1, 2, 512, 64], 7);
    const options = { isCausal: true, returnWeights: true, returnLogSumExp: true } as const;
    const ref = attn.referenceAttention(q, kv, kv, options);
    const before = attn.memoryStats().heapBytesInUse;
    for (let call = 0; call < 3; call++) {
      const result = attn.scaledDotProductAttentionSync(q, kv, kv, options);
      expect(maxAbsDiff(result.output.data, ref.output.data)).toBeLessThan(1e-5);
      expect(maxAbsDiff(result.weights!.data, ref.weights.data)).toBeLessThan(1e-5);
      expect(result.logSumExp!.data).toHaveLength(2 * 512);
    }
    // Every new float32 array of 64K elements or more fails, as when the JS heap is exhausted.
    const original = globalThis.Float32Array;
    globalThis.Float32Array = new Proxy(original, {
      construct(target, args: unknown[]) {
        if (args.length === 1 && typeof args[0] === 'number' && args[0] >= 2 ** 16) throw new RangeError('Array buffer allocation failed');
        return Reflect.construct(target, args);
      },
    });
    try {
      expect(() => attn.scaledDotProductAttentionSync(q, kv, kv, options)).toThrow(/Array buffer allocation failed/);
    } finally {
      globalThis.Float32Array = original;
    }
    expect(attn.memoryStats().heapBytesInUse).toBe(before);
    expect(maxAbsDiff(attn.scaledDotProductAttentionSync(q, kv, kv, options).output.data, ref.output.data)).toBeLessThan(1e-5);
    attn.dispose();
  });

  // Float32 inputs of 1 MiB and more are copied in, last rows first, while the helpers start on
  // the rows already there (cpp/core/input_arrival.h).
  it('streams large inputs in while the helpers run: reference values, and an error in the copy is thrown after the kernel', async () => {
    const attn = await createAttention({ backend: 'simd', threads: 2 });
    const q = random([1, 2, 1024, 64], 8);
    const k = random([1, 1, 1536, 64], 9);
    const v = random([1, 1, 1536, 64], 10);
    const ids = { data: new Int32Array(1536).map((_, j) => Math.floor(j / 300)), shape: [1, 1536] };
    const cases = [
      { enableGqa: true },
      { enableGqa: true, isCausal: 'bottom-right' },
      { enableGqa: true, isCausal: 'bottom-right', window: { left: 200 } },
      { enableGqa: true, isCausal: true, queryDocuments: { data: ids.data.slice(512), shape: [1, 1024] }, keyDocuments: ids },
    ] as const;
    const before = attn.memoryStats().heapBytesInUse;
    for (const options of cases) {
      const ref = attn.referenceAttention(q, k, v, options);
      // Other inputs copied into the heap first: a row read before it was copied holds their data.
      attn.referenceAttention(random([1, 2, 1024, 64], 11), random([1, 1, 1536, 64], 12), random([1, 1, 1536, 64], 13), options);
      const { output } = attn.scaledDotProductAttentionSync(q, k, v, options);
      expect(maxAbsDiff(output.data, ref.output.data), JSON.stringify(options)).toBeLessThan(1e-5);
    }
    // 32 small key/value heads: several whole groups a piece, the last piece short.
    const manyQ = random([4, 16, 64, 32], 14), manyK = random([4, 8, 80, 32], 15), manyV = random([4, 8, 80, 32], 16);
    for (const isCausal of [false, 'bottom-right'] as const) {
      const ref = attn.referenceAttention(manyQ, manyK, manyV, { enableGqa: true, isCausal });
      attn.referenceAttention(random([4, 16, 64, 32], 17), random([4, 8, 80, 32], 18), random([4, 8, 80, 32], 19), { enableGqa: true, isCausal });
      const { output } = attn.scaledDotProductAttentionSync(manyQ, manyK, manyV, { enableGqa: true, isCausal });
      expect(maxAbsDiff(output.data, ref.output.data), `many heads, isCausal ${isCausal}`).toBeLessThan(1e-5);
    }
    class FailingCopy extends Float32Array {
      override subarray(): Float32Array<ArrayBuffer> {
        throw new Error('copy failed');
      }
    }
    const failing = { data: new FailingCopy(q.data), shape: q.shape };
    expect(() => attn.scaledDotProductAttentionSync(failing, k, v, { enableGqa: true })).toThrow(/copy failed/);
    expect(attn.memoryStats().heapBytesInUse).toBe(before);
    const ref = attn.referenceAttention(q, k, v, { enableGqa: true });
    expect(maxAbsDiff(attn.scaledDotProductAttentionSync(q, k, v, { enableGqa: true }).output.data, ref.output.data)).toBeLessThan(1e-5);
    attn.dispose();
  });

  it('defaults to every core in Node, and threads: 1 forces one', async () => {
    const auto = await createAttention();
    expect(auto.backend).toBe('simd');
    expect(auto.threads).toBe(cores);
    // 'auto' says why it did not pick WebGPU (Node has no navigator.gpu), but nothing about threads.
    expect(auto.fallbackReason).toMatch(/^WebGPU is not available/);
    expect(auto.fallbackReason).not.toMatch(/thread/);
    expect((await createAttention({ threads: 1 })).threads).toBe(1);
    expect((await createAttention({ threads: 1000 })).threads).toBe(cores);
    expect((await createAttention({ backend: 'scalar', threads: 4 })).threads).toBe(1);
  });

  it('falls back to 1 thread and says why when the realm is not cross-origin isolated', async () => {
    (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated = false;
    const attn = await createAttention({ backend: 'simd', threads: 2 });
    expect(attn.threads).toBe(1);
    expect(attn.fallbackReason).toMatch(/1 thread.*cross-origin isolated/);
    const q = random([1, 8, 8], 6);
    expect(attn.scaledDotProductAttentionSync(q, q, q).output.data.length).toBe(64);
  });

  it('rejects a threads value that is not a positive integer', async () => {
    for (const threads of [0, -1, 1.5, Number.NaN, '2' as unknown as number]) {
      await expect(createAttention({ threads })).rejects.toThrow(RangeError);
    }
  });
});
