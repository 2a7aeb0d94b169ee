// The float16 test body every backend runs (tests/node/float16-<backend>.test.ts): float16
// query/key/value and float16 KV caches against the float64 reference of the same (float16)
// values, by the float16 tolerance rule:
//   max(|o − o64| − ½ulp16(o64)) ≤ f·e_ref + 1e-5·max(1, |V|max)
// where e_ref is the error of a reference that stores float16 and accumulates float32 (the
// 'scalar' backend on the float16 inputs, output float32), and ½ulp16 the output's own rounding.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAttention,
  float16Excess,
  fromFloat16,
  toFloat16,
  toleranceBound,
  type Attention,
  type AttentionOptions,
  type Float16Tensor,
  type KvCache,
  type Tensor,
} from 'sdpa-web';
import { concatLengths, randomMasks, randomTensor } from './tensors.js';

export interface Float16SuiteOptions {
  /** f of the tolerance rule. */
  factor: number;
  create: () => Promise<Attention>;
}

/** The exact float32 twin of a float16 tensor. */
export function widenHalf(t: Float16Tensor): Tensor {
  return { data: fromFloat16(t.data as Uint16Array), shape: t.shape };
}

/** A float16 tensor of uniform values in [lo, hi), and its exact float32 twin. */
export function randomHalf(shape: number[], seed: number, lo = -1, hi = 1): { half: Float16Tensor; float: Tensor } {
  const half: Float16Tensor = { data: toFloat16(randomTensor(shape, seed, lo, hi).data), shape, dtype: 'float16' };
  return { half, float: widenHalf(half) };
}

/** The value of a half from its definition. */
export function halfValue(h: number): number {
  const sign = h >> 15 ? -1 : 1, exponent = (h >> 10) & 31, mantissa = h & 1023;
  if (exponent === 31) return mantissa ? NaN : sign * Infinity;
  return sign * (exponent === 0 ? mantissa * 2 ** -24 : (1024 + mantissa) * 2 ** (exponent - 25));
}

/**
 * A float16 result against the float64 reference of the float32 twins `q, k, v` by the float16
 * rule; `oracle` is a scalar-backend instance (the reference, and e_ref on the float16 `halves`,
 * or on the twins when not given).
 */
export function expectFloat16ResultOf(
  oracle: Attention,
  factor: number,
  output: Float16Tensor,
  q: Tensor,
  k: Tensor,
  v: Tensor,
  options: AttentionOptions,
  halves: [Float16Tensor, Float16Tensor, Float16Tensor] | undefined,
  what: string,
): void {
  expect(output.dtype, what).toBe('float16');
  const ref = oracle.referenceAttention(q, k, v, options);
  const plain = halves
    ? oracle.scaledDotProductAttentionSync(halves[0], halves[1], halves[2], { ...options, outputDtype: 'float32' }).output
    : oracle.scaledDotProductAttentionSync(q, k, v, options).output;
  let eRef = 0;
  for (let i = 0; i < ref.output.data.length; i++) {
    const d = Math.abs(plain.data[i]! - ref.output.data[i]!);
    if (Number.isFinite(d)) eRef = Math.max(eRef, d);
  }
  const excess = float16Excess(fromFloat16(output.data as Uint16Array), ref.output.data);
  const bound = toleranceBound(eRef, factor, v.data);
  expect(excess, `${what}: excess ${excess} > ${bound} (e_ref ${eRef})`).toBeLessThanOrEqual(bound);
}

