// The backward pass: (1) the float64 reference against central finite differences of the float64
// forward (gradcheck) for every forward option; (2) every CPU backend's backward against the
// float64 analytic gradient, with the rule (per gradient tensor g)
//   max|g − g64| ≤ 2·e_ref + 1e-5·max(1, max|g64|),   e_ref = max|g_scalar32 − g64|,
// the forward's rule with the gradient's own magnitude in place of |V|max; (3) the forward's
// log-sum-exp on both backends against the float64 reference.
#include <gtest/gtest.h>

#include <string>

#include "attention_backward_support.h"

namespace sdpa::testing {
namespace {

std::vector<float> random_d_output(const Problem& p, uint32_t seed) {
  return random_floats(plan_or_die(p.request).output_elements(), seed);
}

// L = Σ dO ⊙ O computed in float64 by the float64 forward.
double loss64(const Problem& problem, const std::vector<float>& d_output) {
  const Result64 r = run_reference64(problem);
  double l = 0;
  for (size_t i = 0; i < r.output.size(); ++i) l += d_output[i] * r.output[i];
  return l;
}

// Inputs on a 2^-8 grid and steps of 2^-10 keep x ± h exact in float32.
void quantize(std::vector<float>& x) {
  for (auto& v : x) v = std::round(v * 256.0f) / 256.0f;
}

// Central differences of loss64 for every element of `x` (finite entries only) vs `analytic`.
void expect_gradcheck(Problem& problem, std::vector<float>& x, const std::vector<double>& analytic,
                      const std::vector<float>& d_output, const std::string& what) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  const float h = 1.0f / 1024;
  for (size_t i = 0; i < x.size(); ++i) {
    const float x0 = x[i];
    if (!std::isfinite(x0)) {
      EXPECT_EQ(analytic[i], 0.0) << what << "[" << i << "] (a -inf mask entry has no gradient)";
      continue;
    }
    x[i] = x0 + h;
    const double up = loss64(problem, d_output);
    x[i] = x0 - h;
    const double down = loss64(problem, d_output);
    x[i] = x0;
    const double numeric = (up - down) / (2.0 * h);
    EXPECT_NEAR(analytic[i], numeric, 1e-6 + 1e-4 * std::fabs(numeric)) << what << "[" << i << "]";
  }
}

void gradcheck(Problem problem, const std::string& what, uint32_t seed = 1) {
  quantize(problem.query);
  quantize(problem.key);
  quantize(problem.value);
  quantize(problem.float_mask);
  std::vector<float> d_output = random_d_output(problem, seed);
  const Grads64 g = backward64(problem, d_output);
  expect_gradcheck(problem, problem.query, g.dq, d_output, what + " dQuery");
  expect_gradcheck(problem, problem.key, g.dk, d_output, what + " dKey");
  expect_gradcheck(problem, problem.value, g.dv, d_output, what + " dValue");
  if (problem.request.mask_kind == MaskKind::kAdditive) {
    expect_gradcheck(problem, problem.float_mask, g.dmask, d_output, what + " dMask");
  }
}

void set_masks(Problem& p, MaskKind kind, std::vector<int64_t> shape, uint32_t seed, int hidden_one_in = 4) {
  p.request.mask_kind = kind;
  p.request.mask_shape = shape;
  std::mt19937 rng(seed);
  p.bool_mask.clear();
  p.float_mask.clear();
  for (int64_t i = 0; i < product(shape); ++i) {
    const bool visible = static_cast<int>(rng() % hidden_one_in) != 0;
    p.bool_mask.push_back(visible);
    p.float_mask.push_back(visible ? static_cast<float>(rng() % 7) / 4.0f - 0.75f : -INFINITY);
  }
}

TEST(Gradcheck, PlainDefaultScale) {
  gradcheck(make_problem({1, 2, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 3}, 10), "plain");
}

TEST(Gradcheck, ExplicitScaleAndRanks) {
  Problem p = make_problem({4, 3}, {6, 3}, {6, 2}, 20);
  p.request.has_scale = true;
  p.request.scale = 0.8;
  gradcheck(p, "rank 2, scale 0.8");
  gradcheck(make_problem({2, 3, 3}, {2, 4, 3}, {2, 4, 5}, 21), "rank 3");
}

TEST(Gradcheck, BoolMaskWithBroadcast) {
  for (auto shape : {std::vector<int64_t>{3, 5}, {2, 1, 3, 5}, {5}, {1, 2, 1, 5}}) {
    Problem p = make_problem({2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 3}, 30);
    set_masks(p, MaskKind::kBool, shape, 31);
    gradcheck(p, "bool mask " + shape_to_string(shape));
  }
}

TEST(Gradcheck, AdditiveMaskAndItsGradientWithBroadcast) {
  for (auto shape : {std::vector<int64_t>{2, 2, 3, 5}, {3, 5}, {2, 1, 1, 5}, {1, 2, 3, 1}}) {
    Problem p = make_problem({2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 3}, 40);
    set_masks(p, MaskKind::kAdditive, shape, 41);
    gradcheck(p, "additive mask " + shape_to_string(shape));
  }
}

TEST(Gradcheck, CausalBothAlignments) {
  for (auto alignment : {CausalAlignment::kTopLeft, CausalAlignment::kBottomRight}) {
    for (auto [lq, lk] : {std::pair<int64_t, int64_t>{4, 4}, {3, 6}, {6, 3}}) {
      Problem p = make_problem({1, 2, lq, 3}, {1, 2, lk, 3}, {1, 2, lk, 2}, 50 + lq);
      p.request.causal = alignment;
      gradcheck(p, std::string(alignment == CausalAlignment::kTopLeft ? "top-left" : "bottom-right") +
                       " Lq=" + std::to_string(lq) + " Lk=" + std::to_string(lk));
    }
  }
}

// Causal offsets (negative: rows that see nothing; beyond Lk), alone and composed with a bool or
// an additive mask (dMask too).
TEST(Gradcheck, CausalOffsetsAndMaskComposition) {
  for (auto [lq, lk] : {std::pair<int64_t, int64_t>{3, 5}, {5, 3}}) {
    for (int64_t offset : {int64_t{-2}, int64_t{1}, lk + 2}) {
      Problem p = make_problem({1, 2, lq, 3}, {1, 2, lk, 3}, {1, 2, lk, 2}, 55 + static_cast<uint32_t>(lq));
      p.request.causal = CausalAlignment::kOffset;
      p.request.causal_offset = offset;
      const std::string what = "offset " + std::to_string(offset) + " Lq=" + std::to_string(lq) + " Lk=" + std::to_string(lk);
      gradcheck(p, what);
      for (auto kind : {MaskKind::kBool, MaskKind::kAdditive}) {
        set_masks(p, kind, {1, 2, lq, lk}, 56, 5);
        gradcheck(p, what + (kind == MaskKind::kBool ? " + bool mask" : " + additive mask"));
      }
    }
  }
}

TEST(Gradcheck, GqaSumsOverTheGroup) {
  Problem p = make_problem({1, 4, 3, 3}, {1, 2, 5, 3}, {1, 2, 5, 2}, 60);
  p.request.enable_gqa = true;
  gradcheck(p, "gqa 4/2");
  Problem mqa = make_problem({1, 3, 3, 3}, {1, 1, 4, 3}, {1, 1, 4, 2}, 61);
  mqa.request.enable_gqa = true;
  gradcheck(mqa, "mqa 3/1");
}

TEST(Gradcheck, FullyMaskedRowsHaveZeroGradients) {
  Problem p = make_problem({4, 3}, {5, 3}, {5, 2}, 70);
  set_masks(p, MaskKind::kAdditive, {4, 1}, 71);
  p.float_mask = {0.0f, -INFINITY, 0.5f, -INFINITY};
  gradcheck(p, "fully masked rows");
  const Grads64 g = backward64(p, random_d_output(p, 3));
  for (int e = 0; e < 3; ++e) {
    EXPECT_EQ(g.dq[1 * 3 + e], 0.0);
    EXPECT_EQ(g.dq[3 * 3 + e], 0.0);
  }
  // Bottom-right causal with Lq > Lk: the first rows see nothing.
  Problem c = make_problem({5, 3}, {2, 3}, {2, 2}, 72);
  c.request.causal = CausalAlignment::kBottomRight;
  gradcheck(c, "causal rows seeing nothing");
}

// ---- kernels vs the float64 analytic gradient -------------------------------------------------

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) {
    if (std::isfinite(v)) m = std::max(m, std::fabs(v));
  }
  return m;
}

