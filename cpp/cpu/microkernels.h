// The SIMD kernels' shared building blocks, each tested on its own against a plain
// double-precision loop (tests/cpp/microkernels_test.cpp):
//   ValueLoad<T>     K/V elements as f32x4 vectors: float32 as they are, float16 scaled by 2^-112
//   dot_2x16         2 rows × 16 columns of a transposed [E, stride] tile: Q·Kᵀ of the forward,
//                    Q·Kᵀ and dO·Vᵀ of the backward
//   dot_rows_2keys   kRows rows × 2 keys read in place, lane sums left to the caller: Q·Kᵀ of the
//                    decode kernel, which reads a KV cache without packing it
//   pv_block         O rows += P·V over n keys, kRows rows × 4·NV columns: the forward's O += P·V,
//                    the backward's dV += Pᵀ·dO, dK += dSᵀ·Q, dQ += dS·K (the decode kernel keeps an
//                    indexed loop of its own: on float16 values this one spilled, 7-12% slower)
//   pv_columns       pv_block over a whole row's columns, in blocks of a fixed width
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/float16.h"
#include "cpu/simd128.h"

namespace sdpa::simd {

using idx = std::ptrdiff_t;  // 32-bit in wasm32: cheaper address arithmetic than int64_t

// Loading K/V elements of type T as f32x4 vectors, kVectors at a time (kWidth elements): float32
// as they are; float16 (finite) scaled by 2^-112 (load_half8_scaled), which the sums undo by
// kUnscale once per score and per output row. scaled(): one element the same way; exact(): its
// true value.
template <typename T>
struct ValueLoad;
template <>
struct ValueLoad<float> {
  static constexpr int kVectors = 1, kWidth = 4;
  static constexpr float kUnscale = 1.0f;
  static void load(const float* p, f32x4* v) { v[0] = simd::load(p); }
  static float scaled(float x) { return x; }
  static float exact(float x) { return x; }
};
template <>
struct ValueLoad<uint16_t> {
  static constexpr int kVectors = 2, kWidth = 8;
  static constexpr float kUnscale = 0x1p112f;
  static void load(const uint16_t* p, f32x4* v) { load_half8_scaled(p, v); }
  static float scaled(uint16_t h) { return float16_to_float32(h) * kHalfScaled; }
  static float exact(uint16_t h) { return float16_to_float32(h); }
};

// ---- dot_2x16 ----------------------------------------------------------------------------------
// Two rows x0, x1 of length E against a 16-column slice of an [E, kStride] tile: 2 × 16 dot
// products in 8 f32x4 registers (a[0, 4) for x0, a[4, 8) for x1), each a chain of multiply-adds
// over E. The broadcast-row × loaded-columns form keeps 8 accumulators, 2 broadcasts and 1 column
// vector live: what V8's 16 xmm registers hold without spilling.
constexpr int kTileVectors = 4;  // 16 columns

// kE > 0 fixes E at compile time (a constant trip count), 0 reads it from E.
template <int kStride, int kE, bool kFused>
inline void dot_2x16_unchecked(const float* x0, const float* x1, const float* tile, idx E, f32x4* a) {
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
inline void dot_2x16(const float* x0, const float* x1, const float* tile, idx E, f32x4 neg_inf, f32x4* a) {
  dot_2x16_unchecked<kStride, kE, kFusedMadd>(x0, x1, tile, E, a);
  if (kFusedMadd && may_have_overflowed(a, 2 * kTileVectors, neg_inf)) {
    f32x4 unfused[2 * kTileVectors];
    dot_2x16_unchecked<kStride, kE, false>(x0, x1, tile, E, unfused);
    take_unfused_where_neg_inf(a, unfused, 2 * kTileVectors, neg_inf);
  }
}

// ---- dot_rows_2keys ----------------------------------------------------------------------------
// a[r·2 + k] = Σ_e lanes of q_r[e]·k_k[e] over e < E_main (a multiple of ValueLoad<T>::kWidth),
// for kRows rows q[r] and 2 keys k0, k1 (float16 keys: the sums scaled by 2^-112). The caller sums
// each register's lanes and adds the columns past E_main. Every key vector is loaded once for
// all kRows rows: 2·kRows accumulators, 2 key vectors and a query vector live.
template <int kRows, bool kFused, typename T>
inline void dot_rows_2keys_unchecked(const float* const* q, const T* k0, const T* k1, idx E_main, f32x4* a) {
  using Load = ValueLoad<T>;
  for (int i = 0; i < 2 * kRows; ++i) a[i] = splat(0.0f);
  const float* rows[kRows];
  for (int r = 0; r < kRows; ++r) rows[r] = q[r];
  for (idx e = 0; e < E_main; e += Load::kWidth) {
    f32x4 x0[Load::kVectors], x1[Load::kVectors];
    Load::load(k0, x0);
    Load::load(k1, x1);
    for (int v = 0; v < Load::kVectors; ++v) {
      for (int r = 0; r < kRows; ++r) {
        const f32x4 qv = load(rows[r] + 4 * v);
        a[2 * r] = dot_madd<kFused>(qv, x0[v], a[2 * r]);
        a[2 * r + 1] = dot_madd<kFused>(qv, x1[v], a[2 * r + 1]);
      }
    }
    // Each row and key through its own pointer, opaque to loop strength reduction: a load at a
    // constant offset, where one index shared by the rows costs an address computation per load.
    for (int r = 0; r < kRows; ++r) {
      rows[r] += Load::kWidth;
      opaque_pointer(rows[r]);
    }
    k0 += Load::kWidth;
    k1 += Load::kWidth;
    opaque_pointer(k0);
    opaque_pointer(k1);
  }
}

// The same with this build's multiply-add; with a fused one, a register whose lanes reached -Inf
// or NaN is recomputed unfused as a whole (its lanes are partial sums, not yet scores).
template <int kRows, typename T>
inline void dot_rows_2keys(const float* const* q, const T* k0, const T* k1, idx E_main, f32x4 neg_inf, f32x4* a) {
  dot_rows_2keys_unchecked<kRows, kFusedMadd>(q, k0, k1, E_main, a);
  if (kFusedMadd && may_have_overflowed(a, 2 * kRows, neg_inf)) {
    f32x4 unfused[2 * kRows];
    dot_rows_2keys_unchecked<kRows, false>(q, k0, k1, E_main, unfused);
    for (int i = 0; i < 2 * kRows; ++i) {
      if (!all(less(neg_inf, a[i]))) a[i] = unfused[i];
    }
  }
}

// ---- pv_block ----------------------------------------------------------------------------------
// o_r[0, 4·NV) += Σ_{j<n} p_r[j·kPStride]·v[j·v_stride + (0, 4·NV)] for the kRows rows r, each
// output lane a chain of multiply-adds in key order (float16 values: scaled by 2^-112). Per key,
// each V vector is loaded once for all kRows rows.
//  - kDropHidden: a key whose weight is −0.0 (hidden) adds nothing even where its V row holds NaN
//    or Inf (its V lanes become 0 and −0.0·0 adds nothing). Without it, −0.0·V adds nothing to a
//    finite V row only; either way a row's visible keys give the same bits.
//  - kChains = 2: even and odd keys go to two sets of accumulators, summed at the end: twice the
//    independent chains, so a fused multiply-add's latency is covered when kRows·NV is small. The
//    odd set starts at −0.0, the identity of +.
//  - kPStride: the distance between one row's consecutive weights (a transposed P: its tile width).
//  - kFixedKeys > 0: n is that compile-time count.
template <int kRows, int NV, bool kDropHidden, int kChains = 1, int kPStride = 1, int kFixedKeys = 0,
          typename T = float>
inline void pv_block(const float* const* p, const T* v, idx v_stride, idx n, float* const* o) {
  using Load = ValueLoad<T>;
  static_assert(NV % Load::kVectors == 0, "whole loads of V");
  static_assert(kChains == 1 || kChains == 2, "one or two accumulator sets");
  const f32x4 hidden = from_bits(kNegativeZeroBits);
  f32x4 a[kChains][kRows][NV];
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < NV; ++c) {
      a[0][r][c] = load(o[r] + 4 * c);
      if (kChains == 2) a[kChains - 1][r][c] = hidden;
    }
  }
  // Pointers walked key by key (wasm has no scaled-index addressing: an index would cost a shift
  // and an add per row and key).
  const float* pj[kRows];
  for (int r = 0; r < kRows; ++r) pj[r] = p[r];
  const T* vj = v;
  // The current key into the accumulator set `acc`, then on to the next key.
  const auto add_key = [&](f32x4 (&acc)[kRows][NV]) {
    f32x4 x[kRows];
    mask32x4 visible[kRows];
    for (int r = 0; r < kRows; ++r) {
      x[r] = splat(*pj[r]);
      visible[r] = bits_differ(x[r], hidden);
      pj[r] += kPStride;
    }
    for (int c = 0; c < NV; c += Load::kVectors) {
      f32x4 vc[Load::kVectors];
      Load::load(vj + 4 * c, vc);
      for (int u = 0; u < Load::kVectors; ++u) {
        for (int r = 0; r < kRows; ++r) {
          acc[r][c + u] = madd(x[r], kDropHidden ? keep_where(vc[u], visible[r]) : vc[u], acc[r][c + u]);
        }
      }
    }
    vj += v_stride;
  };
  const float* const end = p[0] + (kFixedKeys > 0 ? kFixedKeys : n) * kPStride;
  if (kChains == 2) {
    while (end - pj[0] >= 2 * kPStride) {
      add_key(a[0]);
      add_key(a[kChains - 1]);
    }
  }
  while (pj[0] != end) add_key(a[0]);
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < NV; ++c) store(o[r] + 4 * c, kChains == 2 ? add(a[0][r][c], a[kChains - 1][r][c]) : a[0][r][c]);
  }
}

