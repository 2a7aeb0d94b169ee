// Integer vectors for the quantized KV-cache kernels: int8 levels widened to int16, int16 dot
// products into int32 (i32x4.dot_i16x8_s), the bytes of one int32 lane spread over four float32
// lanes (one swizzle, one conversion), and int32 lanes converted to float32.
// wasm SIMD128 under Emscripten, GCC/Clang vector extensions natively (same results lane for lane).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/kv_cache_format.h"
#include "cpu/simd128.h"

namespace sdpa::simd {

#if defined(__wasm_simd128__)

using i8x16 = v128_t;
using i16x8 = v128_t;
using i32x4 = v128_t;

inline i8x16 load_i8x16(const uint8_t* p) { return wasm_v128_load(p); }
inline i16x8 widen_low(i8x16 v) { return wasm_i16x8_extend_low_i8x16(v); }
inline i16x8 widen_high(i8x16 v) { return wasm_i16x8_extend_high_i8x16(v); }
// int4 levels stored as level + 8 in nibbles, as int8 lanes of level·16: the low nibbles and the
// high nibbles (xor 8 turns level + 8 into the level's 4-bit two's complement).
inline void int4_levels_times_16(i8x16 packed, i8x16* low, i8x16* high) {
  const i8x16 levels = wasm_v128_xor(packed, wasm_i8x16_const_splat(static_cast<int8_t>(0x88)));
  *low = wasm_i8x16_shl(levels, 4);
  *high = wasm_v128_and(levels, wasm_i8x16_const_splat(static_cast<int8_t>(0xF0)));
}
// p[0, 4) in both halves.
inline i16x8 load_i16x4_twice(const int16_t* p) { return wasm_v128_load64_splat(p); }
// Lane i: a[2i]·b[2i] + a[2i+1]·b[2i+1].
inline i32x4 dot_pairs(i16x8 a, i16x8 b) { return wasm_i32x4_dot_i16x8(a, b); }
inline i32x4 add_i32(i32x4 a, i32x4 b) { return wasm_i32x4_add(a, b); }
inline i32x4 zero_i32() { return wasm_i32x4_const_splat(0); }
// (a0 + a1, a2 + a3, b0 + b1, b2 + b3).
inline i32x4 pair_sums(i32x4 a, i32x4 b) {
  return wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 2, 4, 6), wasm_i32x4_shuffle(a, b, 1, 3, 5, 7));
}
// int4 levels as stored, level + 8 (0…15), in the int8 lanes of the low and the high nibbles (the
// high ones by a 16-bit shift and a mask: V8 builds i8x16.shr_u's mask anew at each use).
inline void int4_nibbles(i8x16 packed, i8x16* low, i8x16* high) {
  *low = wasm_v128_and(packed, wasm_i8x16_const_splat(0x0F));
  *high = wasm_v128_and(wasm_u16x8_shr(packed, 4), wasm_i8x16_const_splat(0x0F));
}
// 4 bytes at p in every int32 lane.
inline i8x16 load_i8x4_splat(const int8_t* p) { return wasm_v128_load32_splat(p); }
inline i16x8 add_i16(i16x8 a, i16x8 b) { return wasm_i16x8_add(a, b); }
inline i16x8 zero_i16() { return wasm_i16x8_const_splat(0); }
// (a0 + a1, a2 + a3, a4 + a5, a6 + a7) of int16 lanes, widened to int32.
inline i32x4 pair_sums_i16(i16x8 v) { return wasm_i32x4_extadd_pairwise_i16x8(v); }
inline i32x4 sub_i32(i32x4 a, i32x4 b) { return wasm_i32x4_sub(a, b); }
inline i32x4 splat_i32(int32_t x) { return wasm_i32x4_splat(x); }
inline f32x4 to_float(i32x4 v) { return wasm_f32x4_convert_i32x4(v); }
// Lanes of a, b, c, d (integers in [-128, 127]) rounded to nearest, ties to even, as int8 lanes.
inline i8x16 round_to_int8(f32x4 a, f32x4 b, f32x4 c, f32x4 d) {
  const auto whole = [](f32x4 v) { return wasm_i32x4_trunc_sat_f32x4(wasm_f32x4_nearest(v)); };
  return wasm_i8x16_narrow_i16x8(wasm_i16x8_narrow_i32x4(whole(a), whole(b)), wasm_i16x8_narrow_i32x4(whole(c), whole(d)));
}
inline void store_i8x16(int8_t* p, i8x16 v) { wasm_v128_store(p, v); }
#if defined(__wasm_relaxed_simd__)
// Lane i (int16): a[2i]·b[2i] + a[2i+1]·b[2i+1], for int8 a and b in [0, 127]
// (i16x8.relaxed_dot_i8x16_i7x16_s: the same on every engine for such b; one pmaddubsw on x86).
// LLVM 14 has no builtin for it: i8x16.relaxed_swizzle's early encoding, which no engine runs,
// stands in for it, and cmake/relaxed_simd_opcodes.mjs rewrites it after the link.
#define SDPA_SIMD_DOT_I8X16_I7 1
inline i16x8 dot_pairs_i8_u7(i8x16 a, i8x16 b) {
  return reinterpret_cast<i16x8>(
      __builtin_wasm_relaxed_swizzle_i8x16(reinterpret_cast<__i8x16>(a), reinterpret_cast<__i8x16>(b)));
}
#endif
// Bytes 4K…4K+3 of v, as int8, in float32 lanes times 2^24 (exact): a swizzle moves byte 4K + i
// to the top of int32 lane i (indices 0x80 give zero bytes), then one conversion.
template <int K>
inline f32x4 lane_bytes_to_float_2p24(i8x16 v) {
  constexpr int8_t z = static_cast<int8_t>(0x80);
  return wasm_f32x4_convert_i32x4(
      wasm_i8x16_swizzle(v, wasm_i8x16_const(z, z, z, 4 * K, z, z, z, 4 * K + 1, z, z, z, 4 * K + 2, z, z, z, 4 * K + 3)));
}
#else

