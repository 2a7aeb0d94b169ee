// The WebGPU backend's device glue: drives the standard WebGPU JS API through emscripten::val
// (no Emscripten WebGPU bindings: 3.1.6's -sUSE_WEBGPU is the removed 2022 API). It owns a
// GPUDevice handed in from JavaScript, caches one compute pipeline per variant, cuts each call
// into dispatches (cpp/webgpu/plan.h), and returns the promise of the call's readbacks to
// JavaScript, which awaits it and then calls finish(). Only wasm builds compile this file.
//
// Life of one call (the TypeScript layer drives it):
//   started = ctx.run(plan, inputs, output, weights)   // uploads, encodes, submits
//                                                      // -> { promise, job } or { error }
//   results = await started.promise                    // [error scopes..., mapAsync...]
//   fault   = ctx.finish(job, results)                 // copies readbacks into the wasm heap
//   ctx.release(job)                                   // always: destroys the call's buffers
// Per-call state lives in JS objects (not on the wasm heap), so in-flight calls cost no wasm
// memory and many may be in flight at once.
#pragma once

#include <emscripten/val.h>

#include <array>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/reference_backward.h"
#include "webgpu/plan.h"

namespace sdpa {

class WebGpuAttention {
 public:
  // device: a GPUDevice. caps: optional { maxStorageBufferBindingSize, maxBufferSize,
  // maxComputeWorkgroupsPerDimension, maxComputeWorkgroupStorageSize,
  // maxComputeInvocationsPerWorkgroup, shaderF16 } that can only lower the device's own limits
  // (for tests of the splitting and of the kernel choice); shaderF16: false reads float16
  // through unpack2x16float even where the device has 'shader-f16'.
  WebGpuAttention(emscripten::val device, emscripten::val caps);
  // Destroys the stand-in buffers it holds for every call.
  ~WebGpuAttention();
  WebGpuAttention(const WebGpuAttention&) = delete;
  WebGpuAttention& operator=(const WebGpuAttention&) = delete;

  // -> { error: null, promise, job } once submitted, or { error: { name, message } } when the
  // call cannot be planned for this device (RangeError).
  // `scores` ([B, Hq, Lq, Lk]) is written when plan.return_scores asks for a stage, `lse`
  // ([B, Hq, Lq], each row's log-sum-exp) when plan.return_lse.
  // With a `trace` (traceOnlineSoftmax), query row `trace_row` ((b·Hq + h)·Lq + i) records its
  // online-softmax state after each key tile there (trace_floats(plan) floats; the layout is in
  // attention_flash_common.wgsl.inc); the call must run in one piece.
  // `sources` (or undefined): per tensor (query, key, value, output), where it lives instead of
  // the wasm heap: { array } a caller's Float32Array (written with writeBuffer straight from it;
  // the output read back straight into it), or { buffer, offset } a caller's GPUBuffer (inputs
  // bound in place at binding-aligned offsets, else copied on the GPU; the output written there).
  // A float16 input (the plan's query/key/value type) is a Uint16Array of its bits, or a GPUBuffer
  // of packed halves at an even byte offset, bound in place from the binding-aligned offset at or
  // before it. An output { buffer, offset, float16: true } receives packed halves (the float32
  // result rounded on the GPU by write_float16.wgsl); other outputs are float32.
  emscripten::val run(const AttentionPlan& plan, const AttentionInputs& in, float* output,
                      float* weights, float* scores, float* lse, uint32_t trace_row = FlashVariant::kNoTrace,
                      float* trace = nullptr, emscripten::val sources = emscripten::val::undefined());
  // The backward (attention_backward_*.wgsl, in one piece: check_webgpu_backward_fits): dQ, dK,
  // dV, and the mask's and sinks' gradients into `out` (the wasm heap), or, with
  // sources.gradients = { dQuery, dKey, dValue } GPUBuffers (STORAGE | COPY_DST, whole), the
  // first three there. `output` and `lse`: the forward's (both or neither; without them the flash
  // kernel runs first and writes them on the GPU). `sources`: query, key, value and dOutput as in
  // run(). -> { error } or { error: null, promise, job }, awaited and finished as run()'s.
  emscripten::val run_backward(const AttentionPlan& plan, const AttentionInputs& in, const float* d_output,
                               const float* output, const float* lse, const BackwardOutputs<float>& out,
                               bool d_mask, emscripten::val sources);
  // { floats, tileKeys, lanes, stride, kernel } of a trace of `plan` on this device (`sources` as
  // run() takes them: the kernel's vector bindings follow the GPU tensors' offsets), or { error }.
  emscripten::val trace_layout(const AttentionPlan& plan, const emscripten::val& sources) const;
  // results: what the call's promise resolved to. Copies the readbacks into the wasm heap and
  // returns null, or returns { kind: 'validation'|'out-of-memory'|'internal', message }.
  emscripten::val finish(int job, emscripten::val results);
  // Destroys the call's GPU buffers (idempotent).
  void release(int job);
  // After run() threw part-way (a JS exception from the device, e.g. createBuffer throwing a
  // RangeError): pops the error scopes it pushed, forgets pipelines it created and destroys its
  // buffers. Does nothing when no run() is left open.
  void abandon();

