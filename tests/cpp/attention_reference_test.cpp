// Semantics of the scalar reference (the oracle), checked against properties that hold exactly
// or are computed here by hand, never against numbers copied from elsewhere.
#include "core/reference.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "attention_test_support.h"

namespace sdpa::testing {
namespace {

TEST(Reference, SingleKeyReturnsItsValueExactly) {
  Problem p = make_problem({4, 3}, {1, 3}, {1, 5}, 1, 50.0f);
  const Result r = run_backend(Backend::kScalar, p);
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t c = 0; c < 5; ++c) EXPECT_EQ(r.output[i * 5 + c], p.value[c]);
  }
}

TEST(Reference, ZeroScaleAveragesValues) {
  Problem p = make_problem({2, 4}, {5, 4}, {5, 3}, 2);
  p.request.has_scale = true;
  p.request.scale = 0;
  const Result64 r = run_reference64(p);
  for (int64_t c = 0; c < 3; ++c) {
    double mean = 0;
    for (int64_t j = 0; j < 5; ++j) mean += p.value[j * 3 + c] / 5.0;
    EXPECT_NEAR(r.output[c], mean, 1e-15);
    EXPECT_NEAR(r.output[3 + c], mean, 1e-15);
  }
}

TEST(Reference, HandComputedTwoKeyCase) {
  // q = [1, 0], k0 = [1, 0], k1 = [0, 1], scale 1: weights softmax([1, 0]).
  Problem p;
  p.request.query_shape = {1, 2};
  p.request.key_shape = {2, 2};
  p.request.value_shape = {2, 1};
  p.request.has_scale = true;
  p.request.scale = 1;
  p.query = {1, 0};
  p.key = {1, 0, 0, 1};
  p.value = {10, 20};
  const Result64 r = run_reference64(p);
  const double w0 = std::exp(1.0) / (std::exp(1.0) + 1.0);
  EXPECT_NEAR(r.weights[0], w0, 1e-15);
  EXPECT_NEAR(r.output[0], 10 * w0 + 20 * (1 - w0), 1e-13);
}

TEST(Reference, HugeLogitsDoNotOverflow) {
  Problem p = make_problem({3, 4}, {6, 4}, {6, 2}, 3);
  for (auto& x : p.key) x *= 1e4f;
  for (auto& x : p.query) x *= 1e4f;
  const Result r = run_backend(Backend::kScalar, p);
  for (float x : r.output) EXPECT_TRUE(std::isfinite(x));
}

TEST(Reference, FullyMaskedRowsAreZeroAndOthersUnchanged) {
  Problem p = make_problem({3, 4}, {5, 4}, {5, 2}, 4);
  p.request.return_weights = true;
  const Result64 unmasked = run_reference64(p);
  p.request.mask_kind = MaskKind::kBool;
  p.request.mask_shape = {3, 1};
  p.bool_mask = {1, 0, 1};  // row 1 may attend to nothing
  const Result64 r = run_reference64(p);
  for (int c = 0; c < 2; ++c) {
    EXPECT_EQ(r.output[2 + c], 0.0);
    EXPECT_EQ(r.output[c], unmasked.output[c]);
    EXPECT_EQ(r.output[4 + c], unmasked.output[4 + c]);
  }
  for (int j = 0; j < 5; ++j) EXPECT_EQ(r.weights[5 + j], 0.0);
}

TEST(Reference, HiddenKeysNeverLeakNaN) {
  Problem p = make_problem({2, 4}, {3, 4}, {3, 2}, 5);
  p.key[2 * 4] = NAN;
  p.value[2 * 2] = NAN;
  p.request.mask_kind = MaskKind::kAdditive;
  p.request.mask_shape = {3};
  p.float_mask = {0, 0, -INFINITY};
  const Result r = run_backend(Backend::kScalar, p);
  for (float x : r.output) EXPECT_TRUE(std::isfinite(x));
}

