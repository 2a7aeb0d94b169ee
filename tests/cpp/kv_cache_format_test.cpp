// The int8/int4 KV-cache format (core/kv_cache_format.h): the block quantizer (round to nearest
// even, zero and constant blocks, ±65504, any finite float32, NaN/Inf), and rows written into the
// tiled byte layout and read back, partial last blocks included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/kv_cache_format.h"

namespace sdpa::testing {
namespace {

constexpr KvQuant kKinds[] = {KvQuant::kInt8, KvQuant::kInt4};

TEST(KvCacheFormat, LevelsRoundToNearestEven) {
  // max 127 → scale 1 (int8): x / 127 · 127 gives x back for these halves, exactly a tie.
  std::vector<float> x = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.25f, -3.75f};
  int8_t levels[kQuantBlock];
  EXPECT_EQ(quantize_block(KvQuant::kInt8, x.data(), static_cast<int>(x.size()), levels), 1.0f);
  const int want[] = {127, 0, 2, 2, 0, -2, -2, 3, -4};
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(levels[i], want[i]) << i;
  // int4: max 7 → scale 1.
  std::vector<float> y = {7.0f, 0.5f, 1.5f, -2.5f, 6.5f, -6.5f};
  EXPECT_EQ(quantize_block(KvQuant::kInt4, y.data(), static_cast<int>(y.size()), levels), 1.0f);
  const int want4[] = {7, 0, 2, -2, 6, -6};
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(levels[i], want4[i]) << i;
}

TEST(KvCacheFormat, NoValueReadsBeyondTheBlocksLargest) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits(1, 0x7F7FFFFFu);  // every positive finite float
  for (KvQuant kind : kKinds) {
    for (int trial = 0; trial < 100000; ++trial) {
      float amax;
      const uint32_t u = bits(rng);
      std::memcpy(&amax, &u, sizeof amax);
      int8_t levels[kQuantBlock];
      const float scale = quantize_block(kind, &amax, 1, levels);
      ASSERT_LE(dequantize_level(levels[0], scale), amax) << amax;
      ASSERT_EQ(levels[0], quant_max_level(kind)) << amax;
    }
  }
}

TEST(KvCacheFormat, ZeroAndConstantBlocks) {
  for (KvQuant kind : kKinds) {
    const int L = quant_max_level(kind);
    std::vector<float> zeros(kQuantBlock, 0.0f);
    zeros[3] = -0.0f;
    int8_t levels[kQuantBlock];
    EXPECT_EQ(quantize_block(kind, zeros.data(), kQuantBlock, levels), 0.0f);
    for (int i = 0; i < kQuantBlock; ++i) EXPECT_EQ(levels[i], 0);
    std::vector<float> constant(kQuantBlock, -0.3f);
    const float scale = quantize_block(kind, constant.data(), kQuantBlock, levels);
    for (int i = 0; i < kQuantBlock; ++i) {
      EXPECT_EQ(levels[i], -L);
      EXPECT_NEAR(dequantize_level(levels[i], scale), -0.3f, 1e-7f);  // exact up to the scale's rounding
    }
  }
}

TEST(KvCacheFormat, ExtremeFiniteValues) {
  const float big = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::denorm_min();
  for (KvQuant kind : kKinds) {
    const int L = quant_max_level(kind);
    int8_t levels[kQuantBlock];
    // ±65504 halves: ±L, and the value back within one scale step.
    const float halves[] = {65504.0f, -65504.0f, 1000.0f, -0.001f};
    float scale = quantize_block(kind, halves, 4, levels);
    EXPECT_EQ(levels[0], L);
    EXPECT_EQ(levels[1], -L);
    for (int i = 0; i < 4; ++i) EXPECT_LE(std::fabs(dequantize_level(levels[i], scale) - halves[i]), 0.5f * scale * 1.0001f) << i;
    // The largest float32 and the smallest subnormal quantize to finite scales and levels.
    const float extremes[] = {big, -big, 1.0f, tiny};
    scale = quantize_block(kind, extremes, 4, levels);
    EXPECT_TRUE(std::isfinite(scale));
    EXPECT_LE(dequantize_level(L, scale), big);  // L·scale rounds to at most max|x|: finite
    EXPECT_EQ(levels[0], L);
    EXPECT_EQ(levels[1], -L);
    EXPECT_EQ(levels[2], 0);
    const float subnormals[] = {tiny, -tiny, 0.0f};
    scale = quantize_block(kind, subnormals, 3, levels);
    EXPECT_TRUE(std::isfinite(scale));
    EXPECT_EQ(levels[0], L);
    EXPECT_EQ(levels[1], -L);
  }
}