  // Writes float16 elements, for each of `writes` ({ destination, source, runs }), into
  // `destination` (a GPUBuffer of packed halves, STORAGE) from `source`: { array } a Uint16Array
  // of halves, or { buffer, offset, float32? } a GPUBuffer of halves (float32: of floats, rounded
  // to the nearest half) from byte `offset`. `runs`: [destination element, source element,
  // count, ...] triples, at any element offsets (write_float16.wgsl keeps the halves around each
  // run). One command buffer for all, submitted at once.
  void write_float16(emscripten::val writes);

  // Appends rows to an int8/int4 KV cache's keys and values (the format of
  // core/kv_cache_format.h), quantized on the GPU by kv_quantize.wgsl, in one command buffer
  // submitted at once. `writes`: [{ destination, source, float16, dim }], `source` { array } (a
  // Float32Array, or a Uint16Array of halves: float16) or { buffer, offset } (a GPUBuffer),
  // holding rows [B·Hkv, n, dim]; `rows`: { int4, kvHeads, n, maxLength, held: [B], added: [B] }:
  // row t of batch b's heads goes to key held[b] + t when t < added[b].
  void write_quantized(emscripten::val writes, emscripten::val rows);

  // { limits: {...}, pipelines: [keys], jobsInFlight, float16: 'shader-f16' | 'unpack2x16float'
  // (how the kernels read float16 tensors on this device) }
  emscripten::val info() const;

