// float32 ↔ float16 conversion of whole arrays, eight values at a time: the core's
// float32_to_float16 and float16_to_float32 (core/float16.h) bit for bit. See the .cpp header.
#pragma once

#include <cstdint>

namespace sdpa {

// dst[i] = float32_to_float16(src[i]) for i < n; returns whether some dst[i] is Inf or NaN.
bool round_to_float16_simd128(const float* src, uint16_t* dst, int64_t n);
// dst[i] = float16_to_float32(src[i]) for i < n.
void widen_float16_simd128(const uint16_t* src, float* dst, int64_t n);

}  // namespace sdpa
