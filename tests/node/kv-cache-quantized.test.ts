// int8 and int4 KV caches (docs/kv-cache-formats.md) on the CPU backends: the variants of a decode
// step against the float64 reference on the dequantized cache (the ordinary tolerance rule), the
// documented accuracy bound against the float64 reference on the unquantized data (random data,
// outlier channels, constant and all-zero blocks, ±65504 halves), NaN/Inf appended, float16
// appends, the bytes a cache holds, and the dtype's errors.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, fromFloat16, toFloat16, type Attention, type AttentionOptions, type KvCacheDType, type Tensor } from 'sdpa-web';
import { asCached, asScoredQuery, levelsOf } from './support/quantized.js';
import { randomTensor, rng } from './support/tensors.js';
import { expectResultMatchesReference } from './support/tolerance.js';

const QUANTIZED = ['int8', 'int4'] as const;
const B = 1, Hq = 8, Hkv = 2;

/** The block scales (amax / L) of each row of `data` (rows of `dim`), per block of 32. */
function blockScales(data: Float32Array, dim: number, L: number): Float64Array {
  const blocks = Math.ceil(dim / 32);
  const out = new Float64Array((data.length / dim) * blocks);
  for (let row = 0; row < data.length / dim; row++) {
    for (let c = 0; c < blocks; c++) {
      let amax = 0;
      for (let e = c * 32; e < Math.min(dim, c * 32 + 32); e++) amax = Math.max(amax, Math.abs(data[row * dim + e]!));
      out[row * blocks + c] = amax / L;
    }
  }
  return out;
}

/**
 * The documented bound on |out − out_exact| for each query row of a call with no mask on all L keys
 * (docs/kv-cache-formats.md): Δ = max_j |scale|·Σ_b (‖q_b‖₁·s_k,jb + ‖k̂_jb‖₁·s_q,b)/2, then
 * (e^{2Δ} − 1)·max|v| + max s_v/2, per query row (Hq/Hkv query heads per KV head).
 */
function accuracyBound(query: Tensor, key: Tensor, value: Tensor, dtype: 'int8' | 'int4'): Float64Array {
  const [, , Lq, E] = query.shape as [number, number, number, number];
  const [, , L, Ev] = value.shape as [number, number, number, number];
  const blocks = Math.ceil(E / 32);
  const scale = 1 / Math.sqrt(E);
  const sq = blockScales(query.data, E, 127), sk = blockScales(key.data, E, levelsOf(dtype)), sv = blockScales(value.data, Ev, levelsOf(dtype));
  const kHat = asCached(key, dtype).data;
  const bounds = new Float64Array(B * Hq * Lq);
  for (let h = 0; h < Hq; h++) {
    const kv = Math.floor(h / (Hq / Hkv));
    let vMax = 0, svMax = 0;
    for (let j = 0; j < L; j++) {
      for (let e = 0; e < Ev; e++) vMax = Math.max(vMax, Math.abs(value.data[(kv * L + j) * Ev + e]!));
      for (let c = 0; c < Math.ceil(Ev / 32); c++) svMax = Math.max(svMax, sv[(kv * L + j) * Math.ceil(Ev / 32) + c]!);
    }
    for (let i = 0; i < Lq; i++) {
      const qRow = (h * Lq + i) * E;
      let delta = 0;
      for (let j = 0; j < L; j++) {
        const kRow = (kv * L + j) * E;
        let d = 0;
        for (let c = 0; c < blocks; c++) {
          let q1 = 0, k1 = 0;
          for (let e = c * 32; e < Math.min(E, c * 32 + 32); e++) {
            q1 += Math.abs(query.data[qRow + e]!);
            k1 += Math.abs(kHat[kRow + e]!);
          }
          d += q1 * sk[(kv * L + j) * blocks + c]! + k1 * sq[(h * Lq + i) * blocks + c]!;
        }
        delta = Math.max(delta, (scale * d) / 2);
      }
      bounds[h * Lq + i] = Math.expm1(2 * delta) * vMax + svMax / 2;
    }
  }
  return bounds;
}