 private:
  enum class Layout { kFlash, kWeights, kWrite, kBackward };
  // The compiled pipeline of `key`, from the cache or compiled now from `source()` (called only
  // then: building a kernel's source costs more than looking its key up).
  emscripten::val pipeline(const std::string& key, const std::function<std::string()>& source, Layout layout,
                           emscripten::val job);
  // The bind group of `layout` with binding 0 `uniforms` and bindings 1, 2, … `resources` (each
  // { buffer } or { buffer, offset, size }): the one made for the same layout, buffers and ranges
  // before, else made now. A decode step, an append and a layer's next call bind what they bound
  // the token before (the reused buffers' regions start at their starts), and making a bind group
  // is most of what such a call costs the CPU besides its submission. The kBindGroupCacheSize
  // least recently used are kept; a job that fails forgets those it made.
  emscripten::val bind_group(emscripten::val job, const emscripten::val& layout, const emscripten::val& uniforms,
                             const std::vector<emscripten::val>& resources);
  // The number this instance gave a GPU object (object_ids_), for bind_group's keys.
  uint64_t object_id(const emscripten::val& object);
  // Forgets the pipelines and bind groups that `job` made: they may be what failed.
  void forget_created(const emscripten::val& job);
  // A job's { buffers, created, groups }: the buffers its commands use, destroyed when it ends,
  // and the pipelines and bind groups it made. Its regions of the reused buffers start from their
  // starts again.
  emscripten::val new_job();
  // Starts a run's job (new_job()'s, with readbacks: released by finish(), or by abandon()
  // until close_job()) and pushes its error scopes.
  emscripten::val open_job();
  // Submits `encoder`'s commands and ends the open job: result.promise resolves to its popped
  // error scopes then one entry per readback, result.job is its id for finish().
  void close_job(const emscripten::val& encoder, const emscripten::val& readbacks, emscripten::val result);
  // A buffer of the call's own, destroyed with its job.
  emscripten::val buffer(emscripten::val job, uint64_t bytes, uint32_t usage);
  // A buffer that every call reuses: each call takes regions from its start, binding-aligned
  // and bound with their size. The queue runs a call's writes (queue.writeBuffer, its encoder's
  // copies and kernels) after the commands of the calls before, so calls never see each other's
  // data, and no call makes a buffer for it. Outgrown, it is replaced by one sized for the whole
  // call (the old one is destroyed with the call's buffers), up to kReusedBufferMaxBytes; a
  // larger region is a buffer of the call's own. An instance has four: for uniforms; for what
  // a call gives its kernels to read from the CPU (inputs, masks, the variants' data, segments),
  // which no kernel writes (a dispatch may bind a buffer read-only several times, never also
  // writable); for the partial records of key splits, which one kernel writes and the merge
  // reads; and for the query that a quantized cache's call quantizes first, which the kernels
  // after read beside the records they write (each record and query element is written before
  // it is read: no call relies on zeros there).
  struct ReusedBuffer {
    uint32_t usage = 0;
    uint64_t alignment = 256;
    emscripten::val buffer = emscripten::val::undefined();
    uint64_t bytes = 0;  // its size; 0 until the first call made it
    uint64_t used = 0;   // taken by the current call
  };
  // A binding resource { buffer, offset, size } of `bytes` (at least 16) from `reused`.
  emscripten::val take(ReusedBuffer* reused, emscripten::val job, uint64_t bytes);
  // Regions of the reused buffers holding `bytes` of the heap at `data`: read-only storage, or
  // a dispatch's uniforms.
  emscripten::val upload(emscripten::val job, const void* data, uint64_t bytes);
  emscripten::val upload_uniforms(emscripten::val job, const void* data, uint64_t bytes);
  // A region holding floats [from, from + count) of a Float32Array.
  emscripten::val upload_floats(emscripten::val job, const emscripten::val& array, uint64_t from, uint64_t count);
  // A region holding halves [from, from + count) of a Uint16Array (writeBuffer moves whole
  // 4-byte words: an odd count's last half goes in a word of its own).
  emscripten::val upload_halves(emscripten::val job, const emscripten::val& array, uint64_t from, uint64_t count);
  // A binding resource { buffer, offset?, size? } for `elements` of an input of `type` from
  // element `element_offset`: from `source` ({ array } or { buffer, offset }) or, when
  // undefined, the heap at `heap`. *base: elements from the binding's start to the data (a
  // float16 GPUBuffer bound from the aligned offset before it), else 0.
  emscripten::val input(emscripten::val job, emscripten::val encoder, const emscripten::val& source,
                        const void* heap, ElementType type, uint64_t element_offset, uint64_t elements,
                        uint32_t* base);
  // A resource for bytes [at, at + bytes) of `buffer` bound from the binding-aligned offset at or
  // before `at` (to the 4-byte boundary after the end); *skipped: the bytes before `at`.
  emscripten::val bind_from(const emscripten::val& buffer, uint64_t at, uint64_t bytes, uint64_t* skipped) const;
  // Encodes write_float16.wgsl into `pass`: `runs` (destination element, source element,
  // count) from `source` (as write_float16) to `destination` from byte `destination_at`; runs
  // share a dispatch while their spans fit one binding, and a run too long for one is cut.
  void encode_write_float16(emscripten::val job, emscripten::val pass, const emscripten::val& destination,
                            uint64_t destination_at, const emscripten::val& source,
                            const std::vector<std::array<uint64_t, 3>>& runs);
  // What kv_quantize.wgsl does in one encoding: OUT (0/1 cache int8/int4, 2 query levels, 3 query
  // dequantized), its source's halves or floats, and its QuantizeParams after x_base.
  struct QuantizePass {
    uint32_t out = 0;
    bool source_f16 = false;
    uint32_t units = 0, hkv = 1, n = 0, dim = 0, blocks = 0, source_base = 0, rows = 0, scale_start = 0;
  };
  // Encodes kv_quantize.wgsl into `pass` (segments: held/added per batch for a cache, else unused).
  void encode_quantize(emscripten::val job, emscripten::val pass, const QuantizePass& q, const emscripten::val& segments,
                       const emscripten::val& source, const emscripten::val& destination);
  // The bindings from 1 on that dispatches of a call share, and their one bind group: binding 0,
  // each dispatch's uniforms, is bound at a dynamic offset into the reused uniforms buffer. The
  // group is made by the first dispatch, and again only when that buffer was replaced.
  struct SharedBindings {
    SharedBindings(emscripten::val layout, std::initializer_list<emscripten::val> resources)
        : layout(std::move(layout)), resources(resources) {}
    emscripten::val layout;  // the GPUBindGroupLayout
    std::vector<emscripten::val> resources;
    emscripten::val group = emscripten::val::undefined();
    emscripten::val uniform_buffer = emscripten::val::undefined();  // the buffer `group` binds
  };
  // Encodes `pipeline` on `pass` over the workgroups of `part` with `bindings`, its uniforms the
  // `bytes` at `uniforms`.
  void encode_dispatch(emscripten::val job, const emscripten::val& pass, const emscripten::val& pipeline,
                       SharedBindings* bindings, const void* uniforms, uint64_t bytes, const GridPart& part);
  // Encodes attention_decode_merge.wgsl (`merge_pipeline`) into `pass`: the records in the stats
  // binding of `bindings` (the flash layout's), one per query row and key split, merged into the
  // output and log-sum-exp by a workgroup per row of the `rows`; `uniforms(part)` gives each part
  // of that grid its uniforms.
  void encode_merge(emscripten::val job, emscripten::val pass, const emscripten::val& merge_pipeline, uint64_t rows,
                    const std::function<WebGpuUniforms(const GridPart&)>& uniforms, SharedBindings* bindings);
  // A command buffer of one compute pass, encoded by encode(job, pass) in a job of its own, submitted
  // at once; then the job's buffers are destroyed.
  void submit_compute_pass(const std::function<void(const emscripten::val& job, const emscripten::val& pass)>& encode);

