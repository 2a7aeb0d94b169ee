// The one Embind file: the only code that knows Emscripten. It turns plain JS objects (shapes,
// option strings, heap addresses) into the core's types, and Status into { name, message } for
// the TypeScript layer (web/src/index.ts) to throw as TypeError/RangeError. Tensor data never
// crosses here as JS arrays: the TS layer copies it into the wasm heap and passes addresses.
#include <emscripten/bind.h>
#include <emscripten/val.h>
#include <malloc.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/attention_problem.h"
#include "core/attention_reference.h"
#include "core/backends.h"
#include "core/parallel.h"

using emscripten::val;

namespace sdpa {
namespace {

std::vector<int64_t> shape_of(const val& array) {
  std::vector<int64_t> shape;
  if (array.isUndefined() || array.isNull()) return shape;
  const auto n = array["length"].as<unsigned>();
  shape.reserve(n);
  for (unsigned i = 0; i < n; ++i) shape.push_back(static_cast<int64_t>(array[i].as<double>()));
  return shape;
}

val shape_to_js(const std::vector<int64_t>& shape) {
  val out = val::array();
  for (int64_t d : shape) out.call<void>("push", static_cast<double>(d));
  return out;
}

template <typename T = void>
T* address(const val& pointers, const char* name) {
  const val p = pointers[name];
  if (p.isUndefined() || p.isNull()) return nullptr;
  return reinterpret_cast<T*>(static_cast<uintptr_t>(p.as<double>()));
}

val error_to_js(const Status& s) {
  if (s.ok()) return val::null();
  val e = val::object();
  e.set("name", s.kind == ErrorKind::kType ? "TypeError" : "RangeError");
  e.set("message", s.message);
  return e;
}

// request: { queryShape, keyShape, valueShape, maskKind: 'none'|'bool'|'additive', maskShape,
//            causal: 'none'|'top-left'|'bottom-right', scale?: number, enableGqa, returnWeights }
Status plan_from_js(const val& request, AttentionPlan* plan) {
  AttentionRequest r;
  r.query_shape = shape_of(request["queryShape"]);
  r.key_shape = shape_of(request["keyShape"]);
  r.value_shape = shape_of(request["valueShape"]);
  const std::string mask = request["maskKind"].as<std::string>();
  r.mask_kind = mask == "bool" ? MaskKind::kBool : mask == "additive" ? MaskKind::kAdditive : MaskKind::kNone;
  r.mask_shape = shape_of(request["maskShape"]);
  const std::string causal = request["causal"].as<std::string>();
  r.causal = causal == "top-left"       ? CausalAlignment::kTopLeft
             : causal == "bottom-right" ? CausalAlignment::kBottomRight
                                        : CausalAlignment::kNone;
  const val scale = request["scale"];
  r.has_scale = !scale.isUndefined() && !scale.isNull();
  if (r.has_scale) r.scale = scale.as<double>();
  r.enable_gqa = request["enableGqa"].as<bool>();
  r.return_weights = request["returnWeights"].as<bool>();
  return plan_attention(r, plan);
}

Backend backend_named(const std::string& name) {
  return name == "scalar" ? Backend::kScalar : Backend::kSimd128;
}

// request.threads: threads asked for (absent: 1; 0: every one this module may use), resolved by
// the core's one selection point, threads_for().
int threads_of(const val& request, Backend backend) {
  const val t = request["threads"];
  return threads_for(backend, t.isUndefined() || t.isNull() ? 1 : t.as<int>());
}

AttentionInputs inputs_from(const val& pointers) {
  return {address<const float>(pointers, "query"), address<const float>(pointers, "key"),
          address<const float>(pointers, "value"), address<const void>(pointers, "mask")};
}

// -> { error, outputShape, weightsShape, workspaceBytes: { scalar, simd, reference64 } }
val plan_attention_js(val request) {
  AttentionPlan plan;
  const Status s = plan_from_js(request, &plan);
  val out = val::object();
  out.set("error", error_to_js(s));
  if (!s.ok()) return out;
  out.set("outputShape", shape_to_js(plan.output_shape));
  out.set("weightsShape", shape_to_js(plan.weights_shape));
  out.set("maskElements", static_cast<double>(plan.mask_elements));
  val workspace = val::object();
  workspace.set("scalar", static_cast<double>(workspace_bytes(Backend::kScalar, plan)));
  workspace.set("simd", static_cast<double>(workspace_bytes(Backend::kSimd128, plan,
                                                            threads_of(request, Backend::kSimd128))));
  workspace.set("reference64", static_cast<double>(reference_workspace_bytes<double>(plan)));
  out.set("workspaceBytes", workspace);
  return out;
}

// pointers: { query, key, value, mask?, output, weights?, workspace }
val run_attention_js(val request, std::string backend, val pointers) {
  AttentionPlan plan;
  const Status s = plan_from_js(request, &plan);
  if (!s.ok()) return error_to_js(s);
  const Backend b = backend_named(backend);
  run_attention(b, plan, inputs_from(pointers), address<float>(pointers, "output"),
                address<float>(pointers, "weights"), address(pointers, "workspace"),
                threads_of(request, b));
  return val::null();
}

// Every stage of the float32 reference, for the step-by-step explainer.
// pointers: inputs + { scores, scaledScores, maskedScores, weights, output, workspace }
val explain_attention_js(val request, val pointers) {
  AttentionPlan plan;
  const Status s = plan_from_js(request, &plan);
  if (!s.ok()) return error_to_js(s);
  ReferenceOutputs<float> out;
  out.output = address<float>(pointers, "output");
  out.weights = address<float>(pointers, "weights");
  out.scores = address<float>(pointers, "scores");
  out.scaled_scores = address<float>(pointers, "scaledScores");
  out.masked_scores = address<float>(pointers, "maskedScores");
  attention_reference<float>(plan, inputs_from(pointers), out, address<float>(pointers, "workspace"));
  return val::null();
}

// The float64 oracle. pointers: inputs + { output, weights, workspace } (double buffers).
val reference_attention64_js(val request, val pointers) {
  AttentionPlan plan;
  const Status s = plan_from_js(request, &plan);
  if (!s.ok()) return error_to_js(s);
  ReferenceOutputs<double> out;
  out.output = address<double>(pointers, "output");
  out.weights = address<double>(pointers, "weights");
  attention_reference<double>(plan, inputs_from(pointers), out, address<double>(pointers, "workspace"));
  return val::null();
}

// -> { error, outputShape }; with addresses given (a, b, output) also computes.
val matmul_js(val a_shape, val b_shape, val pointers) {
  MatmulPlan plan;
  const Status s = plan_matmul(shape_of(a_shape), shape_of(b_shape), &plan);
  val out = val::object();
  out.set("error", error_to_js(s));
  if (!s.ok()) return out;
  out.set("outputShape", shape_to_js(plan.output_shape));
  if (!pointers.isUndefined()) {
    matmul_reference(plan, address<const float>(pointers, "a"), address<const float>(pointers, "b"),
                     address<float>(pointers, "output"));
  }
  return out;
}

// -> error or null; with addresses given (x, output) also computes.
val softmax_js(val shape, double temperature, val pointers) {
  SoftmaxPlan plan;
  const Status s = plan_softmax(shape_of(shape), temperature, &plan);
  if (s.ok() && !pointers.isUndefined()) {
    softmax_rows(address<const float>(pointers, "x"), plan.rows, plan.cols, plan.temperature,
                 address<float>(pointers, "output"));
  }
  return error_to_js(s);
}

// Bytes malloc has handed out and not yet taken back: the leak tests' baseline.
double heap_bytes_in_use() { return static_cast<double>(mallinfo().uordblks); }

}  // namespace
}  // namespace sdpa

EMSCRIPTEN_BINDINGS(sdpa) {
  emscripten::function("planAttention", &sdpa::plan_attention_js);
  emscripten::function("runAttention", &sdpa::run_attention_js);
  emscripten::function("explainAttention", &sdpa::explain_attention_js);
  emscripten::function("referenceAttention64", &sdpa::reference_attention64_js);
  emscripten::function("matmul", &sdpa::matmul_js);
  emscripten::function("softmax", &sdpa::softmax_js);
  emscripten::function("heapBytesInUse", &sdpa::heap_bytes_in_use);
  emscripten::function("maxThreads", &sdpa::max_threads);
  emscripten::function("setMaxThreads", &sdpa::set_max_threads);
}
