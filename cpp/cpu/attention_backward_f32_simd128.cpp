// attention_backward_f32_simd128: the backward pass of scaled dot-product attention on f32x4 vectors.
//
// What: dQ, dK, dV (and dMask for an additive mask) from dO, with the semantics of the scalar
// reference (core/reference_backward.h): hidden keys are never read, rows that see
// nothing get zero gradients, dK/dV are summed over the query heads of a GQA group.
//
// Algorithm (FlashAttention-2 backward, one thread): the Lq×Lk matrices never exist. The forward
// (attention_f32_simd128 with an lse pointer) leaves O and each row's log-sum-exp lse_i; then
//  - per query row, D_i = dO_i·O_i (= Σ_j P_ij·dP_ij), and r_i = 1, or for a row whose |lse| passes
//    kBackwardRenormalizeFrom (core/problem.h) 1 / Σ_j e^(S_ij − lse_i) from a pass over its scores;
//  - per (batch, key/value head): pack Kᵀ and Vᵀ into key tiles [E, Bc] / [Ev, Bc] and K into
//    padded rows; dK and dV accumulate over every query head of the group in padded rows;
//  - per query head, per key tile, per block of Bq query rows that sees the tile, recompute
//      S = Q_blk·Kᵀ_tile·scale (+ mask),  P = e^(S − lse)·r,  dP = dO_blk·Vᵀ_tile,  dS = P ⊙ (dP − D)
//    (register tile 2 rows × 16 keys), then three register-accumulated products
//      dV_tile += Pᵀ·dO_blk,   dK_tile += dSᵀ·Q_blk,   dQ_blk += dS·K_tile
//    (4 f32x4 accumulators per 16 output dims; scale is applied to dQ and dK once, at the end).
//  - Hidden keys get P = dS = −0.0; when a tile holds any, dS·K drops those terms, and so do
//    Pᵀ·dO and dSᵀ·Q when the block has a Q or dO row with NaN/Inf (−0.0 times a finite row adds
//    nothing): NaN/Inf in a hidden K/V row, or in a Q or dO row that does not see the key, never
//    leaks (as in the forward). A block skips the tiles outside its rows' visible ranges
//    (causality, the window, the key length); rows that see none of a tile contribute nothing.
//    dSinks = −Σ_i e^(sink − lse_i)·r_i·D_i per query head over the rows that see a key (D_i =
//    Σ_j P_ij·dP_ij is 0 for the others, even where dO_i holds NaN).
//  - The register accumulations alternate two sets of accumulators over the rows (8 chains):
//    with one set (4 chains) they were latency-bound and a fused multiply-add's longer latency
//    made the relaxed build 1.4–1.6× slower than SIMD128. The dot products (S, dP) are unfused in
//    both builds: they then need no overflow repair (cpu/microkernels.h), which cost more than
//    fusing saved.
// Flops: 10·Lq·Lk·d per head for E = Ev = d (five matrix products), as FlashAttention counts.
// Chosen for backend 'simd' (the default CPU backend); dispatch is in dispatch/dispatch.cpp.
#include "cpu/attention_backward_f32_simd128.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/masks.h"
#include "core/round_up.h"
#include "cpu/microkernels.h"
#include "cpu/simd128.h"

