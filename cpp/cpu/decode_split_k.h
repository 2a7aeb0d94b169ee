// The split-K pieces of a decode kernel that do not depend on how K and V are stored: loads that
// pull the next rows into the cache, the online
// softmax of one chunk of scores per row (partial (m, l, O) updated, scores turned into P), and
// the merge of a (batch, KV head)'s split partials into its output rows. Semantics as in
// attention_decode_f32_simd128.cpp: hidden keys get P = −0.0, a NaN score makes its row NaN, a row
// that sees nothing (and no sink) gives zeros, a row whose merged output is not finite is
// recomputed with normalized weights.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/masks.h"
#include "core/problem.h"
#include "core/round_up.h"
#include "cpu/microkernels.h"
#include "cpu/simd128.h"
#include "cpu/thread_pool.h"

namespace sdpa {

// One load per 64-byte line of p[0, elements): pulls memory the next step reads into the cache
// while this step computes (wasm has no prefetch instruction; demand misses of the V rows after
// the scores left a core at 6-7 GB/s where it streams 10-11).
template <typename KV>
inline uint32_t touch_lines(const KV* p, simd::idx elements) {
  constexpr simd::idx step = 64 / sizeof(KV);
  uint32_t bits = 0;
  for (simd::idx i = 0; i < elements; i += step) {
    KV x = p[i];
    uint32_t u = 0;
    std::memcpy(&u, &x, sizeof x);
    bits ^= u;
  }
  return bits;
}

// Calls body(std::integral_constant<int, K>{}, r) over rows [0, rows) in blocks of K = 4, then
// 2, then 1: the block heights the P·V microkernels are instantiated for.
template <typename Body>
void for_row_blocks(simd::idx rows, Body&& body) {
  simd::idx r = 0;
  for (; rows - r >= 4; r += 4) body(std::integral_constant<int, 4>{}, r);
  if (rows - r >= 2) {
    body(std::integral_constant<int, 2>{}, r);
    r += 2;
  }
  if (rows - r >= 1) body(std::integral_constant<int, 1>{}, r);
}

// A partial of one row: O [ev4], then m and l.
struct DecodePartialShape {
  simd::idx ev4;          // O's floats (Ev rounded up to 4)
  simd::idx partial_row;  // floats per row: ev4 + 2
};

// The query rows of a decode call that share one (batch, KV head): its GQA group's heads' Lq rows.
inline simd::idx decode_group_rows(const AttentionPlan& p) {
  return static_cast<simd::idx>(p.Hkv == 0 ? 0 : p.heads_per_kv() * p.Lq);
}

// The partial shape of each query row of a decode call.
inline DecodePartialShape decode_partial_shape(const AttentionPlan& p) {
  const simd::idx ev4 = round_up(static_cast<simd::idx>(p.Ev), 4);
  return {ev4, ev4 + 2};
}

// A decode call's split partials and its threads' scratch in its workspace: each task's partials
// ([R][partial_row]) and each thread's scratch start on a 64-byte line of their own, so that no two
// threads write one cache line (packed edge to edge, 2-thread steps took up to 1.1× as long:
// docs/decode.md).
struct DecodeWorkspace {
  static constexpr uintptr_t kLineBytes = 64;
  static constexpr simd::idx kLineFloats = kLineBytes / sizeof(float);
  simd::idx task_floats = 0, thread_floats = 0;  // strides: whole lines
  simd::idx tasks = 0, threads = 0;
  float* partials = nullptr;  // [tasks][task_floats], set by place()
  float* scratch = nullptr;   // [threads][thread_floats]

