// The WebGPU backend's pure-C++ planning (cpp/webgpu/plan.h): variants and their cache keys,
// cutting work to device limits, grid splitting, uniform packing. The kernels themselves are
// tested on a real device (dawn.node/SwiftShader, Chromium) by tests/node and tests/browser.
#include "webgpu/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

namespace sdpa {
namespace {

AttentionPlan make_plan(std::vector<int64_t> q, std::vector<int64_t> k, std::vector<int64_t> v,
                        MaskKind mask = MaskKind::kNone, std::vector<int64_t> mask_shape = {},
                        bool weights = false, bool gqa = false,
                        CausalAlignment causal = CausalAlignment::kNone) {
  AttentionRequest r;
  r.query_shape = std::move(q);
  r.key_shape = std::move(k);
  r.value_shape = std::move(v);
  r.mask_kind = mask;
  r.mask_shape = std::move(mask_shape);
  r.return_weights = weights;
  r.enable_gqa = gqa;
  r.causal = causal;
  AttentionPlan p;
  const Status s = plan_attention(r, &p);
  EXPECT_TRUE(s.ok()) << s.message;
  return p;
}

TEST(WebGpuPlan, PadsHeadDimsToFewSizes) {
  EXPECT_EQ(webgpu_pad_head_dim(1), 16u);
  EXPECT_EQ(webgpu_pad_head_dim(16), 16u);
  EXPECT_EQ(webgpu_pad_head_dim(17), 32u);
  EXPECT_EQ(webgpu_pad_head_dim(100), 128u);
  EXPECT_EQ(webgpu_pad_head_dim(256), 256u);
  EXPECT_EQ(webgpu_pad_head_dim(257), 320u);
}

TEST(WebGpuPlan, FlashVariantFitsWorkgroupStorageAndKeysDiffer) {
  WebGpuLimits limits;  // 16 KiB of workgroup storage
  FlashVariant v;
  ASSERT_TRUE(webgpu_flash_variant(make_plan({4, 256}, {9, 256}, {9, 256}), limits, &v).ok());
  EXPECT_FALSE(v.tiled);        // head dims above 128: the per-row kernel
  EXPECT_EQ(v.block_keys, 8u);  // 8 keys × (256 + 256) floats = 16 KiB
  EXPECT_LE(v.workgroup_bytes(), 16384u);
  // 512 heads: a grid of 512 workgroups of 64 rows.
  ASSERT_TRUE(webgpu_flash_variant(make_plan({512, 4, 8}, {512, 32, 8}, {512, 32, 3}), limits, &v).ok());
  EXPECT_TRUE(v.tiled);
  EXPECT_EQ(v.rows, 64u);
  EXPECT_EQ(v.block_keys, 32u);  // 64 keys need 23 KiB
  EXPECT_LE(v.workgroup_bytes(), 16384u);
  EXPECT_EQ(v.key(), "flash-tiled:e16:ev16:bk32:rows64:mask=none:causal=0:stats=0:ranges=0:alibi=0:sinks=0:docs=0:vec4=qk");

  std::set<std::string> keys;
  for (MaskKind m : {MaskKind::kNone, MaskKind::kBool, MaskKind::kAdditive}) {
    for (bool causal : {false, true}) {
      for (bool weights : {false, true}) {
        const AttentionPlan p =
            make_plan({4, 8}, {9, 8}, {9, 3}, m, m == MaskKind::kNone ? std::vector<int64_t>{} : std::vector<int64_t>{9},
                      weights, false, causal ? CausalAlignment::kTopLeft : CausalAlignment::kNone);
        ASSERT_TRUE(webgpu_flash_variant(p, limits, &v).ok());
        keys.insert(v.key());
        EXPECT_NE(v.wgsl_constants().find("const E_PAD: u32 = 16u;"), std::string::npos);
      }
    }
  }
  EXPECT_EQ(keys.size(), 12u);  // a mask composes with causality: 3 masks × causal or not × stats
  // Same variant for both causal alignments and any offset (the offset is a uniform, not a recompile).
  FlashVariant tl, br, off;
  ASSERT_TRUE(webgpu_flash_variant(make_plan({4, 8}, {9, 8}, {9, 3}, MaskKind::kNone, {}, false, false, CausalAlignment::kTopLeft), limits, &tl).ok());
  ASSERT_TRUE(webgpu_flash_variant(make_plan({4, 8}, {9, 8}, {9, 3}, MaskKind::kNone, {}, false, false, CausalAlignment::kBottomRight), limits, &br).ok());
  ASSERT_TRUE(webgpu_flash_variant(make_plan({4, 8}, {9, 8}, {9, 3}, MaskKind::kNone, {}, false, false, CausalAlignment::kOffset), limits, &off).ok());
  EXPECT_EQ(tl.key(), br.key());
  EXPECT_EQ(tl.key(), off.key());

  limits.max_workgroup_storage_bytes = 1024;
  EXPECT_EQ(webgpu_flash_variant(make_plan({4, 256}, {9, 256}, {9, 256}), limits, &v).kind, ErrorKind::kRange);
}

TEST(WebGpuPlan, TiledKernelWhereItsTileFits) {
  WebGpuLimits limits;
  FlashVariant v;
  // 512 heads: 64 rows a workgroup (webgpu_flash_rows).
  const AttentionPlan d64 = make_plan({512, 4, 64}, {512, 64, 64}, {512, 64, 64});
  const AttentionPlan d128 = make_plan({512, 4, 100}, {512, 64, 100}, {512, 64, 128});
  ASSERT_TRUE(webgpu_flash_variant(d64, limits, &v).ok());
  EXPECT_TRUE(v.tiled);
  EXPECT_EQ(v.block_keys, 16u);  // the default 16 KiB
  EXPECT_LE(v.workgroup_bytes(), limits.max_workgroup_storage_bytes);
  limits.max_workgroup_storage_bytes = 49152;  // what e.g. an NVIDIA adapter grants
  ASSERT_TRUE(webgpu_flash_variant(d64, limits, &v).ok());
  EXPECT_EQ(v.block_keys, 64u);
  EXPECT_LE(v.workgroup_bytes(), limits.max_workgroup_storage_bytes);
  ASSERT_TRUE(webgpu_flash_variant(d128, limits, &v).ok());
  EXPECT_TRUE(v.tiled);
  EXPECT_EQ(v.block_keys, 32u);
  EXPECT_LE(v.workgroup_bytes(), limits.max_workgroup_storage_bytes);
  // Fewer keys than the tile: the per-row kernel.
  ASSERT_TRUE(webgpu_flash_variant(make_plan({4, 64}, {63, 64}, {63, 64}), limits, &v).ok());
  EXPECT_FALSE(v.tiled);
  // Too little workgroup memory for 16 keys of 64 rows, or fewer than 64 rows · 4 lanes = 256
  // invocations: the per-row kernel. A grid of few heads takes 16 rows, whose tile fits both.
  limits.max_workgroup_storage_bytes = 4096;
  ASSERT_TRUE(webgpu_flash_variant(make_plan({512, 4, 8}, {512, 64, 8}, {512, 64, 8}), limits, &v).ok());
  EXPECT_FALSE(v.tiled);
  EXPECT_EQ(v.key(), "flash:e16:ev16:bk32:rows64:mask=none:causal=0:stats=0:ranges=0:alibi=0:sinks=0:docs=0:vec4=qkv");
  ASSERT_TRUE(webgpu_flash_variant(make_plan({4, 8}, {64, 8}, {64, 8}), limits, &v).ok());
  EXPECT_TRUE(v.tiled);
  EXPECT_EQ(v.rows, 16u);
  EXPECT_LE(v.workgroup_bytes(), limits.max_workgroup_storage_bytes);
  limits = WebGpuLimits{};
  limits.max_invocations_per_workgroup = 128;  // a compatibility-mode device
  ASSERT_TRUE(webgpu_flash_variant(d64, limits, &v).ok());
  EXPECT_FALSE(v.tiled);
  ASSERT_TRUE(webgpu_flash_variant(make_plan({4, 64}, {64, 64}, {64, 64}), limits, &v).ok());
  EXPECT_TRUE(v.tiled);
  EXPECT_EQ(v.rows * kWebGpuTiledLanes, 64u);
}

// The tiled kernel's rows per workgroup: 64 while the grid B·Hq·⌈Lq/64⌉ reaches
// kWebGpuTargetWorkgroups, else halved (32, then 16) until it does or 16 is reached; the choice is
// in the key, the WGSL constants and the grid, and its workgroup memory and size fit the limits.
TEST(WebGpuPlan, TiledRowsGrowTheGridOfFewHeadsAndFitTheLimits) {
  struct Case {
    int64_t heads, Lq;
    uint32_t rows;
  };
  // The GPU check's shapes (1×4096, 32×2048, 8×4096), the thresholds either side, short queries.
  const Case cases[] = {{1, 4096, 16},  {4, 4096, 32},  {8, 4096, 64},  {32, 2048, 64}, {7, 4096, 32},
                        {3, 4096, 16},  {512, 4, 64},   {511, 4, 16},   {256, 64, 32},  {255, 64, 16},
                        {16, 2048, 64}, {15, 2048, 32}, {1, 1, 16},     {64, 512, 64},  {32, 512, 32}};
  WebGpuLimits nvidia;
  nvidia.max_workgroup_storage_bytes = 49152;
  for (const WebGpuLimits& limits : {WebGpuLimits{}, nvidia}) {
    for (const Case& c : cases) {
      for (int64_t E : {8, 64, 128}) {
        const AttentionPlan p = make_plan({c.heads, c.Lq, E}, {c.heads, 64, E}, {c.heads, 64, E});
        const std::string shape = std::to_string(c.heads) + "x" + std::to_string(c.Lq) + "x" + std::to_string(E) +
                                  " storage " + std::to_string(limits.max_workgroup_storage_bytes);
        EXPECT_EQ(webgpu_flash_rows(p), c.rows) << shape;
        // The rule itself: the grid at the chosen rows reaches the target, or the rows are the fewest.
        const uint64_t grid = static_cast<uint64_t>(c.heads) * ((c.Lq + c.rows - 1) / c.rows);
        EXPECT_TRUE(grid >= kWebGpuTargetWorkgroups || c.rows == kWebGpuTiledMinRows) << shape;
        if (c.rows < kWebGpuFlashRows) {
          EXPECT_LT(static_cast<uint64_t>(c.heads) * ((c.Lq + 2 * c.rows - 1) / (2 * c.rows)), kWebGpuTargetWorkgroups) << shape;
        }
        FlashVariant v;
        ASSERT_TRUE(webgpu_flash_variant(p, limits, &v).ok()) << shape;
        EXPECT_TRUE(v.tiled) << shape;
        EXPECT_EQ(v.rows, c.rows) << shape;
        EXPECT_LE(v.workgroup_bytes(), limits.max_workgroup_storage_bytes) << shape;
        EXPECT_LE(v.rows * kWebGpuTiledLanes, limits.max_invocations_per_workgroup) << shape;
        EXPECT_NE(v.key().find(":rows" + std::to_string(c.rows) + ":"), std::string::npos) << shape;
        EXPECT_NE(v.wgsl_constants().find("const ROWS: u32 = " + std::to_string(c.rows) + "u;"), std::string::npos) << shape;
        EXPECT_EQ(v.row_tiles(c.Lq), static_cast<uint64_t>((c.Lq + c.rows - 1) / c.rows)) << shape;
      }
    }
  }
  // The H100's 1×4096×64: 256 workgroups of 16 rows (64 of 64 rows), with the 64-key tile.
  FlashVariant v;
  ASSERT_TRUE(webgpu_flash_variant(make_plan({1, 4096, 64}, {1, 4096, 64}, {1, 4096, 64}), nvidia, &v).ok());
  EXPECT_TRUE(v.tiled);
  EXPECT_EQ(v.rows, 16u);
  EXPECT_EQ(v.block_keys, 64u);
  EXPECT_EQ(v.row_tiles(4096), 256u);
  EXPECT_EQ(v.grid(4096, 1).x, 256u);
  EXPECT_EQ(v.grid(4096, 1).y, 1u);
  // The decode kernels (built from the flash variant) read row tile 0 only: neither the rows nor
  // the order is part of their key or text.
  FlashVariant merge = v;
  merge.tiled = false;
  merge.decode = 2;
  merge.heaviest_first = true;
  EXPECT_EQ(merge.key().find(":rows"), std::string::npos);
  EXPECT_EQ(merge.key().find("heaviest"), std::string::npos);
  EXPECT_NE(merge.wgsl_constants().find("const ROWS: u32 = 64u;"), std::string::npos);
  EXPECT_NE(merge.wgsl_constants().find("const HEAVIEST_FIRST: bool = false;"), std::string::npos);
}

// Causal calls and windows with a right side (the last visible key grows with the row) run the
// grid tile-major (heads on x, row tiles on y, last tile first); the others keep row tiles on x
// and heads on y. Part of key and constants.
TEST(WebGpuPlan, HeaviestRowTilesFirstWhereTheLastKeyGrowsWithTheRow) {
  auto variant = [](CausalAlignment causal, bool window_left, bool window_right, bool many_dims) {
    AttentionRequest r;
    r.query_shape = {2, 100, many_dims ? 160 : 16};
    r.key_shape = {2, 100, many_dims ? 160 : 16};
    r.value_shape = {2, 100, 8};
    r.causal = causal;
    r.has_window_left = window_left;
    r.window_left = 10;
    r.has_window_right = window_right;
    r.window_right = 3;
    AttentionPlan p;
    EXPECT_TRUE(plan_attention(r, &p).ok());
    FlashVariant v;
    EXPECT_TRUE(webgpu_flash_variant(p, WebGpuLimits{}, &v).ok());
    return v;
  };
  for (bool many_dims : {false, true}) {  // the tiled kernel and the per-row kernel
    for (CausalAlignment causal : {CausalAlignment::kTopLeft, CausalAlignment::kBottomRight, CausalAlignment::kOffset}) {
      for (bool left : {false, true}) {
        const FlashVariant v = variant(causal, left, false, many_dims);
        EXPECT_EQ(v.tiled, !many_dims);
        EXPECT_TRUE(v.heaviest_first);
        EXPECT_NE(v.key().find(":heaviest-first"), std::string::npos);
        EXPECT_NE(v.wgsl_constants().find("const HEAVIEST_FIRST: bool = true;"), std::string::npos);
        EXPECT_EQ(v.grid(100, 6).x, 6u);
        EXPECT_EQ(v.grid(100, 6).y, v.row_tiles(100));
      }
    }
    EXPECT_TRUE(variant(CausalAlignment::kNone, false, true, many_dims).heaviest_first);
    EXPECT_TRUE(variant(CausalAlignment::kNone, true, true, many_dims).heaviest_first);
    for (bool left : {false, true}) {  // every row sees up to the last key: the first tile is heaviest
      const FlashVariant v = variant(CausalAlignment::kNone, left, false, many_dims);
      EXPECT_FALSE(v.heaviest_first);
      EXPECT_EQ(v.key().find("heaviest"), std::string::npos);
      EXPECT_NE(v.wgsl_constants().find("const HEAVIEST_FIRST: bool = false;"), std::string::npos);
      EXPECT_EQ(v.grid(100, 6).x, v.row_tiles(100));
      EXPECT_EQ(v.grid(100, 6).y, 6u);
    }
  }
}

// The prefill key split (webgpu_flash_key_splits): only where the flash grid stays below the
// target at the fewest rows and the keys fill two splits of min_split_keys; S the smallest power
// of two that reaches the target, lowered until a chunk's records fit one binding.
TEST(WebGpuPlan, PrefillSplitsTheKeysOfSmallGridsOverLongKeys) {
  WebGpuLimits h100;  // an H100 through dawn: 48 KiB of workgroup memory
  h100.max_workgroup_storage_bytes = 49152;
  auto split = [&](int64_t heads, int64_t Lq, int64_t Lk, int64_t E, CausalAlignment causal, const WebGpuLimits& limits,
                   bool weights = false) {
    const AttentionPlan p = make_plan({heads, Lq, E}, {heads, Lk, E}, {heads, Lk, E}, MaskKind::kNone, {}, weights, false, causal);
    FlashVariant flash;
    EXPECT_TRUE(webgpu_flash_variant(p, limits, &flash).ok());
    std::vector<WebGpuChunk> chunks;
    EXPECT_TRUE(plan_webgpu_chunks(p, limits, &chunks).ok());
    const FlashVariant v = webgpu_flash_key_splits(p, limits, flash, webgpu_most_chunk_rows(chunks));
    if (v.key_splits > 1) {
      // Every key in one split, each split at least min_split_keys keys and whole key tiles.
      EXPECT_EQ(v.split_keys % v.block_keys, 0u);
      EXPECT_GE(v.split_keys, limits.min_split_keys);
      EXPECT_GE(uint64_t{v.key_splits} * v.split_keys, static_cast<uint64_t>(Lk));
      EXPECT_LT(uint64_t{v.key_splits - 1} * v.split_keys, static_cast<uint64_t>(Lk));
    }
    return v;
  };
  for (CausalAlignment causal : {CausalAlignment::kNone, CausalAlignment::kTopLeft}) {
    // 32 heads of 2048 rows fill the grid: no split.
    const FlashVariant full = split(32, 2048, 2048, 64, causal, h100);
    EXPECT_EQ(full.key_splits, 1u);
    EXPECT_EQ(full.key().find(":split"), std::string::npos);
    EXPECT_NE(full.wgsl_constants().find("const SPLIT: bool = false;"), std::string::npos);
    // One head of 4096: 256 workgroups of 16 rows, two splits of 2048 keys reach 512.
    const FlashVariant one = split(1, 4096, 4096, 64, causal, h100);
    EXPECT_TRUE(one.tiled);
    EXPECT_EQ(one.rows, 16u);
    EXPECT_EQ(one.key_splits, 2u);
    EXPECT_EQ(one.split_keys, 2048u);
    EXPECT_EQ(one.record_bytes(), 276u);  // 4 × (5 header floats + 64 value columns)
    EXPECT_NE(one.key().find(":split"), std::string::npos);
    EXPECT_NE(one.wgsl_constants().find("const SPLIT: bool = true;"), std::string::npos);
    // The head axis holds head·splits + split; tile-major (heaviest first) under causal.
    const FlashGrid g = one.grid(4096, 1);
    EXPECT_EQ(causal == CausalAlignment::kNone ? g.x : g.y, 256u);
    EXPECT_EQ(causal == CausalAlignment::kNone ? g.y : g.x, 2u);
    // The same bits on every call: a pure function of the plan and the limits.
    const FlashVariant again = split(1, 4096, 4096, 64, causal, h100);
    EXPECT_EQ(again.key(), one.key());
    EXPECT_EQ(again.split_keys, one.split_keys);
  }
  // Fewer rows: more splits, at most Lk / min_split_keys of them.
  EXPECT_EQ(split(1, 1024, 4096, 64, CausalAlignment::kNone, h100).key_splits, 8u);
  EXPECT_EQ(split(1, 64, 4096, 64, CausalAlignment::kNone, h100).key_splits, 8u);
  EXPECT_EQ(split(1, 4096, 1024, 64, CausalAlignment::kNone, h100).key_splits, 2u);
  EXPECT_EQ(split(1, 4096, 1023, 64, CausalAlignment::kNone, h100).key_splits, 1u);
  // The per-row kernel (E = 160) keeps 64 rows: 64 workgroups, 8 splits of 22 tiles of 24 keys.
  const FlashVariant wide = split(1, 4096, 4096, 160, CausalAlignment::kNone, h100);
  EXPECT_FALSE(wide.tiled);
  EXPECT_EQ(wide.block_keys, 24u);
  EXPECT_EQ(wide.key_splits, 8u);
  EXPECT_EQ(wide.split_keys, 528u);
  // Weights (their pass reads the flash kernel's statistics) and decode-sized calls keep one pass.
  EXPECT_EQ(split(1, 4096, 4096, 64, CausalAlignment::kNone, h100, true).key_splits, 1u);
  EXPECT_EQ(split(1, 8, 4096, 64, CausalAlignment::kNone, h100).key_splits, 1u);
  EXPECT_EQ(split(1, 9, 4096, 64, CausalAlignment::kNone, h100).key_splits, 8u);
  // A trace follows the one-pass kernel's tiles.
  {
    const AttentionPlan p = make_plan({1, 4096, 64}, {1, 4096, 64}, {1, 4096, 64});
    FlashVariant flash;
    ASSERT_TRUE(webgpu_flash_variant(p, h100, &flash).ok());
    flash.trace_row = 3;
    EXPECT_EQ(webgpu_flash_key_splits(p, h100, flash, 4096).key_splits, 1u);
  }
  // Records past the binding limit: fewer splits (8 × 1024 rows × 276 bytes > 2 MiB ≥ 4 × …).
  WebGpuLimits small_binding = h100;
  small_binding.max_storage_binding_bytes = 2u << 20;
  EXPECT_EQ(split(1, 1024, 4096, 64, CausalAlignment::kNone, small_binding).key_splits, 4u);
  small_binding.max_storage_binding_bytes = 1u << 20;
  EXPECT_EQ(split(1, 4096, 2048, 64, CausalAlignment::kNone, small_binding).key_splits, 1u);
  // A buffer can be no larger than maxBufferSize: a smaller one bounds the records the same way.
  WebGpuLimits small_buffer = h100;
  small_buffer.max_buffer_bytes = 2u << 20;
  EXPECT_EQ(split(1, 1024, 4096, 64, CausalAlignment::kNone, small_buffer).key_splits, 4u);
  // The records that share a binding are one chunk's: the caller's chunk rows bound S, not Lq.
  {
    const AttentionPlan p = make_plan({1, 1024, 64}, {1, 4096, 64}, {1, 4096, 64});
    FlashVariant flash;
    ASSERT_TRUE(webgpu_flash_variant(p, small_binding, &flash).ok());
    EXPECT_EQ(webgpu_flash_key_splits(p, small_binding, flash, 1024).key_splits, 2u);  // 2 × 1024 × 276 bytes ≤ 1 MiB
    EXPECT_EQ(webgpu_flash_key_splits(p, small_binding, flash, 256).key_splits, 8u);
    EXPECT_EQ(webgpu_flash_key_splits(p, small_binding, flash, 4096).key_splits, 1u);  // 2 × 4096 × 276 > 1 MiB
  }
  // A lower min_split_keys (gpuLimits.prefillSplitKeys) splits small calls; splits stay whole tiles.
  WebGpuLimits tests;
  tests.min_split_keys = 16;
  const FlashVariant small = split(1, 32, 100, 16, CausalAlignment::kNone, tests);
  EXPECT_EQ(small.block_keys, 64u);
  EXPECT_EQ(small.key_splits, 2u);
  EXPECT_EQ(small.split_keys, 64u);
  // The merge built from a split variant is the decode merge, whatever the split.
  const FlashVariant merge = webgpu_merge_variant(small, false);
  EXPECT_EQ(merge.key().rfind("decode-merge:", 0), 0u);
  EXPECT_EQ(merge.key(), webgpu_merge_variant(split(1, 32, 300, 16, CausalAlignment::kNone, tests), false).key());
  EXPECT_EQ(merge.key().find(":split"), std::string::npos);
  EXPECT_NE(merge.wgsl_constants().find("const SPLIT: bool = false;"), std::string::npos);
}

// Every (head, row) is covered exactly once, every chunk fits, and each chunk's kv/mask ranges hold
// what its rows read.
void expect_valid_chunks(const AttentionPlan& p, const WebGpuLimits& limits, const std::vector<WebGpuChunk>& chunks) {
  const uint64_t cap = limits.largest_binding_bytes();
  std::vector<int> covered(static_cast<size_t>(p.B * p.Hq * p.Lq), 0);
  for (const WebGpuChunk& c : chunks) {
    EXPECT_LE(webgpu_chunk_bytes(p, c).largest(), cap);
    EXPECT_TRUE(c.nbh == 1 || c.rows == p.Lq);
    for (int64_t bh = c.bh0; bh < c.bh0 + c.nbh; ++bh) {
      const int64_t b = bh / p.Hq, h = bh % p.Hq;
      const int64_t kv = b * p.Hkv + h / p.heads_per_kv();
      EXPECT_GE(kv, c.kv0);
      EXPECT_LT(kv, c.kv0 + c.nkv);
      for (int64_t i = c.row0; i < c.row0 + c.rows; ++i) {
        covered[static_cast<size_t>(bh * p.Lq + i)]++;
        if (p.mask_kind != MaskKind::kNone) {
          const int64_t first = p.mask_offset(b, h, i);
          const int64_t last = first + (p.Lk - 1) * p.mask_stride_k;
          EXPECT_GE(first, c.mask_lo);
          EXPECT_LT(last, c.mask_hi);
          EXPECT_LE(c.mask_hi, p.mask_elements);
        }
      }
    }
  }
  for (int n : covered) ASSERT_EQ(n, 1);
}

TEST(WebGpuPlan, LogSumExpIsAConstantOfTheFlashKernelsAndAFloatPerRow) {
  AttentionRequest r;
  r.query_shape = {2, 3, 5, 8};
  r.key_shape = {2, 3, 300, 8};
  r.value_shape = {2, 3, 300, 4};
  AttentionPlan plain, lse;
  ASSERT_TRUE(plan_attention(r, &plain).ok());
  r.return_lse = true;
  ASSERT_TRUE(plan_attention(r, &lse).ok());
  FlashVariant without, with;
  ASSERT_TRUE(webgpu_flash_variant(plain, WebGpuLimits{}, &without).ok());
  ASSERT_TRUE(webgpu_flash_variant(lse, WebGpuLimits{}, &with).ok());
  EXPECT_EQ(with.key(), without.key() + ":lse=1");  // calls without it keep their pipelines
  EXPECT_NE(without.wgsl_constants().find("const WRITE_LSE: bool = false;"), std::string::npos);
  EXPECT_NE(with.wgsl_constants().find("const WRITE_LSE: bool = true;"), std::string::npos);
  // Flash-decoding serves it too (its merge writes it).
  EXPECT_EQ(webgpu_decode_splits(lse), webgpu_decode_splits(plain));
  EXPECT_GT(webgpu_decode_splits(lse), 0u);

  std::vector<WebGpuChunk> chunks;
  ASSERT_TRUE(plan_webgpu_chunks(lse, WebGpuLimits{}, &chunks).ok());
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(webgpu_chunk_bytes(lse, chunks[0]).lse, 4u * 2 * 3 * 5);
  EXPECT_EQ(webgpu_chunk_bytes(plain, chunks[0]).lse, 0u);
}

TEST(WebGpuPlan, SmallWorkIsOneChunk) {
  const AttentionPlan p = make_plan({2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 4});
  std::vector<WebGpuChunk> chunks;
  ASSERT_TRUE(plan_webgpu_chunks(p, WebGpuLimits{}, &chunks).ok());
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].nbh, 6);
  EXPECT_EQ(chunks[0].rows, 5);
  expect_valid_chunks(p, WebGpuLimits{}, chunks);
}

