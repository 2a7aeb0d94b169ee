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

// The ALiBi pass (Press et al.): with slopes on, score s_ij of query row i (position p) of head h
// gains -slope_h·|p - j| for keys [j0, j0 + n), computed in T; runs after the softcap and before
// the masks. A no-op without ALiBi.
template <typename T>
inline void bias_scores(const AttentionPlan& p, int64_t b, int64_t h, int64_t i, int64_t j0, std::ptrdiff_t n,
                        T* row) {
  if (p.alibi_slopes.empty()) return;
  const T slope = T(p.alibi_slopes[static_cast<size_t>(h)]);
  const int64_t position = p.query_position(b, i);
  for (std::ptrdiff_t j = 0; j < n; ++j) {
    const int64_t distance = position - (j0 + j);
    row[j] -= slope * T(distance < 0 ? -distance : distance);
  }
}

// Masks the scores row[0, n) of query row i of head (b, h) against keys [j0, j0 + n): keys outside
// the row's visible range (causality, the window, the key length, the end of Lk in a padded
// tile: AttentionPlan::first/last_visible_key) and keys of another document become -inf, then
// keys whose bool mask entry is 0 or whose additive entry is -inf become -inf (selected, not
// added, so a NaN score there cannot leak), and other additive entries are added: a key must
// pass every rule. Returns how many keys of the row the visible range leaves (documents and the
// mask aside). `same_document`: the caller knows the row and these keys share one document (the
// id check is then skipped). Works on float and double rows; the index arithmetic is
// pointer-sized (32-bit in wasm32), as in the SIMD kernels.
template <typename T>
inline std::ptrdiff_t mask_scores(const AttentionPlan& p, const AttentionInputs& in, int64_t b, int64_t h,
                                  int64_t i, int64_t j0, std::ptrdiff_t n, T* row, bool same_document = false) {
  using idx = std::ptrdiff_t;
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const idx first = static_cast<idx>(std::clamp<int64_t>(p.first_visible_key(b, i) - j0, 0, n));
  const idx end = std::max(first, static_cast<idx>(std::clamp<int64_t>(p.last_visible_key(b, i) - j0 + 1, 0, n)));
  for (idx j = 0; j < first; ++j) row[j] = kNegInf;
  for (idx j = end; j < n; ++j) row[j] = kNegInf;
  if (p.documents && !same_document) {
    const int32_t document = in.query_documents[b * p.Lq + i];
    const int32_t* keys = in.key_documents + b * p.Lk + j0;
    for (idx j = first; j < end; ++j) {
      if (keys[j] != document) row[j] = kNegInf;
    }
  }
  if (p.mask_kind == MaskKind::kNone) return end - first;
  const idx keys = static_cast<idx>(std::min<int64_t>(n, p.Lk - j0));
  const idx stride = static_cast<idx>(p.mask_stride_k);
  const idx offset = static_cast<idx>(p.mask_offset(b, h, i) + j0 * p.mask_stride_k);
  if (p.mask_kind == MaskKind::kBool) {
    const auto* m = static_cast<const uint8_t*>(in.mask) + offset;
    for (idx j = 0; j < keys; ++j) {
      if (!m[j * stride]) row[j] = kNegInf;
    }
  } else {
    const auto* m = static_cast<const float*>(in.mask) + offset;
    for (idx j = 0; j < keys; ++j) {
      const T add = T(m[j * stride]);
      row[j] = add == kNegInf || row[j] == kNegInf ? kNegInf : row[j] + add;
    }
  }
  return end - first;
}

}  // namespace sdpa
