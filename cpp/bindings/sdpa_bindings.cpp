// The one Embind file: with the WebGPU device glue (cpp/webgpu/device.cpp), the only code that
// knows Emscripten. An attention call crosses once: the caller's options object (read here as
// attention_options.def declares) and the call record (call_record.h: the tensors' heap addresses
// and shapes) go in; the core plans, allocates its results and workspace, runs, and writes where
// the results are into the record. Errors go back as { name, message, ... } for the TypeScript
// layer (web/src/core-call.ts) to throw as TypeError/RangeError. Tensor data never crosses here as
// JS arrays: the TypeScript layer copies it into the wasm heap. The building blocks (matmul,
// softmax, PRNG, score functions) take pointer bags of heap addresses.
#include <emscripten/bind.h>
#include <emscripten/val.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bindings/call_record.h"
#include "core/problem.h"
#include "core/reference.h"
#include "cpu/attention_f32_simd128.h"
#include "cpu/float16_convert_simd128.h"
#include "cpu/quantized_rows_simd128.h"
#include "cpu/thread_pool.h"
#include "dispatch/dispatch.h"
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


// ---- attention calls: options (attention_options.def) and the call record (call_record.h) ----

// The calls an option belongs to (attention_options.def).
enum Calls : unsigned { kForward = 1, kBackward = 2, kTrace = 4, kModules = 8 };

// What one call's options say: the core's request, and what the bindings act on themselves.
struct CallOptions {
  AttentionRequest request;
  bool output_on_gpu = false;
  std::optional<ElementType> output_type;  // absent: the query's
  bool want_d_mask = false;
  std::optional<double> trace_batch, trace_head, trace_row;
};

// An error for the TypeScript layer (web/src/core-call.ts), which fills in the placeholders of
// its message: {where} the public call, {got} a description of `value`, {value} String(value),
// {closest} "; did you mean '…'?" when `given` is close to one of `known`. So describing a value
// and finding the closest name are written once, in TypeScript.
struct CallError {
  Status status;
  val value = val::undefined();
  val given = val::undefined();
  std::vector<std::string> known;

  bool fail(ErrorKind kind, std::string message, const val& got = val::undefined()) {
    status = kind == ErrorKind::kType ? Status::TypeError(std::move(message)) : Status::RangeError(std::move(message));
    value = got;
    return false;
  }
  bool fail(const Status& s) {
    status = s;
    return s.ok();
  }
  val to_js() const {
    if (status.ok()) return val::null();
    val e = error_to_js(status);
    if (!value.isUndefined()) e.set(js("value"), value);
    if (!given.isUndefined()) {
      e.set(js("given"), given);
      val names = val::array();
      for (size_t i = 0; i < known.size(); ++i) names.set(i, known[i]);
      e.set(js("known"), names);
    }
    return e;
  }
};

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

// Checks the keys of `object` (options.window, options.isCausal) against `known`.
bool check_names(const val& object, const char* where, std::vector<std::string> known, CallError& e) {
  static const val object_class = val::global("Object");
  const val keys = object_class.call<val>("keys", object);
  const auto n = keys[js("length")].as<unsigned>();
  for (unsigned i = 0; i < n; ++i) {
    const std::string name = keys[i].as<std::string>();
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    e.given = keys[i];
    e.known = std::move(known);
    return e.fail(ErrorKind::kType, "unknown option '" + name + "' of " + where + "{closest} (known: " + joined(e.known) + ")");
  }
  return true;
}

bool is_object(const val& v) {
  return v.typeOf().strictlyEquals(js("object")) && !v.isNull();
}

// ---- the option readers (read_<reader> of attention_options.def); undefined never reaches them.

bool read_Tensor(const val&, const char*, CallError&) { return true; }
bool read_Destination(const val&, const char*, CallError&) { return true; }

bool read_Boolean(const val& v, const char* name, CallError& e, bool& out) {
  if (!v.isTrue() && !v.isFalse()) return e.fail(ErrorKind::kType, std::string(name) + " must be a boolean; got {got}", v);
  out = v.isTrue();
  return true;
}

bool read_Number(const val& v, const char* name, CallError& e, double& out) {
  if (!v.isNumber()) return e.fail(ErrorKind::kType, std::string(name) + " must be a number; got {got}", v);
  out = v.as<double>();
  return true;
}

bool read_OptionalNumber(const val& v, const char* name, CallError& e, bool& present, double& out) {
  present = !v.isNull();
  return !present || read_Number(v, name, e, out);
}

bool read_Index(const val& v, const char* name, CallError& e, std::optional<double>& out) {
  double x = 0;
  if (!read_Number(v, name, e, x)) return false;
  out = x;
  return true;
}

enum ArrayType { kInt32Array, kFloat32Array };
bool read_NumberArray(const val& v, const char* name, CallError& e, const char* expected, ArrayType type,
                      bool& present, std::vector<double>& out) {
  present = !v.isNull();
  if (!present) return true;
  static const val int32_array = val::global("Int32Array"), float32_array = val::global("Float32Array");
  if (!v.instanceof(type == kInt32Array ? int32_array : float32_array)) {
    return e.fail(ErrorKind::kType, std::string(name) + " must be " + expected + "; got {got}", v);
  }
  out = emscripten::convertJSArrayToNumberVector<double>(v);
  return true;
}

