#include "core/problem.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace sdpa {
namespace {
// A number as JavaScript would show it in most cases (%.17g, not std::to_string's fixed 6 digits).
std::string format_number(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", x);
  return buffer;
}
}  // namespace

namespace {

const char* kRankNames[] = {"", "", "[L, D]", "[B, L, D]", "[B, H, L, D]"};

// Product of dims, or -1 once it passes kMaxTensorElements (checked before multiplying, so no
// intermediate overflows even for dims like 46341 x 46341 x ...).
int64_t checked_elements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d == 0) return 0;
  }
  for (int64_t d : dims) {
    if (d > kMaxTensorElements / n) return -1;
    n *= d;
  }
  return n;
}

Status check_dims(const char* name, const std::vector<int64_t>& shape) {
  for (int64_t d : shape) {
    if (d < 0) {
      return Status::RangeError(std::string(name) + " has a negative dimension: shape " +
                                shape_to_string(shape));
    }
  }
  if (checked_elements(shape) < 0) {
    return Status::RangeError(std::string(name) + " of shape " + shape_to_string(shape) +
                              " has more than 2^30 elements, more than wasm32 memory can hold");
  }
  return Status::Ok();
}

// Leading (batch, heads) dims of a rank-2/3/4 tensor.
void leading_dims(const std::vector<int64_t>& shape, int64_t* batch, int64_t* heads) {
  const size_t rank = shape.size();
  *batch = rank >= 3 ? shape[0] : 1;
  *heads = rank == 4 ? shape[1] : 1;
}

}  // namespace

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

namespace {

// A window side as the plan holds it: a non-negative integer, clamped to 2^53 (beyond which every
// position is as far as a key can be).
Status window_side(const char* name, bool present, double value, int64_t* out) {
  if (!present) {
    *out = AttentionPlan::kUnbounded;
    return Status::Ok();
  }
  if (!(value >= 0) || value != std::floor(value)) {
    return Status::RangeError(std::string("window.") + name +
                              " must be a non-negative integer (0 = this position only); got " +
                              format_number(value));
  }
  *out = static_cast<int64_t>(std::min(value, static_cast<double>(kMaxCausalOffset)));
  return Status::Ok();
}

// One float per query head, each accepted by `ok` (whose rule `rule` names).
Status per_head(const char* name, const std::vector<double>& values, int64_t heads, bool (*ok)(double),
                const char* rule, std::vector<float>* out) {
  if (static_cast<int64_t>(values.size()) != heads) {
    return Status::RangeError(std::string(name) + " must hold one value per query head: " +
                              std::to_string(heads) + " (Hq); got " + std::to_string(values.size()));
  }
  out->clear();
  for (size_t h = 0; h < values.size(); ++h) {
    if (!ok(values[h])) {
      return Status::RangeError(std::string(name) + "[" + std::to_string(h) + "] must be " + rule +
                                "; got " + format_number(values[h]));
    }
    out->push_back(static_cast<float>(values[h]));
  }
  return Status::Ok();
}

// keyLengths, window, ALiBi, sinks, documents and the score output of a plan whose shapes are set.
Status plan_variants(const AttentionRequest& r, AttentionPlan* p) {
  if (r.has_key_lengths) {
    if (static_cast<int64_t>(r.key_lengths.size()) != p->B) {
      return Status::RangeError("keyLengths must hold one length per batch: " + std::to_string(p->B) +
                                " (B); got " + std::to_string(r.key_lengths.size()));
    }
    for (size_t b = 0; b < r.key_lengths.size(); ++b) {
      const double n = r.key_lengths[b];
      if (!(n >= 0 && n <= static_cast<double>(p->Lk)) || n != std::floor(n)) {
        return Status::RangeError("keyLengths[" + std::to_string(b) + "] must be an integer in [0, Lk = " +
                                  std::to_string(p->Lk) + "]; got " + format_number(n));
      }
      p->key_lengths.push_back(static_cast<int32_t>(n));
    }
  }
  p->positions_follow_key_lengths =
      r.causal == CausalAlignment::kBottomRight || r.causal == CausalAlignment::kNone;
  Status s = window_side("left", r.has_window_left, r.window_left, &p->window_left);
  if (s.ok()) s = window_side("right", r.has_window_right, r.window_right, &p->window_right);
  if (!s.ok()) return s;
  if (r.alibi && r.has_alibi_slopes) {
    return Status::TypeError("pass either alibi: true (the standard slopes) or alibiSlopes, not both");
  }
  const auto finite = [](double x) { return std::isfinite(static_cast<float>(x)); };
  if (r.alibi || r.has_alibi_slopes) {
    s = per_head("alibiSlopes", r.alibi ? standard_alibi_slopes(p->Hq) : r.alibi_slopes, p->Hq, finite,
                 "a finite number", &p->alibi_slopes);
    if (!s.ok()) return s;
  }
  if (r.has_sinks) {
    const auto sink_ok = [](double x) { return std::isfinite(static_cast<float>(x)) || x == -INFINITY; };
    s = per_head("sinks", r.sinks, p->Hq, sink_ok, "a finite number or -Infinity", &p->sinks);
    if (!s.ok()) return s;
  }
  if (r.has_documents) {
    const std::vector<int64_t> q_expected{p->B, p->Lq}, k_expected{p->B, p->Lk};
    if (r.query_documents_shape != q_expected) {
      return Status::RangeError("queryDocuments must have shape [B, Lq] = " + shape_to_string(q_expected) +
                                "; got " + shape_to_string(r.query_documents_shape));
    }
    if (r.key_documents_shape != k_expected) {
      return Status::RangeError("keyDocuments must have shape [B, Lk] = " + shape_to_string(k_expected) +
                                "; got " + shape_to_string(r.key_documents_shape));
    }
    p->documents = true;
  }
  p->return_scores = r.return_scores;
  if (r.return_scores != ScoreStage::kNone && checked_elements(p->weights_shape) < 0) {
    return Status::RangeError("the scores of shape " + shape_to_string(p->weights_shape) +
                              " have more than 2^30 elements, more than wasm32 memory can hold");
  }
  return Status::Ok();
}

}  // namespace