namespace sdpa {
namespace {

using namespace simd;

constexpr int64_t kTileKeys = 32;      // Bc: keys per tile
constexpr int64_t kBlockQueries = 32;  // Bq: query rows per block
constexpr int kColumnVectors = 4;      // register tile width: 4 f32x4 = 16 keys / dims
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Sizes {
  int64_t tiles, e4, ev4;
  int64_t key_tiles, value_tiles, key_rows, dk, dv, q, dout, dq, d, norm, sees, nonfinite, block;
};

Sizes sizes_of(const AttentionPlan& p) {
  Sizes s;
  s.tiles = (p.Lk + kTileKeys - 1) / kTileKeys;
  s.e4 = round_up(p.E, 4);
  s.ev4 = round_up(p.Ev, 4);
  const int64_t keys = s.tiles * kTileKeys;
  const int64_t rows = round_up(p.Lq, 2);  // an odd last row gets a zero twin
  s.key_tiles = keys * p.E;     // Kᵀ tiles [tiles, E, Bc]
  s.value_tiles = keys * p.Ev;  // Vᵀ tiles [tiles, Ev, Bc]
  s.key_rows = keys * s.e4;     // K rows [keys, E4]
  s.dk = keys * s.e4;           // dK accumulator [keys, E4]
  s.dv = keys * s.ev4;          // dV accumulator [keys, Ev4]
  s.q = rows * s.e4;            // Q rows of one query head [Lq, E4]
  s.dout = rows * s.ev4;        // dO rows [Lq, Ev4]
  s.dq = rows * s.e4;           // dQ accumulator [Lq, E4]
  s.d = rows;                   // D [Lq]
  s.norm = rows;                // r [Lq]
  s.sees = round_up(p.Lq, 4);   // 1 where the row sees a key, else 0 [Lq] (whole vectors: P keeps its alignment)
  s.nonfinite = round_up((p.Lq + kBlockQueries - 1) / kBlockQueries, 4);  // per block: 1 where a Q or dO row holds NaN/Inf
  s.block = kBlockQueries * kTileKeys;  // P and dS of one block and tile [Bq, Bc] each
  return s;
}

// [Lk, D] rows -> tiles [tiles, D, Bc], zero past Lk.
void pack_transposed_tiles(const float* x, int64_t Lk, int64_t D, int64_t tiles, float* out) {
  std::fill(out, out + tiles * D * kTileKeys, 0.0f);
  for (int64_t j = 0; j < Lk; ++j) {
    float* tile = out + (j / kTileKeys) * D * kTileKeys + j % kTileKeys;
    for (int64_t e = 0; e < D; ++e) tile[e * kTileKeys] = x[j * D + e];
  }
}

// [rows, D] -> [rows_padded, D4], zero padded.
void pack_rows(const float* x, int64_t rows, int64_t D, int64_t rows_padded, int64_t d4, float* out) {
  std::fill(out, out + rows_padded * d4, 0.0f);
  for (int64_t r = 0; r < rows; ++r) std::copy(x + r * D, x + (r + 1) * D, out + r * d4);
}

// o_r[0, 16) = Σ_d x_r[d]·tile[d, 0, 16) for two rows x0, x1 of length D; tile is a column
// slice of a [D, Bc] tile.
inline void rows_times_tile_2x16(const float* x0, const float* x1, const float* tile, int64_t D,
                                 float* o0, float* o1) {
  static_assert(kColumnVectors == kTileVectors, "one register tile width");
  f32x4 a[2 * kColumnVectors];
  dot_2x16_unchecked<kTileKeys, 0, false>(x0, x1, tile, D, a);
  for (int c = 0; c < kColumnVectors; ++c) {
    store(o0 + 4 * c, a[c]);
    store(o1 + 4 * c, a[kColumnVectors + c]);
  }
}

// dst[0, d4) += Σ_{x<n} coef[x·kCoefStride]·src[x·src_stride + (0, d4)] in chunks of 16 dims
// (pv_columns, cpu/microkernels.h). Even and odd x go to separate accumulators: twice the
// independent chains, so the fused multiply-add's latency is covered. With kDropHidden, terms
// whose coefficient is −0.0 (hidden key) add nothing, even when src holds NaN or Inf there.
template <bool kDropHidden, int kCoefStride>
void accumulate_row(const float* coef, const float* src, int64_t src_stride, int64_t n, int64_t d4, float* dst) {
  const float* p[1] = {coef};
  float* o[1] = {dst};
  pv_columns<1, kColumnVectors, kDropHidden, 2, kCoefStride>(p, src, static_cast<idx>(src_stride), static_cast<idx>(n),
                                                            static_cast<idx>(d4), o);
}

// One (batch, query head) and its shared, packed key/value head.
struct HeadContext {
  const AttentionPlan& p;
  const Sizes& sz;
  int64_t b, h;
  const AttentionInputs* in;
  const float* key_tiles;    // [tiles, E, Bc]
  const float* value_tiles;  // [tiles, Ev, Bc]
  const float* key_rows;     // [keys, E4]
  const float* q_rows;       // [Lq, E4]
  const float* dout_rows;    // [Lq, Ev4]
  const float* row_d;        // [Lq]
  const float* row_lse;      // [Lq]
  float* row_norm;           // [Lq] r: P = e^(S − lse)·r
  float* row_sees;           // [Lq]
  const float* block_nonfinite;  // [Lq / Bq]: 1 where the block has a Q or dO row with NaN/Inf
  float* dk;                 // [keys, E4]
  float* dv;                 // [keys, Ev4]
  float* dq;                 // [Lq, E4]
  float* probs;              // [Bq, Bc] P
  float* dscores;            // [Bq, Bc] dP, then dS
  float* d_mask;             // additive mask gradient or null
};

// The block's three products from its P and dS: dV_tile += Pᵀ·dO_blk, dK_tile += dSᵀ·Q_blk and
// dQ_blk += dS·K_tile. A (row, key) pair whose coefficient is −0.0 (hidden) adds nothing, even
// where that K row (kDropHiddenKeys) or that dO or Q row (kDropHiddenRows) holds NaN or Inf.
template <bool kDropHiddenKeys, bool kDropHiddenRows>
void block_products(const HeadContext& c, int64_t i0, int64_t rows, int64_t j0, int64_t tile_len) {
  const Sizes& sz = c.sz;
  for (int64_t j = 0; j < tile_len; ++j) {
    accumulate_row<kDropHiddenRows, kTileKeys>(c.probs + j, c.dout_rows + i0 * sz.ev4, sz.ev4, rows, sz.ev4,
                                               c.dv + (j0 + j) * sz.ev4);
    accumulate_row<kDropHiddenRows, kTileKeys>(c.dscores + j, c.q_rows + i0 * sz.e4, sz.e4, rows, sz.e4,
                                               c.dk + (j0 + j) * sz.e4);
  }
  const float* k_rows = c.key_rows + j0 * sz.e4;
  for (int64_t r = 0; r < rows; ++r) {
    accumulate_row<kDropHiddenKeys, 1>(c.dscores + r * kTileKeys, k_rows, sz.e4, tile_len, sz.e4,
                                       c.dq + (i0 + r) * sz.e4);
  }
}

// Row i's scores of the key tile at j0, from q·k in s[0, Bc): scale, softcap s = c·tanh(s / c) (its
// slope 1 − tanh²(s / c), the derivative, to cap_slope), ALiBi, masks (hidden keys −inf).
// Returns how many keys of the tile the row's visible range leaves (mask_scores).
std::ptrdiff_t finish_scores(const HeadContext& c, int64_t i, int64_t j0, const TanhConstants& tanh_k, float* s,
                             float* cap_slope) {
  const AttentionPlan& p = c.p;
  const f32x4 scale = splat(p.scale);
  for (int64_t j = 0; j < kTileKeys; j += 4) store(s + j, mul(load(s + j), scale));
  if (p.softcap > 0.0f) {
    const f32x4 cap = splat(p.softcap);
    for (int64_t j = 0; j < kTileKeys; j += 4) {
      const f32x4 t = tanh(div(load(s + j), cap), tanh_k);
      const f32x4 a = and_bits(t, tanh_k.abs_mask);
      store(cap_slope + j, mul(sub(tanh_k.one, a), add(tanh_k.one, a)));
      store(s + j, mul(cap, t));
    }
  }
  bias_scores(p, c.b, c.h, i, j0, kTileKeys, s);
  return mask_scores(p, *c.in, c.b, c.h, i, j0, kTileKeys, s);
}

// Row i's r (kBackwardRenormalizeFrom, core/problem.h): 1, or where |lse| is that large
// 1 / Σ_j e^(S_j − lse) (the sink's term included) over its visible keys, the scores recomputed as
// backward_block computes them. Uses c.probs as scratch: call before the blocks.
float row_normalizer(const HeadContext& c, int64_t i) {
  const AttentionPlan& p = c.p;
  const float lse = c.row_lse[i];
  if (!(std::fabs(lse) >= kBackwardRenormalizeFrom) || std::isinf(lse)) return 1.0f;  // NaN too
  const ExpConstants exp_constants = ExpConstants::load();
  const TanhConstants tanh_k = p.softcap > 0.0f ? TanhConstants::load() : TanhConstants{};
  const f32x4 l = splat(lse), neg_inf = splat(kNegInf), zero = splat(0.0f);
  const int64_t pair = i & ~int64_t{1};  // rows_times_tile_2x16 scores a pair of rows
  float* s = c.probs + (i - pair) * kTileKeys;
  alignas(16) float cap_slope[kTileKeys];
  double sum = 0.0;
  const int64_t last = std::min(p.last_visible_key(c.b, i), p.Lk - 1);
  for (int64_t j0 = p.first_visible_key(c.b, i) / kTileKeys * kTileKeys; j0 <= last; j0 += kTileKeys) {
    const float* kt = c.key_tiles + j0 * p.E;
    for (int64_t col = 0; col < kTileKeys; col += 4 * kColumnVectors) {
      rows_times_tile_2x16(c.q_rows + pair * c.sz.e4, c.q_rows + (pair + 1) * c.sz.e4, kt + col, p.E, c.probs + col,
                           c.probs + kTileKeys + col);
    }
    finish_scores(c, i, j0, tanh_k, s, cap_slope);
    f32x4 tile_sum = zero;
    for (int64_t j = 0; j < kTileKeys; j += 4) {
      const f32x4 sv = load(s + j);
      tile_sum = add(tile_sum, select(equal(sv, neg_inf), zero, exp_nonpositive(sub(sv, l), exp_constants)));
    }
    alignas(16) float lanes[4];
    store(lanes, tile_sum);
    sum += static_cast<double>(lanes[0]) + lanes[1] + lanes[2] + lanes[3];
  }
  if (!p.sinks.empty() && p.sinks[c.h] != kNegInf) sum += std::exp(static_cast<double>(p.sinks[c.h]) - lse);
  return sum > 0.0 ? static_cast<float>(1.0 / sum) : 1.0f;
}

// Block of `rows` query rows at i0 against key tile t.
void backward_block(const HeadContext& c, int64_t i0, int64_t rows, int64_t t) {
  const AttentionPlan& p = c.p;
  const Sizes& sz = c.sz;
  const int64_t j0 = t * kTileKeys;
  const int64_t tile_len = std::min(kTileKeys, p.Lk - j0);
  const float* kt = c.key_tiles + t * p.E * kTileKeys;
  const float* vt = c.value_tiles + t * p.Ev * kTileKeys;
  const ExpConstants exp_constants = ExpConstants::load();  // once per block: see simd128.h

  // S = Q_blk·Kᵀ_tile and dP = dO_blk·Vᵀ_tile, two rows at a time (an odd last row pairs with
  // the zero row after it).
  for (int64_t r = 0; r < rows; r += 2) {
    const int64_t i = i0 + r;
    for (int64_t col = 0; col < kTileKeys; col += 4 * kColumnVectors) {
      rows_times_tile_2x16(c.q_rows + i * sz.e4, c.q_rows + (i + 1) * sz.e4, kt + col, p.E,
                           c.probs + r * kTileKeys + col, c.probs + (r + 1) * kTileKeys + col);
      rows_times_tile_2x16(c.dout_rows + i * sz.ev4, c.dout_rows + (i + 1) * sz.ev4, vt + col, p.Ev,
                           c.dscores + r * kTileKeys + col, c.dscores + (r + 1) * kTileKeys + col);
    }
  }

  // Per row: scale, softcap, bias, mask, P = e^(S − lse)·r, dS = P ⊙ (dP − D) (then times the
  // softcap's slope); hidden keys −0.0 in both.
  const f32x4 neg_inf = splat(kNegInf), hidden = from_bits(kNegativeZeroBits);
  const bool capped = p.softcap > 0.0f;
  const TanhConstants tanh_k = capped ? TanhConstants::load() : TanhConstants{};
  bool any_hidden = false;
  const mask32x4 all_lanes = equal(neg_inf, neg_inf);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    float* s = c.probs + r * kTileKeys;
    float* ds = c.dscores + r * kTileKeys;
    const int64_t visible = std::min(tile_len, p.last_visible_key(c.b, i) - j0 + 1);
    const bool before_window = p.first_visible_key(c.b, i) >= j0 + tile_len;
    if (visible <= 0 || before_window || c.row_lse[i] == kNegInf) {  // this row sees no key of the tile
      for (int64_t j = 0; j < kTileKeys; j += 4) {
        store(s + j, hidden);
        store(ds + j, hidden);
      }
      any_hidden = true;
      continue;
    }
    alignas(16) float cap_slope[kTileKeys];
    any_hidden |= finish_scores(c, i, j0, tanh_k, s, cap_slope) < kTileKeys;
    const f32x4 l = splat(c.row_lse[i]), d = splat(c.row_d[i]), norm = splat(c.row_norm[i]);
    mask32x4 row_hidden{}, row_all_hidden = all_lanes;
    for (int64_t j = 0; j < kTileKeys; j += 4) {
      const f32x4 sv = load(s + j);
      const mask32x4 is_hidden = equal(sv, neg_inf);
      row_hidden = row_hidden | is_hidden;
      row_all_hidden = row_all_hidden & is_hidden;
      const f32x4 pv = mul(exp_nonpositive(sub(sv, l), exp_constants), norm);
      store(ds + j, select(is_hidden, hidden, mul(pv, sub(load(ds + j), d))));
      store(s + j, select(is_hidden, hidden, pv));
    }
    any_hidden |= any(row_hidden);
    if (!all(row_all_hidden)) c.row_sees[i] = 1.0f;
    if (c.d_mask) {
      float* dm = c.d_mask + p.mask_offset(c.b, c.h, i) + j0 * p.mask_stride_k;
      for (int64_t j = 0; j < visible; ++j) dm[j * p.mask_stride_k] += ds[j];
    }
    // Through the softcap: dS·(1 − tanh²); hidden keys keep −0.0.
    if (capped) {
      for (int64_t j = 0; j < kTileKeys; j += 4) {
        const f32x4 dv = load(ds + j);
        store(ds + j, select(bits_differ(dv, hidden), mul(dv, load(cap_slope + j)), hidden));
      }
    }
  }