bool read_Causal(const val& v, const char*, CallError& e, AttentionRequest& r) {
  if (v.isFalse()) return true;
  if (v.isTrue() || v.strictlyEquals(js("top-left"))) {
    r.causal = CausalAlignment::kTopLeft;
    return true;
  }
  if (v.strictlyEquals(js("bottom-right"))) {
    r.causal = CausalAlignment::kBottomRight;
    return true;
  }
  static const val array_buffer = val::global("ArrayBuffer");
  if (is_object(v) && !v.isArray() && !array_buffer.call<bool>("isView", v)) {
    if (!check_names(v, "isCausal", {"offset"}, e)) return false;
    const val offset = v[js("offset")];
    if (!offset.isUndefined()) {
      if (!offset.isNumber()) return e.fail(ErrorKind::kType, "isCausal.offset must be an integer number; got {got}", offset);
      const double x = offset.as<double>();
      if (x != std::floor(x) || !std::isfinite(x)) return e.fail(ErrorKind::kRange, "isCausal.offset must be an integer; got {value}", offset);
      // Beyond ±2^53 an offset acts as ±2^53 (past -Lq no row sees a key, past Lk every row sees all).
      const double bound = static_cast<double>(kMaxCausalOffset);
      r.causal = CausalAlignment::kOffset;
      r.causal_offset = static_cast<int64_t>(std::clamp(x, -bound, bound));
      return true;
    }
  }
  return e.fail(ErrorKind::kType, "isCausal must be false, true, 'top-left', 'bottom-right' or { offset: n }; got {got}", v);
}

bool read_Window(const val& v, const char*, CallError& e, AttentionRequest& r) {
  if (v.isNull()) return true;
  if (!is_object(v) || v.isArray()) return e.fail(ErrorKind::kType, "window must be { left?: n, right?: n }; got {got}", v);
  if (!check_names(v, "window", {"left", "right"}, e)) return false;
  for (auto [side, present, value] : {std::tuple{"left", &r.has_window_left, &r.window_left},
                                      std::tuple{"right", &r.has_window_right, &r.window_right}}) {
    const val n = v[js(side)];
    if (n.isUndefined()) continue;
    if (!read_Number(n, (std::string("window.") + side).c_str(), e, *value)) return false;
    *present = true;
  }
  return true;
}

bool read_ScoreStage(const val& v, const char* name, CallError& e, ScoreStage& out) {
  if (named(v, {{"scaled", ScoreStage::kScaled}, {"softcapped", ScoreStage::kSoftcapped}, {"masked", ScoreStage::kMasked}}, &out)) {
    return true;
  }
  return e.fail(ErrorKind::kType, std::string(name) + " must be 'scaled', 'softcapped' or 'masked'; got {got}", v);
}

bool read_OutputDtype(const val& v, const char* name, CallError& e, std::optional<ElementType>& out) {
  if (v.isNull()) return true;
  ElementType type;
  if (named(v, {{"float32", ElementType::kFloat32}, {"float16", ElementType::kFloat16}}, &type)) {
    out = type;
    return true;
  }
  if (v.isString()) {
    e.given = v;
    e.known = {"float32", "float16"};
  }
  return e.fail(ErrorKind::kType, std::string(name) + " must be 'float32' or 'float16'{closest}; got {got}", v);
}

bool read_OutputLocation(const val& v, const char* name, CallError& e, bool& on_gpu) {
  if (v.isNull() || v.strictlyEquals(js("cpu"))) return true;
  if (v.strictlyEquals(js("gpu"))) {
    on_gpu = true;
    return true;
  }
  return e.fail(ErrorKind::kType, std::string(name) + " must be 'cpu' or 'gpu'; got {got}", v);
}

// One option: its name, the calls that take it and its reader (attention_options.def); the
// TypeScript layer reads the values of Tensor and Destination options itself.
struct OptionEntry {
  const char* name;
  unsigned calls;
  bool (*read)(const val& value, CallOptions& o, CallError& e);
  bool read_here;
};

constexpr bool same_name(const char* a, const char* b) { return *a == *b && (*a == '\0' || same_name(a + 1, b + 1)); }
constexpr bool reads_here(const char* reader) { return !same_name(reader, "Tensor") && !same_name(reader, "Destination"); }

const OptionEntry kOptions[] = {
#define SDPA_OPTION(name, calls, reader, ...) \
  {#name, calls, [](const val& v, CallOptions& o, CallError& e) { \
     (void)o;                                                        \
     return read_##reader(v, #name, e, ##__VA_ARGS__);               \
   },                                                                \
   reads_here(#reader)},
#include "bindings/attention_options.def"
#undef SDPA_OPTION
};

// Reads `options` (undefined, or the caller's options object) for a call of kind `call`. Every
// key must be an option of that call; undefined values count as absent.
bool read_options(const val& options, unsigned call, CallOptions* o, CallError& e) {
  if (options.isUndefined()) return true;
  if (!is_object(options)) return e.fail(ErrorKind::kType, "options must be an object; got {got}", options);
  static const val object_class = val::global("Object");
  const val keys = object_class.call<val>("keys", options);
  const auto n = keys[js("length")].as<unsigned>();
  for (unsigned i = 0; i < n; ++i) {
    const val key = keys[i];
    const std::string name = key.as<std::string>();
    const OptionEntry* entry = nullptr;
    for (const OptionEntry& option : kOptions) {
      if ((option.calls & call) && name == option.name) entry = &option;
    }
    if (entry == nullptr) {
      e.given = key;
      for (const OptionEntry& option : kOptions) {
        if (option.calls & call) e.known.push_back(option.name);
      }
      return e.fail(ErrorKind::kType, "unknown option '" + name + "' of {where}{closest} (known: " + joined(e.known) + ")");
    }
    if (!entry->read_here) continue;
    const val value = options[key];
    if (!value.isUndefined() && !entry->read(value, *o, e)) return false;
  }
  return true;
}

// The option names of the calls in `calls` (the TypeScript layer's lists of known names).
val option_names_js(unsigned calls) {
  val names = val::array();
  unsigned n = 0;
  for (const OptionEntry& option : kOptions) {
    if (option.calls & calls) names.set(n++, std::string(option.name));
  }
  return names;
}

// The call record (one per module; the main thread makes every call).
CallRecord& call_record() {
  static CallRecord record;
  return record;
}

bool slot_present(const TensorSlot& slot) { return static_cast<SlotType>(slot.type) != SlotType::kAbsent; }

template <typename T>
T* slot_address(const TensorSlot& slot) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(slot.address));
}