TEST(WebGpuPlan, SplitsWholeHeadsThenRowsUnderLowLimits) {
  WebGpuLimits limits;
  std::vector<WebGpuChunk> chunks;
  // GQA 6 -> 2 heads, a [1, 6, 1, Lk] bool mask (broadcast over batch and rows).
  const AttentionPlan p = make_plan({2, 6, 40, 16}, {2, 2, 30, 16}, {2, 2, 30, 8}, MaskKind::kBool,
                                    {6, 1, 30}, true, true);
  limits.max_storage_binding_bytes = 2 * 40 * 16 * 4;  // two heads of query
  ASSERT_TRUE(plan_webgpu_chunks(p, limits, &chunks).ok());
  EXPECT_GT(chunks.size(), 1u);
  expect_valid_chunks(p, limits, chunks);

  // The weights of one head (40 × 30 floats) no longer fit: rows of one head per chunk.
  limits.max_storage_binding_bytes = 30 * 16 * 4;  // one key head exactly
  ASSERT_TRUE(plan_webgpu_chunks(p, limits, &chunks).ok());
  EXPECT_GT(chunks.size(), 12u);
  int64_t most = 0;
  for (const WebGpuChunk& c : chunks) {
    EXPECT_EQ(c.nbh, 1);
    most = std::max(most, c.rows);
  }
  expect_valid_chunks(p, limits, chunks);
  EXPECT_LT(most, 40);
  EXPECT_EQ(webgpu_most_chunk_rows(chunks), most);
  EXPECT_EQ(webgpu_most_chunk_rows({}), 0);

  // Per-row masks and additive masks, maxBufferSize the smaller limit.
  const AttentionPlan q = make_plan({3, 50, 8}, {3, 20, 8}, {3, 20, 8}, MaskKind::kAdditive, {3, 50, 20}, false);
  limits = WebGpuLimits{};
  limits.max_buffer_bytes = 20 * 8 * 4 + 8;
  ASSERT_TRUE(plan_webgpu_chunks(q, limits, &chunks).ok());
  expect_valid_chunks(q, limits, chunks);
}

