// The decode kernel on an int8/int4 KV cache (core/kv_cache_format.h), read in place. See the .cpp
// header.
#pragma once

#include <cstdint>

#include "core/problem.h"
#include "cpu/attention_decode_f32_simd128.h"

namespace sdpa {

// Scratch bytes attention_decode_quantized_simd128 needs: the split partials, per thread a chunk
// of scores and of dequantized values, and the query rows quantized.
uint64_t decode_quantized_workspace_bytes(const AttentionPlan& plan, const DecodeSplit& split, int threads);

// output [B, Hq, Lq, Ev]; lse [B, Hq, Lq] (may be null). plan.quantized_kv(): keys and values in
// in.key_quantized / in.value_quantized; the query float32 (in.query). No weights or score output.
// Runs on up to `threads` threads; the result does not depend on the thread count.
void attention_decode_quantized_simd128(const AttentionPlan& plan, const AttentionInputs& in, const DecodeSplit& split,
                                        float* output, float* workspace, int threads, float* lse = nullptr);

}  // namespace sdpa
