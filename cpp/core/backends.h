// The CPU backends and the one place that dispatches between them.
#pragma once

#include <cstdint>

#include "core/attention_problem.h"

namespace sdpa {

enum class Backend {
  kScalar,   // attention_reference<float>: plain loops, materializes one [Lq, Lk] head
  kSimd128,  // attention_simd128: fused, tiled, online softmax
};

// Scratch bytes `backend` needs for `plan`; the caller allocates them (kernels never allocate).
uint64_t workspace_bytes(Backend backend, const AttentionPlan& plan);

// Runs attention. `weights` is written only when plan.return_weights.
void run_attention(Backend backend, const AttentionPlan& plan, const AttentionInputs& in,
                   float* output, float* weights, void* workspace);

}  // namespace sdpa