class BackwardKernelTest : public ::testing::TestWithParam<Backend> {
 protected:
  void ExpectMatches(const Problem& p, const std::string& what, uint32_t seed = 5) {
    ExpectMatches(p, random_d_output(p, seed), what);
  }
  // max_abs_diff is infinite unless NaN sits exactly where the float64 gradient has NaN.
  void ExpectMatches(const Problem& p, const std::vector<float>& d_output, const std::string& what) {
    const Grads64 g64 = backward64(p, d_output);
    const Grads32 ref32 = backward32(Backend::kScalar, p, d_output, false);
    for (bool pass_forward : {false, true}) {
      const Grads32 g = backward32(GetParam(), p, d_output, pass_forward);
      auto check = [&](const std::vector<float>& got, const std::vector<float>& r32,
                       const std::vector<double>& want, const char* name) {
        const double e_ref = max_abs_diff(r32, want);
        EXPECT_LT(e_ref, INFINITY) << what << " " << name << ": the float32 scalar backward";
        const double bound = 2 * e_ref + 1e-5 * std::max(1.0, max_abs(want));
        EXPECT_LE(max_abs_diff(got, want), bound)
            << what << " " << name << " e_ref=" << e_ref << (pass_forward ? " (lse passed)" : "");
      };
      check(g.dq, ref32.dq, g64.dq, "dQuery");
      check(g.dk, ref32.dk, g64.dk, "dKey");
      check(g.dv, ref32.dv, g64.dv, "dValue");
      if (p.request.mask_kind == MaskKind::kAdditive) check(g.dmask, ref32.dmask, g64.dmask, "dMask");
    }
  }
};

