// The shape of one scaled dot-product attention call, its validation, and the layout every kernel
// reads. Shape letters (used in C++, WGSL, TypeScript and the docs alike, as in PyTorch):
//   B batch, Hq query heads, Hkv key/value heads, Lq query length, Lk key length,
//   E query/key dim, Ev value dim.
// Tensors are dense, row-major float32 (query, key and value may also be float16, core/float16.h):
//   query [B, Hq, Lq, E], key [B, Hkv, Lk, E], value [B, Hkv, Lk, Ev],
//   output [B, Hq, Lq, Ev], weights [B, Hq, Lq, Lk],
//   mask broadcast to [B, Hq, Lq, Lk] through per-dimension strides (0 = broadcast).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/float16.h"
#include "core/input_arrival.h"
#include "core/kv_cache_format.h"

namespace sdpa {

enum class ErrorKind { kNone, kType, kRange };

// Validation outcome. The message names the argument and the expected shape, and is what the
// JavaScript layer puts into its TypeError/RangeError.
struct Status {
  ErrorKind kind = ErrorKind::kNone;
  std::string message;

  bool ok() const { return kind == ErrorKind::kNone; }
  static Status Ok() { return {}; }
  static Status TypeError(std::string m) { return {ErrorKind::kType, std::move(m)}; }
  static Status RangeError(std::string m) { return {ErrorKind::kRange, std::move(m)}; }
};

enum class MaskKind { kNone, kBool, kAdditive };
// Causal masking: query i sees keys j <= i + offset, where the offset is 0 (kTopLeft), Lk - Lq
// (kBottomRight: the queries are the last Lq positions) or AttentionRequest::causal_offset (kOffset).
enum class CausalAlignment { kNone, kTopLeft, kBottomRight, kOffset };

// Which stage of the scores a call returns beside its output (ONNX Attention's qk_matmul_output
// modes): the scaled scores Q·Kᵀ·scale, after the softcap, or after biases and masks (−inf where
// hidden). kNone: no scores.
enum class ScoreStage { kNone, kScaled, kSoftcapped, kMasked };

// Largest |causal_offset| a request may carry: 2^53, the largest integer a JavaScript number holds
// exactly. Any offset past -Lq or Lk has the same effect as those.
constexpr int64_t kMaxCausalOffset = int64_t{1} << 53;

// What a caller asks for, in the caller's terms (PyTorch shapes: rank 2, 3 or 4).
struct AttentionRequest {
  std::vector<int64_t> query_shape;  // [..., Lq, E]
  std::vector<int64_t> key_shape;    // [..., Lk, E]
  std::vector<int64_t> value_shape;  // [..., Lk, Ev]
  MaskKind mask_kind = MaskKind::kNone;
  std::vector<int64_t> mask_shape;  // broadcastable to [..., Lq, Lk]
  CausalAlignment causal = CausalAlignment::kNone;
  int64_t causal_offset = 0;  // with CausalAlignment::kOffset; may be negative or beyond Lk
  bool has_scale = false;
  double scale = 0.0;  // used when has_scale; default 1/sqrt(E)
  double softcap = 0.0;  // > 0: score <- softcap·tanh(score / softcap) after the scale; 0 = off
  bool enable_gqa = false;
  bool return_weights = false;
  bool return_lse = false;  // also each row's log-sum-exp [B, Hq, Lq] (for the backward)
  // Per-batch key lengths [B] (ONNX's nonpad_kv_seqlen): keys j >= key_lengths[b] are hidden;
  // empty = every batch has Lk keys.
  bool has_key_lengths = false;
  std::vector<double> key_lengths;
  // Sliding window (ONNX opset 25): key j is visible from position p iff p - left <= j <= p + right;
  // an absent side is unbounded.
  bool has_window_left = false, has_window_right = false;
  double window_left = 0, window_right = 0;
  // ALiBi: alibi = the standard slopes for Hq heads, or alibi_slopes [Hq]; bias -m_h·|p - j|.
  bool alibi = false;
  bool has_alibi_slopes = false;
  std::vector<double> alibi_slopes;
  // Attention sinks [Hq]: one extra logit per query head in each row's softmax, with no value.
  bool has_sinks = false;
  std::vector<double> sinks;
  // Document ids: query_documents [B, Lq] and key_documents [B, Lk] (both or neither); query i
  // sees key j only when their ids are equal.
  bool has_documents = false;
  std::vector<int64_t> query_documents_shape, key_documents_shape;
  ScoreStage return_scores = ScoreStage::kNone;
  // Elements between consecutive (batch, key/value head) blocks of key and value, e.g. a KV
  // cache's maxLength·E; 0 = dense (Lk·E, Lk·Ev). Forward only.
  int64_t key_head_stride = 0, value_head_stride = 0;
  // Element types of query, key and value (float16: uint16_t bit patterns). key_value_finite: the
  // caller knows float16 keys and values hold no Inf or NaN (a KV cache tracks it), which lets the
  // decode kernel convert them with fewer instructions.
  ElementType query_type = ElementType::kFloat32, key_type = ElementType::kFloat32,
              value_type = ElementType::kFloat32;
  bool key_value_finite = false;
};

// A validated request, normalized to rank 4.
struct AttentionPlan {
  int64_t B = 0, Hq = 0, Hkv = 0, Lq = 0, Lk = 0, E = 0, Ev = 0;
  float scale = 0.0f;
  // Softcap (Gemma 2, ONNX Attention's softcap): when > 0, every scaled score s becomes
  // softcap·tanh(s / softcap), before masks and biases. 0 = off.
  float softcap = 0.0f;
  // Positions: query row i of batch b sits at position i + position_offset(b), key j at position j.
  // The offset is the causal offset when causal ('top-left' 0, an explicit offset), else (and for
  // 'bottom-right') the key length minus Lq: the queries are the last Lq positions, as in a
  // KV-cache step, each batch aligned to its own key length when key_lengths are given.
  // Causal: query i sees keys j <= its position, composed with windows, documents and the mask.
  bool causal = false;
  int64_t position_offset = 0;       // the offset of a batch with Lk keys
  bool positions_follow_key_lengths = false;  // bottom-right or not causal: Lk -> key_lengths[b]
  std::vector<int32_t> key_lengths;  // [B], each in [0, Lk]; empty = Lk for every batch (or B = 0)
  // Sliding window bounds (kUnbounded when a side is absent): p - window_left <= j <= p + window_right.
  static constexpr int64_t kUnbounded = -1;
  int64_t window_left = kUnbounded, window_right = kUnbounded;
  std::vector<float> alibi_slopes;  // [Hq]: score += -alibi_slopes[h]·|p - j|; empty = off
  std::vector<float> sinks;         // [Hq]: each row's softmax gains e^sinks[h]; empty = off
  bool documents = false;           // AttentionInputs::query_documents/key_documents are given
  ScoreStage return_scores = ScoreStage::kNone;
  MaskKind mask_kind = MaskKind::kNone;
  // Element strides of the mask over [B, Hq, Lq, Lk]; 0 where the mask broadcasts.
  int64_t mask_stride_b = 0, mask_stride_h = 0, mask_stride_q = 0, mask_stride_k = 0;
  int64_t mask_elements = 0;
  bool return_weights = false;
  bool return_lse = false;  // the caller wants each row's log-sum-exp [B, Hq, Lq]
  // Elements from one (batch, key/value head) block of key/value to the next: Lk·E and Lk·Ev for
  // dense tensors, more for a KV cache read in place ([B, Hkv, maxLength, E]).
  int64_t key_head_stride = 0, value_head_stride = 0;
  ElementType query_type = ElementType::kFloat32, key_type = ElementType::kFloat32,
              value_type = ElementType::kFloat32;
  bool key_value_finite = false;  // float16 K/V known to hold no Inf/NaN (AttentionRequest)
  std::vector<int64_t> output_shape;   // [..., Lq, Ev], the query's leading dims
  std::vector<int64_t> weights_shape;  // [..., Lq, Lk]

