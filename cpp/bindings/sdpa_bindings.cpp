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

#include "core/dispatch.h"
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

val shape_to_js(const std::vector<int64_t>& shape) {
  val out = val::array();
  for (size_t i = 0; i < shape.size(); ++i) out.set(i, static_cast<double>(shape[i]));
  return out;
}

template <typename T = void>
T* address(const val& pointers, const char* name) {
  const val p = pointers[js(name)];
  if (p.isUndefined() || p.isNull()) return nullptr;
  return reinterpret_cast<T*>(static_cast<uintptr_t>(p.as<double>()));
}

val error_to_js(const Status& s) {
  if (s.ok()) return val::null();
  val e = val::object();
  e.set(js("name"), s.kind == ErrorKind::kType ? "TypeError" : "RangeError");
  e.set(js("message"), s.message);
  return e;
}

// request: { queryShape, keyShape, valueShape, maskKind: 'none'|'bool'|'additive', maskShape,
//            causal: 'none'|'top-left'|'bottom-right', scale?: number, enableGqa, returnWeights }
Status plan_from_js(const val& request, AttentionPlan* plan) {
  AttentionRequest r;
  r.query_shape = shape_of(request[js("queryShape")]);
  r.key_shape = shape_of(request[js("keyShape")]);
  r.value_shape = shape_of(request[js("valueShape")]);
  const val mask = request[js("maskKind")];
  r.mask_kind = mask.strictlyEquals(js("bool"))       ? MaskKind::kBool
                : mask.strictlyEquals(js("additive")) ? MaskKind::kAdditive
                                                      : MaskKind::kNone;
  r.mask_shape = shape_of(request[js("maskShape")]);
  const val causal = request[js("causal")];
  r.causal = causal.strictlyEquals(js("top-left"))       ? CausalAlignment::kTopLeft
             : causal.strictlyEquals(js("bottom-right")) ? CausalAlignment::kBottomRight
                                                         : CausalAlignment::kNone;
  const val scale = request[js("scale")];
  r.has_scale = !scale.isUndefined() && !scale.isNull();
  if (r.has_scale) r.scale = scale.as<double>();
  r.enable_gqa = request[js("enableGqa")].as<bool>();
  r.return_weights = request[js("returnWeights")].as<bool>();
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

AttentionInputs inputs_from(const val& pointers) {
  return {address<const float>(pointers, "query"), address<const float>(pointers, "key"),
          address<const float>(pointers, "value"), address<const void>(pointers, "mask")};
}

// Plans `request` with `make` and, when it is valid, runs body(plan); returns the planning error
// (or null), which is what every run binding reports to the TypeScript layer.
template <typename Plan, typename Body>
val run_planned(Status (*make)(const val&, Plan*), const val& request, Body&& body) {
  Plan plan;
  const Status s = make(request, &plan);
  if (s.ok()) body(plan);
  return error_to_js(s);
}

// -> { error, outputShape, weightsShape, workspaceBytes: { scalar, simd, reference64 } }
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
  workspace.set(js("reference64"), static_cast<double>(reference_workspace_bytes<double>(plan)));
  out.set(js("workspaceBytes"), workspace);
  return out;
}

// pointers: { query, key, value, mask?, output, weights?, lse?, workspace }
val run_attention_js(val request, std::string backend, val pointers) {
  return run_planned(plan_from_js, request, [&](const AttentionPlan& plan) {
    const Backend b = backend_named(backend);
    run_attention(b, plan, inputs_from(pointers), address<float>(pointers, "output"),
                  address<float>(pointers, "weights"), address(pointers, "workspace"),
                  threads_of(request, b, plan), address<float>(pointers, "lse"));
  });
}

// Every stage of the float32 reference, for the step-by-step explainer.
// pointers: inputs + { scores, scaledScores, maskedScores, weights, output, workspace }
val explain_attention_js(val request, val pointers) {
  return run_planned(plan_from_js, request, [&](const AttentionPlan& plan) {
    ReferenceOutputs<float> out;
    out.output = address<float>(pointers, "output");
    out.weights = address<float>(pointers, "weights");
    out.scores = address<float>(pointers, "scores");
    out.scaled_scores = address<float>(pointers, "scaledScores");
    out.masked_scores = address<float>(pointers, "maskedScores");
    attention_reference<float>(plan, inputs_from(pointers), out, address<float>(pointers, "workspace"));
  });
}

// The float64 oracle. pointers: inputs + { output, weights, workspace } (double buffers).
val reference_attention64_js(val request, val pointers) {
  return run_planned(plan_from_js, request, [&](const AttentionPlan& plan) {
    ReferenceOutputs<double> out;
    out.output = address<double>(pointers, "output");
    out.weights = address<double>(pointers, "weights");
    out.lse = address<double>(pointers, "lse");
    attention_reference<double>(plan, inputs_from(pointers), out, address<double>(pointers, "workspace"));
  });
}

