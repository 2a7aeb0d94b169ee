// attention_f32_simd128: fused scaled dot-product attention on f32x4 vectors.
//
// Computes output = softmax([softcap(Q·Kᵀ·scale) + ALiBi + masks, sink])·V (and the weights or a
// stage of the scores, when asked) for every (batch, query head), with the semantics of the
// scalar reference (core/reference.h; masks: causality, the window, key lengths, document ids
// and the attention mask).
//
// Algorithm (FlashAttention-2 style):
//  - Tasks = (batch·query head, up to 4 blocks of Bq query rows), or whole heads when there are
//    at least 4 a thread (cpu/tasks.h), handed out to the threads from a shared counter
//    (cpu/thread_pool.h), one parallel region per call; each thread has its own score/accumulator scratch. The 4 blocks of
//    a group take turns on each K/V tile, so a tile comes from L3/memory once per 4·Bq rows and
//    from L2 for the other blocks. Kᵀ is packed into tiles [E, Bc] (and V into rows padded to
//    Ev4 when Ev % 4 != 0; else V is read in place), each tile by the first task to need it; a
//    task that finds its tile being packed by another thread packs its own later tiles meanwhile
//    (TilePacking, cpu/tasks.h).
//    Per task, stream the key tiles. For each tile:
//      S = Q_block·Kᵀ_tile·scale  (register tile: 2 query rows × 16 keys, 8 f32x4 accumulators;
//                                  each row's min and max are taken from the registers),
//      softcap and bias S when asked, mask S (only tiles that may hold a hidden key: an edge of
//      the rows' visible ranges, the end of Lk, documents that differ, an explicit mask), then
//      the online softmax per row: m' = max(m, rowmax S), P = e^(S − m'),
//      l' = l·e^(m − m') + ΣP, O' = O·e^(m − m') + P·V_tile (register tile: 2 rows × 16 dims).
//    The Lq×Lk matrix never exists: extra memory is about the size of K (+ V when Ev % 4 != 0)
//    plus about Bq·(Bc + 4·Ev) floats per thread.
//  - Visible ranges (causality, the window, key lengths: AttentionPlan::first/last_visible_key):
//    a block visits only the tiles between its first row's first key and its last row's last
//    key, and in an edge tile each pair of rows computes only the 16-key column groups holding
//    a key one of the two may see; with documents, tiles whose id range misses the block's are
//    skipped too (docs/variants.md).
//    Causal: the tasks with the most tiles are handed out first.
//  - Streamed inputs (core/input_arrival.h): a task first waits until its query rows and its keys
//    from its first visited tile on have arrived; rows arrive last first, so a masked call's
//    last blocks start while the calling thread still copies the rest.
//  - Sinks: a row's online softmax starts at m = sink, l = 1 (e^(sink − sink)), with O = 0.
//  - Every multiply-add is simd::madd: fused (f32x4.relaxed_madd) in the relaxed-SIMD build,
//    where it halves the instructions of both matrix products; a multiply and an add in SIMD128.
//  - The exp is a polynomial (cpu/simd128.h, relative error <= 2.1e-7), unclamped in rows
//    whose scores stay within 87 of the max; scale, row min and row max come from the QK
//    registers; vector constants are loaded once per task (V8 rematerialises a v128.const at
//    every use inside a loop).
//  - Hidden keys (score −inf after masking) get P = −0.0, which adds nothing to a finite V row;
//    a tile whose V rows hold NaN or Inf (flagged when the tile is packed) uses a P·V that drops
//    −0.0 lanes, so NaN/Inf values at hidden positions never leak (as in the reference).
//    Rows whose tile min is above −inf take a softmax loop without that marking.
//    A NaN score is left out of the row max (one maxps instead of NaN-aware max) but still makes
//    its P, hence l and the whole output row, NaN, as in the reference.
//  - Weights, when requested: a second sweep recomputes each S tile and writes e^(S − m)/l; a
//    score output, a sweep over every tile up to its stage. A trace hook records one row's
//    (m, l, O) after each tile for the explainer (traceOnlineSoftmax).
// Chosen for backend 'simd' (the default CPU backend); selection lives in dispatch/dispatch.cpp.
#include "cpu/attention_f32_simd128.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <limits>
#include <new>
#include <thread>
#include <type_traits>

#include "core/masks.h"
#include "core/round_up.h"
#include "cpu/microkernels.h"
#include "cpu/simd128.h"
#include "cpu/tasks.h"

