// Fused, tiled scaled dot-product attention on f32x4 vectors (wasm SIMD128). See the .cpp header.
#pragma once

#include <cstdint>

#include "core/problem.h"

namespace sdpa {

// Scratch bytes attention_f32_simd128 needs on `threads` threads: packed Kᵀ of every key/value head
// (and V when Ev % 4 != 0) plus one query block's tiles per thread; never O(Lq·Lk).
uint64_t simd128_workspace_bytes(const AttentionPlan& plan, int threads);

// output [B, Hq, Lq, Ev]; weights [B, Hq, Lq, Lk], written only when plan.return_weights;
// lse [B, Hq, Lq] (the rows' log-sum-exp, for the backward pass), written only when not null;
// scores [B, Hq, Lq, Lk] (the stage plan.return_scores), written only when that stage is on.
// Work is split over up to `threads` threads (cpu/thread_pool.h); the workspace must have been
// sized for at least that many.
void attention_f32_simd128(const AttentionPlan& plan, const AttentionInputs& in, float* output,
                       float* weights, float* workspace, int threads, float* lse = nullptr,
                       float* scores = nullptr);

}  // namespace sdpa
