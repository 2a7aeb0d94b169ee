// The one mask pass: every CPU kernel and the reference hide keys through mask_scores(), so a key
// is hidden by the same rule everywhere (the WGSL kernels implement the same rule on the GPU).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "core/problem.h"

namespace sdpa {

// The softcap pass of the scalar CPU paths (reference and backward): with p.softcap = c > 0, each
// scaled score s of row[0, n) becomes c·tanh(s / c), in T (so the float64 reference computes it in
// double); ±inf become ±c, NaN stays NaN. Runs before mask_scores, so masks and biases apply to the
// capped scores. A no-op when the softcap is off (0).
template <typename T>
inline void softcap_scores(const AttentionPlan& p, std::ptrdiff_t n, T* row) {
  if (!(p.softcap > 0.0f)) return;
  const T c = T(p.softcap);
  for (std::ptrdiff_t j = 0; j < n; ++j) row[j] = c * std::tanh(row[j] / c);
}

// Masks the scaled scores row[0, n) of query row i of head (b, h) against keys [j0, j0 + n):
// keys past the causal limit (i + position_offset) or past Lk (a padded tile) become -inf, then
// keys whose bool mask entry is 0 or whose additive entry is -inf become -inf (selected, not
// added, so a NaN score there cannot leak), and other additive entries are added: with both
// causality and a mask, a key must pass both. Returns how many leading keys of
// the row the causal limit and Lk leave visible. Works on float and double rows; the index
// arithmetic is pointer-sized (32-bit in wasm32), as in the SIMD kernels.
template <typename T>
inline std::ptrdiff_t mask_scores(const AttentionPlan& p, const void* mask, int64_t b, int64_t h, int64_t i,
                                  int64_t j0, std::ptrdiff_t n, T* row) {
  using idx = std::ptrdiff_t;
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const idx visible = static_cast<idx>(std::clamp<int64_t>(p.last_visible_key(i) - j0 + 1, 0, n));
  for (idx j = visible; j < n; ++j) row[j] = kNegInf;
  if (p.mask_kind == MaskKind::kNone) return visible;
  const idx keys = static_cast<idx>(std::min<int64_t>(n, p.Lk - j0));
  const idx stride = static_cast<idx>(p.mask_stride_k);
  const idx offset = static_cast<idx>(p.mask_offset(b, h, i) + j0 * p.mask_stride_k);
  if (p.mask_kind == MaskKind::kBool) {
    const auto* m = static_cast<const uint8_t*>(mask) + offset;
    for (idx j = 0; j < keys; ++j) {
      if (!m[j * stride]) row[j] = kNegInf;
    }
  } else {
    const auto* m = static_cast<const float*>(mask) + offset;
    for (idx j = 0; j < keys; ++j) {
      const T add = T(m[j * stride]);
      row[j] = add == kNegInf ? kNegInf : row[j] + add;
    }
  }
  return visible;
}

}  // namespace sdpa
