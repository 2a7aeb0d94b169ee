#include "core/backends.h"

#include "core/attention_reference.h"
#include "kernels/attention_simd128.h"

namespace sdpa {

uint64_t workspace_bytes(Backend backend, const AttentionPlan& plan) {
  switch (backend) {
    case Backend::kScalar: return reference_workspace_bytes<float>(plan);
    case Backend::kSimd128: return simd128_workspace_bytes(plan);
  }
  return 0;
}

void run_attention(Backend backend, const AttentionPlan& plan, const AttentionInputs& in,
                   float* output, float* weights, void* workspace) {
  switch (backend) {
    case Backend::kScalar: {
      ReferenceOutputs<float> out;
      out.output = output;
      out.weights = plan.return_weights ? weights : nullptr;
      attention_reference<float>(plan, in, out, static_cast<float*>(workspace));
      return;
    }
    case Backend::kSimd128:
      attention_simd128(plan, in, output, weights, static_cast<float*>(workspace));
      return;
  }
}

}  // namespace sdpa