TEST(Reference, NaNInVisibleInputPropagatesToItsRowOnly) {
  Problem p = make_problem({1, 3, 4}, {1, 3, 4}, {1, 3, 2}, 6);
  p.query[1 * 4] = NAN;  // row 1
  const Result r = run_backend(Backend::kScalar, p);
  EXPECT_TRUE(std::isnan(r.output[2]));
  EXPECT_TRUE(std::isfinite(r.output[0]));
  EXPECT_TRUE(std::isfinite(r.output[4]));
}

TEST(Reference, CausalEqualsExplicitLowerTriangularMask) {
  for (auto alignment : {CausalAlignment::kTopLeft, CausalAlignment::kBottomRight}) {
    Problem p = make_problem({5, 4}, {3, 4}, {3, 2}, 7);
    p.request.causal = alignment;
    const Result64 causal = run_reference64(p);
    const AttentionPlan plan = plan_or_die(p.request);
    p.request.causal = CausalAlignment::kNone;
    p.request.mask_kind = MaskKind::kBool;
    p.request.mask_shape = {5, 3};
    for (int64_t i = 0; i < 5; ++i) {
      for (int64_t j = 0; j < 3; ++j) p.bool_mask.push_back(j <= plan.last_visible_key(0, i));
    }
    const Result64 masked = run_reference64(p);
    EXPECT_EQ(causal.output, masked.output);
  }
}

// Query i sees keys j <= i + offset: the same output as the explicit bool mask, for offsets
// below -Lq, negative, 0, Lk - Lq and beyond Lk; rows that see nothing are zeros.
TEST(Reference, CausalOffsetEqualsExplicitMask) {
  for (auto [lq, lk] : {std::pair<int64_t, int64_t>{4, 7}, {7, 4}}) {
    for (int64_t offset : {-lq - 2, int64_t{-3}, int64_t{0}, int64_t{2}, lk - lq, lk + 2}) {
      Problem p = make_problem({2, lq, 4}, {2, lk, 4}, {2, lk, 3}, 9);
      p.request.causal = CausalAlignment::kOffset;
      p.request.causal_offset = offset;
      const Result64 causal = run_reference64(p);
      p.request.causal = CausalAlignment::kNone;
      p.request.mask_kind = MaskKind::kBool;
      p.request.mask_shape = {lq, lk};
      for (int64_t i = 0; i < lq; ++i) {
        for (int64_t j = 0; j < lk; ++j) p.bool_mask.push_back(j <= i + offset);
      }
      const Result64 masked = run_reference64(p);
      const std::string what = std::to_string(lq) + "x" + std::to_string(lk) + " offset " + std::to_string(offset);
      EXPECT_EQ(causal.output, masked.output) << what;
      EXPECT_EQ(causal.weights, masked.weights) << what;
      for (int64_t b = 0; b < 2; ++b) {
        for (int64_t i = 0; i < std::min(lq, -offset); ++i) {
          for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(causal.output[(b * lq + i) * 3 + c], 0.0) << what;
        }
      }
    }
  }
}

TEST(Reference, NamedAlignmentsAreTheirOffsets) {
  for (auto [lq, lk] : {std::pair<int64_t, int64_t>{3, 8}, {8, 3}}) {
    Problem p = make_problem({lq, 4}, {lk, 4}, {lk, 2}, 10);
    p.request.causal = CausalAlignment::kTopLeft;
    const Result64 top_left = run_reference64(p);
    p.request.causal = CausalAlignment::kBottomRight;
    const Result64 bottom_right = run_reference64(p);
    p.request.causal = CausalAlignment::kOffset;
    p.request.causal_offset = 0;
    EXPECT_EQ(run_reference64(p).output, top_left.output);
    p.request.causal_offset = lk - lq;
    EXPECT_EQ(run_reference64(p).output, bottom_right.output);
  }
}

