// float32 ↔ float16 conversion of whole arrays in 128-bit vectors, for KvCache.append where the
// appended rows' element type is not the cache's (float32 rows into a float16 cache, float16 rows
// into a float32 cache) and for widening float16 inputs.
//
// Algorithm: the core's scalar rules (core/float16.h) in every lane, each case computed for all
// lanes and the lane's own chosen by masks. Rounding: a normal half rebiases the exponent and rounds
// the 13 dropped mantissa bits to nearest even with one integer add; a subnormal one is rounded by
// the float adder (x + 0.5 puts the half's last bit at the float's last); past 65504 (after
// rounding) ±Inf; NaN keeps its payload's top 10 bits (0x200 where they are zero). Widening: the
// magnitude bits shifted into float position are the value·2^-112 (subnormal halves included),
// then one multiply by 2^112; exponent 31 becomes Inf/NaN with the payload moved up. Written in
// GCC/Clang vector extensions, which Emscripten lowers to wasm SIMD128 and the native build to
// its own vectors: one source for both, so the native tests test the wasm code's arithmetic.
#include "cpu/float16_convert_simd128.h"

#include <cstring>

#include "core/float16.h"

namespace sdpa {
namespace {

using u32x4 = uint32_t __attribute__((vector_size(16)));
using i32x4 = int32_t __attribute__((vector_size(16)));
using u16x8 = uint16_t __attribute__((vector_size(16)));
using f32x4 = float __attribute__((vector_size(16)));

template <typename To, typename From>
To bits_as(From v) {
  To out;
  std::memcpy(&out, &v, sizeof out);
  return out;
}

// a where the lanes of mask `m` are all ones, else b.
u32x4 choose(i32x4 m, u32x4 a, u32x4 b) {
  const u32x4 mu = bits_as<u32x4>(m);
  return (a & mu) | (b & ~mu);
}

// float32_to_float16 of 4 float bit patterns: each lane's half in its low 16 bits.
u32x4 round_lanes(u32x4 u) {
  const u32x4 sign = (u >> 16) & 0x8000u;
  const u32x4 magnitude = u & 0x7FFFFFFFu;
  const u32x4 normal = (magnitude + 0xC8000FFFu + ((magnitude >> 13) & 1u)) >> 13;
  const u32x4 subnormal = bits_as<u32x4>(bits_as<f32x4>(magnitude) + 0.5f) - 0x3F000000u;
  const u32x4 payload = (magnitude >> 13) & 0x3FFu;
  const u32x4 nan = 0x7C00u | choose(payload == 0u, u32x4{} + 0x200u, payload);
  u32x4 half = choose(magnitude < 0x38800000u, subnormal, normal);
  half = choose(magnitude >= 0x477FF000u, u32x4{} + 0x7C00u, half);
  half = choose(magnitude > 0x7F800000u, nan, half);
  return sign | half;
}

// float16_to_float32 of 4 halves, each in the low 16 bits of its lane, as float bit patterns.
u32x4 widen_lanes(u32x4 h) {
  const u32x4 sign = (h & 0x8000u) << 16;
  const u32x4 shifted = (h & 0x7FFFu) << 13;
  const u32x4 finite = bits_as<u32x4>(bits_as<f32x4>(shifted) * 0x1p112f);
  const u32x4 special = 0x7F800000u | (shifted & 0x007FE000u);
  return sign | choose((h & 0x7C00u) == 0x7C00u, special, finite);
}

}  // namespace

bool round_to_float16_simd128(const float* src, uint16_t* dst, int64_t n) {
  u32x4 specials{};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    u32x4 a, b;
    std::memcpy(&a, src + i, sizeof a);
    std::memcpy(&b, src + i + 4, sizeof b);
    const u32x4 ha = round_lanes(a), hb = round_lanes(b);
    specials |= bits_as<u32x4>(((ha & 0x7C00u) == 0x7C00u) | ((hb & 0x7C00u) == 0x7C00u));
    const u16x8 halves = __builtin_shufflevector(bits_as<u16x8>(ha), bits_as<u16x8>(hb), 0, 2, 4, 6, 8, 10, 12, 14);
    std::memcpy(dst + i, &halves, sizeof halves);
  }
  bool any = (specials[0] | specials[1] | specials[2] | specials[3]) != 0;
  for (; i < n; ++i) {
    dst[i] = float32_to_float16(src[i]);
    any |= (dst[i] & 0x7C00u) == 0x7C00u;
  }
  return any;
}

void widen_float16_simd128(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    u16x8 halves;
    std::memcpy(&halves, src + i, sizeof halves);
    const u32x4 low = __builtin_convertvector(__builtin_shufflevector(halves, halves, 0, 1, 2, 3), u32x4);
    const u32x4 high = __builtin_convertvector(__builtin_shufflevector(halves, halves, 4, 5, 6, 7), u32x4);
    const u32x4 a = widen_lanes(low), b = widen_lanes(high);
    std::memcpy(dst + i, &a, sizeof a);
    std::memcpy(dst + i + 4, &b, sizeof b);
  }
  for (; i < n; ++i) dst[i] = float16_to_float32(src[i]);
}

}  // namespace sdpa
