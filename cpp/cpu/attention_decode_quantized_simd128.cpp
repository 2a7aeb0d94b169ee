// attention_decode_quantized_simd128: the decode kernel (few query rows, many keys: a generation
// step) on an int8/int4 KV cache read in place (core/kv_cache_format.h), with the float32 decode
// kernel's structure and semantics (attention_decode_f32_simd128.cpp): the R query rows of a
// (batch, KV head) run together, keys in chunks of 64, softcap/ALiBi/masks through core/masks.h,
// an online softmax per row, split-K over the thread pool merged by log-sum-exp
// (cpu/decode_split_k.h), hidden keys' values never read into a result.
//
//  - Scores: the query rows are quantized once per call to int8 blocks of 32 (quantize_block, as
//    docs/kv-cache-formats.md defines a call on such a cache), kept as int16. A tile of 4 keys ×
//    4 consecutive elements is one 16-byte load (int4: the low or high nibbles of one, unpacked
//    as level·16, the 16 taken out with the query's scales); widened to int16, its dot
//    products with a row's 4 elements repeated (i32x4.dot_i16x8_s) leave keys 0-1 and 2-3 in
//    lane pairs: summed per block, each key's exact integer dot product lands in its own lane.
//    Each block's dot products (exact in float32: |dot| ≤ 32·127² < 2^24) are converted and
//    multiply-added into the scores as (int dot)·(key scale · query scale), the query's block
//    scale kept times the attention scale: float32 arithmetic, as the float32 kernel's, whose
//    rounding the tolerance rule covers (docs/decode.md: float64 pairs cost 2-10% of an int8
//    step); every tile load serves up to 4 rows. int4 keys on the relaxed-SIMD build
//    instead multiply the stored nibbles (level + 8, 0…15) by the int8 query levels with
//    i16x8.relaxed_dot_i8x16_i7x16_s, a block's 8·Σ query levels taken out after
//    (nibble_block_dots): the same integer dot products in fewer instructions.
//  - Values: per block of 32 value columns, each row's weights are multiplied by the keys' block
//    scales once (w = p·scale·2^-24, or 2^-28 for int4; 0 for a hidden key), then each key's 4
//    columns of a 16-byte quad of levels (4 keys × 4 columns) are moved to the top bytes of
//    int32 lanes and converted to float32 (level·2^24, exact) in registers once, and multiplied
//    into every row's accumulators (add_weighted_levels): no dequantized copy of V is written. A
//    value reads as level·scale, so the sum is Σ (p·scale)·level where the scalar path forms
//    p·(level·scale): the same up to float32 rounding (the tests' tolerance rule, against
//    float64; the power-of-two factors are exact unless a weight falls below float32's normal
//    range, p·scale < 2^-102 (int4: 2^-98), where its error, 2^-149, times a lane (< 2^31) stays
//    under 2^-118, far below the rule's 1e-5·max(1, |V|max)).
//  - Chunks start at whole tiles: keys of a tile outside the split's range get the score −inf
//    (hidden), so each key is counted by exactly one split; the bytes of such neighbours (at most
//    3 per split end, inside the cache's rows) are loaded but never reach a result.
#include "cpu/attention_decode_quantized_simd128.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>

#include "core/kv_cache_format.h"
#include "core/masks.h"
#include "core/round_up.h"
#include "cpu/decode_split_k.h"
#include "cpu/microkernels.h"
#include "cpu/simd128.h"
#include "cpu/simd128_int.h"
#include "cpu/thread_pool.h"