// isCausal with attnMask: a key must pass both, and an additive mask adds to the keys causality
// leaves visible. The same as one explicit mask that holds both patterns.
TEST(Reference, CausalComposesWithMasks) {
  const int64_t lq = 5, lk = 6;
  for (int64_t offset : {-2, 0, 1, 3}) {
    for (auto kind : {MaskKind::kBool, MaskKind::kAdditive}) {
      Problem p = make_problem({2, lq, 4}, {2, lk, 4}, {2, lk, 3}, 11);
      p.request.mask_kind = kind;
      p.request.mask_shape = {2, lq, lk};
      std::mt19937 rng(12);
      std::vector<uint8_t> both;
      for (int64_t x = 0; x < 2 * lq * lk; ++x) {
        const int64_t i = (x / lk) % lq, j = x % lk;
        const bool visible = rng() % 3 != 0;
        p.bool_mask.push_back(visible);
        p.float_mask.push_back(visible ? static_cast<float>(rng() % 5) - 2.0f : -INFINITY);
        both.push_back(visible && j <= i + offset);
      }
      p.request.causal = CausalAlignment::kOffset;
      p.request.causal_offset = offset;
      p.key[3 * 4] = NAN;  // key 3 of batch 0: hidden from rows whose limit is below it
      const Result64 composed = run_reference64(p);
      p.request.causal = CausalAlignment::kNone;
      for (size_t x = 0; x < both.size(); ++x) {
        if (!both[x]) p.float_mask[x] = -INFINITY;
      }
      p.bool_mask = both;
      const Result64 explicit_mask = run_reference64(p);
      const std::string what = std::string(kind == MaskKind::kBool ? "bool" : "additive") + " offset " + std::to_string(offset);
      for (size_t x = 0; x < composed.output.size(); ++x) {
        if (std::isnan(explicit_mask.output[x])) {
          EXPECT_TRUE(std::isnan(composed.output[x])) << what << " [" << x << "]";
        } else {
          EXPECT_EQ(composed.output[x], explicit_mask.output[x]) << what << " [" << x << "]";
        }
      }
      // Rows whose last visible key is before key 3 never read the NaN there.
      for (int64_t i = 0; i < lq && i + offset < 3; ++i) {
        for (int64_t c = 0; c < 3; ++c) EXPECT_FALSE(std::isnan(composed.output[i * 3 + c])) << what;
      }
    }
  }
}

TEST(Reference, GqaUsesHeadGroups) {
  Problem p = make_problem({1, 4, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 3}, 8);
  p.request.enable_gqa = true;
  const Result64 r = run_reference64(p);
  // Query head 3 must equal attention of query head 3 against kv head 1 alone.
  Problem single;
  single.request.query_shape = {3, 4};
  single.request.key_shape = {5, 4};
  single.request.value_shape = {5, 3};
  single.query.assign(p.query.begin() + 3 * 12, p.query.begin() + 4 * 12);
  single.key.assign(p.key.begin() + 20, p.key.end());
  single.value.assign(p.value.begin() + 15, p.value.end());
  const Result64 s = run_reference64(single);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(r.output[27 + i], s.output[i]);
}

TEST(Reference, SoftmaxRowsIsStableAndHandlesTemperature) {
  const std::vector<float> x = {100, 200, 300, 1, 2, 3};
  std::vector<float> out(6);
  softmax_rows(x.data(), 2, 3, 1.0f, out.data());
  EXPECT_NEAR(out[2], 1.0, 1e-6);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(out[3], std::exp(1.0) / z, 1e-7);
  softmax_rows(x.data() + 3, 1, 3, 1000.0f, out.data());
  EXPECT_NEAR(out[0], 1.0 / 3, 1e-3);
}

TEST(Reference, Matmul) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};  // [2, 3]
  const std::vector<float> b = {1, 0, 0, 1, 1, 1};  // [3, 2]
  MatmulPlan plan;
  ASSERT_TRUE(plan_matmul({2, 3}, {3, 2}, &plan).ok());
  std::vector<float> out(4);
  matmul_reference(plan, a.data(), b.data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{4, 5, 10, 11}));
}

