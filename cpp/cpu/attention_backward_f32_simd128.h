// Backward pass of scaled dot-product attention on f32x4 vectors (wasm SIMD128). See the .cpp header.
#pragma once

#include <cstdint>

#include "core/problem.h"
#include "core/reference_backward.h"

namespace sdpa {

// Scratch bytes attention_backward_f32_simd128 needs: packed K/V of one key/value head, the dK/dV
// accumulators of that head, padded Q/dO/dQ rows of one query head and two key-tile rows:
// O(Lk·(E + Ev) + Lq·(E + Ev)), never O(Lq·Lk).
uint64_t simd128_backward_workspace_bytes(const AttentionPlan& plan);

// Gradients from the forward's output [B, Hq, Lq, Ev] and log-sum-exp lse [B, Hq, Lq]
// (attention_f32_simd128 with a non-null lse). Writes (overwrites) out.d_query, d_key, d_value and,
// when non-null and the mask is additive, d_mask.
void attention_backward_f32_simd128(const AttentionPlan& plan, const AttentionInputs& in,
                                const float* d_output, const float* output, const float* lse,
                                const BackwardOutputs<float>& out, float* workspace);

}  // namespace sdpa
