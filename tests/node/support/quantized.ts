// The int8/int4 KV-cache values written out a second time, from docs/kv-cache-formats.md, in
// float32 steps (Math.fround): what a quantized cache holds for appended rows (its values, and its
// bytes), and the query rows as the scores on such a cache see them. The tests hold the kernels to the float64 reference on
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

/** One block (at most 32 values) quantized with L levels: its levels (zeros past the values) and scale. */
export function quantizeBlock(x: ArrayLike<number>, L: number): { levels: Int8Array; scale: number } {
  const levels = new Int8Array(BLOCK);
  let amax = 0, finite = true;
  for (let e = 0; e < x.length; e++) {
    finite &&= Number.isFinite(x[e]!);
    amax = Math.max(amax, Math.abs(x[e]!));
  }
  let scale = finite ? Math.fround(amax / L) : NaN;
  if (Math.fround(scale * L) > amax) scale = floatBelow(scale);
  if (finite && amax !== 0) {
    for (let e = 0; e < x.length; e++) levels[e] = roundHalfEven(Math.fround(Math.fround(x[e]! / amax) * L));
  }
  return { levels, scale };
}

/** Each row (the last dim) of `data` quantized in blocks of 32 with L levels and read back. */
export function roundThroughBlocks(data: Float32Array, dim: number, L: number): Float32Array {
  const out = new Float32Array(data.length);
  for (let row = 0; row < data.length; row += dim) {
    for (let c = 0; c < dim; c += BLOCK) {
      const { levels, scale } = quantizeBlock(data.subarray(row + c, row + Math.min(dim, c + BLOCK)), L);
      for (let e = c; e < Math.min(dim, c + BLOCK); e++) out[row + e] = Math.fround(levels[e - c]! * scale);
    }
  }
  return out;
}

/**
 * The bytes of a quantized tensor [heads, maxLength, dim] (cpp/core/kv_cache_format.h) holding
 * `rows(head)` (rows of dim floats) from key 0: levels in tiles of 4 keys, then the float32 scales;
 * keys never appended keep zero bytes, as in a zero-initialized buffer.
 */
export function quantizedBytes(dtype: 'int8' | 'int4', heads: number, maxLength: number, dim: number, rows: (head: number) => ArrayLike<number>[]): Uint8Array {
  const tileRows = 4 * Math.ceil(maxLength / 4);
  const blocks = Math.ceil(dim / BLOCK);
  const tileBlockBytes = 4 * (dtype === 'int8' ? 32 : 16);
  const scaleOffset = heads * (tileRows / 4) * blocks * tileBlockBytes;
  const bytes = new Uint8Array(scaleOffset + heads * tileRows * blocks * 4);
  const scales = new DataView(bytes.buffer, scaleOffset);
  for (let h = 0; h < heads; h++) {
    rows(h).forEach((row, j) => {
      const k = j % 4;
      for (let c = 0; c < blocks; c++) {
        const tileBlock = (h * (tileRows / 4) + Math.floor(j / 4)) * blocks + c;
        const block = Array.from({ length: Math.min(BLOCK, dim - c * BLOCK) }, (_, i) => row[c * BLOCK + i]!);
        const { levels, scale } = quantizeBlock(block, levelsOf(dtype));
        scales.setFloat32(4 * (tileBlock * 4 + k), scale, true);
        const at = tileBlock * tileBlockBytes;
        for (let i = 0; i < BLOCK; i++) {
          if (dtype === 'int8') {
            bytes[at + (Math.floor(i / 4) * 4 + k) * 4 + (i % 4)] = levels[i]! & 0xff;
          } else {
            const byte = at + (Math.floor(i / 8) * 4 + k) * 4 + (i % 4);
            const nibble = levels[i]! + 8;
            bytes[byte] = Math.floor(i / 4) % 2 === 1 ? (bytes[byte]! & 0x0f) | (nibble << 4) : (bytes[byte]! & 0xf0) | nibble;
          }
        }
      }
    });
  }
  return bytes;
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
