// The decode kernel on int8/int4 KV caches (cpu/attention_decode_quantized_simd128) and the
// scalar backend's dequantizing path: against the float64 reference on the dequantized cache
// with the query rounded through int8 blocks (docs/kv-cache-formats.md), by the tolerance rule,
// at lengths straddling its chunks, tiles and splits, on 1-4 threads (bit-identical), with the
// variants, odd dims and NaN rules; and its vector query quantizer against the format's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attention_test_support.h"
#include "core/kv_cache_format.h"
#include "cpu/quantized_rows_simd128.h"
#include "cpu/simd128_int.h"
#include "cpu/thread_pool.h"

namespace sdpa::testing {
namespace {

// A problem's keys and values in a quantized cache of max_length rows, and the problem as the
// float64 reference must see it (keys, values and query as the cache call reads them).
struct QuantizedCase {
  Problem dense;     // dequantized keys/values, rounded query: the oracle's inputs
  Problem original;  // the request on the cache (strides, element types) and the float query
  std::vector<uint8_t> keys, values;

  AttentionInputs inputs() const {
    AttentionInputs in = original.inputs();
    in.key = in.value = nullptr;
    in.key_quantized = keys.data();
    in.value_quantized = values.data();
    return in;
  }
};

QuantizedCase quantize(const Problem& p, KvQuant kind, int64_t max_length) {
  QuantizedCase c{p, p, {}, {}};
  const AttentionPlan plan = plan_or_die(p.request);
  const QuantizedLayout kl = quantized_layout(kind, plan.B * plan.Hkv, max_length, plan.E);
  const QuantizedLayout vl = quantized_layout(kind, plan.B * plan.Hkv, max_length, plan.Ev);
  c.keys.assign(static_cast<size_t>(kl.total_bytes), 0);
  c.values.assign(static_cast<size_t>(vl.total_bytes), 0);
  for (int64_t h = 0; h < plan.B * plan.Hkv; ++h) {
    for (int64_t j = 0; j < plan.Lk; ++j) {
      store_quantized_row(kl, c.keys.data(), h, j, p.key.data() + (h * plan.Lk + j) * plan.E);
      store_quantized_row(vl, c.values.data(), h, j, p.value.data() + (h * plan.Lk + j) * plan.Ev);
      load_quantized_row(kl, c.keys.data(), h, j, c.dense.key.data() + (h * plan.Lk + j) * plan.E);
      load_quantized_row(vl, c.values.data(), h, j, c.dense.value.data() + (h * plan.Lk + j) * plan.Ev);
    }
  }
  for (int64_t r = 0; r < plan.B * plan.Hq * plan.Lq; ++r) {
    round_query_row(p.query.data() + r * plan.E, plan.E, c.dense.query.data() + r * plan.E);
  }
  c.original.request.key_type = c.original.request.value_type = kind == KvQuant::kInt8 ? ElementType::kInt8 : ElementType::kInt4;
  c.original.request.key_head_stride = max_length * plan.E;
  c.original.request.value_head_stride = max_length * plan.Ev;
  return c;
}

Problem decode_problem(int64_t B, int64_t Hq, int64_t Hkv, int64_t Lq, int64_t Lk, int64_t E, int64_t Ev, uint32_t seed) {
  Problem p = make_problem({B, Hq, Lq, E}, {B, Hkv, Lk, E}, {B, Hkv, Lk, Ev}, seed, 2.0f);
  p.request.enable_gqa = Hq != Hkv;
  return p;
}

void ExpectMatchesDequantized(const Problem& p, const std::string& what, int64_t extra_rows = 3) {
  for (KvQuant kind : {KvQuant::kInt8, KvQuant::kInt4}) {
    const std::string label = what + (kind == KvQuant::kInt8 ? " int8" : " int4");
    const QuantizedCase c = quantize(p, kind, p.request.key_shape[2] + extra_rows);
    const AttentionPlan plan = plan_or_die(c.original.request);
    ASSERT_TRUE(plan.quantized_kv()) << label;
    set_max_threads(4);
    const Result64 r64 = run_reference64(c.dense);
    const Result scalar = run_with_canaries(Backend::kScalar, plan, c.inputs(), 1);
    // The scalar backend on the cache is the float32 reference on the dequantized inputs.
    EXPECT_TRUE(same_bits(scalar.output, run_backend(Backend::kScalar, c.dense).output)) << label;
    const double e_ref = max_abs_diff(scalar.output, r64.output);
    const Result one = run_with_canaries(Backend::kSimd128, plan, c.inputs(), 1);
    EXPECT_LE(max_abs_diff(one.output, r64.output), tolerance(c.dense, e_ref)) << label;
    if (!uses_decode_kernel(plan)) continue;
    for (int threads : {2, 4}) {
      const Result many = run_with_canaries(Backend::kSimd128, plan, c.inputs(), threads);
      EXPECT_TRUE(same_bits(many.output, one.output)) << label << " threads=" << threads;
    }
  }
}

// The query's whole blocks (int8) and an append's (int8, int4) are quantized four lanes at a time
// (simd::quantize_whole_block): the same levels and scale bits as quantize_block, on random blocks
// of every magnitude, exact ties, zero, constant, subnormal, ±FLT_MAX and non-finite blocks.
TEST(QuantizedDecode, VectorBlockQuantizerMatchesTheFormatsBitForBit) {
  for (KvQuant kind : {KvQuant::kInt8, KvQuant::kInt4}) {
    const int top = quant_max_level(kind);
    std::mt19937 rng(11);
    std::uniform_int_distribution<uint32_t> bits(0, 0xFFFFFFFFu);
    std::uniform_int_distribution<int> level(-top, top), position(0, kQuantBlock - 1);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    const auto finite_bits = [&] {
      float x;
      do {
        const uint32_t u = bits(rng);
        std::memcpy(&x, &u, sizeof x);
      } while (!std::isfinite(x));
      return x;
    };
    std::vector<std::vector<float>> blocks;
    for (int trial = 0; trial < 20000; ++trial) {
      std::vector<float> x(kQuantBlock);
      switch (trial % 5) {
        case 0: for (float& v : x) v = finite_bits(); break;
        case 1: for (float& v : x) v = unit(rng) * std::ldexp(1.0f, trial % 200 - 100); break;
        case 2:  // ties: amax is the top level, so x / amax · top is x, a half-integer
          for (float& v : x) v = static_cast<float>(level(rng)) + 0.5f * static_cast<float>(trial % 2);
          x[static_cast<size_t>(position(rng))] = static_cast<float>(top);
          break;
        case 3: for (float& v : x) v = unit(rng) * std::numeric_limits<float>::denorm_min() * 64.0f; break;
        default: for (float& v : x) v = unit(rng);
      }
      blocks.push_back(x);
    }
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (float special : {0.0f, -0.0f, 1.0f, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), nan, inf, -inf}) {
      blocks.emplace_back(kQuantBlock, special);
      std::vector<float> one(kQuantBlock, 0.25f);
      one[7] = special;
      blocks.push_back(one);
    }
    for (const std::vector<float>& x : blocks) {
      int8_t want[kQuantBlock], got[kQuantBlock];
      const float want_scale = quantize_block(kind, x.data(), kQuantBlock, want);
      const float got_scale = simd::quantize_whole_block(kind, x.data(), got);
      ASSERT_EQ(std::memcmp(&want_scale, &got_scale, sizeof want_scale), 0) << want_scale << " " << got_scale;
      ASSERT_EQ(std::memcmp(want, got, sizeof want), 0);
    }
  }
}

// An append's rows (store_quantized_rows_simd128) are the bytes store_quantized_row writes, and
// load_quantized_rows_simd128 reads load_quantized_row's floats: every dim (whole blocks and a
// partial last one), rows starting mid-tile, NaN/Inf blocks among them.
TEST(QuantizedDecode, RowsWrittenAndReadAsTheFormatsScalarCode) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> unit(-2.0f, 2.0f);
  for (KvQuant kind : {KvQuant::kInt8, KvQuant::kInt4}) {
    for (int64_t dim : {1, 5, 31, 32, 33, 64, 100, 128, 200}) {
      const QuantizedLayout layout = quantized_layout(kind, 3, 13, dim);
      std::vector<float> rows(static_cast<size_t>(13 * dim));
      for (float& v : rows) v = unit(rng);
      rows[static_cast<size_t>(2 * dim)] = std::numeric_limits<float>::quiet_NaN();
      rows[static_cast<size_t>(5 * dim + dim / 2)] = -std::numeric_limits<float>::infinity();
      std::vector<uint8_t> want(static_cast<size_t>(layout.total_bytes), 0xA5), got = want;
      for (int64_t head = 0; head < 3; ++head) {
        const int64_t first = head, count = 13 - head;  // rows first … 12 of each head
        for (int64_t t = 0; t < count; ++t) store_quantized_row(layout, want.data(), head, first + t, rows.data() + t * dim);
        store_quantized_rows_simd128(layout, got.data(), head, first, rows.data(), count);
      }
      ASSERT_EQ(want, got) << (kind == KvQuant::kInt8 ? "int8" : "int4") << " dim " << dim;
      // Read back whole (the dequantized copy): load_quantized_row<float>'s floats, bit for bit.
      for (int64_t head = 0; head < 3; ++head) {
        std::vector<float> want_rows(static_cast<size_t>(13 * dim)), got_rows(want_rows.size());
        for (int64_t j = 0; j < 13; ++j) load_quantized_row(layout, want.data(), head, j, want_rows.data() + j * dim);
        load_quantized_rows_simd128(layout, got.data(), head, 0, 13, got_rows.data());
        ASSERT_EQ(std::memcmp(want_rows.data(), got_rows.data(), want_rows.size() * sizeof(float)), 0) << "read back, dim " << dim;
      }
    }
  }
}