namespace sdpa {
namespace {

using namespace simd;

constexpr int kTileKeys = kSimd128TileKeys;  // Bc: keys per streamed K/V tile
constexpr int kBlockQueries = kSimd128BlockQueries;  // Bq: query rows per register-tiled block (even)
constexpr int kColumnVectors = 4;  // register tile width: 4 f32x4 = 16 keys / value dims
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Sizes {
  idx tiles, ev4;           // key tiles per head, Ev rounded up to a whole f32x4
  bool pack_values;         // Ev % 4 != 0: V is copied into rows of Ev4
  idx key_tiles_per_head;   // floats
  idx value_rows_per_head;  // floats (0 when V is read in place)
  idx scratch;              // floats of per-thread scratch
};

Sizes sizes_of(const AttentionPlan& p) {
  Sizes s;
  s.tiles = (static_cast<idx>(p.Lk) + kTileKeys - 1) / kTileKeys;
  s.ev4 = round_up(static_cast<idx>(p.Ev), 4);
  s.pack_values = p.Ev % 4 != 0;
  s.key_tiles_per_head = s.tiles * static_cast<idx>(p.E) * kTileKeys;
  s.value_rows_per_head = s.pack_values ? static_cast<idx>(p.Lk) * s.ev4 : 0;
  // scores [Bq + 1, Bc] (+1: the twin of an odd last row), acc [Bq + 1, Ev4], row max, row sum,
  // tile min, tile max
  s.scratch = (kBlockQueries + 1) * kTileKeys +
              kBlocksPerTask * ((kBlockQueries + 1) * s.ev4 + 4 * (kBlockQueries + 2)) + 4;
  return s;
}

// Kᵀ tile t of one head [Lk, E] -> [E, Bc], zero past Lk. 4 keys × 4 dims at a time through a
// register transpose (a scalar scatter was ~2% of a 1×512×64 call); the edges one by one.
void pack_key_tile(const float* key, idx Lk, idx E, idx t, float* tile) {
  const idx j0 = t * kTileKeys, n = std::min<idx>(kTileKeys, Lk - j0);
  if (n < kTileKeys) std::fill(tile, tile + E * kTileKeys, 0.0f);
  const idx n4 = n / 4 * 4, e4 = E / 4 * 4;
  for (idx j = 0; j < n4; j += 4) {
    const float* k = key + (j0 + j) * E;
    for (idx e = 0; e < e4; e += 4) {
      f32x4 block[4] = {load(k + e), load(k + E + e), load(k + 2 * E + e), load(k + 3 * E + e)};
      transpose4(block);
      for (int c = 0; c < 4; ++c) store(tile + (e + c) * kTileKeys + j, block[c]);
    }
    for (idx e = e4; e < E; ++e) {
      for (idx r = 0; r < 4; ++r) tile[e * kTileKeys + j + r] = k[r * E + e];
    }
  }
  for (idx j = n4; j < n; ++j) {
    const float* k = key + (j0 + j) * E;
    for (idx e = 0; e < E; ++e) tile[e * kTileKeys + j] = k[e];
  }
}

// The columns [begin, end) of a key tile that a pair of rows computes: multiples of the register
// tile width (16 keys) covering every key either row may see there.
struct Columns {
  idx begin, end;
};

// Running per-lane extremes of one score row (NaN left out of both).
struct RowRange {
  f32x4 min, max;
  void fold(f32x4 x) {
    min = pmin(min, x);
    max = pmax(max, x);
  }
};

// S[r][0, 16) = scale·(q_r · kt[:, 0, 16)) for two query rows of a [E, Bc] Kᵀ tile, folded into
// the running row ranges (see header). kRepaired: with dot_2x16's repair of fused overflow.
template <int kE, bool kRepaired>
inline void scores_2x16(const float* q0, const float* q1, const float* kt, idx E, f32x4 scale,
                        f32x4 neg_inf, float* s0, float* s1, RowRange& range0, RowRange& range1) {
  static_assert(kColumnVectors == kTileVectors, "one register tile width");
  f32x4 a[2 * kColumnVectors];
  if (kRepaired) {
    dot_2x16<kTileKeys, kE>(q0, q1, kt, E, neg_inf, a);
  } else {
    dot_2x16_unchecked<kTileKeys, kE, kFusedMadd>(q0, q1, kt, E, a);
  }
  for (int c = 0; c < kColumnVectors; ++c) {
    const f32x4 x0 = mul(a[c], scale), x1 = mul(a[kColumnVectors + c], scale);
    range0.fold(x0);
    range1.fold(x1);
    store(s0 + 4 * c, x0);
    store(s1 + 4 * c, x1);
  }
}

// Scores of two rows against columns [cols.begin, cols.end) of a key tile, and each row's
// smallest and largest score there.
template <int kE, bool kRepaired>
inline void scores_row_pair(const float* q0, const float* q1, const float* kt, idx E, f32x4 scale,
                            f32x4 neg_inf, f32x4 inf, Columns cols, float* s0, float* s1, float* min2,
                            float* max2) {
  RowRange range0{inf, neg_inf}, range1{inf, neg_inf};
  for (idx col = cols.begin; col < cols.end; col += 4 * kColumnVectors) {
    scores_2x16<kE, kRepaired>(q0, q1, kt + col, E, scale, neg_inf, s0 + col, s1 + col, range0,
                               range1);
  }
  min2[0] = horizontal_min(range0.min);
  min2[1] = horizontal_min(range1.min);
  max2[0] = horizontal_max(range0.max);
  max2[1] = horizontal_max(range1.max);
}

// S rows [0, rows) (rows even) of a block against one [E, Bc] key tile, rows 2i and 2i + 1 over
// the columns pair_cols[i], with each row's smallest and largest score there (NaN left out).
// Fused multiply-adds: a dot product that overflowed to -Inf (see dot_madd) is an infinite score
// once scaled by a finite, nonzero scale, so a row pair is redone with the repair only when its
// range reaches ±Inf (rare); with scale 0 or ±Inf (`repair_always`), every pair is.
template <int kE>
void scores_block(const float* query, idx rows, idx last_row, idx E, const float* kt, f32x4 scale,
                  bool repair_always, f32x4 neg_inf, const Columns* pair_cols, float* scores,
                  float* tile_min, float* tile_max) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const f32x4 inf = splat(kInf);
  for (idx r = 0; r < rows; r += 2) {
    const float* q0 = query + r * E;
    const float* q1 = query + std::min(r + 1, last_row) * E;
    float* s0 = scores + r * kTileKeys;
    float* s1 = s0 + kTileKeys;
    const Columns cols = pair_cols[r / 2];
    if (!(kFusedMadd && repair_always)) {
      scores_row_pair<kE, false>(q0, q1, kt, E, scale, neg_inf, inf, cols, s0, s1, tile_min + r,
                                 tile_max + r);
    }
    const bool repair =
        kFusedMadd && (repair_always || std::min(tile_min[r], tile_min[r + 1]) == -kInf ||
                       std::max(tile_max[r], tile_max[r + 1]) == kInf);
    if (repair) {
      scores_row_pair<kE, true>(q0, q1, kt, E, scale, neg_inf, inf, cols, s0, s1, tile_min + r,
                                tile_max + r);
    }
  }
}

// Two O rows += P·V over n keys (P rows p0 and p0 + Bc, V rows from v), in 2-row × 16-dim
// register tiles (pv_columns, cpu/microkernels.h). kFull: n is a whole tile (Bc).
template <bool kDropHidden, bool kFull>
void accumulate_row_pair(const float* p0, const float* v, idx v_stride, idx n, idx ev4, float* o0) {
  const float* p[2] = {p0, p0 + kTileKeys};
  float* o[2] = {o0, o0 + ev4};
  pv_columns<2, kColumnVectors, kDropHidden, 1, 1, kFull ? kTileKeys : 0>(p, v, v_stride, n, ev4, o);
}

// Vector constants, loaded once per task (see ExpConstants).
struct Constants {
  ExpConstants exp;
  f32x4 neg_inf, hidden;
};

// Shared, read-only state of one call.
struct Shared {
  const AttentionPlan& p;
  Sizes sz;
  idx Lq, Lk, E, Ev, Hq, Hkv, group, blocks;
  const AttentionInputs& in;
  const float* key_tiles;   // [B·Hkv][tiles, E, Bc]
  const float* value_rows;  // [B·Hkv][Lk, Ev4] (packed) or the value input [.., Lk, Ev]
  float* output;
  float* weights;
  float* lse;      // [B, Hq, Lq] or null
  float* scores;   // [B, Hq, Lq, Lk] of stage p.return_scores, or null
  float* scratch;  // per worker: sz.scratch floats
  const int32_t* key_document_ranges;  // [B][tiles][low, high] with documents
  SoftmaxTrace* trace;                 // or null
};

// One task: a block of query rows of one (batch, query head), with this thread's scratch.
struct BlockContext {
  const Shared& s;
  idx b, h, i0, rows;
  const float* query;  // [Lq, E] of this head
  const float* key_tiles;
  const float* value_rows;
  idx v_stride;
  float* scores;    // [Bq + 1, Bc]
  float* acc;       // [Bq + 1, Ev4]
  float* row_max;   // [Bq + 2]
  float* row_sum;   // [Bq + 2]
  float* tile_min;  // [Bq + 2] each row's smallest score in the tile: -inf iff a key is hidden
  float* tile_max;  // [Bq + 2]
  const Constants* k;
  // Key tiles [tile_begin, tile_end) hold every key a row of the block may see (causality, the
  // window, the key length); documents_min/max: the block's range of query document ids.
  idx tile_begin, tile_end;
  int32_t documents_min, documents_max;
  const int32_t* nonfinite_values;  // [tiles] of this head: the tile's V rows hold NaN or Inf
  // The columns of the tile compute_score_tile last computed, per pair of rows (scratch state,
  // like `scores`).
  mutable Columns pair_cols[kBlockQueries / 2];
};

// The range of document ids of each key tile of each batch, [B][tiles][low, high].
void key_document_ranges(const AttentionPlan& p, const int32_t* key_documents, idx tiles, int32_t* ranges) {
  for (idx b = 0; b < static_cast<idx>(p.B); ++b) {
    for (idx t = 0; t < tiles; ++t) {
      const idx j0 = t * kTileKeys, n = std::min<idx>(kTileKeys, static_cast<idx>(p.Lk) - j0);
      const int32_t* ids = key_documents + b * static_cast<idx>(p.Lk) + j0;
      int32_t* range = ranges + 2 * (b * tiles + t);
      range[0] = *std::min_element(ids, ids + n);
      range[1] = *std::max_element(ids, ids + n);
    }
  }
}

// The document ids of key tile t of the block's batch span [low, high].
void key_document_range(const BlockContext& c, idx t, int32_t* low, int32_t* high) {
  const int32_t* range = c.s.key_document_ranges + 2 * (c.b * c.s.sz.tiles + t);
  *low = range[0];
  *high = range[1];
}

// Whether the block's rows and the keys of tile t all belong to one document (no key hidden by ids).
bool one_document(const BlockContext& c, idx t) {
  if (c.documents_min != c.documents_max) return false;
  int32_t low, high;
  key_document_range(c, t, &low, &high);
  return low == c.documents_min && high == c.documents_min;
}

// Whether any row of the block may see a key of tile t: t within the block's tile range and,
// with documents, the tile's id range meeting the block's (sorted packed documents then skip
// every tile off the block-diagonal).
bool visits_tile(const BlockContext& c, idx t) {
  if (t < c.tile_begin || t >= c.tile_end) return false;
  if (!c.s.p.documents) return true;
  int32_t low, high;
  key_document_range(c, t, &low, &high);
  return low <= c.documents_max && high >= c.documents_min;
}

// Scores of the block's rows against key tile t: S = Q·Kᵀ·scale, softcapped when asked, biased
// (ALiBi) when asked, masked when the tile may hold a hidden key, and each row's min and max over
// the tile into tile_min, tile_max (NaN left out); `stage` stops after the scaled or softcapped
// scores (the score output). Rows run in pairs; an odd block also fills a twin of its last row at
// index `rows`.
void compute_score_tile(const BlockContext& c, idx t, ScoreStage stage = ScoreStage::kMasked) {
  const AttentionPlan& p = c.s.p;
  const idx E = c.s.E, rows = c.rows, i0 = c.i0;
  const float* kt = c.key_tiles + t * E * kTileKeys;
  const f32x4 scale = splat(p.scale), neg_inf = splat(kNegInf);
  const float* query = c.query + i0 * E;
  const idx j0 = t * kTileKeys;
  const idx tile_len = std::min<idx>(kTileKeys, c.s.Lk - j0);
  // Each pair of rows computes only the 16-key column groups holding a key one of them may see
  // (at least one group): the visible ranges move right with the row, so the pair's first row has
  // its earliest first key and its second row its latest last key. Along a causal diagonal a pair
  // of the block's first half skips the groups only its second half sees. (The score output's
  // earlier stages cover the whole tile.)
  const idx pairs = (rows + 1) / 2;
  for (idx pair = 0; pair < pairs; ++pair) {
    Columns& pc = c.pair_cols[pair];
    pc = Columns{0, kTileKeys};
    if (stage != ScoreStage::kMasked) continue;
    constexpr idx kGroup = 4 * kColumnVectors;
    const idx r0 = i0 + 2 * pair, r1 = std::min(r0 + 1, i0 + rows - 1);
    const int64_t first = p.first_visible_key(c.b, r0) - j0, last = p.last_visible_key(c.b, r1) - j0;
    pc.begin = static_cast<idx>(std::clamp<int64_t>(first, 0, kTileKeys - 1)) / kGroup * kGroup;
    pc.end = std::max(pc.begin, static_cast<idx>(std::clamp<int64_t>(last, 0, kTileKeys - 1)) / kGroup * kGroup) + kGroup;
  }
  const Columns cols{c.pair_cols[0].begin, c.pair_cols[pairs - 1].end};  // the block's
  // E fixed at compile time for the common head dims (kE = 0: read from E).
  const bool repair_always = !(std::isfinite(p.scale) && p.scale != 0.0f);
  const auto scores = [&](auto kE) {
    scores_block<decltype(kE)::value>(query, rows, rows - 1, E, kt, scale, repair_always, neg_inf,
                                      c.pair_cols, c.scores, c.tile_min, c.tile_max);
  };
  switch (E) {
    case 32: scores(std::integral_constant<int, 32>{}); break;
    case 64: scores(std::integral_constant<int, 64>{}); break;
    case 128: scores(std::integral_constant<int, 128>{}); break;
    default: scores(std::integral_constant<int, 0>{}); break;
  }

  if (stage == ScoreStage::kScaled) return;
  // May any row of the block have a hidden key in these columns? The visible ranges of the rows
  // move right with the row: the last row has the latest first key, the first row the earliest last.
  const bool range_edge = p.hides_by_position() &&
                          (p.first_visible_key(c.b, i0 + rows - 1) > j0 + cols.begin ||
                           p.last_visible_key(c.b, i0) < j0 + std::min(cols.end, tile_len) - 1);
  const bool same_document = p.documents && one_document(c, t);
  const bool masked = stage == ScoreStage::kMasked &&
                      (cols.end > tile_len || range_edge || p.mask_kind != MaskKind::kNone ||
                       (p.documents && !same_document));
  const bool biased = stage == ScoreStage::kMasked && !p.alibi_slopes.empty();
  const bool capped = p.softcap > 0.0f;
  if (!masked && !biased && !capped) return;

  // Softcap (before biases and masks, as in the reference): s = c·tanh(s / c); the row ranges are
  // then taken again from the capped, biased, masked scores.
  const TanhConstants tanh_k = capped ? TanhConstants::load() : TanhConstants{};
  const f32x4 cap = splat(p.softcap);
  for (idx r = 0; r < rows; ++r) {
    float* s = c.scores + r * kTileKeys;
    const Columns cols = c.pair_cols[r / 2];
    const idx n = cols.end - cols.begin;
    if (capped) {
      for (idx col = cols.begin; col < cols.end; col += 4) store(s + col, softcap(load(s + col), cap, tanh_k));
    }
    if (biased) bias_scores(p, c.b, c.h, i0 + r, j0 + cols.begin, n, s + cols.begin);
    if (masked) mask_scores(p, c.s.in, c.b, c.h, i0 + r, j0 + cols.begin, n, s + cols.begin, same_document);
    RowRange range{splat(std::numeric_limits<float>::infinity()), neg_inf};
    for (idx col = cols.begin; col < cols.end; col += 4) range.fold(load(s + col));
    c.tile_min[r] = horizontal_min(range.min);
    c.tile_max[r] = horizontal_max(range.max);
  }
  if (rows % 2) {
    const float* last = c.scores + (rows - 1) * kTileKeys;
    std::copy(last, last + kTileKeys, c.scores + rows * kTileKeys);
    c.tile_min[rows] = c.tile_min[rows - 1];
    c.tile_max[rows] = c.tile_max[rows - 1];
  }
}

// compute_score_tile for the sweeps that read whole tiles (weights, scores, the recompute of
// non-finite rows): the columns a row's pair does not compute (no key there is visible) are -inf.
void compute_whole_score_tile(const BlockContext& c, idx t) {
  compute_score_tile(c, t);
  for (idx r = 0; r < round_up(c.rows, 2); ++r) {
    float* s = c.scores + r * kTileKeys;
    const Columns cols = c.pair_cols[r / 2];
    std::fill(s, s + cols.begin, kNegInf);
    std::fill(s + cols.end, s + kTileKeys, kNegInf);
  }
}

bool has_nan(const float* s, Columns cols) {
  for (idx j = cols.begin; j < cols.end; ++j) {
    if (s[j] != s[j]) return true;
  }
  return false;
}

// Online-softmax update of row r with the current score tile's columns; overwrites the scores
// with P = e^(S − m') (−0.0 for hidden keys). Returns whether the row has a hidden key there.
bool update_row(const BlockContext& c, idx r) {
  float* s = c.scores + r * kTileKeys;
  const Columns cols = c.pair_cols[r / 2];
  const float m_old = c.row_max[r];
  float m_new = max_propagating_nan(m_old, c.tile_max[r]);
  if (m_new == kNegInf) {
    // Every key so far hidden, unless this tile's max skipped a NaN: then the row becomes NaN.
    if (!has_nan(s, cols)) {
      for (idx col = cols.begin; col < cols.end; col += 4) store(s + col, c.k->hidden);
      return true;
    }
    m_new = std::numeric_limits<float>::quiet_NaN();
  }
  const f32x4 m = splat(m_new);
  const ExpConstants ek = c.k->exp;
  f32x4 sum = splat(0.0f);
  // Two loops, one sum order: only a row with a hidden key, or a score more than 87 below the
  // max, pays for the marking and the clamp (and the simpler loop keeps V8 from spilling its
  // constants).
  const bool hidden_keys = c.tile_min[r] == kNegInf;
  if (hidden_keys || !(c.tile_min[r] - m_new >= kUnclampedExpMin)) {
    const f32x4 neg_inf = c.k->neg_inf, hidden = c.k->hidden;
    for (idx col = cols.begin; col < cols.end; col += 4) {
      const f32x4 sv = load(s + col);
      // e^-inf is +0: or-ing the sign bit in marks it hidden (-0.0)
      const f32x4 pv =
          or_bits(exp_nonpositive(sub(sv, m), ek), keep_where(hidden, equal(sv, neg_inf)));
      sum = add(sum, pv);
      store(s + col, pv);
    }
  } else {
    for (idx col = cols.begin; col < cols.end; col += 4) {
      const f32x4 pv = exp_nonpositive_unclamped(sub(load(s + col), m), ek);
      sum = add(sum, pv);
      store(s + col, pv);
    }
  }
  const float tile_sum = horizontal_sum(sum);
  if (m_new == m_old) {
    c.row_sum[r] += tile_sum;
  } else {
    const float alpha = std::exp(m_old - m_new);  // 0 when m_old = -inf
    c.row_sum[r] = c.row_sum[r] * alpha + tile_sum;
    c.row_max[r] = m_new;
    float* o = c.acc + r * c.s.sz.ev4;
    const f32x4 a = splat(alpha);
    for (idx col = 0; col < c.s.sz.ev4; col += 4) store(o + col, mul(load(o + col), a));
  }
  return hidden_keys;
}

// O rows [0, rows) (rows even) += P·V over each pair's computed columns of tile t.
void accumulate_tile(const BlockContext& c, idx rows, idx t, bool drop_hidden) {
  const idx ev4 = c.s.sz.ev4, tile_len = std::min<idx>(kTileKeys, c.s.Lk - t * kTileKeys);
  // Hidden keys have P = −0.0, which adds nothing to a finite V row: only NaN/Inf must be dropped.
  const bool drop = drop_hidden && c.nonfinite_values[t];
  const float* values = c.value_rows + t * kTileKeys * c.v_stride;
  for (idx r = 0; r < rows; r += 2) {
    const Columns cols = c.pair_cols[r / 2];
    const idx first = cols.begin, n = std::max<idx>(0, std::min(cols.end, tile_len) - first);
    const float* p = c.scores + r * kTileKeys + first;
    const float* v = values + first * c.v_stride;
    float* o = c.acc + r * ev4;
    if (drop) {
      accumulate_row_pair<true, false>(p, v, c.v_stride, n, ev4, o);
    } else if (n == kTileKeys) {
      accumulate_row_pair<false, true>(p, v, c.v_stride, n, ev4, o);
    } else {
      accumulate_row_pair<false, false>(p, v, c.v_stride, n, ev4, o);
    }
  }
}

// The block's tile range [tile_begin, tile_end) and document range; the online-softmax state of
// a row that has seen no key: max -inf and sum 0, or, with a sink, the sink as the max and
// e^(sink - sink) = 1 as the sum (a sink of -inf adds nothing).
void start_block(BlockContext& c) {
  const AttentionPlan& p = c.s.p;
  const int64_t first_key = p.first_visible_key(c.b, c.i0);
  const int64_t last_key = p.last_visible_key(c.b, c.i0 + c.rows - 1);
  c.tile_begin = static_cast<idx>(std::min<int64_t>(first_key / kTileKeys, c.s.sz.tiles));
  c.tile_end = last_key < first_key ? c.tile_begin : static_cast<idx>(last_key / kTileKeys + 1);
  if (p.documents) {
    const int32_t* ids = c.s.in.query_documents + c.b * c.s.Lq + c.i0;
    c.documents_min = *std::min_element(ids, ids + c.rows);
    c.documents_max = *std::max_element(ids, ids + c.rows);
  }
  const idx padded_rows = round_up(c.rows, 2);
  const float sink = p.sinks.empty() ? kNegInf : p.sinks[static_cast<size_t>(c.h)];
  std::fill(c.acc, c.acc + padded_rows * c.s.sz.ev4, 0.0f);
  std::fill(c.row_max, c.row_max + padded_rows, sink);
  std::fill(c.row_sum, c.row_sum + padded_rows, sink == kNegInf ? 0.0f : 1.0f);
}

// One key tile for one block: scores, online softmax, P·V.
void attend_tile(const BlockContext& c, idx t) {
  // Pairs of rows run together; an odd last row gets a scratch twin (row `rows`).
  const idx padded_rows = round_up(c.rows, 2);
  compute_score_tile(c, t);
  bool drop_hidden = false;
  for (idx r = 0; r < padded_rows; ++r) drop_hidden |= update_row(c, r);
  accumulate_tile(c, padded_rows, t, drop_hidden);
}

// Appends the traced row's online-softmax state after tile t, when the block holds that row.
void record_trace(const BlockContext& c, idx t) {
  SoftmaxTrace& trace = *c.s.trace;
  if (trace.visited && c.b == trace.b && c.h == trace.h) trace.visited[c.i0 / kBlockQueries * c.s.sz.tiles + t] = 1;
  const idx r = static_cast<idx>(trace.row) - c.i0;
  if (c.b != trace.b || c.h != trace.h || r < 0 || r >= c.rows) return;
  float* step = trace.steps + trace.steps_written++ * (3 + c.s.Ev);
  step[0] = static_cast<float>(t * kTileKeys);
  step[1] = c.row_max[r];
  step[2] = c.row_sum[r];
  std::copy(c.acc + r * c.s.sz.ev4, c.acc + r * c.s.sz.ev4 + c.s.Ev, step + 3);
}

// Output rows that came out ±Inf or NaN, recomputed with normalized weights, as the reference
// does: out = Σ_j (e^(s_j − m)/l)·V_j over the visible keys. The streamed accumulator holds
// l·out, which overflows where |out| is within a factor l of FLT_MAX (V near FLT_MAX) although
// out itself is finite; Inf and NaN in the inputs give the reference's Inf and NaN again.
void recompute_nonfinite_rows(const BlockContext& c, float* output) {
  const idx rows = c.rows, Ev = c.s.Ev, ev4 = c.s.sz.ev4;
  bool redo[kBlockQueries] = {};
  bool any = false;
  // out = acc·(1/l) with l >= 1 or l = 0 (then 1/l is taken as 0): out is finite iff acc and l are.
  for (idx r = 0; r < rows; ++r) {
    redo[r] = !all_finite(c.acc + r * ev4, ev4) || !std::isfinite(c.row_sum[r]);
    any |= redo[r];
  }
  if (!any) return;
  for (idx r = 0; r < rows; ++r) {
    if (redo[r]) std::fill_n(output + r * Ev, Ev, 0.0f);
  }
  for (idx t = c.tile_begin; t < c.tile_end; ++t) {
    if (!visits_tile(c, t)) continue;
    compute_whole_score_tile(c, t);
    const idx j0 = t * kTileKeys, tile_len = std::min<idx>(kTileKeys, c.s.Lk - j0);
    for (idx r = 0; r < rows; ++r) {
      if (!redo[r]) continue;
      const float* s = c.scores + r * kTileKeys;
      float* out = output + r * Ev;
      for (idx j = 0; j < tile_len; ++j) {
        if (s[j] == kNegInf) continue;  // hidden: its V (even NaN) is left out
        const float w = std::exp(s[j] - c.row_max[r]) / c.row_sum[r];
        const float* v = c.value_rows + (j0 + j) * c.v_stride;
        for (idx col = 0; col < Ev; ++col) out[col] += w * v[col];
      }
    }
  }
}

// Output rows (and weights) of a block whose key tiles have all been attended.
void finish_block(const BlockContext& c) {
  const idx rows = c.rows, i0 = c.i0, ev4 = c.s.sz.ev4, Lk = c.s.Lk, Ev = c.s.Ev;
  float* output = c.s.output + ((c.b * c.s.Hq + c.h) * c.s.Lq + i0) * Ev;
  for (idx r = 0; r < rows; ++r) {
    const float l = c.row_sum[r];  // 0 only for a fully hidden row: zeros; NaN stays NaN
    const float inv = l == 0.0f ? 0.0f : 1.0f / l;
    const float* o = c.acc + r * ev4;
    float* out = output + r * Ev;
    for (idx col = 0; col < Ev; ++col) out[col] = o[col] * inv;
  }
  recompute_nonfinite_rows(c, output);
  if (c.s.lse) {  // lse = m + log l from the final online-softmax state (-inf: the row sees nothing)
    float* lse = c.s.lse + (c.b * c.s.Hq + c.h) * c.s.Lq + i0;
    for (idx r = 0; r < rows; ++r) {
      lse[r] = c.row_sum[r] == 0.0f ? kNegInf : c.row_max[r] + std::log(c.row_sum[r]);
    }
  }

  if (!c.s.weights) return;
  float* weights = c.s.weights + ((c.b * c.s.Hq + c.h) * c.s.Lq + i0) * Lk;
  for (idx t = 0; t < c.s.sz.tiles; ++t) {
    const idx j0 = t * kTileKeys;
    const idx tile_len = std::min<idx>(kTileKeys, Lk - j0);
    if (!visits_tile(c, t)) {
      for (idx r = 0; r < rows; ++r) std::fill_n(weights + r * Lk + j0, tile_len, 0.0f);
      continue;
    }
    compute_whole_score_tile(c, t);
    for (idx r = 0; r < rows; ++r) {
      float* s = c.scores + r * kTileKeys;
      float* w = weights + r * Lk + j0;
      const float l = c.row_sum[r];
      if (l == 0.0f) {
        std::fill_n(w, tile_len, 0.0f);
        continue;
      }
      const f32x4 m = splat(c.row_max[r]), inv = splat(1.0f / l);
      const ExpConstants ek = c.k->exp;
      for (int col = 0; col < kTileKeys; col += 4) {
        const f32x4 sv = load(s + col);  // hidden keys: exactly 0, even when the row is NaN
        store(s + col, select(equal(sv, c.k->neg_inf), splat(0.0f), mul(exp_nonpositive(sub(sv, m), ek), inv)));
      }
      std::copy(s, s + tile_len, w);
    }
  }
}

// The score output of a block: every key tile through compute_score_tile up to the asked stage;
// at the masked stage, tiles no row may see are -inf without being computed.
void write_scores(const BlockContext& c) {
  const ScoreStage stage = c.s.p.return_scores;
  const idx Lk = c.s.Lk;
  float* scores = c.s.scores + ((c.b * c.s.Hq + c.h) * c.s.Lq + c.i0) * Lk;
  for (idx t = 0; t < c.s.sz.tiles; ++t) {
    const idx j0 = t * kTileKeys;
    const idx tile_len = std::min<idx>(kTileKeys, Lk - j0);
    const bool skipped = stage == ScoreStage::kMasked && !visits_tile(c, t);
    if (stage == ScoreStage::kMasked && !skipped) {
      compute_whole_score_tile(c, t);
    } else if (!skipped) {
      compute_score_tile(c, t, stage);
    }
    for (idx r = 0; r < c.rows; ++r) {
      float* out = scores + r * Lk + j0;
      if (skipped) {
        std::fill_n(out, tile_len, kNegInf);
      } else {
        std::copy(c.scores + r * kTileKeys, c.scores + r * kTileKeys + tile_len, out);
      }
    }
  }
}

}  // namespace