TEST(WebGpuPlan, OneHeadOfKeysBeyondTheLimitIsARangeError) {
  WebGpuLimits limits;
  limits.max_storage_binding_bytes = 1024;
  std::vector<WebGpuChunk> chunks;
  const Status s = plan_webgpu_chunks(make_plan({4, 8}, {100, 8}, {100, 8}), limits, &chunks);
  EXPECT_EQ(s.kind, ErrorKind::kRange);
  EXPECT_NE(s.message.find("maxStorageBufferBindingSize"), std::string::npos);
}

TEST(WebGpuPlan, EmptyWorkHasNoChunks) {
  std::vector<WebGpuChunk> chunks;
  ASSERT_TRUE(plan_webgpu_chunks(make_plan({0, 3, 4}, {0, 5, 4}, {0, 5, 2}), WebGpuLimits{}, &chunks).ok());
  EXPECT_TRUE(chunks.empty());
  ASSERT_TRUE(plan_webgpu_chunks(make_plan({3, 4}, {0, 4}, {0, 2}), WebGpuLimits{}, &chunks).ok());
  EXPECT_TRUE(chunks.empty());
}

TEST(WebGpuPlan, FlashDecodingForFewQueryRowsOverManyKeys) {
  const int64_t split = kWebGpuDecodeSplitKeys;
  // Lk = 2 splits is the first length that splits; a partial last split counts.
  EXPECT_EQ(webgpu_decode_splits(make_plan({1, 32, 1, 128}, {1, 8, 2 * split - 1, 128}, {1, 8, 2 * split - 1, 128}, MaskKind::kNone, {}, false, true)), 0u);
  EXPECT_EQ(webgpu_decode_splits(make_plan({1, 32, 1, 128}, {1, 8, 2 * split, 128}, {1, 8, 2 * split, 128}, MaskKind::kNone, {}, false, true)), 2u);
  EXPECT_EQ(webgpu_decode_splits(make_plan({1, 32, 1, 128}, {1, 8, 2 * split + 1, 128}, {1, 8, 2 * split + 1, 128}, MaskKind::kNone, {}, false, true)), 3u);
  EXPECT_EQ(webgpu_decode_splits(make_plan({2, kWebGpuDecodeMaxRows, 64}, {2, 8192, 64}, {2, 8192, 64})), 64u);
  // Longer splits while the partial pass keeps kWebGpuTargetWorkgroups workgroups: B·Hkv = 8
  // KV heads of 32768 keys take 512 keys (512 workgroups), 32 heads the longest split (1024).
  const auto split_keys = [](int64_t b, int64_t hkv, int64_t lk) {
    return webgpu_decode_split_keys(make_plan({b, 4 * hkv, 1, 128}, {b, hkv, lk, 128}, {b, hkv, lk, 128}, MaskKind::kNone, {}, false, true));
  };
  EXPECT_EQ(split_keys(1, 8, 32768), 512u);
  EXPECT_EQ(split_keys(1, 8, 16384), 256u);
  EXPECT_EQ(split_keys(4, 8, 32768), kWebGpuDecodeMaxSplitKeys);
  EXPECT_EQ(split_keys(1, 8, 8192), kWebGpuDecodeSplitKeys);
  EXPECT_EQ(split_keys(1, 8, 300), kWebGpuDecodeSplitKeys);
  EXPECT_EQ(webgpu_decode_splits(make_plan({4, 32, 1, 128}, {4, 8, 32768, 128}, {4, 8, 32768, 128}, MaskKind::kNone, {}, false, true)), 32u);
  // More query rows, or weights: the flash kernels.
  EXPECT_EQ(webgpu_decode_splits(make_plan({2, kWebGpuDecodeMaxRows + 1, 64}, {2, 8192, 64}, {2, 8192, 64})), 0u);
  EXPECT_EQ(webgpu_decode_splits(make_plan({1, 64}, {8192, 64}, {8192, 64}, MaskKind::kNone, {}, true)), 0u);
  // The decode kernels' pipeline keys differ from the flash kernel's.
  FlashVariant v;
  ASSERT_TRUE(webgpu_flash_variant(make_plan({1, 64}, {512, 64}, {512, 64}), WebGpuLimits{}, &v).ok());
  v.tiled = false;
  std::set<std::string> keys;
  for (uint32_t d = 0; d < 5; ++d) {
    v.decode = d;
    keys.insert(v.key());
    EXPECT_EQ(v.wgsl_constants().find("DECODE_INVOCATIONS") != std::string::npos, d != 0);
  }
  EXPECT_EQ(keys.size(), 5u);
}