bool slot_shape(const TensorSlot& slot, const char* name, std::vector<int64_t>* shape, CallError& e) {
  const auto rank = static_cast<int>(slot.rank);
  if (rank > kMaxSlotRank) {
    return e.fail(ErrorKind::kRange, std::string(name) + " has rank " + std::to_string(rank) + "; at most " +
                                         std::to_string(kMaxSlotRank) + " dimensions are taken");
  }
  shape->assign(slot.dims, slot.dims + rank);
  return true;
}

ElementType slot_element_type(const TensorSlot& slot) {
  switch (static_cast<SlotType>(slot.type)) {
    case SlotType::kFloat16: return ElementType::kFloat16;
    case SlotType::kInt8: return ElementType::kInt8;
    case SlotType::kInt4: return ElementType::kInt4;
    default: return ElementType::kFloat32;
  }
}

// Reads the options and the record's tensors and plans the call.
bool plan_call(const val& options, unsigned call, CallOptions* o, AttentionPlan* plan, CallError& e) {
  if (!read_options(options, call, o, e)) return false;
  const CallRecord& record = call_record();
  AttentionRequest& r = o->request;
  if (!slot_shape(record.query, "query", &r.query_shape, e) || !slot_shape(record.key, "key", &r.key_shape, e) ||
      !slot_shape(record.value, "value", &r.value_shape, e)) {
    return false;
  }
  r.query_type = slot_element_type(record.query);
  r.key_type = slot_element_type(record.key);
  r.value_type = slot_element_type(record.value);
  if (slot_present(record.attnMask)) {
    r.mask_kind = static_cast<SlotType>(record.attnMask.type) == SlotType::kUint8 ? MaskKind::kBool : MaskKind::kAdditive;
    if (!slot_shape(record.attnMask, "attnMask", &r.mask_shape, e)) return false;
  }
  if (slot_present(record.queryDocuments) != slot_present(record.keyDocuments)) {
    return e.fail(ErrorKind::kType,
                  "queryDocuments and keyDocuments go together: pass both (for self-attention, the same ids twice) or neither");
  }
  r.has_documents = slot_present(record.queryDocuments);
  if (r.has_documents && (!slot_shape(record.queryDocuments, "queryDocuments", &r.query_documents_shape, e) ||
                          !slot_shape(record.keyDocuments, "keyDocuments", &r.key_documents_shape, e))) {
    return false;
  }
  r.key_head_stride = static_cast<int64_t>(record.key_head_stride);
  r.value_head_stride = static_cast<int64_t>(record.value_head_stride);
  r.key_value_finite = record.key_value_finite != 0;
  return e.fail(plan_attention(r, plan));
}

// The inputs the record points to.
AttentionInputs record_inputs(const AttentionPlan& plan) {
  const CallRecord& record = call_record();
  AttentionInputs in;
  const auto input = [](const TensorSlot& slot, ElementType type, const float** f32, const uint16_t** f16,
                        const uint8_t** quantized) {
    if (type == ElementType::kFloat16) *f16 = slot_address<const uint16_t>(slot);
    else if (type == ElementType::kFloat32) *f32 = slot_address<const float>(slot);
    else *quantized = slot_address<const uint8_t>(slot);
  };
  if (plan.query_type == ElementType::kFloat16) in.query_f16 = slot_address<const uint16_t>(record.query);
  else in.query = slot_address<const float>(record.query);  // planning rejects a quantized query
  input(record.key, plan.key_type, &in.key, &in.key_f16, &in.key_quantized);
  input(record.value, plan.value_type, &in.value, &in.value_f16, &in.value_quantized);
  in.mask = slot_address<const void>(record.attnMask);
  in.query_documents = slot_address<const int32_t>(record.queryDocuments);
  in.key_documents = slot_address<const int32_t>(record.keyDocuments);
  in.arrival.record = reinterpret_cast<InputArrivalRecord*>(static_cast<uintptr_t>(record.input_arrival));
  return in;
}

std::string format_bytes(uint64_t bytes) {
  char text[48];
  if (bytes >= (uint64_t{1} << 20)) std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  else std::snprintf(text, sizeof text, "%llu bytes", static_cast<unsigned long long>(bytes));
  return text;
}

constexpr uint64_t kAddressSpaceBytes = uint64_t{1} << 32;

// The results of one call, laid out one after another (16-byte aligned) in one block that the
// TypeScript layer frees once it has copied them out, beside a workspace freed here.
class Results {
 public:
  // Reserves `bytes` for the result whose record slot is `slot`.
  void add(double* slot, uint64_t bytes) {
    parts_[count_++] = {slot, total_};
    total_ += (bytes + 15) / 16 * 16;
  }
  void add_workspace(uint64_t bytes) { workspace_bytes_ = bytes; }

  // Allocates the block and the workspace, or says why not; the record's slots then hold the
  // results' addresses.
  bool allocate(CallError& e) {
    const uint64_t bytes = total_ + workspace_bytes_;
    if (bytes >= kAddressSpaceBytes) {
      return e.fail(ErrorKind::kRange, "{where} needs " + format_bytes(bytes) +
                                           " of WebAssembly memory, more than the 4 GiB a wasm32 module can address");
    }
    // At least 16 bytes when any result is asked for, so each has an address (empty ones too).
    block_ = count_ ? std::malloc(std::max<uint64_t>(total_, 16)) : nullptr;
    workspace_ = workspace_bytes_ ? std::malloc(workspace_bytes_) : nullptr;
    if ((count_ && !block_) || (workspace_bytes_ && !workspace_)) {
      std::free(block_);
      std::free(workspace_);
      block_ = workspace_ = nullptr;
      return e.fail(ErrorKind::kRange, "out of WebAssembly memory: {where} needs " + format_bytes(bytes) + " more");
    }
    call_record().results = static_cast<double>(reinterpret_cast<uintptr_t>(block_));
    for (int i = 0; i < count_; ++i) {
      *parts_[i].slot = static_cast<double>(reinterpret_cast<uintptr_t>(static_cast<char*>(block_) + parts_[i].offset));
    }
    return true;
  }
  void* workspace() const { return workspace_; }
  ~Results() { std::free(workspace_); }

