// Fused, tiled scaled dot-product attention on f32x4 vectors (wasm SIMD128). See the .cpp header.
#pragma once

#include <cstdint>

#include "core/attention_problem.h"

namespace sdpa {

// Scratch bytes attention_simd128 needs: packed Kᵀ and V of one key/value head plus one query
// block's tiles, O(Lk·(E + Ev) + tile), never O(Lq·Lk).
uint64_t simd128_workspace_bytes(const AttentionPlan& plan);

// output [B, Hq, Lq, Ev]; weights [B, Hq, Lq, Lk], written only when plan.return_weights.
void attention_simd128(const AttentionPlan& plan, const AttentionInputs& in, float* output,
                       float* weights, float* workspace);

}  // namespace sdpa