TEST(WebGpuPlan, DecodeWorkgroupServesTheGqaGroupWithTheLargestKeyTileThatFits) {
  // B = 1, Hq = 32, Hkv = 8 (4 query heads per KV head), one query row, E = Ev = 128.
  const AttentionPlan gqa = make_plan({1, 32, 1, 128}, {1, 8, 4096, 128}, {1, 8, 4096, 128}, MaskKind::kNone, {}, false, true);
  FlashVariant flash, partial;
  WebGpuLimits nvidia;  // 48 KiB of workgroup memory, subgroups of 32
  nvidia.max_workgroup_storage_bytes = 48 << 10;
  nvidia.subgroups = true;
  nvidia.subgroup_min_size = 32;
  ASSERT_TRUE(webgpu_flash_variant(gqa, nvidia, &flash).ok());
  ASSERT_TRUE(webgpu_decode_variant(gqa, nvidia, flash, &partial));
  // With subgroups the streaming kernel: a subgroup of 32 lanes per key, 4 groups of them.
  EXPECT_EQ(partial.decode, 4u);
  EXPECT_EQ(partial.decode_rows, 4u);  // the whole group in one workgroup
  EXPECT_EQ(partial.decode_lanes, 32u);
  EXPECT_EQ(partial.decode_groups, 4u);
  EXPECT_TRUE(partial.subgroups);
  EXPECT_EQ(partial.workgroup_bytes(), 4u * 4 * (16 + 4 + 4 * 128));  // groups × rows × (state, NaN, columns)
  EXPECT_NE(partial.wgsl_constants().find("enable subgroups;"), std::string::npos);
  EXPECT_NE(partial.wgsl_constants().find("const KEY_LANES: u32 = 32u;"), std::string::npos);
  EXPECT_NE(partial.wgsl_constants().find("const DECODE_INVOCATIONS: u32 = 128u;"), std::string::npos);
  EXPECT_EQ(partial.key().rfind("decode-stream:", 0), 0u);
  EXPECT_NE(partial.key().find(":rows4:lanes32:groups4:subgroups"), std::string::npos);

  // Subgroups of 4 (SwiftShader), 16 KiB: 4 lanes a key, and the 32 groups halved until their
  // combine fits (4: 8.5 KiB). Without subgroups, the tile kernel: workgroup memory, 16 lanes a
  // row, 8 keys a tile (16 would take 16 KiB of K/V tiles).
  WebGpuLimits small;  // 16 KiB
  small.subgroups = true;
  small.subgroup_min_size = 4;
  ASSERT_TRUE(webgpu_decode_variant(gqa, small, flash, &partial));
  EXPECT_EQ(partial.decode, 4u);
  EXPECT_EQ(partial.decode_lanes, 4u);
  EXPECT_EQ(partial.decode_groups, 4u);
  EXPECT_LE(partial.workgroup_bytes(), small.max_workgroup_storage_bytes);
  small.subgroups = false;
  ASSERT_TRUE(webgpu_decode_variant(gqa, small, flash, &partial));
  EXPECT_EQ(partial.decode, 1u);
  EXPECT_FALSE(partial.subgroups);
  EXPECT_EQ(partial.decode_lanes, 16u);
  EXPECT_EQ(partial.block_keys, 8u);
  EXPECT_EQ(partial.wgsl_constants().find("enable subgroups;"), std::string::npos);
  EXPECT_NE(partial.key().find(":wgmem"), std::string::npos);
  EXPECT_LE(partial.workgroup_bytes(), small.max_workgroup_storage_bytes);
  small.subgroups = true;

  // Rows beyond 16 (32 query heads on one KV head) take several workgroups of 16 rows.
  const AttentionPlan mqa = make_plan({1, 32, 1, 64}, {1, 1, 4096, 64}, {1, 1, 4096, 64}, MaskKind::kNone, {}, false, true);
  ASSERT_TRUE(webgpu_flash_variant(mqa, small, &flash).ok());
  ASSERT_TRUE(webgpu_decode_variant(mqa, small, flash, &partial));
  EXPECT_EQ(partial.decode_rows, kWebGpuDecodeMaxWorkgroupRows);
  // 16 rows of 16 + 16 vec4 columns over 4 lanes exceed a streaming lane: the tile kernel.
  EXPECT_EQ(partial.decode, 1u);
  EXPECT_TRUE(partial.subgroups);
  EXPECT_EQ(partial.decode_lanes, 4u);

  // A head too wide for even the smallest key tile: no decode kernel (the flash kernels run).
  const AttentionPlan wide = make_plan({1, 1, 1, 1024}, {1, 1, 4096, 1024}, {1, 1, 4096, 1024}, MaskKind::kNone, {}, false, true);
  WebGpuLimits wide_limits;
  wide_limits.max_workgroup_storage_bytes = 32 << 10;
  ASSERT_TRUE(webgpu_flash_variant(wide, wide_limits, &flash).ok());
  EXPECT_FALSE(webgpu_decode_variant(wide, wide_limits, flash, &partial));
}

// An int8/int4 cache's decode kernels: with subgroups the streaming kernel, a group of lanes per
// tile of 4 keys (the tile's vec4<u32> loads: int8 8 per block of 32, int4 4); without, the tile
// kernel with the float kernel's rows, lanes and reductions, whose tiles hold levels and block
// scales (int8: 9 words per 32 elements, int4: 5), so more keys fit.
TEST(WebGpuPlan, QuantizedDecodeStreamsWithSubgroupsElseSharesTheFloatTileKernelsShape) {
  AttentionRequest r;
  r.query_shape = {1, 32, 1, 128};
  r.key_shape = r.value_shape = {1, 8, 4096, 128};
  r.enable_gqa = true;
  r.key_head_stride = r.value_head_stride = 4096 * 128;
  r.key_type = r.value_type = ElementType::kInt8;
  AttentionPlan int8;
  ASSERT_TRUE(plan_attention(r, &int8).ok());
  WebGpuLimits nvidia;  // 48 KiB of workgroup memory, subgroups of 32
  nvidia.max_workgroup_storage_bytes = 48 << 10;
  nvidia.subgroups = true;
  nvidia.subgroup_min_size = 32;
  nvidia.packed_dot = true;
  FlashVariant flash, partial;
  ASSERT_TRUE(webgpu_flash_variant(int8, nvidia, &flash).ok());
  ASSERT_TRUE(webgpu_decode_variant(int8, nvidia, flash, &partial));
  // A tile of 4 int8 keys of 128 is 32 vec4 loads: 32 lanes a tile, 4 groups of them.
  EXPECT_EQ(partial.decode, 5u);
  EXPECT_TRUE(partial.types.query_levels);
  EXPECT_TRUE(partial.subgroups);
  EXPECT_EQ(partial.decode_rows, 4u);
  EXPECT_EQ(partial.decode_lanes, 32u);
  EXPECT_EQ(partial.decode_groups, 4u);
  EXPECT_EQ(partial.workgroup_bytes(), 4u * 4 * (16 + 4 + 4 * 128));  // groups × rows × (state, NaN, columns)
  EXPECT_EQ(partial.key().rfind("decode-stream-quantized:", 0), 0u);
  EXPECT_NE(partial.key().find(":q=i8:k=i8:v=i8:f16=unpack2x16float:dot4=packed:vec4=kv"), std::string::npos);
  EXPECT_NE(partial.key().find(":rows4:lanes32:groups4:subgroups"), std::string::npos);
  const std::string text = partial.wgsl_constants();
  EXPECT_NE(text.find("enable subgroups;"), std::string::npos);
  EXPECT_NE(text.find("alias KeyElement = vec4<u32>;"), std::string::npos);
  EXPECT_NE(text.find("alias ValueElement = vec4<u32>;"), std::string::npos);
  EXPECT_NE(text.find("fn key_word(i: u32) -> u32 { return key[i >> 2u][i & 3u]; }"), std::string::npos);
  EXPECT_NE(text.find("dot4I8Packed"), std::string::npos);
  EXPECT_NE(text.find("const KEY_LANES: u32 = 32u;"), std::string::npos);

  // Without subgroups the tile kernel (u32 bindings), its lanes combined in workgroup memory: 64
  // keys × (K and V: 4 blocks of 8 level words and a scale) + a padding word per 4 keys' key
  // block + 4 rows' weights + the lanes' parts.
  nvidia.subgroups = false;
  ASSERT_TRUE(webgpu_decode_variant(int8, nvidia, flash, &partial));
  EXPECT_EQ(partial.decode, 3u);
  EXPECT_TRUE(partial.types.query_levels);
  EXPECT_FALSE(partial.types.key_vectors);
  EXPECT_EQ(partial.decode_rows, 4u);
  EXPECT_EQ(partial.decode_lanes, 16u);
  EXPECT_EQ(partial.block_keys, kWebGpuDecodeMaxBlockKeys);
  EXPECT_EQ(partial.workgroup_bytes(), 64u * 2 * 4 * 4 * 9 + 64 / 4 * 4 * 4 + 4 * 4 * 64 + 16 * 4 * 16);
  EXPECT_EQ(partial.key().rfind("decode-partial-quantized:", 0), 0u);
  EXPECT_NE(partial.key().find(":q=i8:k=i8:v=i8:"), std::string::npos);
  EXPECT_NE(partial.key().find(":rows4:lanes16:wgmem"), std::string::npos);
  EXPECT_NE(partial.wgsl_constants().find("const DECODE_LANES: u32 = 16u;"), std::string::npos);
  EXPECT_NE(partial.wgsl_constants().find("alias KeyElement = u32;"), std::string::npos);

  // int4, subgroups of 4 (SwiftShader), 16 KiB: a tile of 4 keys of 128 is 16 vec4 loads, 4
  // lanes a tile; each lane holds 4 key loads and 8 output columns of each of the 4 rows.
  r.key_type = r.value_type = ElementType::kInt4;
  AttentionPlan int4;
  ASSERT_TRUE(plan_attention(r, &int4).ok());
  WebGpuLimits small;
  small.subgroups = true;
  small.subgroup_min_size = 4;
  ASSERT_TRUE(webgpu_flash_variant(int4, small, &flash).ok());
  ASSERT_TRUE(webgpu_decode_variant(int4, small, flash, &partial));
  EXPECT_EQ(partial.decode, 5u);
  EXPECT_EQ(partial.decode_lanes, 4u);
  EXPECT_NE(partial.key().find(":dot4=unpack:vec4=kv"), std::string::npos);
  EXPECT_LE(partial.workgroup_bytes(), small.max_workgroup_storage_bytes);
  // 16 rows (a GQA group of 16) hold more than a lane may: the tile kernel, lanes by subgroups.
  r.query_shape = {1, 128, 1, 128};
  AttentionPlan wide_group;
  ASSERT_TRUE(plan_attention(r, &wide_group).ok());
  ASSERT_TRUE(webgpu_flash_variant(wide_group, small, &flash).ok());
  ASSERT_TRUE(webgpu_decode_variant(wide_group, small, flash, &partial));
  EXPECT_EQ(partial.decode, 3u);
  EXPECT_TRUE(partial.subgroups);
  EXPECT_EQ(partial.decode_rows, 16u);
  // Without subgroups: workgroup memory for the lanes, 32 int4 keys (5 words per block).
  small.subgroups = false;
  ASSERT_TRUE(webgpu_flash_variant(int4, small, &flash).ok());
  ASSERT_TRUE(webgpu_decode_variant(int4, small, flash, &partial));
  EXPECT_EQ(partial.decode, 3u);
  EXPECT_FALSE(partial.subgroups);
  EXPECT_NE(partial.key().find(":wgmem"), std::string::npos);
  EXPECT_EQ(partial.block_keys, kWebGpuDecodeMaxBlockKeys);
  EXPECT_EQ(partial.workgroup_bytes(), 64u * 2 * 4 * 4 * 5 + 64 / 4 * 4 * 4 + 4 * 4 * 64 + 16 * 4 * 16);
  EXPECT_LE(partial.workgroup_bytes(), small.max_workgroup_storage_bytes);
}