TEST(KvCacheFormat, NonFiniteBlockReadsNaNAndLeavesTheOthers) {
  for (KvQuant kind : kKinds) {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
      const QuantizedLayout layout = quantized_layout(kind, 1, 4, 70);
      std::vector<uint8_t> tensor(static_cast<size_t>(layout.total_bytes), 0);
      std::vector<float> row(70, 0.25f), other(70, -1.0f);
      row[40] = bad;  // block 1 of 3
      store_quantized_row(layout, tensor.data(), 0, 1, row.data());
      store_quantized_row(layout, tensor.data(), 0, 2, other.data());
      std::vector<float> back(70);
      load_quantized_row(layout, tensor.data(), 0, 1, back.data());
      for (int e = 0; e < 70; ++e) {
        if (e / kQuantBlock == 1) EXPECT_TRUE(std::isnan(back[e])) << e;
        else EXPECT_NEAR(back[e], 0.25f, 1e-7f) << e;
      }
      load_quantized_row(layout, tensor.data(), 0, 2, back.data());
      for (int e = 0; e < 70; ++e) EXPECT_NEAR(back[e], -1.0f, 1e-6f) << e;
    }
  }
}

// Random rows into every key of a 2-head, 7-row tensor with dims straddling the block size: the
// bytes read back are the quantizer's levels and scales, and each value is within half a step.
TEST(KvCacheFormat, RowsRoundTripThroughTheTiledLayout) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
  for (KvQuant kind : kKinds) {
    for (int64_t dim : {1, 5, 31, 32, 33, 64, 100, 128}) {
      const QuantizedLayout layout = quantized_layout(kind, 2, 7, dim);
      EXPECT_EQ(layout.rows, 8);
      EXPECT_EQ(layout.blocks, (dim + 31) / 32);
      EXPECT_EQ(layout.scale_offset, 2 * 8 * layout.blocks * quant_block_bytes(kind));
      EXPECT_EQ(layout.total_bytes, layout.scale_offset + 2 * 8 * layout.blocks * 4);
      std::vector<uint8_t> tensor(static_cast<size_t>(layout.total_bytes), 0);
      std::vector<std::vector<float>> rows(14, std::vector<float>(static_cast<size_t>(dim)));
      for (auto& row : rows) {
        for (float& x : row) x = uniform(rng);
      }
      for (int64_t r = 0; r < 14; ++r) store_quantized_row(layout, tensor.data(), r / 7, r % 7, rows[r].data());
      for (int64_t r = 0; r < 14; ++r) {
        const float* x = rows[r].data();
        std::vector<double> back(static_cast<size_t>(dim));
        load_quantized_row(layout, tensor.data(), r / 7, r % 7, back.data());
        for (int64_t c = 0; c < layout.blocks; ++c) {
          int8_t levels[kQuantBlock];
          const int n = static_cast<int>(std::min<int64_t>(kQuantBlock, dim - c * kQuantBlock));
          const float scale = quantize_block(kind, x + c * kQuantBlock, n, levels);
          EXPECT_EQ(quantized_scale(layout, tensor.data(), r / 7, r % 7, c), scale);
          for (int i = 0; i < n; ++i) {
            const int64_t e = c * kQuantBlock + i;
            EXPECT_EQ(quantized_level(layout, tensor.data(), r / 7, r % 7, e), levels[i]);
            EXPECT_EQ(back[e], static_cast<double>(levels[i]) * scale);
            EXPECT_LE(std::fabs(back[e] - x[e]), 0.5 * scale * 1.0001) << e;
          }
        }
      }
    }
  }
}

// The byte positions the header documents, written out: int8 word w of key k at word 4w + k;
// int4 element 8w + i in byte i's low nibble, 8w + 4 + i in its high nibble, as level + 8.
TEST(KvCacheFormat, DocumentedBytePositions) {
  for (KvQuant kind : kKinds) {
    const QuantizedLayout layout = quantized_layout(kind, 1, 4, 32);
    std::vector<uint8_t> tensor(static_cast<size_t>(layout.total_bytes), 0);
    std::vector<float> row(32);
    const int L = quant_max_level(kind);
    for (int e = 0; e < 32; ++e) row[e] = static_cast<float>((e % (2 * L + 1)) - L);  // levels = the values
    store_quantized_row(layout, tensor.data(), 0, 2, row.data());
    for (int e = 0; e < 32; ++e) {
      const int level = static_cast<int>(row[e]);
      if (kind == KvQuant::kInt8) {
        EXPECT_EQ(static_cast<int8_t>(tensor[((e / 4) * 4 + 2) * 4 + e % 4]), level) << e;
      } else {
        const uint8_t byte = tensor[((e / 8) * 4 + 2) * 4 + e % 4];
        EXPECT_EQ(((e / 4) % 2 ? byte >> 4 : byte & 15) - 8, level) << e;
      }
    }
    float scale;
    std::memcpy(&scale, tensor.data() + layout.scale_offset + 2 * 4, 4);
    EXPECT_EQ(scale, 1.0f);
  }
}

}  // namespace
}  // namespace sdpa::testing