TEST(QuantizedDecode, LengthsStraddlingTilesChunksAndSplits) {
  for (int64_t Lk : {64, 65, 66, 67, 127, 255, 257, 513, 1025}) {
    ExpectMatchesDequantized(decode_problem(1, 8, 2, 1, Lk, 64, 64, 100 + static_cast<uint32_t>(Lk)), "Lk=" + std::to_string(Lk));
  }
  ExpectMatchesDequantized(decode_problem(2, 4, 2, 1, 3000, 32, 32, 7), "two batches, grown splits");
}

TEST(QuantizedDecode, RowsAndDims) {
  ExpectMatchesDequantized(decode_problem(1, 3, 3, 1, 300, 7, 5, 30), "MHA R=1, E=7 Ev=5");
  ExpectMatchesDequantized(decode_problem(2, 4, 2, 1, 200, 40, 33, 31), "R=2, E=40 Ev=33");
  ExpectMatchesDequantized(decode_problem(1, 3, 1, 1, 200, 33, 100, 32), "MQA R=3");
  ExpectMatchesDequantized(decode_problem(1, 5, 1, 1, 200, 128, 128, 33), "R=5");
  ExpectMatchesDequantized(decode_problem(1, 8, 2, 4, 300, 96, 64, 34), "R=16 (Lq=4)");
  ExpectMatchesDequantized(decode_problem(2, 8, 2, 8, 300, 64, 64, 36), "R=32 (Lq=8)");
  Problem causal = decode_problem(1, 8, 2, 16, 500, 64, 48, 37);
  causal.request.causal = CausalAlignment::kBottomRight;
  ExpectMatchesDequantized(causal, "R=64 (Lq=16), causal: every row another visible range");
  ExpectMatchesDequantized(decode_problem(1, 2, 2, 64, 260, 32, 32, 38), "MHA R=64 (Lq=64)");
  ExpectMatchesDequantized(decode_problem(1, 2, 2, 65, 260, 32, 32, 39), "R=65: the tile kernel on the dequantized cache");
  ExpectMatchesDequantized(decode_problem(1, 8, 2, 1, 40, 64, 64, 35), "below the decode kernel: the tile kernel on the dequantized cache");
}