Status plan_attention(const AttentionRequest& r, AttentionPlan* plan) {
  const size_t rank = r.query_shape.size();
  if (rank < 2 || rank > 4) {
    return Status::RangeError("query must have shape [Lq, E], [B, Lq, E] or [B, H, Lq, E]; got " +
                              shape_to_string(r.query_shape));
  }
  const char* expected = kRankNames[rank];
  if (r.key_shape.size() != rank) {
    return Status::RangeError(std::string("key must have the same rank as query (") + expected +
                              " with L = Lk, D = E); got " + shape_to_string(r.key_shape));
  }
  if (r.value_shape.size() != rank) {
    return Status::RangeError(std::string("value must have the same rank as query (") + expected +
                              " with L = Lk, D = Ev); got " + shape_to_string(r.value_shape));
  }
  for (auto [name, shape] : {std::pair<const char*, const std::vector<int64_t>*>{"query", &r.query_shape},
                             {"key", &r.key_shape},
                             {"value", &r.value_shape},
                             {"attnMask", &r.mask_shape}}) {
    Status s = check_dims(name, *shape);
    if (!s.ok()) return s;
  }

  AttentionPlan p;
  int64_t key_batch, value_batch, value_heads;
  leading_dims(r.query_shape, &p.B, &p.Hq);
  leading_dims(r.key_shape, &key_batch, &p.Hkv);
  leading_dims(r.value_shape, &value_batch, &value_heads);
  p.Lq = r.query_shape[rank - 2];
  p.E = r.query_shape[rank - 1];
  p.Lk = r.key_shape[rank - 2];
  p.Ev = r.value_shape[rank - 1];

  if (p.E == 0) {
    return Status::RangeError("query has E = 0 (shape " + shape_to_string(r.query_shape) +
                              "): scores need a query/key dim E >= 1");
  }
  if (key_batch != p.B) {
    return Status::RangeError("key batch size B = " + std::to_string(key_batch) +
                              " must equal query's B = " + std::to_string(p.B) + "; key " +
                              shape_to_string(r.key_shape) + ", query " +
                              shape_to_string(r.query_shape));
  }
  if (r.key_shape[rank - 1] != p.E) {
    return Status::RangeError(std::string("key must have shape ") + expected + " with D = E = " +
                              std::to_string(p.E) + " (query's last dim); got " +
                              shape_to_string(r.key_shape));
  }
  if (value_batch != p.B || value_heads != p.Hkv || r.value_shape[rank - 2] != p.Lk) {
    return Status::RangeError(std::string("value must have shape ") + expected + " matching key's B, H and Lk (" +
                              "key " + shape_to_string(r.key_shape) + "); got " +
                              shape_to_string(r.value_shape));
  }
  if (p.Hkv != p.Hq) {
    if (!r.enable_gqa) {
      return Status::RangeError("key/value have H = " + std::to_string(p.Hkv) +
                                " heads but query has H = " + std::to_string(p.Hq) +
                                "; pass enableGqa: true for grouped-query attention");
    }
    if (p.Hkv == 0 || p.Hq % p.Hkv != 0) {
      return Status::RangeError("enableGqa needs query heads Hq = " + std::to_string(p.Hq) +
                                " to be a multiple of key/value heads Hkv = " +
                                std::to_string(p.Hkv));
    }
  }

  if (r.has_scale && !std::isfinite(r.scale)) {
    return Status::RangeError("scale must be a finite number; got " + std::to_string(r.scale));
  }
  p.scale = r.has_scale ? static_cast<float>(r.scale)
                        : static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.E)));
  // The kernels compute in float32: a softcap must stay positive and finite there too.
  const float softcap = static_cast<float>(r.softcap);
  if (!(r.softcap >= 0.0) || !std::isfinite(softcap) || (r.softcap > 0.0 && softcap == 0.0f)) {
    return Status::RangeError(
        "softcap must be a finite number > 0 (0 = off) that float32 holds (about 1.4e-45 to 3.4e38); got " +
        format_number(r.softcap));
  }
  p.softcap = softcap;
  if (r.causal == CausalAlignment::kOffset &&
      (r.causal_offset > kMaxCausalOffset || r.causal_offset < -kMaxCausalOffset)) {
    return Status::RangeError("isCausal.offset must be an integer in [-2^53, 2^53]; got " +
                              std::to_string(r.causal_offset));
  }
  p.causal = r.causal != CausalAlignment::kNone;
  switch (r.causal) {
    case CausalAlignment::kTopLeft: p.position_offset = 0; break;
    case CausalAlignment::kOffset: p.position_offset = r.causal_offset; break;
    case CausalAlignment::kBottomRight:
    case CausalAlignment::kNone: p.position_offset = p.Lk - p.Lq; break;
  }
  p.query_type = r.query_type;
  p.key_type = r.key_type;
  p.value_type = r.value_type;
  p.key_value_finite = r.key_value_finite;
  p.key_head_stride = r.key_head_stride == 0 ? p.Lk * p.E : r.key_head_stride;
  p.value_head_stride = r.value_head_stride == 0 ? p.Lk * p.Ev : r.value_head_stride;
  if (p.key_head_stride < p.Lk * p.E || p.value_head_stride < p.Lk * p.Ev) {
    return Status::RangeError("key/value head strides (" + std::to_string(p.key_head_stride) + ", " +
                              std::to_string(p.value_head_stride) + ") must be at least Lk·E = " +
                              std::to_string(p.Lk * p.E) + " and Lk·Ev = " + std::to_string(p.Lk * p.Ev));
  }
  const auto quantized = [](ElementType t) { return t == ElementType::kInt8 || t == ElementType::kInt4; };
  if (quantized(p.query_type)) return Status::TypeError("query must be float32 or float16; int8/int4 are KV-cache dtypes");
  if (quantized(p.key_type) || quantized(p.value_type)) {
    // An int8/int4 cache's layout follows from its maxLength: the head strides are maxLength·E
    // and maxLength·Ev.
    if (p.key_type != p.value_type || p.E == 0 || p.Ev == 0 || r.key_head_stride == 0 ||
        p.key_head_stride % p.E != 0 || p.value_head_stride % p.Ev != 0 ||
        p.key_head_stride / p.E != p.value_head_stride / p.Ev) {
      return Status::TypeError("int8/int4 keys and values come from one quantized KV cache (createKvCache with dtype 'int8' or 'int4')");
    }
  }
  p.return_weights = r.return_weights;
  p.return_lse = r.return_lse;
  p.output_shape = r.query_shape;
  p.output_shape[rank - 1] = p.Ev;
  p.weights_shape = r.query_shape;
  p.weights_shape[rank - 1] = p.Lk;

  for (const auto* shape : {&p.output_shape, &p.weights_shape}) {
    if (checked_elements(*shape) < 0 && (shape == &p.output_shape || r.return_weights)) {
      return Status::RangeError("the result of shape " + shape_to_string(*shape) +
                                " has more than 2^30 elements, more than wasm32 memory can hold");
    }
  }

  p.mask_kind = r.mask_kind;
  if (r.mask_kind != MaskKind::kNone) {
    // Right-align the mask against the weights shape [..., Lq, Lk] (PyTorch broadcasting).
    const auto& m = r.mask_shape;
    const auto& w = p.weights_shape;
    if (m.size() > w.size()) {
      return Status::RangeError("attnMask of shape " + shape_to_string(m) +
                                " has more dims than the attention weights " + shape_to_string(w));
    }
    // Which axis of [B, Hq, Lq, Lk] each weights dim is: [Lq, Lk], [B, Lq, Lk] or [B, H, Lq, Lk].
    static const int kAxes[5][4] = {{}, {}, {2, 3}, {0, 2, 3}, {0, 1, 2, 3}};
    const int* axis_of_weights_dim = kAxes[rank];
    int64_t strides4[4] = {0, 0, 0, 0};
    int64_t stride = 1;
    for (size_t j = 0; j < m.size(); ++j) {
      const size_t mi = m.size() - 1 - j;  // mask dim, from the right
      const size_t wi = w.size() - 1 - j;  // weights dim it aligns with
      if (m[mi] != 1 && m[mi] != w[wi]) {
        return Status::RangeError("attnMask of shape " + shape_to_string(m) +
                                  " does not broadcast to the attention weights " +
                                  shape_to_string(w) + " ([..., Lq, Lk]): dim " +
                                  std::to_string(mi) + " is " + std::to_string(m[mi]) +
                                  ", expected 1 or " + std::to_string(w[wi]));
      }
      if (m[mi] != 1) strides4[axis_of_weights_dim[wi]] = stride;
      stride *= m[mi];
    }
    p.mask_stride_b = strides4[0];
    p.mask_stride_h = strides4[1];
    p.mask_stride_q = strides4[2];
    p.mask_stride_k = strides4[3];
    p.mask_elements = checked_elements(m);
  }
  Status variants = plan_variants(r, &p);
  if (!variants.ok()) return variants;
  *plan = std::move(p);
  return Status::Ok();
}

