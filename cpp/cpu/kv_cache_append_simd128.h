// Rows appended to an int8/int4 KV cache (core/kv_cache_format.h), quantized four lanes at a time.
// See the .cpp header.
#pragma once

#include <cstdint>

#include "core/kv_cache_format.h"

namespace sdpa {

// Quantizes rows [0, count) of `rows` (each layout.dim floats, one after another) into keys
// first_row … first_row + count − 1 of head `head` of `tensor`: the bytes store_quantized_row
// writes, bit for bit.
void store_quantized_rows_simd128(const QuantizedLayout& layout, uint8_t* tensor, int64_t head, int64_t first_row,
                                  const float* rows, int64_t count);

}  // namespace sdpa