TEST(WebGpuPlan, ChunksOfAStridedCacheBindItsLastHeadsRowsRoundedUp) {
  // A KV cache of 3 KV heads: its last head bound to its held rows rounded up to
  // kWebGpuBoundKeyRows, at most its maxLength rows (the bind group then stays for 256 tokens).
  const auto bytes = [](int64_t max_length, int64_t held, AttentionPlan* p) {
    AttentionRequest r;
    r.query_shape = {1, 3, 1, 8};
    r.key_shape = {1, 3, held, 8};
    r.value_shape = {1, 3, held, 4};
    r.key_head_stride = max_length * 8;
    r.value_head_stride = max_length * 4;
    EXPECT_TRUE(plan_attention(r, p).ok());
    WebGpuChunk whole;
    whole.nbh = 3;
    whole.rows = 1;
    whole.nkv = 3;
    return webgpu_chunk_bytes(*p, whole);
  };
  AttentionPlan p;
  WebGpuChunkBytes b = bytes(100, 40, &p);  // maxLength 100, 40 held: the whole last head
  EXPECT_EQ(b.key, 4u * 3 * 100 * 8);
  EXPECT_EQ(b.value, 4u * 3 * 100 * 4);
  const WebGpuUniforms u = webgpu_uniforms(p, WebGpuChunk{0, 3, 0, 1, 0, 3}, 0, GridPart{});
  EXPECT_EQ(u[kUfKeyStride], 800u);
  EXPECT_EQ(u[kUfValueStride], 400u);
  for (const int64_t held : {257, 300, 512}) {  // maxLength 1000: 512 rows of the last head
    b = bytes(1000, held, &p);
    EXPECT_EQ(b.key, 4u * (2 * 1000 * 8 + 512 * 8)) << held;
    EXPECT_EQ(b.value, 4u * (2 * 1000 * 4 + 512 * 4)) << held;
  }
  b = bytes(513, 513, &p);  // a dense tensor: exactly its rows
  EXPECT_EQ(b.key, 4u * 3 * 513 * 8);
}

// Float16 tensors: each tensor's type and the device's read path are part of the variant (the
// keys of float32 calls stay as they were), the declarations the kernels start with follow them,
// and the chunk planner counts 2 bytes an element plus a binding's slack.
TEST(WebGpuPlan, Float16TypesChooseTheLoadersAndTheKeys) {
  AttentionRequest r;
  r.query_shape = {2, 3, 5};
  r.key_shape = {2, 64, 5};
  r.value_shape = {2, 64, 3};
  r.key_type = ElementType::kFloat16;
  r.value_type = ElementType::kFloat16;
  AttentionPlan p;
  ASSERT_TRUE(plan_attention(r, &p).ok());
  WebGpuLimits limits;
  FlashVariant v;
  ASSERT_TRUE(webgpu_flash_variant(p, limits, &v).ok());
  EXPECT_EQ(v.key(), "flash-tiled:e16:ev16:bk64:rows16:mask=none:causal=0:stats=0:ranges=0:alibi=0:sinks=0:docs=0"
                     ":q=f32:k=f16:v=f16:f16=unpack2x16float");
  const std::string unpack = v.wgsl_constants();
  EXPECT_EQ(unpack.find("enable f16;"), std::string::npos);
  EXPECT_NE(unpack.find("alias QueryElement = f32;"), std::string::npos);
  EXPECT_NE(unpack.find("alias KeyElement = u32;"), std::string::npos);
  EXPECT_NE(unpack.find("unpack2x16float(value[e >> 1u])[e & 1u]"), std::string::npos);

  limits.shader_f16 = true;
  ASSERT_TRUE(webgpu_flash_variant(p, limits, &v).ok());
  EXPECT_NE(v.key().find(":f16=shader-f16"), std::string::npos);
  const std::string f16 = v.wgsl_constants();
  EXPECT_EQ(f16.rfind("enable f16;\n", 0), 0u);  // a directive: before every declaration
  EXPECT_NE(f16.find("alias ValueElement = f16;"), std::string::npos);
  EXPECT_NE(f16.find("return f32(key[p.key_base + i]);"), std::string::npos);

  const WeightsVariant w = webgpu_weights_variant(p, limits);
  EXPECT_EQ(w.wgsl_constants().find("value"), std::string::npos);  // the weights pass binds no value
  EXPECT_NE(w.key().find(":k=f16"), std::string::npos);

  WebGpuChunk whole;
  whole.nbh = 2;
  whole.rows = 3;
  whole.nkv = 2;
  const WebGpuChunkBytes b = webgpu_chunk_bytes(p, whole);
  EXPECT_EQ(b.query, 4u * 2 * 3 * 5);
  EXPECT_EQ(b.key, 2u * 2 * 64 * 5 + kWebGpuFloat16BindingSlack);
  EXPECT_EQ(b.value, 2u * 2 * 64 * 3 + kWebGpuFloat16BindingSlack);

  AttentionPlan f32 = p;
  f32.key_type = f32.value_type = ElementType::kFloat32;
  ASSERT_TRUE(webgpu_flash_variant(f32, limits, &v).ok());
  EXPECT_EQ(v.key(), "flash-tiled:e16:ev16:bk64:rows16:mask=none:causal=0:stats=0:ranges=0:alibi=0:sinks=0:docs=0");
  EXPECT_EQ(v.wgsl_constants().find("enable f16;"), std::string::npos);
}

// Query, key and value bindings are read as vectors of 4 where each row starts on one: a row
// length and head stride that are multiples of 4, and for a float16 GPU tensor a byte offset that
// is a multiple of 8. Elsewhere (and for a quantized cache) one element at a time.
TEST(WebGpuPlan, VectorReadsWhereEveryRowStartsOnAVector) {
  EXPECT_TRUE(webgpu_vector_reads(ElementType::kFloat32, 8, 64 * 8, 0));
  EXPECT_TRUE(webgpu_vector_reads(ElementType::kFloat32, 8, 64 * 8, 4));  // copied to a binding of its own
  EXPECT_FALSE(webgpu_vector_reads(ElementType::kFloat32, 5, 64 * 5, 0));
  EXPECT_FALSE(webgpu_vector_reads(ElementType::kFloat32, 0, 0, 0));
  EXPECT_FALSE(webgpu_vector_reads(ElementType::kFloat32, 4, 66, 0));  // a head stride of 66 elements
  EXPECT_TRUE(webgpu_vector_reads(ElementType::kFloat16, 4, 64 * 4, 264));
  EXPECT_FALSE(webgpu_vector_reads(ElementType::kFloat16, 4, 64 * 4, 6));
  EXPECT_FALSE(webgpu_vector_reads(ElementType::kFloat16, 4, 64 * 4, 260));
  EXPECT_FALSE(webgpu_vector_reads(ElementType::kInt8, 32, 64 * 32, 0));

  AttentionRequest r;
  r.query_shape = {2, 3, 8};
  r.key_shape = {2, 64, 8};
  r.value_shape = {2, 64, 12};
  AttentionPlan p;
  ASSERT_TRUE(plan_attention(r, &p).ok());
  WebGpuLimits limits;
  FlashVariant v;
  ASSERT_TRUE(webgpu_flash_variant(p, limits, &v).ok());
  EXPECT_EQ(v.key(), "flash-tiled:e16:ev16:bk64:rows16:mask=none:causal=0:stats=0:ranges=0:alibi=0:sinks=0:docs=0:vec4=qkv");
  const std::string f32 = v.wgsl_constants();
  EXPECT_NE(f32.find("alias KeyElement = vec4<f32>;"), std::string::npos);
  EXPECT_NE(f32.find("fn key_at(i: u32) -> f32 { return key[i >> 2u][i & 3u]; }"), std::string::npos);
  EXPECT_NE(f32.find("  if (c >= n) { return vec4<f32>(0.0); }\n  let e = base + c;\n  return value[e >> 2u];"),
            std::string::npos);
  const WeightsVariant w = webgpu_weights_variant(p, limits);
  EXPECT_NE(w.key().find(":vec4=qk"), std::string::npos);  // no value binding
  EXPECT_EQ(w.wgsl_constants().find("value"), std::string::npos);
  BackwardVariant b;
  ASSERT_TRUE(webgpu_backward_variant(p, limits, false, &b).ok());
  EXPECT_NE(b.key("dq").find(":vec4=qkv:dout-vec4"), std::string::npos);
  EXPECT_NE(b.wgsl_constants().find("alias QueryElement = vec4<f32>;"), std::string::npos);
  EXPECT_NE(b.wgsl_constants().find("alias DOutputElement = vec4<f32>;"), std::string::npos);

  // Float16 GPU tensors at byte offsets 0, 6 and 8 (a float32 query: any offset).
  AttentionPlan half = p;
  half.query_type = half.key_type = half.value_type = ElementType::kFloat16;
  WebGpuInputOffsets offsets;
  offsets.key = 6;
  offsets.value = 8;
  ASSERT_TRUE(webgpu_flash_variant(half, limits, &v, offsets).ok());
  EXPECT_NE(v.key().find(":f16=unpack2x16float:vec4=qv"), std::string::npos);
  const std::string unpack = v.wgsl_constants();
  EXPECT_NE(unpack.find("alias QueryElement = vec2<u32>;"), std::string::npos);
  EXPECT_NE(unpack.find("alias KeyElement = u32;"), std::string::npos);
  EXPECT_NE(unpack.find("let e = p.value_base + base + c;\n"
                        "  return vec4<f32>(unpack2x16float(value[e >> 2u].x), unpack2x16float(value[e >> 2u].y));"),
            std::string::npos);
  EXPECT_NE(unpack.find("return unpack2x16float(query[e >> 2u][(e >> 1u) & 1u])[e & 1u];"), std::string::npos);
  limits.shader_f16 = true;
  ASSERT_TRUE(webgpu_flash_variant(half, limits, &v, offsets).ok());
  EXPECT_NE(v.key().find(":f16=shader-f16:vec4=qv"), std::string::npos);
  EXPECT_NE(v.wgsl_constants().find("alias ValueElement = vec4<f16>;"), std::string::npos);
  EXPECT_NE(v.wgsl_constants().find("return f32(query[e >> 2u][e & 3u]);"), std::string::npos);

  // Odd head dims: one element at a time, and the float32 key as before.
  AttentionPlan odd = make_plan({2, 3, 5}, {2, 64, 5}, {2, 64, 7});
  ASSERT_TRUE(webgpu_flash_variant(odd, WebGpuLimits{}, &v).ok());
  EXPECT_EQ(v.key().find(":vec4"), std::string::npos);
  EXPECT_NE(v.wgsl_constants().find("alias KeyElement = f32;"), std::string::npos);
  EXPECT_NE(v.wgsl_constants().find("r[d] = value_at(base + c + d);"), std::string::npos);
  ASSERT_TRUE(webgpu_backward_variant(odd, WebGpuLimits{}, false, &b).ok());
  EXPECT_EQ(b.key("dq").find("vec4"), std::string::npos);
  EXPECT_NE(b.wgsl_constants().find("alias DOutputElement = f32;"), std::string::npos);
}