  // The (batch·KV head, split) tasks of `p` cut into `splits_per_head` splits, with
  // `scratch_floats` of scratch for each of `thread_count` threads.
  DecodeWorkspace(const AttentionPlan& p, int64_t splits_per_head, simd::idx scratch_floats, int thread_count)
      : task_floats(round_up(decode_group_rows(p) * decode_partial_shape(p).partial_row, kLineFloats)),
        thread_floats(round_up(scratch_floats, kLineFloats)),
        tasks(static_cast<simd::idx>(p.B * p.Hkv * splits_per_head)),
        threads(std::max(thread_count, 1)) {}
  // Floats they take in a workspace, with a line's worth to align their start.
  uint64_t floats() const {
    return static_cast<uint64_t>(tasks) * static_cast<uint64_t>(task_floats) +
           static_cast<uint64_t>(threads) * static_cast<uint64_t>(thread_floats) + kLineFloats;
  }
  // Places them from `workspace` on; returns the first float after them.
  float* place(float* workspace) {
    const uintptr_t at = reinterpret_cast<uintptr_t>(workspace);
    partials = workspace + (round_up(at, kLineBytes) - at) / sizeof(float);
    scratch = partials + tasks * task_floats;
    return workspace + floats();
  }
  float* task_partials(simd::idx task) const { return partials + task * task_floats; }
  float* thread_scratch(int worker) const { return scratch + worker * thread_floats; }
};

// Starts the partials of `rows` rows: O = 0, m = −inf, l = 0.
inline void start_partials(const DecodePartialShape& shape, simd::idx rows, float* partial) {
  for (simd::idx row = 0; row < rows; ++row) {
    float* o = partial + row * shape.partial_row;
    std::fill(o, o + shape.ev4, 0.0f);
    o[shape.ev4] = -std::numeric_limits<float>::infinity();
    o[shape.ev4 + 1] = 0.0f;
  }
}

// Online softmax of `rows` rows over a chunk's scores (row r at scores + r·score_stride, lanes
// [0, round_up(n, 4)), −inf where hidden), which become P (−0.0 where hidden), with each row's O
// rescaled; returns whether some row has a hidden key in the chunk.
inline bool online_softmax_chunk(const DecodePartialShape& shape, simd::idx rows, simd::idx n, float* scores,
                                 simd::idx score_stride, float* partial) {
  using namespace simd;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const idx n4 = (n + 3) / 4 * 4;
  const ExpConstants ek = ExpConstants::load();
  const f32x4 neg_inf = splat(kNegInf), hidden = from_bits(kNegativeZeroBits);
  bool any_hidden = false;
  for (idx row = 0; row < rows; ++row) {
    float* s = scores + row * score_stride;
    float* o = partial + row * shape.partial_row;
    float& m = o[shape.ev4];
    float& l = o[shape.ev4 + 1];
    f32x4 lo = splat(std::numeric_limits<float>::infinity()), hi = neg_inf;
    for (idx j = 0; j < n4; j += 4) {
      const f32x4 x = load(s + j);
      lo = pmin(lo, x);  // NaN left out of both
      hi = pmax(hi, x);
    }
    any_hidden |= horizontal_min(lo) == kNegInf;
    const float m_old = m;
    float m_new = max_propagating_nan(m_old, horizontal_max(hi));
    if (m_new == kNegInf) {
      bool has_nan = false;
      for (idx j = 0; j < n; ++j) has_nan |= s[j] != s[j];
      if (!has_nan) {  // every key so far hidden
        for (idx j = 0; j < n4; j += 4) store(s + j, hidden);
        continue;
      }
      m_new = std::numeric_limits<float>::quiet_NaN();
    }
    const f32x4 mv = splat(m_new);
    f32x4 sum = splat(0.0f);
    for (idx j = 0; j < n4; j += 4) {
      const f32x4 x = load(s + j);
      // e^-inf is +0: or-ing the sign bit in marks it hidden (-0.0)
      const f32x4 pv = or_bits(exp_nonpositive(sub(x, mv), ek), keep_where(hidden, equal(x, neg_inf)));
      sum = add(sum, pv);
      store(s + j, pv);
    }
    const float chunk_sum = horizontal_sum(sum);
    if (m_new == m_old) {
      l += chunk_sum;
    } else {
      const float alpha = std::exp(m_old - m_new);  // 0 when m_old = -inf
      l = l * alpha + chunk_sum;
      m = m_new;
      const f32x4 a = splat(alpha);
      for (idx c = 0; c < shape.ev4; c += 4) store(o + c, mul(load(o + c), a));
    }
  }
  return any_hidden;
}

// Merges `splits` partials of one query row (partial s at parts + s·split_stride) and the row's
// sink into out[0, Ev), times out_scale (partials of scaled values: 2^112 for float16 V), and its
// log-sum-exp into *lse when not null; `recompute(M, L, out)` rewrites a row whose merged output
// or L is not finite.
template <typename Recompute>
void merge_split_partials(const DecodePartialShape& shape, const float* parts, simd::idx splits, simd::idx split_stride,
                          simd::idx Ev, bool has_sink, float sink, float out_scale, float* out, float* lse,
                          Recompute recompute) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float M = has_sink ? sink : kNegInf;
  for (simd::idx s = 0; s < splits; ++s) M = simd::max_propagating_nan(M, parts[s * split_stride + shape.ev4]);
  std::fill(out, out + Ev, 0.0f);
  if (M == kNegInf) {  // the row sees nothing (and has no sink)
    if (lse) *lse = kNegInf;
    return;
  }
  float L = has_sink ? std::exp(sink - M) : 0.0f;
  for (simd::idx s = 0; s < splits; ++s) {
    const float* part = parts + s * split_stride;
    if (part[shape.ev4] == kNegInf) continue;  // this split saw nothing for the row
    const float w = std::exp(part[shape.ev4] - M);
    L += part[shape.ev4 + 1] * w;
    for (simd::idx c = 0; c < Ev; ++c) out[c] += part[c] * w;
  }
  const float inv = 1.0f / L;  // L ≥ 1 (the largest score's own term): inv·2^112 is finite
  for (simd::idx c = 0; c < Ev; ++c) out[c] *= inv * out_scale;
  if (lse) *lse = M + std::log(L);
  if (!simd::all_finite(out, Ev) || !std::isfinite(L)) recompute(M, L, out);
}

