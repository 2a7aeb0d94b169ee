// dot_2x16: the register tile of the SIMD kernels' dot products (Q·Kᵀ in the forward; Q·Kᵀ and
// dO·Vᵀ in the backward): two rows x0, x1 of length E against a 16-column slice of an
// [E, kStride] tile, 2 × 16 dot products in 8 f32x4 registers (a[0, 4) for x0, a[4, 8) for x1),
// each a chain of multiply-adds over E. The broadcast-row × loaded-columns form keeps 8
// accumulators, 2 broadcasts and 1 column vector live: what V8's 16 xmm registers hold without
// spilling.
#pragma once

#include <cstddef>

#include "cpu/simd128.h"

namespace sdpa::simd {

constexpr int kTileVectors = 4;  // 16 columns

// kE > 0 fixes E at compile time (a constant trip count), 0 reads it from E.
template <int kStride, int kE, bool kFused>
inline void dot_2x16_unchecked(const float* x0, const float* x1, const float* tile,
                               std::ptrdiff_t E, f32x4* a) {
  for (int i = 0; i < 2 * kTileVectors; ++i) a[i] = splat(0.0f);
  const float* const end = x0 + (kE > 0 ? kE : E);
  for (; x0 != end; ++x0, ++x1, tile += kStride) {
    const f32x4 s0 = splat(*x0), s1 = splat(*x1);
    for (int c = 0; c < kTileVectors; ++c) {
      const f32x4 column = load(tile + 4 * c);
      a[c] = dot_madd<kFused>(s0, column, a[c]);
      a[kTileVectors + c] = dot_madd<kFused>(s1, column, a[kTileVectors + c]);
    }
  }
}

// The 2 × 16 dot products with this build's multiply-add; with a fused one, lanes that came out
// -Inf are recomputed unfused (see dot_madd in simd128.h), so a score is -Inf exactly where
// separate multiplies and adds make it -Inf.
template <int kStride, int kE>
inline void dot_2x16(const float* x0, const float* x1, const float* tile, std::ptrdiff_t E,
                     f32x4 neg_inf, f32x4* a) {
  dot_2x16_unchecked<kStride, kE, kFusedMadd>(x0, x1, tile, E, a);
  if (kFusedMadd && may_have_overflowed(a, 2 * kTileVectors, neg_inf)) {
    f32x4 unfused[2 * kTileVectors];
    dot_2x16_unchecked<kStride, kE, false>(x0, x1, tile, E, unfused);
    take_unfused_where_neg_inf(a, unfused, 2 * kTileVectors, neg_inf);
  }
}

}  // namespace sdpa::simd