// pv_block over columns [0, columns) of each row (a multiple of ValueLoad<T>::kWidth): blocks of
// kBlockVectors vectors, then one narrower block for what is left.
template <int kRows, int kBlockVectors, bool kDropHidden, int kChains = 1, int kPStride = 1, int kFixedKeys = 0,
          typename T = float>
inline void pv_columns(const float* const* p, const T* v, idx v_stride, idx n, idx columns, float* const* o) {
  float* oc[kRows];
  idx col = 0;
  const auto block = [&](auto vectors) {
    constexpr int NV = decltype(vectors)::value;
    for (int r = 0; r < kRows; ++r) oc[r] = o[r] + col;
    pv_block<kRows, NV, kDropHidden, kChains, kPStride, kFixedKeys>(p, v + col, v_stride, n, oc);
    col += 4 * NV;
  };
  while (col + 4 * kBlockVectors <= columns) block(std::integral_constant<int, kBlockVectors>{});
  // What is left: fewer than kBlockVectors vectors, a whole number of loads.
  constexpr int kStep = ValueLoad<T>::kVectors;
  const auto rest = [&](auto vectors) {
    constexpr int NV = decltype(vectors)::value;
    if constexpr (NV < kBlockVectors && NV % kStep == 0) block(vectors);
  };
  switch ((columns - col) / 4) {
    case 1: rest(std::integral_constant<int, 1>{}); break;
    case 2: rest(std::integral_constant<int, 2>{}); break;
    case 3: rest(std::integral_constant<int, 3>{}); break;
    default: break;
  }
}

}  // namespace sdpa::simd
