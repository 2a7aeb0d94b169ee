#include "extras/score_functions.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace sdpa {
namespace {

const char* kind_name(ScoreKind k) {
  switch (k) {
    case ScoreKind::kDot: return "dot";
    case ScoreKind::kScaledDot: return "scaled-dot";
    case ScoreKind::kMultiplicative: return "multiplicative";
    case ScoreKind::kAdditive: return "additive";
  }
  return "";
}

template <typename T>
void zero(T* p, int64_t n) {
  if (p) std::fill(p, p + n, T(0));
}

// out[r, h] = Σ_e W[h, e]·x[r, e]: x [rows, D], W [H, D], out [rows, H]. The additive (Bahdanau)
// score projects q by W₁ and k by W₂ this way.
template <typename T>
void project_rows(const float* x, int64_t rows, int64_t D, const float* W, int64_t H, T* out) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < H; ++h) {
      T dot = 0;
      for (int64_t e = 0; e < D; ++e) dot += T(W[h * D + e]) * T(x[r * D + e]);
      out[r * H + h] = dot;
    }
  }
}

// The backward of project_rows given d_out [rows, H]: dx += d_out·W, dW += d_outᵀ·x (either may
// be null).
template <typename T>
void project_rows_backward(const T* d_out, const float* x, int64_t rows, int64_t D, const float* W,
                           int64_t H, T* dx, T* dW) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < H; ++h) {
      const T d = d_out[r * H + h];
      for (int64_t e = 0; e < D; ++e) {
        if (dx) dx[r * D + e] += d * T(W[h * D + e]);
        if (dW) dW[h * D + e] += d * T(x[r * D + e]);
      }
    }
  }
}

}  // namespace

Status plan_scores(const ScoreRequest& r, ScorePlan* plan) {
  const size_t rank = r.query_shape.size();
  if (rank < 2) {
    return Status::RangeError("query must have shape [..., Lq, Dq] (rank >= 2); got " +
                              shape_to_string(r.query_shape));
  }
  if (r.key_shape.size() != rank ||
      !std::equal(r.key_shape.begin(), r.key_shape.end() - 2, r.query_shape.begin())) {
    return Status::RangeError("key must have shape [..., Lk, Dk] with query's leading dims (query " +
                              shape_to_string(r.query_shape) + "); got " + shape_to_string(r.key_shape));
  }
  ScorePlan p;
  p.kind = r.kind;
  p.batch = 1;
  for (size_t i = 0; i + 2 < rank; ++i) p.batch *= r.query_shape[i];
  p.Lq = r.query_shape[rank - 2];
  p.Dq = r.query_shape[rank - 1];
  p.Lk = r.key_shape[rank - 2];
  p.Dk = r.key_shape[rank - 1];
  for (auto* shape : {&r.query_shape, &r.key_shape, &r.w_shape, &r.w1_shape, &r.w2_shape, &r.v_shape}) {
    double n = 1;
    for (int64_t d : *shape) n *= static_cast<double>(d);
    if (n > static_cast<double>(kMaxTensorElements)) {
      return Status::RangeError("a score-function argument of shape " + shape_to_string(*shape) +
                                " has more than 2^30 elements");
    }
  }
  if (static_cast<double>(p.batch) * p.Lq * p.Lk > static_cast<double>(kMaxTensorElements)) {
    return Status::RangeError("the scores [..., Lq, Lk] have more than 2^30 elements");
  }
  const std::string kind = std::string("kind '") + kind_name(r.kind) + "'";
  switch (r.kind) {
    case ScoreKind::kDot:
    case ScoreKind::kScaledDot:
      if (p.Dq != p.Dk) {
        return Status::RangeError(kind + " needs query and key dims to match (Dq = Dk); got query " +
                                  shape_to_string(r.query_shape) + ", key " + shape_to_string(r.key_shape));
      }
      break;
    case ScoreKind::kMultiplicative:
      if (r.w_shape != std::vector<int64_t>{p.Dq, p.Dk}) {
        return Status::RangeError(kind + " needs w of shape [Dq, Dk] = " +
                                  shape_to_string({p.Dq, p.Dk}) + "; got " + shape_to_string(r.w_shape));
      }
      break;
    case ScoreKind::kAdditive: {
      if (r.v_shape.size() != 1 || r.v_shape[0] < 1) {
        return Status::RangeError(kind + " needs v of shape [H] (H >= 1, the hidden size); got " +
                                  shape_to_string(r.v_shape));
      }
      p.H = r.v_shape[0];
      if (r.w1_shape != std::vector<int64_t>{p.H, p.Dq}) {
        return Status::RangeError(kind + " needs w1 of shape [H, Dq] = " + shape_to_string({p.H, p.Dq}) +
                                  "; got " + shape_to_string(r.w1_shape));
      }
      if (r.w2_shape != std::vector<int64_t>{p.H, p.Dk}) {
        return Status::RangeError(kind + " needs w2 of shape [H, Dk] = " + shape_to_string({p.H, p.Dk}) +
                                  "; got " + shape_to_string(r.w2_shape));
      }
      break;
    }
  }
  if (r.has_scale && !std::isfinite(r.scale)) {
    return Status::RangeError("scale must be a finite number; got " + std::to_string(r.scale));
  }
  p.scale = r.kind != ScoreKind::kScaledDot ? 1.0f
            : r.has_scale                   ? static_cast<float>(r.scale)
                                            : static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.Dk)));
  p.scores_shape = r.query_shape;
  p.scores_shape[rank - 1] = p.Lk;
  *plan = std::move(p);
  return Status::Ok();
}