TEST_P(BackwardKernelTest, LengthAndDimSweep) {
  uint32_t seed = 1000;
  for (int64_t lq : {1, 2, 3, 17, 31, 32, 33, 65}) {
    for (int64_t lk : {1, 3, 17, 31, 32, 33, 64, 65, 130}) {
      for (auto [e, ev] : {std::pair<int64_t, int64_t>{1, 8}, {15, 16}, {64, 33}, {8, 1}}) {
        Problem p = make_problem({1, 2, lq, e}, {1, 2, lk, e}, {1, 2, lk, ev}, seed++, 2.0f);
        ExpectMatches(p, "lq=" + std::to_string(lq) + " lk=" + std::to_string(lk) + " e=" +
                             std::to_string(e) + " ev=" + std::to_string(ev));
      }
    }
  }
}

TEST_P(BackwardKernelTest, CausalBothAlignmentsScaleAndGqa) {
  uint32_t seed = 2000;
  for (auto alignment : {CausalAlignment::kTopLeft, CausalAlignment::kBottomRight}) {
    for (auto [lq, lk] : {std::pair<int64_t, int64_t>{70, 130}, {130, 70}, {65, 65}, {1, 100}}) {
      Problem p = make_problem({2, lq, 16}, {2, lk, 16}, {2, lk, 8}, seed++);
      p.request.causal = alignment;
      p.request.has_scale = true;
      p.request.scale = 0.3;
      ExpectMatches(p, "causal lq=" + std::to_string(lq) + " lk=" + std::to_string(lk));
    }
  }
  Problem g = make_problem({2, 6, 40, 32}, {2, 2, 90, 32}, {2, 2, 90, 24}, seed++);
  g.request.enable_gqa = true;
  ExpectMatches(g, "gqa");
}

// Offsets around the tiles (32 queries × 64 keys), negative and beyond Lk, composed with masks:
// tiles past a block's limit are skipped, the others still masked.
TEST_P(BackwardKernelTest, CausalOffsetsStraddlingTilesWithMasks) {
  uint32_t seed = 2500;
  for (auto [lq, lk] : {std::pair<int64_t, int64_t>{70, 130}, {130, 70}}) {
    for (int64_t offset : {-lq - 1, int64_t{-65}, int64_t{-33}, int64_t{-32}, int64_t{-3}, int64_t{0},
                           int64_t{31}, int64_t{63}, int64_t{64}, int64_t{65}, lk - lq, lk + 2}) {
      for (auto kind : {MaskKind::kNone, MaskKind::kBool, MaskKind::kAdditive}) {
        Problem p = make_problem({2, lq, 16}, {2, lk, 16}, {2, lk, 8}, seed++);
        p.request.causal = CausalAlignment::kOffset;
        p.request.causal_offset = offset;
        if (kind != MaskKind::kNone) set_masks(p, kind, {lq, lk}, seed);
        ExpectMatches(p, std::to_string(lq) + "x" + std::to_string(lk) + " offset " + std::to_string(offset) +
                             " mask " + std::to_string(static_cast<int>(kind)));
      }
    }
  }
}