 private:
  struct Part {
    double* slot;
    uint64_t offset;
  };
  Part parts_[16] = {};
  int count_ = 0;
  uint64_t total_ = 0, workspace_bytes_ = 0;
  void* block_ = nullptr;
  void* workspace_ = nullptr;
};

template <typename T>
T* result(double slot) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(slot));
}

// Clears the record's results before a call (so nothing stale is read after an error).
CallRecord& fresh_results() {
  CallRecord& record = call_record();
  record.results = 0;
#define SDPA_CLEAR_RESULT(name) record.name##_result = 0;
  SDPA_CALL_RESULTS(SDPA_CLEAR_RESULT)
#undef SDPA_CLEAR_RESULT
  return record;
}

// The output and weights shapes into the record.
void record_shapes(const AttentionPlan& plan) {
  CallRecord& record = call_record();
  record.output_rank = static_cast<double>(plan.output_shape.size());
  std::copy(plan.output_shape.begin(), plan.output_shape.end(), record.output_dims);
  record.weights_rank = static_cast<double>(plan.weights_shape.size());
  std::copy(plan.weights_shape.begin(), plan.weights_shape.end(), record.weights_dims);
}

constexpr uint64_t kFloat = sizeof(float);

// The forward on a CPU backend (0 'scalar', 1 'simd'): plans, allocates its results and
// workspace, runs on the threads dispatch chooses. while_helpers_run: a JS function (that must
// not throw) the calling thread runs while helper threads run the kernel, or before it on one
// thread (cpu/thread_pool.h OverlappedWork), or undefined; with streamed inputs (the record's
// input_arrival) it is what copies them in.
val run_attention_js(val options, int backend_index, val while_helpers_run) {
  CallError e;
  CallOptions o;
  AttentionPlan plan;
  CallRecord& record = fresh_results();
  const Backend backend = backend_index == 0 ? Backend::kScalar : Backend::kSimd128;
  if (!plan_call(options, kForward, &o, &plan, e)) return e.to_js();
  if (o.output_on_gpu) {
    e.fail(ErrorKind::kType, std::string("outputLocation 'gpu' needs backend 'webgpu'; this instance uses '") +
                                 (backend == Backend::kScalar ? "scalar" : "simd") + "'");
    return e.to_js();
  }
  const AttentionInputs in = record_inputs(plan);
  if (in.arrival.streamed() && while_helpers_run.isUndefined()) {
    e.fail(Status::TypeError("sdpa-web internal error: streamed inputs need the function that copies them"));
    return e.to_js();
  }
  const int threads = threads_for(backend, Pass::kForward, plan, static_cast<int>(record.threads), max_threads());
  const auto scores_elements = plan.return_scores != ScoreStage::kNone ? plan.weights_elements() : 0;
  Results results;
  results.add(&record.output_result, kFloat * plan.output_elements());
  if (plan.return_weights) results.add(&record.weights_result, kFloat * plan.weights_elements());
  if (plan.return_lse) results.add(&record.logSumExp_result, kFloat * plan.B * plan.Hq * plan.Lq);
  if (scores_elements) results.add(&record.scores_result, kFloat * scores_elements);
  results.add_workspace(workspace_bytes(backend, plan, threads));
  if (!results.allocate(e)) return e.to_js();
  record_shapes(plan);
  record.output_float16 = o.output_type.value_or(plan.query_type) == ElementType::kFloat16;
  std::optional<OverlappedWork> overlapped;
  if (!while_helpers_run.isUndefined()) {
    overlapped.emplace([](void* function) { (*static_cast<val*>(function))(); }, &while_helpers_run);
  }
  run_attention(backend, plan, in, result<float>(record.output_result), result<float>(record.weights_result),
                results.workspace(), threads, result<float>(record.logSumExp_result), result<float>(record.scores_result));
  return val::null();
}

// The bytes of workspace the forward of a call (the record's tensors, `options`) takes on
// backend 0 'scalar' or 1 'simd' with the threads dispatch chooses: for the bench's diagnostics.
val forward_workspace_bytes_js(val options, int backend_index) {
  CallError e;
  CallOptions o;
  AttentionPlan plan;
  if (!plan_call(options, kForward, &o, &plan, e)) return e.to_js();
  const Backend backend = backend_index == 0 ? Backend::kScalar : Backend::kSimd128;
  const int threads = threads_for(backend, Pass::kForward, plan, static_cast<int>(call_record().threads), max_threads());
  return val(static_cast<double>(workspace_bytes(backend, plan, threads)));
}

// The traced row's batch, head and row: each an integer in range, else a RangeError naming it.
bool check_traced_row(const AttentionPlan& plan, const CallOptions& o, CallError& e) {
  if (!o.trace_row) return e.fail(ErrorKind::kType, "row must be a number; got {got}", val::undefined());
  for (auto [name, value, size] : {std::tuple<const char*, double, int64_t>{"batch", o.trace_batch.value_or(0), plan.B},
                                   {"head", o.trace_head.value_or(0), plan.Hq},
                                   {"row", *o.trace_row, plan.Lq}}) {
    if (!(value >= 0 && value < static_cast<double>(size)) || value != std::floor(value)) {
      char got[32];
      std::snprintf(got, sizeof got, "%.17g", value);
      return e.fail(ErrorKind::kRange, std::string(name) + " must be an integer in [0, " + std::to_string(size) + "); got " + got);
    }
  }
  return true;
}