std::vector<double> standard_alibi_slopes(int64_t heads) {
  std::vector<double> slopes;
  if (heads <= 0) return slopes;
  int64_t n = 1;  // the largest power of two <= heads
  while (n * 2 <= heads) n *= 2;
  for (int64_t h = 0; h < n; ++h) slopes.push_back(std::exp2(-8.0 * static_cast<double>(h + 1) / n));
  // Not a power of two: then every other slope of 2n, starting with the first (BLOOM).
  for (int64_t h = 0; static_cast<int64_t>(slopes.size()) < heads; h += 2) {
    slopes.push_back(std::exp2(-8.0 * static_cast<double>(h + 1) / (2 * n)));
  }
  return slopes;
}

Status plan_matmul(const std::vector<int64_t>& a, const std::vector<int64_t>& b, MatmulPlan* plan) {
  if (a.size() < 2) {
    return Status::RangeError("a must have shape [..., M, K] (rank >= 2); got " + shape_to_string(a));
  }
  if (b.size() != 2 && b.size() != a.size()) {
    return Status::RangeError("b must have shape [K, N] or a's leading dims + [K, N]; got " +
                              shape_to_string(b) + " for a " + shape_to_string(a));
  }
  for (auto [name, shape] : {std::pair<const char*, const std::vector<int64_t>*>{"a", &a}, {"b", &b}}) {
    Status s = check_dims(name, *shape);
    if (!s.ok()) return s;
  }
  MatmulPlan p;
  p.M = a[a.size() - 2];
  p.K = a[a.size() - 1];
  p.N = b[b.size() - 1];
  p.b_is_batched = b.size() > 2;
  p.batch = 1;
  for (size_t i = 0; i + 2 < a.size(); ++i) {
    if (p.b_is_batched && b[i] != a[i]) {
      return Status::RangeError("b's leading dims " + shape_to_string(b) + " must equal a's " +
                                shape_to_string(a));
    }
    p.batch *= a[i];
  }
  if (b[b.size() - 2] != p.K) {
    return Status::RangeError("b must have K = " + std::to_string(p.K) +
                              " rows (a's last dim, a " + shape_to_string(a) + "); got b " +
                              shape_to_string(b));
  }
  p.output_shape = a;
  p.output_shape.back() = p.N;
  if (checked_elements(p.output_shape) < 0) {
    return Status::RangeError("the result of shape " + shape_to_string(p.output_shape) +
                              " has more than 2^30 elements");
  }
  *plan = std::move(p);
  return Status::Ok();
}