  int64_t heads_per_kv() const { return Hq / Hkv; }
  // Keys and values of an int8/int4 KV cache (both the same kind, read with the head strides).
  bool quantized_kv() const { return key_type == ElementType::kInt8 || key_type == ElementType::kInt4; }
  KvQuant kv_quant() const { return key_type == ElementType::kInt4 ? KvQuant::kInt4 : KvQuant::kInt8; }
  // Their byte layouts: B·Hkv heads of key_head_stride / E (= value_head_stride / Ev) rows.
  QuantizedLayout key_layout() const { return quantized_layout(kv_quant(), B * Hkv, key_head_stride / E, E); }
  QuantizedLayout value_layout() const { return quantized_layout(kv_quant(), B * Hkv, value_head_stride / Ev, Ev); }
  bool has_float16() const {
    return query_type == ElementType::kFloat16 || key_type == ElementType::kFloat16 ||
           value_type == ElementType::kFloat16;
  }
  bool dense_key_value() const { return key_head_stride == Lk * E && value_head_stride == Lk * Ev; }
  int64_t query_elements() const { return B * Hq * Lq * E; }
  int64_t key_elements() const { return B * Hkv * Lk * E; }
  int64_t value_elements() const { return B * Hkv * Lk * Ev; }
  int64_t output_elements() const { return B * Hq * Lq * Ev; }
  int64_t weights_elements() const { return B * Hq * Lq * Lk; }
  // Multiply-adds of the two matrix products Q·Kᵀ and P·V (as a double: it can pass 2^63).
  double multiply_adds() const {
    return static_cast<double>(B * Hq) * static_cast<double>(Lq) * static_cast<double>(Lk) *
           static_cast<double>(E + Ev);
  }
  int64_t key_length(int64_t b) const { return key_lengths.empty() ? Lk : key_lengths[b]; }
  int64_t position_offset_of(int64_t b) const {
    return positions_follow_key_lengths && !key_lengths.empty() ? key_lengths[b] - Lq : position_offset;
  }
  int64_t query_position(int64_t b, int64_t i) const { return i + position_offset_of(b); }
  // The keys [first_visible_key, last_visible_key] that query row i of batch b may see under
  // causality, the window and the key length (documents and the mask may hide more); empty
  // (first > last, last possibly < 0) when it sees none. Positions and window sides are at most
  // about 2^53 in size, so none of this overflows.
  int64_t first_visible_key(int64_t b, int64_t i) const {
    if (window_left == kUnbounded) return 0;
    const int64_t first = query_position(b, i) - window_left;
    return first > 0 ? first : 0;
  }
  int64_t last_visible_key(int64_t b, int64_t i) const {
    int64_t last = key_length(b) - 1;
    const int64_t position = query_position(b, i);
    if (causal && position < last) last = position;
    if (window_right != kUnbounded && position + window_right < last) last = position + window_right;
    return last;
  }
  // Whether any rule beyond the mask hides keys by position (the ranges above are not [0, Lk)).
  bool hides_by_position() const {
    return causal || !key_lengths.empty() || window_left != kUnbounded || window_right != kUnbounded;
  }
  int64_t mask_offset(int64_t b, int64_t h, int64_t i) const {
    return b * mask_stride_b + h * mask_stride_h + i * mask_stride_q;
  }
};

// Input pointers for one attention call (layouts at the top of this file). `mask` is a
// const uint8_t* (1 = may attend) for MaskKind::kBool, a const float* for kAdditive, else null.
// A float16 input (the plan's *_type) comes in query_f16/key_f16/value_f16 instead of the float
// pointer; dispatch/ widens it for the kernels that read float32.
struct AttentionInputs {
  const float* query = nullptr;
  const float* key = nullptr;
  const float* value = nullptr;
  const void* mask = nullptr;
  const int32_t* query_documents = nullptr;  // [B, Lq] when plan.documents
  const int32_t* key_documents = nullptr;    // [B, Lk] when plan.documents
  const uint16_t* query_f16 = nullptr;
  const uint16_t* key_f16 = nullptr;
  const uint16_t* value_f16 = nullptr;
  // A quantized KV cache's keys and values (plan.quantized_kv()): each a whole tensor of
  // plan.key_layout() / value_layout(), levels then scales.
  const uint8_t* key_quantized = nullptr;
  const uint8_t* value_quantized = nullptr;
  // Set when query, key and value arrive while the kernel runs (core/input_arrival.h).
  InputArrival arrival{};
};

// An error naming `what` when `plan` has a float16 input or a quantized KV cache: the backward,
// the trace and the reference bindings (explain, referenceAttention, which widens in TypeScript)
// take float32.
Status check_float32_inputs(const AttentionPlan& plan, const char* what);


// What a backward call brings on top of the forward's AttentionRequest.
struct BackwardRequest {
  std::vector<int64_t> d_output_shape;  // must equal the forward output's shape [..., Lq, Ev]
  bool has_forward = false;              // the forward's output and log-sum-exp are passed in
  std::vector<int64_t> output_shape;     // [..., Lq, Ev] when has_forward
  std::vector<int64_t> lse_shape;        // [..., Lq] when has_forward
  bool want_d_mask = false;              // also return ∂L/∂attnMask (additive masks only)
  bool float16_inputs = false;           // the backend widens float16 query/key/value (WebGPU)
};

// The backward recomputes P = e^(s − lse) from the forward's float32 log-sum-exp lse = m + log Σ.
// From |lse| = 2^14 on, lse's rounding (half an ulp: 2^-10 there) is as large as the scores' own, and
// a row whose scores are all huge (a padding row masked with −3.4e38, float32's lowest, as Hugging
// Face masks) loses log Σ entirely, which makes its P up to Lk× too large. Such rows take
// P = e^(s − lse)·r with r = 1 / Σ_j e^(s_j − lse) (the sink's term included) from a pass over
// their scores, so their P sums to 1 again; other rows keep r = 1, bit for bit.
constexpr float kBackwardRenormalizeFrom = 16384.0f;

// Validates `request` against a validated forward plan (plan_attention).
Status check_backward_request(const AttentionPlan& plan, const BackwardRequest& request);

// Largest element count of any one tensor: 2^32 bytes of float32 data is the wasm32 address space.
constexpr int64_t kMaxTensorElements = int64_t{1} << 30;

// Validates `request` and fills `plan`. Never allocates tensor memory.
Status plan_attention(const AttentionRequest& request, AttentionPlan* plan);

// ALiBi's standard slopes for `heads` heads (Press et al., as BLOOM): m_h = 2^(-8(h+1)/H) for H a
// power of two; otherwise those of the largest power of two n < H, then every other slope of 2n.
std::vector<double> standard_alibi_slopes(int64_t heads);

// Shapes of the building blocks.
struct MatmulPlan {
  int64_t batch = 0, M = 0, K = 0, N = 0;
  bool b_is_batched = false;  // false: one [K, N] matrix shared by every batch entry
  std::vector<int64_t> output_shape;
};
// a: [..., M, K]; b: [K, N] or [..., K, N] with the same leading dims as a.
Status plan_matmul(const std::vector<int64_t>& a_shape, const std::vector<int64_t>& b_shape,
                   MatmulPlan* plan);

struct SoftmaxPlan {
  int64_t rows = 0, cols = 0;
  float temperature = 1.0f;
};
// Softmax over the last axis of x (any rank >= 1) at the given temperature (finite, > 0).
Status plan_softmax(const std::vector<int64_t>& shape, double temperature, SoftmaxPlan* plan);

std::string shape_to_string(const std::vector<int64_t>& shape);

}  // namespace sdpa
