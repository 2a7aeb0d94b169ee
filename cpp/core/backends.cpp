#include "core/backends.h"

#include <algorithm>

#include "core/attention_reference.h"
#include "core/parallel.h"
#include "kernels/attention_simd128.h"

namespace sdpa {

int threads_for(Backend backend, int requested) {
  if (backend != Backend::kSimd128) return 1;
  const int most = max_threads();
  return requested <= 0 ? most : std::min(requested, most);
}

uint64_t workspace_bytes(Backend backend, const AttentionPlan& plan, int threads) {
  switch (backend) {
    case Backend::kScalar: return reference_workspace_bytes<float>(plan);
    case Backend::kSimd128: return simd128_workspace_bytes(plan, threads);
  }
  return 0;
}

void run_attention(Backend backend, const AttentionPlan& plan, const AttentionInputs& in,
                   float* output, float* weights, void* workspace, int threads, float* lse) {
  switch (backend) {
    case Backend::kScalar: {
      ReferenceOutputs<float> out;
      out.output = output;
      out.weights = plan.return_weights ? weights : nullptr;
      out.lse = lse;
      attention_reference<float>(plan, in, out, static_cast<float*>(workspace));
      return;
    }
    case Backend::kSimd128: {
      // Below about 256K multiply-adds per thread (~10 µs) another thread costs more than it
      // saves (the hand-off, K packed on one thread while the others wait): small calls run on
      // fewer threads than allowed.
      const int useful = static_cast<int>(std::max(1.0, plan.multiply_adds() / (1 << 18)));
      attention_simd128(plan, in, output, weights, static_cast<float*>(workspace),
                        std::min(threads, useful), lse);
      return;
    }
  }
}

}  // namespace sdpa