uint64_t simd128_workspace_bytes(const AttentionPlan& plan, int threads) {
  const Sizes s = sizes_of(plan);
  const uint64_t heads = static_cast<uint64_t>(plan.B * plan.Hkv);
  // per head: Kᵀ tiles, padded V rows, a packing state and a non-finite-V flag per tile; per
  // batch and tile, with documents, the tile's range of document ids
  const uint64_t document_ranges = plan.documents ? 2 * static_cast<uint64_t>(plan.B) * s.tiles : 0;
  return (heads * static_cast<uint64_t>(s.key_tiles_per_head + s.value_rows_per_head + 2 * s.tiles) + document_ranges +
          static_cast<uint64_t>(std::max(threads, 1)) * static_cast<uint64_t>(s.scratch)) *
         sizeof(float);
}

void attention_f32_simd128(const AttentionPlan& p, const AttentionInputs& in, float* output,
                       float* weights, float* workspace, int threads, float* lse, float* scores,
                       SoftmaxTrace* trace) {
  threads = std::max(threads, 1);
  const Sizes sz = sizes_of(p);
  const idx kv_heads = static_cast<idx>(p.B * p.Hkv);
  float* key_tiles = workspace;
  float* value_rows = key_tiles + kv_heads * sz.key_tiles_per_head;
  float* scratch = value_rows + kv_heads * sz.value_rows_per_head;
  const TilePacking packing(scratch + threads * sz.scratch, sz.tiles, kv_heads * sz.tiles);
  // Per (key/value head, tile): 1 when the tile's V rows hold a NaN or an Inf, set when it is packed.
  auto* nonfinite_values = reinterpret_cast<int32_t*>(scratch + threads * sz.scratch + kv_heads * sz.tiles);
  auto* document_ranges = nonfinite_values + kv_heads * sz.tiles;
  if (p.documents) key_document_ranges(p, in.key_documents, sz.tiles, document_ranges);
  const Shared s{p,
                 sz,
                 static_cast<idx>(p.Lq),
                 static_cast<idx>(p.Lk),
                 static_cast<idx>(p.E),
                 static_cast<idx>(p.Ev),
                 static_cast<idx>(p.Hq),
                 static_cast<idx>(p.Hkv),
                 p.Hq == 0 ? 1 : static_cast<idx>(p.heads_per_kv()),
                 (static_cast<idx>(p.Lq) + kBlockQueries - 1) / kBlockQueries,
                 in,
                 key_tiles,
                 sz.pack_values ? value_rows : in.value,
                 output,
                 p.return_weights ? weights : nullptr,
                 lse,
                 p.return_scores != ScoreStage::kNone ? scores : nullptr,
                 scratch,
                 document_ranges,
                 trace};
  if (p.B * p.Hq * p.Lq == 0) return;

  // Kᵀ tile t of key/value head `kv`, and its V rows when V is padded.
  auto pack = [&](idx kv, idx t) {
    pack_key_tile(in.key + kv * static_cast<idx>(p.key_head_stride), s.Lk, s.E, t,
                  key_tiles + kv * sz.key_tiles_per_head + t * s.E * kTileKeys);
    const float* values = in.value + kv * static_cast<idx>(p.value_head_stride);
    const idx first_value = t * kTileKeys * s.Ev, end_value = std::min<idx>(s.Lk, (t + 1) * kTileKeys) * s.Ev;
    nonfinite_values[kv * sz.tiles + t] = !all_finite(values + first_value, end_value - first_value);
    if (sz.pack_values) {
      const float* v = values;
      float* rows = value_rows + kv * sz.value_rows_per_head;
      for (idx j = t * kTileKeys, end = std::min<idx>(s.Lk, j + kTileKeys); j < end; ++j) {
        std::copy(v + j * s.Ev, v + (j + 1) * s.Ev, rows + j * sz.ev4);
        std::fill(rows + j * sz.ev4 + s.Ev, rows + (j + 1) * sz.ev4, 0.0f);
      }
    }
  };
  const ForwardTasks tasks(static_cast<idx>(p.B * p.Hq), s.blocks, threads, p.causal);
  // Query blocks [first_block, first_block + count) of one head, on `worker`'s scratch.
  auto attend_blocks = [&](idx head, idx first_block, idx count, int worker) {
    const idx b = head / s.Hq, h = head % s.Hq, kv = b * s.Hkv + h / s.group;
    const Constants k{ExpConstants::load(), splat(exp_constant_table[9]),
                      splat(exp_constant_table[10])};
    float* mine = s.scratch + static_cast<idx>(worker) * sz.scratch;
    float* scores = mine;
    float* block_scratch = scores + (kBlockQueries + 1) * kTileKeys;
    alignas(BlockContext) unsigned char storage[kBlocksPerTask * sizeof(BlockContext)];
    auto* blocks = reinterpret_cast<BlockContext*>(storage);
    idx first_tile = sz.tiles, end_tile = 0;
    for (idx i = 0; i < count; ++i) {
      float* acc = block_scratch + i * ((kBlockQueries + 1) * sz.ev4 + 4 * (kBlockQueries + 2));
      float* row_max = acc + (kBlockQueries + 1) * sz.ev4;
      float* row_sum = row_max + kBlockQueries + 2;
      float* tile_min = row_sum + kBlockQueries + 2;
      float* tile_max = tile_min + kBlockQueries + 2;
      const idx i0 = (first_block + i) * kBlockQueries;
      new (&blocks[i]) BlockContext{s,
                                    b,
                                    h,
                                    i0,
                                    std::min<idx>(kBlockQueries, s.Lq - i0),
                                    in.query + head * s.Lq * s.E,
                                    s.key_tiles + kv * sz.key_tiles_per_head,
                                    sz.pack_values ? s.value_rows + kv * sz.value_rows_per_head
                                                   : in.value + kv * static_cast<idx>(p.value_head_stride),
                                    sz.pack_values ? sz.ev4 : s.Ev,
                                    scores,
                                    acc,
                                    row_max,
                                    row_sum,
                                    tile_min,
                                    tile_max,
                                    &k,
                                    0,
                                    0,
                                    0,
                                    0,
                                    nonfinite_values + kv * sz.tiles,
                                    {}};
      start_block(blocks[i]);
      first_tile = std::min(first_tile, blocks[i].tile_begin);
      end_tile = std::max(end_tile, blocks[i].tile_end);
    }
    // visits[i]: whether block i visits tile t; returns whether any does.
    bool visits[kBlocksPerTask];
    const auto mark_visits = [&](idx t) {
      bool any = false;
      for (idx i = 0; i < count; ++i) any |= visits[i] = visits_tile(blocks[i], t);
      return any;
    };
    while (first_tile < end_tile && !mark_visits(first_tile)) ++first_tile;
    // Streamed inputs: the task's query rows and every key row from its first visited tile on
    // (every key of the head for the score output) must be in place. Later rows arrive first,
    // so the tasks of a causal call's last blocks, handed out first, start while the rest is
    // still being copied.
    in.arrival.wait_for_rows(kv, first_block * kBlockQueries, s.Lq, s.scores ? 0 : first_tile * kTileKeys, s.Lk);
    for (idx t = first_tile; t < end_tile; ++t) {
      if (!mark_visits(t)) continue;
      packing.ensure_packed(kv, t, end_tile, pack);
      for (idx i = 0; i < count; ++i) {
        if (visits[i]) {
          attend_tile(blocks[i], t);
          if (s.trace) record_trace(blocks[i], t);
        }
      }
    }
    if (s.scores) {  // every tile of the head: the score output covers keys no row may see
      for (idx t = 0; t < sz.tiles; ++t) packing.ensure_packed(kv, t, sz.tiles, pack);
    }
    for (idx i = 0; i < count; ++i) {
      finish_block(blocks[i]);
      if (s.scores) write_scores(blocks[i]);
    }
  };
  tasks.run(threads, attend_blocks);
}

}  // namespace sdpa