describe('int8 and int4 KV caches', () => {
  let oracle: Attention;
  const engines: [string, Attention][] = [];

  beforeAll(async () => {
    oracle = await createAttention({ backend: 'scalar' });
    engines.push(['scalar', oracle]);
    engines.push(["'simd' relaxed", await createAttention({ backend: 'simd', threads: 1 })]);
    engines.push(["'simd' SIMD128", await createAttention({ backend: 'simd', threads: 1, relaxedSimd: false })]);
  });
  afterAll(() => {
    for (const [, attn] of engines) attn.dispose();
  });

  /** The data sets of the bound: [name, key, value, query] for E = Ev = dim, L keys. */
  function dataSets(L: number, dim: number): [string, Tensor, Tensor, Tensor][] {
    const random = (shape: number[], seed: number, lo = -2, hi = 2) => randomTensor(shape, seed, lo, hi);
    const kShape = [B, Hkv, L, dim], qShape = [B, Hq, 1, dim];
    const outliers = random(kShape, 11);
    for (let row = 0; row < B * Hkv * L; row++) {
      for (const channel of [3, dim - 5]) outliers.data[row * dim + channel]! *= 40;  // outlier channels of keys
    }
    const blocks = random(kShape, 12), blockValues = random(kShape, 13);
    for (let row = 0; row < B * Hkv * L; row++) {
      for (let e = 0; e < Math.min(32, dim); e++) blocks.data[row * dim + e] = 0;  // an all-zero first block
      for (let e = 32; e < Math.min(64, dim); e++) blocks.data[row * dim + e] = 0.75;  // a constant second block
      for (let e = 0; e < Math.min(32, dim); e++) blockValues.data[row * dim + e] = -1.5;
    }
    const halves = random(kShape, 14, -1, 1), halfValues = random(kShape, 15);
    const next = rng(16);
    for (let i = 0; i < halfValues.data.length; i++) {
      if (next() < 0.05) halfValues.data[i] = next() < 0.5 ? 65504 : -65504;
    }
    return [
      ['random', random(kShape, 1), random(kShape, 2), random(qShape, 3)],
      ['outlier channels', outliers, random(kShape, 4), random(qShape, 5)],
      ['constant and all-zero blocks', blocks, blockValues, random(qShape, 6)],
      ['±65504 halves in the values', halves, halfValues, random(qShape, 7)],
    ];
  }

  it('referenceAttention on a cache of each dtype is the float64 reference of what the cache holds', () => {
    const L = 90, E = 40, Ev = 72;
    const key = randomTensor([2, Hkv, L, E], 51, -2, 2), value = randomTensor([2, Hkv, L, Ev], 52, -2, 2);
    const query = randomTensor([2, Hq, 3, E], 53, -2, 2);
    const held = (t: Tensor, dtype: KvCacheDType): Tensor => (dtype === 'float16' ? { data: fromFloat16(toFloat16(t.data)), shape: t.shape } : asCached(t, dtype));
    for (const dtype of ['float32', 'float16', ...QUANTIZED] as const) {
      const cache = oracle.createKvCache({ batch: 2, kvHeads: Hkv, maxLength: 128, headDim: E, valueDim: Ev, dtype });
      cache.append(key, value);
      const got = oracle.referenceAttention(query, cache, { isCausal: true, enableGqa: true, returnLogSumExp: true });
      const want = oracle.referenceAttention(asScoredQuery(query, dtype), held(key, dtype), held(value, dtype), { isCausal: 'bottom-right', enableGqa: true, returnLogSumExp: true });
      expect(got.output.data, dtype).toEqual(want.output.data);
      expect(got.weights.data, dtype).toEqual(want.weights.data);
      expect(got.logSumExp!.data, dtype).toEqual(want.logSumExp!.data);
      cache.dispose();
    }
  });

  for (const dtype of QUANTIZED) {
    it(`${dtype}: every engine within the documented bound of the float64 result on the unquantized data, and of the dequantized cache by the tolerance rule`, async () => {
      for (const [L, dim] of [[300, 64], [130, 40]] as const) {
        for (const [name, key, value, query] of dataSets(L, dim)) {
          const exact = oracle.referenceAttention(query, key, value, { enableGqa: true });
          const bound = accuracyBound(query, key, value, dtype);
          for (const [label, attn] of engines) {
            const cache = attn.createKvCache({ batch: B, kvHeads: Hkv, maxLength: L, headDim: dim, dtype });
            cache.append(key, value);
            const got = await attn.scaledDotProductAttention(query, cache, { enableGqa: true });
            const what = `${dtype} ${name} L=${L} E=${dim} on ${label}`;
            for (let row = 0; row < B * Hq; row++) {
              let err = 0;
              for (let c = 0; c < dim; c++) err = Math.max(err, Math.abs(got.output.data[row * dim + c]! - exact.output.data[row * dim + c]!));
              expect(err, `${what} row ${row}: error ${err} > bound ${bound[row]}`).toBeLessThanOrEqual(bound[row]! * (1 + 1e-5) + 1e-5);
            }
            expectResultMatchesReference(got, oracle, asScoredQuery(query, dtype), asCached(key, dtype), asCached(value, dtype), { enableGqa: true }, 2, what);
            cache.dispose();
          }
        }
      }
    });

    it(`${dtype}: the variants of a decode step match the float64 reference on the dequantized cache`, async () => {
      const L = 700, E = 48, Ev = 40;
      const key = randomTensor([2, Hkv, L, E], 21, -2, 2), value = randomTensor([2, Hkv, L, Ev], 22, -2, 2);
      const query = randomTensor([2, Hq, 2, E], 23, -2, 2);
      const kd = Int32Array.from([0, 1]);
      const variants: AttentionOptions[] = [
        { isCausal: 'bottom-right' },
        { window: { left: 200 }, isCausal: 'bottom-right' },
        { softcap: 3 },
        { alibi: true },
        { sinks: Float32Array.from([0, 1, -1, 2, 0.5, 3, -2, 1]) },
        { keyLengths: Int32Array.from([700, 255]) },
        { attnMask: { data: Uint8Array.from({ length: L }, (_, j) => (j % 3 === 0 ? 0 : 1)), shape: [L] } },
        { queryDocuments: { data: Int32Array.from([0, 1, 1, 1]), shape: [2, 2] }, keyDocuments: { data: Int32Array.from({ length: 2 * L }, (_, j) => kd[(j % L) < 350 ? 0 : 1]!), shape: [2, L] } },
      ];
      for (const [label, attn] of engines) {
        const cache = attn.createKvCache({ batch: 2, kvHeads: Hkv, maxLength: L, headDim: E, valueDim: Ev, dtype });
        cache.append(key, value);
        for (const options of variants) {
          const callOptions = { ...options, enableGqa: true };
          const got = await attn.scaledDotProductAttention(query, cache, callOptions);
          expectResultMatchesReference(got, oracle, asScoredQuery(query, dtype), asCached(key, dtype), asCached(value, dtype), callOptions, 2, `${dtype} ${JSON.stringify(Object.keys(options))} on ${label}`);
        }
        cache.dispose();
      }
    });

    it(`${dtype}: NaN/Inf appended poison only the rows that see that key (block)`, async () => {
      const L = 200, E = 64;
      const key = randomTensor([1, 1, L, E], 31, -1, 1), value = randomTensor([1, 1, L, E], 32, -1, 1);
      key.data[150 * E + 10] = NaN;  // key 150, block 0
      value.data[120 * E + 40] = Infinity;  // value 120, block 1 (dims 32…63)
      const query = randomTensor([1, 1, 1, E], 33, -1, 1);
      for (const [label, attn] of engines) {
        const cache = attn.createKvCache({ batch: 1, kvHeads: 1, maxLength: L, headDim: E, dtype });
        cache.append(key, value);
        const seesAll = (await attn.scaledDotProductAttention(query, cache)).output.data;
        expect(Array.from(seesAll).every(Number.isNaN), `${label}: a visible NaN key makes the row NaN`).toBe(true);
        const before = (await attn.scaledDotProductAttention(query, cache, { keyLengths: Int32Array.from([150]) })).output.data;
        for (let c = 0; c < E; c++) {
          expect(Number.isNaN(before[c]!), `${label}: dim ${c} with the NaN key hidden (value 120's Inf block: dims 32…63)`).toBe(c >= 32);
        }
        const neither = (await attn.scaledDotProductAttention(query, cache, { keyLengths: Int32Array.from([120]) })).output.data;
        expect(Array.from(neither).every(Number.isFinite), `${label}: both hidden`).toBe(true);
        cache.dispose();
      }
    });

    it(`${dtype}: float16 appends quantize the same values as float32 ones; bytes held`, async () => {
      const [, attn] = engines[1]!;
      const key = randomTensor([1, Hkv, 70, 40], 41, -3, 3), value = randomTensor([1, Hkv, 70, 40], 42, -3, 3);
      const halfKey = { data: toFloat16(key.data), shape: key.shape, dtype: 'float16' as const };
      const halfValue = { data: toFloat16(value.data), shape: value.shape, dtype: 'float16' as const };
      const a = attn.createKvCache({ batch: 1, kvHeads: Hkv, maxLength: 70, headDim: 40, dtype });
      const b = attn.createKvCache({ batch: 1, kvHeads: Hkv, maxLength: 70, headDim: 40, dtype });
      a.append(halfKey, halfValue);
      b.append({ data: fromFloat16(halfKey.data), shape: key.shape }, { data: fromFloat16(halfValue.data), shape: value.shape });
      const query = randomTensor([1, Hq, 1, 40], 43);
      expect((await attn.scaledDotProductAttention(query, a, { enableGqa: true })).output.data).toEqual((await attn.scaledDotProductAttention(query, b, { enableGqa: true })).output.data);
      // 2 heads × 72 rows (whole tiles of 4) × 2 blocks × (32 or 16 bytes of levels + a 4-byte scale), keys and values.
      expect(a.bytes).toBe(2 * 2 * 72 * 2 * (dtype === 'int8' ? 36 : 20));
      expect(a.dtype).toBe(dtype);
      a.dispose();
      b.dispose();
    });
  }

  it('bytes of the generation shape at 32,768 tokens, and dtype names', () => {
    const [, attn] = engines[1]!;
    const bytes = (dtype: KvCacheDType) => {
      const cache = attn.createKvCache({ batch: 1, kvHeads: 8, maxLength: 32768, headDim: 64, dtype });
      const n = cache.bytes;
      cache.dispose();
      return n;
    };
    expect(bytes('float32')).toBe(2 * 8 * 32768 * 64 * 4);
    expect(bytes('float16')).toBe(2 * 8 * 32768 * 64 * 2);
    expect(bytes('int8')).toBe(2 * 8 * 32768 * 2 * 36);
    expect(bytes('int4')).toBe(2 * 8 * 32768 * 2 * 20);
    expect(() => attn.createKvCache({ batch: 1, kvHeads: 1, maxLength: 4, headDim: 4, dtype: 'in8' as never })).toThrow(/dtype must be one of 'float32', 'float16', 'int8', 'int4'; did you mean 'int8'\?/);
    expect(() => attn.createKvCache({ batch: 1, kvHeads: 1, maxLength: 4, headDim: 4, dtype: 'INT4' as never })).toThrow(/did you mean 'int4'\?/);
    expect(() => attn.createKvCache({ batch: 1, kvHeads: 1, maxLength: 4, headDim: 4, dtype: 8 as never })).toThrow(TypeError);
  });

  it('the backward and the reference take no quantized cache', async () => {
    const [, attn] = engines[1]!;
    const cache = attn.createKvCache({ batch: 1, kvHeads: 1, maxLength: 8, headDim: 4, dtype: 'int8' });
    cache.append(randomTensor([1, 1, 8, 4], 51), randomTensor([1, 1, 8, 4], 52));
    await expect(attn.scaledDotProductAttentionBackward(randomTensor([1, 1, 1, 4], 53), cache as never, randomTensor([1, 1, 8, 4], 54), randomTensor([1, 1, 1, 4], 55))).rejects.toThrow(/not a KvCache/);
    expect(() => attn.scaledDotProductAttentionBackwardSync(randomTensor([1, 1, 1, 4], 53), cache as never, randomTensor([1, 1, 8, 4], 54), randomTensor([1, 1, 1, 4], 55))).toThrow(/not a KvCache/);
    const got = await attn.scaledDotProductAttention(randomTensor([1, 1, 1, 4], 56), cache, { returnWeights: true });
    expect(got.weights!.shape).toEqual([1, 1, 1, 8]);
    cache.dispose();
  });
});