TEST_P(BackwardKernelTest, MaskBroadcastShapes) {
  uint32_t seed = 3000;
  const int64_t B = 2, H = 3, Lq = 33, Lk = 70;
  for (int bits = 0; bits < 16; ++bits) {
    const std::vector<int64_t> shape = {(bits & 8) ? B : 1, (bits & 4) ? H : 1, (bits & 2) ? Lq : 1,
                                        (bits & 1) ? Lk : 1};
    for (auto kind : {MaskKind::kBool, MaskKind::kAdditive}) {
      Problem p = make_problem({B, H, Lq, 8}, {B, H, Lk, 8}, {B, H, Lk, 5}, seed++);
      set_masks(p, kind, shape, seed);
      ExpectMatches(p, "mask bits " + std::to_string(bits));
    }
  }
}

TEST_P(BackwardKernelTest, HiddenGarbageNeverLeaksAndMaskedRowsAreZero) {
  Problem p = make_problem({20, 16}, {100, 16}, {100, 16}, 4000, 3.0f);
  set_masks(p, MaskKind::kBool, {20, 100}, 4001);
  for (int i = 0; i < 20; ++i) p.bool_mask[i * 100 + 7] = 0;  // key 7 is hidden from every row
  for (int j = 0; j < 100; ++j) p.bool_mask[5 * 100 + j] = 0;  // row 5 sees nothing
  p.key[7 * 16] = NAN;
  p.value[7 * 16 + 3] = INFINITY;
  const std::vector<float> d_output = random_d_output(p, 9);
  const Grads32 g = backward32(GetParam(), p, d_output, true);
  for (float x : g.dq) ASSERT_TRUE(std::isfinite(x));
  for (float x : g.dk) ASSERT_TRUE(std::isfinite(x));
  for (float x : g.dv) ASSERT_TRUE(std::isfinite(x));
  for (int e = 0; e < 16; ++e) {
    EXPECT_EQ(g.dq[5 * 16 + e], 0.0f);
    EXPECT_EQ(g.dk[7 * 16 + e], 0.0f);
    EXPECT_EQ(g.dv[7 * 16 + e], 0.0f);
  }
  ExpectMatches(p, "hidden garbage");
}

TEST_P(BackwardKernelTest, LargeLogits) {
  for (float magnitude : {10.0f, 30.0f}) {  // scores up to ~1e2 and ~1e4: peaked softmax rows
    Problem p = make_problem({2, 20, 16}, {2, 70, 16}, {2, 70, 8}, 4050, magnitude);
    ExpectMatches(p, "large logits x" + std::to_string(magnitude));
    const Grads32 g = backward32(GetParam(), p, random_d_output(p, 3), true);
    for (float x : g.dq) ASSERT_TRUE(std::isfinite(x));
    for (float x : g.dk) ASSERT_TRUE(std::isfinite(x));
  }
}

// Rows whose scores are all huge: a float32 log-sum-exp m + log Σ rounds to m there, and P must
// still sum to 1 (kBackwardRenormalizeFrom). Rows masked with −3.4e38 (Hugging Face's padding),
// −1e9 and −1e5 across every key or half of them, alone, under a softcap and causal.
TEST_P(BackwardKernelTest, HugeRowsKeepProbabilitiesSummingToOne) {
  uint32_t seed = 4060;
  const int64_t Lq = 37, Lk = 100;
  for (float cap : {0.0f, 5.0f}) {
    for (auto causal : {CausalAlignment::kNone, CausalAlignment::kBottomRight}) {
      Problem p = make_problem({2, Lq, 16}, {2, Lk, 16}, {2, Lk, 8}, seed++);
      p.request.softcap = cap;
      p.request.causal = causal;
      set_masks(p, MaskKind::kAdditive, {2, Lq, Lk}, seed);
      const auto fill_row = [&](int64_t row, int64_t keys, float value) {
        std::fill_n(p.float_mask.begin() + row * Lk, keys, value);
      };
      fill_row(0, Lk, -3.4e38f);
      fill_row(Lq - 1, Lk, -1e9f);
      fill_row(Lq + 5, Lk / 2, -3.4e38f);
      fill_row(Lq + 20, Lk, -1e5f);
      ExpectMatches(p, "huge rows softcap " + std::to_string(cap) + " causal " + std::to_string(static_cast<int>(causal)));
    }
  }
}