  emscripten::val device_;
  emscripten::val queue_;
  // Map<key, GPUComputePipeline>: a JS Map, so that the cache, which grows with the variants a
  // program uses, stays off the wasm heap (whose use the tests hold flat across calls).
  emscripten::val pipelines_;
  emscripten::val jobs_;       // Map<id, { buffers, readbacks, created, groups }>
  // Map<key, GPUBindGroup> in order of last use, and WeakMap<GPU object, number> (bind_group).
  emscripten::val bind_groups_, object_ids_;
  uint64_t next_object_id_ = 0;
  emscripten::val flash_layout_, weights_layout_, write_layout_, backward_layout_;
  emscripten::val flash_bgl_, weights_bgl_, write_bgl_, backward_bgl_;
  // Stand-ins for the bindings a variant does not use, made once for every call: one read-only
  // (no mask, no statistics to read) and, since the writable bindings of one dispatch must not
  // alias, one each for statistics and log-sum-exp. No kernel reads or writes them.
  emscripten::val stand_in_read_, stand_in_stats_, stand_in_lse_;
  ReusedBuffer uniform_uploads_, storage_uploads_, records_, workspaces_;
  WebGpuLimits limits_;
  uint32_t min_storage_offset_alignment_ = 256;  // minStorageBufferOffsetAlignment
  int next_job_ = 1;
  int open_job_ = 0;  // the job between open_job() and close_job(), else 0
};

}  // namespace sdpa
