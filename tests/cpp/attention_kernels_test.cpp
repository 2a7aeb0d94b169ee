// Every CPU backend against the float64 reference, with the tolerance rule of
// attention_test_support.h. The SIMD kernel runs here through its native f32x4 build.
#include <gtest/gtest.h>

#include "attention_test_support.h"

namespace sdpa::testing {
namespace {

class KernelTest : public ::testing::TestWithParam<Backend> {
 protected:
  void ExpectMatchesReference(const Problem& p, const char* what) {
    const Result64 r64 = run_reference64(p);
    const Result r32 = run_backend(Backend::kScalar, p);
    const Result r = run_backend(GetParam(), p);
    const double e_ref = max_abs_diff(r32.output, r64.output);
    const double err = max_abs_diff(r.output, r64.output);
    EXPECT_LE(err, tolerance(p, e_ref)) << what << " e_ref=" << e_ref;
    if (p.request.return_weights) {
      const double we_ref = max_abs_diff(r32.weights, r64.weights);
      EXPECT_LE(max_abs_diff(r.weights, r64.weights), 2 * we_ref + 1e-6) << what << " (weights)";
    }
  }
};

TEST_P(KernelTest, LengthAndDimSweep) {
  uint32_t seed = 100;
  for (int64_t lq : {1, 2, 3, 17, 63, 64, 65, 127}) {
    for (int64_t lk : {1, 3, 17, 63, 64, 65, 257}) {
      for (auto [e, ev] : {std::pair<int64_t, int64_t>{1, 8}, {15, 16}, {64, 100}, {8, 1}}) {
        Problem p = make_problem({1, 2, lq, e}, {1, 2, lk, e}, {1, 2, lk, ev}, seed++, 2.0f);
        p.request.return_weights = (seed % 3) == 0;
        ExpectMatchesReference(p, ("lq=" + std::to_string(lq) + " lk=" + std::to_string(lk) +
                                   " e=" + std::to_string(e) + " ev=" + std::to_string(ev))
                                      .c_str());
      }
    }
  }
}

TEST_P(KernelTest, CausalBothAlignments) {
  uint32_t seed = 200;
  for (auto alignment : {CausalAlignment::kTopLeft, CausalAlignment::kBottomRight}) {
    for (auto [lq, lk] : {std::pair<int64_t, int64_t>{70, 130}, {130, 70}, {65, 65}, {1, 200}}) {
      Problem p = make_problem({2, lq, 16}, {2, lk, 16}, {2, lk, 8}, seed++);
      p.request.causal = alignment;
      p.request.return_weights = true;
      ExpectMatchesReference(p, "causal");
    }
  }
}

TEST_P(KernelTest, MaskBroadcastShapes) {
  uint32_t seed = 300;
  const int64_t B = 2, H = 3, Lq = 33, Lk = 70;
  for (int bits = 0; bits < 16; ++bits) {
    std::vector<int64_t> shape = {(bits & 8) ? B : 1, (bits & 4) ? H : 1, (bits & 2) ? Lq : 1,
                                  (bits & 1) ? Lk : 1};
    for (auto kind : {MaskKind::kBool, MaskKind::kAdditive}) {
      Problem p = make_problem({B, H, Lq, 8}, {B, H, Lk, 8}, {B, H, Lk, 5}, seed++);
      p.request.mask_kind = kind;
      p.request.mask_shape = shape;
      const auto n = static_cast<size_t>(product(shape));
      std::mt19937 rng(seed);
      for (size_t i = 0; i < n; ++i) {
        const bool visible = rng() % 4 != 0;
        p.bool_mask.push_back(visible);
        p.float_mask.push_back(visible ? static_cast<float>(rng() % 7) - 3.0f : -INFINITY);
      }
      p.request.return_weights = bits % 2 == 0;
      ExpectMatchesReference(p, ("mask bits " + std::to_string(bits)).c_str());
    }
  }
}

TEST_P(KernelTest, GqaAndBatches) {
  Problem p = make_problem({2, 6, 40, 32}, {2, 2, 90, 32}, {2, 2, 90, 24}, 400);
  p.request.enable_gqa = true;
  p.request.return_weights = true;
  ExpectMatchesReference(p, "gqa");
}

TEST_P(KernelTest, LargeLogitsAndHiddenGarbage) {
  Problem p = make_problem({20, 16}, {100, 16}, {100, 16}, 500, 30.0f);  // logits ~ 90..1e4
  ExpectMatchesReference(p, "large logits");
  p.request.mask_kind = MaskKind::kBool;
  p.request.mask_shape = {100};
  for (int j = 0; j < 100; ++j) p.bool_mask.push_back(j % 5 != 0);
  for (int j = 0; j < 100; j += 5) {
    p.key[j * 16] = NAN;
    p.value[j * 16 + 3] = j % 10 ? NAN : 1e30f;
  }
  const Result r = run_backend(GetParam(), p);
  for (float x : r.output) ASSERT_TRUE(std::isfinite(x));
  ExpectMatchesReference(p, "hidden garbage");
}

TEST_P(KernelTest, FullyMaskedRowsAreZero) {
  Problem p = make_problem({6, 8}, {70, 8}, {70, 4}, 600);
  p.request.mask_kind = MaskKind::kBool;
  p.request.mask_shape = {6, 1};
  p.bool_mask = {1, 0, 1, 0, 0, 1};
  p.request.return_weights = true;
  const Result r = run_backend(GetParam(), p);
  for (int c = 0; c < 4; ++c) EXPECT_EQ(r.output[1 * 4 + c], 0.0f);
  for (int j = 0; j < 70; ++j) EXPECT_EQ(r.weights[3 * 70 + j], 0.0f);
  ExpectMatchesReference(p, "fully masked");
}

TEST_P(KernelTest, ZeroSizes) {
  for (auto shapes : {std::vector<std::vector<int64_t>>{{0, 2, 4}, {0, 3, 4}, {0, 3, 5}},
                      {{2, 0, 4}, {2, 3, 4}, {2, 3, 5}},
                      {{2, 3, 4}, {2, 0, 4}, {2, 0, 5}}}) {
    Problem p = make_problem(shapes[0], shapes[1], shapes[2], 700);
    p.request.return_weights = true;
    const Result r = run_backend(GetParam(), p);
    for (float x : r.output) EXPECT_EQ(x, 0.0f);  // Lk = 0: every row sees nothing
  }
}

INSTANTIATE_TEST_SUITE_P(CpuBackends, KernelTest,
                         ::testing::Values(Backend::kScalar, Backend::kSimd128),
                         [](const auto& info) {
                           return info.param == Backend::kScalar ? "scalar" : "simd128";
                         });

}  // namespace
}  // namespace sdpa::testing
