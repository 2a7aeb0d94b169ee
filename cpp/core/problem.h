// The shape of one scaled dot-product attention call, its validation, and the layout every kernel
// reads. Shape letters (used in C++, WGSL, TypeScript and the docs alike, as in PyTorch):
//   B batch, Hq query heads, Hkv key/value heads, Lq query length, Lk key length,
//   E query/key dim, Ev value dim.
// Tensors are dense, row-major float32:
//   query [B, Hq, Lq, E], key [B, Hkv, Lk, E], value [B, Hkv, Lk, Ev],
//   output [B, Hq, Lq, Ev], weights [B, Hq, Lq, Lk],
//   mask broadcast to [B, Hq, Lq, Lk] through per-dimension strides (0 = broadcast).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
};

// A validated request, normalized to rank 4.
struct AttentionPlan {
  int64_t B = 0, Hq = 0, Hkv = 0, Lq = 0, Lk = 0, E = 0, Ev = 0;
  float scale = 0.0f;
  // Softcap (Gemma 2, ONNX Attention's softcap): when > 0, every scaled score s becomes
  // softcap·tanh(s / softcap), before masks and biases. 0 = off.
  float softcap = 0.0f;
  // Positions: query row i sits at position i + position_offset, key j at position j. The offset
  // is the causal offset when causal, else Lk - Lq (the queries are the last Lq positions, as in a
  // KV-cache step). Causal: query i sees keys j <= i + position_offset, composed with the mask.
  bool causal = false;
  int64_t position_offset = 0;
  MaskKind mask_kind = MaskKind::kNone;
  // Element strides of the mask over [B, Hq, Lq, Lk]; 0 where the mask broadcasts.
  int64_t mask_stride_b = 0, mask_stride_h = 0, mask_stride_q = 0, mask_stride_k = 0;
  int64_t mask_elements = 0;
  bool return_weights = false;
  std::vector<int64_t> output_shape;   // [..., Lq, Ev], the query's leading dims
  std::vector<int64_t> weights_shape;  // [..., Lq, Lk]

  int64_t heads_per_kv() const { return Hq / Hkv; }
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
  int64_t query_position(int64_t i) const { return i + position_offset; }
  // Index of the last key that query row i may see under causality (may be < 0: the row sees
  // nothing), or Lk - 1 when not causal. |position_offset| <= 2^53, so this cannot overflow.
  int64_t last_visible_key(int64_t i) const {
    if (!causal) return Lk - 1;
    const int64_t last = query_position(i);
    return last < Lk - 1 ? last : Lk - 1;
  }
  int64_t mask_offset(int64_t b, int64_t h, int64_t i) const {
    return b * mask_stride_b + h * mask_stride_h + i * mask_stride_q;
  }
};

// Input pointers for one attention call (layouts at the top of this file). `mask` is a
// const uint8_t* (1 = may attend) for MaskKind::kBool, a const float* for kAdditive, else null.
struct AttentionInputs {
  const float* query = nullptr;
  const float* key = nullptr;
  const float* value = nullptr;
  const void* mask = nullptr;
};

// Largest element count of any one tensor: 2^32 bytes of float32 data is the wasm32 address space.
constexpr int64_t kMaxTensorElements = int64_t{1} << 30;

// Validates `request` and fills `plan`. Never allocates tensor memory.
Status plan_attention(const AttentionRequest& request, AttentionPlan* plan);

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
