// The CPU backends of the forward and backward passes, the one place that chooses between them,
// and the one per-call thread policy (threads_for, threads_to_run; the kernels' cost estimates it
// reads are in dispatch/cost_model.h). Kernels and the pool run on the thread count given here.
//   forward   scalar: attention_reference<float> (plain loops, materializes one [Lq, Lk] head)
//             simd:   attention_f32_simd128 (fused, tiled, online softmax; multi-threaded), or
//                     attention_decode_f32_simd128 when the query rows per KV head are few and
//                     the keys many (a generation step: K/V read once, split-K over threads)
//   backward  scalar: attention_backward_reference<float> (recomputes P, one [Lq, Lk] head)
//             simd:   attention_backward_f32_simd128 (FlashAttention-2 style, from the forward's
//                     output and log-sum-exp; runs the forward itself when they are not passed)
//   float16   inputs are widened to float32 in the workspace (exactly) before the kernels run,
//             except the keys and values the decode kernel reads in place (float16_in_place).
//   int8/int4 a KV cache's keys and values are dequantized to float32 and the query rounded through
//             int8 blocks (docs/kv-cache-formats.md) before the kernels run, except where the
//             quantized decode kernel (attention_decode_quantized_simd128) reads them in place.
#pragma once

#include <cstdint>
#include <vector>

#include "core/problem.h"
#include "core/reference_backward.h"
#include "cpu/attention_decode_f32_simd128.h"
#include "cpu/attention_decode_quantized_simd128.h"
#include "cpu/attention_f32_simd128.h"
#include "cpu/thread_pool.h"

namespace sdpa {

enum class Backend {
  kScalar,   // the float32 reference
  kSimd128,  // the f32x4 kernels
};

enum class Pass { kForward, kBackward };

// The threads one call may run on, what its workspace is sized for, given the threads asked for
// (`requested`, <= 0: every thread of the pool) and the pool's size (`pool_threads`,
// cpu/thread_pool.h's max_threads()): min(requested, pool_threads) for the SIMD forward, cut so
// that each thread gets at least cost::kForwardMultiplyAddsPerThread multiply-adds (below that the
// hand-off and the packing of K on one thread while the others wait cost more than another thread
// saves). The scalar backend and every backward kernel run on one thread. At least 1.
int threads_for(Backend backend, Pass pass, const AttentionPlan& plan, int requested, int pool_threads);

// The threads the call runs on now, from threads_for's count (`threads`) and the pool's wake state
// (cpu/thread_pool.h's pool_wake_state(); run_attention reads it just before the kernel): a call
// that one thread finishes sooner than a sleeping helper has recently taken to wake runs on the
// helpers still awake (waking the others would make it slower), unless it follows the previous
// call while the helpers spin (in a stream of calls the helpers woken by one stay awake for the
// rest). Longer calls wake them: a lone call of one to two wake-ups may lose a little, the calls
// after it gain. One thread's time is the kernel's estimate in cost_model.h. At most `threads`.
int threads_to_run(Backend backend, const AttentionPlan& plan, int threads, const PoolWakeState& wake);

// Whether the SIMD forward of `plan` runs the decode kernel: at most kDecodeMaxRows query rows per
// KV head ((Hq/Hkv)·Lq; kDecodeMaxRowsQuantized on an int8/int4 cache, which the tile kernel would
// first dequantize whole), at least kDecodeMinKeys keys, and no weights or score output.
constexpr int64_t kDecodeMaxRows = 16;
constexpr int64_t kDecodeMaxRowsQuantized = 64;
constexpr int64_t kDecodeMinKeys = 64;
bool uses_decode_kernel(const AttentionPlan& plan);

// The decode kernel's split of each (batch, KV head)'s keys: about kDecodeTasks tasks over all
// heads' keys (so up to ~8 threads balance, ragged key lengths included), each split at least
// kDecodeMinSplitKeys keys (a multiple of the chunk). It depends on the plan alone, not on the
// thread count, so the result is bit-identical on any number of threads.
constexpr int64_t kDecodeTasks = 32;
constexpr int64_t kDecodeMinSplitKeys = 256;
DecodeSplit decode_split(const AttentionPlan& plan);

// Whether the forward of `plan` on `backend` reads an int8/int4 KV cache in place (the quantized
// decode kernel) rather than dequantizing it to float32 first (scalar, and the SIMD tile kernel).
bool quantized_in_place(Backend backend, const AttentionPlan& plan);

// Whether the forward of `plan` on `backend` reads float16 keys and values in place (the decode
// kernel, on K/V known to hold no Inf/NaN) rather than widening them to float32 first.
bool float16_in_place(Backend backend, const AttentionPlan& plan);

// Scratch bytes the forward on `backend` needs for `plan` on `threads` threads (threads_for),
// float16 inputs' widened copies included; the caller allocates them (kernels never allocate).
uint64_t workspace_bytes(Backend backend, const AttentionPlan& plan, int threads = 1);

// Runs the forward on threads_to_run(threads) threads (the workspace must be sized for `threads`). `weights` is
// written only when plan.return_weights; `lse` ([B, Hq, Lq], the rows' log-sum-exp that the
// backward pass reuses) only when not null; `scores` ([B, Hq, Lq, Lk], the stage
// plan.return_scores) only when that stage is not kNone. With streamed inputs (in.arrival), the
// caller's OverlappedWork (cpu/thread_pool.h) is what copies them.
void run_attention(Backend backend, const AttentionPlan& plan, const AttentionInputs& in,
                   float* output, float* weights, void* workspace, int threads = 1,
                   float* lse = nullptr, float* scores = nullptr);

// Every input of `plan` as dense float32, as run_attention converts them for a kernel that reads
// none in place: float16 ones widened, a quantized cache's keys and values dequantized (level ·
// scale in float32) and the query rounded through int8 blocks. The float64 reference of a call on
// a KV cache reads these. dense_inputs writes them at `workspace` (dense_inputs_bytes(plan)
// bytes) into *dense and returns the plan they follow (dense head strides).
uint64_t dense_inputs_bytes(const AttentionPlan& plan);
AttentionPlan dense_inputs(const AttentionPlan& plan, const AttentionInputs& in, void* workspace, AttentionInputs* dense);

// The SIMD tile kernel on one thread with its online-softmax trace of one row (the explainer's
// "traced from the real kernel"), whichever kernel dispatch would pick for a plain call; its
// workspace is trace_workspace_bytes(plan).
uint64_t trace_workspace_bytes(const AttentionPlan& plan);
void trace_online_softmax(const AttentionPlan& plan, const AttentionInputs& in, float* output,
                          void* workspace, SoftmaxTrace* trace);

// Scratch bytes of the backward on `backend`; `has_forward`: output and lse are passed in.
uint64_t backward_workspace_bytes(Backend backend, const AttentionPlan& plan, bool has_forward);

// Writes (overwrites) the gradients. `output` [B, Hq, Lq, Ev] and `lse` [B, Hq, Lq] are the
// forward's results, or both null: then the SIMD backend recomputes them in its workspace
// (sized with has_forward = false). Whether they were passed is read from `lse` alone, since an
// empty output (Ev = 0) may have a null address; with no query rows nothing is recomputed.
// out.d_mask is written when non-null and the mask is additive.
void run_attention_backward(Backend backend, const AttentionPlan& plan, const AttentionInputs& in,
                            const float* d_output, const float* output, const float* lse,
                            const BackwardOutputs<float>& out, void* workspace);

}  // namespace sdpa
