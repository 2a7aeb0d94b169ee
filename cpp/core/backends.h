// The CPU backends and the one place that dispatches between them.
#pragma once

#include <cstdint>

#include "core/attention_problem.h"

namespace sdpa {

enum class Backend {
  kScalar,   // attention_reference<float>: plain loops, materializes one [Lq, Lk] head
  kSimd128,  // attention_simd128: fused, tiled, online softmax
};

// The threads `backend` would use when asked for `requested` (0: every core this build can use):
// kSimd128 runs on min(requested, max_threads()) threads, kScalar on 1.
int threads_for(Backend backend, int requested);

// Scratch bytes `backend` needs for `plan` on `threads` threads (as returned by threads_for);
// the caller allocates them (kernels never allocate).
uint64_t workspace_bytes(Backend backend, const AttentionPlan& plan, int threads = 1);

// Runs attention on `threads` threads (the workspace must be sized for them). `weights` is
// written only when plan.return_weights; `lse` ([B, Hq, Lq], the rows' log-sum-exp that the
// backward pass reuses) only when not null.
void run_attention(Backend backend, const AttentionPlan& plan, const AttentionInputs& in,
                   float* output, float* weights, void* workspace, int threads = 1,
                   float* lse = nullptr);

}  // namespace sdpa
