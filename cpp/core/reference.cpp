#include "core/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/masks.h"

namespace sdpa {
namespace {

template <typename T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// Row max that propagates NaN (std::max would drop it depending on argument order).
template <typename T>
T nan_propagating_max(T a, T b) {
  return (b > a || std::isnan(b)) && !std::isnan(a) ? b : a;
}

template <typename T>
void snapshot(const T* scores, int64_t n, T* stage) {
  if (stage) std::memcpy(stage, scores, static_cast<size_t>(n) * sizeof(T));
}

}  // namespace

// Stable softmax of one row: max -> exp-sum -> normalize. `in` and `out` may alias. With a sink
// (not null), *sink is one more logit of the row, with no output entry: it joins the max and the
// sum, so the row's weights sum to less than 1. A row whose max is -inf (every entry masked, and
// no finite sink) becomes all zeros.
template <typename T>
void softmax_row(const T* in, int64_t n, T* out, const T* sink) {
  // max: the largest score, so every exponent below is <= 0 and cannot overflow.
  T row_max = sink ? *sink : kNegInf<T>;
  for (int64_t j = 0; j < n; ++j) row_max = nan_propagating_max(row_max, in[j]);
  if (row_max == kNegInf<T>) {
    for (int64_t j = 0; j < n; ++j) out[j] = T(0);
    return;
  }
  // exp-sum. Hidden entries (-inf) are marked -0.0 (exp never returns -0.0), so that normalize
  // can keep them exactly 0 even in a row whose max or sum is NaN, and even when in == out.
  T sum = sink ? std::exp(*sink - row_max) : T(0);
  for (int64_t j = 0; j < n; ++j) {
    out[j] = in[j] == kNegInf<T> ? T(-0.0) : std::exp(in[j] - row_max);
    sum += out[j];
  }
  // normalize
  const T inv_sum = T(1) / sum;
  for (int64_t j = 0; j < n; ++j) {
    out[j] = out[j] == T(0) && std::signbit(out[j]) ? T(0) : out[j] * inv_sum;
  }
}

// log(e^sink + Σ_j e^(in[j])), stable (subtracts the max); -inf when every entry (and the sink, if
// any) is -inf, NaN with NaN.
template <typename T>
T row_log_sum_exp(const T* in, int64_t n, const T* sink) {
  T row_max = sink ? *sink : kNegInf<T>;
  for (int64_t j = 0; j < n; ++j) row_max = nan_propagating_max(row_max, in[j]);
  if (row_max == kNegInf<T>) return kNegInf<T>;
  T sum = sink ? std::exp(*sink - row_max) : T(0);
  for (int64_t j = 0; j < n; ++j) sum += std::exp(in[j] - row_max);
  return row_max + std::log(sum);
}

template void softmax_row<float>(const float*, int64_t, float*, const float*);
template void softmax_row<double>(const double*, int64_t, double*, const double*);
template float row_log_sum_exp<float>(const float*, int64_t, const float*);
template double row_log_sum_exp<double>(const double*, int64_t, const double*);

template <typename T>
void attention_reference(const AttentionPlan& p, const AttentionInputs& in,
                         const ReferenceOutputs<T>& out, T* workspace, DotRounding rounding) {
  const int64_t group = p.Hq == 0 ? 1 : p.heads_per_kv();
  const int64_t n = p.Lq * p.Lk;
  T* s = workspace;      // [Lq, Lk] scores, scaled and masked in place
  T* w = workspace + n;  // [Lq, Lk] weights
  for (int64_t b = 0; b < p.B; ++b) {
    for (int64_t h = 0; h < p.Hq; ++h) {
      const int64_t kv_head = h / group;  // GQA: query head h reads key/value head h / (Hq/Hkv)
      const float* q = in.query + ((b * p.Hq + h) * p.Lq) * p.E;         // [Lq, E]
      const float* k = in.key + (b * p.Hkv + kv_head) * p.key_head_stride;      // [Lk, E]
      const float* v = in.value + (b * p.Hkv + kv_head) * p.value_head_stride;  // [Lk, Ev]
      const int64_t stage_offset = (b * p.Hq + h) * n;
      auto stage = [&](T* base) { return base ? base + stage_offset : nullptr; };

      // scores: s = q·kᵀ  [Lq, Lk]
      for (int64_t i = 0; i < p.Lq; ++i) {
        for (int64_t j = 0; j < p.Lk; ++j) {
          T dot = 0;
          if (rounding == DotRounding::kFused) {
            for (int64_t e = 0; e < p.E; ++e) {
              dot = std::fma(T(q[i * p.E + e]), T(k[j * p.E + e]), dot);
            }
          } else {
            for (int64_t e = 0; e < p.E; ++e) dot += T(q[i * p.E + e]) * T(k[j * p.E + e]);
          }
          s[i * p.Lk + j] = dot;
        }
      }
      snapshot(s, n, stage(out.scores));

      // scale: s *= scale
      for (int64_t x = 0; x < n; ++x) s[x] *= T(p.scale);
      snapshot(s, n, stage(out.scaled_scores));

      // softcap: s = c·tanh(s / c) when the softcap c is on
      softcap_scores(p, n, s);
      snapshot(s, n, stage(out.softcapped_scores));

      // bias: ALiBi, s -= slope_h·|p_i − j| when on
      for (int64_t i = 0; i < p.Lq; ++i) bias_scores(p, b, h, i, 0, p.Lk, s + i * p.Lk);

      // mask: hidden keys become -inf (selected, not added, so a NaN score there cannot leak)
      for (int64_t i = 0; i < p.Lq; ++i) mask_scores(p, in, b, h, i, 0, p.Lk, s + i * p.Lk);
      snapshot(s, n, stage(out.masked_scores));

      // max -> exp-sum -> normalize, row by row: w = softmax([s, sink])  [Lq, Lk] (the sink, when
      // on, is one more logit of every row, with no value)
      const T sink_value = p.sinks.empty() ? T(0) : T(p.sinks[static_cast<size_t>(h)]);
      const T* sink = p.sinks.empty() ? nullptr : &sink_value;
      for (int64_t i = 0; i < p.Lq; ++i) softmax_row(s + i * p.Lk, p.Lk, w + i * p.Lk, sink);
      snapshot(w, n, stage(out.weights));

      // log-sum-exp (when asked, for the backward pass): lse_i = log(e^sink + Σ_j e^s_ij)
      if (out.lse) {
        for (int64_t i = 0; i < p.Lq; ++i) out.lse[(b * p.Hq + h) * p.Lq + i] = row_log_sum_exp(s + i * p.Lk, p.Lk, sink);
      }

      // ·V: o = w·v  [Lq, Ev]. Keys whose masked score is -inf are skipped, not multiplied by 0,
      // so NaN/Inf values at hidden positions cannot leak.
      T* o = out.output + ((b * p.Hq + h) * p.Lq) * p.Ev;
      for (int64_t i = 0; i < p.Lq; ++i) {
        for (int64_t c = 0; c < p.Ev; ++c) o[i * p.Ev + c] = T(0);
        for (int64_t j = 0; j < p.Lk; ++j) {
          if (s[i * p.Lk + j] == kNegInf<T>) continue;
          const T weight = w[i * p.Lk + j];
          for (int64_t c = 0; c < p.Ev; ++c) o[i * p.Ev + c] += weight * T(v[j * p.Ev + c]);
        }
      }
    }
  }
}

template void attention_reference<float>(const AttentionPlan&, const AttentionInputs&,
                                         const ReferenceOutputs<float>&, float*, DotRounding);
template void attention_reference<double>(const AttentionPlan&, const AttentionInputs&,
                                          const ReferenceOutputs<double>&, double*, DotRounding);

void softmax_rows(const float* x, int64_t rows, int64_t cols, float temperature, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = x[r * cols + c] / temperature;
    softmax_row<float>(out + r * cols, cols, out + r * cols, nullptr);
  }
}

void matmul_reference(const MatmulPlan& p, const float* a, const float* bm, float* out) {
  for (int64_t b = 0; b < p.batch; ++b) {
    const float* ab = a + b * p.M * p.K;                      // [M, K]
    const float* bb = bm + (p.b_is_batched ? b * p.K * p.N : 0);  // [K, N]
    float* ob = out + b * p.M * p.N;                          // [M, N]
    for (int64_t i = 0; i < p.M; ++i) {
      for (int64_t j = 0; j < p.N; ++j) {
        float dot = 0;
        for (int64_t k = 0; k < p.K; ++k) dot += ab[i * p.K + k] * bb[k * p.N + j];
        ob[i * p.N + j] = dot;
      }
    }
  }
}

}  // namespace sdpa
