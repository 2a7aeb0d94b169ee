// Shared helpers for the backward tests and the fuzz target: gradients of a plan's shapes, the
// float64 analytic gradient (the oracle) and a backend's float32 gradients, written between
// canaries (an out-of-bounds write aborts).
#pragma once

#include <vector>

#include "attention_test_support.h"
#include "dispatch/dispatch.h"
#include "core/reference_backward.h"

namespace sdpa::testing {

// NaN-filled gradients of a plan's shapes (dmask used only with an additive mask), and the
// BackwardOutputs that point into them.
template <typename T>
struct Grads {
  std::vector<T> dq, dk, dv, dmask;
  explicit Grads(const AttentionPlan& plan)
      : dq(plan.query_elements(), NAN),
        dk(plan.key_elements(), NAN),
        dv(plan.value_elements(), NAN),
        dmask(plan.mask_elements, NAN) {}
  BackwardOutputs<T> outputs(const AttentionPlan& plan) {
    return {dq.data(), dk.data(), dv.data(),
            plan.mask_kind == MaskKind::kAdditive ? dmask.data() : nullptr};
  }
};
using Grads64 = Grads<double>;
using Grads32 = Grads<float>;

inline AttentionInputs inputs_of(const Problem& p) { return p.inputs(); }

inline Grads64 backward64(const Problem& problem, const std::vector<float>& d_output) {
  const AttentionPlan plan = plan_or_die(problem.request);
  Grads64 g(plan);
  std::vector<double> ws(backward_reference_workspace_bytes<double>(plan) / sizeof(double) + 1);
  attention_backward_reference<double>(plan, inputs_of(problem), d_output.data(), g.outputs(plan),
                                       ws.data());
  return g;
}

// pass_forward: hand the backward the forward's output and lse (else it recomputes them).
inline Grads32 backward32(Backend backend, const Problem& problem, const std::vector<float>& d_output,
                          bool pass_forward) {
  const AttentionPlan plan = plan_or_die(problem.request);
  std::vector<float> output, lse;
  if (pass_forward) {
    output.assign(plan.output_elements(), NAN);
    lse.assign(plan.B * plan.Hq * plan.Lq, NAN);
    AttentionPlan forward = plan;
    forward.return_weights = false;
    std::vector<uint8_t> ws(workspace_bytes(backend, forward) + 16);
    run_attention(backend, forward, inputs_of(problem), output.data(), nullptr, ws.data(), 1, lse.data());
  }
  std::vector<float> dq = with_canaries(plan.query_elements()), dk = with_canaries(plan.key_elements()),
                     dv = with_canaries(plan.value_elements()), dmask = with_canaries(plan.mask_elements);
  std::vector<float> ws = with_canaries((backward_workspace_bytes(backend, plan, pass_forward) + 3) / 4);
  const BackwardOutputs<float> out{dq.data() + kCanaryFloats, dk.data() + kCanaryFloats,
                                   dv.data() + kCanaryFloats,
                                   plan.mask_kind == MaskKind::kAdditive ? dmask.data() + kCanaryFloats : nullptr};
  run_attention_backward(backend, plan, inputs_of(problem), d_output.data(),
                         pass_forward ? output.data() : nullptr, pass_forward ? lse.data() : nullptr, out,
                         ws.data() + kCanaryFloats);
  for (const auto* v : {&dq, &dk, &dv, &dmask}) check_canaries(*v, "a gradient");
  check_canaries(ws, "the backward workspace");
  Grads32 g(plan);
  g.dq = strip_canaries(dq);
  g.dk = strip_canaries(dk);
  g.dv = strip_canaries(dv);
  g.dmask = strip_canaries(dmask);
  return g;
}

}  // namespace sdpa::testing
