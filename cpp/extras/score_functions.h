// Attention score functions side by side, with their gradients (scalar reference, templated on
// the precision it computes in, like reference.h). For a query row q [Dq] and a key
// row k [Dk]:
//   dot             score = q·k                      (Dq = Dk)
//   scaled-dot      score = q·k·scale                (Dq = Dk; scale default 1/√Dk)
//   multiplicative  score = qᵀ·W·k                   (Luong "general"; W [Dq, Dk])
//   additive        score = vᵀ·tanh(W₁·q + W₂·k)     (Bahdanau; W₁ [H, Dq], W₂ [H, Dk], v [H])
// Shapes: query [..., Lq, Dq], key [..., Lk, Dk] with the same leading dims ("batch", any rank
// >= 2), scores [..., Lq, Lk]; the parameters are shared by every batch entry.
// Backward: given dScores = ∂L/∂scores, the gradients of L w.r.t. query, key and the parameters
// (summed over the batch).
#pragma once

#include <cstdint>
#include <vector>

#include "core/problem.h"

namespace sdpa {

enum class ScoreKind { kDot, kScaledDot, kMultiplicative, kAdditive };

struct ScoreRequest {
  ScoreKind kind = ScoreKind::kScaledDot;
  std::vector<int64_t> query_shape, key_shape;
  std::vector<int64_t> w_shape;                   // multiplicative
  std::vector<int64_t> w1_shape, w2_shape, v_shape;  // additive
  bool has_scale = false;
  double scale = 0;
};

struct ScorePlan {
  ScoreKind kind = ScoreKind::kScaledDot;
  int64_t batch = 0, Lq = 0, Lk = 0, Dq = 0, Dk = 0, H = 0;
  float scale = 1.0f;
  std::vector<int64_t> scores_shape;  // [..., Lq, Lk]
};

Status plan_scores(const ScoreRequest& request, ScorePlan* plan);

struct ScoreParams {
  const float* w = nullptr;   // multiplicative [Dq, Dk]
  const float* w1 = nullptr;  // additive [H, Dq]
  const float* w2 = nullptr;  // additive [H, Dk]
  const float* v = nullptr;   // additive [H]
};

template <typename T>
struct ScoreGradients {
  T* d_query = nullptr;  // [..., Lq, Dq]
  T* d_key = nullptr;    // [..., Lk, Dk]
  T* d_w = nullptr;      // multiplicative
  T* d_w1 = nullptr;     // additive
  T* d_w2 = nullptr;
  T* d_v = nullptr;
};

// Scratch elements of T both passes need (additive: projections [Lq, H] and [Lk, H];
// multiplicative: q·W [Lq, Dk] and its gradient).
int64_t score_workspace_elements(const ScorePlan& plan);

template <typename T>
void attention_scores(const ScorePlan& plan, const float* query, const float* key,
                      const ScoreParams& params, T* scores, T* workspace);

// Overwrites every non-null gradient.
template <typename T>
void attention_scores_backward(const ScorePlan& plan, const float* query, const float* key,
                               const ScoreParams& params, const float* d_scores,
                               const ScoreGradients<T>& grads, T* workspace);

}  // namespace sdpa