Status plan_softmax(const std::vector<int64_t>& shape, double temperature, SoftmaxPlan* plan) {
  if (shape.empty()) return Status::RangeError("x must have rank >= 1; got []");
  Status s = check_dims("x", shape);
  if (!s.ok()) return s;
  if (!(std::isfinite(temperature) && temperature > 0)) {
    return Status::RangeError("temperature must be a finite number > 0; got " +
                              std::to_string(temperature));
  }
  plan->cols = shape.back();
  plan->rows = plan->cols == 0 ? 0 : checked_elements(shape) / plan->cols;
  plan->temperature = static_cast<float>(temperature);
  return Status::Ok();
}

Status check_float32_inputs(const AttentionPlan& plan, const char* what) {
  if (plan.quantized_kv()) {
    return Status::TypeError(std::string(what) + " takes float32 query, key and value; an int8/int4 KV cache is read by scaledDotProductAttention only");
  }
  if (!plan.has_float16()) return Status::Ok();
  return Status::TypeError(std::string(what) +
                           " takes float32 query, key and value; float16 inputs are for the forward call "
                           "(widen them with fromFloat16)");
}

Status check_backward_request(const AttentionPlan& plan, const BackwardRequest& r) {
  if (!r.float16_inputs) {
    if (Status s = check_float32_inputs(plan, "the backward pass"); !s.ok()) return s;
  }
  if (!plan.dense_key_value()) {
    return Status::TypeError("the backward pass takes key and value tensors, not a KV cache");
  }
  if (r.d_output_shape != plan.output_shape) {
    return Status::RangeError("dOutput must have the attention output's shape " +
                              shape_to_string(plan.output_shape) + " ([..., Lq, Ev]); got " +
                              shape_to_string(r.d_output_shape));
  }
  if (r.has_forward) {
    if (r.output_shape != plan.output_shape) {
      return Status::RangeError("output (from the forward call) must have shape " +
                                shape_to_string(plan.output_shape) + " ([..., Lq, Ev]); got " +
                                shape_to_string(r.output_shape));
    }
    std::vector<int64_t> lse_shape(plan.output_shape.begin(), plan.output_shape.end() - 1);
    if (r.lse_shape != lse_shape) {
      return Status::RangeError("logSumExp (from the forward call) must have shape " +
                                shape_to_string(lse_shape) + " ([..., Lq]); got " +
                                shape_to_string(r.lse_shape));
    }
  }
  if (r.want_d_mask && plan.mask_kind != MaskKind::kAdditive) {
    return Status::TypeError(
        "returnAttnMaskGrad needs an additive attnMask (Float32Array data): a bool mask or no "
        "mask has no gradient");
  }
  return Status::Ok();
}

}  // namespace sdpa
