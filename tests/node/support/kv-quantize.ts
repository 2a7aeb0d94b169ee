// The int8/int4 KV-cache format (cpp/core/kv_cache_format.h, docs/kv-cache-formats.md) written
// out in TypeScript for the tests: the quantizer (float32 operations through Math.fround, which
// round a double quotient or product of floats exactly as float32 arithmetic does), the
// dequantized values the float64 reference reads, and the bytes a cache of that format holds.

export type QuantKind = 'int8' | 'int4';

const QUANT_BLOCK = 32;

/** Round half to even. */
function nearbyint(x: number): number {
  const r = Math.round(x);
  return Math.abs(x - Math.trunc(x)) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** quantize_block: levels [32] and the scale of x (at most 32 values, the rest zeros). */
export function quantizeBlock(kind: QuantKind, x: ArrayLike<number>): { levels: Int8Array; scale: number } {
  const L = kind === 'int8' ? 127 : 7;
  const levels = new Int8Array(QUANT_BLOCK);
  let amax = 0;
  let finite = true;
  for (let i = 0; i < x.length; i++) {
    finite &&= Number.isFinite(x[i]!);
    amax = Math.max(amax, Math.abs(x[i]!));
  }
  if (!finite) return { levels, scale: NaN };
  if (amax === 0) return { levels, scale: 0 };
  for (let i = 0; i < x.length; i++) levels[i] = nearbyint(Math.fround(Math.fround(x[i]! / amax) * L)) || 0;
  return { levels, scale: Math.fround(amax / L) };
}

/** A row of `dim` floats as the cache holds it: each block quantized, then level · scale in float32. */
export function dequantizedRow(kind: QuantKind, row: ArrayLike<number>): number[] {
  const out: number[] = [];
  for (let c = 0; c < row.length; c += QUANT_BLOCK) {
    const block = Array.from({ length: Math.min(QUANT_BLOCK, row.length - c) }, (_, i) => row[c + i]!);
    const { levels, scale } = quantizeBlock(kind, block);
    for (let i = 0; i < block.length; i++) out.push(Number.isNaN(scale) ? NaN : Math.fround(levels[i]! * scale));
  }
  return out;
}

/** A tensor [..., dim] with every row quantized and dequantized (what a call sees of a query on a quantized cache: int8). */
export function dequantizedRows(kind: QuantKind, data: Float32Array, dim: number): Float32Array {
  const out = new Float32Array(data.length);
  for (let r = 0; r < data.length / dim; r++) out.set(dequantizedRow(kind, data.subarray(r * dim, (r + 1) * dim)), r * dim);
  return out;
}

/**
 * The bytes of a quantized tensor [heads, maxLength, dim] holding `rows(head)` (each a list of
 * rows of dim floats) from key 0: levels in tiles of 4 keys, then the float32 scales.
 */
export function quantizedBytes(kind: QuantKind, heads: number, maxLength: number, dim: number, rows: (head: number) => ArrayLike<number>[]): Uint8Array {
  const tileRows = 4 * Math.ceil(maxLength / 4);
  const blocks = Math.ceil(dim / QUANT_BLOCK);
  const tileBlockBytes = 4 * (kind === 'int8' ? 32 : 16);
  const scaleOffset = heads * (tileRows / 4) * blocks * tileBlockBytes;
  const bytes = new Uint8Array(scaleOffset + heads * tileRows * blocks * 4);
  const scales = new DataView(bytes.buffer, scaleOffset);
  for (let h = 0; h < heads; h++) {
    // Keys never appended keep zero bytes, as in a zero-initialized buffer.
    rows(h).forEach((row, j) => {
      const k = j % 4;
      for (let c = 0; c < blocks; c++) {
        const tileBlock = (h * (tileRows / 4) + Math.floor(j / 4)) * blocks + c;
        const block = Array.from({ length: Math.min(QUANT_BLOCK, dim - c * QUANT_BLOCK) }, (_, i) => row[c * QUANT_BLOCK + i]!);
        const { levels, scale } = quantizeBlock(kind, block);
        scales.setFloat32(4 * (tileBlock * 4 + k), scale, true);
        const at = tileBlock * tileBlockBytes;
        for (let i = 0; i < QUANT_BLOCK; i++) {
          if (kind === 'int8') {
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
