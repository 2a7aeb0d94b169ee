// attention_backward_simd128: the backward pass of scaled dot-product attention on f32x4 vectors.
//
// What: dQ, dK, dV (and dMask for an additive mask) from dO, with the semantics of the scalar
// reference (core/attention_backward_reference.h): hidden keys are never read, rows that see
// nothing get zero gradients, dK/dV are summed over the query heads of a GQA group.
//
// Algorithm (FlashAttention-2 backward, one thread): the Lq×Lk matrices never exist. The forward
// (attention_simd128 with an lse pointer) leaves O and each row's log-sum-exp lse_i; then
//  - per query row, D_i = dO_i·O_i (= Σ_j P_ij·dP_ij);
//  - per (batch, key/value head): pack Kᵀ and Vᵀ into key tiles [E, Bc] / [Ev, Bc] and K into
//    padded rows; dK and dV accumulate over every query head of the group in padded rows;
//  - per query head, per key tile, per query row i that sees the tile, recompute
//      s_j  = q_i·k_j·scale (+ mask),   p_j = e^(s_j − lse_i),   dp_j = dO_i·v_j
//    vectorized over the Bc keys, then ds_j = p_j·(dp_j − D_i) and the rank-1 updates
//      dV_j += p_j·dO_i,   dK_j += ds_j·q_i,   dQ_i += ds_j·k_j
//    vectorized over the head dim (scale is applied to dQ and dK once, at the end).
//  - Causal: a row skips the tiles after its last visible key.
// Flops: 10·Lq·Lk·d per head for E = Ev = d (five matrix products), as FlashAttention counts.
// Chosen for backend 'simd' (the default CPU backend); dispatch is in core/attention_backward.cpp.
#include "kernels/attention_backward_simd128.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/simd128.h"

