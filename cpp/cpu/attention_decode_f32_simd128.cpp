// attention_decode_f32_simd128: attention of a few query rows against many keys on f32x4
// vectors, for generation steps on a KV cache (one new query row per head).
//
// Computes output = softmax([softcap(Q·Kᵀ·scale) + ALiBi + masks, sink])·V with the semantics of
// the scalar reference (core/reference.h; masks through core/masks.h's mask_scores), reading
// each K and V row once per KV head however many query heads share it.
//
// Algorithm (flash-decoding on the CPU):
//  - The R = (Hq/Hkv)·Lq query rows that share a (batch, KV head) run together: every K row is
//    loaded once and dotted with all R rows (register tiles of 4 rows × 2 keys: 8 f32x4
//    partial dot products over E, summed across lanes at the end), every V row once per 2 rows
//    (2 rows × 16 dims of accumulators). K and V are read in place, with the plan's per-head
//    strides (a KV cache holds [B, Hkv, maxLength, E]); nothing is packed.
//  - Keys are taken in chunks of 64: scores for all rows, softcap/ALiBi/mask (only where a row
//    may have a hidden key in the chunk), then the online softmax per row (m, l, O) and O += P·V.
//    While the scores are computed, one load per cache line of the chunk's V rows (and, for
//    float32, of the next chunk's K rows) brings them in, so their misses overlap the dot products
//    instead of stalling P·V and the next chunk's scores.
//  - Split-K: each (batch, KV head)'s visible keys are cut into splits of keys_per_split keys
//    (dispatch/ chooses it from the thread count); each split is one task on the thread pool
//    and leaves a partial (m, l, O) per row. The partials are merged by their log-sum-exp
//    (the online softmax and the merge are cpu/decode_split_k.h, shared with the quantized kernel):
//    M = max(sink, m_s), L = e^(sink − M) + Σ l_s·e^(m_s − M), out = Σ O_s·e^(m_s − M) / L.
//  - NaN/Inf rules as in the SIMD forward kernel: hidden keys get P = −0.0 and, in chunks with a
//    hidden key, a P·V that drops those lanes, so NaN/Inf values stored there never leak; a NaN
//    score makes its row NaN; a row that sees nothing (and no sink) gives zeros; rows whose merged
//    output is not finite are recomputed with normalized weights (the streamed O = l·out can
//    overflow where out is finite). Fused multiply-adds: a dot product that came out −Inf or NaN
//    is recomputed unfused (as dot_madd in cpu/simd128.h explains).
// Keys and values may be float32 or float16 (a float16 KV cache known to hold no Inf/NaN): halves
// are converted in registers as they are loaded, 8 per 16-byte load, to their values·2^-112
// (simd::load_half8_scaled: 3 instructions per 4 values; P·V loads each 8 values' even ones and
// odd ones apart, load_half8_scaled_split, 5 instructions per 8), and each score and output row is
// multiplied by 2^112 once; a step reads half the bytes, and every sum stays float32.
// Chosen by dispatch/dispatch.cpp for the 'simd' backend when the query rows per KV head are few and
// the keys many, with no weights or score output.
#include "cpu/attention_decode_f32_simd128.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "core/float16.h"
#include "core/masks.h"
#include "core/round_up.h"
#include "cpu/decode_split_k.h"
#include "cpu/microkernels.h"
#include "cpu/simd128.h"
#include "cpu/thread_pool.h"