  // Only what may hold NaN/Inf is dropped (each drop costs a mask per multiply-add).
  if (!any_hidden) {
    block_products<false, false>(c, i0, rows, j0, tile_len);
  } else if (c.block_nonfinite[i0 / kBlockQueries] != 0.0f) {
    block_products<true, true>(c, i0, rows, j0, tile_len);
  } else {
    block_products<true, false>(c, i0, rows, j0, tile_len);
  }
}

}  // namespace

uint64_t simd128_backward_workspace_bytes(const AttentionPlan& plan) {
  const Sizes s = sizes_of(plan);
  return static_cast<uint64_t>(s.key_tiles + s.value_tiles + s.key_rows + s.dk + s.dv + s.q +
                               s.dout + s.dq + s.d + s.norm + s.sees + s.nonfinite + 2 * s.block) *
         sizeof(float);
}

void attention_backward_f32_simd128(const AttentionPlan& p, const AttentionInputs& in,
                                const float* d_output, const float* output, const float* lse,
                                const BackwardOutputs<float>& out, float* workspace) {
  const Sizes sz = sizes_of(p);
  float* key_tiles = workspace;
  float* value_tiles = key_tiles + sz.key_tiles;
  float* key_rows = value_tiles + sz.value_tiles;
  float* dk = key_rows + sz.key_rows;
  float* dv = dk + sz.dk;
  float* q_rows = dv + sz.dv;
  float* dout_rows = q_rows + sz.q;
  float* dq = dout_rows + sz.dout;
  float* row_d = dq + sz.dq;
  float* row_norm = row_d + sz.d;
  float* row_sees = row_norm + sz.norm;
  float* block_nonfinite = row_sees + sz.sees;
  float* probs = block_nonfinite + sz.nonfinite;
  float* dscores = probs + sz.block;
  const int64_t group = p.Hq == 0 ? 1 : p.heads_per_kv();
  const int64_t keys = sz.tiles * kTileKeys;
  const int64_t rows_padded = round_up(p.Lq, 2);
  float* d_mask = p.mask_kind == MaskKind::kAdditive ? out.d_mask : nullptr;
  if (d_mask) std::fill(d_mask, d_mask + p.mask_elements, 0.0f);
  if (!p.sinks.empty() && out.d_sinks) std::fill(out.d_sinks, out.d_sinks + p.Hq, 0.0f);

  for (int64_t b = 0; b < p.B; ++b) {
    for (int64_t kv = 0; kv < p.Hkv; ++kv) {
      const int64_t kv_off = (b * p.Hkv + kv) * p.Lk;
      const float* key = in.key + kv_off * p.E;      // [Lk, E]
      const float* value = in.value + kv_off * p.Ev;  // [Lk, Ev]
      pack_transposed_tiles(key, p.Lk, p.E, sz.tiles, key_tiles);
      pack_transposed_tiles(value, p.Lk, p.Ev, sz.tiles, value_tiles);
      pack_rows(key, p.Lk, p.E, keys, sz.e4, key_rows);
      std::fill(dk, dk + sz.dk, 0.0f);
      std::fill(dv, dv + sz.dv, 0.0f);

      for (int64_t h = kv * group; h < (kv + 1) * group; ++h) {
        const int64_t q_off = (b * p.Hq + h) * p.Lq;
        pack_rows(in.query + q_off * p.E, p.Lq, p.E, rows_padded, sz.e4, q_rows);
        pack_rows(d_output + q_off * p.Ev, p.Lq, p.Ev, rows_padded, sz.ev4, dout_rows);
        std::fill(dq, dq + sz.dq, 0.0f);
        // D_i = dO_i·O_i; which blocks hold a Q or dO row with NaN/Inf
        std::fill(block_nonfinite, block_nonfinite + sz.nonfinite, 0.0f);
        for (int64_t i = 0; i < p.Lq; ++i) {
          const float* o = output + (q_off + i) * p.Ev;
          const float* g = d_output + (q_off + i) * p.Ev;
          const float* q = in.query + (q_off + i) * p.E;
          float d = 0, nan_probe = 0;  // Σ x·0 over q and dO: ±0, or NaN where an entry is NaN/Inf
          for (int64_t c = 0; c < p.Ev; ++c) {
            d += g[c] * o[c];
            nan_probe += g[c] * 0.0f;
          }
          for (int64_t e = 0; e < p.E; ++e) nan_probe += q[e] * 0.0f;
          row_d[i] = d;
          if (nan_probe != 0.0f) block_nonfinite[i / kBlockQueries] = 1.0f;
        }
        std::fill(row_sees, row_sees + p.Lq, 0.0f);
        const HeadContext c{p,        sz,        b,          h,         &in,   key_tiles,   value_tiles,
                            key_rows, q_rows,    dout_rows,  row_d,     lse + q_off, row_norm, row_sees,
                            block_nonfinite,     dk,         dv,        dq,    probs,       dscores,
                            d_mask};
        for (int64_t i = 0; i < p.Lq; ++i) row_norm[i] = row_normalizer(c, i);
        for (int64_t t = 0; t < sz.tiles; ++t) {
          for (int64_t i0 = 0; i0 < p.Lq; i0 += kBlockQueries) {
            const int64_t rows = std::min(kBlockQueries, p.Lq - i0);
            // The block's last row sees the latest keys, its first row the earliest: skip tiles
            // outside that range (causality, the window, the key length).
            if (p.last_visible_key(b, i0 + rows - 1) < t * kTileKeys ||
                p.first_visible_key(b, i0) >= (t + 1) * kTileKeys) {
              continue;
            }
            backward_block(c, i0, rows, t);
          }
        }
        // dSinks_h −= P_sink·D_i with P_sink = e^(sink − lse_i)·r_i, per row that sees a key
        if (!p.sinks.empty() && out.d_sinks && p.sinks[h] != kNegInf) {
          for (int64_t i = 0; i < p.Lq; ++i) {
            if (row_sees[i] != 0.0f) out.d_sinks[h] -= std::exp(p.sinks[h] - lse[q_off + i]) * row_norm[i] * row_d[i];
          }
        }
        // dQ = scale·Σ dS·k
        float* dq_out = out.d_query + q_off * p.E;
        for (int64_t i = 0; i < p.Lq; ++i) {
          for (int64_t e = 0; e < p.E; ++e) dq_out[i * p.E + e] = dq[i * sz.e4 + e] * p.scale;
        }
      }
      // dK = scale·Σ dSᵀ·q, dV = Σ Pᵀ·dO over the group's query heads
      float* dk_out = out.d_key + kv_off * p.E;
      float* dv_out = out.d_value + kv_off * p.Ev;
      for (int64_t j = 0; j < p.Lk; ++j) {
        for (int64_t e = 0; e < p.E; ++e) dk_out[j * p.E + e] = dk[j * sz.e4 + e] * p.scale;
        for (int64_t c = 0; c < p.Ev; ++c) dv_out[j * p.Ev + c] = dv[j * sz.ev4 + c];
      }
    }
  }
}

}  // namespace sdpa