// An int8/int4 KV cache: the flash and weights kernels read a dequantized float32 query and the
// cache through its tile layout, the dot product path is part of the key, and every chunk binds
// the cache's whole tensors (levels and scales of all B·Hkv heads).
TEST(WebGpuPlan, QuantizedCachesBindWholeTensorsAndChooseTheDotPath) {
  AttentionRequest r;
  r.query_shape = {2, 4, 1, 40};
  r.key_shape = {2, 2, 300, 40};
  r.value_shape = {2, 2, 300, 72};
  r.enable_gqa = true;
  r.key_head_stride = 301 * 40;
  r.value_head_stride = 301 * 72;
  r.query_type = ElementType::kFloat16;
  r.key_type = r.value_type = ElementType::kInt4;
  AttentionPlan p;
  ASSERT_TRUE(plan_attention(r, &p).ok());
  ASSERT_GT(webgpu_decode_splits(p), 0u);
  WebGpuLimits limits;
  limits.packed_dot = true;
  FlashVariant v;
  ASSERT_TRUE(webgpu_flash_variant(p, limits, &v).ok());
  EXPECT_NE(v.key().find(":q=f32:k=i4:v=i4:f16=unpack2x16float:dot4=packed"), std::string::npos);
  const std::string packed = v.wgsl_constants();
  EXPECT_NE(packed.find("return dot4I8Packed(a, b);"), std::string::npos);
  EXPECT_NE(packed.find("const KEY_QUANT_BITS: u32 = 4u;"), std::string::npos);
  EXPECT_NE(packed.find("fn key_at(i: u32) -> f32"), std::string::npos);
  EXPECT_NE(packed.find("quant_level_int4(value_word(tb * 16u"), std::string::npos);
  EXPECT_NE(packed.find("fn value_word(i: u32) -> u32 { return value[i]; }"), std::string::npos);  // u32 words
  EXPECT_NE(v.key().find(":dot4=packed:vec4=q"), std::string::npos);  // the dequantized query's workspace
  v.types.query_levels = true;
  EXPECT_NE(v.key().find(":q=i8:"), std::string::npos);
  EXPECT_EQ(v.key().find(":vec4"), std::string::npos);

  limits.packed_dot = false;
  ASSERT_TRUE(webgpu_flash_variant(p, limits, &v).ok());
  EXPECT_NE(v.key().find(":dot4=unpack"), std::string::npos);
  EXPECT_EQ(v.wgsl_constants().find("dot4I8Packed"), std::string::npos);  // WGSL without the feature rejects the name

  WebGpuChunk first;
  first.nbh = 1;
  first.rows = 1;
  first.nkv = 1;
  const WebGpuChunkBytes b = webgpu_chunk_bytes(p, first);
  const uint64_t rows = 304, key_blocks = 2, value_blocks = 3;  // maxLength 301 in tiles of 4
  EXPECT_EQ(b.key, 4u * rows * key_blocks * (16 + 4));
  EXPECT_EQ(b.value, 4u * rows * value_blocks * (16 + 4));
}

TEST(WebGpuPlan, SplitGridCoversEveryWorkgroupOnce) {
  const auto parts = split_grid(7, 5, 3);
  std::vector<int> seen(35, 0);
  for (const GridPart& g : parts) {
    EXPECT_LE(g.x, 3u);
    EXPECT_LE(g.y, 3u);
    for (uint32_t y = 0; y < g.y; ++y)
      for (uint32_t x = 0; x < g.x; ++x) seen[(g.y_base + y) * 7 + g.x_base + x]++;
  }
  for (int n : seen) EXPECT_EQ(n, 1);
  EXPECT_EQ(split_grid(70000, 1, 65535).size(), 2u);
  EXPECT_TRUE(split_grid(0, 4, 65535).empty());
}

TEST(WebGpuPlan, PacksUniforms) {
  const AttentionPlan p = make_plan({2, 6, 5, 8}, {2, 3, 9, 8}, {2, 3, 9, 4}, MaskKind::kNone, {}, false, true,
                                    CausalAlignment::kBottomRight);
  WebGpuChunk c;
  c.bh0 = 3;
  c.nbh = 2;
  c.rows = 5;
  c.kv0 = 1;
  GridPart g;
  g.x_base = 7;
  g.y_base = 11;
  const WebGpuUniforms u = webgpu_uniforms(p, c, 0, g);
  EXPECT_EQ(u[kUfLq], 5u);
  EXPECT_EQ(u[kUfLk], 9u);
  EXPECT_EQ(u[kUfGroup], 2u);
  EXPECT_EQ(u[kUfBh0], 3u);
  EXPECT_EQ(u[kUfKv0], 1u);
  EXPECT_EQ(u[kUfXBase], 7u);
  EXPECT_EQ(u[kUfYBase], 11u);
  EXPECT_EQ(static_cast<int32_t>(u[kUfCausalOffset]), 4);
  float scale;
  std::memcpy(&scale, &u[kUfScaleBits], 4);
  EXPECT_EQ(scale, p.scale);
  const AttentionPlan tall = make_plan({9, 8}, {2, 8}, {2, 4}, MaskKind::kNone, {}, false, false,
                                       CausalAlignment::kBottomRight);
  EXPECT_EQ(static_cast<int32_t>(webgpu_uniforms(tall, c, 0, g)[kUfCausalOffset]), -7);
  // An offset passes as given within [-Lq, Lk]; beyond, it acts as those bounds (no row sees a
  // key; every row sees every key) and is clamped so that i + offset stays within i32.
  AttentionRequest r;
  r.query_shape = {9, 8};
  r.key_shape = {2, 8};
  r.value_shape = {2, 4};
  r.causal = CausalAlignment::kOffset;
  for (auto [offset, expected] : {std::pair<int64_t, int32_t>{-3, -3}, {1, 1}, {-9, -9}, {2, 2},
                                  {-(int64_t{1} << 40), -9}, {int64_t{1} << 40, 2}}) {
    r.causal_offset = offset;
    AttentionPlan with_offset;
    ASSERT_TRUE(plan_attention(r, &with_offset).ok());
    EXPECT_EQ(static_cast<int32_t>(webgpu_uniforms(with_offset, c, 0, g)[kUfCausalOffset]), expected) << offset;
  }
  EXPECT_LE(static_cast<uint32_t>(kUfFieldCount), 36u);  // the WGSL Params struct has 36 scalars
}