// Softcap: the weights are softmax(c·tanh(q·k·scale / c)), computed here from the formula.
TEST(Reference, SoftcapEqualsTheFormula) {
  for (double cap : {0.5, 5.0, 50.0}) {
    Problem p = make_problem({3, 4}, {5, 4}, {5, 2}, 60, 4.0f);
    p.request.softcap = cap;
    const Result64 r = run_reference64(p);
    const double scale = 1.0 / std::sqrt(4.0);
    for (int64_t i = 0; i < 3; ++i) {
      double s[5], m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < 5; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < 4; ++e) dot += double(p.query[i * 4 + e]) * double(p.key[j * 4 + e]);
        s[j] = cap * std::tanh(dot * double(static_cast<float>(scale)) / double(static_cast<float>(cap)));
        m = std::max(m, s[j]);
      }
      for (double x : s) sum += std::exp(x - m);
      for (int64_t j = 0; j < 5; ++j) EXPECT_NEAR(r.weights[i * 5 + j], std::exp(s[j] - m) / sum, 1e-12) << cap;
    }
  }
}

// Softcap 0 is off (ONNX's default): the same result as no softcap.
TEST(Reference, SoftcapZeroIsOff) {
  Problem p = make_problem({2, 6, 8}, {2, 9, 8}, {2, 9, 3}, 61, 3.0f);
  const Result64 plain = run_reference64(p);
  p.request.softcap = 0.0;
  EXPECT_EQ(run_reference64(p).output, plain.output);
  EXPECT_EQ(run_reference64(p).weights, plain.weights);
}

// Logits of 1e4 are capped to (−c, c): finite weights, the same as the formula with tanh = ±1
// where saturated; and the softcap comes before the mask, so a hidden key (bool mask, additive
// −inf, causality) stays hidden even when its score is NaN, and an additive mask adds to the
// capped score.
TEST(Reference, SoftcapBeforeMasks) {
  const double cap = 5.0;
  Problem p = make_problem({4, 2}, {6, 2}, {6, 3}, 62);
  for (float& x : p.query) x *= 1e4f;
  p.request.softcap = cap;
  const Result64 capped = run_reference64(p);
  for (double w : capped.weights) EXPECT_TRUE(std::isfinite(w));
  for (double o : capped.output) EXPECT_TRUE(std::isfinite(o));
  for (auto kind : {MaskKind::kBool, MaskKind::kAdditive}) {
    Problem m = p;
    m.request.mask_kind = kind;
    m.request.mask_shape = {4, 6};
    for (int64_t x = 0; x < 24; ++x) {
      const bool visible = x % 6 != 2;
      m.bool_mask.push_back(visible);
      m.float_mask.push_back(visible ? 0.25f * static_cast<float>(x % 3) : -INFINITY);
    }
    const Result64 clean = run_reference64(m);
    m.key[2 * 2] = NAN;  // key 2, hidden from every row
    m.value[2 * 3 + 1] = INFINITY;
    const Result64 dirty = run_reference64(m);
    EXPECT_EQ(clean.output, dirty.output);
    for (int64_t i = 0; i < 4; ++i) {
      EXPECT_EQ(dirty.weights[i * 6 + 2], 0.0);
      // the mask adds to the capped scores: weights ∝ e^(capped + add)
      if (kind == MaskKind::kAdditive) {
        const double ratio = dirty.weights[i * 6 + 1] / dirty.weights[i * 6 + 0];
        const double want = capped.weights[i * 6 + 1] / capped.weights[i * 6 + 0] *
                            std::exp(double(m.float_mask[i * 6 + 1]) - double(m.float_mask[i * 6 + 0]));
        EXPECT_NEAR(ratio, want, 1e-9 * want) << i;
      }
    }
  }
  Problem c = p;
  c.request.causal = CausalAlignment::kTopLeft;
  const Result64 clean = run_reference64(c);
  c.key[5 * 2] = NAN;  // past every row's limit
  EXPECT_EQ(run_reference64(c).output, clean.output);
  // A NaN score at a visible key still makes its row NaN.
  Problem n = p;
  n.query[1 * 2] = NAN;
  const Result64 nan_row = run_reference64(n);
  EXPECT_TRUE(std::isnan(nan_row.output[1 * 3]));
  EXPECT_FALSE(std::isnan(nan_row.output[0]));
}

}  // namespace
}  // namespace sdpa::testing
