// The scalar reference of the backward pass: the oracle for every backward kernel. Plain loops in
// named passes, templated on the precision it computes in, like reference.h:
// attention_backward_reference<double> is the float64 analytic gradient every backward kernel is
// tested against (and that the float64 finite-difference gradcheck verifies);
// attention_backward_reference<float> is the 'scalar' backend's backward, and its distance from
// the float64 gradient is the e_ref of the tolerance rule.
//
// With S = softcap(Q·Kᵀ·scale) + bias + mask (−inf where hidden), P = softmax(S) row-wise, O = P·V and a
// loss L with dO = ∂L/∂O given, per (batch, query head):
//   dV  = Pᵀ·dO                         [Lk, Ev]   (summed over the query heads of a GQA group)
//   dP  = dO·Vᵀ                         [Lq, Lk]
//   D_i = Σ_j P_ij·dP_ij  (= dO_i·O_i)  [Lq]
//   dS  = P ⊙ (dP − D)                  [Lq, Lk]   (= ∂L/∂mask for an additive mask)
//   dQ  = scale·dS·K                    [Lq, E]
//   dK  = scale·dSᵀ·Q                   [Lk, E]    (summed over the query heads of a GQA group)
// Semantics, matching the forward (reference.h):
//  - Hidden keys (bool 0, additive −inf, causal) have P = 0 and dS = 0; their K/V rows are never
//    read, so NaN/Inf stored there cannot leak. Their dK/dV rows get 0 from this query row.
//  - A row that sees no key (output 0) has zero gradients: dQ_i = 0, nothing flows into dK/dV.
//  - NaN in a visible score propagates to that row's gradients.
//  - Sinks: the sink logit of head h has P_sink,i = e^(sink_h − lse_i) in row i and no value, so
//    dSinks_h = −Σ_(b, i) P_sink,i·D_i. ALiBi's bias is a constant: dS passes through it unchanged.
//  - dMask has the mask's own shape: where the mask broadcasts, dS is summed over the broadcast
//    dims (as autograd does). Entries that are −inf get 0.
#pragma once

#include <cstdint>

#include "core/problem.h"

namespace sdpa {

// Where a backward pass writes. d_mask may be null (not asked, or no additive mask).
template <typename T>
struct BackwardOutputs {
  T* d_query = nullptr;  // [B, Hq, Lq, E]
  T* d_key = nullptr;    // [B, Hkv, Lk, E]
  T* d_value = nullptr;  // [B, Hkv, Lk, Ev]
  T* d_mask = nullptr;   // the additive mask's shape (plan.mask_elements)
  T* d_sinks = nullptr;  // [Hq] when the plan has sinks
};

// Scratch bytes attention_backward_reference<T> needs: S, P and dP/dS of one head, [Lq, Lk] each.
template <typename T>
uint64_t backward_reference_workspace_bytes(const AttentionPlan& plan) {
  return 3 * static_cast<uint64_t>(plan.Lq) * static_cast<uint64_t>(plan.Lk) * sizeof(T);
}

// Recomputes P from Q, K (and the mask) and writes every gradient (overwrites, never adds).
template <typename T>
void attention_backward_reference(const AttentionPlan& plan, const AttentionInputs& in,
                                  const float* d_output, const BackwardOutputs<T>& out,
                                  T* workspace);

}  // namespace sdpa