// The SIMD kernel's online softmax of one query row (options batch, head, row), traced on one
// thread: results output, trace ([tiles, 3 + Ev] floats; record.steps of them written) and
// visited ([blocks, tiles] bytes).
val trace_online_softmax_js(val options) {
  CallError e;
  CallOptions o;
  AttentionPlan plan;
  CallRecord& record = fresh_results();
  if (!plan_call(options, kTrace, &o, &plan, e)) return e.to_js();
  if (!e.fail(check_float32_inputs(plan, "traceOnlineSoftmax")) || !check_traced_row(plan, o, e)) return e.to_js();
  const int64_t tiles = (plan.Lk + kSimd128TileKeys - 1) / kSimd128TileKeys;
  const int64_t blocks = (plan.Lq + kSimd128BlockQueries - 1) / kSimd128BlockQueries;
  Results results;
  results.add(&record.output_result, kFloat * plan.output_elements());
  results.add(&record.trace_result, kFloat * tiles * (3 + plan.Ev));
  results.add(&record.visited_result, static_cast<uint64_t>(blocks * tiles));
  results.add_workspace(trace_workspace_bytes(plan));
  if (!results.allocate(e)) return e.to_js();
  record_shapes(plan);
  auto* visited = result<uint8_t>(record.visited_result);
  std::fill(visited, visited + blocks * tiles, 0);
  SoftmaxTrace trace{static_cast<int64_t>(o.trace_batch.value_or(0)), static_cast<int64_t>(o.trace_head.value_or(0)),
                     static_cast<int64_t>(*o.trace_row), result<float>(record.trace_result), 0, visited};
  trace_online_softmax(plan, record_inputs(plan), result<float>(record.output_result), results.workspace(), &trace);
  record.steps = static_cast<double>(trace.steps_written);
  record.trace_tile_keys = kSimd128TileKeys;
  record.trace_block_rows = kSimd128BlockQueries;
  return val::null();
}

// A forward call of the reference (explain, or referenceAttention): float32 inputs, new
// CPU arrays of its own precision. The options that say where scaledDotProductAttention's output
// goes or in which dtype, and on explain (which returns its fixed stages) returnScores and
// returnLogSumExp, are TypeErrors here, not ignored.
bool plan_reference_call(const val& options, bool explain, CallOptions* o, AttentionPlan* plan, CallError& e) {
  // explain takes float32 tensors; the float64 reference also reads a KV cache of any dtype (dense_inputs).
  if (!plan_call(options, kForward, o, plan, e) || (explain && !e.fail(check_float32_inputs(*plan, "explain")))) {
    return false;
  }
  if (o->output_on_gpu) {
    return e.fail(ErrorKind::kType,
                  "{where} returns CPU arrays: outputLocation must be 'cpu' (or absent); 'gpu' is for scaledDotProductAttention on backend 'webgpu'");
  }
  const val out = options.isUndefined() || options.isNull() ? val::undefined() : options[js("out")];
  if (!out.isUndefined() && !out.isNull()) {
    return e.fail(ErrorKind::kType, "{where} returns new arrays: out is for scaledDotProductAttention");
  }
  if (o->output_type) {
    return e.fail(ErrorKind::kType, std::string("{where} returns ") + (explain ? "float32" : "float64") +
                                        " arrays: outputDtype is for scaledDotProductAttention");
  }
  if (explain && (plan->return_lse || plan->return_scores != ScoreStage::kNone)) {
    return e.fail(ErrorKind::kType,
                  std::string("explain returns the stages scores, scaledScores, maskedScores, weights and output: ") +
                      (plan->return_lse ? "returnLogSumExp" : "returnScores") + " is for scaledDotProductAttention and referenceAttention");
  }
  return true;
}

// Every stage of the float32 reference, for the step-by-step explainer: results scores (Q·Kᵀ),
// scaledScores, maskedScores, weights and output.
val explain_attention_js(val options) {
  CallError e;
  CallOptions o;
  AttentionPlan plan;
  CallRecord& record = fresh_results();
  if (!plan_reference_call(options, true, &o, &plan, e)) return e.to_js();
  const uint64_t n = kFloat * plan.weights_elements();
  Results results;
  for (double* slot : {&record.scores_result, &record.scaledScores_result, &record.maskedScores_result, &record.weights_result}) {
    results.add(slot, n);
  }
  results.add(&record.output_result, kFloat * plan.output_elements());
  results.add_workspace(reference_workspace_bytes<float>(plan));
  if (!results.allocate(e)) return e.to_js();
  record_shapes(plan);
  ReferenceOutputs<float> out;
  out.output = result<float>(record.output_result);
  out.weights = result<float>(record.weights_result);
  out.scores = result<float>(record.scores_result);
  out.scaled_scores = result<float>(record.scaledScores_result);
  out.masked_scores = result<float>(record.maskedScores_result);
  attention_reference<float>(plan, record_inputs(plan), out, static_cast<float*>(results.workspace()));
  return val::null();
}

// The float64 oracle: results output, weights, (with returnScores) scores and (with
// returnLogSumExp) logSumExp, as doubles.
val reference_attention64_js(val options) {
  CallError e;
  CallOptions o;
  AttentionPlan plan;
  CallRecord& record = fresh_results();
  if (!plan_reference_call(options, false, &o, &plan, e)) return e.to_js();
  constexpr uint64_t kDouble = sizeof(double);
  Results results;
  results.add(&record.output_result, kDouble * plan.output_elements());
  results.add(&record.weights_result, kDouble * plan.weights_elements());
  if (plan.return_scores != ScoreStage::kNone) results.add(&record.scores_result, kDouble * plan.weights_elements());
  if (plan.return_lse) results.add(&record.logSumExp_result, kDouble * plan.B * plan.Hq * plan.Lq);
  // A KV cache's float16 or int8/int4 keys and values (and the query as the scores on int8/int4
  // take it) as dense float32 first, then the reference's own scratch.
  const uint64_t dense_bytes = dense_inputs_bytes(plan);
  results.add_workspace(dense_bytes + reference_workspace_bytes<double>(plan));
  if (!results.allocate(e)) return e.to_js();
  record_shapes(plan);
  AttentionInputs in;
  const AttentionPlan dense_plan = dense_inputs(plan, record_inputs(plan), results.workspace(), &in);
  ReferenceOutputs<double> out;
  out.output = result<double>(record.output_result);
  out.weights = result<double>(record.weights_result);
  out.lse = result<double>(record.logSumExp_result);
  auto* scores = result<double>(record.scores_result);
  switch (plan.return_scores) {
    case ScoreStage::kScaled: out.scaled_scores = scores; break;
    case ScoreStage::kSoftcapped: out.softcapped_scores = scores; break;
    case ScoreStage::kMasked: out.masked_scores = scores; break;
    case ScoreStage::kNone: break;
  }
  attention_reference<double>(dense_plan, in, out, reinterpret_cast<double*>(static_cast<char*>(results.workspace()) + dense_bytes));
  return val::null();
}