export function defineFloat16Suite(label: string, { factor, create }: Float16SuiteOptions): void {
  describe(`float16 on ${label}`, () => {
    let attn: Attention;
    let oracle: Attention;

    const expectFloat16Result = (output: Float16Tensor, q: Tensor, k: Tensor, v: Tensor, options: AttentionOptions, halves: [Float16Tensor, Float16Tensor, Float16Tensor] | undefined, what: string) =>
      expectFloat16ResultOf(oracle, factor, output, q, k, v, options, halves, what);

    const check = async (shapes: [number[], number[], number[]], seed: number, options: AttentionOptions = {}, what = '', range = 2) => {
      const q = randomHalf(shapes[0], seed, -range, range), k = randomHalf(shapes[1], seed + 1, -range, range), v = randomHalf(shapes[2], seed + 2);
      const { output } = await attn.scaledDotProductAttention(q.half, k.half, v.half, options);
      expectFloat16Result(output as Float16Tensor, q.float, k.float, v.float, options, [q.half, k.half, v.half], what);
    };

    beforeAll(async () => {
      attn = await create();
      oracle = await createAttention({ backend: 'scalar' });
    });
    afterAll(() => {
      attn.dispose();
      oracle.dispose();
    });

    it('the core widens every half exactly (a one-key call returns its value row)', async () => {
      // 1024 batches of one key and a value row of 64 halves (a head dim every backend takes).
      const every = Uint16Array.from({ length: 65536 }, (_, h) => h);
      const query: Tensor = { data: new Float32Array(1024).fill(1), shape: [1024, 1, 1] };
      const key: Tensor = { data: new Float32Array(1024).fill(1), shape: [1024, 1, 1] };
      const { output } = await attn.scaledDotProductAttention(query, key, { data: every, shape: [1024, 1, 64], dtype: 'float16' });
      const want = fromFloat16(every);
      for (let h = 0; h < 65536; h++) {
        const got = output.data[h]!;
        // 1·v + 0: equal to the half's value (−0 comes out +0, a sum's sign).
        expect(Number.isNaN(want[h]!) ? Number.isNaN(got) : got === want[h], `half ${h.toString(16)}`).toBe(true);
      }
    });

    it('matches the float64 reference over lengths, head dims, batches and heads', async () => {
      const lengths = [1, 3, 17, 33, 64, 65, 127, 257];
      const dims = [[1, 8], [8, 15], [15, 16], [16, 64], [64, 100], [100, 1]] as const;
      let c = 0;
      for (const lq of lengths) {
        for (const lk of lengths) {
          const [e, ev] = dims[c % dims.length]!;
          const [b, h] = [[1, 1], [2, 1], [1, 3], [2, 3]][c % 4]!;
          await check([[b, h, lq, e], [b, h, lk, e], [b, h, lk, ev]], 10 * c, { returnWeights: c % 5 === 0 }, `B=${b} H=${h} Lq=${lq} Lk=${lk} E=${e} Ev=${ev}`);
          c++;
        }
      }
    });

    it('decode shapes (the decode kernel), GQA, masks, causal alignments and every variant', async () => {
      for (const lk of [64, 65, 300, 1000]) {
        await check([[2, 8, 1, 64], [2, 2, lk, 64], [2, 2, lk, 64]], lk, { enableGqa: true, isCausal: true }, `decode Lk=${lk}`);
      }
      await check([[1, 4, 2, 13], [1, 2, 200, 13], [1, 2, 200, 7]], 5, { enableGqa: true }, 'decode, odd dims');
      const masks = randomMasks([2, 1, 33, 70], 3);
      for (const [kind, mask] of Object.entries(masks)) {
        await check([[2, 3, 33, 16], [2, 3, 70, 16], [2, 3, 70, 8]], 20, { attnMask: mask }, `${kind} mask`);
      }
      for (const isCausal of [true, 'bottom-right', { offset: -5 }] as const) {
        await check([[2, 40, 16], [2, 100, 16], [2, 100, 8]], 30, { isCausal }, `causal ${JSON.stringify(isCausal)}`);
      }
      const docs = (n: number) => ({ data: Int32Array.from({ length: 2 * n }, (_, i) => Math.floor((i % n) / 23)), shape: [2, n] });
      await check([[2, 4, 70, 16], [2, 2, 70, 16], [2, 2, 70, 16]], 40, {
        enableGqa: true, isCausal: true, window: { left: 17 }, softcap: 5, alibi: true, sinks: new Float32Array([0, 1, -Infinity, 2]),
        queryDocuments: docs(70), keyDocuments: docs(70), keyLengths: Int32Array.from([70, 41]),
      }, 'every variant at once');
      await check([[1, 2, 1, 32], [1, 2, 500, 32], [1, 2, 500, 32]], 50, { window: { left: 64 }, softcap: 3, sinks: new Float32Array([1, 0]) }, 'decode with variants');
    });

    it('logits near 65504 do not overflow: scores and sums are float32, only the output rounds', async () => {
      // Entries near 250: q·k reaches 250²·64 = 4e6, far past float16's range.
      await check([[1, 2, 5, 64], [1, 2, 300, 64], [1, 2, 300, 64]], 60, {}, 'logits ~4e6', 250);
      await check([[1, 8, 1, 64], [1, 2, 300, 64], [1, 2, 300, 64]], 61, { enableGqa: true, scale: 1 }, 'decode, unscaled logits ~4e6', 250);
      // Values at ±65504: outputs stay within float16's range.
      const v: Tensor = { data: new Float32Array(300 * 8).map((_, i) => (i % 2 ? 65504 : -65504)), shape: [1, 300, 8] };
      const vHalf: Float16Tensor = { data: toFloat16(v.data), shape: v.shape, dtype: 'float16' };
      const q = randomHalf([1, 4, 8], 62), k = randomHalf([1, 300, 8], 63);
      const { output } = await attn.scaledDotProductAttention(q.half, k.half, vHalf);
      expect(Array.from(fromFloat16(output.data as Uint16Array)).every((x) => Number.isFinite(x))).toBe(true);
      expectFloat16Result(output as Float16Tensor, q.float, k.float, v, {}, [q.half, k.half, vHalf], 'values at ±65504');
      // An output past float16's range is ±Infinity, never NaN.
      const big: Tensor = { data: new Float32Array(300 * 8).map((_, i) => (i % 2 ? 1e6 : -1e6)), shape: [1, 300, 8] };
      const rounded = await attn.scaledDotProductAttention(q.float, k.float, big, { outputDtype: 'float16' });
      expect(rounded.output.dtype).toBe('float16');
      expect(Array.from(fromFloat16(rounded.output.data)).every((x) => Math.abs(x) === Infinity)).toBe(true);
    });

    it('outputDtype and out: float32 from float16 inputs, float16 into a caller\'s Uint16Array', async () => {
      const q = randomHalf([2, 9, 8], 70), k = randomHalf([2, 11, 8], 71), v = randomHalf([2, 11, 5], 72);
      const wide = await attn.scaledDotProductAttention(q.half, k.half, v.half, { outputDtype: 'float32' });
      expect(wide.output.data).toBeInstanceOf(Float32Array);
      const narrow = await attn.scaledDotProductAttention(q.half, k.half, v.half);
      expect(narrow.output.data).toEqual(toFloat16(wide.output.data as Float32Array));
      const out = new Uint16Array(2 * 9 * 5);
      const into = await attn.scaledDotProductAttention(q.half, k.half, v.half, { out });
      expect(into.output.data).toBe(out);
      expect(out).toEqual(narrow.output.data);
      // Mixed: float32 query over float16 keys/values gives float32.
      const mixed = await attn.scaledDotProductAttention(q.float, k.half, v.half);
      expect(mixed.output.data).toEqual(wide.output.data);
    });

    it('bad input names the argument and the expected dtype', async () => {
      const q = randomHalf([3, 8], 80), k = randomHalf([4, 8], 81), v = randomHalf([4, 8], 82);
      const bits = { data: q.half.data, shape: q.half.shape };
      await expect(attn.scaledDotProductAttention(bits as never, k.half, v.half)).rejects.toThrow(/query.data must be a Float32Array \(for float16 bit patterns pass query.dtype: 'float16'\)/);
      await expect(attn.scaledDotProductAttention({ ...q.half, dtype: 'float61' } as never, k.half, v.half)).rejects.toThrow(/query.dtype must be 'float32' or 'float16'; did you mean 'float16'/);
      await expect(attn.scaledDotProductAttention(q.half, { ...k.float, dtype: 'float16' } as never, v.half)).rejects.toThrow(/key.data must be a Uint16Array of float16 bit patterns/);
      await expect(attn.scaledDotProductAttention(q.half, k.half, v.half, { out: new Float32Array(24) })).rejects.toThrow(/out must be a Uint16Array or Float16Array/);
      await expect(attn.scaledDotProductAttention(q.half, k.half, v.half, { outputDtype: 'half' as never })).rejects.toThrow(/outputDtype must be 'float32' or 'float16'/);
      // The CPU backward takes float32; the WebGPU one widens float16 query/key/value as it loads them.
      if (attn.backend === 'webgpu') await expect(attn.scaledDotProductAttentionBackward(q.half, k.half, v.half, q.float)).resolves.toHaveProperty('dQuery');
      else await expect(attn.scaledDotProductAttentionBackward(q.half as never, k.half as never, v.half as never, q.float)).rejects.toThrow(/float16 tensors are for scaledDotProductAttention/);
      await expect(attn.explain(q.half as never, k.half as never, v.half as never)).rejects.toThrow(/widen with fromFloat16/);
      expect(() => attn.createKvCache({ batch: 1, kvHeads: 1, maxLength: 4, headDim: 4, dtype: 'f16' as never })).toThrow(/dtype must be one of 'float32', 'float16', 'int8', 'int4'/);
      // Still usable, nothing leaked.
      const baseline = attn.memoryStats().heapBytesInUse;
      for (let i = 0; i < 100; i++) await expect(attn.scaledDotProductAttention(q.half, k.half, { data: v.half.data, shape: [5, 8], dtype: 'float16' })).rejects.toThrow(RangeError);
      expect(attn.memoryStats().heapBytesInUse).toBe(baseline);
      await check([[3, 8], [4, 8], [4, 8]], 83, {}, 'after errors');
    });

    it('a float16 KV cache: token by token equals the reference of the concatenation, in place or widened', async () => {
      const [B, Hq, Hkv, E, Ev] = [2, 8, 2, 64, 48];
      let seed = 100;
      // An Inf in the cache (appended as a half, or a finite float32 past 65504 rounded to it) makes
      // the calls widen it instead of reading it in place.
      for (const holding of ['nothing', 'an Inf half', 'a float32 rounded to Inf'] as const) {
        const finite = holding === 'nothing';
        const cache = attn.createKvCache({ batch: B, kvHeads: Hkv, maxLength: 600, headDim: E, valueDim: Ev, dtype: 'float16' });
        expect(cache.dtype).toBe('float16');
        const keys: Float32Array[] = [], values: Float32Array[] = [];
        const append = (n: number, asFloat32: boolean) => {
          const k = randomHalf([B, Hkv, n, E], seed++), v = randomHalf([B, Hkv, n, Ev], seed++);
          const stored = v.float.data.slice();
          if (!finite && keys.length === (holding === 'an Inf half' ? 1 : 2)) {
            (v.half.data as Uint16Array)[3] = 0x7c00;
            v.float.data[3] = holding === 'an Inf half' ? Infinity : 70000;
            stored[3] = Infinity;
          }
          cache.append(asFloat32 ? k.float : k.half, asFloat32 ? v.float : v.half); // float32 rows are rounded to float16
          keys.push(k.float.data);
          values.push(stored);
        };
        const dense = (rows: Float32Array[], dim: number): Tensor => concatLengths(rows, B, Hkv, dim);
        append(300, false);
        for (let step = 0; step < 6; step++) {
          append(1, step % 2 === 1);
          const q = randomHalf([B, Hq, 1, E], seed++);
          const options: AttentionOptions = { enableGqa: true, isCausal: 'bottom-right' };
          const { output } = await attn.scaledDotProductAttention(q.half, cache, options);
          const k = dense(keys, E), v = dense(values, Ev);
          expectFloat16Result(output as Float16Tensor, q.float, k, v, options, undefined, `cache step ${step} (holding ${holding})`);
        }
        cache.reset();
        cache.dispose();
      }
    });

    it('a float16 cache\'s heap stays flat over 32 steps', async () => {
      const cache: KvCache = attn.createKvCache({ batch: 1, kvHeads: 2, maxLength: 128, headDim: 32, dtype: 'float16' });
      const k = randomHalf([1, 2, 1, 32], 1).half, v = randomHalf([1, 2, 1, 32], 2).half, q = randomHalf([1, 8, 1, 32], 3).half;
      const out = new Uint16Array(8 * 32);
      cache.append(randomHalf([1, 2, 64, 32], 4).half, randomHalf([1, 2, 64, 32], 5).half);
      const heap: number[] = [];
      for (let step = 0; step < 32; step++) {
        cache.append(k, v);
        await attn.scaledDotProductAttention(q, cache, { enableGqa: true, isCausal: true, out });
        heap.push(attn.memoryStats().heapBytesInUse);
      }
      expect(new Set(heap).size, `heap bytes per step: ${heap.join(', ')}`).toBe(1);
      cache.dispose();
    });
  });
}