using i8x16 = int8_t __attribute__((vector_size(16)));
using u8x16 = uint8_t __attribute__((vector_size(16)));
using i16x8 = int16_t __attribute__((vector_size(16)));
using i32x4 = int32_t __attribute__((vector_size(16)));

inline i8x16 load_i8x16(const uint8_t* p) {
  i8x16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline i16x8 widen_low(i8x16 v) { return __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7), i16x8); }
inline i16x8 widen_high(i8x16 v) {
  return __builtin_convertvector(__builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15), i16x8);
}
inline void int4_levels_times_16(i8x16 packed, i8x16* low, i8x16* high) {
  const i8x16 levels = packed ^ static_cast<int8_t>(0x88);
  *low = bit_cast<i8x16>(bit_cast<u8x16>(levels) << 4);
  *high = levels & static_cast<int8_t>(0xF0);
}
inline i16x8 load_i16x4_twice(const int16_t* p) {
  i16x8 v;
  std::memcpy(&v, p, 8);
  std::memcpy(reinterpret_cast<char*>(&v) + 8, p, 8);
  return v;
}
inline i32x4 dot_pairs(i16x8 a, i16x8 b) {
  const i32x4 ae = __builtin_convertvector(__builtin_shufflevector(a, a, 0, 2, 4, 6), i32x4);
  const i32x4 ao = __builtin_convertvector(__builtin_shufflevector(a, a, 1, 3, 5, 7), i32x4);
  const i32x4 be = __builtin_convertvector(__builtin_shufflevector(b, b, 0, 2, 4, 6), i32x4);
  const i32x4 bo = __builtin_convertvector(__builtin_shufflevector(b, b, 1, 3, 5, 7), i32x4);
  return ae * be + ao * bo;
}
inline i32x4 add_i32(i32x4 a, i32x4 b) { return a + b; }
inline i32x4 zero_i32() { return i32x4{0, 0, 0, 0}; }
inline i32x4 pair_sums(i32x4 a, i32x4 b) {
  return __builtin_shufflevector(a, b, 0, 2, 4, 6) + __builtin_shufflevector(a, b, 1, 3, 5, 7);
}
inline void int4_nibbles(i8x16 packed, i8x16* low, i8x16* high) {
  *low = packed & static_cast<int8_t>(0x0F);
  *high = bit_cast<i8x16>(bit_cast<u8x16>(packed) >> 4);
}
inline i8x16 load_i8x4_splat(const int8_t* p) {
  i8x16 v;
  for (int i = 0; i < 16; i += 4) std::memcpy(reinterpret_cast<char*>(&v) + i, p, 4);
  return v;
}
inline i16x8 add_i16(i16x8 a, i16x8 b) { return a + b; }
inline i16x8 zero_i16() { return i16x8{0, 0, 0, 0, 0, 0, 0, 0}; }
inline i32x4 pair_sums_i16(i16x8 v) {
  return __builtin_convertvector(__builtin_shufflevector(v, v, 0, 2, 4, 6), i32x4) +
         __builtin_convertvector(__builtin_shufflevector(v, v, 1, 3, 5, 7), i32x4);
}
inline i32x4 sub_i32(i32x4 a, i32x4 b) { return a - b; }
inline i32x4 splat_i32(int32_t x) { return i32x4{x, x, x, x}; }
inline f32x4 to_float(i32x4 v) { return __builtin_convertvector(v, f32x4); }
inline i8x16 round_to_int8(f32x4 a, f32x4 b, f32x4 c, f32x4 d) {
  const f32x4 lanes[4] = {a, b, c, d};
  i8x16 out;
  for (int k = 0; k < 4; ++k) {
    for (int i = 0; i < 4; ++i) out[4 * k + i] = static_cast<int8_t>(std::nearbyint(lanes[k][i]));
  }
  return out;
}
inline void store_i8x16(int8_t* p, i8x16 v) { std::memcpy(p, &v, sizeof v); }
#if defined(SDPA_EMULATE_FUSED_MADD)
// A stand-in for the relaxed-SIMD build's i16x8.relaxed_dot_i8x16_i7x16_s, so that the fuzzer's
// relaxed-build replay also runs its code path.
#define SDPA_SIMD_DOT_I8X16_I7 1
inline i16x8 dot_pairs_i8_u7(i8x16 a, i8x16 b) {
  const i16x8 ae = __builtin_convertvector(__builtin_shufflevector(a, a, 0, 2, 4, 6, 8, 10, 12, 14), i16x8);
  const i16x8 ao = __builtin_convertvector(__builtin_shufflevector(a, a, 1, 3, 5, 7, 9, 11, 13, 15), i16x8);
  const i16x8 be = __builtin_convertvector(__builtin_shufflevector(b, b, 0, 2, 4, 6, 8, 10, 12, 14), i16x8);
  const i16x8 bo = __builtin_convertvector(__builtin_shufflevector(b, b, 1, 3, 5, 7, 9, 11, 13, 15), i16x8);
  return ae * be + ao * bo;
}
#endif
template <int K>
inline f32x4 lane_bytes_to_float_2p24(i8x16 v) {
  const i32x4 bytes = __builtin_convertvector(__builtin_shufflevector(v, v, 4 * K, 4 * K + 1, 4 * K + 2, 4 * K + 3), i32x4);
  return __builtin_convertvector(bytes, f32x4) * 0x1p24f;
}