// The query head and row of row r of a KV-head group of `d` (its rows: the group's heads' Lq rows).
struct GroupRow {
  simd::idx h, i;
};
template <typename Decode>
inline GroupRow group_row(const Decode& d, simd::idx kv_head, simd::idx r) {
  return {kv_head * d.group + r / d.Lq, r % d.Lq};
}

// The group's rows' scores of keys [j0, j0 + n) (row r at scores + r·row_stride), Q·Kᵀ·scale,
// shaped as the reference shapes them: softcap over [0, n4) (n4 ≥ n, a multiple of 4), ALiBi,
// then masks, documents and the row's visible range where the chunk is not inside it.
template <typename Decode>
void shape_chunk_scores(const Decode& d, simd::idx b, simd::idx kv_head, simd::idx j0, simd::idx n, simd::idx n4,
                        float* scores, simd::idx row_stride) {
  using namespace simd;
  const AttentionPlan& p = d.p;
  const bool capped = p.softcap > 0.0f;
  const TanhConstants tanh_k = capped ? TanhConstants::load() : TanhConstants{};
  const f32x4 cap = splat(p.softcap);
  for (idx row = 0; row < d.R; ++row) {
    float* sr = scores + row * row_stride;
    if (capped) {
      for (idx j = 0; j < n4; j += 4) store(sr + j, softcap(load(sr + j), cap, tanh_k));
    }
    const GroupRow g = group_row(d, kv_head, row);
    bias_scores(p, b, g.h, g.i, j0, n, sr);
    const bool edge = p.first_visible_key(b, g.i) > j0 || p.last_visible_key(b, g.i) < j0 + n - 1;
    if (edge || p.mask_kind != MaskKind::kNone || p.documents) mask_scores(p, d.in, b, g.h, g.i, j0, n, sr);
  }
}

// Runs a decode call: every (batch·KV head, split) task of `d` on `threads` (each worker's `Task`
// on its own scratch of d.workspace), then each row's split partials merged into its output row
// (times `out_scale`) and log-sum-exp. `Task(d, b, kv_head, scratch)` is one KV head's split
// runner (first_key, end_key, run, recompute_row); group_row(d, kv_head, row) names a row's query
// head and position.
template <typename Task, typename Decode>
void run_split_k_decode(const Decode& d, float out_scale, float* output, int threads, float* lse) {
  using simd::idx;
  const AttentionPlan& p = d.p;
  const DecodeWorkspace& w = d.workspace;
  const idx splits = d.splits;
  const idx heads = static_cast<idx>(p.B * p.Hkv);
  parallel_for(threads, static_cast<int64_t>(heads * splits), [&](int64_t task, int worker) {
    const idx head = static_cast<idx>(task) / splits, s = static_cast<idx>(task) % splits;
    const Task split_task(d, head / d.Hkv, head % d.Hkv, w.thread_scratch(worker));
    const int64_t begin = split_task.first_key() + s * d.keys_per_split;
    const int64_t end = std::min(split_task.end_key(), begin + d.keys_per_split);
    split_task.run(begin, std::max(begin, end), w.task_partials(static_cast<idx>(task)));
  });
  for (idx head = 0; head < heads; ++head) {
    const idx b = head / d.Hkv, kv_head = head % d.Hkv;
    const Task task(d, b, kv_head, w.thread_scratch(0));
    const float* parts = w.task_partials(head * splits);
    for (idx row = 0; row < d.R; ++row) {
      const auto g = group_row(d, kv_head, row);
      const idx out_row = (b * d.Hq + g.h) * d.Lq + g.i;
      const bool has_sink = !p.sinks.empty();
      merge_split_partials(d.shape, parts + row * d.shape.partial_row, splits, w.task_floats, d.Ev, has_sink,
                           has_sink ? p.sinks[static_cast<size_t>(g.h)] : -std::numeric_limits<float>::infinity(),
                           out_scale, output + out_row * d.Ev, lse ? lse + out_row : nullptr,
                           [&](float M, float L, float* out) { task.recompute_row(row, M, L, out); });
    }
  }
}

}  // namespace sdpa