namespace sdpa {
namespace {

using namespace simd;

constexpr idx kChunk = kDecodeChunkKeys;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Shared, read-only state of one call.
struct Decode {
  const AttentionPlan& p;
  const AttentionInputs& in;
  idx R, group, Lq, E, Ev, Hq, Hkv;
  idx keys_per_split, splits;
  DecodePartialShape shape;  // of one row's partial
  DecodeWorkspace workspace;  // partials [B·Hkv·splits][R][shape.partial_row]; per thread: scores [R][kChunk]
};

// The key and value pointers of the element type KV.
template <typename KV>
std::pair<const KV*, const KV*> inputs(const AttentionInputs& in);
template <>
std::pair<const float*, const float*> inputs<float>(const AttentionInputs& in) { return {in.key, in.value}; }
template <>
std::pair<const uint16_t*, const uint16_t*> inputs<uint16_t>(const AttentionInputs& in) { return {in.key_f16, in.value_f16}; }

// Rows that a pass over a chunk's keys loads line by line along the way (see touch_lines), two
// per pair of keys: `count` rows of `row_elements` elements from `rows`.
template <typename KV>
struct TouchedRows {
  const KV* rows;
  idx row_elements, count;
  uint32_t touch_pair(idx j) const {
    return j < count ? touch_lines(rows + j * row_elements, std::min<idx>(2, count - j) * row_elements) : 0;
  }
};

// Scores of kRows rows (query pointers q, score rows s) against keys [0, n) of a chunk (rows of
// `keys`, E floats each), times the scale; the rows of `touch` and `touch_next` are loaded line
// by line along the way.
template <int kRows, typename KV>
void score_rows(const float* const* q, const KV* keys, idx n, idx E, float scale, float* const* s,
                TouchedRows<KV> touch, TouchedRows<KV> touch_next) {
  using Load = ValueLoad<KV>;
  const idx E_main = E / Load::kWidth * Load::kWidth;
  const f32x4 neg_inf = splat(kNegInf);
  uint32_t touched = 0;
  for (idx j = 0; j < n; j += 2) {
    touched ^= touch.touch_pair(j) ^ touch_next.touch_pair(j);
    const KV* k0 = keys + j * E;
    const KV* k1 = j + 1 < n ? k0 + E : k0;
    f32x4 a[2 * kRows];
    dot_rows_2keys<kRows>(q, k0, k1, E_main, neg_inf, a);
    float dots[2 * kRows];
    horizontal_sums<2 * kRows>(a, dots);
    for (int r = 0; r < kRows; ++r) {
      float d0 = dots[2 * r], d1 = dots[2 * r + 1];
      for (idx e = E_main; e < E; ++e) {
        d0 += q[r][e] * Load::scaled(k0[e]);
        d1 += q[r][e] * Load::scaled(k1[e]);
      }
      s[r][j] = d0 * Load::kUnscale * scale;
      if (j + 1 < n) s[r][j + 1] = d1 * Load::kUnscale * scale;
    }
  }
  volatile uint32_t keep = touched;  // the touching loads must not be optimized away
  (void)keep;
}

// o_r[0, 4·NV) += Σ_j p_r[j]·v[j, 0, 4·NV) for kRows rows over n keys (float16 values: scaled by
// 2^-112); kDropHidden: lanes of a hidden key (P = −0.0) add nothing even where V holds NaN or Inf.
// NV is a multiple of ValueLoad<KV>::kVectors. The decode kernel's own P·V loop, not the shared
// pv_block (cpu/microkernels.h): on float16 values with 4 rows, pv_block's per-row pointers and
// weights outgrow the registers, and a decode step ran 7-12% slower (paired A/B, 1 thread, L = 2048
// and 8192, Hq = 32, Hkv = 8, E = Ev = 128); its keys are indexed, V loaded once per key for all rows.
//
// float16 values load as each 8 columns' even ones, then the odd ones (load_half8_scaled_split: a
// step took 0.93-0.95 of its time so, CPU time, 1 thread, L = 2048-32768): their accumulators
// hold the columns in that order, taken apart from the output rows and put back around the loop.
template <int kRows, int NV, bool kDropHidden, typename KV>
inline void accumulate_pv(const float* const* p, const KV* v, idx v_stride, idx n, float* const* o) {
  constexpr bool kSplit = std::is_same_v<KV, uint16_t>;
  static_assert(!kSplit || NV % 2 == 0, "float16 columns come in 8s");
  f32x4 a[kRows][NV];
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < NV; ++c) a[r][c] = load(o[r] + 4 * c);
    if constexpr (kSplit) {
      for (int c = 0; c < NV; c += 2) {
        const f32x4 low = a[r][c], high = a[r][c + 1];
        a[r][c] = shuffle<0, 2, 4, 6>(low, high);
        a[r][c + 1] = shuffle<1, 3, 5, 7>(low, high);
      }
    }
  }
  const f32x4 hidden = from_bits(kNegativeZeroBits);
  for (idx j = 0; j < n; ++j, v += v_stride) {
    f32x4 vc[NV];
    for (int c = 0; c < NV; c += ValueLoad<KV>::kVectors) {
      if constexpr (kSplit) {
        load_half8_scaled_split(v + 4 * c, vc + c);
      } else {
        ValueLoad<KV>::load(v + 4 * c, vc + c);
      }
    }
    for (int r = 0; r < kRows; ++r) {
      const f32x4 x = splat(p[r][j]);
      const mask32x4 visible = bits_differ(x, hidden);
      for (int c = 0; c < NV; ++c) a[r][c] = madd(x, kDropHidden ? keep_where(vc[c], visible) : vc[c], a[r][c]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    if constexpr (kSplit) {
      for (int c = 0; c < NV; c += 2) {
        const f32x4 even = a[r][c], odd = a[r][c + 1];
        a[r][c] = shuffle<0, 4, 1, 5>(even, odd);
        a[r][c + 1] = shuffle<2, 6, 3, 7>(even, odd);
      }
    }
    for (int c = 0; c < NV; ++c) store(o[r] + 4 * c, a[r][c]);
  }
}

// O += P·V for kRows rows: column blocks of 16 (8 for 4 rows: 8 accumulators, each V vector
// loaded once for all 4 rows), then what is left of the whole vectors, then single columns.
template <int kRows, bool kDropHidden, typename KV>
void accumulate_rows(const float* const* p, const KV* v, idx Ev, idx n, float* const* o) {
  constexpr int kWidth = ValueLoad<KV>::kWidth;
  constexpr int kBlock = kRows >= 4 ? 2 : 4;  // vectors per column block
  const idx ev_vectors = Ev / kWidth * kWidth;
  idx col = 0;
  for (; col + 4 * kBlock <= ev_vectors; col += 4 * kBlock) {
    float* oc[kRows];
    for (int r = 0; r < kRows; ++r) oc[r] = o[r] + col;
    accumulate_pv<kRows, kBlock, kDropHidden>(p, v + col, Ev, n, oc);
  }
  if (col < ev_vectors) {
    float* oc[kRows];
    for (int r = 0; r < kRows; ++r) oc[r] = o[r] + col;
    if constexpr (kWidth == 8) {
      accumulate_pv<kRows, 2, kDropHidden>(p, v + col, Ev, n, oc);  // 8 columns left (kBlock 4)
    } else {
      switch ((ev_vectors - col) / 4) {
        case 1: accumulate_pv<kRows, 1, kDropHidden>(p, v + col, Ev, n, oc); break;
        case 2: accumulate_pv<kRows, 2, kDropHidden>(p, v + col, Ev, n, oc); break;
        default: accumulate_pv<kRows, 3, kDropHidden>(p, v + col, Ev, n, oc); break;
      }
    }
  }
  // The last dims one by one (V rows are read in place: no padding to load past).
  for (idx c = ev_vectors; c < Ev; ++c) {
    for (int r = 0; r < kRows; ++r) {
      float sum = o[r][c];
      for (idx j = 0; j < n; ++j) {
        const float x = p[r][j];
        if (kDropHidden && x == 0.0f && std::signbit(x)) continue;
        sum += x * ValueLoad<KV>::scaled(v[j * Ev + c]);
      }
      o[r][c] = sum;
    }
  }
}

// One split of one (batch, KV head) on one thread; KV: float, or uint16_t for float16 K/V.
template <typename KV>
class SplitTask {
 public:
  SplitTask(const Decode& d, idx b, idx kv_head, float* scores)
      : d_(d), b_(b), kv_(kv_head), scores_(scores) {
    const AttentionPlan& p = d.p;
    keys_ = inputs<KV>(d.in).first + (b * d.Hkv + kv_head) * static_cast<idx>(p.key_head_stride);
    values_ = inputs<KV>(d.in).second + (b * d.Hkv + kv_head) * static_cast<idx>(p.value_head_stride);
    // Row i's visible range only grows with i: rows 0 and Lq − 1 bound the group's.
    first_key_ = std::max<int64_t>(0, p.first_visible_key(b, 0));
    end_key_ = std::max<int64_t>(first_key_, p.last_visible_key(b, d.Lq - 1) + 1);
  }

  int64_t first_key() const { return first_key_; }
  int64_t end_key() const { return end_key_; }

  // Scores of every row of the group against keys [j0, j0 + n): softcapped, biased and masked as
  // the reference does; lanes [n, round_up(n, 4)) are -inf. The first rows' pass loads the
  // chunk's value rows line by line (see touch_lines) and, for float32, the next chunk's first
  // `next_n` key rows too (float32: 8-20% faster at L = 8192-32768; float16: 5-11% slower).
  void compute_scores(idx j0, idx n, idx next_n) const {
    const AttentionPlan& p = d_.p;
    const float* q[4];
    float* s[4];
    const KV* keys = keys_ + j0 * d_.E;
    for_row_blocks(d_.R, [&](auto count, idx r) {
      constexpr int kRows = decltype(count)::value;
      for (int x = 0; x < kRows; ++x) {
        const GroupRow g = group_row(d_, kv_, r + x);
        q[x] = d_.in.query + ((b_ * d_.Hq + g.h) * d_.Lq + g.i) * d_.E;
        s[x] = scores_ + (r + x) * kChunk;
      }
      constexpr bool kTouchNextKeys = std::is_same_v<KV, float>;
      const TouchedRows<KV> values{values_ + j0 * d_.Ev, d_.Ev, r == 0 ? n : 0};
      const TouchedRows<KV> next_keys{keys + n * d_.E, d_.E, kTouchNextKeys && r == 0 ? next_n : 0};
      score_rows<kRows>(q, keys, n, d_.E, p.scale, s, values, next_keys);
    });

    const idx n4 = round_up(n, 4);
    for (idx row = 0; row < d_.R; ++row) std::fill(scores_ + row * kChunk + n, scores_ + row * kChunk + n4, 0.0f);
    shape_chunk_scores(d_, b_, kv_, j0, n, n4, scores_, kChunk);
    for (idx row = 0; row < d_.R; ++row) std::fill(scores_ + row * kChunk + n, scores_ + row * kChunk + n4, kNegInf);
  }

  // O += P·V over the chunk's keys [j0, j0 + n).
  void accumulate(idx j0, idx n, bool drop_hidden, float* partial) const {
    const KV* v = values_ + j0 * d_.Ev;
    const float* p[4];
    float* o[4];
    for_row_blocks(d_.R, [&](auto count, idx r) {
      constexpr int kRows = decltype(count)::value;
      for (int x = 0; x < kRows; ++x) {
        p[x] = scores_ + (r + x) * kChunk;
        o[x] = partial + (r + x) * d_.shape.partial_row;
      }
      if (drop_hidden) {
        accumulate_rows<kRows, true>(p, v, d_.Ev, n, o);
      } else {
        accumulate_rows<kRows, false>(p, v, d_.Ev, n, o);
      }
    });
  }

  // Keys [begin, end) into `partial`.
  void run(int64_t begin, int64_t end, float* partial) const {
    start_partials(d_.shape, d_.R, partial);
    for (int64_t j0 = begin; j0 < end; j0 += kChunk) {
      const idx n = static_cast<idx>(std::min<int64_t>(kChunk, end - j0));
      const idx next_n = static_cast<idx>(std::clamp<int64_t>(end - j0 - n, 0, kChunk));
      compute_scores(static_cast<idx>(j0), n, next_n);
      const bool hidden = online_softmax_chunk(d_.shape, d_.R, n, scores_, kChunk, partial);
      accumulate(static_cast<idx>(j0), n, hidden, partial);
    }
  }

  // Row `row`'s output recomputed with normalized weights e^(s − M)/L over its visible keys.
  void recompute_row(idx row, float M, float L, float* out) const {
    std::fill(out, out + d_.Ev, 0.0f);
    for (int64_t j0 = first_key_; j0 < end_key_; j0 += kChunk) {
      const idx n = static_cast<idx>(std::min<int64_t>(kChunk, end_key_ - j0));
      compute_scores(static_cast<idx>(j0), n, 0);
      const float* s = scores_ + row * kChunk;
      for (idx j = 0; j < n; ++j) {
        if (s[j] == kNegInf) continue;  // hidden: its V (even NaN) is left out
        const float w = std::exp(s[j] - M) / L;
        const KV* v = values_ + (j0 + j) * d_.Ev;
        for (idx c = 0; c < d_.Ev; ++c) out[c] += w * ValueLoad<KV>::exact(v[c]);
      }
    }
  }

 private:
  const Decode& d_;
  idx b_, kv_;
  float* scores_;
  const KV* keys_;
  const KV* values_;
  int64_t first_key_, end_key_;
};

template <typename KV>
void run_decode(const Decode& d, float* output, int threads, float* lse) {
  run_split_k_decode<SplitTask<KV>>(d, ValueLoad<KV>::kUnscale, output, threads, lse);
}

// Per thread: scores [R][kChunk].
DecodeWorkspace workspace_layout(const AttentionPlan& p, const DecodeSplit& split, int threads) {
  return DecodeWorkspace(p, split.splits_per_head, decode_group_rows(p) * kChunk, threads);
}

}  // namespace

uint64_t decode_workspace_bytes(const AttentionPlan& plan, const DecodeSplit& split, int threads) {
  return workspace_layout(plan, split, threads).floats() * sizeof(float);
}

void attention_decode_f32_simd128(const AttentionPlan& p, const AttentionInputs& in, const DecodeSplit& split,
                                  float* output, float* workspace, int threads, float* lse) {
  if (p.B * p.Hq * p.Lq == 0) return;
  const idx group = static_cast<idx>(p.heads_per_kv());
  const idx R = decode_group_rows(p);
  const idx splits = static_cast<idx>(split.splits_per_head);
  DecodeWorkspace split_k = workspace_layout(p, split, threads);
  split_k.place(workspace);
  const Decode d{p,
                 in,
                 R,
                 group,
                 static_cast<idx>(p.Lq),
                 static_cast<idx>(p.E),
                 static_cast<idx>(p.Ev),
                 static_cast<idx>(p.Hq),
                 static_cast<idx>(p.Hkv),
                 static_cast<idx>(split.keys_per_split),
                 splits,
                 decode_partial_shape(p),
                 split_k};
  if (p.key_type == ElementType::kFloat16) {
    run_decode<uint16_t>(d, output, threads, lse);
  } else {
    run_decode<float>(d, output, threads, lse);
  }
}

}  // namespace sdpa