// The variants buffer: per batch (first base, last base, key length, position offset), then
// slopes, sinks and document ids; each row's range [max(0, i + first), min(len − 1, i + last)].
TEST(WebGpuPlan, LaysOutTheVariantsBuffer) {
  AttentionRequest r;
  r.query_shape = {2, 2, 3, 4};
  r.key_shape = {2, 2, 10, 4};
  r.value_shape = {2, 2, 10, 4};
  r.causal = CausalAlignment::kBottomRight;
  r.has_key_lengths = true;
  r.key_lengths = {10, 6};
  r.has_window_left = true;
  r.window_left = 2;
  r.has_sinks = true;
  r.sinks = {0.5, -std::numeric_limits<double>::infinity()};
  r.alibi = true;
  r.has_documents = true;
  r.query_documents_shape = {2, 3};
  r.key_documents_shape = {2, 10};
  AttentionPlan p;
  ASSERT_TRUE(plan_attention(r, &p).ok());
  const std::vector<int32_t> query_ids = {1, 1, 2, 0, 0, 0};
  std::vector<int32_t> key_ids(20, 7);
  AttentionInputs in;
  in.query_documents = query_ids.data();
  in.key_documents = key_ids.data();
  const std::vector<uint32_t> w = webgpu_variant_data(p, in, 4);
  ASSERT_EQ(w.size(), 4u * 2 + 2 * 2 + 6 + 20 + 2 * 3 * 2);  // + per batch, 3 tiles of 4 keys: (low, high)
  auto as_i32 = [&](size_t n) { return static_cast<int32_t>(w[n]); };
  auto as_f32 = [&](size_t n) {
    float x;
    std::memcpy(&x, &w[n], 4);
    return x;
  };
  // Bottom-right aligns each batch to its key length: offsets 10 − 3 = 7 and 6 − 3 = 3.
  EXPECT_EQ(as_i32(0), 5);   // 7 − left
  EXPECT_EQ(as_i32(1), 7);   // causal: p
  EXPECT_EQ(as_i32(2), 10);
  EXPECT_EQ(as_f32(3), 7.0f);
  EXPECT_EQ(as_i32(4), 1);
  EXPECT_EQ(as_i32(5), 3);
  EXPECT_EQ(as_i32(6), 6);
  EXPECT_EQ(as_f32(7), 3.0f);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < 3; ++i) {
      EXPECT_EQ(std::max<int64_t>(0, i + as_i32(4 * b)), p.first_visible_key(b, i));
      EXPECT_EQ(std::min<int64_t>(as_i32(4 * b + 2) - 1, i + as_i32(4 * b + 1)), p.last_visible_key(b, i));
    }
  }
  EXPECT_EQ(as_f32(8), 0.0625f);  // the standard slopes of 2 heads: 2^-4, 2^-8
  EXPECT_EQ(as_f32(9), 0.00390625f);
  EXPECT_EQ(as_f32(10), 0.5f);
  EXPECT_EQ(w[11], 0xff800000u);  // -inf: no sink
  EXPECT_EQ(as_i32(12 + 2), 2);   // query ids, then key ids
  EXPECT_EQ(as_i32(12 + 6), 7);
  EXPECT_EQ(as_i32(38), 7);  // key ids of tile 0 of batch 0 span [7, 7]
  EXPECT_EQ(as_i32(39), 7);
  // Offsets far past the keys are clamped to [−Lq − 1, Lk + 1]: the ranges stay as they are.
  r.causal = CausalAlignment::kOffset;
  r.causal_offset = int64_t{1} << 40;
  r.has_key_lengths = false;
  ASSERT_TRUE(plan_attention(r, &p).ok());
  const std::vector<uint32_t> far = webgpu_variant_data(p, in, 4);
  EXPECT_EQ(static_cast<int32_t>(far[0]), 11);
  EXPECT_EQ(static_cast<int32_t>(far[1]), 11);
  EXPECT_EQ(p.first_visible_key(0, 0), (int64_t{1} << 40) - 2);
}

TEST(WebGpuPlan, BackwardBlocksFitWorkgroupStorage) {
  WebGpuLimits limits;
  limits.max_workgroup_storage_bytes = 16384;
  BackwardVariant v;
  // E = Ev = 16: 128 bytes a row, 128 rows fit, capped at 64.
  ASSERT_TRUE(webgpu_backward_variant(make_plan({4, 16}, {9, 16}, {9, 16}), limits, false, &v).ok());
  EXPECT_EQ(v.query_block, kWebGpuBackwardMaxBlock);
  EXPECT_EQ(v.key_block, kWebGpuBackwardMaxBlock);
  // E = 24 -> 32, Ev = 40 -> 64 in 4 KiB: 384 bytes a row. With subgroups the lanes' parts take
  // one vec2: 10 rows.
  limits.max_workgroup_storage_bytes = 4096;
  limits.subgroups = true;
  ASSERT_TRUE(webgpu_backward_variant(make_plan({4, 24}, {9, 24}, {9, 40}), limits, false, &v).ok());
  EXPECT_TRUE(v.subgroups);
  EXPECT_EQ(v.query_block, 10u);
  EXPECT_EQ(v.key("dkdv").rfind("backward-dkdv:e32:ev64:bq10:bk10:", 0), 0u) << v.key("dkdv");
  // Without: a vec2 for each of the 16 keys' 4 lanes (512 bytes) leaves 9 rows.
  limits.subgroups = false;
  ASSERT_TRUE(webgpu_backward_variant(make_plan({4, 24}, {9, 24}, {9, 40}), limits, false, &v).ok());
  EXPECT_FALSE(v.subgroups);
  EXPECT_EQ(v.query_block, 9u);
  EXPECT_EQ(v.key("dkdv").rfind("backward-dkdv:e32:ev64:bq9:bk9:tk16:tq16:", 0), 0u) << v.key("dkdv");
  // One row of E + Ev floats larger than the workgroup memory: a RangeError.
  limits.max_workgroup_storage_bytes = 1024;
  EXPECT_EQ(webgpu_backward_variant(make_plan({4, 256}, {9, 256}, {9, 256}), limits, false, &v).kind, ErrorKind::kRange);
}

TEST(WebGpuPlan, BackwardTilesShrinkUntilThePassLaunchesTheTargetWorkgroups) {
  const WebGpuLimits limits;
  BackwardVariant v;
  const auto expect_grid = [](const BackwardTileGrid& g, uint32_t tile, uint64_t heads, uint64_t tiles, bool last_first) {
    EXPECT_EQ(g.tile, tile);
    EXPECT_EQ(g.heads, heads);
    EXPECT_EQ(g.tiles, tiles);
    EXPECT_EQ(g.last_tile_first, last_first);
  };
  // One head of 4096, causal: 64 tiles of 64 and 128 of 32 are under 512, so tiles of 16 (256
  // workgroups, the most there are); dQ launches its last row tile first.
  const AttentionPlan one_head = make_plan({1, 1, 4096, 64}, {1, 1, 4096, 64}, {1, 1, 4096, 64}, MaskKind::kNone, {},
                                           false, false, CausalAlignment::kTopLeft);
  ASSERT_TRUE(webgpu_backward_variant(one_head, limits, false, &v).ok());
  expect_grid(v.dkdv, 16, 1, 256, false);
  expect_grid(v.dq, 16, 1, 256, true);
  // Blocks of 31 rows of 512 bytes: 16 KiB less the lanes' parts (64 invocations' vec2).
  EXPECT_EQ(v.key("dq").rfind("backward-dq:e64:ev64:bq31:bk31:tk16:tq16:mask=none:causal=1:", 0), 0u) << v.key("dq");
  const std::string constants = v.wgsl_constants();
  EXPECT_NE(constants.find("const KEYS: u32 = 16u;"), std::string::npos) << constants;
  EXPECT_NE(constants.find("const ROWS: u32 = 16u;"), std::string::npos) << constants;
  EXPECT_NE(constants.find("const LAST_TILE_FIRST: bool = true;"), std::string::npos) << constants;
  EXPECT_NE(constants.find("const LANES: u32 = 4u;"), std::string::npos) << constants;
  // 8 heads of 1024: 16 tiles of 64 per head make 128 workgroups, 32 make 256, 16 make 512.
  ASSERT_TRUE(webgpu_backward_variant(make_plan({8, 1024, 64}, {8, 1024, 64}, {8, 1024, 64}), limits, false, &v).ok());
  expect_grid(v.dkdv, 16, 8, 64, false);
  expect_grid(v.dq, 16, 8, 64, false);
  // 32 heads of 2048: 32 tiles of 64 each, 1024 workgroups.
  ASSERT_TRUE(webgpu_backward_variant(make_plan({32, 2048, 64}, {32, 2048, 64}, {32, 2048, 64}), limits, false, &v).ok());
  expect_grid(v.dkdv, 64, 32, 32, false);
  expect_grid(v.dq, 64, 32, 32, false);
  // Each pass by its own length and heads: 256 query heads of 100 rows (2 tiles of 64), 128 key
  // heads (GQA) of 40 keys (1 tile of 64, 2 of 32, 3 of 16).
  ASSERT_TRUE(webgpu_backward_variant(make_plan({2, 128, 100, 8}, {2, 64, 40, 8}, {2, 64, 40, 8}, MaskKind::kNone, {},
                                                false, true, CausalAlignment::kBottomRight),
                                      limits, false, &v)
                  .ok());
  expect_grid(v.dq, 64, 256, 2, true);
  expect_grid(v.dkdv, 16, 128, 3, false);
  EXPECT_EQ(v.key("dkdv").rfind("backward-dkdv:e16:ev16:bq64:bk64:tk16:tq64:", 0), 0u) << v.key("dkdv");
  ASSERT_TRUE(webgpu_backward_variant(make_plan({2, 128, 40, 8}, {2, 128, 100, 8}, {2, 128, 100, 8}), limits, false, &v).ok());
  expect_grid(v.dq, 32, 256, 2, false);
  expect_grid(v.dkdv, 64, 256, 2, false);
}