namespace sdpa {
namespace {

using namespace simd;

constexpr int64_t kTileKeys = 32;  // Bc: keys per tile (dK/dV tile rows stay in L1)
constexpr int kTileVectors = kTileKeys / 4;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t round_up(int64_t x, int64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

struct Sizes {
  int64_t tiles, e4, ev4;
  int64_t key_tiles, value_tiles, key_rows, dk, dv, q, dout, dq, d, row;
};

Sizes sizes_of(const AttentionPlan& p) {
  Sizes s;
  s.tiles = (p.Lk + kTileKeys - 1) / kTileKeys;
  s.e4 = round_up(p.E, 4);
  s.ev4 = round_up(p.Ev, 4);
  const int64_t keys = s.tiles * kTileKeys;
  s.key_tiles = keys * p.E;     // Kᵀ tiles [tiles, E, Bc]
  s.value_tiles = keys * p.Ev;  // Vᵀ tiles [tiles, Ev, Bc]
  s.key_rows = keys * s.e4;     // K rows [keys, E4]
  s.dk = keys * s.e4;           // dK accumulator [keys, E4]
  s.dv = keys * s.ev4;          // dV accumulator [keys, Ev4]
  s.q = p.Lq * s.e4;            // Q rows of one query head [Lq, E4]
  s.dout = p.Lq * s.ev4;        // dO rows [Lq, Ev4]
  s.dq = p.Lq * s.e4;           // dQ accumulator [Lq, E4]
  s.d = round_up(p.Lq, 4);      // D [Lq]
  s.row = kTileKeys;            // s/p and dp/ds of one row and tile [Bc] each
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

// out[0, Bc) = Σ_d x[d]·tile[d, 0, Bc) for one row x of length D against a [D, Bc] tile.
inline void row_times_tile(const float* x, const float* tile, int64_t D, float* out) {
  f32x4 acc[kTileVectors];
  for (int c = 0; c < kTileVectors; ++c) acc[c] = splat(0.0f);
  for (int64_t d = 0; d < D; ++d) {
    const f32x4 xd = splat(x[d]);
    const float* t = tile + d * kTileKeys;
    for (int c = 0; c < kTileVectors; ++c) acc[c] = add(acc[c], mul(xd, load(t + 4 * c)));
  }
  for (int c = 0; c < kTileVectors; ++c) store(out + 4 * c, acc[c]);
}

// y[0, n4) += a·x[0, n4)
inline void axpy(float a, const float* x, float* y, int64_t n4) {
  const f32x4 av = splat(a);
  for (int64_t c = 0; c < n4; c += 4) store(y + c, add(load(y + c), mul(av, load(x + c))));
}

}  // namespace

uint64_t simd128_backward_workspace_bytes(const AttentionPlan& plan) {
  const Sizes s = sizes_of(plan);
  return static_cast<uint64_t>(s.key_tiles + s.value_tiles + s.key_rows + s.dk + s.dv + s.q +
                               s.dout + s.dq + s.d + 2 * s.row) *
         sizeof(float);
}

void attention_backward_simd128(const AttentionPlan& p, const AttentionInputs& in,
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
  float* s = row_d + sz.d;    // [Bc] scores, then P
  float* dp = s + sz.row;     // [Bc] dP, then dS
  const int64_t group = p.Hq == 0 ? 1 : p.heads_per_kv();
  const int64_t keys = sz.tiles * kTileKeys;
  float* d_mask = p.mask_kind == MaskKind::kAdditive ? out.d_mask : nullptr;
  if (d_mask) std::fill(d_mask, d_mask + p.mask_elements, 0.0f);

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
        pack_rows(in.query + q_off * p.E, p.Lq, p.E, p.Lq, sz.e4, q_rows);
        pack_rows(d_output + q_off * p.Ev, p.Lq, p.Ev, p.Lq, sz.ev4, dout_rows);
        std::fill(dq, dq + sz.dq, 0.0f);
        // D_i = dO_i·O_i
        for (int64_t i = 0; i < p.Lq; ++i) {
          const float* o = output + (q_off + i) * p.Ev;
          const float* g = d_output + (q_off + i) * p.Ev;
          float d = 0;
          for (int64_t c = 0; c < p.Ev; ++c) d += g[c] * o[c];
          row_d[i] = d;
        }
        const float* row_lse = lse + q_off;

        for (int64_t t = 0; t < sz.tiles; ++t) {
          const int64_t j0 = t * kTileKeys;
          const int64_t tile_len = std::min(kTileKeys, p.Lk - j0);
          const float* kt = key_tiles + t * p.E * kTileKeys;
          const float* vt = value_tiles + t * p.Ev * kTileKeys;
          for (int64_t i = 0; i < p.Lq; ++i) {
            const int64_t visible = std::min(tile_len, p.last_visible_key(i) - j0 + 1);
            // Rows that see no key of this tile, or no key at all (lse = −inf), add nothing.
            if (visible <= 0 || row_lse[i] == kNegInf) continue;
            const float* qi = q_rows + i * sz.e4;
            const float* gi = dout_rows + i * sz.ev4;

            // s = q_i·Kᵀ_tile·scale, hidden keys −inf
            row_times_tile(qi, kt, p.E, s);
            const f32x4 scale = splat(p.scale);
            for (int c = 0; c < kTileVectors; ++c) store(s + 4 * c, mul(load(s + 4 * c), scale));
            for (int64_t j = visible; j < kTileKeys; ++j) s[j] = kNegInf;
            const int64_t m0 = p.mask_offset(b, h, i) + j0 * p.mask_stride_k;
            if (p.mask_kind == MaskKind::kBool) {
              const auto* mask = static_cast<const uint8_t*>(in.mask) + m0;
              for (int64_t j = 0; j < visible; ++j) {
                if (!mask[j * p.mask_stride_k]) s[j] = kNegInf;
              }
            } else if (p.mask_kind == MaskKind::kAdditive) {
              const auto* mask = static_cast<const float*>(in.mask) + m0;
              for (int64_t j = 0; j < visible; ++j) {
                const float m = mask[j * p.mask_stride_k];
                s[j] = m == kNegInf ? kNegInf : s[j] + m;
              }
            }

            // dp = dO_i·Vᵀ_tile
            row_times_tile(gi, vt, p.Ev, dp);

            // p = e^(s − lse_i) (exactly 0 where hidden), ds = p·(dp − D_i) (0 where hidden,
            // even when V there holds NaN/Inf)
            const f32x4 l = splat(row_lse[i]), d = splat(row_d[i]), neg_inf = splat(kNegInf);
            const f32x4 zero = splat(0.0f);
            for (int c = 0; c < kTileVectors; ++c) {
              const f32x4 sv = load(s + 4 * c);
              const mask32x4 hidden = equal(sv, neg_inf);
              const f32x4 pv = exp_nonpositive(sub(sv, l));
              store(dp + 4 * c, select(hidden, zero, mul(pv, sub(load(dp + 4 * c), d))));
              store(s + 4 * c, select(hidden, zero, pv));
            }

            if (d_mask) {
              float* dm = d_mask + m0;
              for (int64_t j = 0; j < visible; ++j) dm[j * p.mask_stride_k] += dp[j];
            }

            // dV_j += p_j·dO_i, dK_j += ds_j·q_i (hidden keys skipped)
            for (int64_t j = 0; j < visible; ++j) {
              if (s[j] == 0.0f && dp[j] == 0.0f) continue;  // hidden or exactly no contribution
              axpy(s[j], gi, dv + (j0 + j) * sz.ev4, sz.ev4);
              axpy(dp[j], qi, dk + (j0 + j) * sz.e4, sz.e4);
            }
            // dQ_i += Σ_j ds_j·k_j, accumulated in registers per 4 dims (hidden keys skipped)
            float* dqi = dq + i * sz.e4;
            for (int64_t c = 0; c < sz.e4; c += 4) {
              f32x4 acc = load(dqi + c);
              for (int64_t j = 0; j < visible; ++j) {
                if (dp[j] == 0.0f) continue;
                acc = add(acc, mul(splat(dp[j]), load(key_rows + (j0 + j) * sz.e4 + c)));
              }
              store(dqi + c, acc);
            }
          }
        }
        // dQ = scale·Σ ds·k
        float* dq_out = out.d_query + q_off * p.E;
        for (int64_t i = 0; i < p.Lq; ++i) {
          for (int64_t e = 0; e < p.E; ++e) dq_out[i * p.E + e] = dq[i * sz.e4 + e] * p.scale;
        }
      }
      // dK = scale·Σ dsᵀ·q, dV = Σ pᵀ·dO over the group's query heads
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