// The backward's plan: the forward's (returnWeights off) and the record's dOutput, output and
// logSumExp (the forward's, optional), checked together. float16_inputs: the backend widens
// float16 query/key/value itself (WebGPU); the CPU backward takes float32.
bool plan_backward_call(const val& options, CallOptions* o, AttentionPlan* plan, bool* has_forward, CallError& e,
                        bool float16_inputs = false) {
  if (!plan_call(options, kBackward, o, plan, e)) return false;
  const CallRecord& record = call_record();
  if (slot_present(record.output) != slot_present(record.logSumExp)) {
    return e.fail(ErrorKind::kType,
                  "output and logSumExp (from a forward call with returnLogSumExp: true) must be passed together, or neither");
  }
  BackwardRequest r;
  r.has_forward = slot_present(record.output);
  if (!slot_shape(record.dOutput, "dOutput", &r.d_output_shape, e) ||
      (r.has_forward && (!slot_shape(record.output, "output", &r.output_shape, e) ||
                         !slot_shape(record.logSumExp, "logSumExp", &r.lse_shape, e)))) {
    return false;
  }
  r.want_d_mask = o->want_d_mask;
  r.float16_inputs = float16_inputs;
  *has_forward = r.has_forward;
  return e.fail(check_backward_request(*plan, r));
}

// The gradients' results (in T): dQuery, dKey, dValue, dMask (with returnAttnMaskGrad), dSinks
// (with sinks).
template <typename T>
void add_gradients(Results& results, const AttentionPlan& plan, const CallOptions& o) {
  CallRecord& record = call_record();
  results.add(&record.dQuery_result, sizeof(T) * plan.query_elements());
  results.add(&record.dKey_result, sizeof(T) * plan.key_elements());
  results.add(&record.dValue_result, sizeof(T) * plan.value_elements());
  if (o.want_d_mask) results.add(&record.dMask_result, sizeof(T) * plan.mask_elements);
  if (!plan.sinks.empty()) results.add(&record.dSinks_result, sizeof(T) * plan.Hq);
}

template <typename T>
BackwardOutputs<T> gradients_in_record() {
  const CallRecord& record = call_record();
  return {result<T>(record.dQuery_result), result<T>(record.dKey_result), result<T>(record.dValue_result),
          result<T>(record.dMask_result), result<T>(record.dSinks_result)};
}

// The backward on a CPU backend (0 'scalar', 1 'simd').
val run_attention_backward_js(val options, int backend_index) {
  CallError e;
  CallOptions o;
  AttentionPlan plan;
  bool has_forward = false;
  CallRecord& record = fresh_results();
  const Backend backend = backend_index == 0 ? Backend::kScalar : Backend::kSimd128;
  if (!plan_backward_call(options, &o, &plan, &has_forward, e)) return e.to_js();
  if (o.output_on_gpu) {
    e.fail(ErrorKind::kType, std::string("outputLocation 'gpu' needs backend 'webgpu'; this instance uses '") +
                                 (backend == Backend::kScalar ? "scalar" : "simd") + "'");
    return e.to_js();
  }
  Results results;
  add_gradients<float>(results, plan, o);
  results.add_workspace(backward_workspace_bytes(backend, plan, has_forward));
  if (!results.allocate(e)) return e.to_js();
  run_attention_backward(backend, plan, record_inputs(plan), slot_address<const float>(record.dOutput),
                         has_forward ? slot_address<const float>(record.output) : nullptr,
                         has_forward ? slot_address<const float>(record.logSumExp) : nullptr,
                         gradients_in_record<float>(), results.workspace());
  return val::null();
}

// The float64 analytic gradients (the forward recomputed in float64).
val reference_attention_backward64_js(val options) {
  CallError e;
  CallOptions o;
  AttentionPlan plan;
  bool has_forward = false;
  fresh_results();
  if (!plan_backward_call(options, &o, &plan, &has_forward, e)) return e.to_js();
  if (o.output_on_gpu) {
    e.fail(ErrorKind::kType, "{where} returns CPU arrays: outputLocation must be 'cpu' (or absent)");
    return e.to_js();
  }
  Results results;
  add_gradients<double>(results, plan, o);
  results.add_workspace(backward_reference_workspace_bytes<double>(plan));
  if (!results.allocate(e)) return e.to_js();
  attention_backward_reference<double>(plan, record_inputs(plan), slot_address<const float>(call_record().dOutput),
                                       gradients_in_record<double>(), static_cast<double*>(results.workspace()));
  return val::null();
}

// Bytes malloc has handed out and not yet taken back: the leak tests' baseline.
double heap_bytes_in_use() { return static_cast<double>(mallinfo().uordblks); }

// KvCache.append on an int8/int4 cache (`int4`: which kind): the tensor at `tensor` holds
// `all_heads` heads of `max_length` rows of `dim` elements (core/kv_cache_format.h); rows
// [0, rows) of heads [0, heads) of the appended tensor at `source` (float32, or float16 bit
// patterns; row t of head h at (h·n + t)·dim elements) are quantized into rows first_row + t of
// heads first_head + h.
void quantize_kv_rows_js(bool int4, double tensor, double all_heads, double max_length, double dim, double source,
                         bool float16, double n, double first_head, double heads, double first_row, double rows) {
  const QuantizedLayout layout = quantized_layout(int4 ? KvQuant::kInt4 : KvQuant::kInt8, static_cast<int64_t>(all_heads),
                                                  static_cast<int64_t>(max_length), static_cast<int64_t>(dim));
  auto* target = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(tensor));
  const auto d = static_cast<int64_t>(dim), count = static_cast<int64_t>(rows);
  std::vector<float> widened(float16 ? static_cast<size_t>(count * d) : 0);
  for (int64_t h = 0; h < static_cast<int64_t>(heads); ++h) {
    const int64_t at = h * static_cast<int64_t>(n) * d;
    const float* head_rows = reinterpret_cast<const float*>(static_cast<uintptr_t>(source)) + at;
    if (float16) {
      widen_float16_simd128(reinterpret_cast<const uint16_t*>(static_cast<uintptr_t>(source)) + at, widened.data(), count * d);
      head_rows = widened.data();
    }
    store_quantized_rows_simd128(layout, target, static_cast<int64_t>(first_head) + h, static_cast<int64_t>(first_row), head_rows, count);
  }
}