// The decode kernel reads a quantized cache in place for up to kDecodeMaxRowsQuantized rows per KV
// head (the tile kernel would dequantize the whole cache first); a float cache, up to kDecodeMaxRows.
TEST(QuantizedDecode, RowsReadInPlace) {
  const auto plan_on = [](int64_t Hq, int64_t Lq, bool quantized) {
    const Problem p = decode_problem(1, Hq, 2, Lq, 512, 64, 64, 1);
    return plan_or_die(quantized ? quantize(p, KvQuant::kInt8, 512).original.request : p.request);
  };
  EXPECT_TRUE(uses_decode_kernel(plan_on(8, 16, true)));   // R = 64
  EXPECT_FALSE(uses_decode_kernel(plan_on(2, 65, true)));  // R = 65
  EXPECT_TRUE(uses_decode_kernel(plan_on(8, 4, false)));   // R = 16
  EXPECT_FALSE(uses_decode_kernel(plan_on(8, 8, false)));  // R = 32
}

TEST(QuantizedDecode, Variants) {
  const auto base = [](uint32_t seed) { return decode_problem(2, 8, 2, 2, 700, 48, 40, seed); };
  Problem causal = base(40);
  causal.request.causal = CausalAlignment::kBottomRight;
  ExpectMatchesDequantized(causal, "causal");
  Problem window = base(41);
  window.request.causal = CausalAlignment::kBottomRight;
  window.request.has_window_left = true;
  window.request.window_left = 301;
  ExpectMatchesDequantized(window, "window 301 (splits start mid-tile)");
  Problem lengths = base(42);
  lengths.request.has_key_lengths = true;
  lengths.request.key_lengths = {699, 258};
  ExpectMatchesDequantized(lengths, "key lengths");
  Problem capped = base(43);
  capped.request.softcap = 2.5;
  capped.request.alibi = true;
  ExpectMatchesDequantized(capped, "softcap + ALiBi");
  Problem sinks = base(44);
  sinks.request.has_sinks = true;
  sinks.request.sinks = {0, 1, -1, 2, 0.5, 3, -2, 1};
  ExpectMatchesDequantized(sinks, "sinks");
  Problem masked = base(45);
  masked.request.mask_kind = MaskKind::kBool;
  masked.request.mask_shape = {700};
  masked.bool_mask.resize(700);
  for (size_t j = 0; j < 700; ++j) masked.bool_mask[j] = j % 3 != 0;
  ExpectMatchesDequantized(masked, "bool mask");
  Problem documents = base(46);
  documents.request.has_documents = true;
  documents.request.query_documents_shape = {2, 2};
  documents.request.key_documents_shape = {2, 700};
  documents.query_documents = {0, 1, 1, 1};
  documents.key_documents.resize(1400);
  for (size_t j = 0; j < 1400; ++j) documents.key_documents[j] = (j % 700) < 350 ? 0 : 1;
  ExpectMatchesDequantized(documents, "documents");
}

TEST(QuantizedDecode, NonFiniteBlocksStayInTheirRows) {
  Problem p = decode_problem(1, 2, 1, 1, 300, 64, 64, 50);
  p.key[150 * 64 + 3] = std::numeric_limits<float>::quiet_NaN();
  p.value[100 * 64 + 40] = std::numeric_limits<float>::infinity();
  p.request.has_key_lengths = true;
  p.request.key_lengths = {150};  // the NaN key hidden; the Inf value's block (dims 32…63) visible
  ExpectMatchesDequantized(p, "NaN key hidden, Inf value block");
  p.request.key_lengths = {300};
  ExpectMatchesDequantized(p, "NaN key visible");
}

}  // namespace
}  // namespace sdpa::testing
