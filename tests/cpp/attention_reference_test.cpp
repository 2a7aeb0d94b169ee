// Semantics of the scalar reference (the oracle), checked against properties that hold exactly
// or are computed here by hand, never against numbers copied from elsewhere.
#include "core/reference.h"

#include <gtest/gtest.h>

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
      for (int64_t j = 0; j < 3; ++j) p.bool_mask.push_back(j <= plan.last_visible_key(i));
    }
    const Result64 masked = run_reference64(p);
    EXPECT_EQ(causal.output, masked.output);
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

}  // namespace
}  // namespace sdpa::testing