// -> { error, outputShape }; with addresses given (a, b, output) also computes.
val matmul_js(val a_shape, val b_shape, val pointers) {
  MatmulPlan plan;
  const Status s = plan_matmul(shape_of(a_shape), shape_of(b_shape), &plan);
  val out = val::object();
  out.set(js("error"), error_to_js(s));
  if (!s.ok()) return out;
  out.set(js("outputShape"), shape_to_js(plan.output_shape));
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

// The WebGPU backend (cpp/webgpu/device.h): plans like runAttention, then submits.
// pointers: { query, key, value, mask?, output, weights? } -> { error } | { error: null, promise, job }
val webgpu_run_js(WebGpuAttention& gpu, val request, val pointers) {
  AttentionPlan plan;
  const Status s = plan_from_js(request, &plan);
  if (!s.ok()) {
    val out = val::object();
    out.set(js("error"), error_to_js(s));
    return out;
  }
  return gpu.run(plan, inputs_from(pointers), address<float>(pointers, "output"),
                 address<float>(pointers, "weights"));
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
  AttentionPlan plan;
  const Status s = backward_plan_from_js(request, backward, &plan);
  if (!s.ok()) return error_to_js(s);
  BackwardOutputs<float> out{address<float>(pointers, "dQuery"), address<float>(pointers, "dKey"),
                             address<float>(pointers, "dValue"), address<float>(pointers, "dMask")};
  run_attention_backward(backend_named(backend), plan, inputs_from(pointers),
                         address<const float>(pointers, "dOutput"), address<const float>(pointers, "output"),
                         address<const float>(pointers, "lse"), out, address(pointers, "workspace"));
  return val::null();
}

// The float64 analytic gradient. pointers: inputs + dOutput + double { dQuery, dKey, dValue, dMask?, workspace }
val reference_attention_backward64_js(val request, val backward, val pointers) {
  AttentionPlan plan;
  const Status s = backward_plan_from_js(request, backward, &plan);
  if (!s.ok()) return error_to_js(s);
  BackwardOutputs<double> out{address<double>(pointers, "dQuery"), address<double>(pointers, "dKey"),
                              address<double>(pointers, "dValue"), address<double>(pointers, "dMask")};
  attention_backward_reference<double>(plan, inputs_from(pointers), address<const float>(pointers, "dOutput"),
                                       out, address<double>(pointers, "workspace"));
  return val::null();
}

// -> error or null; with an output address, fills it with a [fanIn, fanOut] Xavier-uniform matrix.
val xavier_uniform_js(double fan_in, double fan_out, double seed, double offset, val pointers) {
  const Status s = plan_xavier(fan_in, fan_out, seed);
  if (s.ok() && !pointers.isUndefined()) {
    xavier_uniform(static_cast<int64_t>(fan_in), static_cast<int64_t>(fan_out), static_cast<uint32_t>(seed),
                   static_cast<uint64_t>(offset), address<float>(pointers, "output"));
  }
  return error_to_js(s);
}

// -> error or null; with addresses (x, output), applies inverted dropout to n elements.
val dropout_js(double n, double p, double seed, val pointers) {
  const Status s = plan_dropout(p, seed);
  if (s.ok() && !pointers.isUndefined()) {
    dropout(address<const float>(pointers, "x"), static_cast<int64_t>(n), p, static_cast<uint32_t>(seed),
            address<float>(pointers, "output"));
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

ScoreParams score_params_from(const val& pointers) {
  return {address<const float>(pointers, "w"), address<const float>(pointers, "w1"),
          address<const float>(pointers, "w2"), address<const float>(pointers, "v")};
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
  return run_planned(score_plan_from_js, request, [&](const ScorePlan& plan) {
    attention_scores<float>(plan, address<const float>(pointers, "query"), address<const float>(pointers, "key"),
                            score_params_from(pointers), address<float>(pointers, "scores"),
                            address<float>(pointers, "workspace"));
  });
}

// pointers: inputs + { dScores, dQuery, dKey, dW?, dW1?, dW2?, dV?, workspace }
val run_scores_backward_js(val request, val pointers) {
  return run_planned(score_plan_from_js, request, [&](const ScorePlan& plan) {
    ScoreGradients<float> g{address<float>(pointers, "dQuery"), address<float>(pointers, "dKey"),
                            address<float>(pointers, "dW"),     address<float>(pointers, "dW1"),
                            address<float>(pointers, "dW2"),    address<float>(pointers, "dV")};
    attention_scores_backward<float>(plan, address<const float>(pointers, "query"),
                                     address<const float>(pointers, "key"), score_params_from(pointers),
                                     address<const float>(pointers, "dScores"), g,
                                     address<float>(pointers, "workspace"));
  });
}

// ---- attention modules (validation only; web/src/modules.ts composes them) ------------------

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
  emscripten::function("referenceAttention64", &sdpa::reference_attention64_js);
  emscripten::function("matmul", &sdpa::matmul_js);
  emscripten::function("softmax", &sdpa::softmax_js);
  emscripten::function("heapBytesInUse", &sdpa::heap_bytes_in_use);
  emscripten::function("planAttentionBackward", &sdpa::plan_attention_backward_js);
  emscripten::function("runAttentionBackward", &sdpa::run_attention_backward_js);
  emscripten::function("referenceAttentionBackward64", &sdpa::reference_attention_backward64_js);
  emscripten::function("xavierUniform", &sdpa::xavier_uniform_js);
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
      .function("finish", &sdpa::WebGpuAttention::finish)
      .function("release", &sdpa::WebGpuAttention::release)
      .function("abandon", &sdpa::WebGpuAttention::abandon)
      .function("info", &sdpa::WebGpuAttention::info);
  emscripten::function("maxThreads", &sdpa::max_threads);
  emscripten::function("setMaxThreads", &sdpa::set_max_threads);
}