namespace sdpa {
namespace {

using namespace simd;

constexpr idx kChunk = kDecodeChunkKeys;
static_assert(kChunk % kQuantTileKeys == 0, "chunks are whole tiles");
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Shared, read-only state of one call.
struct QuantizedDecode {
  const AttentionPlan& p;
  const AttentionInputs& in;
  QuantizedLayout keys, values;
  idx R, group, Lq, E, Ev, Hq, Hkv;
  DecodePartialShape shape;
  idx keys_per_split, splits;
  DecodeWorkspace workspace;   // partials [B·Hkv·splits][R][partial_row]; per thread: scores [R][kChunk],
                               // then weights [R][kChunk] (or a row of Ev)
  const float* query_scales;   // [B·Hq·Lq][key blocks], times the attention scale and the dots' unit
  const int16_t* query_levels;  // [B·Hq·Lq][key blocks·32]; int4 keys with kNibbleDots: none
  const int8_t* query_bytes;    // kNibbleDots on int4 keys: the levels as int8 [B·Hq·Lq][key blocks·32]
  const int32_t* query_bias;    // and 8·Σ of each block's levels [B·Hq·Lq][key blocks]
};

// int4 keys on the relaxed-SIMD build: scores by i16x8.relaxed_dot_i8x16_i7x16_s on the stored
// nibbles (nibble_block_dots).
#if defined(SDPA_SIMD_DOT_I8X16_I7)
template <KvQuant kKind>
constexpr bool kNibbleDots = kKind == KvQuant::kInt4;
#else
template <KvQuant kKind>
constexpr bool kNibbleDots = false;
#endif

idx query_rows(const AttentionPlan& p) { return static_cast<idx>(p.B * p.Hq * p.Lq); }
idx scratch_floats_per_thread(const AttentionPlan& p) {
  const idx R = decode_group_rows(p);
  return R * kChunk + std::max<idx>(R * kChunk, round_up(static_cast<idx>(p.Ev), 4));
}

// What one unit of the int8 lanes of for_each_quad and load_quad_pair is worth in levels: 1
// (int8), or 1/16 (int4, unpacked as level·16).
template <KvQuant kKind>
constexpr double kLaneUnit = kKind == KvQuant::kInt8 ? 1.0 : 1.0 / 16;

// Calls quad(lanes, g) for the 8 quads g of one tile-block (a tile's 4 keys × one block of 32
// elements): lanes holds elements 4g…4g+3 of each of the 4 keys as int8 levels ÷ kLaneUnit, 4
// lanes per key.
template <KvQuant kKind, typename Quad>
inline void for_each_quad(const uint8_t* tile, const Quad& quad) {
  if constexpr (kKind == KvQuant::kInt8) {
#pragma clang loop unroll(full)
    for (idx g = 0; g < 8; ++g) quad(load_i8x16(tile + 16 * g), g);
  } else {
#pragma clang loop unroll(full)
    for (idx w = 0; w < 4; ++w) {
      i8x16 low, high;
      int4_levels_times_16(load_i8x16(tile + 16 * w), &low, &high);
      quad(low, 2 * w);
      quad(high, 2 * w + 1);
    }
  }
}

// A chunk's tiles of a quantized tensor's head: per tile, `level_bytes` bytes of levels and
// `scale_floats` scales. touch(t) loads tile t line by line (touch_lines), so that a later pass
// finds it in the cache.
struct ChunkTiles {
  const uint8_t* levels;
  const float* scales;
  idx level_bytes, scale_floats, count;
  uint32_t touch(idx t) const {
    return t < count ? touch_lines(levels + t * level_bytes, level_bytes) ^ touch_lines(scales + t * scale_floats, scale_floats) : 0;
  }
};

// `tiles` tiles of a quantized tensor's head from key j0 (a whole tile).
inline ChunkTiles chunk_tiles(const QuantizedLayout& layout, const uint8_t* tensor, idx head, idx j0, idx tiles) {
  return {tensor + layout.level_offset(head, j0, 0),
          reinterpret_cast<const float*>(tensor + layout.scale_offset) + layout.tile_block(head, j0, 0) * kQuantTileKeys,
          static_cast<idx>(layout.blocks * layout.tile_block_bytes()), static_cast<idx>(layout.blocks * kQuantTileKeys), tiles};
}

// Scores of kRows rows (block scales times the attention scale qs[r]) against `tiles` tiles of
// keys whose first tile-block is at `levels` (its scales at `scales`) into s[r][4t + k]; the tiles of `touch`
// and `touch_next` are loaded line by line along the way. block_dots(tile_block, c, dots) gives
// each row's exact integer dot products with the 4 keys of block c (key k in lane k), always
// inlined: as a call per block, int8 and int4 steps took 8-15% longer (scripts/bench/ab.mjs).
template <int kRows, KvQuant kKind, typename BlockDots>
void score_tiles(const float* const* qs, const uint8_t* levels, const float* scales, idx tiles, idx blocks,
                 float* const* s, const ChunkTiles& touch, const ChunkTiles& touch_next, const BlockDots& block_dots) {
  constexpr idx kTileBlockBytes = kQuantTileKeys * quant_block_bytes(kKind);
  uint32_t touched = 0;
  for (idx t = 0; t < tiles; ++t) {
    touched ^= touch.touch(t) ^ touch_next.touch(t);
    f32x4 acc[kRows];
    for (int r = 0; r < kRows; ++r) acc[r] = splat(0.0f);
    for (idx c = 0; c < blocks; ++c) {
      i32x4 block[kRows];
      block_dots(levels + (t * blocks + c) * kTileBlockBytes, c, block);
      const f32x4 key_scales = load(scales + (t * blocks + c) * kQuantTileKeys);
      for (int r = 0; r < kRows; ++r) acc[r] = madd(to_float(block[r]), mul(key_scales, splat(qs[r][c])), acc[r]);
    }
    for (int r = 0; r < kRows; ++r) store(s[r] + kQuantTileKeys * t, acc[r]);
  }
  volatile uint32_t keep = touched;  // the touching loads must not be optimized away
  (void)keep;
}

// score_tiles' block_dots from the query rows' levels q[r] kept as int16: each quad widened to
// int16 and dotted (i32x4.dot_i16x8_s) with the row's 4 levels repeated leaves keys 0-1 and 2-3
// in lane pairs, summed once per block. int4 lanes are level·16 (kLaneUnit).
template <int kRows, KvQuant kKind>
__attribute__((always_inline)) inline void int16_block_dots(const int16_t* const* q, const uint8_t* tile, idx c,
                                                            i32x4* dots) {
  i32x4 lo[kRows], hi[kRows];
  const int16_t* block_levels[kRows];
  for (int r = 0; r < kRows; ++r) {
    lo[r] = hi[r] = zero_i32();
    block_levels[r] = q[r] + c * kQuantBlock;
    opaque_pointer(block_levels[r]);
  }
  // Quad g (elements 4g…4g+3 of the block) of the 4 keys.
  const auto quad = [&](i8x16 k, idx g) {
    const i16x8 k01 = widen_low(k), k23 = widen_high(k);
    for (int r = 0; r < kRows; ++r) {
      const i16x8 x = load_i16x4_twice(block_levels[r] + 4 * g);
      lo[r] = add_i32(lo[r], dot_pairs(k01, x));
      hi[r] = add_i32(hi[r], dot_pairs(k23, x));
    }
  };
  for_each_quad<kKind>(tile, quad);
  for (int r = 0; r < kRows; ++r) dots[r] = pair_sums(lo[r], hi[r]);
}

// score_tiles' block_dots for int4 keys on the relaxed-SIMD build, from the query rows' int8
// levels q[r] and their blocks' 8·Σ levels bias[r]: a tile-block's 4 loads of 16 bytes hold its 8
// quads as nibbles of level + 8 (0…15, the 7-bit operand of i16x8.relaxed_dot_i8x16_i7x16_s,
// exact on every engine), each multiplied by the row's 4 query levels of the quad in every int32
// lane: the int16 lanes 2k, 2k + 1 sum key k's products (at most 8 quads · 2 · 127 · 15 = 30480 in
// a block), one pairwise widening gives each key's Σ q·(level + 8) in its lane, and the bias takes
// the 8s out. The same integer dot products as int16_block_dots, so the same scores, bit for bit.
#if defined(SDPA_SIMD_DOT_I8X16_I7)
template <int kRows>
__attribute__((always_inline)) inline void nibble_block_dots(const int8_t* const* q, const int32_t* const* bias,
                                                             const uint8_t* tile, idx c, i32x4* dots) {
  i16x8 sums[kRows];
  const int8_t* block_levels[kRows];
  for (int r = 0; r < kRows; ++r) {
    sums[r] = zero_i16();
    block_levels[r] = q[r] + c * kQuantBlock;
    opaque_pointer(block_levels[r]);
  }
  // Rolled: unrolled, V8 loads all 32 query words of the rows first and spills them (int4 steps
  // took 1.02-1.05x as long).
#pragma clang loop unroll(disable)
  for (idx w = 0; w < 4; ++w) {
    i8x16 low, high;  // quads 2w and 2w + 1: elements 8w…8w+3 and 8w+4…8w+7 of the 4 keys
    int4_nibbles(load_i8x16(tile + 16 * w), &low, &high);
    for (int r = 0; r < kRows; ++r) {
      sums[r] = add_i16(sums[r], dot_pairs_i8_u7(load_i8x4_splat(block_levels[r] + 8 * w), low));
      sums[r] = add_i16(sums[r], dot_pairs_i8_u7(load_i8x4_splat(block_levels[r] + 8 * w + 4), high));
    }
  }
  for (int r = 0; r < kRows; ++r) dots[r] = sub_i32(pair_sums_i16(sums[r]), splat_i32(bias[r][c]));
}
#endif

// Quads 2·pair and 2·pair + 1 of a tile-block (its 4 keys × elements 8·pair…8·pair + 7), as
// for_each_quad gives them: two loads (int8), or the low and high nibbles of one (int4).
template <KvQuant kKind>
inline void load_quad_pair(const uint8_t* tile_block, idx pair, i8x16* quads) {
  if constexpr (kKind == KvQuant::kInt8) {
    quads[0] = load_i8x16(tile_block + 32 * pair);
    quads[1] = load_i8x16(tile_block + 32 * pair + 16);
  } else {
    int4_levels_times_16(load_i8x16(tile_block + 16 * pair), &quads[0], &quads[1]);
  }
}

// What a float32 lane of lane_bytes_to_float_2p24 on load_quad_pair's quads is worth in levels.
template <KvQuant kKind>
constexpr float kValueLaneUnit = static_cast<float>(kLaneUnit<kKind> * 0x1p-24);

// o_r[0, 4·kQuads) += Σ_j w_r[j]·lane_j over `tiles` tiles of value levels: columns
// 8·pair…8·pair + 4·kQuads − 1 of one block (the tiles' blocks `tile_stride` bytes apart from
// `tile_block`), w_r[j] the weight of key j times its block scale and kValueLaneUnit. Each key's
// lanes are converted once for all kRows rows (a swizzle and a conversion per quad); each output
// lane is a chain of multiply-adds in key order.
//
// Written for V8's code (15 vector registers on x64; docs/decode.md): V8 issues a loop body's loads
// first, so each row's 4 weights of a tile are one load, splatted for each key by a shuffle, not
// 16 loads held in registers; and each row's weights are read through a pointer of their own
// (opaque_pointer), a load at a constant offset rather than an address computed per load.
template <int kRows, KvQuant kKind, int kQuads>
void add_weighted_levels(const float* const* w, const uint8_t* tile_block, idx tile_stride, idx tiles, idx pair,
                         float* const* o) {
  f32x4 acc[kRows][kQuads];
  for (int r = 0; r < kRows; ++r) {
    for (int g = 0; g < kQuads; ++g) acc[r][g] = load(o[r] + 4 * g);
  }
  const float* weights[kRows];
  for (int r = 0; r < kRows; ++r) weights[r] = w[r];
  for (idx t = 0; t < tiles; ++t, tile_block += tile_stride) {
    i8x16 quads[2];
    load_quad_pair<kKind>(tile_block, pair, quads);
    f32x4 tile_weights[kRows];
    for (int r = 0; r < kRows; ++r) tile_weights[r] = load(weights[r]);
    const auto add_key = [&](auto key_constant) {
      constexpr int key = decltype(key_constant)::value;
      f32x4 x[kQuads];
      for (int g = 0; g < kQuads; ++g) x[g] = lane_bytes_to_float_2p24<key>(quads[g]);
      for (int r = 0; r < kRows; ++r) {
        const f32x4 weight = shuffle<key, key, key, key>(tile_weights[r], tile_weights[r]);
        for (int g = 0; g < kQuads; ++g) acc[r][g] = madd(weight, x[g], acc[r][g]);
      }
    };
    // The 4 keys spelled out: the bytes each key's swizzle picks are fixed at compile time.
    add_key(std::integral_constant<int, 0>{});
    add_key(std::integral_constant<int, 1>{});
    add_key(std::integral_constant<int, 2>{});
    add_key(std::integral_constant<int, 3>{});
    for (int r = 0; r < kRows; ++r) {
      weights[r] += kQuantTileKeys;
      opaque_pointer(weights[r]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int g = 0; g < kQuads; ++g) store(o[r] + 4 * g, acc[r][g]);
  }
}

// One split of one (batch, KV head) on one thread.
template <KvQuant kKind>
class QuantizedSplitTask {
 public:
  QuantizedSplitTask(const QuantizedDecode& d, idx b, idx kv_head, float* scratch)
      : d_(d), b_(b), kv_(kv_head), head_(b * d.Hkv + kv_head), scores_(scratch), weights_(scratch + d.R * kChunk) {
    const AttentionPlan& p = d.p;
    first_key_ = std::max<int64_t>(0, p.first_visible_key(b, 0));
    end_key_ = std::max<int64_t>(first_key_, p.last_visible_key(b, d.Lq - 1) + 1);
  }

  int64_t first_key() const { return first_key_; }
  int64_t end_key() const { return end_key_; }

  // Scores of every row against keys [j0, j0 + n) (j0 a whole tile, n a multiple of 4), softcapped,
  // biased and masked as the reference does; keys outside [lo, hi) are −inf.
  void compute_scores(idx j0, idx n, int64_t lo, int64_t hi, idx next_tiles) const {
    const QuantizedLayout& k = d_.keys;
    const idx tiles = n / kQuantTileKeys;
    const ChunkTiles keys = chunk_tiles(k, d_.in.key_quantized, head_, j0, tiles);
    // This chunk's value tiles, loaded along the first row block's scores.
    const ChunkTiles values = chunk_tiles(d_.values, d_.in.value_quantized, head_, j0, tiles);
    const ChunkTiles next_keys = chunk_tiles(k, d_.in.key_quantized, head_, j0 + n, next_tiles);
    const int16_t* q[4];
    const int8_t* q_bytes[4];
    const int32_t* q_bias[4];
    const float* qs[4];
    float* s[4];
    for_row_blocks(d_.R, [&](auto count, idx r) {
      constexpr int kRows = decltype(count)::value;
      for (int x = 0; x < kRows; ++x) {
        const GroupRow g = group_row(d_, kv_, r + x);
        const idx row = (b_ * d_.Hq + g.h) * d_.Lq + g.i;
        if constexpr (kNibbleDots<kKind>) {
          q_bytes[x] = d_.query_bytes + row * k.blocks * kQuantBlock;
          q_bias[x] = d_.query_bias + row * k.blocks;
        } else {
          q[x] = d_.query_levels + row * k.blocks * kQuantBlock;
        }
        qs[x] = d_.query_scales + row * k.blocks;
        s[x] = scores_ + (r + x) * kChunk;
      }
      const ChunkTiles touch = r == 0 ? values : ChunkTiles{}, touch_next = r == 0 ? next_keys : ChunkTiles{};
#if defined(SDPA_SIMD_DOT_I8X16_I7)
      if constexpr (kNibbleDots<kKind>) {
        const auto nibbles = [&](const uint8_t* tile, idx c, i32x4* dots) __attribute__((always_inline)) {
          nibble_block_dots<kRows>(q_bytes, q_bias, tile, c, dots);
        };
        score_tiles<kRows, kKind>(qs, keys.levels, keys.scales, tiles, k.blocks, s, touch, touch_next, nibbles);
        return;
      }
#endif
      const auto int16s = [&](const uint8_t* tile, idx c, i32x4* dots) __attribute__((always_inline)) {
        int16_block_dots<kRows, kKind>(q, tile, c, dots);
      };
      score_tiles<kRows, kKind>(qs, keys.levels, keys.scales, tiles, k.blocks, s, touch, touch_next, int16s);
    });

    shape_chunk_scores(d_, b_, kv_, j0, n, n, scores_, kChunk);
    const idx before = static_cast<idx>(std::clamp<int64_t>(lo - j0, 0, n));
    const idx after = static_cast<idx>(std::clamp<int64_t>(hi - j0, before, n));
    for (idx row = 0; row < d_.R; ++row) {
      std::fill(scores_ + row * kChunk, scores_ + row * kChunk + before, kNegInf);
      std::fill(scores_ + row * kChunk + after, scores_ + row * kChunk + n, kNegInf);
    }
  }

  // O += P·V over the chunk's keys [j0, j0 + n), a block of value columns at a time: each row's
  // weights times the keys' block scales (0 for hidden keys, whose −0.0 weight would otherwise
  // meet a NaN scale), then the levels converted in registers and added for every row.
  void accumulate(idx j0, idx n, float* partial) const {
    const QuantizedLayout& v = d_.values;
    const idx tiles = n / kQuantTileKeys;
    const ChunkTiles values = chunk_tiles(v, d_.in.value_quantized, head_, j0, tiles);
    const f32x4 hidden = from_bits(kNegativeZeroBits);
    const f32x4 value_lane_unit = splat(kValueLaneUnit<kKind>);
    for (idx c = 0; c < v.blocks; ++c) {
      const idx quads = std::min<idx>(kQuantBlock, d_.shape.ev4 - c * kQuantBlock) / 4;
      for (idx row = 0; row < d_.R; ++row) {
        const float* p = scores_ + row * kChunk;
        float* w = weights_ + row * kChunk;
        for (idx t = 0; t < tiles; ++t) {
          const f32x4 pt = load(p + kQuantTileKeys * t);
          const f32x4 block_scales = load(values.scales + t * values.scale_floats + c * kQuantTileKeys);
          store(w + kQuantTileKeys * t, keep_where(mul(mul(pt, block_scales), value_lane_unit), bits_differ(pt, hidden)));
        }
      }
      const uint8_t* tile_block = values.levels + c * v.tile_block_bytes();
      const float* w[4];
      float* o[4];
      for_row_blocks(d_.R, [&](auto count, idx r) {
        constexpr int kRows = decltype(count)::value;
        for (idx pair = 0; 2 * pair < quads; ++pair) {
          for (int x = 0; x < kRows; ++x) {
            w[x] = weights_ + (r + x) * kChunk;
            o[x] = partial + (r + x) * d_.shape.partial_row + c * kQuantBlock + 8 * pair;
          }
          if (2 * pair + 1 < quads) add_weighted_levels<kRows, kKind, 2>(w, tile_block, values.level_bytes, tiles, pair, o);
          else add_weighted_levels<kRows, kKind, 1>(w, tile_block, values.level_bytes, tiles, pair, o);
        }
      });
    }
  }

  // Keys [begin, end) into `partial`, in chunks that start at whole tiles.
  void run(int64_t begin, int64_t end, float* partial) const {
    start_partials(d_.shape, d_.R, partial);
    for (int64_t j0 = begin / kQuantTileKeys * kQuantTileKeys; j0 < end; j0 += kChunk) {
      const idx n = static_cast<idx>(round_up<int64_t>(std::min<int64_t>(kChunk, end - j0), kQuantTileKeys));
      const idx next_tiles = static_cast<idx>(std::clamp<int64_t>(end - j0 - n, 0, kChunk) + kQuantTileKeys - 1) / kQuantTileKeys;
      compute_scores(static_cast<idx>(j0), n, begin, end, next_tiles);
      online_softmax_chunk(d_.shape, d_.R, n, scores_, kChunk, partial);
      accumulate(static_cast<idx>(j0), n, partial);
    }
  }

  // Row `row`'s output recomputed with normalized weights e^(s − M)/L over its visible keys.
  void recompute_row(idx row, float M, float L, float* out) const {
    std::fill(out, out + d_.Ev, 0.0f);
    for (int64_t j0 = first_key_ / kQuantTileKeys * kQuantTileKeys; j0 < end_key_; j0 += kChunk) {
      const idx n = static_cast<idx>(round_up<int64_t>(std::min<int64_t>(kChunk, end_key_ - j0), kQuantTileKeys));
      compute_scores(static_cast<idx>(j0), n, first_key_, end_key_, 0);
      const float* s = scores_ + row * kChunk;
      for (idx j = 0; j < n; ++j) {
        if (s[j] == kNegInf) continue;  // hidden: its V (even NaN) is left out
        const float w = std::exp(s[j] - M) / L;
        load_quantized_row(d_.values, d_.in.value_quantized, head_, j0 + j, weights_);
        for (idx c = 0; c < d_.Ev; ++c) out[c] += w * weights_[c];
      }
    }
  }

 private:
  const QuantizedDecode& d_;
  idx b_, kv_, head_;
  float* scores_;
  float* weights_;  // [R][kChunk] weights times value scales; a dequantized value row in recompute_row
  int64_t first_key_, end_key_;
};

template <KvQuant kKind>
void run_decode(const QuantizedDecode& d, float* output, int threads, float* lse) {
  run_split_k_decode<QuantizedSplitTask<kKind>>(d, 1.0f, output, threads, lse);
}

// The partials of every task and the per-thread scratch (DecodeWorkspace), then the query scales
// (floats); the query levels follow: int16, or (kNibbleDots on int4 keys) int8 levels and int32
// block biases.
struct WorkspaceParts {
  DecodeWorkspace split_k;
  uint64_t query_scales, query_levels_bytes;
};
bool nibble_dots(const AttentionPlan& p) { return p.kv_quant() == KvQuant::kInt4 && kNibbleDots<KvQuant::kInt4>; }
WorkspaceParts workspace_parts(const AttentionPlan& p, const DecodeSplit& split, int threads) {
  const uint64_t blocks = static_cast<uint64_t>((p.E + kQuantBlock - 1) / kQuantBlock);
  WorkspaceParts w{DecodeWorkspace(p, split.splits_per_head, scratch_floats_per_thread(p), threads), 0, 0};
  w.query_scales = static_cast<uint64_t>(query_rows(p)) * blocks;
  w.query_levels_bytes = static_cast<uint64_t>(query_rows(p)) * blocks *
                         (nibble_dots(p) ? kQuantBlock * sizeof(int8_t) + sizeof(int32_t) : kQuantBlock * sizeof(int16_t));
  return w;
}

}  // namespace

uint64_t decode_quantized_workspace_bytes(const AttentionPlan& plan, const DecodeSplit& split, int threads) {
  const WorkspaceParts w = workspace_parts(plan, split, threads);
  return (w.split_k.floats() + w.query_scales) * sizeof(float) + w.query_levels_bytes;
}

void attention_decode_quantized_simd128(const AttentionPlan& p, const AttentionInputs& in, const DecodeSplit& split,
                                        float* output, float* workspace, int threads, float* lse) {
  if (p.B * p.Hq * p.Lq == 0) return;
  WorkspaceParts w = workspace_parts(p, split, threads);
  float* query_scales = w.split_k.place(workspace);
  const QuantizedLayout keys = p.key_layout();
  const idx query_blocks = query_rows(p) * keys.blocks;
  // The query rows quantized once: int8 levels of each block (zero-padded to 32), kept as int16,
  // or as int8 with their 8·Σ for the nibble dot products; each block's scale is kept times the
  // attention scale and what a unit of the dot products is worth in levels (int4 lanes of
  // level·16 on the int16 path: 1/16).
  const bool bytes = nibble_dots(p);
  const double dot_unit = bytes || p.kv_quant() == KvQuant::kInt8 ? 1.0 : kLaneUnit<KvQuant::kInt4>;
  const float score_unit = static_cast<float>(p.scale * dot_unit);
  auto* query_levels = bytes ? nullptr : reinterpret_cast<int16_t*>(query_scales + w.query_scales);
  auto* query_bias = bytes ? reinterpret_cast<int32_t*>(query_scales + w.query_scales) : nullptr;
  auto* query_bytes = bytes ? reinterpret_cast<int8_t*>(query_bias + query_blocks) : nullptr;
  for (idx block = 0; block < query_blocks; ++block) {
    const idx row = block / keys.blocks, c = block % keys.blocks;
    int8_t levels[kQuantBlock];
    const int n = static_cast<int>(std::min<int64_t>(kQuantBlock, p.E - c * kQuantBlock));
    const float* x = in.query + row * p.E + c * kQuantBlock;
    query_scales[block] = quantize_block_lanes(KvQuant::kInt8, x, n, levels) * score_unit;
    if (bytes) {
      std::copy(levels, levels + kQuantBlock, query_bytes + block * kQuantBlock);
      int32_t sum = 0;
      for (int8_t level : levels) sum += level;
      query_bias[block] = 8 * sum;
    } else {
      std::copy(levels, levels + kQuantBlock, query_levels + block * kQuantBlock);
    }
  }
  const QuantizedDecode d{p,
                          in,
                          keys,
                          p.value_layout(),
                          decode_group_rows(p),
                          static_cast<idx>(p.heads_per_kv()),
                          static_cast<idx>(p.Lq),
                          static_cast<idx>(p.E),
                          static_cast<idx>(p.Ev),
                          static_cast<idx>(p.Hq),
                          static_cast<idx>(p.Hkv),
                          decode_partial_shape(p),
                          static_cast<idx>(split.keys_per_split),
                          static_cast<idx>(split.splits_per_head),
                          w.split_k,
                          query_scales,
                          query_levels,
                          query_bytes,
                          query_bias};
  if (p.kv_quant() == KvQuant::kInt4) {
    run_decode<KvQuant::kInt4>(d, output, threads, lse);
  } else {
    run_decode<KvQuant::kInt8>(d, output, threads, lse);
  }
}

}  // namespace sdpa
