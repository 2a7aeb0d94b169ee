// The int8/int4 KV-cache values written out a second time, from docs/kv-cache-formats.md, in
// float32 steps (Math.fround): what a quantized cache holds for appended rows, and the query rows
// as the scores on such a cache see them. The tests hold the kernels to the float64 reference on
// these dense tensors ("the dequantized cache").
import type { KvCacheDType, Tensor } from 'sdpa-web';

const BLOCK = 32;

function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** The float32 next to positive float32 `x` toward 0. */
function floatBelow(x: number): number {
  const bits = new Uint32Array(new Float32Array([x]).buffer);
  bits[0]! -= 1;
  return new Float32Array(bits.buffer)[0]!;
}

/** Each row (the last dim) of `data` quantized in blocks of 32 with L levels and read back. */
export function roundThroughBlocks(data: Float32Array, dim: number, L: number): Float32Array {
  const out = new Float32Array(data.length);
  for (let row = 0; row < data.length; row += dim) {
    for (let c = 0; c < dim; c += BLOCK) {
      const end = Math.min(dim, c + BLOCK);
      let amax = 0, finite = true;
      for (let e = c; e < end; e++) {
        const x = data[row + e]!;
        finite &&= Number.isFinite(x);
        amax = Math.max(amax, Math.abs(x));
      }
      let scale = finite ? Math.fround(amax / L) : NaN;
      if (Math.fround(scale * L) > amax) scale = floatBelow(scale);
      for (let e = c; e < end; e++) {
        const level = amax === 0 || !finite ? 0 : roundHalfEven(Math.fround(Math.fround(data[row + e]! / amax) * L));
        out[row + e] = Math.fround(level * scale);
      }
    }
  }
  return out;
}

export function levelsOf(dtype: 'int8' | 'int4'): number {
  return dtype === 'int8' ? 127 : 7;
}

/** A key or value tensor as a cache of `dtype` holds it (float32 and float16 caches: as given). */
export function asCached(tensor: Tensor, dtype: KvCacheDType): Tensor {
  if (dtype !== 'int8' && dtype !== 'int4') return tensor;
  return { data: roundThroughBlocks(tensor.data, tensor.shape.at(-1)!, levelsOf(dtype)), shape: tensor.shape };
}

/** The query as the scores on a cache of `dtype` take it: int8 blocks on an int8/int4 cache. */
export function asScoredQuery(query: Tensor, dtype: KvCacheDType): Tensor {
  if (dtype !== 'int8' && dtype !== 'int4') return query;
  return { data: roundThroughBlocks(query.data, query.shape.at(-1)!, 127), shape: query.shape };
}
