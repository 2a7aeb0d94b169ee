#include "webgpu/device.h"

#include <emscripten/val.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "webgpu_shaders.h"  // generated from cpp/webgpu/shaders/ by cmake/embed_wgsl.cmake

using emscripten::val;

namespace sdpa {
namespace {

// GPUBufferUsage / GPUShaderStage / GPUMapMode flags (fixed by the WebGPU spec).
constexpr uint32_t kMapRead = 0x1, kCopySrc = 0x4, kCopyDst = 0x8, kUniform = 0x40, kStorage = 0x80;
constexpr uint32_t kStageCompute = 0x4;
constexpr uint32_t kMapModeRead = 0x1;

uint64_t round_up4(uint64_t n) { return (n + 3) & ~uint64_t{3}; }

double limit(const val& limits, const val& caps, const char* name, double fallback) {
  double v = fallback;
  const val device_value = limits[name];
  if (!device_value.isUndefined()) v = device_value.as<double>();
  if (!caps.isUndefined() && !caps.isNull()) {
    const val cap = caps[name];
    if (!cap.isUndefined() && !cap.isNull()) v = std::min(v, cap.as<double>());
  }
  return v;
}

val layout_entry(int binding, const char* type) {
  val buffer = val::object();
  buffer.set("type", type);
  val e = val::object();
  e.set("binding", binding);
  e.set("visibility", kStageCompute);
  e.set("buffer", buffer);
  return e;
}

// A binding resource { buffer } for the whole of `buffer`.
val whole(const val& buffer) {
  val resource = val::object();
  resource.set("buffer", buffer);
  return resource;
}

val bind_entry(int binding, const val& resource) {
  val e = val::object();
  e.set("binding", binding);
  e.set("resource", resource);
  return e;
}

val error_object(const char* name, const std::string& message) {
  val e = val::object();
  e.set("name", name);
  e.set("message", message);
  return e;
}

val heap_view(const void* address, uint64_t bytes) {
  return val(emscripten::typed_memory_view(static_cast<size_t>(bytes), static_cast<const uint8_t*>(address)));
}

}  // namespace

WebGpuAttention::WebGpuAttention(val device, val caps)
    : device_(device),
      queue_(device["queue"]),
      pipelines_(val::global("Map").new_()),
      jobs_(val::global("Map").new_()),
      flash_layout_(val::undefined()),
      weights_layout_(val::undefined()),
      flash_bgl_(val::undefined()),
      weights_bgl_(val::undefined()) {
  const val limits = device["limits"];
  limits_.max_storage_binding_bytes = static_cast<uint64_t>(
      limit(limits, caps, "maxStorageBufferBindingSize", 128.0 * (1 << 20)));
  limits_.max_buffer_bytes = static_cast<uint64_t>(limit(limits, caps, "maxBufferSize", 256.0 * (1 << 20)));
  limits_.max_workgroups_per_dim =
      static_cast<uint32_t>(limit(limits, caps, "maxComputeWorkgroupsPerDimension", 65535));
  limits_.max_workgroup_storage_bytes =
      static_cast<uint32_t>(limit(limits, caps, "maxComputeWorkgroupStorageSize", 16384));
  limits_.max_invocations_per_workgroup =
      static_cast<uint32_t>(limit(limits, caps, "maxComputeInvocationsPerWorkgroup", 256));
  const val alignment = limits["minStorageBufferOffsetAlignment"];
  if (!alignment.isUndefined()) min_storage_offset_alignment_ = alignment.as<uint32_t>();

  auto make_layout = [&](std::initializer_list<const char*> types, val* bgl, val* layout) {
    val entries = val::array();
    int binding = 0;
    for (const char* t : types) entries.call<void>("push", layout_entry(binding++, t));
    val desc = val::object();
    desc.set("entries", entries);
    *bgl = device_.call<val>("createBindGroupLayout", desc);
    val layouts = val::array();
    layouts.call<void>("push", *bgl);
    val pdesc = val::object();
    pdesc.set("bindGroupLayouts", layouts);
    *layout = device_.call<val>("createPipelineLayout", pdesc);
  };
  // attention_flash.wgsl: params, query, key, value, mask, output, stats, variants
  make_layout({"uniform", "read-only-storage", "read-only-storage", "read-only-storage",
               "read-only-storage", "storage", "storage", "read-only-storage"},
              &flash_bgl_, &flash_layout_);
  // attention_weights.wgsl: params, query, key, mask, stats, weights (or scores), variants
  make_layout({"uniform", "read-only-storage", "read-only-storage", "read-only-storage",
               "read-only-storage", "storage", "read-only-storage"},
              &weights_bgl_, &weights_layout_);
}

val WebGpuAttention::pipeline(const std::string& key, const std::string& source, bool weights,
                              val job) {
  const val cached = pipelines_.call<val>("get", key);
  if (!cached.isUndefined()) return cached;
  val module_desc = val::object();
  module_desc.set("code", source);
  module_desc.set("label", key);
  val compute = val::object();
  compute.set("module", device_.call<val>("createShaderModule", module_desc));
  compute.set("entryPoint", "main");
  val desc = val::object();
  desc.set("label", key);
  desc.set("layout", weights ? weights_layout_ : flash_layout_);
  desc.set("compute", compute);
  val p = device_.call<val>("createComputePipeline", desc);
  pipelines_.call<void>("set", key, p);
  // Dropped again by finish() if this call reports an error (e.g. the shader failed to compile).
  job["created"].call<void>("push", key);
  return p;
}

val WebGpuAttention::buffer(val job, uint64_t bytes, uint32_t usage) {
  val desc = val::object();
  desc.set("size", static_cast<double>(std::max<uint64_t>(16, round_up4(bytes))));
  desc.set("usage", usage);
  val b = device_.call<val>("createBuffer", desc);
  job["buffers"].call<void>("push", b);
  return b;
}

val WebGpuAttention::upload(val job, const void* data, uint64_t bytes, uint32_t usage) {
  val b = buffer(job, bytes, usage | kCopyDst);
  // writeBuffer copies at once, so the wasm heap may change (or grow) right after.
  if (bytes > 0) queue_.call<void>("writeBuffer", b, 0, heap_view(data, round_up4(bytes)));
  return b;
}

val WebGpuAttention::input(val job, val encoder, const val& source, const void* heap,
                            uint64_t byte_offset, uint64_t bytes) {
  if (source.isUndefined()) return whole(upload(job, static_cast<const uint8_t*>(heap) + byte_offset, bytes, kStorage));
  if (source["buffer"].isUndefined()) {
    // A caller's Float32Array: writeBuffer straight from it (offsets and sizes in elements).
    val b = buffer(job, bytes, kStorage | kCopyDst);
    if (bytes > 0) {
      queue_.call<void>("writeBuffer", b, 0, source["array"], static_cast<double>(byte_offset / 4),
                        static_cast<double>(bytes / 4));
    }
    return whole(b);
  }
  // A caller's GPUBuffer: bound in place where a binding may start, else copied on the GPU.
  const uint64_t at = static_cast<uint64_t>(source["offset"].as<double>()) + byte_offset;
  val resource = val::object();
  if (at % min_storage_offset_alignment_ == 0) {
    resource.set("buffer", source["buffer"]);
    resource.set("offset", static_cast<double>(at));
    resource.set("size", static_cast<double>(std::max<uint64_t>(4, bytes)));
    return resource;
  }
  val b = buffer(job, bytes, kStorage | kCopyDst);
  encoder.call<void>("copyBufferToBuffer", source["buffer"], static_cast<double>(at), b, 0, static_cast<double>(bytes));
  return whole(b);
}

val WebGpuAttention::trace_layout(const AttentionPlan& plan) const {
  val out = val::object();
  FlashVariant flash;
  const Status s = webgpu_flash_variant(plan, limits_, &flash);
  if (!s.ok()) {
    out.set("error", error_object("RangeError", s.message));
    return out;
  }
  out.set("error", val::null());
  out.set("floats", static_cast<double>(flash.trace_floats(plan.Lk)));
  out.set("tileKeys", flash.block_keys);
  out.set("lanes", flash.tiled ? kWebGpuTiledLanes : 1);
  out.set("stride", flash.trace_stride());
  out.set("kernel", flash.key());
  return out;
}

val WebGpuAttention::run(const AttentionPlan& plan, const AttentionInputs& in, float* output,
                         float* weights, float* scores, uint32_t trace_row, float* trace, val sources) {
  const auto source = [&](const char* name) { return sources.isUndefined() ? val::undefined() : sources[name]; };
  const val output_source = source("output");
  val result = val::object();
  FlashVariant flash;
  Status s = webgpu_flash_variant(plan, limits_, &flash);
  std::vector<WebGpuChunk> chunks;
  if (s.ok()) s = plan_webgpu_chunks(plan, limits_, &chunks);
  if (s.ok() && trace && chunks.size() != 1) {
    s = Status::RangeError("traceOnlineSoftmax on 'webgpu' takes a call the backend runs in one piece; this one needs " +
                           std::to_string(chunks.size()));
  }
  if (trace) flash.trace_row = trace_row;
  if (!s.ok()) {
    result.set("error", error_object("RangeError", s.message));
    return result;
  }
  result.set("error", val::null());
  if (chunks.empty()) {
    // No query rows (nothing to write) or no keys (every row sees nothing: zeros).
    const uint64_t output_bytes = 4ull * static_cast<uint64_t>(plan.output_elements());
    if (output_source.isUndefined()) {
      std::memset(output, 0, output_bytes);
    } else if (output_source["buffer"].isUndefined()) {
      output_source["array"].call<void>("fill", 0);
    } else if (output_bytes > 0) {
      val encoder = device_.call<val>("createCommandEncoder");
      encoder.call<void>("clearBuffer", output_source["buffer"], output_source["offset"], static_cast<double>(output_bytes));
      val commands = val::array();
      commands.call<void>("push", encoder.call<val>("finish"));
      queue_.call<void>("submit", commands);
    }
    // Lk = 0: no scores; no query rows: nothing to write (the weights are zeros or empty too).
    result.set("promise", val::global("Promise").call<val>("resolve", val::array()));
    result.set("job", 0);
    return result;
  }

  const int id = next_job_++;
  val job = val::object();
  job.set("buffers", val::array());
  job.set("readbacks", val::array());
  job.set("created", val::array());
  jobs_.call<void>("set", id, job);

  device_.call<void>("pushErrorScope", std::string("internal"));
  device_.call<void>("pushErrorScope", std::string("out-of-memory"));
  device_.call<void>("pushErrorScope", std::string("validation"));
  open_job_ = id;  // until run() returns: abandon() undoes a run that a JS exception cut short

  // Flash-decoding when the plan chooses it (webgpu_decode_splits) and each chunk's partials fit
  // one binding; a trace follows the flash kernels' key tiles.
  uint32_t splits = trace ? 0 : webgpu_decode_splits(plan);
  const uint64_t record_bytes = 4ull * (kWebGpuDecodeRecordHeader + flash.ev_pad);
  for (const WebGpuChunk& c : chunks) {
    if (static_cast<uint64_t>(c.query_rows()) * splits * record_bytes > limits_.max_storage_binding_bytes) splits = 0;
  }
  val flash_pipeline = val::undefined(), partial_pipeline = val::undefined(), merge_pipeline = val::undefined();
  if (splits) {
    FlashVariant decode = flash;
    decode.tiled = false;
    decode.decode = 1;
    partial_pipeline = pipeline(decode.key(), decode.wgsl_constants() + kAttentionDecodePartialWgsl, false, job);
    decode.decode = 2;
    merge_pipeline = pipeline(decode.key(), decode.wgsl_constants() + kAttentionDecodeMergeWgsl, false, job);
  } else {
    flash_pipeline = pipeline(flash.key(), flash.wgsl_constants() + (flash.tiled ? kAttentionFlashTiledWgsl : kAttentionFlashWgsl), false, job);
  }
  val weights_pipeline = val::undefined();
  if (plan.return_weights) {
    const WeightsVariant wv = webgpu_weights_variant(plan);
    weights_pipeline = pipeline(wv.key(), wv.wgsl_constants() + kAttentionWeightsWgsl, true, job);
  }
  val scores_pipeline = val::undefined();
  if (plan.return_scores != ScoreStage::kNone) {
    const WeightsVariant sv = webgpu_weights_variant(plan, plan.return_scores);
    scores_pipeline = pipeline(sv.key(), sv.wgsl_constants() + kAttentionWeightsWgsl, true, job);
  }
  // Stand-ins for bindings a variant does not use (no mask, no stats).
  const val dummy_read = buffer(job, 16, kStorage);
  const val dummy_write = buffer(job, 16, kStorage);
  // The variants' data (per-batch ranges, slopes, sinks, document ids): one buffer for the call.
  const std::vector<uint32_t> variant_words = webgpu_variant_data(plan, in, flash.block_keys);
  const val variants = upload(job, variant_words.data(), 4 * variant_words.size(), kStorage);

  const uint64_t mask_el = plan.mask_kind == MaskKind::kBool ? 1 : 4;
  val encoder = device_.call<val>("createCommandEncoder");
  val readbacks = job["readbacks"];
  // `target`: a caller's Float32Array to read into at element `at` (else the heap at `dst`).
  auto read_back = [&](const val& src, uint64_t bytes, const float* dst, const val& target = val::undefined(),
                       uint64_t at = 0) {
    val staging = buffer(job, bytes, kMapRead | kCopyDst);
    encoder.call<void>("copyBufferToBuffer", src, 0, staging, 0, static_cast<double>(round_up4(bytes)));
    val r = val::object();
    r.set("buffer", staging);
    r.set("dst", static_cast<double>(reinterpret_cast<uintptr_t>(dst)));
    r.set("bytes", static_cast<double>(bytes));
    r.set("target", target);
    r.set("at", static_cast<double>(at));
    readbacks.call<void>("push", r);
  };
  const bool output_on_gpu = !output_source.isUndefined() && !output_source["buffer"].isUndefined();

  for (const WebGpuChunk& c : chunks) {
    const WebGpuChunkBytes bytes = webgpu_chunk_bytes(plan, c);
    const val q = input(job, encoder, source("query"), in.query, 4ull * webgpu_row_offset(plan, c.bh0, c.row0, plan.E), bytes.query);
    const val k = input(job, encoder, source("key"), in.key, 4ull * c.kv0 * plan.key_head_stride, bytes.key);
    const val v = input(job, encoder, source("value"), in.value, 4ull * c.kv0 * plan.value_head_stride, bytes.value);
    val mask = whole(dummy_read);
    int64_t mask_base = 0;
    if (plan.mask_kind != MaskKind::kNone) {
      // Bool masks are bytes read as u32 words: start the slice on a word boundary. The tail
      // word may read up to 3 bytes past the mask, inside its 16-byte-rounded heap allocation.
      const uint64_t lo = static_cast<uint64_t>(c.mask_lo) * mask_el & ~uint64_t{3};
      const uint64_t hi = static_cast<uint64_t>(c.mask_hi) * mask_el;
      mask_base = static_cast<int64_t>(lo / mask_el);
      mask = whole(upload(job, static_cast<const uint8_t*>(in.mask) + lo, hi - lo, kStorage));
    }
    // A GPU output in one piece at a binding-aligned offset is written in place; else the chunk
    // is written to a call buffer and copied there (or read back).
    const uint64_t out_at = 4ull * webgpu_row_offset(plan, c.bh0, c.row0, plan.Ev);
    const uint64_t out_gpu_at = output_on_gpu ? static_cast<uint64_t>(output_source["offset"].as<double>()) + out_at : 0;
    const bool out_in_place = output_on_gpu && out_gpu_at % min_storage_offset_alignment_ == 0;
    val out = val::undefined();
    val out_resource = val::object();
    if (out_in_place) {
      out_resource.set("buffer", output_source["buffer"]);
      out_resource.set("offset", static_cast<double>(out_gpu_at));
      out_resource.set("size", static_cast<double>(bytes.output));
    } else {
      out = buffer(job, bytes.output, kStorage | kCopySrc);
      out_resource = whole(out);
    }
    val stats = dummy_write;
    val w = val::undefined();
    const uint64_t trace_bytes = trace ? 4 * flash.trace_floats(plan.Lk) : 0;
    if (trace) stats = buffer(job, trace_bytes, kStorage | kCopySrc);  // zeroed: unvisited tiles read 0
    if (plan.return_weights) {
      stats = buffer(job, bytes.stats, kStorage);
      w = buffer(job, bytes.weights, kStorage | kCopySrc);
    }

    val pass = encoder.call<val>("beginComputePass");
    auto dispatch = [&](const val& pipeline, const val& bgl, const GridPart& part,
                        std::initializer_list<val> buffers) {
      const WebGpuUniforms u = webgpu_uniforms(plan, c, mask_base, part);
      val entries = val::array();
      entries.call<void>("push", bind_entry(0, whole(upload(job, u.data(), sizeof(u), kUniform))));
      int binding = 1;
      for (const val& b : buffers) entries.call<void>("push", bind_entry(binding++, b));
      val desc = val::object();
      desc.set("layout", bgl);
      desc.set("entries", entries);
      pass.call<void>("setPipeline", pipeline);
      pass.call<void>("setBindGroup", 0, device_.call<val>("createBindGroup", desc));
      pass.call<void>("dispatchWorkgroups", part.x, part.y);
    };
    if (splits) {
      // Partials (one record per row and split) in the stats binding, then the merge.
      const uint64_t rows = static_cast<uint64_t>(c.query_rows());
      const val partials = buffer(job, rows * splits * record_bytes, kStorage);
      const uint64_t per = kWebGpuDecodeInvocations;
      for (const GridPart& part : split_grid((rows * splits + per - 1) / per, 1, limits_.max_workgroups_per_dim)) {
        dispatch(partial_pipeline, flash_bgl_, part, {q, k, v, mask, out_resource, whole(partials), whole(variants)});
      }
      for (const GridPart& part : split_grid((rows + per - 1) / per, 1, limits_.max_workgroups_per_dim)) {
        dispatch(merge_pipeline, flash_bgl_, part, {q, k, v, mask, out_resource, whole(partials), whole(variants)});
      }
    } else {
      const uint64_t row_tiles = (static_cast<uint64_t>(c.rows) + kWebGpuFlashRows - 1) / kWebGpuFlashRows;
      for (const GridPart& part : split_grid(row_tiles, c.nbh, limits_.max_workgroups_per_dim)) {
        dispatch(flash_pipeline, flash_bgl_, part, {q, k, v, mask, out_resource, whole(stats), whole(variants)});
      }
    }
    const uint64_t key_tiles = (static_cast<uint64_t>(plan.Lk) + kWebGpuWeightsKeys - 1) / kWebGpuWeightsKeys;
    if (plan.return_weights) {
      for (const GridPart& part : split_grid(key_tiles, c.query_rows(), limits_.max_workgroups_per_dim)) {
        dispatch(weights_pipeline, weights_bgl_, part, {q, k, mask, whole(stats), whole(w), whole(variants)});
      }
    }
    val score_buffer = val::undefined();
    if (plan.return_scores != ScoreStage::kNone) {
      score_buffer = buffer(job, bytes.scores, kStorage | kCopySrc);
      for (const GridPart& part : split_grid(key_tiles, c.query_rows(), limits_.max_workgroups_per_dim)) {
        dispatch(scores_pipeline, weights_bgl_, part, {q, k, mask, whole(dummy_read), whole(score_buffer), whole(variants)});
      }
    }
    pass.call<void>("end");
    if (output_on_gpu) {
      if (!out_in_place) {
        encoder.call<void>("copyBufferToBuffer", out, 0, output_source["buffer"], static_cast<double>(out_gpu_at),
                           static_cast<double>(bytes.output));
      }
    } else if (!output_source.isUndefined()) {
      read_back(out, bytes.output, nullptr, output_source["array"], out_at / 4);
    } else {
      read_back(out, bytes.output, output + out_at / 4);
    }
    if (trace) read_back(stats, trace_bytes, trace);
    if (plan.return_weights) {
      read_back(w, bytes.weights, weights + webgpu_row_offset(plan, c.bh0, c.row0, plan.Lk));
    }
    if (plan.return_scores != ScoreStage::kNone) {
      read_back(score_buffer, bytes.scores, scores + webgpu_row_offset(plan, c.bh0, c.row0, plan.Lk));
    }
  }
  val commands = val::array();
  commands.call<void>("push", encoder.call<val>("finish"));
  queue_.call<void>("submit", commands);

  // Results, in this order: validation, out-of-memory, internal (scopes pop innermost first),
  // then one entry per readback.
  val promises = val::array();
  for (int n = 0; n < 3; ++n) promises.call<void>("push", device_.call<val>("popErrorScope"));
  const int count = readbacks["length"].as<int>();
  for (int n = 0; n < count; ++n) {
    promises.call<void>("push", readbacks[n]["buffer"].call<val>("mapAsync", kMapModeRead));
  }
  result.set("promise", val::global("Promise").call<val>("all", promises));
  result.set("job", id);
  open_job_ = 0;
  return result;
}

void WebGpuAttention::abandon() {
  const int id = open_job_;
  if (id == 0) return;
  open_job_ = 0;
  for (int n = 0; n < 3; ++n) device_.call<val>("popErrorScope");  // what they caught is moot now
  const val job = jobs_.call<val>("get", id);
  if (job.isUndefined()) return;
  const val created = job["created"];
  const int count = created["length"].as<int>();
  for (int c = 0; c < count; ++c) pipelines_.call<void>("delete", created[c]);
  release(id);
}

val WebGpuAttention::finish(int id, val results) {
  if (id == 0) return val::null();
  const val job = jobs_.call<val>("get", id);
  if (job.isUndefined()) return error_object("internal", "unknown WebGPU job");
  static const char* const kKinds[] = {"validation", "out-of-memory", "internal"};
  for (int n = 0; n < 3; ++n) {
    const val error = results[n];
    if (!error.isNull() && !error.isUndefined()) {
      // Forget pipelines this call created: they may be the cause (e.g. a shader that does not compile).
      const val created = job["created"];
      const int count = created["length"].as<int>();
      for (int c = 0; c < count; ++c) pipelines_.call<void>("delete", created[c]);
      val e = val::object();
      e.set("kind", kKinds[n]);
      e.set("message", error["message"]);
      return e;
    }
  }
  const val readbacks = job["readbacks"];
  const int count = readbacks["length"].as<int>();
  const val uint8 = val::global("Uint8Array");
  for (int n = 0; n < count; ++n) {
    const val r = readbacks[n];
    const auto bytes = static_cast<uint64_t>(r["bytes"].as<double>());
    auto* dst = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(r["dst"].as<double>()));
    const val target = r["target"];
    if (target.isUndefined()) {
      const val mapped = uint8.new_(r["buffer"].call<val>("getMappedRange"), 0, static_cast<double>(bytes));
      heap_view(dst, bytes).call<void>("set", mapped);
    } else {
      const val mapped = val::global("Float32Array").new_(r["buffer"].call<val>("getMappedRange"), 0, static_cast<double>(bytes / 4));
      target.call<void>("set", mapped, r["at"]);
    }
    r["buffer"].call<void>("unmap");
  }
  return val::null();
}

void WebGpuAttention::release(int id) {
  if (id == 0) return;
  const val job = jobs_.call<val>("get", id);
  if (job.isUndefined()) return;
  const val buffers = job["buffers"];
  const int count = buffers["length"].as<int>();
  for (int n = 0; n < count; ++n) buffers[n].call<void>("destroy");
  jobs_.call<bool>("delete", id);
}

val WebGpuAttention::info() const {
  val limits = val::object();
  limits.set("maxStorageBufferBindingSize", static_cast<double>(limits_.max_storage_binding_bytes));
  limits.set("maxBufferSize", static_cast<double>(limits_.max_buffer_bytes));
  limits.set("maxComputeWorkgroupsPerDimension", limits_.max_workgroups_per_dim);
  limits.set("maxComputeWorkgroupStorageSize", limits_.max_workgroup_storage_bytes);
  limits.set("maxComputeInvocationsPerWorkgroup", limits_.max_invocations_per_workgroup);
  val out = val::object();
  out.set("limits", limits);
  out.set("pipelines", val::global("Array").call<val>("from", pipelines_.call<val>("keys")));
  out.set("jobsInFlight", jobs_["size"]);
  return out;
}

}  // namespace sdpa
