// The one Embind file: with the WebGPU device glue (cpp/webgpu/device.cpp), the only code that
// knows Emscripten. It turns plain JS objects (shapes, option strings, pointer bags of heap
// addresses) into the core's types, and Status into { name, message } for the TypeScript layer
// (web/src) to throw as TypeError/RangeError. Tensor data never crosses here as JS arrays: the
// TS layer copies it into the wasm heap and passes addresses.
#include <emscripten/bind.h>
#include <emscripten/val.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dispatch/dispatch.h"
#include "core/problem.h"
#include "core/reference.h"
#include "cpu/thread_pool.h"
#include "extras/modules.h"
#include "extras/prng.h"
#include "extras/score_functions.h"
#include "webgpu/device.h"

using emscripten::val;

namespace sdpa {
namespace {

// `literal` as a JS string, made on its first use. Indexing a val with a C string would re-read
// that string from the wasm heap on every access, a byte at a time, and in the pthreads build
// each byte re-checks whether memory grew (WebAssembly.Memory.buffer, slow on shared memory):
// that was most of a small call's fixed cost. The cache is a static open-addressed table (this
// file has under 100 distinct names), so it never touches the heap the leak tests watch.
// Called from the main thread only.
const val& js(const char* literal) {
  constexpr size_t kSlots = 256;
  struct Slot {
    const char* literal = nullptr;
    val string = val::undefined();
  };
  static Slot slots[kSlots];
  size_t i = reinterpret_cast<uintptr_t>(literal) % kSlots;
  while (slots[i].literal != literal) {
    if (slots[i].literal == nullptr) {
      slots[i] = {literal, val(literal)};
      break;
    }
    i = (i + 1) % kSlots;
  }
  return slots[i].string;
}

std::vector<int64_t> shape_of(const val& array) {
  std::vector<int64_t> shape;
  if (array.isUndefined() || array.isNull()) return shape;
  const auto n = array[js("length")].as<unsigned>();
  shape.reserve(n);
  for (unsigned i = 0; i < n; ++i) shape.push_back(static_cast<int64_t>(array[i].as<double>()));
  return shape;
}

// A JS array (or typed array) of numbers, e.g. keyLengths or sinks; *present: whether it was given.
std::vector<double> numbers_of(const val& array, bool* present) {
  std::vector<double> out;
  *present = !array.isUndefined() && !array.isNull();
  if (!*present) return out;
  const auto n = array[js("length")].as<unsigned>();
  out.reserve(n);
  for (unsigned i = 0; i < n; ++i) out.push_back(array[i].as<double>());
  return out;
}

val shape_to_js(const std::vector<int64_t>& shape) {
  val out = val::array();
  for (size_t i = 0; i < shape.size(); ++i) out.set(i, static_cast<double>(shape[i]));
  return out;
}

// A pointer bag: a JS object of heap addresses by name, e.g. { query, key, value, output }.
// Each binding names every key it reads as required or optional; check() then reports a missing
// required key, and any key the binding does not read, so a misspelled key is an error instead
// of a null address. Read every key first, then check(), then run.
class PointerBag {
 public:
  explicit PointerBag(const val& bag) : bag_(bag) {}

  template <typename T = void>
  T* required(const char* name) {
    return get<T>(name, true);
  }
  template <typename T = void>
  T* optional(const char* name) {
    return get<T>(name, false);
  }
  // Required when `needed` (e.g. the mask of a masked plan), else optional.
  template <typename T = void>
  T* required_if(bool needed, const char* name) {
    return get<T>(name, needed);
  }

  // check(), then compute() when the bag checks out.
  template <typename Compute>
  Status then(Compute&& compute) const {
    Status s = check();
    if (s.ok()) compute();
    return s;
  }

  Status check() const {
    if (missing_ != nullptr) {
      return Status::TypeError(std::string("sdpa-web internal error: the heap address '") + missing_ +
                               "' is missing");
    }
    static const val object = val::global("Object");
    const val keys = object.call<val>("keys", bag_);
    const auto n = keys[js("length")].as<unsigned>();
    if (n == present_) return Status::Ok();  // every key is one this binding read
    for (unsigned i = 0; i < n; ++i) {
      const val key = keys[i];
      bool known = false;
      for (int j = 0; j < read_ && !known; ++j) known = key.strictlyEquals(js(names_[j]));
      if (!known) {
        std::string expected;
        for (int j = 0; j < read_; ++j) expected += (j ? ", " : "") + std::string(names_[j]);
        return Status::TypeError("sdpa-web internal error: unknown heap address '" + key.as<std::string>() +
                                 "' (expected " + expected + ")");
      }
    }
    return Status::Ok();  // known keys whose value is undefined or null
  }

 private:
  template <typename T>
  T* get(const char* name, bool required) {
    if (read_ < kMaxNames) names_[read_++] = name;
    const val p = bag_[js(name)];
    if (p.isUndefined() || p.isNull()) {
      if (required && missing_ == nullptr) missing_ = name;
      return nullptr;
    }
    ++present_;
    return reinterpret_cast<T*>(static_cast<uintptr_t>(p.as<double>()));
  }

