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

#include <string>

#include "core/problem.h"
#include "webgpu/plan.h"

namespace sdpa {

class WebGpuAttention {
 public:
  // device: a GPUDevice. caps: optional { maxStorageBufferBindingSize, maxBufferSize,
  // maxComputeWorkgroupsPerDimension, maxComputeWorkgroupStorageSize,
  // maxComputeInvocationsPerWorkgroup } that can only lower the device's own limits (for tests
  // of the splitting and of the kernel choice).
  WebGpuAttention(emscripten::val device, emscripten::val caps);

  // -> { error: null, promise, job } once submitted, or { error: { name, message } } when the
  // call cannot be planned for this device (RangeError).
  // `scores` ([B, Hq, Lq, Lk]) is written when plan.return_scores asks for a stage.
  // With a `trace` (traceOnlineSoftmax), query row `trace_row` ((b·Hq + h)·Lq + i) records its
  // online-softmax state after each key tile there (trace_floats(plan) floats; the layout is in
  // attention_flash_common.wgsl.inc); the call must run in one piece.
  // `sources` (or undefined): per tensor (query, key, value, output), where it lives instead of
  // the wasm heap: { array } a caller's Float32Array (written with writeBuffer straight from it;
  // the output read back straight into it), or { buffer, offset } a caller's GPUBuffer (inputs
  // bound in place at binding-aligned offsets, else copied on the GPU; the output written there).
  emscripten::val run(const AttentionPlan& plan, const AttentionInputs& in, float* output,
                      float* weights, float* scores, uint32_t trace_row = FlashVariant::kNoTrace,
                      float* trace = nullptr, emscripten::val sources = emscripten::val::undefined());
  // { floats, tileKeys, lanes, stride } of a trace of `plan` on this device, or { error }.
  emscripten::val trace_layout(const AttentionPlan& plan) const;
  // results: what the call's promise resolved to. Copies the readbacks into the wasm heap and
  // returns null, or returns { kind: 'validation'|'out-of-memory'|'internal', message }.
  emscripten::val finish(int job, emscripten::val results);
  // Destroys the call's GPU buffers (idempotent).
  void release(int job);
  // After run() threw part-way (a JS exception from the device, e.g. createBuffer throwing a
  // RangeError): pops the error scopes it pushed, forgets pipelines it created and destroys its
  // buffers. Does nothing when no run() is left open.
  void abandon();

  // { limits: {...}, pipelines: [keys], jobsInFlight }
  emscripten::val info() const;

 private:
  emscripten::val pipeline(const std::string& key, const std::string& source, bool weights,
                           emscripten::val job);
  emscripten::val buffer(emscripten::val job, uint64_t bytes, uint32_t usage);
  emscripten::val upload(emscripten::val job, const void* data, uint64_t bytes, uint32_t usage);
  // A binding resource { buffer, offset?, size? } for `bytes` of an input from `byte_offset`:
  // from `source` ({ array } or { buffer, offset }) or, when undefined, the heap at `heap`.
  emscripten::val input(emscripten::val job, emscripten::val encoder, const emscripten::val& source,
                        const void* heap, uint64_t byte_offset, uint64_t bytes);

  emscripten::val device_;
  emscripten::val queue_;
  emscripten::val pipelines_;  // Map<key, GPUComputePipeline>
  emscripten::val jobs_;       // Map<id, { buffers, readbacks, created }>
  emscripten::val flash_layout_, weights_layout_;
  emscripten::val flash_bgl_, weights_bgl_;
  WebGpuLimits limits_;
  uint32_t min_storage_offset_alignment_ = 256;  // minStorageBufferOffsetAlignment
  int next_job_ = 1;
  int open_job_ = 0;  // the run() between pushing its error scopes and returning, else 0
};

}  // namespace sdpa
