// Fused, tiled scaled dot-product attention on f32x4 vectors (wasm SIMD128). See the .cpp header.
#pragma once

#include <cstdint>

#include "core/problem.h"

namespace sdpa {

// Keys per K/V tile of the kernel (its online softmax updates once per tile).
constexpr int kSimd128TileKeys = 64;
// Query rows per block (a block streams the key tiles together).
constexpr int kSimd128BlockQueries = 32;

// A trace of one query row's online softmax, for explaining the kernel: after each key tile the
// kernel visits for that row, in order, the tile's first key, the running max m, the running sum
// l and the unnormalized accumulator o = Σ_j e^(s_j − m)·v_j, as the kernel holds them (the
// output row is o / l at the end).
// With `visited` (may be null), also which key tiles the kernel read for each block of
// kSimd128BlockQueries query rows of head (b, h): 1 where it did, 0 where it skipped.
struct SoftmaxTrace {
  int64_t b = 0, h = 0, row = 0;  // the traced query row
  float* steps = nullptr;         // [tiles, 3 + Ev]
  int64_t steps_written = 0;
  uint8_t* visited = nullptr;     // [ceil(Lq / kSimd128BlockQueries), tiles], zeroed by the caller
};

// Scratch bytes attention_f32_simd128 needs on `threads` threads: packed Kᵀ of every key/value head
// (and V when Ev % 4 != 0) plus one query block's tiles per thread; never O(Lq·Lk).
uint64_t simd128_workspace_bytes(const AttentionPlan& plan, int threads);

// output [B, Hq, Lq, Ev]; weights [B, Hq, Lq, Lk], written only when plan.return_weights;
// lse [B, Hq, Lq] (the rows' log-sum-exp, for the backward pass), written only when not null;
// scores [B, Hq, Lq, Lk] (the stage plan.return_scores), written only when that stage is on;
// trace, when not null, records its row's online softmax.
// Work is split over up to `threads` threads (cpu/thread_pool.h); the workspace must have been
// sized for at least that many.
void attention_f32_simd128(const AttentionPlan& plan, const AttentionInputs& in, float* output,
                       float* weights, float* workspace, int threads, float* lse = nullptr,
                       float* scores = nullptr, SoftmaxTrace* trace = nullptr);

}  // namespace sdpa
