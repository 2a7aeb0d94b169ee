// float16 (IEEE binary16) data on the JavaScript side: conversions between float32 values and
// half bit patterns (the same rules as the core's cpp/core/float16.h: exact widening, rounding to
// nearest even, overflow to ±Inf, NaN payloads kept), and views of float16 tensor data.
import type { Float16ArrayLike, Float16Tensor } from './types.js';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The half nearest to `x` (ties to even), as its 16-bit pattern; beyond ±65504 rounds to ±Inf. */
export function float16BitsFromBits(u: number): number {
  const sign = (u >>> 16) & 0x8000;
  const magnitude = u & 0x7fffffff;
  if (magnitude > 0x7f800000) {
    const payload = (magnitude >>> 13) & 0x3ff;
    return sign | 0x7c00 | (payload !== 0 ? payload : 0x200);
  }
  if (magnitude >= 0x477ff000) return sign | 0x7c00;
  if (magnitude < 0x38800000) {
    // A subnormal half: add 0.5 so that the float adder rounds at the half's last bit, 2^-24.
    u32[0] = magnitude;
    f32[0] += 0.5;
    return sign | (u32[0]! - 0x3f000000);
  }
  return sign | (((magnitude + 0xc8000fff + ((magnitude >>> 13) & 1)) >>> 13) & 0x7fff);
}

/** The float32 bit pattern equal to half `h`. */
export function float32BitsFromFloat16(h: number): number {
  const sign = (h & 0x8000) << 16;
  const exponent = (h >>> 10) & 0x1f;
  const mantissa = h & 0x3ff;
  if (exponent === 0x1f) return (sign | 0x7f800000 | (mantissa << 13)) >>> 0;
  if (exponent !== 0) return (sign | ((exponent + 112) << 23) | (mantissa << 13)) >>> 0;
  if (mantissa === 0) return sign >>> 0;
  f32[0] = mantissa * 2 ** -24; // a subnormal half: exact as a float
  return (sign | u32[0]!) >>> 0;
}

/**
 * `values` rounded to float16 (nearest, ties to even; beyond ±65504 ±Infinity; NaN stays NaN), as
 * bit patterns: the `data` of a `{ data, shape, dtype: 'float16' }` tensor. Writes into `into`
 * when given (it must hold `values.length` elements).
 */
export function toFloat16(values: Float32Array | ArrayLike<number>, into?: Uint16Array): Uint16Array {
  const out = into ?? new Uint16Array(values.length);
  if (values instanceof Float32Array) {
    const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
    for (let i = 0; i < bits.length; i++) out[i] = float16BitsFromBits(bits[i]!);
  } else {
    for (let i = 0; i < values.length; i++) {
      f32[0] = values[i]!;
      out[i] = float16BitsFromBits(u32[0]!);
    }
  }
  return out;
}

/** float16 data (bit patterns, or a Float16Array) widened exactly to float32. */
export function fromFloat16(data: Uint16Array | Float16ArrayLike, into?: Float32Array): Float32Array {
  const halves = float16Bits(data);
  const out = into ?? new Float32Array(halves.length);
  const bits = new Uint32Array(out.buffer, out.byteOffset, out.length);
  for (let i = 0; i < halves.length; i++) bits[i] = float32BitsFromFloat16(halves[i]!);
  return out;
}

/** Whether the engine has `Float16Array` (Chrome/Edge ≥ 135, Firefox ≥ 129, Node ≥ 24). */
function float16ArrayType(): (new (buffer: ArrayBufferLike, byteOffset: number, length: number) => Float16ArrayLike) | undefined {
  return (globalThis as { Float16Array?: new (buffer: ArrayBufferLike, byteOffset: number, length: number) => Float16ArrayLike }).Float16Array;
}

export function isFloat16Array(data: unknown): data is Float16ArrayLike {
  const type = float16ArrayType();
  return type !== undefined && data instanceof type;
}

/** The bit patterns of float16 data: a Uint16Array as it is, a Float16Array viewed as one. */
export function float16Bits(data: Uint16Array | Float16ArrayLike): Uint16Array {
  return data instanceof Uint16Array ? data : new Uint16Array(data.buffer, data.byteOffset, data.length);
}

/**
 * `values` rounded to a float16 output tensor: written into `out` (Uint16Array or Float16Array)
 * and returned as it when given, else a new one in the form of `like` (Float16Array or bits).
 */
export function float16Output(values: Float32Array, shape: readonly number[], out: Uint16Array | Float16ArrayLike | undefined, like: unknown): Float16Tensor {
  if (out) {
    toFloat16(values, float16Bits(out));
    return { data: out, shape, dtype: 'float16' };
  }
  const bits = toFloat16(values);
  const type = float16ArrayType();
  return { data: type && isFloat16Array(like) ? new type(bits.buffer, bits.byteOffset, bits.length) : bits, shape, dtype: 'float16' };
}

