// Every CPU backend against the float64 reference, with the tolerance rule of
// attention_test_support.h. The SIMD kernel runs here through its native f32x4 build.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "attention_test_support.h"
#include "cpu/attention_f32_simd128.h"
#include "cpu/simd128.h"
#include "cpu/thread_pool.h"

namespace sdpa::testing {
namespace {

class KernelTest : public ::testing::TestWithParam<Backend> {
 protected:
  void ExpectMatchesReference(const Problem& p, const char* what, int threads = 1) {
    const Result64 r64 = run_reference64(p);
    const Result r32 = run_backend(Backend::kScalar, p);
    const Result r = run_backend(GetParam(), p, threads);
    const double e_ref = max_abs_diff(r32.output, r64.output);
    const double err = max_abs_diff(r.output, r64.output);
    EXPECT_LE(err, tolerance(p, e_ref)) << what << " e_ref=" << e_ref;
    if (p.request.return_weights) {
      const double we_ref = max_abs_diff(r32.weights, r64.weights);
      EXPECT_LE(max_abs_diff(r.weights, r64.weights), 2 * we_ref + 1e-6) << what << " (weights)";
    }
  }
};

// A random [Lq, Lk] mask of `kind` on p: about a quarter of the keys hidden, the others (for an
// additive mask) shifted by an integer in [-3, 3].
void add_random_mask(Problem& p, MaskKind kind, int64_t lq, int64_t lk, uint32_t seed) {
  p.request.mask_kind = kind;
  p.request.mask_shape = {lq, lk};
  std::mt19937 rng(seed);
  for (int64_t x = 0; x < lq * lk; ++x) {
    const bool visible = rng() % 4 != 0;
    p.bool_mask.push_back(visible);
    p.float_mask.push_back(visible ? static_cast<float>(rng() % 7) - 3.0f : -INFINITY);
  }
}

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

// Causal offsets around the SIMD tiles (32 queries × 64 keys): negative (whole query blocks and
// key tiles hidden, rows that see nothing), at tile edges, beyond Lk; alone and composed with a
// bool or additive mask (tiles skipped by causality, the rest still masked); 1 and 3 threads.
TEST_P(KernelTest, CausalOffsetsStraddlingTilesWithMasks) {
  set_max_threads(4);
  uint32_t seed = 250;
  for (auto [lq, lk] : {std::pair<int64_t, int64_t>{70, 130}, {130, 70}, {33, 200}}) {
    for (int64_t offset : {-lq - 1, int64_t{-65}, int64_t{-33}, int64_t{-32}, int64_t{-31}, int64_t{-3},
                           int64_t{0}, int64_t{5}, int64_t{31}, int64_t{63}, int64_t{64}, int64_t{65},
                           lk - lq, lk + 2}) {
      for (auto kind : {MaskKind::kNone, MaskKind::kBool, MaskKind::kAdditive}) {
        Problem p = make_problem({2, lq, 16}, {2, lk, 16}, {2, lk, 8}, seed++);
        p.request.causal = CausalAlignment::kOffset;
        p.request.causal_offset = offset;
        p.request.return_weights = seed % 2 == 0;
        if (kind != MaskKind::kNone) add_random_mask(p, kind, lq, lk, seed);
        const std::string what = std::to_string(lq) + "x" + std::to_string(lk) + " offset " +
                                 std::to_string(offset) + " mask " + std::to_string(static_cast<int>(kind));
        for (int threads : {1, 3}) ExpectMatchesReference(p, (what + " threads " + std::to_string(threads)).c_str(), threads);
      }
    }
  }
}

// Keys past every row's causal limit are never read (their tiles are skipped, or masked at the
// edge): NaN stored there changes nothing, for offsets that hide tiles, whole rows and none.
TEST_P(KernelTest, CausalOffsetNeverReadsKeysPastTheLimit) {
  uint32_t seed = 280;
  for (int64_t offset : {int64_t{-40}, int64_t{-5}, int64_t{0}, int64_t{70}, int64_t{100}}) {
    Problem p = make_problem({40, 16}, {300, 16}, {300, 8}, seed++);
    p.request.causal = CausalAlignment::kOffset;
    p.request.causal_offset = offset;
    p.request.return_weights = true;
    const Result clean = run_backend(GetParam(), p);
    for (int64_t j = std::max<int64_t>(0, 40 + offset); j < 300; ++j) {
      p.key[j * 16 + 1] = NAN;
      p.value[j * 8 + 2] = NAN;
    }
    const Result dirty = run_backend(GetParam(), p);
    EXPECT_EQ(0, std::memcmp(clean.output.data(), dirty.output.data(), clean.output.size() * sizeof(float))) << offset;
    EXPECT_EQ(0, std::memcmp(clean.weights.data(), dirty.weights.data(), clean.weights.size() * sizeof(float))) << offset;
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

// Softcap {0.5, 5, 50} against the float64 reference over lengths straddling the tiles
// (32 queries × 64 keys), alone, with bool/additive masks and causal offsets, logits up to 1e4
// (query and key values up to 25 with scale 1), weights too; 1 and 3 threads.
TEST_P(KernelTest, SoftcapStraddlingTilesWithMasksAndCausal) {
  set_max_threads(4);
  uint32_t seed = 900;
  for (double cap : {0.5, 5.0, 50.0}) {
    for (auto [lq, lk] : {std::pair<int64_t, int64_t>{70, 130}, {33, 65}}) {
      for (int variant = 0; variant < 4; ++variant) {
        const bool big = variant == 3;
        Problem p = make_problem({2, lq, 16}, {2, lk, 16}, {2, lk, 8}, seed++, big ? 25.0f : 2.0f);
        p.request.softcap = cap;
        p.request.return_weights = seed % 2 == 0;
        if (big) p.request.has_scale = true, p.request.scale = 1.0;
        if (variant == 1 || variant == 2) add_random_mask(p, variant == 1 ? MaskKind::kBool : MaskKind::kAdditive, lq, lk, seed);
        if (variant >= 2) {
          p.request.causal = CausalAlignment::kOffset;
          p.request.causal_offset = variant == 2 ? -3 : 31;
        }
        const std::string what = "softcap " + std::to_string(cap) + " " + std::to_string(lq) + "x" +
                                 std::to_string(lk) + " variant " + std::to_string(variant);
        for (int threads : {1, 3}) ExpectMatchesReference(p, (what + " threads " + std::to_string(threads)).c_str(), threads);
      }
    }
  }
}

// The vectorized tanh of the SIMD kernels against std::tanh: within 4 float32 ulps over
// [−20, 20] and at tiny, huge and special arguments; ±0 keep their sign, NaN stays NaN.
TEST(SimdTanh, WithinFewUlpsOfStdTanh) {
  const simd::TanhConstants k = simd::TanhConstants::load();
  std::vector<float> xs = {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-38f, 1e-20f, 1e-4f, 0.6249999f, 0.625f, 0.6250001f,
                           8.9f, 9.1f, 30.0f, 88.0f, 1e10f, 3.4e38f, INFINITY, -INFINITY};
  for (float x = -20.0f; x <= 20.0f; x += 0.0013f) xs.push_back(x);
  for (float x = 1e-6f; x < 1.0f; x *= 1.07f) xs.push_back(-x), xs.push_back(x);
  int worst = 0;
  for (size_t at = 0; at < xs.size(); at += 4) {
    float in[4], out[4];
    for (int l = 0; l < 4; ++l) in[l] = xs[std::min(at + l, xs.size() - 1)];
    simd::store(out, simd::tanh(simd::load(in), k));
    for (int l = 0; l < 4; ++l) {
      const float want = static_cast<float>(std::tanh(static_cast<double>(in[l])));
      int32_t a, b;
      std::memcpy(&a, &out[l], 4);
      std::memcpy(&b, &want, 4);
      const int ulps = std::abs(a - b);
      worst = std::max(worst, ulps);
      EXPECT_LE(ulps, 4) << "tanh(" << in[l] << ") = " << out[l] << ", want " << want;
    }
  }
  std::printf("simd tanh: worst %d ulps over %zu arguments\n", worst, xs.size());
  float in[4] = {NAN, -NAN, 0.0f, -0.0f}, out[4];
  simd::store(out, simd::tanh(simd::load(in), k));
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_FALSE(std::signbit(out[2]));
  EXPECT_TRUE(std::signbit(out[3]));
}

// The trace hook (traceOnlineSoftmax) records one row's (m, l, O) after each key tile, writes
// nothing past its buffers and ends at its output: O/l. That output is a plain call's, bit for
// bit, where a plain call runs the same tile kernel (32 query rows); with 8 rows a plain call
// runs the decode kernel, and the trace still runs (and fits the workspace of) the tile kernel.
TEST(SoftmaxTraceTest, RecordsEachTileAndEndsAtTheOutputRow) {
  for (int64_t rows : {8, 32}) {
    for (uint32_t seed : {1u, 2u}) {
      for (int64_t keys : {64, 128, 320}) {
        Problem problem = make_problem({rows, 16}, {keys, 16}, {keys, 4}, seed);
        std::mt19937 rng(seed);
        std::normal_distribution<float> normal;
        for (auto* v : {&problem.query, &problem.key, &problem.value}) for (float& x : *v) x = normal(rng);
        const AttentionPlan plan = plan_or_die(problem.request);
        const bool same_kernel = !uses_decode_kernel(plan);
        EXPECT_EQ(same_kernel, rows == 32 || keys < kDecodeMinKeys);
        const Result plain = run_backend(Backend::kSimd128, problem);
        const int64_t tiles = (keys + kSimd128TileKeys - 1) / kSimd128TileKeys;
        for (int64_t row = 0; row < rows; row += 7) {
          std::vector<float> output = with_canaries(plan.output_elements());
          std::vector<float> steps = with_canaries(tiles * (3 + 4));
          std::vector<float> workspace = with_canaries((trace_workspace_bytes(plan) + 3) / 4);
          std::vector<uint8_t> visited(tiles + 64, 0);
          SoftmaxTrace trace{0, 0, row, steps.data() + kCanaryFloats, 0, visited.data()};
          trace_online_softmax(plan, problem.inputs(), output.data() + kCanaryFloats, workspace.data() + kCanaryFloats, &trace);
          check_canaries(output, "output");
          check_canaries(steps, "trace steps");
          check_canaries(workspace, "workspace");
          for (int64_t t = 0; t < tiles; ++t) EXPECT_EQ(visited[t], 1);
          for (size_t t = tiles; t < visited.size(); ++t) ASSERT_EQ(visited[t], 0) << "visited map written past its end";
          ASSERT_EQ(trace.steps_written, tiles) << "rows " << rows << ", keys " << keys << ", row " << row;
          const std::vector<float> out = strip_canaries(output);
          for (size_t i = 0; i < out.size(); ++i) {
            if (same_kernel) ASSERT_EQ(out[i], plain.output[i]) << i;
            else ASSERT_NEAR(out[i], plain.output[i], 1e-6f) << i;
          }
          const float* last = steps.data() + kCanaryFloats + (tiles - 1) * 7;
          EXPECT_EQ(last[0], static_cast<float>((tiles - 1) * kSimd128TileKeys));
          for (int c = 0; c < 4; ++c) EXPECT_NEAR(last[3 + c] / last[2], out[row * 4 + c], 1e-6f * std::max(1.0f, std::fabs(out[row * 4 + c])));
        }
      }
    }
  }
}

}  // namespace
}  // namespace sdpa::testing
