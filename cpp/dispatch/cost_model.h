// The kernels' cost estimates behind dispatch's thread decision (threads_for and threads_to_run,
// dispatch/dispatch.h), in one place. Rough by design: they only have to tell a call of a few
// microseconds from one of hundreds. Measured in Node 20 (V8) on the 2-core development VM, SIMD128
// build, one thread (`npm run bench`, whose GFLOP/s count 2 flops per multiply-add, and paired
// calls of one case).
#pragma once

#include "core/problem.h"

namespace sdpa::cost {

// The SIMD forward kernel's speed on one thread: multiply-adds (AttentionPlan::multiply_adds,
// Lq·Lk·(E + Ev) per head) per µs. Measured (the fastest of 60 calls): 20600 at 1×2048×64 and
// 21100 at 1×512×64; 16500 at 1×128×64, where the call's fixed cost shows.
constexpr double kForwardMultiplyAddsPerMicro = 20000;

// The least work worth another thread in the SIMD forward: 2^18 multiply-adds per thread, about
// 13 µs at kForwardMultiplyAddsPerMicro. Set when a call's fixed cost was measured at 14 µs on
// threads against 10 on one: another thread costs about that hand-off plus the Kᵀ tiles the others
// wait for while one thread packs them, so below this the call is faster on fewer threads.
constexpr double kForwardMultiplyAddsPerThread = 1 << 18;

// The decode kernel's speed on one thread, which reads each K/V row once (memory-bound): bytes of
// K and V, counted as float32, per µs. Measured: 4100 to 4900 (1×8 heads × 4 rows × 4096 keys and
// 1×32 heads × 1 row × 2048 keys, E = Ev = 128, the 10th percentile of 150 calls); the estimate
// stays at about half that, so that a decode call rated against a helper's wake-up errs
// towards waking it.
constexpr double kDecodeBytesPerMicro = 2000;

// About how long the SIMD forward kernel takes on one thread, in µs.
inline double forward_serial_micros(const AttentionPlan& plan) {
  return plan.multiply_adds() / kForwardMultiplyAddsPerMicro;
}

// About how long the decode kernel takes on one thread, in µs.
inline double decode_serial_micros(const AttentionPlan& plan) {
  const double elements = static_cast<double>(plan.B * plan.Hkv) * static_cast<double>(plan.Lk) *
                          static_cast<double>(plan.E + plan.Ev);
  return elements * sizeof(float) / kDecodeBytesPerMicro;
}

}  // namespace sdpa::cost