TEST(WebGpuPlan, BackwardSplitsTheLoopsOfSmallGridsIntoSegmentsOfWholeBlocks) {
  // An H100 as dawn.node on Vulkan reports it: 48 KiB of workgroup memory (blocks of 64 rows of
  // E = Ev = 64), subgroups of 32, large bindings.
  WebGpuLimits h100;
  h100.max_workgroup_storage_bytes = 49152;
  h100.max_invocations_per_workgroup = 1024;
  h100.subgroups = true;
  h100.subgroup_min_size = 32;
  h100.max_storage_binding_bytes = h100.max_buffer_bytes = 1ull << 31;
  BackwardVariant v;
  const auto expect_splits = [](const BackwardTileGrid& g, uint32_t splits, uint32_t segment) {
    EXPECT_EQ(g.splits, splits);
    EXPECT_EQ(g.segment, segment);
    EXPECT_EQ(g.y(), g.tiles * splits);
  };
  // One head of 4096, causal: 4096 keys (rows) a pass, 8 segments reach 32768; 512 rows (keys),
  // 8 blocks, each. 256 tiles of 16 become 2048 workgroups.
  const AttentionPlan one_head = make_plan({1, 1, 4096, 64}, {1, 1, 4096, 64}, {1, 1, 4096, 64}, MaskKind::kNone, {},
                                           false, false, CausalAlignment::kTopLeft);
  ASSERT_TRUE(webgpu_backward_variant(one_head, h100, false, &v).ok());
  EXPECT_EQ(v.query_block, 64u);
  expect_splits(v.dkdv, 8, 512);
  expect_splits(v.dq, 8, 512);
  EXPECT_EQ(v.dkdv.workgroups(), 2048u);
  // Scratch after the outputs: 8 slots of dK/dV (4096 keys of 64 + 64 floats) and of dQ.
  WebGpuBackwardBytes bytes = webgpu_backward_bytes(one_head, v);
  EXPECT_EQ(bytes.grad_key_value, 4u * 9 * 4096 * 128);
  EXPECT_EQ(bytes.grad_query, 4u * 9 * 4096 * 64);
  // 8 heads of 1024: 4 segments of 256 (4 blocks, the fewest a segment holds).
  ASSERT_TRUE(webgpu_backward_variant(make_plan({8, 1024, 64}, {8, 1024, 64}, {8, 1024, 64}), h100, false, &v).ok());
  expect_splits(v.dkdv, 4, 256);
  expect_splits(v.dq, 4, 256);
  // 32 heads of 2048 already hold 65536 keys (rows): one segment, no scratch.
  const AttentionPlan big = make_plan({32, 2048, 64}, {32, 2048, 64}, {32, 2048, 64});
  ASSERT_TRUE(webgpu_backward_variant(big, h100, false, &v).ok());
  expect_splits(v.dkdv, 1, 2048);
  expect_splits(v.dq, 1, 2048);
  bytes = webgpu_backward_bytes(big, v);
  EXPECT_EQ(bytes.grad_key_value, 4u * 32 * 2048 * 128);
  EXPECT_EQ(bytes.grad_query, 4u * 32 * 2048 * 64);
  // By the default limits (16 KiB, no subgroups): blocks of 31 rows, 34 blocks of 1024; 4
  // segments of 9 blocks.
  ASSERT_TRUE(webgpu_backward_variant(make_plan({8, 1024, 64}, {8, 1024, 64}, {8, 1024, 64}), WebGpuLimits{}, false, &v).ok());
  EXPECT_EQ(v.query_block, 31u);
  expect_splits(v.dkdv, 4, 279);
  // Each pass by its own loop: 2 query heads of 4096 rows over 1 key head (GQA) of 512 keys.
  // dK/dV: 512 keys, loop over 4096 rows: 64 segments reach 32768 (64 rows of 1 block each are
  // too short): 16 segments of 4 blocks. dQ: 8192 rows, loop over 512 keys (8 blocks): 2.
  ASSERT_TRUE(webgpu_backward_variant(make_plan({1, 2, 4096, 64}, {1, 1, 512, 64}, {1, 1, 512, 64}, MaskKind::kNone, {},
                                                false, true),
                                      h100, false, &v)
                  .ok());
  expect_splits(v.dkdv, 16, 256);
  expect_splits(v.dq, 2, 256);
  // Rows or keys of fewer than 8 blocks keep one segment, however small the grid.
  ASSERT_TRUE(webgpu_backward_variant(make_plan({1, 448, 64}, {1, 448, 64}, {1, 448, 64}), h100, false, &v).ok());
  expect_splits(v.dkdv, 1, 448);
  expect_splits(v.dq, 1, 448);
  // Sinks add a flag per row and segment to dQ's scratch.
  AttentionPlan sinks = one_head;
  sinks.sinks.assign(1, 0.5f);
  ASSERT_TRUE(webgpu_backward_variant(sinks, h100, false, &v).ok());
  ASSERT_TRUE(v.variants.sinks);
  EXPECT_EQ(webgpu_backward_bytes(sinks, v).grad_query, 4u * (4096 * 64 + 8 * 4096 * 65));
  // Scratch that would not fit one binding halves the segments: at 8 MiB dK/dV (2 MiB a slot)
  // keep 2, dQ (1 MiB a slot) 4; at 2 MiB each pass keeps one.
  WebGpuLimits capped = h100;
  capped.max_storage_binding_bytes = 8u << 20;
  ASSERT_TRUE(webgpu_backward_variant(one_head, capped, false, &v).ok());
  expect_splits(v.dkdv, 2, 2048);
  expect_splits(v.dq, 4, 1024);
  bytes = webgpu_backward_bytes(one_head, v);
  EXPECT_LE(bytes.grad_key_value, capped.max_storage_binding_bytes);
  EXPECT_LE(bytes.grad_query, capped.max_storage_binding_bytes);
  EXPECT_TRUE(check_webgpu_backward_fits(one_head, capped, v).ok());
  capped.max_storage_binding_bytes = 2u << 20;
  ASSERT_TRUE(webgpu_backward_variant(one_head, capped, false, &v).ok());
  expect_splits(v.dkdv, 1, 4096);
  expect_splits(v.dq, 1, 4096);
  EXPECT_TRUE(check_webgpu_backward_fits(one_head, capped, v).ok());
  // Less workgroup memory means shorter blocks, so small shapes get segments: E = 16, Ev = 8 in
  // 1 KiB with subgroups hold 7 rows a block; 53 keys are 8 blocks, 2 segments of 4.
  WebGpuLimits small = h100;
  small.max_workgroup_storage_bytes = 1024;
  ASSERT_TRUE(webgpu_backward_variant(make_plan({2, 4, 37, 16}, {2, 4, 53, 16}, {2, 4, 53, 8}), small, false, &v).ok());
  EXPECT_EQ(v.key_block, 7u);
  expect_splits(v.dq, 2, 28);
  expect_splits(v.dkdv, 1, 42);
}

TEST(WebGpuPlan, BackwardSplitsAreTheSmallestPowerOfTwoReachingTheTarget) {
  EXPECT_EQ(webgpu_backward_splits(32768, 4096, 64), 1u);
  EXPECT_EQ(webgpu_backward_splits(32767, 4096, 64), 2u);
  EXPECT_EQ(webgpu_backward_splits(4096, 4096, 64), 8u);
  EXPECT_EQ(webgpu_backward_splits(1, 4096, 64), 16u);   // 64 blocks: segments of at least 4
  EXPECT_EQ(webgpu_backward_splits(1, 448, 64), 1u);     // 7 blocks
  EXPECT_EQ(webgpu_backward_splits(1, 449, 64), 2u);     // 8 blocks: 4 and 4 (the last of 1 row)
  EXPECT_EQ(webgpu_backward_splits(1, 0, 64), 1u);
}

TEST(WebGpuPlan, BackwardLanesSumBySubgroupsWhereASubgroupHoldsThemAndFitTheInvocations) {
  WebGpuLimits limits;
  BackwardVariant v;
  const AttentionPlan plan = make_plan({32, 2048, 64}, {32, 2048, 64}, {32, 2048, 64});
  // Default limits: 4 lanes, tiles of 64 (256 invocations), summed through workgroup memory.
  ASSERT_TRUE(webgpu_backward_variant(plan, limits, false, &v).ok());
  EXPECT_EQ(v.lanes, kWebGpuBackwardLanes);
  EXPECT_FALSE(v.subgroups);
  EXPECT_EQ(v.dkdv.tile, 64u);
  EXPECT_NE(v.key("dkdv").find(":lanes4:wgmem"), std::string::npos) << v.key("dkdv");
  EXPECT_NE(v.wgsl_constants().find("const SUBGROUPS: bool = false;"), std::string::npos);
  EXPECT_EQ(v.wgsl_constants().find("enable subgroups;"), std::string::npos);
  // Subgroups of at least 4: by subgroupShuffleXor.
  limits.subgroups = true;
  ASSERT_TRUE(webgpu_backward_variant(plan, limits, false, &v).ok());
  EXPECT_TRUE(v.subgroups);
  EXPECT_NE(v.key("dq").find(":lanes4:subgroups"), std::string::npos) << v.key("dq");
  EXPECT_EQ(v.wgsl_constants().rfind("enable subgroups;", 0), 0u);
  EXPECT_NE(v.wgsl_constants().find("subgroupShuffleXor"), std::string::npos);
  // A subgroup that may hold fewer lanes than a key's: workgroup memory.
  limits.subgroup_min_size = 2;
  ASSERT_TRUE(webgpu_backward_variant(plan, limits, false, &v).ok());
  EXPECT_FALSE(v.subgroups);
  // 128 invocations a workgroup: tiles of at most 32 keys or rows of 4 lanes.
  limits.max_invocations_per_workgroup = 128;
  ASSERT_TRUE(webgpu_backward_variant(plan, limits, false, &v).ok());
  EXPECT_EQ(v.lanes, kWebGpuBackwardLanes);
  EXPECT_EQ(v.dkdv.tile, 32u);
  EXPECT_EQ(v.dq.tile, 32u);
  // Fewer than a tile of 16 with 4 lanes: one lane a key or row.
  limits.max_invocations_per_workgroup = 32;
  ASSERT_TRUE(webgpu_backward_variant(plan, limits, false, &v).ok());
  EXPECT_EQ(v.lanes, 1u);
  EXPECT_EQ(v.dkdv.tile, 32u);
}

TEST(WebGpuPlan, BackwardKeepsDScoresOnlyForTheAdditiveMasksGradient) {
  const WebGpuLimits limits;
  BackwardVariant v;
  const AttentionPlan additive = make_plan({2, 5, 8}, {2, 7, 8}, {2, 7, 4}, MaskKind::kAdditive, {5, 7});
  ASSERT_TRUE(webgpu_backward_variant(additive, limits, true, &v).ok());
  EXPECT_TRUE(v.write_d_scores);
  EXPECT_NE(v.wgsl_constants().find("const WRITE_DS: bool = true;"), std::string::npos);
  ASSERT_TRUE(webgpu_backward_variant(additive, limits, false, &v).ok());
  EXPECT_FALSE(v.write_d_scores);
  const AttentionPlan boolean = make_plan({2, 5, 8}, {2, 7, 8}, {2, 7, 4}, MaskKind::kBool, {5, 7});
  ASSERT_TRUE(webgpu_backward_variant(boolean, limits, true, &v).ok());
  EXPECT_FALSE(v.write_d_scores);
  // Bytes: rowstats 4 floats a row (lse, D, sink term, r), the mask's gradient, a float per
  // head; dQ then dS [R, Lk]; dK then dV (one segment each: no scratch).
  ASSERT_TRUE(webgpu_backward_variant(additive, limits, true, &v).ok());
  EXPECT_EQ(v.dkdv.splits, 1u);
  EXPECT_EQ(v.dq.splits, 1u);
  const WebGpuBackwardBytes with_ds = webgpu_backward_bytes(additive, v);
  EXPECT_EQ(with_ds.rowstats, 4u * (4 * 10 + 35 + 1));
  EXPECT_EQ(with_ds.grad_query, 4u * 10 * (8 + 7));
  EXPECT_EQ(with_ds.grad_key_value, 4u * 14 * (8 + 4));
  ASSERT_TRUE(webgpu_backward_variant(additive, limits, false, &v).ok());
  const WebGpuBackwardBytes without = webgpu_backward_bytes(additive, v);
  EXPECT_EQ(without.rowstats, 4u * (4 * 10 + 1));
  EXPECT_EQ(without.grad_query, 4u * 10 * 8);
}

TEST(WebGpuPlan, BackwardRunsInOnePieceOrNamesTheBufferThatDoesNotFit) {
  WebGpuLimits limits;
  const AttentionPlan p = make_plan({1, 1, 300, 16}, {1, 1, 40, 16}, {1, 1, 40, 16});
  BackwardVariant v;
  ASSERT_TRUE(webgpu_backward_variant(p, limits, false, &v).ok());
  EXPECT_TRUE(check_webgpu_backward_fits(p, limits, v).ok());
  limits.max_storage_binding_bytes = 4096;
  ASSERT_TRUE(webgpu_backward_variant(p, limits, false, &v).ok());
  const Status s = check_webgpu_backward_fits(p, limits, v);
  EXPECT_EQ(s.kind, ErrorKind::kRange);
  EXPECT_NE(s.message.find("query needs 19200 bytes"), std::string::npos) << s.message;
  const WebGpuChunk whole = webgpu_whole_chunk(p);
  EXPECT_EQ(whole.nbh, 1);
  EXPECT_EQ(whole.rows, 300);
  EXPECT_EQ(whole.nkv, 1);
}

}  // namespace
}  // namespace sdpa