int64_t score_workspace_elements(const ScorePlan& p) {
  switch (p.kind) {
    case ScoreKind::kAdditive: return (p.Lq + p.Lk) * p.H * 2;
    case ScoreKind::kMultiplicative: return 2 * p.Lq * p.Dk;
    default: return 0;
  }
}

template <typename T>
void attention_scores(const ScorePlan& p, const float* query, const float* key,
                      const ScoreParams& w, T* scores, T* ws) {
  for (int64_t b = 0; b < p.batch; ++b) {
    const float* q = query + b * p.Lq * p.Dq;  // [Lq, Dq]
    const float* k = key + b * p.Lk * p.Dk;    // [Lk, Dk]
    T* s = scores + b * p.Lq * p.Lk;           // [Lq, Lk]
    switch (p.kind) {
      case ScoreKind::kDot:
      case ScoreKind::kScaledDot:
        // s = q·kᵀ·scale
        for (int64_t i = 0; i < p.Lq; ++i) {
          for (int64_t j = 0; j < p.Lk; ++j) {
            T dot = 0;
            for (int64_t e = 0; e < p.Dq; ++e) dot += T(q[i * p.Dq + e]) * T(k[j * p.Dk + e]);
            s[i * p.Lk + j] = dot * T(p.scale);
          }
        }
        break;
      case ScoreKind::kMultiplicative: {
        // qw = q·W  [Lq, Dk];  s = qw·kᵀ
        T* qw = ws;
        for (int64_t i = 0; i < p.Lq; ++i) {
          for (int64_t c = 0; c < p.Dk; ++c) {
            T dot = 0;
            for (int64_t e = 0; e < p.Dq; ++e) dot += T(q[i * p.Dq + e]) * T(w.w[e * p.Dk + c]);
            qw[i * p.Dk + c] = dot;
          }
        }
        for (int64_t i = 0; i < p.Lq; ++i) {
          for (int64_t j = 0; j < p.Lk; ++j) {
            T dot = 0;
            for (int64_t c = 0; c < p.Dk; ++c) dot += qw[i * p.Dk + c] * T(k[j * p.Dk + c]);
            s[i * p.Lk + j] = dot;
          }
        }
        break;
      }
      case ScoreKind::kAdditive: {
        // a = q·W₁ᵀ [Lq, H], c = k·W₂ᵀ [Lk, H];  s_ij = Σ_h v_h·tanh(a_ih + c_jh)
        T* a = ws;
        T* c = ws + p.Lq * p.H;
        project_rows(q, p.Lq, p.Dq, w.w1, p.H, a);
        project_rows(k, p.Lk, p.Dk, w.w2, p.H, c);
        for (int64_t i = 0; i < p.Lq; ++i) {
          for (int64_t j = 0; j < p.Lk; ++j) {
            T sum = 0;
            for (int64_t h = 0; h < p.H; ++h) sum += T(w.v[h]) * std::tanh(a[i * p.H + h] + c[j * p.H + h]);
            s[i * p.Lk + j] = sum;
          }
        }
        break;
      }
    }
  }
}

