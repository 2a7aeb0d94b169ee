// attention_simd128: fused scaled dot-product attention on f32x4 vectors.
//
// Computes output = softmax(Q·Kᵀ·scale + mask)·V (and the weights, when asked) for every
// (batch, query head), with the semantics of the scalar reference (core/attention_reference.h).
//
// Algorithm (FlashAttention-2 style, one thread):
//  - Per (batch, key/value head): pack Kᵀ into tiles [E, Bc] and V into rows padded to Ev4, once,
//    shared by the query heads of a GQA group.
//  - Per block of Bq query rows: stream the key tiles. For each tile,
//      S = Q_block·Kᵀ_tile  (register tile: 2 query rows × 16 keys, 8 f32x4 accumulators),
//      scale and mask S, then the online softmax per row: m' = max(m, rowmax S),
//      P = e^(S − m'), l' = l·e^(m − m') + ΣP, O' = O·e^(m − m') + P·V_tile
//      (register tile: 2 query rows × 16 value dims).
//    The Lq×Lk matrix never exists: extra memory is O(Lk·(E + Ev) + Bq·(Bc + Ev)).
//  - Causal: tiles after the block's last visible key are skipped, not masked.
//  - Hidden keys (score −inf after masking) get P = −0.0, and tiles holding any use a P·V that
//    drops −0.0 lanes, so NaN/Inf values at hidden positions never leak (as in the reference).
//  - Weights, when requested: a second sweep recomputes each S tile and writes e^(S − m)/l.
// Chosen for backend 'simd' (the default CPU backend); selection lives in core/backends.cpp.
#include "kernels/attention_simd128.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/simd128.h"