// KvCache.append on a float16 cache, or of float16 rows to a float32 one: rows [0, rows) of heads
// [0, heads) of the appended tensor at `source` (float32, or float16 bit patterns: `from_float16`;
// row t of head h at (h·n + t)·dim elements) go to rows first_row + t of heads first_head + h of the
// cache tensor at `tensor` ([heads, max_length, dim], float16 or float32: `to_float16`), copied,
// rounded to float16 or widened. Returns whether a stored half is Inf or NaN.
bool store_kv_rows_js(bool to_float16, bool from_float16, double tensor, double max_length, double dim, double source,
                      double n, double first_head, double heads, double first_row, double rows) {
  const auto d = static_cast<int64_t>(dim), count = static_cast<int64_t>(rows) * d;
  const auto at = [](double address) { return reinterpret_cast<char*>(static_cast<uintptr_t>(address)); };
  const int64_t source_bytes = from_float16 ? 2 : 4, target_bytes = to_float16 ? 2 : 4;
  bool any_nonfinite = false;
  for (int64_t h = 0; h < static_cast<int64_t>(heads); ++h) {
    const char* from = at(source) + h * static_cast<int64_t>(n) * d * source_bytes;
    char* to = at(tensor) + ((static_cast<int64_t>(first_head) + h) * static_cast<int64_t>(max_length) + static_cast<int64_t>(first_row)) * d * target_bytes;
    if (to_float16 && from_float16) {
      std::memcpy(to, from, static_cast<size_t>(count) * 2);
      any_nonfinite |= float16_any_nonfinite(reinterpret_cast<const uint16_t*>(to), count);
    } else if (to_float16) {
      any_nonfinite |= round_to_float16_simd128(reinterpret_cast<const float*>(from), reinterpret_cast<uint16_t*>(to), count);
    } else if (from_float16) {
      widen_float16_simd128(reinterpret_cast<const uint16_t*>(from), reinterpret_cast<float*>(to), count);
    } else {
      std::memcpy(to, from, static_cast<size_t>(count) * 4);
    }
  }
  return any_nonfinite;
}

// { name: slot index } of the call record's float64 slots (call_record.h), and its address.
val call_record_layout_js() {
  val layout = val::object();
  const auto slot = [](const void* field) {
    return static_cast<double>((static_cast<const char*>(field) - reinterpret_cast<const char*>(&call_record())) / sizeof(double));
  };
  CallRecord& r = call_record();
  layout.set("address", static_cast<double>(reinterpret_cast<uintptr_t>(&r)));
  layout.set("size", static_cast<double>(sizeof(CallRecord) / sizeof(double)));
  layout.set("tensorSlot", static_cast<double>(sizeof(TensorSlot) / sizeof(double)));
  layout.set("maxRank", kMaxSlotRank);
  val tensors = val::object();
#define SDPA_TENSOR_LAYOUT(name) tensors.set(#name, slot(&r.name));
  SDPA_CALL_TENSORS(SDPA_TENSOR_LAYOUT)
#undef SDPA_TENSOR_LAYOUT
  layout.set("tensors", tensors);
  val results = val::object();
#define SDPA_RESULT_LAYOUT(name) results.set(#name, slot(&r.name##_result));
  SDPA_CALL_RESULTS(SDPA_RESULT_LAYOUT)
#undef SDPA_RESULT_LAYOUT
  layout.set("results", results);
  for (auto [name, field] : {std::pair<const char*, const double*>{"threads", &r.threads},
                             {"keyHeadStride", &r.key_head_stride},
                             {"valueHeadStride", &r.value_head_stride},
                             {"keyValueFinite", &r.key_value_finite},
                             {"inputArrival", &r.input_arrival},
                             {"block", &r.results},
                             {"outputRank", &r.output_rank},
                             {"outputDims", r.output_dims},
                             {"weightsRank", &r.weights_rank},
                             {"weightsDims", r.weights_dims},
                             {"outputFloat16", &r.output_float16},
                             {"steps", &r.steps},
                             {"traceTileKeys", &r.trace_tile_keys},
                             {"traceBlockRows", &r.trace_block_rows}}) {
    layout.set(name, slot(field));
  }
  return layout;
}

// The known option names of each call (attention_options.def).
val option_names_by_call_js() {
  val names = val::object();
  names.set("forward", option_names_js(kForward));
  names.set("backward", option_names_js(kBackward));
  names.set("trace", option_names_js(kTrace));
  names.set("modules", option_names_js(kModules));
  return names;
}

// ---- the WebGPU backend (cpp/webgpu/device.h) -----------------------------------------------