template <typename T>
void attention_scores_backward(const ScorePlan& p, const float* query, const float* key,
                               const ScoreParams& w, const float* d_scores,
                               const ScoreGradients<T>& g, T* ws) {
  zero(g.d_query, p.batch * p.Lq * p.Dq);
  zero(g.d_key, p.batch * p.Lk * p.Dk);
  zero(g.d_w, p.Dq * p.Dk);
  zero(g.d_w1, p.H * p.Dq);
  zero(g.d_w2, p.H * p.Dk);
  zero(g.d_v, p.H);
  for (int64_t b = 0; b < p.batch; ++b) {
    const float* q = query + b * p.Lq * p.Dq;
    const float* k = key + b * p.Lk * p.Dk;
    const float* ds = d_scores + b * p.Lq * p.Lk;  // [Lq, Lk]
    T* dq = g.d_query ? g.d_query + b * p.Lq * p.Dq : nullptr;
    T* dk = g.d_key ? g.d_key + b * p.Lk * p.Dk : nullptr;
    switch (p.kind) {
      case ScoreKind::kDot:
      case ScoreKind::kScaledDot:
        // dq = scale·dS·k,  dk = scale·dSᵀ·q
        for (int64_t i = 0; i < p.Lq; ++i) {
          for (int64_t j = 0; j < p.Lk; ++j) {
            const T gij = T(ds[i * p.Lk + j]) * T(p.scale);
            for (int64_t e = 0; e < p.Dq; ++e) {
              if (dq) dq[i * p.Dq + e] += gij * T(k[j * p.Dk + e]);
              if (dk) dk[j * p.Dk + e] += gij * T(q[i * p.Dq + e]);
            }
          }
        }
        break;
      case ScoreKind::kMultiplicative: {
        // qw = q·W [Lq, Dk];  dqw = dS·k [Lq, Dk];  dk = dSᵀ·qw;  dq = dqw·Wᵀ;  dW = qᵀ·dqw
        T* qw = ws;
        T* dqw = ws + p.Lq * p.Dk;
        for (int64_t i = 0; i < p.Lq; ++i) {
          for (int64_t c = 0; c < p.Dk; ++c) {
            T dot = 0, dd = 0;
            for (int64_t e = 0; e < p.Dq; ++e) dot += T(q[i * p.Dq + e]) * T(w.w[e * p.Dk + c]);
            for (int64_t j = 0; j < p.Lk; ++j) dd += T(ds[i * p.Lk + j]) * T(k[j * p.Dk + c]);
            qw[i * p.Dk + c] = dot;
            dqw[i * p.Dk + c] = dd;
          }
        }
        if (dk) {
          for (int64_t j = 0; j < p.Lk; ++j) {
            for (int64_t c = 0; c < p.Dk; ++c) {
              T dot = 0;
              for (int64_t i = 0; i < p.Lq; ++i) dot += T(ds[i * p.Lk + j]) * qw[i * p.Dk + c];
              dk[j * p.Dk + c] = dot;
            }
          }
        }
        for (int64_t i = 0; i < p.Lq; ++i) {
          for (int64_t e = 0; e < p.Dq; ++e) {
            for (int64_t c = 0; c < p.Dk; ++c) {
              if (dq) dq[i * p.Dq + e] += dqw[i * p.Dk + c] * T(w.w[e * p.Dk + c]);
              if (g.d_w) g.d_w[e * p.Dk + c] += T(q[i * p.Dq + e]) * dqw[i * p.Dk + c];
            }
          }
        }
        break;
      }
      case ScoreKind::kAdditive: {
        // a = q·W₁ᵀ, c = k·W₂ᵀ, t_ijh = tanh(a_ih + c_jh):
        //   dv_h += Σ_ij dS_ij·t_ijh;   dz_ijh = dS_ij·v_h·(1 − t_ijh²)
        //   da_ih = Σ_j dz_ijh,  dc_jh = Σ_i dz_ijh
        //   dq = da·W₁, dk = dc·W₂, dW₁ += daᵀ·q, dW₂ += dcᵀ·k
        T* a = ws;
        T* c = a + p.Lq * p.H;
        T* da = c + p.Lk * p.H;
        T* dc = da + p.Lq * p.H;
        project_rows(q, p.Lq, p.Dq, w.w1, p.H, a);
        project_rows(k, p.Lk, p.Dk, w.w2, p.H, c);
        std::fill(da, da + (p.Lq + p.Lk) * p.H, T(0));
        for (int64_t i = 0; i < p.Lq; ++i) {
          for (int64_t j = 0; j < p.Lk; ++j) {
            const T gij = T(ds[i * p.Lk + j]);
            for (int64_t h = 0; h < p.H; ++h) {
              const T t = std::tanh(a[i * p.H + h] + c[j * p.H + h]);
              if (g.d_v) g.d_v[h] += gij * t;
              const T dz = gij * T(w.v[h]) * (T(1) - t * t);
              da[i * p.H + h] += dz;
              dc[j * p.H + h] += dz;
            }
          }
        }
        project_rows_backward(da, q, p.Lq, p.Dq, w.w1, p.H, dq, g.d_w1);
        project_rows_backward(dc, k, p.Lk, p.Dk, w.w2, p.H, dk, g.d_w2);
        break;
      }
    }
  }
}

template void attention_scores<float>(const ScorePlan&, const float*, const float*, const ScoreParams&, float*, float*);
template void attention_scores<double>(const ScorePlan&, const float*, const float*, const ScoreParams&, double*, double*);
template void attention_scores_backward<float>(const ScorePlan&, const float*, const float*, const ScoreParams&,
                                               const float*, const ScoreGradients<float>&, float*);
template void attention_scores_backward<double>(const ScorePlan&, const float*, const float*, const ScoreParams&,
                                                const float*, const ScoreGradients<double>&, double*);

}  // namespace sdpa
