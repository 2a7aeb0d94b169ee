#include "webgpu/device.h"

#include <emscripten/val.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <vector>

#include "core/kv_cache_format.h"
#include "webgpu_shaders.h"  // generated from cpp/webgpu/shaders/ by cmake/embed_wgsl.cmake

using emscripten::val;

namespace sdpa {
namespace {

// GPUBufferUsage / GPUShaderStage / GPUMapMode flags (fixed by the WebGPU spec).
constexpr uint32_t kMapRead = 0x1, kCopySrc = 0x4, kCopyDst = 0x8, kUniform = 0x40, kStorage = 0x80;
constexpr uint32_t kStageCompute = 0x4;
constexpr uint32_t kMapModeRead = 0x1;
// Invocations (destination words) per workgroup of write_float16.wgsl.
constexpr uint32_t kWriteFloat16Words = 64;
// Invocations (blocks of 32 elements) per workgroup of kv_quantize.wgsl.
constexpr uint32_t kQuantizeInvocations = 64;
// The reused buffers' first size, and the most they grow to (WebGpuAttention::ReusedBuffer).
constexpr uint64_t kReusedBufferMinBytes = 64 << 10;
constexpr uint64_t kReusedBufferMaxBytes = 32 << 20;
// Bind groups an instance keeps (bind_group): a 32-layer model's appends and decode steps of one
// token (two to four groups a layer) fit.
constexpr int kBindGroupCacheSize = 256;

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

// A layout's entry; binding 0 (the uniforms) takes a dynamic offset (WebGpuAttention::SharedBindings).
val layout_entry(int binding, const char* type) {
  val buffer = val::object();
  buffer.set("type", type);
  if (binding == 0) buffer.set("hasDynamicOffset", true);
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

// A binding resource for bytes [offset, offset + size) of `buffer`.
val buffer_range(const val& buffer, uint64_t offset, uint64_t size) {
  val resource = whole(buffer);
  resource.set("offset", static_cast<double>(offset));
  resource.set("size", static_cast<double>(size));
  return resource;
}

// Byte offsets of the call's GPU-resident query, key and value in their buffers (`sources` as
// run() and run_backward() take them; 0 for arrays).
WebGpuInputOffsets input_offsets(const val& sources) {
  const auto offset = [&](const char* name) -> uint64_t {
    if (sources.isUndefined()) return 0;
    const val source = sources[name];
    if (source.isUndefined() || source["buffer"].isUndefined()) return 0;
    return static_cast<uint64_t>(source["offset"].as<double>());
  };
  WebGpuInputOffsets o;
  o.query = offset("query");
  o.key = offset("key");
  o.value = offset("value");
  return o;
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
      bind_groups_(val::global("Map").new_()),
      object_ids_(val::global("WeakMap").new_()),
      flash_layout_(val::undefined()),
      weights_layout_(val::undefined()),
      write_layout_(val::undefined()),
      backward_layout_(val::undefined()),
      flash_bgl_(val::undefined()),
      weights_bgl_(val::undefined()),
      write_bgl_(val::undefined()),
      backward_bgl_(val::undefined()),
      stand_in_read_(val::undefined()),
      stand_in_stats_(val::undefined()),
      stand_in_lse_(val::undefined()) {
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
  const val uniform_alignment = limits["minUniformBufferOffsetAlignment"];
  uniform_uploads_.usage = kUniform | kCopyDst;
  uniform_uploads_.alignment = uniform_alignment.isUndefined() ? 256 : uniform_alignment.as<uint32_t>();
  storage_uploads_.usage = kStorage | kCopyDst;
  storage_uploads_.alignment = min_storage_offset_alignment_;
  records_.usage = kStorage;
  records_.alignment = min_storage_offset_alignment_;
  workspaces_.usage = kStorage;
  workspaces_.alignment = min_storage_offset_alignment_;
  const val features = device["features"];
  limits_.shader_f16 = !features.isUndefined() && features.call<bool>("has", std::string("shader-f16"));
  if (!caps.isUndefined() && !caps.isNull() && caps["shaderF16"].isFalse()) limits_.shader_f16 = false;
  limits_.subgroups = !features.isUndefined() && features.call<bool>("has", std::string("subgroups"));
  if (!caps.isUndefined() && !caps.isNull() && caps["subgroups"].isFalse()) limits_.subgroups = false;
  const val adapter_info = device["adapterInfo"];
  if (!adapter_info.isUndefined() && !adapter_info["subgroupMinSize"].isUndefined()) {
    limits_.subgroup_min_size = adapter_info["subgroupMinSize"].as<uint32_t>();
  }
  // The JS side sets it where navigator.gpu.wgslLanguageFeatures has packed_4x8_integer_dot_product
  // (and gpuLimits does not turn it off).
  limits_.packed_dot = !caps.isUndefined() && !caps.isNull() && caps["packedIntegerDotProduct"].isTrue();
  limits_.min_split_keys = static_cast<uint32_t>(limit(val::object(), caps, "prefillSplitKeys", limits_.min_split_keys));

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
  // attention_flash.wgsl: params, query, key, value, mask, output, stats, variants, lse
  make_layout({"uniform", "read-only-storage", "read-only-storage", "read-only-storage",
               "read-only-storage", "storage", "storage", "read-only-storage", "storage"},
              &flash_bgl_, &flash_layout_);
  // attention_weights.wgsl: params, query, key, mask, stats, weights (or scores), variants
  make_layout({"uniform", "read-only-storage", "read-only-storage", "read-only-storage",
               "read-only-storage", "storage", "read-only-storage"},
              &weights_bgl_, &weights_layout_);
  // write_float16.wgsl: params, segments, source, destination
  make_layout({"uniform", "read-only-storage", "read-only-storage", "storage"}, &write_bgl_, &write_layout_);
  // attention_backward_*.wgsl: params, query, key, value, mask, variants, dOutput, rowstats, grads
  make_layout({"uniform", "read-only-storage", "read-only-storage", "read-only-storage", "read-only-storage",
               "read-only-storage", "read-only-storage", "storage", "storage"},
              &backward_bgl_, &backward_layout_);
  const auto stand_in = [&] {
    val desc = val::object();
    desc.set("size", 16);
    desc.set("usage", kStorage);
    return device_.call<val>("createBuffer", desc);
  };
  stand_in_read_ = stand_in();
  stand_in_stats_ = stand_in();
  stand_in_lse_ = stand_in();
}

WebGpuAttention::~WebGpuAttention() {
  for (val* b : {&stand_in_read_, &stand_in_stats_, &stand_in_lse_}) b->call<void>("destroy");
  for (ReusedBuffer* reused : {&uniform_uploads_, &storage_uploads_, &records_, &workspaces_}) {
    if (reused->bytes > 0) reused->buffer.call<void>("destroy");
  }
}

val WebGpuAttention::pipeline(const std::string& key, const std::function<std::string()>& source, Layout layout,
                              val job) {
  const val cached = pipelines_.call<val>("get", key);
  if (!cached.isUndefined()) return cached;
  val module_desc = val::object();
  module_desc.set("code", source());
  module_desc.set("label", key);
  val compute = val::object();
  compute.set("module", device_.call<val>("createShaderModule", module_desc));
  compute.set("entryPoint", "main");
  val desc = val::object();
  desc.set("label", key);
  desc.set("layout", layout == Layout::kFlash     ? flash_layout_
                     : layout == Layout::kWeights ? weights_layout_
                     : layout == Layout::kWrite   ? write_layout_
                                                  : backward_layout_);
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

val WebGpuAttention::take(ReusedBuffer* reused, val job, uint64_t bytes) {
  const uint64_t size = std::max<uint64_t>(16, round_up4(bytes));
  uint64_t at = (reused->used + reused->alignment - 1) / reused->alignment * reused->alignment;
  if (at + size > reused->bytes) {
    const uint64_t most = std::min(kReusedBufferMaxBytes, limits_.max_buffer_bytes);
    if (size > most) return buffer_range(buffer(job, size, reused->usage), 0, size);
    // Sized for all this call took, so that the next such call fits; the regions taken so far
    // stay in the old buffer, destroyed with this call's own buffers.
    uint64_t grown = kReusedBufferMinBytes;
    while (grown < at + size && grown < most) grown *= 2;
    grown = std::min(grown, most);
    val desc = val::object();
    desc.set("size", static_cast<double>(grown));
    desc.set("usage", reused->usage);
    val fresh = device_.call<val>("createBuffer", desc);
    if (reused->bytes > 0) job["buffers"].call<void>("push", reused->buffer);
    reused->buffer = fresh;
    reused->bytes = grown;
    at = 0;
  }
  reused->used = at + size;
  return buffer_range(reused->buffer, at, size);
}

val WebGpuAttention::upload_floats(val job, const val& array, uint64_t from, uint64_t count) {
  const val region = take(&storage_uploads_, job, 4 * count);
  if (count > 0) {
    queue_.call<void>("writeBuffer", region["buffer"], region["offset"], array, static_cast<double>(from), static_cast<double>(count));
  }
  return region;
}

val WebGpuAttention::upload(val job, const void* data, uint64_t bytes) {
  // writeBuffer copies at once, so the wasm heap may change (or grow) right after.
  const val region = take(&storage_uploads_, job, bytes);
  if (bytes > 0) queue_.call<void>("writeBuffer", region["buffer"], region["offset"], heap_view(data, round_up4(bytes)));
  return region;
}

val WebGpuAttention::upload_uniforms(val job, const void* data, uint64_t bytes) {
  const val region = take(&uniform_uploads_, job, bytes);
  queue_.call<void>("writeBuffer", region["buffer"], region["offset"], heap_view(data, round_up4(bytes)));
  return region;
}

val WebGpuAttention::upload_halves(val job, const val& array, uint64_t from, uint64_t count) {
  const val region = take(&storage_uploads_, job, 2 * count);
  const double at = region["offset"].as<double>();
  const uint64_t even = count & ~uint64_t{1};
  if (even > 0) queue_.call<void>("writeBuffer", region["buffer"], at, array, static_cast<double>(from), static_cast<double>(even));
  if (count & 1) {
    val last = val::global("Uint16Array").new_(2);
    last.set(0, array[static_cast<double>(from + even)]);
    queue_.call<void>("writeBuffer", region["buffer"], at + static_cast<double>(2 * even), last);
  }
  return region;
}

val WebGpuAttention::bind_from(const val& buffer, uint64_t at, uint64_t bytes, uint64_t* skipped) const {
  const uint64_t start = at / min_storage_offset_alignment_ * min_storage_offset_alignment_;
  *skipped = at - start;
  return buffer_range(buffer, start, std::max<uint64_t>(4, round_up4(at + bytes) - start));
}

val WebGpuAttention::input(val job, val encoder, const val& source, const void* heap, ElementType type,
                            uint64_t element_offset, uint64_t elements, uint32_t* base) {
  *base = 0;
  const uint64_t byte_offset = webgpu_element_bytes(type) * element_offset;
  const uint64_t bytes = webgpu_element_bytes(type) * elements;
  if (source.isUndefined()) return upload(job, static_cast<const uint8_t*>(heap) + byte_offset, bytes);
  const bool half = type == ElementType::kFloat16;
  if (source["buffer"].isUndefined()) {
    // A caller's Uint16Array of halves.
    if (half) return upload_halves(job, source["array"], element_offset, elements);
    // A caller's Float32Array: writeBuffer straight from it.
    return upload_floats(job, source["array"], element_offset, elements);
  }
  // A caller's GPUBuffer: bound in place where a binding may start, else copied on the GPU.
  const uint64_t at = static_cast<uint64_t>(source["offset"].as<double>()) + byte_offset;
  if (half) {
    // Halves start at even bytes, which copyBufferToBuffer (whole words) cannot take: bound in
    // place from the aligned offset before them, the kernels skipping *base elements.
    uint64_t skipped;
    val resource = bind_from(source["buffer"], at, bytes, &skipped);
    *base = static_cast<uint32_t>(skipped / 2);
    return resource;
  }
  if (at % min_storage_offset_alignment_ == 0) return buffer_range(source["buffer"], at, std::max<uint64_t>(4, bytes));
  const val region = take(&storage_uploads_, job, bytes);
  encoder.call<void>("copyBufferToBuffer", source["buffer"], static_cast<double>(at), region["buffer"], region["offset"],
                     static_cast<double>(bytes));
  return region;
}

void WebGpuAttention::encode_write_float16(val job, val pass, const val& destination, uint64_t destination_at,
                                           const val& source, const std::vector<std::array<uint64_t, 3>>& runs) {
  const bool from_array = source["buffer"].isUndefined();
  const bool source_f32 = !from_array && source["float32"].isTrue();
  const uint64_t source_size = source_f32 ? 4 : 2;
  const uint64_t source_at = from_array ? 0 : static_cast<uint64_t>(source["offset"].as<double>());
  const std::string key = std::string("write-float16:src=") + (source_f32 ? "f32" : "f16");
  const val pipe = pipeline(
      key,
      [&] {
        return "const WORDS: u32 = " + std::to_string(kWriteFloat16Words) + "u;\nconst SOURCE_F32: bool = " +
               (source_f32 ? "true" : "false") + ";\n" + kWriteFloat16Wgsl;
      },
      Layout::kWrite, job);
  // Bytes a binding of [at, at + bytes) takes (bind_from), and the most one may take.
  const uint64_t align = min_storage_offset_alignment_;
  const auto binding_bytes = [&](uint64_t at, uint64_t bytes) { return round_up4(at + bytes) - at / align * align; };
  const uint64_t cap = limits_.largest_binding_bytes();
  // Runs cut to pieces whose bindings fit alone (elements are independent), in order.
  std::vector<std::array<uint64_t, 3>> pieces;
  const uint64_t piece = std::max<uint64_t>(1, (cap - std::min(cap, align + 4)) / source_size);
  for (const auto& r : runs) {
    for (uint64_t done = 0; done < r[2]; done += piece) {
      pieces.push_back({r[0] + done, r[1] + done, std::min(piece, r[2] - done)});
    }
  }
  for (size_t i = 0; i < pieces.size();) {
    // Pieces [i, j) share one dispatch while their destination and source spans fit a binding.
    uint64_t d_lo = pieces[i][0], d_hi = d_lo + pieces[i][2], s_lo = pieces[i][1], s_hi = s_lo + pieces[i][2];
    size_t j = i + 1;
    for (; j < pieces.size(); ++j) {
      const uint64_t dl = std::min(d_lo, pieces[j][0]), dh = std::max(d_hi, pieces[j][0] + pieces[j][2]);
      const uint64_t sl = std::min(s_lo, pieces[j][1]), sh = std::max(s_hi, pieces[j][1] + pieces[j][2]);
      if (binding_bytes(destination_at + 2 * dl, 2 * (dh - dl)) > cap) break;
      if (!from_array && binding_bytes(source_at + source_size * sl, source_size * (sh - sl)) > cap) break;
      if (from_array && 2 * (sh - sl) > cap) break;
      d_lo = dl, d_hi = dh, s_lo = sl, s_hi = sh;
    }
    uint64_t skipped;
    const val dst = bind_from(destination, destination_at + 2 * d_lo, 2 * (d_hi - d_lo), &skipped);
    const uint64_t dst_base = skipped / 2;  // the binding's element of destination element d_lo
    val src = val::undefined();
    uint64_t src_base = 0;
    if (from_array) {
      src = upload_halves(job, source["array"], s_lo, s_hi - s_lo);
    } else {
      src = bind_from(source["buffer"], source_at + source_size * s_lo, source_size * (s_hi - s_lo), &skipped);
      src_base = skipped / source_size;
    }
    std::vector<uint32_t> segments;
    uint64_t words = 0;  // destination words of the longest piece
    for (size_t k = i; k < j; ++k) {
      const uint64_t d = pieces[k][0] - d_lo + dst_base, n = pieces[k][2];
      segments.push_back(static_cast<uint32_t>(d));
      segments.push_back(static_cast<uint32_t>(pieces[k][1] - s_lo + src_base));
      segments.push_back(static_cast<uint32_t>(n));
      words = std::max(words, (d + n + 1) / 2 - d / 2);
    }
    SharedBindings bindings(write_bgl_, {upload(job, segments.data(), 4 * segments.size()), src, dst});
    for (const GridPart& part : split_grid((words + kWriteFloat16Words - 1) / kWriteFloat16Words, j - i,
                                           limits_.max_workgroups_per_dim)) {
      const uint32_t params[4] = {part.x_base, part.y_base, 0, 0};
      encode_dispatch(job, pass, pipe, &bindings, params, sizeof params, part);
    }
    i = j;
  }
}

void WebGpuAttention::encode_quantize(val job, val pass, const QuantizePass& q, const val& segments,
                                      const val& source, const val& destination) {
  const std::string key = "kv-quantize:out=" + std::to_string(q.out) + (q.source_f16 ? ":src=f16" : ":src=f32");
  const val pipe = pipeline(
      key,
      [&] {
        return "const OUT: u32 = " + std::to_string(q.out) + "u;\nconst SOURCE_F16: bool = " +
               (q.source_f16 ? "true" : "false") + ";\n" + kKvQuantizeWgsl;
      },
      Layout::kWrite, job);
  SharedBindings bindings(write_bgl_, {segments, source, destination});
  for (const GridPart& part : split_grid((uint64_t{q.units} + kQuantizeInvocations - 1) / kQuantizeInvocations, 1,
                                         limits_.max_workgroups_per_dim)) {
    const uint32_t params[12] = {part.x_base, q.units, q.hkv, q.n, q.dim, q.blocks, q.source_base, q.rows, q.scale_start, 0, 0, 0};
    encode_dispatch(job, pass, pipe, &bindings, params, sizeof params, part);
  }
}

void WebGpuAttention::write_quantized(val writes, val rows) {
  const bool int4 = rows["int4"].isTrue();
  const val held = rows["held"], added = rows["added"];
  const auto batch = held["length"].as<uint32_t>();
  const auto hkv = rows["kvHeads"].as<uint32_t>();
  const auto n = rows["n"].as<uint32_t>();
  const auto max_length = static_cast<int64_t>(rows["maxLength"].as<double>());
  std::vector<uint32_t> segment_words;
  for (uint32_t b = 0; b < batch; ++b) {
    segment_words.push_back(held[b].as<uint32_t>());
    segment_words.push_back(added[b].as<uint32_t>());
  }
  submit_compute_pass([&](const val& job, const val& pass) {
    const val segments = upload(job, segment_words.data(), 4 * segment_words.size());
    const int count = writes["length"].as<int>();
    for (int w = 0; w < count; ++w) {
      const val write = writes[w], source = write["source"];
      const bool half = write["float16"].isTrue();
      QuantizePass q;
      q.out = int4 ? 1 : 0;
      q.source_f16 = half;
      q.hkv = hkv;
      q.n = n;
      q.dim = write["dim"].as<uint32_t>();
      const QuantizedLayout layout = quantized_layout(int4 ? KvQuant::kInt4 : KvQuant::kInt8, int64_t{batch} * hkv, max_length, q.dim);
      q.blocks = static_cast<uint32_t>(layout.blocks);
      q.rows = static_cast<uint32_t>(layout.rows);
      q.scale_start = static_cast<uint32_t>(layout.scale_offset / 4);
      q.units = batch * hkv * n * q.blocks;
      const uint64_t elements = uint64_t{batch} * hkv * n * q.dim;
      val from = val::undefined();
      if (source["buffer"].isUndefined()) {
        from = half ? upload_halves(job, source["array"], 0, elements) : upload_floats(job, source["array"], 0, elements);
      } else {
        const uint64_t element_bytes = half ? 2 : 4;
        uint64_t skipped;
        from = bind_from(source["buffer"], static_cast<uint64_t>(source["offset"].as<double>()), element_bytes * elements, &skipped);
        q.source_base = static_cast<uint32_t>(skipped / element_bytes);
      }
      encode_quantize(job, pass, q, segments, from, whole(write["destination"]));
    }
  });
}

void WebGpuAttention::encode_merge(val job, val pass, const val& merge_pipeline, uint64_t rows,
                                   const std::function<WebGpuUniforms(const GridPart&)>& uniforms,
                                   SharedBindings* bindings) {
  for (const GridPart& part : split_grid(rows, 1, limits_.max_workgroups_per_dim)) {
    const WebGpuUniforms u = uniforms(part);
    encode_dispatch(job, pass, merge_pipeline, bindings, u.data(), sizeof(u), part);
  }
}

void WebGpuAttention::encode_dispatch(val job, const val& pass, const val& pipeline, SharedBindings* bindings,
                                      const void* uniforms, uint64_t bytes, const GridPart& part) {
  const val region = upload_uniforms(job, uniforms, bytes);
  const val buffer = region["buffer"];
  if (bindings->group.isUndefined() || !buffer.strictlyEquals(bindings->uniform_buffer)) {
    const val uniform_binding = buffer_range(buffer, 0, static_cast<uint64_t>(region["size"].as<double>()));
    bindings->group = bind_group(job, bindings->layout, uniform_binding, bindings->resources);
    bindings->uniform_buffer = buffer;
  }
  val offsets = val::array();
  offsets.call<void>("push", region["offset"]);
  pass.call<void>("setPipeline", pipeline);
  pass.call<void>("setBindGroup", 0, bindings->group, offsets);
  pass.call<void>("dispatchWorkgroups", part.x, part.y);
}

uint64_t WebGpuAttention::object_id(const val& object) {
  const val id = object_ids_.call<val>("get", object);
  if (!id.isUndefined()) return static_cast<uint64_t>(id.as<double>());
  object_ids_.call<void>("set", object, static_cast<double>(++next_object_id_));
  return next_object_id_;
}

val WebGpuAttention::bind_group(val job, const val& layout, const val& uniforms, const std::vector<val>& resources) {
  std::string key = std::to_string(object_id(layout));
  const auto add_to_key = [&](const val& resource) {
    key += ' ';
    key += std::to_string(object_id(resource["buffer"]));
    const val offset = resource["offset"];
    if (offset.isUndefined()) return;  // the whole buffer
    key += ',';
    key += std::to_string(static_cast<uint64_t>(offset.as<double>()));
    key += ',';
    key += std::to_string(static_cast<uint64_t>(resource["size"].as<double>()));
  };
  add_to_key(uniforms);
  for (const val& r : resources) add_to_key(r);
  const val cached = bind_groups_.call<val>("get", key);
  if (!cached.isUndefined()) {
    bind_groups_.call<bool>("delete", key);  // to the end: the most recently used
    bind_groups_.call<void>("set", key, cached);
    return cached;
  }
  val entries = val::array();
  entries.call<void>("push", bind_entry(0, uniforms));
  int binding = 1;
  for (const val& r : resources) entries.call<void>("push", bind_entry(binding++, r));
  val desc = val::object();
  desc.set("layout", layout);
  desc.set("entries", entries);
  val group = device_.call<val>("createBindGroup", desc);
  bind_groups_.call<void>("set", key, group);
  job["groups"].call<void>("push", key);
  if (bind_groups_["size"].as<int>() > kBindGroupCacheSize) {
    bind_groups_.call<bool>("delete", bind_groups_.call<val>("keys").call<val>("next")["value"]);
  }
  return group;
}

void WebGpuAttention::forget_created(const val& job) {
  const val created = job["created"], groups = job["groups"];
  const int pipelines = created["length"].as<int>(), bind_groups = groups["length"].as<int>();
  for (int c = 0; c < pipelines; ++c) pipelines_.call<bool>("delete", created[c]);
  for (int g = 0; g < bind_groups; ++g) bind_groups_.call<bool>("delete", groups[g]);
}

void WebGpuAttention::submit_compute_pass(const std::function<void(const val& job, const val& pass)>& encode) {
  val job = new_job();
  val encoder = device_.call<val>("createCommandEncoder");
  val pass = encoder.call<val>("beginComputePass");
  encode(job, pass);
  pass.call<void>("end");
  val commands = val::array();
  commands.call<void>("push", encoder.call<val>("finish"));
  queue_.call<void>("submit", commands);
  // The submitted work still runs on the job's buffers.
  const val buffers = job["buffers"];
  const int count = buffers["length"].as<int>();
  for (int n = 0; n < count; ++n) buffers[n].call<void>("destroy");
}

void WebGpuAttention::write_float16(val writes) {
  submit_compute_pass([&](const val& job, const val& pass) {
    const int count = writes["length"].as<int>();
    for (int w = 0; w < count; ++w) {
      const val write = writes[w], runs = write["runs"];
      std::vector<std::array<uint64_t, 3>> parsed;
      const int values = runs["length"].as<int>();
      for (int i = 0; i + 2 < values; i += 3) {
        parsed.push_back({static_cast<uint64_t>(runs[i].as<double>()), static_cast<uint64_t>(runs[i + 1].as<double>()),
                          static_cast<uint64_t>(runs[i + 2].as<double>())});
      }
      encode_write_float16(job, pass, write["destination"], 0, write["source"], parsed);
    }
  });
}

val WebGpuAttention::trace_layout(const AttentionPlan& plan, const val& sources) const {
  val out = val::object();
  FlashVariant flash;
  const Status s = webgpu_flash_variant(plan, limits_, &flash, input_offsets(sources));
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
                         float* weights, float* scores, float* lse, uint32_t trace_row, float* trace, val sources) {
  const auto source = [&](const char* name) { return sources.isUndefined() ? val::undefined() : sources[name]; };
  const val output_source = source("output");
  val result = val::object();
  const WebGpuInputOffsets offsets = input_offsets(sources);
  FlashVariant flash;
  Status s = webgpu_flash_variant(plan, limits_, &flash, offsets);
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
    } else if (output_source["float16"].isTrue()) {
      // Halves at an even offset: zeros (a fresh Uint16Array) written by write_float16.wgsl.
      const auto count = static_cast<uint64_t>(plan.output_elements());
      val zeros = val::object();
      zeros.set("array", val::global("Uint16Array").new_(static_cast<double>(count)));
      if (count > 0) {
        submit_compute_pass([&](const val& job, const val& pass) {
          encode_write_float16(job, pass, output_source["buffer"], 0, zeros,
                               {{static_cast<uint64_t>(output_source["offset"].as<double>()) / 2, 0, count}});
        });
      }
    } else if (output_bytes > 0) {
      val encoder = device_.call<val>("createCommandEncoder");
      encoder.call<void>("clearBuffer", output_source["buffer"], output_source["offset"], static_cast<double>(output_bytes));
      val commands = val::array();
      commands.call<void>("push", encoder.call<val>("finish"));
      queue_.call<void>("submit", commands);
    }
    // Lk = 0: no scores, and each row's log-sum-exp is its sink's logit (−inf without one); no
    // query rows: nothing to write (the weights are zeros or empty too).
    if (plan.return_lse) {
      for (int64_t bh = 0; bh < plan.B * plan.Hq; ++bh) {
        const float row_lse = plan.sinks.empty() ? -std::numeric_limits<float>::infinity() : plan.sinks[bh % plan.Hq];
        std::fill(lse + bh * plan.Lq, lse + (bh + 1) * plan.Lq, row_lse);
      }
    }
    result.set("promise", val::global("Promise").call<val>("resolve", val::array()));
    result.set("job", 0);
    return result;
  }

  val job = open_job();

  // Flash-decoding when the plan chooses it (webgpu_decode_splits) and each chunk's partials fit
  // one binding; a trace follows the flash kernels' key tiles.
  uint32_t splits = trace ? 0 : webgpu_decode_splits(plan);
  const int64_t chunk_rows = webgpu_most_chunk_rows(chunks);
  if (static_cast<uint64_t>(chunk_rows) * splits * flash.record_bytes() > limits_.largest_binding_bytes()) splits = 0;
  // A quantized cache: its keys and values bound whole, the query quantized first (kv_quantize.wgsl)
  // into a workspace of levels (the quantized decode kernel) or of dequantized floats (the flash
  // and weights kernels).
  const bool quantized = webgpu_quantized(plan.key_type);
  FlashVariant partial;
  if (splits && !webgpu_decode_variant(plan, limits_, flash, &partial)) splits = 0;
  // Otherwise the flash kernels, their keys split where the plan says (webgpu_flash_key_splits):
  // partial records, then the same merge as flash-decoding.
  if (!splits) flash = webgpu_flash_key_splits(plan, limits_, flash, chunk_rows);
  const bool key_split = flash.key_splits > 1;
  val flash_pipeline = val::undefined(), partial_pipeline = val::undefined(), merge_pipeline = val::undefined();
  if (splits) {
    const char* partial_text = partial.decode == 5   ? kAttentionDecodeStreamQuantizedWgsl
                               : partial.decode == 4 ? kAttentionDecodeStreamWgsl
                               : quantized           ? kAttentionDecodeQuantizedWgsl
                                                     : kAttentionDecodePartialWgsl;
    partial_pipeline = pipeline(partial.key(), [&] { return partial.wgsl_constants() + partial_text; }, Layout::kFlash, job);
  } else {
    flash_pipeline = pipeline(
        flash.key(), [&] { return flash.wgsl_constants() + (flash.tiled ? kAttentionFlashTiledWgsl : kAttentionFlashWgsl); },
        Layout::kFlash, job);
  }
  if (splits || key_split) {
    const FlashVariant merge = webgpu_merge_variant(flash, quantized);
    merge_pipeline = pipeline(merge.key(), [&] { return merge.wgsl_constants() + kAttentionDecodeMergeWgsl; }, Layout::kFlash, job);
  }
  val weights_pipeline = val::undefined();
  if (plan.return_weights) {
    const WeightsVariant wv = webgpu_weights_variant(plan, limits_, ScoreStage::kNone, offsets);
    weights_pipeline = pipeline(wv.key(), [&] { return wv.wgsl_constants() + kAttentionWeightsWgsl; }, Layout::kWeights, job);
  }
  val scores_pipeline = val::undefined();
  if (plan.return_scores != ScoreStage::kNone) {
    const WeightsVariant sv = webgpu_weights_variant(plan, limits_, plan.return_scores, offsets);
    scores_pipeline = pipeline(sv.key(), [&] { return sv.wgsl_constants() + kAttentionWeightsWgsl; }, Layout::kWeights, job);
  }
  // The variants' data (per-batch ranges, slopes, sinks, document ids): one buffer for the call.
  const std::vector<uint32_t> variant_words = webgpu_variant_data(plan, in, flash.block_keys);
  const val variants = upload(job, variant_words.data(), 4 * variant_words.size());

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
  const bool output_half = output_on_gpu && output_source["float16"].isTrue();
  // Where the input of `type` lives in the heap (calls without sources).
  const auto heap_of = [](ElementType type, const float* f32, const uint16_t* f16) -> const void* {
    return type == ElementType::kFloat16 ? static_cast<const void*>(f16) : f32;
  };

  for (const WebGpuChunk& c : chunks) {
    const WebGpuChunkBytes bytes = webgpu_chunk_bytes(plan, c);
    const WebGpuChunkElements elements = webgpu_chunk_elements(plan, c);
    uint32_t q_base, k_base, v_base;
    const val q = input(job, encoder, source("query"), heap_of(plan.query_type, in.query, in.query_f16), plan.query_type,
                        webgpu_row_offset(plan, c.bh0, c.row0, plan.E), elements.query, &q_base);
    val k = val::undefined(), v = val::undefined();
    if (quantized) {
      k = whole(source("key")["buffer"]);
      v = whole(source("value")["buffer"]);
      k_base = v_base = 0;
    } else {
      k = input(job, encoder, source("key"), heap_of(plan.key_type, in.key, in.key_f16), plan.key_type,
                c.kv0 * plan.key_head_stride, elements.key, &k_base);
      v = input(job, encoder, source("value"), heap_of(plan.value_type, in.value, in.value_f16), plan.value_type,
                c.kv0 * plan.value_head_stride, elements.value, &v_base);
    }
    val mask = whole(stand_in_read_);
    int64_t mask_base = 0;
    if (plan.mask_kind != MaskKind::kNone) {
      // Bool masks are bytes read as u32 words: start the slice on a word boundary. The tail
      // word may read up to 3 bytes past the mask, inside its 16-byte-rounded heap allocation.
      const uint64_t lo = static_cast<uint64_t>(c.mask_lo) * mask_el & ~uint64_t{3};
      const uint64_t hi = static_cast<uint64_t>(c.mask_hi) * mask_el;
      mask_base = static_cast<int64_t>(lo / mask_el);
      mask = upload(job, static_cast<const uint8_t*>(in.mask) + lo, hi - lo);
    }
    // A float32 GPU output at a binding-aligned offset is written in place; else the chunk is
    // written to a call buffer and copied there (a float16 one: rounded by write_float16.wgsl),
    // or read back.
    const uint64_t out_at = 4ull * webgpu_row_offset(plan, c.bh0, c.row0, plan.Ev);
    const uint64_t out_gpu_at = output_on_gpu ? static_cast<uint64_t>(output_source["offset"].as<double>()) + out_at : 0;
    const bool out_in_place = output_on_gpu && !output_half && out_gpu_at % min_storage_offset_alignment_ == 0;
    val out = val::undefined();
    val out_resource = val::undefined();
    if (out_in_place) {
      out_resource = buffer_range(output_source["buffer"], out_gpu_at, bytes.output);
    } else {
      out = buffer(job, bytes.output, kStorage | kCopySrc);
      out_resource = whole(out);
    }
    val stats = whole(stand_in_stats_);
    val w = val::undefined();
    const uint64_t trace_bytes = trace ? 4 * flash.trace_floats(plan.Lk) : 0;
    if (trace) stats = whole(buffer(job, trace_bytes, kStorage | kCopySrc));  // zeroed: unvisited tiles read 0
    if (plan.return_weights) {
      stats = whole(buffer(job, bytes.stats, kStorage));
      w = buffer(job, bytes.weights, kStorage | kCopySrc);
    }
    const val lse_buffer = plan.return_lse ? buffer(job, bytes.lse, kStorage | kCopySrc) : stand_in_lse_;

    val pass = encoder.call<val>("beginComputePass");
    val query_binding = q;
    if (quantized) {
      QuantizePass qz;
      qz.out = splits ? 2 : 3;
      qz.source_f16 = plan.query_type == ElementType::kFloat16;
      qz.n = static_cast<uint32_t>(c.query_rows());
      qz.dim = static_cast<uint32_t>(plan.E);
      qz.blocks = static_cast<uint32_t>((plan.E + kQuantBlock - 1) / kQuantBlock);
      qz.units = qz.n * qz.blocks;
      qz.source_base = q_base;
      qz.scale_start = qz.units * kQuantBlock / 4;
      const uint64_t workspace = splits ? uint64_t{qz.units} * (kQuantBlock + 4) : 4ull * qz.n * qz.dim;
      const val levels = take(&workspaces_, job, workspace);
      encode_quantize(job, pass, qz, whole(stand_in_read_), q, levels);
      query_binding = levels;
      q_base = 0;
    }
    // The uniforms of a dispatch over `part` of its grid.
    const auto uniforms = [&](const GridPart& part) {
      WebGpuUniforms u = webgpu_uniforms(plan, c, mask_base, part);
      u[kUfQueryBase] = q_base;
      u[kUfKeyBase] = k_base;
      u[kUfValueBase] = v_base;
      if (key_split) {
        u[kUfSplits] = flash.key_splits;
        u[kUfSplitKeys] = flash.split_keys;
      }
      return u;
    };
    auto dispatch = [&](const val& pipeline, SharedBindings* bindings, const GridPart& part) {
      const WebGpuUniforms u = uniforms(part);
      encode_dispatch(job, pass, pipeline, bindings, u.data(), sizeof(u), part);
    };
    const uint64_t rows = static_cast<uint64_t>(c.query_rows());
    // The merge of the records in the stats binding of `bindings` (one per row and split) into
    // the output and log-sum-exp.
    const auto merge_records = [&](SharedBindings* bindings) { encode_merge(job, pass, merge_pipeline, rows, uniforms, bindings); };
    if (splits) {
      // Partials (one record per row and split) in the stats binding, then the merge.
      SharedBindings bindings(flash_bgl_, {query_binding, k, v, mask, out_resource,
                                           take(&records_, job, rows * splits * flash.record_bytes()), variants, whole(lse_buffer)});
      // A workgroup per (split, KV head of the chunk × block of the rows that read it).
      const uint64_t row_blocks = (static_cast<uint64_t>(plan.heads_per_kv()) * c.rows + partial.decode_rows - 1) / partial.decode_rows;
      for (const GridPart& part : split_grid(splits, static_cast<uint64_t>(c.nkv) * row_blocks, limits_.max_workgroups_per_dim)) {
        dispatch(partial_pipeline, &bindings, part);
      }
      merge_records(&bindings);
    } else {
      // With a key split the flash kernel writes partial records (one per row and split) into
      // the stats binding, and the merge the output.
      if (key_split) stats = take(&records_, job, rows * flash.key_splits * flash.record_bytes());
      SharedBindings bindings(flash_bgl_, {query_binding, k, v, mask, out_resource, stats, variants, whole(lse_buffer)});
      const FlashGrid flash_grid = flash.grid(c.rows, c.nbh);
      for (const GridPart& part : split_grid(flash_grid.x, flash_grid.y, limits_.max_workgroups_per_dim)) {
        dispatch(flash_pipeline, &bindings, part);
      }
      if (key_split) merge_records(&bindings);
    }
    const uint64_t key_tiles = (static_cast<uint64_t>(plan.Lk) + kWebGpuWeightsKeys - 1) / kWebGpuWeightsKeys;
    if (plan.return_weights) {
      SharedBindings bindings(weights_bgl_, {query_binding, k, mask, stats, whole(w), variants});
      for (const GridPart& part : split_grid(key_tiles, c.query_rows(), limits_.max_workgroups_per_dim)) {
        dispatch(weights_pipeline, &bindings, part);
      }
    }
    val score_buffer = val::undefined();
    if (plan.return_scores != ScoreStage::kNone) {
      score_buffer = buffer(job, bytes.scores, kStorage | kCopySrc);
      SharedBindings bindings(weights_bgl_, {query_binding, k, mask, whole(stand_in_read_), whole(score_buffer), variants});
      for (const GridPart& part : split_grid(key_tiles, c.query_rows(), limits_.max_workgroups_per_dim)) {
        dispatch(scores_pipeline, &bindings, part);
      }
    }
    if (output_half) {
      val from = val::object();
      from.set("buffer", out);
      from.set("offset", 0);
      from.set("float32", true);
      const uint64_t first = static_cast<uint64_t>(webgpu_row_offset(plan, c.bh0, c.row0, plan.Ev));
      encode_write_float16(job, pass, output_source["buffer"], static_cast<uint64_t>(output_source["offset"].as<double>()),
                           from, {{first, 0, static_cast<uint64_t>(elements.output)}});
    }
    pass.call<void>("end");
    if (output_on_gpu) {
      if (!out_in_place && !output_half) {
        encoder.call<void>("copyBufferToBuffer", out, 0, output_source["buffer"], static_cast<double>(out_gpu_at),
                           static_cast<double>(bytes.output));
      }
    } else if (!output_source.isUndefined()) {
      read_back(out, bytes.output, nullptr, output_source["array"], out_at / 4);
    } else {
      read_back(out, bytes.output, output + out_at / 4);
    }
    if (trace) read_back(stats["buffer"], trace_bytes, trace);
    if (plan.return_weights) {
      read_back(w, bytes.weights, weights + webgpu_row_offset(plan, c.bh0, c.row0, plan.Lk));
    }
    if (plan.return_lse) read_back(lse_buffer, bytes.lse, lse + webgpu_row_offset(plan, c.bh0, c.row0, 1));
    if (plan.return_scores != ScoreStage::kNone) {
      read_back(score_buffer, bytes.scores, scores + webgpu_row_offset(plan, c.bh0, c.row0, plan.Lk));
    }
  }
  close_job(encoder, readbacks, result);
  return result;
}

val WebGpuAttention::run_backward(const AttentionPlan& plan, const AttentionInputs& in, const float* d_output,
                                  const float* output, const float* lse, const BackwardOutputs<float>& out,
                                  bool d_mask, val sources) {
  const auto source = [&](const char* name) { return sources.isUndefined() ? val::undefined() : sources[name]; };
  const val gradients = source("gradients");
  val result = val::object();
  BackwardVariant backward;
  const WebGpuInputOffsets offsets = input_offsets(sources);
  Status s = webgpu_backward_variant(plan, limits_, d_mask, &backward, offsets);
  // The forward's flash kernel (writing the output and log-sum-exp) when they are not given; its
  // key tile also lays out the variants' document tiles.
  AttentionPlan forward_plan = plan;
  forward_plan.return_lse = true;
  forward_plan.return_weights = false;
  forward_plan.return_scores = ScoreStage::kNone;
  FlashVariant flash;
  if (s.ok()) s = webgpu_flash_variant(forward_plan, limits_, &flash, offsets);
  if (s.ok()) s = check_webgpu_backward_fits(plan, limits_, backward);
  const bool has_forward = output != nullptr;
  // Its keys split where the plan says, as in run(): partial records, then the merge writes the
  // output and log-sum-exp. The call runs in one piece: one chunk of every row.
  const WebGpuChunk chunk = webgpu_whole_chunk(plan);
  if (s.ok() && !has_forward) flash = webgpu_flash_key_splits(forward_plan, limits_, flash, chunk.query_rows());
  if (!s.ok()) {
    result.set("error", error_object("RangeError", s.message));
    return result;
  }
  result.set("error", val::null());
  const uint64_t rows = static_cast<uint64_t>(plan.B * plan.Hq * plan.Lq);
  const uint64_t kv_rows = static_cast<uint64_t>(plan.B * plan.Hkv * plan.Lk);
  const uint64_t dq_bytes = 4 * rows * plan.E, dk_bytes = 4 * kv_rows * plan.E, dv_bytes = 4 * kv_rows * plan.Ev;
  const bool mask_gradient = backward.write_d_scores && out.d_mask;
  const bool sinks = !plan.sinks.empty() && out.d_sinks;
  if (rows == 0 || kv_rows == 0) {
    // No query rows or no keys: every gradient is zero (a row that sees only its sink has D = 0).
    if (gradients.isUndefined()) {
      std::memset(out.d_query, 0, dq_bytes);
      std::memset(out.d_key, 0, dk_bytes);
      std::memset(out.d_value, 0, dv_bytes);
    } else {
      val encoder = device_.call<val>("createCommandEncoder");
      for (const char* name : {"dQuery", "dKey", "dValue"}) encoder.call<void>("clearBuffer", gradients[name]);
      val commands = val::array();
      commands.call<void>("push", encoder.call<val>("finish"));
      queue_.call<void>("submit", commands);
    }
    if (mask_gradient) std::fill(out.d_mask, out.d_mask + plan.mask_elements, 0.0f);
    if (sinks) std::fill(out.d_sinks, out.d_sinks + plan.Hq, 0.0f);
    result.set("promise", val::global("Promise").call<val>("resolve", val::array()));
    result.set("job", 0);
    return result;
  }

  val job = open_job();

  const bool key_split = flash.key_splits > 1;
  val flash_pipeline = val::undefined(), merge_pipeline = val::undefined();
  if (!has_forward) {
    flash_pipeline = pipeline(
        flash.key(), [&] { return flash.wgsl_constants() + (flash.tiled ? kAttentionFlashTiledWgsl : kAttentionFlashWgsl); },
        Layout::kFlash, job);
  }
  if (key_split) {
    const FlashVariant merge = webgpu_merge_variant(flash, false);
    merge_pipeline = pipeline(merge.key(), [&] { return merge.wgsl_constants() + kAttentionDecodeMergeWgsl; }, Layout::kFlash, job);
  }
  const auto backward_pipeline = [&](const char* name, const char* text, uint32_t stage = 0) {
    return pipeline(backward.key(name), [&] { return backward.wgsl_constants(stage) + text; }, Layout::kBackward, job);
  };
  const val prep = backward_pipeline("prep", kAttentionBackwardPrepWgsl);
  const val dkdv = backward_pipeline("dkdv", kAttentionBackwardDkdvWgsl);
  const val dq = backward_pipeline("dq", kAttentionBackwardDqWgsl);
  const val reduce_mask = mask_gradient ? backward_pipeline("reduce-mask", kAttentionBackwardReduceWgsl, 0) : val::undefined();
  const val reduce_sinks = sinks ? backward_pipeline("reduce-sinks", kAttentionBackwardReduceWgsl, 1) : val::undefined();
  const bool combine_dkdv = backward.dkdv.splits > 1, combine_dq = backward.dq.splits > 1;
  const val reduce_dkdv = combine_dkdv ? backward_pipeline("reduce-dkdv", kAttentionBackwardReduceWgsl, 2) : val::undefined();
  const val reduce_dq = combine_dq ? backward_pipeline("reduce-dq", kAttentionBackwardReduceWgsl, 3) : val::undefined();

  const WebGpuChunkElements elements = webgpu_chunk_elements(plan, chunk);
  const WebGpuBackwardBytes own = webgpu_backward_bytes(plan, backward);
  const std::vector<uint32_t> variant_words = webgpu_variant_data(plan, in, flash.block_keys);
  const val variants = upload(job, variant_words.data(), 4 * variant_words.size());
  val encoder = device_.call<val>("createCommandEncoder");
  const auto heap_of = [](ElementType type, const float* f32, const uint16_t* f16) -> const void* {
    return type == ElementType::kFloat16 ? static_cast<const void*>(f16) : f32;
  };
  uint32_t q_base, k_base, v_base, unused_base;
  const val q = input(job, encoder, source("query"), heap_of(plan.query_type, in.query, in.query_f16), plan.query_type, 0,
                      elements.query, &q_base);
  const val k = input(job, encoder, source("key"), heap_of(plan.key_type, in.key, in.key_f16), plan.key_type, 0,
                      elements.key, &k_base);
  const val v = input(job, encoder, source("value"), heap_of(plan.value_type, in.value, in.value_f16), plan.value_type, 0,
                      elements.value, &v_base);
  const val d_out = input(job, encoder, source("dOutput"), d_output, ElementType::kFloat32, 0, elements.output, &unused_base);
  val mask = whole(stand_in_read_);
  if (plan.mask_kind != MaskKind::kNone) {
    const uint64_t mask_bytes = static_cast<uint64_t>(plan.mask_elements) * (plan.mask_kind == MaskKind::kBool ? 1 : 4);
    mask = upload(job, in.mask, mask_bytes);
  }
  // The forward's output (given, or written by the flash kernel) and rowstats, whose first R
  // floats are the log-sum-exp.
  const val rowstats = buffer(job, own.rowstats, kStorage | kCopySrc | kCopyDst);
  val forward_output = val::undefined();
  if (has_forward) {
    // Its own buffer, not an upload's region: prep binds it beside read-only uploads at a
    // binding that the flash kernel writes, and one buffer may not be both in a dispatch.
    forward_output = buffer(job, 4 * rows * plan.Ev, kStorage | kCopyDst);
    queue_.call<void>("writeBuffer", forward_output, 0, heap_view(output, 4 * rows * plan.Ev));
    queue_.call<void>("writeBuffer", rowstats, 0, heap_view(lse, 4 * rows));
  } else {
    forward_output = buffer(job, 4 * rows * plan.Ev, kStorage);
  }
  const val grad_query = buffer(job, own.grad_query, kStorage | kCopySrc);
  const val grad_key_value = buffer(job, own.grad_key_value, kStorage | kCopySrc);

  val pass = encoder.call<val>("beginComputePass");
  // `splits`, `split_length`: what the kernel reads as p.splits and p.split_keys (a tile pass's
  // segments and rows or keys per segment, the forward's key splits and keys per split); 0
  // leaves the plan's.
  const auto uniforms = [&](const GridPart& part, uint32_t splits = 0, uint32_t split_length = 0) {
    WebGpuUniforms u = webgpu_uniforms(plan, chunk, 0, part);
    u[kUfQueryBase] = q_base;
    u[kUfKeyBase] = k_base;
    u[kUfValueBase] = v_base;
    if (splits != 0) {
      u[kUfSplits] = splits;
      u[kUfSplitKeys] = split_length;
    }
    return u;
  };
  const auto dispatch = [&](const val& pipe, SharedBindings* bindings, const GridPart& part, uint32_t splits = 0,
                            uint32_t split_length = 0) {
    const WebGpuUniforms u = uniforms(part, splits, split_length);
    encode_dispatch(job, pass, pipe, bindings, u.data(), sizeof(u), part);
  };
  const auto grid = [&](uint64_t x, uint64_t y) { return split_grid(x, y, limits_.max_workgroups_per_dim); };
  const auto tiles = [](uint64_t n, uint64_t per) { return (n + per - 1) / per; };
  if (!has_forward) {
    const val lse_resource = buffer_range(rowstats, 0, 4 * rows);
    // With a key split the flash kernel writes a record per row and split into the stats
    // binding, and the merge the output and log-sum-exp from them.
    const val stats = key_split ? take(&records_, job, rows * flash.key_splits * flash.record_bytes()) : whole(stand_in_stats_);
    const uint32_t key_splits = key_split ? flash.key_splits : 0;
    const FlashGrid flash_grid = flash.grid(plan.Lq, plan.B * plan.Hq);
    SharedBindings forward(flash_bgl_, {q, k, v, mask, whole(forward_output), stats, variants, lse_resource});
    for (const GridPart& part : grid(flash_grid.x, flash_grid.y)) dispatch(flash_pipeline, &forward, part, key_splits, flash.split_keys);
    if (key_split) {
      encode_merge(job, pass, merge_pipeline, rows, [&](const GridPart& part) { return uniforms(part, key_splits, flash.split_keys); },
                   &forward);
    }
  }
  // The passes' bindings: each writes rowstats and one of the forward's output (prep), dK/dV or dQ.
  SharedBindings to_prep(backward_bgl_, {q, k, v, mask, variants, d_out, whole(rowstats), whole(forward_output)});
  SharedBindings to_dkdv(backward_bgl_, {q, k, v, mask, variants, d_out, whole(rowstats), whole(grad_key_value)});
  SharedBindings to_dq(backward_bgl_, {q, k, v, mask, variants, d_out, whole(rowstats), whole(grad_query)});
  for (const GridPart& part : grid(tiles(rows, kWebGpuBackwardInvocations), 1)) dispatch(prep, &to_prep, part);
  for (const GridPart& part : grid(backward.dkdv.heads, backward.dkdv.y())) {
    dispatch(dkdv, &to_dkdv, part, backward.dkdv.splits, backward.dkdv.segment);
  }
  if (combine_dkdv) {
    for (const GridPart& part : grid(tiles(kv_rows * (plan.E + plan.Ev), kWebGpuBackwardInvocations), 1)) {
      dispatch(reduce_dkdv, &to_dkdv, part, backward.dkdv.splits, backward.dkdv.segment);
    }
  }
  for (const GridPart& part : grid(backward.dq.heads, backward.dq.y())) {
    dispatch(dq, &to_dq, part, backward.dq.splits, backward.dq.segment);
  }
  if (combine_dq) {
    // dQ's elements, then (with sinks) one invocation per row for its sink term.
    const uint64_t results = rows * plan.E + (backward.variants.sinks ? rows : 0);
    for (const GridPart& part : grid(tiles(results, kWebGpuBackwardInvocations), 1)) {
      dispatch(reduce_dq, &to_dq, part, backward.dq.splits, backward.dq.segment);
    }
  }
  if (mask_gradient) {
    for (const GridPart& part : grid(tiles(plan.mask_elements, kWebGpuBackwardInvocations), 1)) {
      dispatch(reduce_mask, &to_dq, part);
    }
  }
  if (sinks) {
    for (const GridPart& part : grid(tiles(plan.Hq, kWebGpuBackwardInvocations), 1)) {
      dispatch(reduce_sinks, &to_dq, part);
    }
  }
  pass.call<void>("end");

  // Bytes [from, from + bytes) of `src` into the heap at `dst`, or into a caller's GPUBuffer.
  val readbacks = job["readbacks"];
  const auto read_back = [&](const val& src, uint64_t from, uint64_t bytes, float* dst) {
    if (bytes == 0) return;
    val staging = buffer(job, bytes, kMapRead | kCopyDst);
    encoder.call<void>("copyBufferToBuffer", src, static_cast<double>(from), staging, 0, static_cast<double>(bytes));
    val r = val::object();
    r.set("buffer", staging);
    r.set("dst", static_cast<double>(reinterpret_cast<uintptr_t>(dst)));
    r.set("bytes", static_cast<double>(bytes));
    r.set("target", val::undefined());
    r.set("at", 0);
    readbacks.call<void>("push", r);
  };
  const auto copy_to = [&](const val& src, uint64_t from, uint64_t bytes, const val& dst) {
    if (bytes > 0) encoder.call<void>("copyBufferToBuffer", src, static_cast<double>(from), dst, 0, static_cast<double>(bytes));
  };
  if (gradients.isUndefined()) {
    read_back(grad_query, 0, dq_bytes, out.d_query);
    read_back(grad_key_value, 0, dk_bytes, out.d_key);
    read_back(grad_key_value, dk_bytes, dv_bytes, out.d_value);
  } else {
    copy_to(grad_query, 0, dq_bytes, gradients["dQuery"]);
    copy_to(grad_key_value, 0, dk_bytes, gradients["dKey"]);
    copy_to(grad_key_value, dk_bytes, dv_bytes, gradients["dValue"]);
  }
  const uint64_t reductions = 4 * kWebGpuBackwardRowRegions * rows;  // after the row regions
  if (mask_gradient) read_back(rowstats, reductions, 4 * static_cast<uint64_t>(plan.mask_elements), out.d_mask);
  if (sinks) {
    const uint64_t mask_floats = backward.write_d_scores ? static_cast<uint64_t>(plan.mask_elements) : 0;
    read_back(rowstats, reductions + 4 * mask_floats, 4 * static_cast<uint64_t>(plan.Hq), out.d_sinks);
  }
  close_job(encoder, readbacks, result);
  return result;
}

val WebGpuAttention::new_job() {
  for (ReusedBuffer* reused : {&uniform_uploads_, &storage_uploads_, &records_, &workspaces_}) reused->used = 0;
  val job = val::object();
  job.set("buffers", val::array());
  job.set("created", val::array());
  job.set("groups", val::array());
  return job;
}

val WebGpuAttention::open_job() {
  const int id = next_job_++;
  val job = new_job();
  job.set("readbacks", val::array());
  jobs_.call<void>("set", id, job);
  device_.call<void>("pushErrorScope", std::string("internal"));
  device_.call<void>("pushErrorScope", std::string("out-of-memory"));
  device_.call<void>("pushErrorScope", std::string("validation"));
  open_job_ = id;  // until close_job(): abandon() undoes a run that a JS exception cut short
  return job;
}

void WebGpuAttention::close_job(const val& encoder, const val& readbacks, val result) {
  val commands = val::array();
  commands.call<void>("push", encoder.call<val>("finish"));
  queue_.call<void>("submit", commands);
  // Results, in this order: validation, out-of-memory, internal (scopes pop innermost first),
  // then one entry per readback.
  val promises = val::array();
  for (int n = 0; n < 3; ++n) promises.call<void>("push", device_.call<val>("popErrorScope"));
  const int count = readbacks["length"].as<int>();
  for (int n = 0; n < count; ++n) promises.call<void>("push", readbacks[n]["buffer"].call<val>("mapAsync", kMapModeRead));
  result.set("promise", val::global("Promise").call<val>("all", promises));
  result.set("job", open_job_);
  open_job_ = 0;
}

void WebGpuAttention::abandon() {
  const int id = open_job_;
  if (id == 0) return;
  open_job_ = 0;
  for (int n = 0; n < 3; ++n) device_.call<val>("popErrorScope");  // what they caught is moot now
  const val job = jobs_.call<val>("get", id);
  if (job.isUndefined()) return;
  forget_created(job);
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
      // Forget the pipelines and bind groups this call made: they may be the cause (e.g. a
      // shader that does not compile).
      forget_created(job);
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
  limits.set("shaderF16", limits_.shader_f16);
  limits.set("packedIntegerDotProduct", limits_.packed_dot);
  limits.set("subgroups", limits_.subgroups);
  limits.set("subgroupMinSize", limits_.subgroup_min_size);
  limits.set("prefillSplitKeys", limits_.min_split_keys);
  val out = val::object();
  out.set("limits", limits);
  out.set("pipelines", val::global("Array").call<val>("from", pipelines_.call<val>("keys")));
  out.set("jobsInFlight", jobs_["size"]);
  out.set("float16", webgpu_float16_path_name(limits_.shader_f16 ? WebGpuFloat16Path::kShaderF16 : WebGpuFloat16Path::kUnpack));
  return out;
}

}  // namespace sdpa
