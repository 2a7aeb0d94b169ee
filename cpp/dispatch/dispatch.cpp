#include "dispatch/dispatch.h"

#include <algorithm>
#include <string>

#include "core/reference.h"
#include "core/round_up.h"
#include "cpu/attention_backward_f32_simd128.h"
#include "cpu/attention_decode_f32_simd128.h"
#include "cpu/attention_decode_quantized_simd128.h"
#include "cpu/attention_f32_simd128.h"
#include "cpu/float16_convert_simd128.h"
#include "cpu/quantized_rows_simd128.h"
#include "cpu/thread_pool.h"
#include "dispatch/cost_model.h"

namespace sdpa {
namespace {

// The backward's own forward (output, lse and the forward's scratch) after its workspace.
uint64_t simd_forward_bytes(const AttentionPlan& plan) {
  AttentionPlan forward = plan;
  forward.return_weights = false;
  return simd128_workspace_bytes(forward, 1) +
         static_cast<uint64_t>(plan.output_elements() + plan.B * plan.Hq * plan.Lq) * sizeof(float);
}

// Bytes of a widened float16 input, rounded up so that what follows stays 16-byte aligned.
uint64_t widened_bytes(int64_t elements) { return round_up(static_cast<uint64_t>(elements) * sizeof(float), 16); }

// Which inputs run_attention converts to dense float32 before the kernel of `plan` runs: float16
// ones widened, a quantized cache's keys and values dequantized and the query rounded through
// int8 blocks (round_query_row) as the scores on such a cache take it.
struct Widened {
  bool query = false, key = false, value = false;
  bool round_query = false;
};
Widened widened_inputs(Backend backend, const AttentionPlan& plan) {
  const bool in_place = float16_in_place(backend, plan) || quantized_in_place(backend, plan);
  const bool round_query = plan.quantized_kv() && !in_place;
  return {plan.query_type == ElementType::kFloat16 || round_query, plan.key_type != ElementType::kFloat32 && !in_place,
          plan.value_type != ElementType::kFloat32 && !in_place, round_query};
}

// `plan` as the kernels see it once the widened inputs are dense float32 tensors.
AttentionPlan widened_plan(const AttentionPlan& plan, const Widened& w) {
  AttentionPlan p = plan;
  if (w.query) p.query_type = ElementType::kFloat32;
  if (w.key) {
    p.key_type = ElementType::kFloat32;
    p.key_head_stride = p.Lk * p.E;
  }
  if (w.value) {
    p.value_type = ElementType::kFloat32;
    p.value_head_stride = p.Lk * p.Ev;
  }
  return p;
}

uint64_t widened_total_bytes(const AttentionPlan& plan, const Widened& w) {
  return (w.query ? widened_bytes(plan.query_elements()) : 0) + (w.key ? widened_bytes(plan.key_elements()) : 0) +
         (w.value ? widened_bytes(plan.value_elements()) : 0);
}

uint64_t float32_workspace_bytes(Backend backend, const AttentionPlan& plan, int threads) {
  switch (backend) {
    case Backend::kScalar: return reference_workspace_bytes<float>(plan);
    case Backend::kSimd128:
      if (uses_decode_kernel(plan) && plan.quantized_kv()) return decode_quantized_workspace_bytes(plan, decode_split(plan), threads);
      if (uses_decode_kernel(plan)) return decode_workspace_bytes(plan, decode_split(plan), threads);
      return simd128_workspace_bytes(plan, threads);
  }
  return 0;
}

void run_float32(Backend backend, const AttentionPlan& plan, const AttentionInputs& in, float* output,
                 float* weights, void* workspace, int threads, float* lse, float* scores) {
  switch (backend) {
    case Backend::kScalar: {
      ReferenceOutputs<float> out;
      out.output = output;
      out.weights = plan.return_weights ? weights : nullptr;
      out.lse = lse;
      switch (plan.return_scores) {
        case ScoreStage::kNone: break;
        case ScoreStage::kScaled: out.scaled_scores = scores; break;
        case ScoreStage::kSoftcapped: out.softcapped_scores = scores; break;
        case ScoreStage::kMasked: out.masked_scores = scores; break;
      }
      attention_reference<float>(plan, in, out, static_cast<float*>(workspace));
      return;
    }
    case Backend::kSimd128:
      if (threads > 1) threads = threads_to_run(backend, plan, threads, pool_wake_state());
      if (uses_decode_kernel(plan) && plan.quantized_kv()) {
        attention_decode_quantized_simd128(plan, in, decode_split(plan), output, static_cast<float*>(workspace), threads, lse);
        return;
      }
      if (uses_decode_kernel(plan)) {
        attention_decode_f32_simd128(plan, in, decode_split(plan), output, static_cast<float*>(workspace),
                                     threads, lse);
        return;
      }
      attention_f32_simd128(plan, in, output, weights, static_cast<float*>(workspace), threads, lse, scores);
      return;
  }
}

}  // namespace

bool float16_in_place(Backend backend, const AttentionPlan& plan) {
  return backend == Backend::kSimd128 && uses_decode_kernel(plan) && plan.key_type == ElementType::kFloat16 &&
         plan.value_type == ElementType::kFloat16 && plan.key_value_finite;
}

bool quantized_in_place(Backend backend, const AttentionPlan& plan) {
  return backend == Backend::kSimd128 && uses_decode_kernel(plan) && plan.quantized_kv();
}

int threads_for(Backend backend, Pass pass, const AttentionPlan& plan, int requested, int pool_threads) {
  if (backend != Backend::kSimd128 || pass != Pass::kForward) return 1;
  const int allowed = std::max(1, requested <= 0 ? pool_threads : std::min(requested, pool_threads));
  const int useful = static_cast<int>(std::max(1.0, plan.multiply_adds() / cost::kForwardMultiplyAddsPerThread));
  return std::min(allowed, useful);
}

int threads_to_run(Backend backend, const AttentionPlan& plan, int threads, const PoolWakeState& wake) {
  if (backend != Backend::kSimd128 || threads <= 1 || wake.follows_last_call) return threads;
  const double serial_micros =
      uses_decode_kernel(plan) ? cost::decode_serial_micros(plan) : cost::forward_serial_micros(plan);
  if (serial_micros >= wake.wake_micros) return threads;
  return std::min(threads, 1 + wake.awake_helpers);
}

bool uses_decode_kernel(const AttentionPlan& plan) {
  return !plan.return_weights && plan.return_scores == ScoreStage::kNone && plan.Hkv > 0 &&
         plan.heads_per_kv() * plan.Lq <= (plan.quantized_kv() ? kDecodeMaxRowsQuantized : kDecodeMaxRows) &&
         plan.Lk >= kDecodeMinKeys;
}

DecodeSplit decode_split(const AttentionPlan& plan) {
  int64_t keys = 0;  // every (batch, KV head)'s keys
  for (int64_t b = 0; b < plan.B; ++b) keys += plan.Hkv * plan.key_length(b);
  DecodeSplit split;
  split.keys_per_split = round_up(std::max(kDecodeMinSplitKeys, (keys + kDecodeTasks - 1) / kDecodeTasks), kDecodeChunkKeys);
  split.splits_per_head = std::max<int64_t>(1, (plan.Lk + split.keys_per_split - 1) / split.keys_per_split);
  return split;
}

uint64_t workspace_bytes(Backend backend, const AttentionPlan& plan, int threads) {
  if (!plan.has_float16() && !plan.quantized_kv()) return float32_workspace_bytes(backend, plan, threads);
  const Widened w = widened_inputs(backend, plan);
  return widened_total_bytes(plan, w) + float32_workspace_bytes(backend, widened_plan(plan, w), threads);
}

namespace {

// The inputs that `w` names converted to dense float32 at `next` (widened_total_bytes(plan, w)
// bytes); the others as they are. Returns the end of what it wrote.
char* convert_inputs(const AttentionPlan& plan, const Widened& w, const AttentionInputs& in, char* next,
                     AttentionInputs* widened) {
  *widened = in;
  // One float16 input, `heads` blocks of head_elements halves head_stride apart (a KV cache's
  // rows), widened to dense floats at `next`.
  const auto widen = [&](const uint16_t*& half, const float*& full, int64_t heads, int64_t head_stride,
                         int64_t head_elements) {
    float* dense = reinterpret_cast<float*>(next);
    for (int64_t h = 0; h < heads; ++h) widen_float16_simd128(half + h * head_stride, dense + h * head_elements, head_elements);
    full = dense;
    half = nullptr;
    next += widened_bytes(heads * head_elements);
  };
  // A quantized cache's keys or values, dequantized to dense floats at `next`.
  const auto dequantize = [&](const uint8_t*& tensor, const float*& full, const QuantizedLayout& layout) {
    float* dense = reinterpret_cast<float*>(next);
    for (int64_t h = 0; h < layout.heads; ++h) load_quantized_rows_simd128(layout, tensor, h, 0, plan.Lk, dense + h * plan.Lk * layout.dim);
    full = dense;
    tensor = nullptr;
    next += widened_bytes(layout.heads * plan.Lk * layout.dim);
  };
  if (w.query) {
    float* rows = reinterpret_cast<float*>(next);
    if (plan.query_type == ElementType::kFloat16) widen_float16_simd128(in.query_f16, rows, plan.query_elements());
    else std::copy(in.query, in.query + plan.query_elements(), rows);
    if (w.round_query) {
      for (int64_t r = 0; r < plan.B * plan.Hq * plan.Lq; ++r) round_query_row(rows + r * plan.E, plan.E, rows + r * plan.E);
    }
    widened->query = rows;
    widened->query_f16 = nullptr;
    next += widened_bytes(plan.query_elements());
  }
  if (plan.quantized_kv()) {
    if (w.key) dequantize(widened->key_quantized, widened->key, plan.key_layout());
    if (w.value) dequantize(widened->value_quantized, widened->value, plan.value_layout());
  } else {
    if (w.key) widen(widened->key_f16, widened->key, plan.B * plan.Hkv, plan.key_head_stride, plan.Lk * plan.E);
    if (w.value) widen(widened->value_f16, widened->value, plan.B * plan.Hkv, plan.value_head_stride, plan.Lk * plan.Ev);
  }
  return next;
}

// Every input converted, as for a kernel that reads none of them in place.
Widened all_widened(const AttentionPlan& plan) {
  return {plan.query_type == ElementType::kFloat16 || plan.quantized_kv(), plan.key_type != ElementType::kFloat32,
          plan.value_type != ElementType::kFloat32, plan.quantized_kv()};
}

}  // namespace

uint64_t dense_inputs_bytes(const AttentionPlan& plan) { return widened_total_bytes(plan, all_widened(plan)); }

AttentionPlan dense_inputs(const AttentionPlan& plan, const AttentionInputs& in, void* workspace, AttentionInputs* dense) {
  const Widened w = all_widened(plan);
  convert_inputs(plan, w, in, static_cast<char*>(workspace), dense);
  return widened_plan(plan, w);
}

void run_attention(Backend backend, const AttentionPlan& plan, const AttentionInputs& in,
                   float* output, float* weights, void* workspace, int threads, float* lse, float* scores) {
  // Only the SIMD forward kernel on float32 inputs waits for streamed rows; the others read
  // theirs once the copy is done.
  const bool converts = plan.has_float16() || plan.quantized_kv();
  const bool waits_for_rows = backend == Backend::kSimd128 && !converts && !uses_decode_kernel(plan);
  if (in.arrival.streamed() && !waits_for_rows) run_overlapped_work();
  if (!converts) {
    run_float32(backend, plan, in, output, weights, workspace, threads, lse, scores);
    return;
  }
  const Widened w = widened_inputs(backend, plan);
  AttentionInputs widened;
  char* next = convert_inputs(plan, w, in, static_cast<char*>(workspace), &widened);
  run_float32(backend, widened_plan(plan, w), widened, output, weights, next, threads, lse, scores);
}

uint64_t trace_workspace_bytes(const AttentionPlan& plan) { return simd128_workspace_bytes(plan, 1); }

void trace_online_softmax(const AttentionPlan& plan, const AttentionInputs& in, float* output,
                          void* workspace, SoftmaxTrace* trace) {
  AttentionPlan forward = plan;
  forward.return_weights = false;
  forward.return_scores = ScoreStage::kNone;
  attention_f32_simd128(forward, in, output, nullptr, static_cast<float*>(workspace), 1, nullptr, nullptr, trace);
}

uint64_t backward_workspace_bytes(Backend backend, const AttentionPlan& plan, bool has_forward) {
  switch (backend) {
    case Backend::kScalar: return backward_reference_workspace_bytes<float>(plan);
    case Backend::kSimd128:
      return simd128_backward_workspace_bytes(plan) + (has_forward ? 0 : simd_forward_bytes(plan));
  }
  return 0;
}

void run_attention_backward(Backend backend, const AttentionPlan& plan, const AttentionInputs& in,
                            const float* d_output, const float* output, const float* lse,
                            const BackwardOutputs<float>& out, void* workspace) {
  switch (backend) {
    case Backend::kScalar:
      attention_backward_reference<float>(plan, in, d_output, out, static_cast<float*>(workspace));
      return;
    case Backend::kSimd128: {
      float* ws = static_cast<float*>(workspace);
      if (lse == nullptr && plan.B * plan.Hq * plan.Lq > 0) {  // recompute output and lse
        AttentionPlan forward = plan;
        forward.return_weights = false;
        forward.return_scores = ScoreStage::kNone;
        float* o = ws + simd128_backward_workspace_bytes(plan) / sizeof(float);
        float* l = o + plan.output_elements();
        float* forward_ws = l + plan.B * plan.Hq * plan.Lq;
        // One thread, as threads_for gives every backward (simd_forward_bytes sizes for one).
        attention_f32_simd128(forward, in, o, nullptr, forward_ws, 1, l);
        output = o;
        lse = l;
      }
      attention_backward_f32_simd128(plan, in, d_output, output, lse, out, ws);
      return;
    }
  }
}

}  // namespace sdpa