namespace sdpa {
namespace {

using namespace simd;

constexpr int64_t kTileKeys = 64;      // Bc: keys per streamed K/V tile
constexpr int64_t kBlockQueries = 32;  // Bq: query rows sharing each K/V tile (even)
constexpr int64_t kColumnVectors = 4;  // register tile width: 4 f32x4 = 16 keys / value dims
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int32_t kNegativeZeroBits = INT32_MIN;  // bit pattern of -0.0f: "hidden key"

int64_t round_up(int64_t x, int64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

struct Sizes {
  int64_t tiles, ev4;  // key tiles, Ev rounded up to a whole f32x4
  int64_t key_tiles, value_rows, scores, acc;  // floats per workspace part
};

Sizes sizes_of(const AttentionPlan& p) {
  Sizes s;
  s.tiles = (p.Lk + kTileKeys - 1) / kTileKeys;
  s.ev4 = round_up(p.Ev, 4);
  s.key_tiles = s.tiles * p.E * kTileKeys;
  s.value_rows = s.tiles * kTileKeys * s.ev4;
  s.scores = kBlockQueries * kTileKeys;
  s.acc = kBlockQueries * s.ev4;
  return s;
}

// Kᵀ of one head [Lk, E] -> tiles [tiles, E, Bc], zero past Lk.
void pack_key_tiles(const float* key, int64_t Lk, int64_t E, int64_t tiles, float* out) {
  std::fill(out, out + tiles * E * kTileKeys, 0.0f);
  for (int64_t j = 0; j < Lk; ++j) {
    float* tile = out + (j / kTileKeys) * E * kTileKeys + j % kTileKeys;
    for (int64_t e = 0; e < E; ++e) tile[e * kTileKeys] = key[j * E + e];
  }
}

// V of one head [Lk, Ev] -> rows [tiles·Bc, Ev4], zero padded.
void pack_value_rows(const float* value, int64_t Lk, int64_t Ev, int64_t rows, int64_t ev4, float* out) {
  std::fill(out, out + rows * ev4, 0.0f);
  for (int64_t j = 0; j < Lk; ++j) std::copy(value + j * Ev, value + (j + 1) * Ev, out + j * ev4);
}

// s_r[0, 16) = q_r · kt[:, 0, 16) for two query rows; kt is a column slice of a [E, Bc] tile.
inline void scores_2x16(const float* q0, const float* q1, const float* kt, int64_t E, float* s0,
                        float* s1) {
  f32x4 a0[kColumnVectors], a1[kColumnVectors];
  for (int c = 0; c < kColumnVectors; ++c) a0[c] = a1[c] = splat(0.0f);
  for (int64_t e = 0; e < E; ++e) {
    const float* k = kt + e * kTileKeys;
    const f32x4 x0 = splat(q0[e]), x1 = splat(q1[e]);
    for (int c = 0; c < kColumnVectors; ++c) {
      const f32x4 kc = load(k + 4 * c);
      a0[c] = add(a0[c], mul(x0, kc));
      a1[c] = add(a1[c], mul(x1, kc));
    }
  }
  for (int c = 0; c < kColumnVectors; ++c) {
    store(s0 + 4 * c, a0[c]);
    store(s1 + 4 * c, a1[c]);
  }
}

// o_r[0, 4·NV) += Σ_j p_r[j]·v[j, 0, 4·NV) for two rows over n keys. With kDropHidden, lanes
// whose weight is -0.0 (hidden key) contribute nothing, even when v holds NaN or Inf there.
template <int NV, bool kDropHidden>
inline void accumulate_pv(const float* p0, const float* p1, const float* v, int64_t v_stride,
                          int64_t n, float* o0, float* o1) {
  f32x4 a0[NV], a1[NV];
  for (int c = 0; c < NV; ++c) {
    a0[c] = load(o0 + 4 * c);
    a1[c] = load(o1 + 4 * c);
  }
  const f32x4 hidden = from_bits(kNegativeZeroBits);
  for (int64_t j = 0; j < n; ++j) {
    const float* vj = v + j * v_stride;
    const f32x4 x0 = splat(p0[j]), x1 = splat(p1[j]);
    for (int c = 0; c < NV; ++c) {
      const f32x4 vc = load(vj + 4 * c);
      if (kDropHidden) {
        a0[c] = add(a0[c], keep_where(mul(x0, vc), bits_differ(x0, hidden)));
        a1[c] = add(a1[c], keep_where(mul(x1, vc), bits_differ(x1, hidden)));
      } else {
        a0[c] = add(a0[c], mul(x0, vc));
        a1[c] = add(a1[c], mul(x1, vc));
      }
    }
  }
  for (int c = 0; c < NV; ++c) {
    store(o0 + 4 * c, a0[c]);
    store(o1 + 4 * c, a1[c]);
  }
}

template <bool kDropHidden>
void accumulate_pv_chunk(int vectors, const float* p0, const float* p1, const float* v,
                         int64_t v_stride, int64_t n, float* o0, float* o1) {
  switch (vectors) {
    case 1: return accumulate_pv<1, kDropHidden>(p0, p1, v, v_stride, n, o0, o1);
    case 2: return accumulate_pv<2, kDropHidden>(p0, p1, v, v_stride, n, o0, o1);
    case 3: return accumulate_pv<3, kDropHidden>(p0, p1, v, v_stride, n, o0, o1);
    default: return accumulate_pv<4, kDropHidden>(p0, p1, v, v_stride, n, o0, o1);
  }
}

// One (batch, query head): its inputs, outputs and the shared workspace.
struct HeadContext {
  const AttentionPlan& p;
  const Sizes& sz;
  int64_t b, h;
  const float* query;  // [Lq, E]
  const void* mask;    // whole mask (offsets come from the plan's strides)
  const float* key_tiles;
  const float* value_rows;
  float* scores;   // [Bq, Bc]
  float* acc;      // [Bq, Ev4]
  float* row_max;  // [Bq]
  float* row_sum;  // [Bq]
  float* output;   // [Lq, Ev]
  float* weights;  // [Lq, Lk] or null
};

// S rows of the block at i0 (`rows` valid rows) against key tile t: scores, scale, mask. An odd
// block also fills a twin of its last row at index `rows`, so rows always run in pairs.
void compute_score_tile(const HeadContext& c, int64_t i0, int64_t rows, int64_t t) {
  const AttentionPlan& p = c.p;
  const float* kt = c.key_tiles + t * p.E * kTileKeys;
  for (int64_t r = 0; r < rows; r += 2) {
    const float* q0 = c.query + (i0 + r) * p.E;
    const float* q1 = c.query + (i0 + std::min(r + 1, rows - 1)) * p.E;
    float* s0 = c.scores + r * kTileKeys;
    float* s1 = s0 + kTileKeys;
    for (int64_t col = 0; col < kTileKeys; col += 4 * kColumnVectors) {
      scores_2x16(q0, q1, kt + col, p.E, s0 + col, s1 + col);
    }
  }
  const int64_t j0 = t * kTileKeys;
  const int64_t tile_len = std::min(kTileKeys, p.Lk - j0);
  const f32x4 scale = splat(p.scale);
  for (int64_t r = 0; r < rows; ++r) {
    float* s = c.scores + r * kTileKeys;
    for (int64_t col = 0; col < kTileKeys; col += 4) store(s + col, mul(load(s + col), scale));
    // Keys past Lk and past the causal limit are hidden.
    const int64_t visible = std::min(tile_len, p.last_visible_key(i0 + r) - j0 + 1);
    for (int64_t j = std::max<int64_t>(visible, 0); j < kTileKeys; ++j) s[j] = kNegInf;
    const int64_t m0 = p.mask_offset(c.b, c.h, i0 + r) + j0 * p.mask_stride_k;
    if (p.mask_kind == MaskKind::kBool) {
      const auto* mask = static_cast<const uint8_t*>(c.mask) + m0;
      for (int64_t j = 0; j < tile_len; ++j) {
        if (!mask[j * p.mask_stride_k]) s[j] = kNegInf;
      }
    } else if (p.mask_kind == MaskKind::kAdditive) {
      const auto* mask = static_cast<const float*>(c.mask) + m0;
      for (int64_t j = 0; j < tile_len; ++j) {
        const float m = mask[j * p.mask_stride_k];
        s[j] = m == kNegInf ? kNegInf : s[j] + m;
      }
    }
  }
  if (rows % 2) {
    const float* last = c.scores + (rows - 1) * kTileKeys;
    std::copy(last, last + kTileKeys, c.scores + rows * kTileKeys);
  }
}

// Online-softmax update of row r with the current score tile; overwrites the scores with
// P = e^(S − m') (−0.0 for hidden keys). Returns whether the row has a hidden key in this tile.
bool update_row(const HeadContext& c, int64_t r) {
  float* s = c.scores + r * kTileKeys;
  f32x4 tile_max = splat(kNegInf);
  for (int64_t col = 0; col < kTileKeys; col += 4) tile_max = max(tile_max, load(s + col));
  const float m_old = c.row_max[r];
  const float m_new = max_propagating_nan(m_old, horizontal_max(tile_max));
  const f32x4 neg_inf = splat(kNegInf), hidden = from_bits(kNegativeZeroBits);
  if (m_new == kNegInf) {  // every key so far hidden: nothing to add
    for (int64_t col = 0; col < kTileKeys; col += 4) store(s + col, hidden);
    return true;
  }
  const f32x4 m = splat(m_new);
  f32x4 sum = splat(0.0f);
  mask32x4 any_hidden{};
  for (int64_t col = 0; col < kTileKeys; col += 4) {
    const f32x4 sv = load(s + col);
    const mask32x4 is_hidden = equal(sv, neg_inf);
    const f32x4 pv = select(is_hidden, hidden, exp_nonpositive(sub(sv, m)));
    any_hidden = any_hidden | is_hidden;
    sum = add(sum, pv);
    store(s + col, pv);
  }
  const float alpha = std::exp(m_old - m_new);  // 0 when m_old = -inf, 1 when unchanged
  c.row_sum[r] = c.row_sum[r] * alpha + horizontal_sum(sum);
  c.row_max[r] = m_new;
  if (!(alpha == 1.0f)) {
    float* o = c.acc + r * c.sz.ev4;
    const f32x4 a = splat(alpha);
    for (int64_t col = 0; col < c.sz.ev4; col += 4) store(o + col, mul(load(o + col), a));
  }
  return any(any_hidden);
}

void accumulate_tile(const HeadContext& c, int64_t rows, int64_t t, bool drop_hidden) {
  const int64_t tile_len = std::min(kTileKeys, c.p.Lk - t * kTileKeys);
  const float* v = c.value_rows + t * kTileKeys * c.sz.ev4;
  for (int64_t r = 0; r < rows; r += 2) {
    const float* p0 = c.scores + r * kTileKeys;
    const float* p1 = p0 + kTileKeys;
    float* o0 = c.acc + r * c.sz.ev4;
    float* o1 = o0 + c.sz.ev4;
    for (int64_t col = 0; col < c.sz.ev4; col += 4 * kColumnVectors) {
      const int vectors = static_cast<int>(std::min<int64_t>(kColumnVectors, (c.sz.ev4 - col) / 4));
      if (drop_hidden) {
        accumulate_pv_chunk<true>(vectors, p0, p1, v + col, c.sz.ev4, tile_len, o0 + col, o1 + col);
      } else {
        accumulate_pv_chunk<false>(vectors, p0, p1, v + col, c.sz.ev4, tile_len, o0 + col, o1 + col);
      }
    }
  }
}

void attend_query_block(const HeadContext& c, int64_t i0, int64_t rows) {
  const AttentionPlan& p = c.p;
  // Pairs of rows run together; an odd last row gets a scratch twin (row `rows`).
  const int64_t padded_rows = round_up(rows, 2);
  std::fill(c.acc, c.acc + padded_rows * c.sz.ev4, 0.0f);
  std::fill(c.row_max, c.row_max + padded_rows, kNegInf);
  std::fill(c.row_sum, c.row_sum + padded_rows, 0.0f);

  // Causal: no row of this block sees a key past the last row's limit.
  const int64_t last_key = p.last_visible_key(i0 + rows - 1);
  const int64_t tiles_to_visit = last_key < 0 ? 0 : last_key / kTileKeys + 1;
  for (int64_t t = 0; t < tiles_to_visit; ++t) {
    compute_score_tile(c, i0, rows, t);
    bool drop_hidden = false;
    for (int64_t r = 0; r < padded_rows; ++r) drop_hidden |= update_row(c, r);
    accumulate_tile(c, padded_rows, t, drop_hidden);
  }

  for (int64_t r = 0; r < rows; ++r) {
    const float l = c.row_sum[r];  // 0 only for a fully hidden row: zeros; NaN stays NaN
    const float inv = l == 0.0f ? 0.0f : 1.0f / l;
    const float* o = c.acc + r * c.sz.ev4;
    float* out = c.output + (i0 + r) * p.Ev;
    for (int64_t col = 0; col < p.Ev; ++col) out[col] = o[col] * inv;
  }

  if (!c.weights) return;
  for (int64_t t = 0; t < c.sz.tiles; ++t) {
    const int64_t j0 = t * kTileKeys;
    const int64_t tile_len = std::min(kTileKeys, p.Lk - j0);
    if (t >= tiles_to_visit) {
      for (int64_t r = 0; r < rows; ++r) {
        std::fill_n(c.weights + (i0 + r) * p.Lk + j0, tile_len, 0.0f);
      }
      continue;
    }
    compute_score_tile(c, i0, rows, t);
    for (int64_t r = 0; r < rows; ++r) {
      float* s = c.scores + r * kTileKeys;
      float* w = c.weights + (i0 + r) * p.Lk + j0;
      const float l = c.row_sum[r];
      if (l == 0.0f) {
        std::fill_n(w, tile_len, 0.0f);
        continue;
      }
      const f32x4 m = splat(c.row_max[r]), inv = splat(1.0f / l), neg_inf = splat(kNegInf);
      for (int64_t col = 0; col < kTileKeys; col += 4) {
        const f32x4 sv = load(s + col);  // hidden keys: exactly 0, even when the row is NaN
        store(s + col, select(equal(sv, neg_inf), splat(0.0f), mul(exp_nonpositive(sub(sv, m)), inv)));
      }
      std::copy(s, s + tile_len, w);
    }
  }
}

}  // namespace

uint64_t simd128_workspace_bytes(const AttentionPlan& plan) {
  const Sizes s = sizes_of(plan);
  return static_cast<uint64_t>(s.key_tiles + s.value_rows + s.scores + s.acc + 2 * kBlockQueries) *
         sizeof(float);
}

void attention_simd128(const AttentionPlan& p, const AttentionInputs& in, float* output,
                       float* weights, float* workspace) {
  const Sizes sz = sizes_of(p);
  float* key_tiles = workspace;
  float* value_rows = key_tiles + sz.key_tiles;
  float* scores = value_rows + sz.value_rows;
  float* acc = scores + sz.scores;
  float* row_max = acc + sz.acc;
  float* row_sum = row_max + kBlockQueries;
  const int64_t group = p.Hq == 0 ? 1 : p.heads_per_kv();

  for (int64_t b = 0; b < p.B; ++b) {
    for (int64_t kv = 0; kv < p.Hkv; ++kv) {
      pack_key_tiles(in.key + (b * p.Hkv + kv) * p.Lk * p.E, p.Lk, p.E, sz.tiles, key_tiles);
      pack_value_rows(in.value + (b * p.Hkv + kv) * p.Lk * p.Ev, p.Lk, p.Ev,
                      sz.tiles * kTileKeys, sz.ev4, value_rows);
      for (int64_t h = kv * group; h < (kv + 1) * group; ++h) {
        const int64_t head = b * p.Hq + h;
        const HeadContext c{p,          sz,        b,      h,       in.query + head * p.Lq * p.E,
                            in.mask,    key_tiles, value_rows, scores, acc,
                            row_max,    row_sum,   output + head * p.Lq * p.Ev,
                            p.return_weights ? weights + head * p.Lq * p.Lk : nullptr};
        for (int64_t i0 = 0; i0 < p.Lq; i0 += kBlockQueries) {
          attend_query_block(c, i0, std::min(kBlockQueries, p.Lq - i0));
        }
      }
    }
  }
}

}  // namespace sdpa
