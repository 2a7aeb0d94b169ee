// The scalar reference: the project's one oracle. Plain loops in named passes
// (scores -> scale -> softcap -> bias -> mask -> max -> exp-sum -> normalize -> ·V), templated on the precision it
// computes in. attention_reference<double> is the float64 reference every kernel is tested
// against; attention_reference<float> is the 'scalar' backend, and its distance from the float64
// result is the e_ref of the tolerance rule.
//
// Semantics (shared by every kernel):
//  - Query row i of batch b sits at position p = i + AttentionPlan::position_offset_of(b), key j
//    at j. The softcap (c·tanh(s/c)) follows the scale; ALiBi's bias -m_h·|p - j| follows the
//    softcap; an additive mask is added after that.
//  - A key j is masked for query row i when the bool mask holds 0, the additive mask holds -inf,
//    causality hides it (j > p), the window does (j < p - left or j > p + right), it is past the
//    batch's key length, or its document id differs from the query's: a key must pass every rule
//    (AttentionPlan::first/last_visible_key and mask_scores in core/masks.h).
//  - Sinks: a per-head logit joins each row's softmax denominator (and its log-sum-exp) with no
//    value, so the weights sum to less than 1. After masking, a key whose score is -inf has weight
//    exactly 0 and its value row is never read, so NaN/Inf stored at masked positions cannot leak.
//  - A row with every key masked gets weights 0 and output 0 (PyTorch's _safe_softmax), not NaN.
//  - NaN in an unmasked score propagates to that row's output and visible weights; hidden keys
//    keep weight 0.
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/problem.h"

namespace sdpa {

// Where the reference writes. Every pointer but `output` may be null; the stage pointers
// receive [B, Hq, Lq, Lk] snapshots for the step-by-step explainer.
template <typename T>
struct ReferenceOutputs {
  T* output = nullptr;         // [B, Hq, Lq, Ev]
  T* weights = nullptr;        // softmax rows
  T* scores = nullptr;         // Q·Kᵀ
  T* scaled_scores = nullptr;  // Q·Kᵀ·scale
  T* softcapped_scores = nullptr;  // softcap·tanh(scaled / softcap), = scaled without softcap
  T* masked_scores = nullptr;  // softcapped + bias + mask (-inf where masked)
  T* lse = nullptr;            // [B, Hq, Lq] log(e^sink + Σ_j e^(masked score)): -inf for a row seeing nothing (without a sink)
};

// Scratch bytes attention_reference<T> needs: [Lq, Lk] masked scores and [Lq, Lk] weights.
template <typename T>
uint64_t reference_workspace_bytes(const AttentionPlan& plan) {
  return 2 * static_cast<uint64_t>(plan.Lq) * static_cast<uint64_t>(plan.Lk) * sizeof(T);
}

// Stable softmax of one row of n scores (max -> exp-sum -> normalize); `in` and `out` may alias.
// -inf entries get exactly 0 (even in a NaN row); a row of -inf gives zeros. `sink` (may be null):
// one more logit in the max and the sum, with no output entry (attention sinks).
template <typename T>
void softmax_row(const T* in, int64_t n, T* out, const T* sink = nullptr);

// log(e^sink + Σ_j e^in[j]) of one row (sink may be null), stable; -inf for a row that sees nothing.
template <typename T>
T row_log_sum_exp(const T* in, int64_t n, const T* sink = nullptr);

// How the scores pass rounds q·k: after each multiply and each add (kSeparate, the default), or
// once per multiply-add (kFused, std::fma), as a float32 loop compiled with FMA contraction does.
// kFused is what tests measure e_ref with for kernels that fuse multiply-adds (relaxed SIMD).
enum class DotRounding { kSeparate, kFused };

template <typename T>
void attention_reference(const AttentionPlan& plan, const AttentionInputs& in,
                         const ReferenceOutputs<T>& out, T* workspace,
                         DotRounding rounding = DotRounding::kSeparate);

// out[r, :] = softmax(x[r, :] / temperature) over rows of `cols` values, subtracting the row max.
// A row of -inf gives zeros. x and out may alias.
void softmax_rows(const float* x, int64_t rows, int64_t cols, float temperature, float* out);

// out[b] = a[b] · (b_is_batched ? bm[b] : bm), a [batch, M, K], bm [.., K, N], out [batch, M, N].
void matmul_reference(const MatmulPlan& plan, const float* a, const float* bm, float* out);

}  // namespace sdpa