// A WebGPU call: plans, then asks `prepare_output(outputShape, float16)` (a JS function that
// must not throw) where the output goes: { array } or { buffer, offset, float16 } (see
// WebGpuAttention::run's sources), or { error } to stop. The weights, scores, log-sum-exp and
// trace go to the results block (read after finish). `trace`: record that row's online softmax (options
// batch, head, row); the result then carries the trace's layout (WebGpuAttention::trace_layout).
// -> { error } | { error: null, promise, job, layout? }
val webgpu_call(WebGpuAttention& gpu, const val& options, val sources, const val& prepare_output, bool trace) {
  CallError e;
  CallOptions o;
  AttentionPlan plan;
  CallRecord& record = fresh_results();
  uint32_t trace_row = FlashVariant::kNoTrace;
  const auto failed = [&] {
    val out = val::object();
    out.set(js("error"), e.to_js());
    return out;
  };
  if (!plan_call(options, trace ? kTrace : kForward, &o, &plan, e)) return failed();
  if (trace) {
    if (!check_traced_row(plan, o, e)) return failed();
    const double index = (o.trace_batch.value_or(0) * static_cast<double>(plan.Hq) + o.trace_head.value_or(0)) *
                             static_cast<double>(plan.Lq) + *o.trace_row;
    if (index >= static_cast<double>(FlashVariant::kNoTrace)) {
      e.fail(ErrorKind::kRange, "traceOnlineSoftmax on 'webgpu' takes at most 2^32 − 1 query rows");
      return failed();
    }
    trace_row = static_cast<uint32_t>(index);
  }
  if (o.output_on_gpu && (plan.return_weights || plan.return_scores != ScoreStage::kNone || plan.return_lse)) {
    e.fail(ErrorKind::kType, "outputLocation 'gpu' returns the output only: returnWeights, returnScores and returnLogSumExp need outputLocation 'cpu'");
    return failed();
  }
  record_shapes(plan);
  record.output_float16 = o.output_type.value_or(plan.query_type) == ElementType::kFloat16;
  const val output = prepare_output(shape_to_js(plan.output_shape), record.output_float16 != 0, o.output_on_gpu);
  if (!output[js("error")].isUndefined()) {
    val out = val::object();
    out.set(js("error"), output[js("error")]);
    return out;
  }
  sources.set(js("output"), output);
  Results results;
  if (plan.return_weights) results.add(&record.weights_result, kFloat * plan.weights_elements());
  if (plan.return_scores != ScoreStage::kNone) results.add(&record.scores_result, kFloat * plan.weights_elements());
  if (plan.return_lse) results.add(&record.logSumExp_result, kFloat * plan.B * plan.Hq * plan.Lq);
  val layout = val::undefined();
  if (trace) {
    layout = gpu.trace_layout(plan, sources);
    if (!layout[js("error")].isNull()) return layout;
    record.steps = layout[js("floats")].as<double>();
    results.add(&record.trace_result, kFloat * static_cast<uint64_t>(record.steps));
  }
  if (!results.allocate(e)) return failed();
  val started = gpu.run(plan, record_inputs(plan), nullptr, result<float>(record.weights_result),
                        result<float>(record.scores_result), result<float>(record.logSumExp_result), trace_row, result<float>(record.trace_result), sources);
  if (trace) started.set(js("layout"), layout);
  return started;
}

val webgpu_run_js(WebGpuAttention& gpu, val options, val sources, val prepare_output) {
  return webgpu_call(gpu, options, sources, prepare_output, false);
}

val webgpu_trace_js(WebGpuAttention& gpu, val options, val sources, val prepare_output) {
  return webgpu_call(gpu, options, sources, prepare_output, true);
}

// The backward on the WebGPU backend: planned and checked as the CPU backward, the gradients in
// the results block (dQuery, dKey, dValue there unless sources.gradients names GPUBuffers).
// -> { error } | { error: null, promise, job }
val webgpu_backward_js(WebGpuAttention& gpu, val options, val sources) {
  CallError e;
  CallOptions o;
  AttentionPlan plan;
  bool has_forward = false;
  CallRecord& record = fresh_results();
  const auto failed = [&] {
    val out = val::object();
    out.set(js("error"), e.to_js());
    return out;
  };
  if (!plan_backward_call(options, &o, &plan, &has_forward, e, true)) return failed();
  const bool gradients_on_gpu = !sources.isUndefined() && !sources[js("gradients")].isUndefined();
  Results results;
  if (gradients_on_gpu) {
    if (o.want_d_mask) results.add(&record.dMask_result, kFloat * plan.mask_elements);
    if (!plan.sinks.empty()) results.add(&record.dSinks_result, kFloat * plan.Hq);
  } else {
    add_gradients<float>(results, plan, o);
  }
  if (!results.allocate(e)) return failed();
  return gpu.run_backward(plan, record_inputs(plan), slot_address<const float>(record.dOutput),
                          has_forward ? slot_address<const float>(record.output) : nullptr,
                          has_forward ? slot_address<const float>(record.logSumExp) : nullptr,
                          gradients_in_record<float>(), o.want_d_mask, sources);
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
  emscripten::function("callRecordLayout", &sdpa::call_record_layout_js);
  emscripten::function("optionNames", &sdpa::option_names_by_call_js);
  emscripten::function("runAttention", &sdpa::run_attention_js);
  emscripten::function("forwardWorkspaceBytes", &sdpa::forward_workspace_bytes_js);
  emscripten::function("explainAttention", &sdpa::explain_attention_js);
  emscripten::function("traceOnlineSoftmax", &sdpa::trace_online_softmax_js);
  emscripten::function("referenceAttention64", &sdpa::reference_attention64_js);
  emscripten::function("runAttentionBackward", &sdpa::run_attention_backward_js);
  emscripten::function("referenceAttentionBackward64", &sdpa::reference_attention_backward64_js);
  emscripten::function("matmul", &sdpa::matmul_js);
  emscripten::function("softmax", &sdpa::softmax_js);
  emscripten::function("heapBytesInUse", &sdpa::heap_bytes_in_use);
  emscripten::function("quantizeKvRows", &sdpa::quantize_kv_rows_js);
  emscripten::function("storeKvRows", &sdpa::store_kv_rows_js);
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
      .function("runBackward", &sdpa::webgpu_backward_js)
      .function("finish", &sdpa::WebGpuAttention::finish)
      .function("release", &sdpa::WebGpuAttention::release)
      .function("abandon", &sdpa::WebGpuAttention::abandon)
      .function("writeFloat16", &sdpa::WebGpuAttention::write_float16)
      .function("writeQuantized", &sdpa::WebGpuAttention::write_quantized)
      .function("info", &sdpa::WebGpuAttention::info);
  emscripten::function("maxThreads", &sdpa::max_threads);
  emscripten::function("setMaxThreads", &sdpa::set_max_threads);
}
