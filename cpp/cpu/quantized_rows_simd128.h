// Rows of an int8/int4 KV-cache tensor (core/kv_cache_format.h) written and read whole, four lanes
// at a time: the bytes and the floats of the core's scalar store_quantized_row and
// load_quantized_row<float>, bit for bit. See the .cpp header.
#pragma once

#include <cstdint>

#include "core/kv_cache_format.h"

namespace sdpa {

// Quantizes rows [0, count) of `rows` (each layout.dim floats, one after another) into keys
// first_row … first_row + count − 1 of head `head` of `tensor`.
void store_quantized_rows_simd128(const QuantizedLayout& layout, uint8_t* tensor, int64_t head, int64_t first_row,
                                  const float* rows, int64_t count);

// Keys first_row … first_row + count − 1 of head `head` of `tensor`, dequantized (level · scale in
// float32) into rows [0, count) of `rows`.
void load_quantized_rows_simd128(const QuantizedLayout& layout, const uint8_t* tensor, int64_t head, int64_t first_row,
                                 int64_t count, float* rows);

}  // namespace sdpa