TEST_P(BackwardKernelTest, NaNPropagatesToItsRow) {
  Problem p = make_problem({4, 8}, {9, 8}, {9, 4}, 4100);
  p.query[2 * 8 + 1] = NAN;
  const Grads32 g = backward32(GetParam(), p, random_d_output(p, 2), true);
  EXPECT_TRUE(std::isnan(g.dq[2 * 8]));
  EXPECT_FALSE(std::isnan(g.dq[0]));
}

// A NaN in one query or dOutput row reaches only the keys that row sees (causal: keys 37–52 are
// seen by no row, in a tile with seen keys): NaN exactly where the float64 gradient has NaN.
TEST_P(BackwardKernelTest, NaNInARowReachesOnlyTheKeysItSees) {
  for (auto kind : {MaskKind::kNone, MaskKind::kBool, MaskKind::kAdditive}) {
    for (int64_t row : {3, 33}) {
      Problem p = make_problem({2, 37, 16}, {2, 53, 16}, {2, 53, 8}, 4200);
      p.request.causal = CausalAlignment::kTopLeft;
      if (kind != MaskKind::kNone) set_masks(p, kind, {37, 53}, 4201);
      const std::string what = "mask " + std::to_string(static_cast<int>(kind)) + " row " + std::to_string(row);
      std::vector<float> d_output = random_d_output(p, 4202);
      d_output[(37 + row) * 8 + 5] = NAN;
      ExpectMatches(p, d_output, what + ", NaN in dOutput");
      p.query[row * 16 + 2] = NAN;
      ExpectMatches(p, what + ", NaN in the query");
    }
  }
}

TEST_P(BackwardKernelTest, ZeroSizes) {
  for (auto shapes : {std::vector<std::vector<int64_t>>{{0, 2, 4}, {0, 3, 4}, {0, 3, 5}},
                      {{2, 0, 4}, {2, 3, 4}, {2, 3, 5}},
                      {{2, 3, 4}, {2, 0, 4}, {2, 0, 5}}}) {
    for (bool pass_forward : {false, true}) {
      Problem p = make_problem(shapes[0], shapes[1], shapes[2], 4200);
      const Grads32 g = backward32(GetParam(), p, random_d_output(p, 1), pass_forward);
      for (float x : g.dq) EXPECT_EQ(x, 0.0f);
      for (float x : g.dk) EXPECT_EQ(x, 0.0f);
      for (float x : g.dv) EXPECT_EQ(x, 0.0f);
    }
  }
}

// Ev = 0: the output is empty (its address may be null) while the log-sum-exp is not; a passed
// forward is still used, not recomputed into a workspace sized without room for it (found by the
// fuzz target). Nothing flows back through an empty V: every gradient is 0.
TEST_P(BackwardKernelTest, EmptyValueDim) {
  for (bool pass_forward : {false, true}) {
    Problem p = make_problem({2, 3, 5}, {2, 4, 5}, {2, 4, 0}, 4250);
    const Grads32 g = backward32(GetParam(), p, random_d_output(p, 1), pass_forward);
    for (float x : g.dq) EXPECT_EQ(x, 0.0f);
    for (float x : g.dk) EXPECT_EQ(x, 0.0f);
    EXPECT_TRUE(g.dv.empty());
  }
}

TEST_P(BackwardKernelTest, ForwardLogSumExpMatchesFloat64) {
  for (auto causal : {CausalAlignment::kNone, CausalAlignment::kBottomRight}) {
    Problem p = make_problem({2, 3, 45, 16}, {2, 3, 70, 16}, {2, 3, 70, 8}, 4300, 2.0f);
    p.request.causal = causal;
    if (causal == CausalAlignment::kNone) set_masks(p, MaskKind::kAdditive, {45, 70}, 4301);
    const AttentionPlan plan = plan_or_die(p.request);
    const int64_t rows = plan.B * plan.Hq * plan.Lq;
    std::vector<double> lse64(rows, NAN), out64(plan.output_elements());
    std::vector<double> ws64(reference_workspace_bytes<double>(plan) / sizeof(double) + 1);
    ReferenceOutputs<double> o;
    o.output = out64.data();
    o.lse = lse64.data();
    attention_reference<double>(plan, inputs_of(p), o, ws64.data());
    std::vector<float> out(plan.output_elements()), lse(rows, NAN);
    std::vector<uint8_t> ws(workspace_bytes(GetParam(), plan) + 16);
    run_attention(GetParam(), plan, inputs_of(p), out.data(), nullptr, ws.data(), 1, lse.data());
    for (int64_t r = 0; r < rows; ++r) {
      if (std::isinf(lse64[r])) {
        EXPECT_EQ(lse[r], lse64[r]) << r;
      } else {
        EXPECT_NEAR(lse[r], lse64[r], 1e-5 * std::max(1.0, std::fabs(lse64[r]))) << r;
      }
    }
  }
}

