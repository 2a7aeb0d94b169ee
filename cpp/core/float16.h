// IEEE 754 binary16 ("float16", "half") storage: exact conversion to float32 (every half is a
// float), and rounding of float32 to the nearest half (ties to even, overflow to ±Inf, NaN kept
// NaN with its payload's top bits). Half values are held as their uint16_t bit patterns: neither
// C++17 nor wasm has a half type.
#pragma once

#include <cstdint>
#include <cstring>

namespace sdpa {

// kInt8/kInt4: a quantized KV cache's keys and values (core/kv_cache_format.h), never a query.
enum class ElementType { kFloat32, kFloat16, kInt8, kInt4 };

inline uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float float_from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// The float32 equal to half `h` (NaN payloads move to the float's top mantissa bits).
inline float float16_to_float32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return float_from_bits(sign | 0x7F800000u | (mantissa << 13));  // Inf, NaN
  // Normal and subnormal halves: the magnitude bits shifted into place are the value·2^-112
  // (exact: a subnormal half becomes a normal float), then scaled by 2^112.
  const float magnitude = float_from_bits(static_cast<uint32_t>(h & 0x7FFFu) << 13) * 0x1p112f;
  return float_from_bits(sign | float_bits(magnitude));
}

// `x` rounded to the nearest half, ties to even; beyond the largest half (65504, after rounding)
// ±Inf; NaN stays NaN with the top 10 bits of its payload (a payload only in lower bits becomes
// the quiet NaN's), so every half survives half → float → half bit for bit.
inline uint16_t float32_to_float16(float x) {
  const uint32_t u = float_bits(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) {
    const uint32_t payload = (magnitude >> 13) & 0x3FFu;
    return static_cast<uint16_t>(sign | 0x7C00u | (payload != 0 ? payload : 0x200u));
  }
  if (magnitude >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds past 65504, or Inf
  if (magnitude < 0x38800000u) {
    // Below the smallest normal half (2^-14): a subnormal half, rounded by the float adder
    // (adding 0.5 puts the half's last bit at the float's last mantissa bit, 2^-24).
    const float rounded = float_from_bits(magnitude) + 0.5f;
    return static_cast<uint16_t>(sign | (float_bits(rounded) - 0x3F000000u));
  }
  // Normal: rebias the exponent (127 → 15), round the 13 dropped mantissa bits to nearest even.
  const uint32_t odd = (magnitude >> 13) & 1u;
  const uint32_t rounded = magnitude + 0xC8000FFFu + odd;  // −(112 << 23) + 0xFFF + odd, mod 2^32
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

// dst[i] = float16_to_float32(src[i]) for i < n.
void widen_float16(const uint16_t* src, float* dst, int64_t n);
// Whether some half of src[0, n) is Inf or NaN.
bool float16_any_nonfinite(const uint16_t* src, int64_t n);

}  // namespace sdpa