#endif

// quantize_block(kind, x, 32, levels) (core/kv_cache_format.h) on a whole block, four lanes at a
// time: the same division, product and rounding in every lane, so the same levels and scale, bit
// for bit.
inline float quantize_whole_block(KvQuant kind, const float* x, int8_t* levels) {
  const float level_count = static_cast<float>(quant_max_level(kind));
  f32x4 v[8];
  f32x4 amax = splat(0.0f);  // max propagates NaN, and |±Inf| is +Inf: a lane below +Inf is finite
  for (int g = 0; g < 8; ++g) {
    v[g] = load(x + 4 * g);
    amax = max(amax, and_bits(v[g], from_bits(0x7FFFFFFF)));
  }
  const bool finite = all(less(amax, splat(std::numeric_limits<float>::infinity())));
  const float largest = horizontal_max(amax);
  if (!finite || largest == 0.0f) {
    std::memset(levels, 0, kQuantBlock);
    return finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
  }
  const f32x4 divisor = splat(largest), level_max = splat(level_count);
  for (int h = 0; h < 2; ++h) {
    f32x4 scaled[4];
    for (int g = 0; g < 4; ++g) scaled[g] = mul(div(v[4 * h + g], divisor), level_max);
    store_i8x16(levels + 16 * h, round_to_int8(scaled[0], scaled[1], scaled[2], scaled[3]));
  }
  return quantized_scale(largest, level_count);
}

// quantize_block(kind, x, n, levels) with a whole block (n = 32) four lanes at a time.
inline float quantize_block_lanes(KvQuant kind, const float* x, int n, int8_t* levels) {
  return n == kQuantBlock ? quantize_whole_block(kind, x, levels) : quantize_block(kind, x, n, levels);
}

}  // namespace sdpa::simd