TEST(BackwardValidation, NamesArgumentsAndShapes) {
  const AttentionPlan plan = plan_or_die(make_problem({2, 3, 4}, {2, 5, 4}, {2, 5, 6}, 1).request);
  BackwardRequest r;
  r.d_output_shape = {2, 3, 5};
  Status s = check_backward_request(plan, r);
  EXPECT_EQ(s.kind, ErrorKind::kRange);
  EXPECT_NE(s.message.find("dOutput"), std::string::npos);
  EXPECT_NE(s.message.find("[2, 3, 6]"), std::string::npos);
  r.d_output_shape = {2, 3, 6};
  EXPECT_TRUE(check_backward_request(plan, r).ok());
  r.has_forward = true;
  r.output_shape = {2, 3, 6};
  r.lse_shape = {2, 4};
  s = check_backward_request(plan, r);
  EXPECT_NE(s.message.find("logSumExp"), std::string::npos);
  EXPECT_NE(s.message.find("[2, 3]"), std::string::npos);
  r.lse_shape = {2, 3};
  r.want_d_mask = true;
  s = check_backward_request(plan, r);
  EXPECT_EQ(s.kind, ErrorKind::kType);
  EXPECT_NE(s.message.find("attnMask"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(CpuBackends, BackwardKernelTest,
                         ::testing::Values(Backend::kScalar, Backend::kSimd128),
                         [](const auto& info) {
                           return info.param == Backend::kScalar ? "scalar" : "simd128";
                         });

// Softcap: the float64 backward against central differences, alone, with bool/additive masks
// (dMask is the gradient at the capped score) and a causal offset; logits large enough to
// saturate the smallest cap.
TEST(Gradcheck, Softcap) {
  for (double cap : {0.5, 5.0}) {
    Problem p = make_problem({1, 2, 4, 3}, {1, 2, 5, 3}, {1, 2, 5, 2}, 80, 2.0f);
    p.request.softcap = cap;
    const std::string what = "softcap " + std::to_string(cap);
    gradcheck(p, what);
    for (auto kind : {MaskKind::kBool, MaskKind::kAdditive}) {
      set_masks(p, kind, {1, 2, 4, 5}, 81, 5);
      gradcheck(p, what + (kind == MaskKind::kBool ? " + bool mask" : " + additive mask"));
    }
    p.request.causal = CausalAlignment::kOffset;
    p.request.causal_offset = -1;
    gradcheck(p, what + " + additive mask + causal offset -1");
  }
}

// The SIMD backward with a softcap against the float64 backward, over lengths straddling the
// tiles, with masks and a causal offset.
TEST_P(BackwardKernelTest, SoftcapStraddlingTilesWithMasks) {
  uint32_t seed = 3100;
  for (double cap : {0.5, 5.0, 50.0}) {
    for (auto [lq, lk] : {std::pair<int64_t, int64_t>{70, 130}, {33, 65}}) {
      for (auto kind : {MaskKind::kNone, MaskKind::kBool, MaskKind::kAdditive}) {
        Problem p = make_problem({2, lq, 16}, {2, lk, 16}, {2, lk, 8}, seed++, 3.0f);
        p.request.softcap = cap;
        if (kind != MaskKind::kNone) set_masks(p, kind, {lq, lk}, seed);
        if (seed % 2) {
          p.request.causal = CausalAlignment::kOffset;
          p.request.causal_offset = 31;
        }
        ExpectMatches(p, "softcap " + std::to_string(cap) + " " + std::to_string(lq) + "x" + std::to_string(lk) +
                             " mask " + std::to_string(static_cast<int>(kind)));
      }
    }
  }
}

}  // namespace
}  // namespace sdpa::testing