  static constexpr int kMaxNames = 16;
  const val& bag_;
  const char* names_[kMaxNames] = {};
  int read_ = 0;
  unsigned present_ = 0;
  const char* missing_ = nullptr;
};

val error_to_js(const Status& s) {
  if (s.ok()) return val::null();
  val e = val::object();
  e.set(js("name"), s.kind == ErrorKind::kType ? "TypeError" : "RangeError");
  e.set(js("message"), s.message);
  return e;
}

// { error }: the result of a call that failed before it started.
val error_result(const Status& s) {
  val out = val::object();
  out.set(js("error"), error_to_js(s));
  return out;
}

// Sets *out to the value whose name `string` is; false when it is none of them.
template <typename Enum>
bool named(const val& string, std::initializer_list<std::pair<const char*, Enum>> names, Enum* out) {
  for (const auto& [name, value] : names) {
    if (string.strictlyEquals(js(name))) {
      *out = value;
      return true;
    }
  }
  return false;
}

// request: { queryShape, keyShape, valueShape, maskKind: 'none'|'bool'|'additive', maskShape,
//            causal: 'none'|'top-left'|'bottom-right'|'offset', causalOffset (with 'offset': an
//            integer, query i sees keys j <= i + causalOffset), scale?: number, softcap?: number (0 = off),
//            keyLengths?: number[B], windowLeft?, windowRight?: integers, alibi?: boolean,
//            alibiSlopes?: number[Hq], sinks?: number[Hq], queryDocumentsShape?, keyDocumentsShape?
//            (both or neither), returnScores: 'none'|'scaled'|'softcapped'|'masked',
//            enableGqa, returnWeights, keyHeadStride?, valueHeadStride? (a KV cache's),
//            queryType?, keyType?, valueType?: 'float32'|'float16' (absent: float32),
//            keyValueFinite?: boolean (float16 K/V known to hold no Inf/NaN) }
//            (JS types checked in TypeScript; values in plan_attention)
Status plan_from_js(const val& request, AttentionPlan* plan) {
  AttentionRequest r;
  r.query_shape = shape_of(request[js("queryShape")]);
  r.key_shape = shape_of(request[js("keyShape")]);
  r.value_shape = shape_of(request[js("valueShape")]);
  if (!named(request[js("maskKind")], {{"none", MaskKind::kNone}, {"bool", MaskKind::kBool},
                                       {"additive", MaskKind::kAdditive}}, &r.mask_kind)) {
    return Status::TypeError("sdpa-web internal error: request.maskKind must be 'none', 'bool' or 'additive'");
  }
  r.mask_shape = shape_of(request[js("maskShape")]);
  if (!named(request[js("causal")], {{"none", CausalAlignment::kNone}, {"top-left", CausalAlignment::kTopLeft},
                                     {"bottom-right", CausalAlignment::kBottomRight},
                                     {"offset", CausalAlignment::kOffset}}, &r.causal)) {
    return Status::TypeError("sdpa-web internal error: request.causal must be 'none', 'top-left', 'bottom-right' or 'offset'");
  }
  if (r.causal == CausalAlignment::kOffset) {
    // An integer (checked in TypeScript); beyond ±2^53 it is clamped there, where it acts as ±2^53.
    const double offset = request[js("causalOffset")].as<double>();
    if (!(offset == std::floor(offset))) {
      return Status::RangeError("isCausal.offset must be an integer; got " + std::to_string(offset));
    }
    const double bound = static_cast<double>(kMaxCausalOffset);
    r.causal_offset = static_cast<int64_t>(std::clamp(offset, -bound, bound));
  }
  const val scale = request[js("scale")];
  r.has_scale = !scale.isUndefined() && !scale.isNull();
  if (r.has_scale) r.scale = scale.as<double>();
  // softcap: a number checked in TypeScript; undefined or 0 = off (plan_attention checks the range).
  const val softcap = request[js("softcap")];
  if (!softcap.isUndefined() && !softcap.isNull()) r.softcap = softcap.as<double>();
  r.key_lengths = numbers_of(request[js("keyLengths")], &r.has_key_lengths);
  const val window_left = request[js("windowLeft")], window_right = request[js("windowRight")];
  r.has_window_left = !window_left.isUndefined() && !window_left.isNull();
  r.has_window_right = !window_right.isUndefined() && !window_right.isNull();
  if (r.has_window_left) r.window_left = window_left.as<double>();
  if (r.has_window_right) r.window_right = window_right.as<double>();
  r.alibi = request[js("alibi")].isTrue();
  r.alibi_slopes = numbers_of(request[js("alibiSlopes")], &r.has_alibi_slopes);
  r.sinks = numbers_of(request[js("sinks")], &r.has_sinks);
  const val query_documents = request[js("queryDocumentsShape")];
  r.has_documents = !query_documents.isUndefined() && !query_documents.isNull();
  r.query_documents_shape = shape_of(query_documents);
  r.key_documents_shape = shape_of(request[js("keyDocumentsShape")]);
  const val stage = request[js("returnScores")];
  if (!stage.isUndefined() && !named(stage, {{"none", ScoreStage::kNone}, {"scaled", ScoreStage::kScaled},
                                             {"softcapped", ScoreStage::kSoftcapped}, {"masked", ScoreStage::kMasked}},
                                     &r.return_scores)) {
    return Status::TypeError("sdpa-web internal error: request.returnScores must be 'none', 'scaled', 'softcapped' or 'masked'");
  }
  r.enable_gqa = request[js("enableGqa")].as<bool>();
  r.return_weights = request[js("returnWeights")].as<bool>();
  // keyHeadStride/valueHeadStride: a KV cache's maxLength·E and maxLength·Ev (absent: dense).
  const val key_stride = request[js("keyHeadStride")], value_stride = request[js("valueHeadStride")];
  if (!key_stride.isUndefined()) r.key_head_stride = static_cast<int64_t>(key_stride.as<double>());
  if (!value_stride.isUndefined()) r.value_head_stride = static_cast<int64_t>(value_stride.as<double>());
  for (auto [name, type] : {std::pair{"queryType", &r.query_type}, {"keyType", &r.key_type}, {"valueType", &r.value_type}}) {
    const val given = request[js(name)];
    if (!given.isUndefined() && !named(given, {{"float32", ElementType::kFloat32}, {"float16", ElementType::kFloat16}}, type)) {
      return Status::TypeError(std::string("sdpa-web internal error: request.") + name + " must be 'float32' or 'float16'");
    }
  }
  r.key_value_finite = request[js("keyValueFinite")].isTrue();
  return plan_attention(r, plan);
}

Backend backend_named(const std::string& name) {
  return name == "scalar" ? Backend::kScalar : Backend::kSimd128;
}

// request.threads: threads asked for (absent: 1; <= 0: every one this module may use), resolved
// for this plan by the core's one thread policy, threads_for().
int threads_of(const val& request, Backend backend, const AttentionPlan& plan) {
  const val t = request[js("threads")];
  return threads_for(backend, Pass::kForward, plan, t.isUndefined() || t.isNull() ? 1 : t.as<int>(), max_threads());
}

// query, key, value (a float16 one as its halves: query_f16, ...) and, for a masked plan, mask;
// document ids for a plan with documents. `in_heap(name)`: whether query/key/value `name` is in
// the bag (a WebGPU call's may live in a caller's array or GPUBuffer instead).
template <typename InHeap>
AttentionInputs inputs_from(PointerBag& pointers, const AttentionPlan& plan, InHeap&& in_heap) {
  AttentionInputs in;
  const auto input = [&](const char* name, ElementType type, const float** f32, const uint16_t** f16) {
    if (type == ElementType::kFloat16) *f16 = pointers.required_if<const uint16_t>(in_heap(name), name);
    else *f32 = pointers.required_if<const float>(in_heap(name), name);
  };
  input("query", plan.query_type, &in.query, &in.query_f16);
  input("key", plan.key_type, &in.key, &in.key_f16);
  input("value", plan.value_type, &in.value, &in.value_f16);
  in.mask = pointers.required_if<const void>(plan.mask_kind != MaskKind::kNone, "mask");
  in.query_documents = pointers.required_if<const int32_t>(plan.documents, "queryDocuments");
  in.key_documents = pointers.required_if<const int32_t>(plan.documents, "keyDocuments");
  return in;
}

AttentionInputs inputs_from(PointerBag& pointers, const AttentionPlan& plan) {
  return inputs_from(pointers, plan, [](const char*) { return true; });
}

// Plans `request` with `make` and, when it is valid, runs body(plan, bag), which reads its
// addresses from the pointer bag and computes through bag.then(). Returns the first error (or
// null), which is what every run binding reports to the TypeScript layer.
template <typename Plan, typename Body>
val run_planned(Status (*make)(const val&, Plan*), const val& request, const val& pointers, Body&& body) {
  Plan plan;
  Status s = make(request, &plan);
  if (s.ok()) {
    PointerBag bag(pointers);
    s = body(plan, bag);
  }
  return error_to_js(s);
}

// -> { error, outputShape, weightsShape, workspaceBytes: { scalar, simd, trace, reference64 } }
val plan_attention_js(val request) {
  AttentionPlan plan;
  const Status s = plan_from_js(request, &plan);
  val out = val::object();
  out.set(js("error"), error_to_js(s));
  if (!s.ok()) return out;
  out.set(js("outputShape"), shape_to_js(plan.output_shape));
  out.set(js("weightsShape"), shape_to_js(plan.weights_shape));
  out.set(js("maskElements"), static_cast<double>(plan.mask_elements));
  val workspace = val::object();
  workspace.set(js("scalar"), static_cast<double>(workspace_bytes(Backend::kScalar, plan)));
  workspace.set(js("simd"), static_cast<double>(workspace_bytes(Backend::kSimd128, plan,
                                                            threads_of(request, Backend::kSimd128, plan))));
  workspace.set(js("trace"), static_cast<double>(trace_workspace_bytes(plan)));
  workspace.set(js("reference64"), static_cast<double>(reference_workspace_bytes<double>(plan)));
  out.set(js("workspaceBytes"), workspace);
  return out;
}

// pointers: { query, key, value, mask?, queryDocuments?, keyDocuments?, output, weights?, lse?,
//            scores? (with request.returnScores), workspace, inputArrival? }
// while_helpers_run: a JS function (that must not throw) the calling thread runs while helper
// threads run the kernel, or before it on one thread (cpu/thread_pool.h OverlappedWork), or
// undefined. With inputArrival (the address of an InputArrivalRecord, core/input_arrival.h), the
// query, key and value are not yet in place: while_helpers_run copies them in that order.
val run_attention_js(val request, std::string backend, val pointers, val while_helpers_run) {
  std::optional<OverlappedWork> overlapped;
  if (!while_helpers_run.isUndefined()) {
    overlapped.emplace([](void* function) { (*static_cast<val*>(function))(); }, &while_helpers_run);
  }
  return run_planned(plan_from_js, request, pointers, [&](const AttentionPlan& plan, PointerBag& bag) {
    AttentionInputs in = inputs_from(bag, plan);
    in.arrival.record = bag.optional<InputArrivalRecord>("inputArrival");
    if (in.arrival.streamed() && !overlapped) {
      return Status::TypeError("sdpa-web internal error: streamed inputs need the function that copies them");
    }
    float* output = bag.required<float>("output");
    float* weights = bag.required_if<float>(plan.return_weights, "weights");
    float* lse = bag.optional<float>("lse");
    float* scores = bag.required_if<float>(plan.return_scores != ScoreStage::kNone, "scores");
    void* workspace = bag.required("workspace");
    const Backend b = backend_named(backend);
    return bag.then([&] { run_attention(b, plan, in, output, weights, workspace, threads_of(request, b, plan), lse, scores); });
  });
}

// The SIMD kernel's online softmax of query row `row` of head (batch, head), traced.
// pointers: inputs + { output, steps ([tiles, 3 + Ev] floats), visited? ([blocks, tiles] zeroed
// bytes), workspace (the simd workspace on 1 thread) } -> { error, steps: the number written }.
// The traced row's batch, head and row: each an integer in range, else a RangeError naming it.
Status check_traced_row(const AttentionPlan& plan, double batch, double head, double row) {
  for (auto [name, value, size] : {std::tuple<const char*, double, int64_t>{"batch", batch, plan.B},
                                   {"head", head, plan.Hq},
                                   {"row", row, plan.Lq}}) {
    if (!(value >= 0 && value < static_cast<double>(size)) || value != std::floor(value)) {
      char got[32];
      std::snprintf(got, sizeof got, "%.17g", value);
      return Status::RangeError(std::string(name) + " must be an integer in [0, " + std::to_string(size) + "); got " + got);
    }
  }
  return Status::Ok();
}

val trace_online_softmax_js(val request, val pointers, double batch, double head, double row) {
  val out = val::object();
  int64_t written = 0;
  out.set(js("error"), run_planned(plan_from_js, request, pointers, [&](const AttentionPlan& plan, PointerBag& bag) {
    if (Status s = check_float32_inputs(plan, "traceOnlineSoftmax"); !s.ok()) return s;
    const AttentionInputs in = inputs_from(bag, plan);
    float* output = bag.required<float>("output");
    float* steps = bag.required<float>("steps");
    auto* visited = bag.optional<uint8_t>("visited");
    void* workspace = bag.required("workspace");
    const Status checked = check_traced_row(plan, batch, head, row);
    if (!checked.ok()) return checked;
    SoftmaxTrace trace{static_cast<int64_t>(batch), static_cast<int64_t>(head), static_cast<int64_t>(row), steps, 0, visited};
    return bag.then([&] {
      trace_online_softmax(plan, in, output, workspace, &trace);
      written = trace.steps_written;
    });
  }));
  out.set(js("steps"), static_cast<double>(written));
  return out;
}

// The reference in T with the stages asked for. pointers: inputs + { output, workspace } and the
// stages { weights, lse, scores, scaledScores, softcappedScores, maskedScores }; `explain`: the
// step-by-step explainer's, which needs weights, scores, scaledScores and maskedScores.
template <typename T>
val run_reference_js(const val& request, const val& pointers, bool explain) {
  return run_planned(plan_from_js, request, pointers, [&](const AttentionPlan& plan, PointerBag& bag) {
    if (Status s = check_float32_inputs(plan, explain ? "explain" : "referenceAttention"); !s.ok()) return s;
    const AttentionInputs in = inputs_from(bag, plan);
    ReferenceOutputs<T> out;
    out.output = bag.required<T>("output");
    out.weights = bag.required_if<T>(explain, "weights");
    out.lse = bag.optional<T>("lse");
    out.scores = bag.required_if<T>(explain, "scores");
    out.scaled_scores = bag.required_if<T>(explain, "scaledScores");
    out.softcapped_scores = bag.optional<T>("softcappedScores");
    out.masked_scores = bag.required_if<T>(explain, "maskedScores");
    T* workspace = bag.required<T>("workspace");
    return bag.then([&] { attention_reference<T>(plan, in, out, workspace); });
  });
}

// Every stage of the float32 reference, for the step-by-step explainer.
val explain_attention_js(val request, val pointers) { return run_reference_js<float>(request, pointers, true); }

// The float64 oracle (double buffers).
val reference_attention64_js(val request, val pointers) { return run_reference_js<double>(request, pointers, false); }

// -> { error, outputShape }; with addresses given (a, b, output) also computes.
val matmul_js(val a_shape, val b_shape, val pointers) {
  MatmulPlan plan;
  Status s = plan_matmul(shape_of(a_shape), shape_of(b_shape), &plan);
  if (s.ok() && !pointers.isUndefined()) {
    PointerBag bag(pointers);
    const float* a = bag.required<const float>("a");
    const float* b = bag.required<const float>("b");
    float* output = bag.required<float>("output");
    s = bag.then([&] { matmul_reference(plan, a, b, output); });
  }
  val out = val::object();
  out.set(js("error"), error_to_js(s));
  if (!s.ok()) return out;
  out.set(js("outputShape"), shape_to_js(plan.output_shape));
  return out;
}

// -> error or null; with addresses given (x, output) also computes.
val softmax_js(val shape, double temperature, val pointers) {
  SoftmaxPlan plan;
  Status s = plan_softmax(shape_of(shape), temperature, &plan);
  if (s.ok() && !pointers.isUndefined()) {
    PointerBag bag(pointers);
    const float* x = bag.required<const float>("x");
    float* output = bag.required<float>("output");
    s = bag.then([&] { softmax_rows(x, plan.rows, plan.cols, plan.temperature, output); });
  }
  return error_to_js(s);
}

// The WebGPU backend (cpp/webgpu/device.h): plans like runAttention, then submits.
// pointers: { query, key, value, mask?, queryDocuments?, keyDocuments?, output, weights?, scores? }
//   -> { error } | { error: null, promise, job }
// sources (or undefined): { query?, key?, value?, output? } held outside the heap (device.h
// WebGpuAttention::run); their addresses are then left out of `pointers`.
// A WebGPU call on a plan; with `trace_row` ((b·Hq + h)·Lq + i, from traceOnlineSoftmax) that
// row's online-softmax state goes to pointers.trace.
val webgpu_call(WebGpuAttention& gpu, const AttentionPlan& plan, val pointers, uint32_t trace_row, val sources) {
  Status s = Status::Ok();
  const auto in_heap = [&](const char* name) { return sources.isUndefined() || sources[name].isUndefined(); };
  const bool tracing = trace_row != FlashVariant::kNoTrace;
  if (tracing && (plan.return_weights || plan.return_scores != ScoreStage::kNone)) {
    s = Status::TypeError("sdpa-web internal error: a WebGPU trace returns no weights or scores");
  }
  AttentionInputs in;
  float* output = nullptr;
  float* weights = nullptr;
  float* scores = nullptr;
  float* trace = nullptr;
  if (s.ok()) {
    PointerBag bag(pointers);
    in = inputs_from(bag, plan, in_heap);
    output = bag.required_if<float>(in_heap("output"), "output");
    weights = bag.required_if<float>(plan.return_weights, "weights");
    scores = bag.required_if<float>(plan.return_scores != ScoreStage::kNone, "scores");
    trace = bag.required_if<float>(tracing, "trace");
    s = bag.check();
  }
  if (!s.ok()) return error_result(s);
  return gpu.run(plan, in, output, weights, scores, trace_row, trace, sources);
}

val webgpu_run_js(WebGpuAttention& gpu, val request, val pointers, val sources) {
  AttentionPlan plan;
  const Status s = plan_from_js(request, &plan);
  if (!s.ok()) return error_result(s);
  return webgpu_call(gpu, plan, pointers, FlashVariant::kNoTrace, sources);
}

val webgpu_trace_js(WebGpuAttention& gpu, val request, val pointers, double batch, double head, double row, val sources) {
  AttentionPlan plan;
  Status s = plan_from_js(request, &plan);
  if (s.ok()) s = check_traced_row(plan, batch, head, row);
  const double index = (batch * static_cast<double>(plan.Hq) + head) * static_cast<double>(plan.Lq) + row;
  if (s.ok() && index >= static_cast<double>(FlashVariant::kNoTrace)) {
    s = Status::RangeError("traceOnlineSoftmax on 'webgpu' takes at most 2^32 − 1 query rows");
  }
  if (!s.ok()) return error_result(s);
  return webgpu_call(gpu, plan, pointers, static_cast<uint32_t>(index), sources);
}

// { error } or { floats, tileKeys, lanes, stride, kernel }: the trace of `request` on this device.
val webgpu_trace_layout_js(WebGpuAttention& gpu, val request) {
  AttentionPlan plan;
  const Status s = plan_from_js(request, &plan);
  if (!s.ok()) return error_result(s);
  return gpu.trace_layout(plan);
}

// Bytes malloc has handed out and not yet taken back: the leak tests' baseline.
double heap_bytes_in_use() { return static_cast<double>(mallinfo().uordblks); }

// ---- gradients, PRNG, score functions -------------------------------------------------------

// backward: { dOutputShape, outputShape?, lseShape?, returnAttnMaskGrad }; *has_forward: whether
// the forward's output was given.
Status backward_plan_from_js(const val& request, const val& backward, AttentionPlan* plan,
                             bool* has_forward = nullptr) {
  Status s = plan_from_js(request, plan);
  if (!s.ok()) return s;
  BackwardRequest r;
  r.d_output_shape = shape_of(backward[js("dOutputShape")]);
  const val output_shape = backward[js("outputShape")];
  r.has_forward = !output_shape.isUndefined() && !output_shape.isNull();
  r.output_shape = shape_of(output_shape);
  r.lse_shape = shape_of(backward[js("lseShape")]);
  r.want_d_mask = backward[js("returnAttnMaskGrad")].as<bool>();
  if (has_forward != nullptr) *has_forward = r.has_forward;
  return check_backward_request(*plan, r);
}

// The part every backward binding shares: plans the call and reads the bag's inputs, dOutput and
// gradients { dQuery, dKey, dValue, dMask?, dSinks? } (in T), then runs
// body(plan, bag, inputs, d_output, gradients), which reads the rest and computes through
// bag.then().
template <typename T, typename Body>
val run_backward_planned(const val& request, const val& backward, const val& pointers, Body&& body) {
  AttentionPlan plan;
  Status s = backward_plan_from_js(request, backward, &plan);
  if (s.ok()) {
    PointerBag bag(pointers);
    const AttentionInputs in = inputs_from(bag, plan);
    const float* d_output = bag.required<const float>("dOutput");
    const BackwardOutputs<T> gradients{bag.required<T>("dQuery"), bag.required<T>("dKey"),
                                       bag.required<T>("dValue"), bag.optional<T>("dMask"),
                                       bag.optional<T>("dSinks")};
    s = body(plan, bag, in, d_output, gradients);
  }
  return error_to_js(s);
}

// -> { error, workspaceBytes: { scalar, simd, reference64 } }
val plan_attention_backward_js(val request, val backward) {
  AttentionPlan plan;
  bool has_forward = false;
  const Status s = backward_plan_from_js(request, backward, &plan, &has_forward);
  val out = val::object();
  out.set(js("error"), error_to_js(s));
  if (!s.ok()) return out;
  val workspace = val::object();
  workspace.set(js("scalar"), static_cast<double>(backward_workspace_bytes(Backend::kScalar, plan, has_forward)));
  workspace.set(js("simd"), static_cast<double>(backward_workspace_bytes(Backend::kSimd128, plan, has_forward)));
  workspace.set(js("reference64"), static_cast<double>(backward_reference_workspace_bytes<double>(plan)));
  out.set(js("workspaceBytes"), workspace);
  return out;
}

// pointers: inputs + { dOutput, output?, lse?, dQuery, dKey, dValue, dMask?, workspace }
val run_attention_backward_js(val request, val backward, std::string backend, val pointers) {
  return run_backward_planned<float>(request, backward, pointers,
                                     [&](const AttentionPlan& plan, PointerBag& bag, const AttentionInputs& in,
                                         const float* d_output, const BackwardOutputs<float>& gradients) {
    const float* output = bag.optional<const float>("output");
    const float* lse = bag.optional<const float>("lse");
    void* workspace = bag.required("workspace");
    return bag.then([&] {
      run_attention_backward(backend_named(backend), plan, in, d_output, output, lse, gradients, workspace);
    });
  });
}

// The float64 analytic gradient. pointers: inputs + dOutput + double { dQuery, dKey, dValue, dMask?, workspace }
val reference_attention_backward64_js(val request, val backward, val pointers) {
  return run_backward_planned<double>(request, backward, pointers,
                                      [&](const AttentionPlan& plan, PointerBag& bag, const AttentionInputs& in,
                                          const float* d_output, const BackwardOutputs<double>& gradients) {
    double* workspace = bag.required<double>("workspace");
    return bag.then([&] { attention_backward_reference<double>(plan, in, d_output, gradients, workspace); });
  });
}

// -> error or null; with an output address, fills it with a [fanIn, fanOut] Xavier-uniform matrix.
val xavier_uniform_js(double fan_in, double fan_out, double seed, double offset, val pointers) {
  Status s = plan_xavier(fan_in, fan_out, seed);
  if (s.ok() && !pointers.isUndefined()) {
    PointerBag bag(pointers);
    float* output = bag.required<float>("output");
    s = bag.check();
    if (s.ok()) {
      xavier_uniform(static_cast<int64_t>(fan_in), static_cast<int64_t>(fan_out), static_cast<uint32_t>(seed),
                     static_cast<uint64_t>(offset), output);
    }
  }
  return error_to_js(s);
}

// -> error or null; with an output address, fills it with n draws of U(low, high).
val random_uniform_js(double n, double low, double high, double seed, double offset, val pointers) {
  Status s = plan_uniform(n, low, high, seed);
  if (s.ok() && !pointers.isUndefined()) {
    PointerBag bag(pointers);
    float* output = bag.required<float>("output");
    s = bag.then([&] {
      uniform_fill(static_cast<int64_t>(n), low, high, static_cast<uint32_t>(seed), static_cast<uint64_t>(offset), output);
    });
  }
  return error_to_js(s);
}

// -> error or null; with addresses (x, output), applies inverted dropout to n elements.
val dropout_js(double n, double p, double seed, val pointers) {
  Status s = plan_dropout(p, seed);
  if (s.ok() && !pointers.isUndefined()) {
    PointerBag bag(pointers);
    const float* x = bag.required<const float>("x");
    float* output = bag.required<float>("output");
    s = bag.then([&] { dropout(x, static_cast<int64_t>(n), p, static_cast<uint32_t>(seed), output); });
  }
  return error_to_js(s);
}

// request: { kind: 'dot'|'scaled-dot'|'multiplicative'|'additive', queryShape, keyShape, wShape,
//            w1Shape, w2Shape, vShape, scale? }
Status score_plan_from_js(const val& request, ScorePlan* plan) {
  ScoreRequest r;
  const val kind = request[js("kind")];
  r.kind = kind.strictlyEquals(js("dot"))              ? ScoreKind::kDot
           : kind.strictlyEquals(js("multiplicative")) ? ScoreKind::kMultiplicative
           : kind.strictlyEquals(js("additive"))       ? ScoreKind::kAdditive
                                                       : ScoreKind::kScaledDot;
  r.query_shape = shape_of(request[js("queryShape")]);
  r.key_shape = shape_of(request[js("keyShape")]);
  r.w_shape = shape_of(request[js("wShape")]);
  r.w1_shape = shape_of(request[js("w1Shape")]);
  r.w2_shape = shape_of(request[js("w2Shape")]);
  r.v_shape = shape_of(request[js("vShape")]);
  const val scale = request[js("scale")];
  r.has_scale = !scale.isUndefined() && !scale.isNull();
  if (r.has_scale) r.scale = scale.as<double>();
  return plan_scores(r, plan);
}

// The score function's parameters: { w } (multiplicative) or { w1, w2, v } (additive).
ScoreParams score_params_from(PointerBag& pointers, const ScorePlan& plan) {
  const bool multiplicative = plan.kind == ScoreKind::kMultiplicative, additive = plan.kind == ScoreKind::kAdditive;
  return {pointers.required_if<const float>(multiplicative, "w"), pointers.required_if<const float>(additive, "w1"),
          pointers.required_if<const float>(additive, "w2"), pointers.required_if<const float>(additive, "v")};
}

// -> { error, scoresShape, workspaceBytes }
val plan_scores_js(val request) {
  ScorePlan plan;
  const Status s = score_plan_from_js(request, &plan);
  val out = val::object();
  out.set(js("error"), error_to_js(s));
  if (!s.ok()) return out;
  out.set(js("scoresShape"), shape_to_js(plan.scores_shape));
  out.set(js("workspaceBytes"), static_cast<double>(score_workspace_elements(plan) * sizeof(float)));
  return out;
}

// pointers: { query, key, w?, w1?, w2?, v?, scores, workspace }
val run_scores_js(val request, val pointers) {
  return run_planned(score_plan_from_js, request, pointers, [&](const ScorePlan& plan, PointerBag& bag) {
    const float* query = bag.required<const float>("query");
    const float* key = bag.required<const float>("key");
    const ScoreParams params = score_params_from(bag, plan);
    float* scores = bag.required<float>("scores");
    float* workspace = bag.required<float>("workspace");
    return bag.then([&] { attention_scores<float>(plan, query, key, params, scores, workspace); });
  });
}

// pointers: inputs + { dScores, dQuery, dKey, dW?, dW1?, dW2?, dV?, workspace }
val run_scores_backward_js(val request, val pointers) {
  return run_planned(score_plan_from_js, request, pointers, [&](const ScorePlan& plan, PointerBag& bag) {
    const float* query = bag.required<const float>("query");
    const float* key = bag.required<const float>("key");
    const ScoreParams params = score_params_from(bag, plan);
    const float* d_scores = bag.required<const float>("dScores");
    const bool multiplicative = plan.kind == ScoreKind::kMultiplicative, additive = plan.kind == ScoreKind::kAdditive;
    const ScoreGradients<float> g{bag.required<float>("dQuery"),
                                  bag.required<float>("dKey"),
                                  bag.required_if<float>(multiplicative, "dW"),
                                  bag.required_if<float>(additive, "dW1"),
                                  bag.required_if<float>(additive, "dW2"),
                                  bag.required_if<float>(additive, "dV")};
    float* workspace = bag.required<float>("workspace");
    return bag.then([&] { attention_scores_backward<float>(plan, query, key, params, d_scores, g, workspace); });
  });
}

// ---- attention modules (validation only; the TypeScript layer composes them) ----------------

val plan_self_attention_js(double d_model, double d_k, double d_v, double seed) {
  return error_to_js(plan_self_attention(d_model, d_k, d_v, seed));
}

// shapes: { wQ?, wK?, wV? }
val check_self_attention_weights_js(val shapes, double d_model, double d_k, double d_v) {
  std::map<std::string, std::vector<int64_t>> m;
  const val names = val::global("Object").call<val>("keys", shapes);
  const auto n = names[js("length")].as<unsigned>();
  for (unsigned i = 0; i < n; ++i) {
    const std::string name = names[i].as<std::string>();
    m[name] = shape_of(shapes[name]);
  }
  return error_to_js(check_self_attention_weights(m, static_cast<int64_t>(d_model), static_cast<int64_t>(d_k),
                                                  static_cast<int64_t>(d_v)));
}

val check_self_attention_input_js(val x_shape, double d_model) {
  return error_to_js(check_self_attention_input(shape_of(x_shape), static_cast<int64_t>(d_model)));
}

// config: { embedDim, numHeads, numKvHeads, kdim, vdim, seed, bias, weightShapes: { name: shape } }
val plan_multihead_js(val config) {
  MultiheadConfig c;
  c.embed_dim = config[js("embedDim")].as<double>();
  c.num_heads = config[js("numHeads")].as<double>();
  c.num_kv_heads = config[js("numKvHeads")].as<double>();
  c.kdim = config[js("kdim")].as<double>();
  c.vdim = config[js("vdim")].as<double>();
  c.seed = config[js("seed")].as<double>();
  c.bias = config[js("bias")].as<bool>();
  const val shapes = config[js("weightShapes")];
  const val names = val::global("Object").call<val>("keys", shapes);
  const auto n = names[js("length")].as<unsigned>();
  for (unsigned i = 0; i < n; ++i) {
    const std::string name = names[i].as<std::string>();
    c.weight_shapes[name] = shape_of(shapes[name]);
  }
  return error_to_js(plan_multihead(c));
}

// inputs: { embedDim, numHeads, kdim, vdim, batchFirst, queryShape, keyShape, valueShape,
//           keyPaddingMaskShape?, attnMaskShape? } -> { error, B, L, S, unbatched }
val check_multihead_inputs_js(val inputs) {
  MultiheadInputs in;
  in.embed_dim = static_cast<int64_t>(inputs[js("embedDim")].as<double>());
  in.num_heads = static_cast<int64_t>(inputs[js("numHeads")].as<double>());
  in.kdim = static_cast<int64_t>(inputs[js("kdim")].as<double>());
  in.vdim = static_cast<int64_t>(inputs[js("vdim")].as<double>());
  in.batch_first = inputs[js("batchFirst")].as<bool>();
  in.query_shape = shape_of(inputs[js("queryShape")]);
  in.key_shape = shape_of(inputs[js("keyShape")]);
  in.value_shape = shape_of(inputs[js("valueShape")]);
  const val kpm = inputs[js("keyPaddingMaskShape")], am = inputs[js("attnMaskShape")];
  in.has_key_padding_mask = !kpm.isUndefined() && !kpm.isNull();
  in.has_attn_mask = !am.isUndefined() && !am.isNull();
  in.key_padding_mask_shape = shape_of(kpm);
  in.attn_mask_shape = shape_of(am);
  MultiheadDims d;
  const Status s = check_multihead_inputs(in, &d);
  val out = val::object();
  out.set(js("error"), error_to_js(s));
  out.set(js("B"), static_cast<double>(d.B));
  out.set(js("L"), static_cast<double>(d.L));
  out.set(js("S"), static_cast<double>(d.S));
  out.set(js("unbatched"), d.unbatched);
  return out;
}

}  // namespace
}  // namespace sdpa

