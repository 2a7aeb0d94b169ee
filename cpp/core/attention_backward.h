// The backward pass of scaled dot-product attention: validation of its extra arguments and the
// one place that dispatches between the backward kernels (mirrors core/backends.h).
//   scalar: attention_backward_reference<float> (recomputes P, materializes [Lq, Lk] per head)
//   simd:   attention_backward_simd128 (FlashAttention-2 style, from the forward's output and
//           log-sum-exp; runs the forward itself first when they are not passed in)
#pragma once

#include <cstdint>
#include <vector>

#include "core/attention_backward_reference.h"
#include "core/attention_problem.h"
#include "core/backends.h"

namespace sdpa {

// What a backward call brings on top of the forward's AttentionRequest.
struct BackwardRequest {
  std::vector<int64_t> d_output_shape;  // must equal the forward output's shape [..., Lq, Ev]
  bool has_forward = false;              // the forward's output and log-sum-exp are passed in
  std::vector<int64_t> output_shape;     // [..., Lq, Ev] when has_forward
  std::vector<int64_t> lse_shape;        // [..., Lq] when has_forward
  bool want_d_mask = false;              // also return ∂L/∂attnMask (additive masks only)
};

// Validates `request` against a validated forward plan (plan_attention).
Status check_backward_request(const AttentionPlan& plan, const BackwardRequest& request);

// Scratch bytes of the backward on `backend`; `has_forward`: output and lse are passed in.
uint64_t backward_workspace_bytes(Backend backend, const AttentionPlan& plan, bool has_forward);

// Writes (overwrites) the gradients. `output` [B, Hq, Lq, Ev] and `lse` [B, Hq, Lq] are the
// forward's results, or both null: then the SIMD backend recomputes them in its workspace
// (sized with has_forward = false). Whether they were passed is read from `lse` alone, since an
// empty output (Ev = 0) may have a null address; with no query rows nothing is recomputed.
// out.d_mask is written when non-null and the mask is additive.
void run_attention_backward(Backend backend, const AttentionPlan& plan, const AttentionInputs& in,
                            const float* d_output, const float* output, const float* lse,
                            const BackwardOutputs<float>& out, void* workspace);

}  // namespace sdpa
