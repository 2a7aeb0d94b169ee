#include "core/reference_backward.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/masks.h"
#include "core/reference.h"

namespace sdpa {
namespace {

template <typename T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

template <typename T>
void zero(T* p, int64_t n) {
  if (p) std::fill(p, p + n, T(0));
}

}  // namespace

template <typename T>
void attention_backward_reference(const AttentionPlan& p, const AttentionInputs& in,
                                  const float* d_output, const BackwardOutputs<T>& out,
                                  T* workspace) {
  zero(out.d_query, p.query_elements());
  zero(out.d_key, p.key_elements());
  zero(out.d_value, p.value_elements());
  if (p.mask_kind == MaskKind::kAdditive) zero(out.d_mask, p.mask_elements);
  if (!p.sinks.empty()) zero(out.d_sinks, p.Hq);

  const int64_t group = p.Hq == 0 ? 1 : p.heads_per_kv();
  const int64_t n = p.Lq * p.Lk;
  T* s = workspace;           // [Lq, Lk] scaled, masked scores
  T* w = workspace + n;       // [Lq, Lk] P
  T* ds = workspace + 2 * n;  // [Lq, Lk] dP, then dS in place
  for (int64_t b = 0; b < p.B; ++b) {
    for (int64_t h = 0; h < p.Hq; ++h) {
      const int64_t kv_head = h / group;
      const int64_t q_off = (b * p.Hq + h) * p.Lq;
      const int64_t kv_off = (b * p.Hkv + kv_head) * p.Lk;
      const float* q = in.query + q_off * p.E;      // [Lq, E]
      const float* k = in.key + kv_off * p.E;       // [Lk, E]
      const float* v = in.value + kv_off * p.Ev;    // [Lk, Ev]
      const float* dout = d_output + q_off * p.Ev;  // [Lq, Ev]
      T* dq = out.d_query + q_off * p.E;            // [Lq, E]
      T* dk = out.d_key + kv_off * p.E;             // [Lk, E], shared by the GQA group
      T* dv = out.d_value + kv_off * p.Ev;          // [Lk, Ev], shared by the GQA group

      // scores -> scale -> softcap -> bias -> mask: s = c·tanh(q·kᵀ·scale / c) + bias + mask, −inf where hidden  [Lq, Lk]
      for (int64_t i = 0; i < p.Lq; ++i) {
        T* row = s + i * p.Lk;
        for (int64_t j = 0; j < p.Lk; ++j) {
          T dot = 0;
          for (int64_t e = 0; e < p.E; ++e) dot += T(q[i * p.E + e]) * T(k[j * p.E + e]);
          row[j] = dot * T(p.scale);
        }
        softcap_scores(p, p.Lk, row);
        bias_scores(p, b, h, i, 0, p.Lk, row);
        mask_scores(p, in, b, h, i, 0, p.Lk, row);
      }

      // softmax: w = softmax([s, sink]) row-wise; a row that sees nothing is all zeros  [Lq, Lk]
      const T sink_value = p.sinks.empty() ? T(0) : T(p.sinks[static_cast<size_t>(h)]);
      const T* sink = p.sinks.empty() ? nullptr : &sink_value;
      for (int64_t i = 0; i < p.Lq; ++i) softmax_row(s + i * p.Lk, p.Lk, w + i * p.Lk, sink);

      // dV += wᵀ·dout  [Lk, Ev] (hidden keys skipped)
      for (int64_t i = 0; i < p.Lq; ++i) {
        for (int64_t j = 0; j < p.Lk; ++j) {
          if (s[i * p.Lk + j] == kNegInf<T>) continue;
          const T weight = w[i * p.Lk + j];
          for (int64_t c = 0; c < p.Ev; ++c) dv[j * p.Ev + c] += weight * T(dout[i * p.Ev + c]);
        }
      }

      // dP = dout·vᵀ  [Lq, Lk] (0 where hidden: V there is never read)
      for (int64_t i = 0; i < p.Lq; ++i) {
        for (int64_t j = 0; j < p.Lk; ++j) {
          T dot = 0;
          if (s[i * p.Lk + j] != kNegInf<T>) {
            for (int64_t c = 0; c < p.Ev; ++c) dot += T(dout[i * p.Ev + c]) * T(v[j * p.Ev + c]);
          }
          ds[i * p.Lk + j] = dot;
        }
      }

      // D and dS: D_i = Σ_j w_ij·dP_ij, dS = w ⊙ (dP − D)  [Lq, Lk]
      for (int64_t i = 0; i < p.Lq; ++i) {
        const T* wrow = w + i * p.Lk;
        T* row = ds + i * p.Lk;
        T d = 0;
        for (int64_t j = 0; j < p.Lk; ++j) d += wrow[j] * row[j];
        for (int64_t j = 0; j < p.Lk; ++j) {
          row[j] = s[i * p.Lk + j] == kNegInf<T> ? T(0) : wrow[j] * (row[j] - d);
        }
        // dSinks_h −= P_sink·D_i, P_sink = e^(sink − lse_i) (0 in a row whose max is −inf)
        if (sink && out.d_sinks && *sink != kNegInf<T>) {
          const T lse = row_log_sum_exp(s + i * p.Lk, p.Lk, sink);
          out.d_sinks[h] -= std::exp(*sink - lse) * d;
        }
      }

      // dMask += dS, summed over the dims where the mask broadcasts (its strides are 0 there)
      if (p.mask_kind == MaskKind::kAdditive && out.d_mask) {
        for (int64_t i = 0; i < p.Lq; ++i) {
          T* dm = out.d_mask + p.mask_offset(b, h, i);
          for (int64_t j = 0; j < p.Lk; ++j) dm[j * p.mask_stride_k] += ds[i * p.Lk + j];
        }
      }

      // softcap: the gradient reaches the scaled score x through d(c·tanh(x/c))/dx = 1 − tanh²(x/c);
      // x is recomputed (s holds the capped score plus the mask). Hidden keys keep dS = 0.
      if (p.softcap > 0.0f) {
        const T cap = T(p.softcap);
        for (int64_t i = 0; i < p.Lq; ++i) {
          for (int64_t j = 0; j < p.Lk; ++j) {
            if (s[i * p.Lk + j] == kNegInf<T>) continue;
            T dot = 0;
            for (int64_t e = 0; e < p.E; ++e) dot += T(q[i * p.E + e]) * T(k[j * p.E + e]);
            const T t = std::tanh(dot * T(p.scale) / cap);
            ds[i * p.Lk + j] *= (T(1) - t) * (T(1) + t);
          }
        }
      }

      // dQ = scale·dS·k  [Lq, E] (hidden keys skipped)
      for (int64_t i = 0; i < p.Lq; ++i) {
        for (int64_t j = 0; j < p.Lk; ++j) {
          if (s[i * p.Lk + j] == kNegInf<T>) continue;
          const T g = ds[i * p.Lk + j] * T(p.scale);
          for (int64_t e = 0; e < p.E; ++e) dq[i * p.E + e] += g * T(k[j * p.E + e]);
        }
      }

      // dK += scale·dSᵀ·q  [Lk, E]
      for (int64_t i = 0; i < p.Lq; ++i) {
        for (int64_t j = 0; j < p.Lk; ++j) {
          if (s[i * p.Lk + j] == kNegInf<T>) continue;
          const T g = ds[i * p.Lk + j] * T(p.scale);
          for (int64_t e = 0; e < p.E; ++e) dk[j * p.E + e] += g * T(q[i * p.E + e]);
        }
      }
    }
  }
}

template void attention_backward_reference<float>(const AttentionPlan&, const AttentionInputs&,
                                                  const float*, const BackwardOutputs<float>&,
                                                  float*);
template void attention_backward_reference<double>(const AttentionPlan&, const AttentionInputs&,
                                                   const float*, const BackwardOutputs<double>&,
                                                   double*);

}  // namespace sdpa
