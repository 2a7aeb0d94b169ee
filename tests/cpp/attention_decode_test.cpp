// The decode kernel (cpu/attention_decode_f32_simd128) and the strided key/value layout of a KV
// cache: against the float64 reference by the tolerance rule, at lengths straddling its chunks
// and splits, on 1-4 threads (bit-identical: the split depends on the plan alone), with every
// variant (masks, causal alignments, key lengths, windows, softcap, ALiBi, sinks, documents) and
// the NaN/Inf rules.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attention_test_support.h"
#include "cpu/thread_pool.h"

namespace sdpa::testing {
namespace {

// A decode-shaped problem: B, Hq query heads over Hkv KV heads, Lq queries, Lk keys.
Problem decode_problem(int64_t B, int64_t Hq, int64_t Hkv, int64_t Lq, int64_t Lk, int64_t E, int64_t Ev,
                       uint32_t seed) {
  Problem p = make_problem({B, Hq, Lq, E}, {B, Hkv, Lk, E}, {B, Hkv, Lk, Ev}, seed);
  p.request.enable_gqa = Hq != Hkv;
  return p;
}

void ExpectDecodeMatchesReference(const Problem& p, const std::string& what) {
  const AttentionPlan plan = plan_or_die(p.request);
  ASSERT_TRUE(uses_decode_kernel(plan)) << what;
  set_max_threads(4);
  const Result64 r64 = run_reference64(p);
  const double e_ref = std::max(max_abs_diff(run_backend(Backend::kScalar, p).output, r64.output),
                                max_abs_diff(run_reference32(p, DotRounding::kFused).output, r64.output));
  const Result one = run_backend(Backend::kSimd128, p, 1);
  EXPECT_LE(max_abs_diff(one.output, r64.output), tolerance(p, e_ref)) << what;
  for (int threads : {2, 3, 4}) {
    const Result many = run_backend(Backend::kSimd128, p, threads);
    EXPECT_EQ(0, std::memcmp(many.output.data(), one.output.data(), one.output.size() * sizeof(float)))
        << what << " threads=" << threads;
  }
}

TEST(DecodeKernel, ChosenForFewQueriesAndManyKeys) {
  EXPECT_TRUE(uses_decode_kernel(plan_or_die(decode_problem(1, 32, 8, 1, 512, 128, 128, 1).request)));
  EXPECT_TRUE(uses_decode_kernel(plan_or_die(decode_problem(1, 4, 4, 16, 64, 8, 8, 1).request)));
  EXPECT_FALSE(uses_decode_kernel(plan_or_die(decode_problem(1, 4, 4, 17, 512, 8, 8, 1).request)));
  EXPECT_FALSE(uses_decode_kernel(plan_or_die(decode_problem(1, 4, 4, 1, 63, 8, 8, 1).request)));
  Problem weights = decode_problem(1, 4, 4, 1, 512, 8, 8, 1);
  weights.request.return_weights = true;
  EXPECT_FALSE(uses_decode_kernel(plan_or_die(weights.request)));
}

TEST(DecodeKernel, SplitDependsOnThePlanOnly) {
  AttentionRequest request;
  request.query_shape = {1, 32, 1, 128};
  request.key_shape = request.value_shape = {1, 8, 32768, 128};
  request.enable_gqa = true;
  const AttentionPlan plan = plan_or_die(request);
  const DecodeSplit split = decode_split(plan);
  EXPECT_EQ(split.keys_per_split % kDecodeChunkKeys, 0);
  EXPECT_GE(split.keys_per_split, kDecodeMinSplitKeys);
  EXPECT_EQ(split.splits_per_head, (32768 + split.keys_per_split - 1) / split.keys_per_split);
  EXPECT_GE(split.splits_per_head * 8, kDecodeTasks);
}

TEST(DecodeKernel, LengthsStraddlingChunksAndSplits) {
  // Splits are 256 keys here (B·Hkv·Lk / 32 tasks < 256): lengths around 64, 256, 512 and 1024.
  for (int64_t Lk : {64, 65, 127, 128, 255, 256, 257, 511, 512, 513, 1023, 1025}) {
    ExpectDecodeMatchesReference(decode_problem(1, 8, 2, 1, Lk, 32, 32, 10 + static_cast<uint32_t>(Lk)),
                                 "gqa 4:1 Lk=" + std::to_string(Lk));
  }
  // Large enough that the split grows past its minimum: 2·2·4000 / 32 = 500 → 512 keys.
  ExpectDecodeMatchesReference(decode_problem(2, 4, 2, 1, 4000, 16, 8, 20), "two batches, 512-key splits");
}

TEST(DecodeKernel, RowsAndDims) {
  // Row blocks of 4, 2 and 1 (R = group·Lq = 1, 2, 3, 5, 16), E and Ev not multiples of 4 or 16.
  ExpectDecodeMatchesReference(decode_problem(1, 3, 3, 1, 300, 7, 5, 30), "MHA R=1, odd dims");
  ExpectDecodeMatchesReference(decode_problem(2, 4, 2, 1, 200, 64, 64, 31), "R=2");
  ExpectDecodeMatchesReference(decode_problem(1, 3, 1, 1, 200, 17, 33, 32), "MQA R=3");
  ExpectDecodeMatchesReference(decode_problem(1, 5, 1, 1, 130, 128, 20, 33), "R=5");
  ExpectDecodeMatchesReference(decode_problem(1, 4, 1, 4, 700, 12, 100, 34), "R=16, Lq=4");
  ExpectDecodeMatchesReference(decode_problem(1, 2, 2, 3, 150, 1, 1, 35), "E=Ev=1");
}

TEST(DecodeKernel, Variants) {
  Problem p = decode_problem(2, 8, 2, 2, 600, 32, 24, 40);
  p.request.causal = CausalAlignment::kBottomRight;
  ExpectDecodeMatchesReference(p, "bottom-right");
  p.request.causal = CausalAlignment::kTopLeft;
  ExpectDecodeMatchesReference(p, "top-left: rows see 1-2 keys");
  p.request.causal = CausalAlignment::kOffset;
  p.request.causal_offset = 300;
  ExpectDecodeMatchesReference(p, "offset 300");
  p.request.causal_offset = -5;
  ExpectDecodeMatchesReference(p, "offset -5: every row sees nothing");
  p.request.causal = CausalAlignment::kBottomRight;
  p.request.has_key_lengths = true;
  p.request.key_lengths = {0, 333};
  ExpectDecodeMatchesReference(p, "key lengths 0 and 333, bottom-right");
  p.request.has_window_left = true;
  p.request.window_left = 100;
  ExpectDecodeMatchesReference(p, "window of 100");
  p.request.softcap = 0.5;
  p.request.alibi = true;
  ExpectDecodeMatchesReference(p, "softcap + ALiBi");
  p.request.has_sinks = true;
  p.request.sinks = {0.5, -1, 2, -INFINITY, 0, 1, 3, -2};
  ExpectDecodeMatchesReference(p, "sinks");

  Problem masked = decode_problem(1, 4, 2, 1, 300, 16, 16, 41);
  masked.request.mask_kind = MaskKind::kBool;
  masked.request.mask_shape = {1, 4, 1, 300};
  masked.bool_mask.resize(4 * 300);
  for (size_t i = 0; i < masked.bool_mask.size(); ++i) masked.bool_mask[i] = (i * 7919) % 5 != 0;
  ExpectDecodeMatchesReference(masked, "bool mask");
  masked.request.mask_kind = MaskKind::kAdditive;
  masked.float_mask = random_floats(4 * 300, 42, -3, 3);
  masked.float_mask[5] = -INFINITY;
  ExpectDecodeMatchesReference(masked, "additive mask");

  Problem docs = decode_problem(1, 2, 1, 2, 200, 8, 8, 43);
  docs.request.has_documents = true;
  docs.request.query_documents_shape = {1, 2};
  docs.request.key_documents_shape = {1, 200};
  docs.query_documents = {1, 2};
  for (int j = 0; j < 200; ++j) docs.key_documents.push_back(j < 120 ? 1 : 2);
  ExpectDecodeMatchesReference(docs, "documents");
}

TEST(DecodeKernel, NonFiniteRules) {
  // NaN/Inf stored at hidden keys (past the key length) never leak; a NaN at a visible key makes
  // its rows NaN; values near FLT_MAX give a finite mean; huge logits stay stable.
  Problem hidden = decode_problem(1, 4, 2, 1, 300, 16, 16, 50);
  hidden.request.has_key_lengths = true;
  hidden.request.key_lengths = {290};
  for (int64_t kv = 0; kv < 2; ++kv) {
    for (int64_t j = 290; j < 300; ++j) {
      hidden.key[(kv * 300 + j) * 16] = j % 2 ? NAN : INFINITY;
      hidden.value[(kv * 300 + j) * 16 + 3] = j % 2 ? -INFINITY : NAN;
    }
  }
  ExpectDecodeMatchesReference(hidden, "NaN/Inf at hidden keys");
  Problem nan = decode_problem(1, 4, 2, 1, 300, 16, 16, 51);
  nan.key[(300 + 100) * 16 + 2] = NAN;  // KV head 1, key 100
  ExpectDecodeMatchesReference(nan, "NaN at a visible key");
  Problem big = decode_problem(1, 2, 1, 1, 300, 8, 8, 52);
  for (float& v : big.value) v = v > 0 ? 3.0e38f : -3.0e38f;
  ExpectDecodeMatchesReference(big, "values near FLT_MAX");
  Problem logits = decode_problem(1, 2, 1, 1, 400, 8, 8, 53);
  for (float& q : logits.query) q *= 300.0f;
  for (float& k : logits.key) k *= 300.0f;
  ExpectDecodeMatchesReference(logits, "logits of 1e4");
}

// A KV cache's layout: [B, Hkv, maxLength, E] read in place through the head strides gives the
// same result as the dense [B, Hkv, Lk, E] tensors, on the reference, the tile kernel and the
// decode kernel.
TEST(DecodeKernel, StridedCacheEqualsDenseTensors) {
  const int64_t B = 2, Hq = 4, Hkv = 2, E = 12, Ev = 8, max_length = 400;
  for (int64_t Lq : {1, 40}) {
    for (int64_t Lk : {70, 300}) {
      Problem dense = decode_problem(B, Hq, Hkv, Lq, Lk, E, Ev, 60 + static_cast<uint32_t>(Lk + Lq));
      dense.request.causal = CausalAlignment::kBottomRight;
      Problem cache = dense;
      cache.key.assign(B * Hkv * max_length * E, NAN);  // unwritten cache rows: never read
      cache.value.assign(B * Hkv * max_length * Ev, NAN);
      for (int64_t head = 0; head < B * Hkv; ++head) {
        std::copy_n(dense.key.begin() + head * Lk * E, Lk * E, cache.key.begin() + head * max_length * E);
        std::copy_n(dense.value.begin() + head * Lk * Ev, Lk * Ev, cache.value.begin() + head * max_length * Ev);
      }
      cache.request.key_head_stride = max_length * E;
      cache.request.value_head_stride = max_length * Ev;
      for (Backend backend : {Backend::kScalar, Backend::kSimd128}) {
        const Result a = run_backend(backend, dense, 2), b = run_backend(backend, cache, 2);
        EXPECT_EQ(0, std::memcmp(a.output.data(), b.output.data(), a.output.size() * sizeof(float)))
            << "Lq=" << Lq << " Lk=" << Lk << " backend " << static_cast<int>(backend);
      }
    }
  }
  Problem bad = decode_problem(1, 1, 1, 1, 10, 4, 4, 70);
  bad.request.key_head_stride = 39;
  AttentionPlan plan;
  EXPECT_FALSE(plan_attention(bad.request, &plan).ok());
}

}  // namespace
}  // namespace sdpa::testing