EMSCRIPTEN_BINDINGS(sdpa) {
  emscripten::function("planAttention", &sdpa::plan_attention_js);
  emscripten::function("runAttention", &sdpa::run_attention_js);
  emscripten::function("explainAttention", &sdpa::explain_attention_js);
  emscripten::function("traceOnlineSoftmax", &sdpa::trace_online_softmax_js);
  emscripten::function("referenceAttention64", &sdpa::reference_attention64_js);
  emscripten::function("matmul", &sdpa::matmul_js);
  emscripten::function("softmax", &sdpa::softmax_js);
  emscripten::function("heapBytesInUse", &sdpa::heap_bytes_in_use);
  emscripten::function("planAttentionBackward", &sdpa::plan_attention_backward_js);
  emscripten::function("runAttentionBackward", &sdpa::run_attention_backward_js);
  emscripten::function("referenceAttentionBackward64", &sdpa::reference_attention_backward64_js);
  emscripten::function("xavierUniform", &sdpa::xavier_uniform_js);
  emscripten::function("randomUniform", &sdpa::random_uniform_js);
  emscripten::function("dropout", &sdpa::dropout_js);
  emscripten::function("planScores", &sdpa::plan_scores_js);
  emscripten::function("runScores", &sdpa::run_scores_js);
  emscripten::function("runScoresBackward", &sdpa::run_scores_backward_js);
  emscripten::function("planSelfAttention", &sdpa::plan_self_attention_js);
  emscripten::function("checkSelfAttentionInput", &sdpa::check_self_attention_input_js);
  emscripten::function("checkSelfAttentionWeights", &sdpa::check_self_attention_weights_js);
  emscripten::function("planMultihead", &sdpa::plan_multihead_js);
  emscripten::function("checkMultiheadInputs", &sdpa::check_multihead_inputs_js);
  emscripten::class_<sdpa::WebGpuAttention>("WebGpuAttention")
      .constructor<val, val>()
      .function("run", &sdpa::webgpu_run_js)
      .function("trace", &sdpa::webgpu_trace_js)
      .function("traceLayout", &sdpa::webgpu_trace_layout_js)
      .function("finish", &sdpa::WebGpuAttention::finish)
      .function("release", &sdpa::WebGpuAttention::release)
      .function("abandon", &sdpa::WebGpuAttention::abandon)
      .function("writeFloat16", &sdpa::WebGpuAttention::write_float16)
      .function("info", &sdpa::WebGpuAttention::info);
  emscripten::function("maxThreads", &sdpa::max_threads);
  emscripten::function("setMaxThreads", &sdpa::set_max_threads);
}
