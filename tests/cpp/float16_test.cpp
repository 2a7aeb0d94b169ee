// float16 storage (core/float16.h): every half converts exactly to float and back; float → half
// rounds to nearest even (checked against a brute-force nearest half); the SIMD loader equals the
// scalar conversion for every finite half; and float16 inputs through dispatch (widened to
// float32, or read in place by the decode kernel) match the float64 reference of the same values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "attention_test_support.h"
#include "core/float16.h"
#include "cpu/float16_convert_simd128.h"
#include "cpu/simd128.h"
#include "cpu/thread_pool.h"

namespace sdpa::testing {
namespace {

// The value of half `h` from its definition (NaN for every NaN pattern).
double half_value(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
  if (exponent == 31) return mantissa != 0 ? NAN : (sign ? -INFINITY : INFINITY);
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
  return sign ? -magnitude : magnitude;
}

TEST(Float16, EveryHalfConvertsExactlyBothWays) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = float16_to_float32(static_cast<uint16_t>(h));
    const double want = half_value(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
    } else {
      EXPECT_EQ(static_cast<double>(f), want) << std::hex << h;
      EXPECT_EQ(std::signbit(f), std::signbit(want)) << std::hex << h;
    }
    EXPECT_EQ(float32_to_float16(f), h) << std::hex << h;  // NaN payloads and signs included
  }
}

TEST(Float16, FloatsRoundToTheNearestHalfTiesToEven) {
  // The positive halves in order are the integers 0…0x7C00 (Inf): binary search for the last half
  // at or below |x|, then the nearer of it and the next one.
  const auto nearest = [](double a) -> uint16_t {
    if (a >= 65520.0) return 0x7C00;  // 65504 + half its ulp rounds to even: past the largest half
    int lo = 0, hi = 0x7BFF;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (half_value(static_cast<uint16_t>(mid)) <= a) lo = mid; else hi = mid - 1;
    }
    if (lo == 0x7BFF) return 0x7BFF;
    const double below = a - half_value(static_cast<uint16_t>(lo)), above = half_value(static_cast<uint16_t>(lo + 1)) - a;
    return static_cast<uint16_t>(below < above ? lo : above < below ? lo + 1 : (lo & 1 ? lo + 1 : lo));
  };
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) {
    const float x = float_from_bits(static_cast<uint32_t>(u));
    if (std::isnan(x)) continue;
    const uint16_t want = static_cast<uint16_t>(nearest(std::fabs(static_cast<double>(x))) | (std::signbit(x) ? 0x8000 : 0));
    ASSERT_EQ(float32_to_float16(x), want) << std::hex << u;
  }
  EXPECT_EQ(float32_to_float16(65519.996f), 0x7BFF);
  EXPECT_EQ(float32_to_float16(65520.0f), 0x7C00);
  EXPECT_EQ(float32_to_float16(-1e30f), 0xFC00);
  EXPECT_EQ(float32_to_float16(std::ldexp(1.0f, -25)), 0);  // a tie to the even zero
  EXPECT_EQ(float32_to_float16(std::ldexp(1.5f, -25)), 1);
}

// The array conversions of KvCache.append (cpu/float16_convert_simd128) give the scalar rules'
// bits: every half widened, and floats rounded at every exponent with the low 13 bits at and around
// each rounding boundary (ties, just above and below), NaN payloads and Inf included, lengths that
// leave a scalar tail.
TEST(Float16, ArrayConversionsAreTheScalarRulesBitForBit) {
  std::vector<uint16_t> halves(65536);
  for (uint32_t h = 0; h < 65536; ++h) halves[h] = static_cast<uint16_t>(h);
  std::vector<float> widened(halves.size());
  for (int64_t n : {int64_t{65536}, int64_t{65531}}) {
    widen_float16_simd128(halves.data() + (65536 - n), widened.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t h = halves[static_cast<size_t>(65536 - n + i)];
      ASSERT_EQ(float_bits(widened[static_cast<size_t>(i)]), float_bits(float16_to_float32(h))) << std::hex << h;
    }
  }
  std::vector<float> floats;
  for (uint32_t high = 0; high < (1u << 19); ++high) {
    for (uint32_t low : {0x0u, 0x1u, 0x7FFu, 0x800u, 0xFFFu, 0x1000u, 0x1001u, 0x1FFFu}) {
      floats.push_back(float_from_bits(high << 13 | low));
    }
  }
  for (uint64_t u = 7; u < (uint64_t{1} << 32); u += 4099) floats.push_back(float_from_bits(static_cast<uint32_t>(u)));
  std::vector<uint16_t> rounded(floats.size());
  for (size_t chunk = 0; chunk < floats.size(); chunk += 4093) {  // chunks of 4093: each ends in a tail of 5
    const int64_t n = static_cast<int64_t>(std::min<size_t>(4093, floats.size() - chunk));
    const bool any = round_to_float16_simd128(floats.data() + chunk, rounded.data() + chunk, n);
    bool want_any = false;
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t want = float32_to_float16(floats[chunk + static_cast<size_t>(i)]);
      ASSERT_EQ(rounded[chunk + static_cast<size_t>(i)], want) << std::hex << float_bits(floats[chunk + static_cast<size_t>(i)]);
      want_any |= (want & 0x7C00) == 0x7C00;
    }
    ASSERT_EQ(any, want_any) << chunk;
  }
  const float finite[9] = {1.0f, -2.5f, 65504.0f, -65519.0f, 1e-8f, 0.0f, -0.0f, 3.0f, 4.0f};
  uint16_t out[9];
  EXPECT_FALSE(round_to_float16_simd128(finite, out, 9));
  const float overflow[9] = {1.0f, 65520.0f, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_TRUE(round_to_float16_simd128(overflow, out, 9));  // finite, but rounds to Inf
}

TEST(Float16, SimdLoadersGiveEveryFiniteHalfTimes2ToTheMinus112Exactly) {
  std::vector<uint16_t> halves;
  for (uint32_t h = 0; h < 65536; ++h) {
    if ((h & 0x7C00) != 0x7C00) halves.push_back(static_cast<uint16_t>(h));
  }
  for (size_t i = 0; i + 8 <= halves.size(); i += 8) {
    simd::f32x4 v[3], split[2];
    simd::load_half8_scaled(halves.data() + i, v);
    v[2] = simd::load_half4_scaled(halves.data() + i + 4);
    simd::load_half8_scaled_split(halves.data() + i, split);
    for (int lane = 0; lane < 8; ++lane) {
      const float got = simd::lane(v[lane / 4], lane % 4), want = float16_to_float32(halves[i + lane]);
      ASSERT_EQ(float_bits(got * 0x1p112f), float_bits(want)) << std::hex << halves[i + lane];
      ASSERT_EQ(static_cast<double>(got), std::ldexp(static_cast<double>(want), -112)) << std::hex << halves[i + lane];
      if (lane >= 4) {
        ASSERT_EQ(float_bits(simd::lane(v[2], lane - 4)), float_bits(got));
      }
      ASSERT_EQ(float_bits(simd::lane(split[lane % 2], lane / 2)), float_bits(got));  // even lanes, then odd
    }
  }
  EXPECT_TRUE(float16_any_nonfinite(std::vector<uint16_t>{0, 0x7C00}.data(), 2));
  EXPECT_TRUE(float16_any_nonfinite(std::vector<uint16_t>{0xFE01}.data(), 1));
  EXPECT_FALSE(float16_any_nonfinite(std::vector<uint16_t>{0x7BFF, 0xFBFF, 0x8001}.data(), 3));
}

std::vector<uint16_t> to_halves(std::vector<float>& values) {
  std::vector<uint16_t> halves(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    halves[i] = float32_to_float16(values[i]);
    values[i] = float16_to_float32(halves[i]);  // the float32 problem holds the same values
  }
  return halves;
}

// `p` with float16 query, key and value (K/V in a cache of max_length rows per head), run on
// `backend` through dispatch, against the float64 reference of the same values.
void ExpectFloat16MatchesReference(Problem p, Backend backend, int64_t max_length, bool finite, bool in_place,
                                   const std::string& what) {
  std::vector<uint16_t> q16 = to_halves(p.query), k16 = to_halves(p.key), v16 = to_halves(p.value);
  const AttentionPlan plan32 = plan_or_die(p.request);
  const int64_t heads = plan32.B * plan32.Hkv, Lk = plan32.Lk, E = plan32.E, Ev = plan32.Ev;
  std::vector<uint16_t> key_cache(heads * max_length * E, 0x7E00), value_cache(heads * max_length * Ev, 0x7E00);
  for (int64_t h = 0; h < heads; ++h) {
    std::copy_n(k16.begin() + h * Lk * E, Lk * E, key_cache.begin() + h * max_length * E);
    std::copy_n(v16.begin() + h * Lk * Ev, Lk * Ev, value_cache.begin() + h * max_length * Ev);
  }
  AttentionRequest request = p.request;
  request.query_type = request.key_type = request.value_type = ElementType::kFloat16;
  request.key_value_finite = finite;
  request.key_head_stride = max_length * E;
  request.value_head_stride = max_length * Ev;
  const AttentionPlan plan = plan_or_die(request);
  EXPECT_EQ(float16_in_place(backend, plan), in_place) << what;
  AttentionInputs in;
  in.query_f16 = q16.data();
  in.key_f16 = key_cache.data();
  in.value_f16 = value_cache.data();
  in.mask = p.mask();
  for (int threads : {1, 3}) {
    const Result r = run_with_canaries(backend, plan, in, threads);
    const Result64 r64 = run_reference64(p);
    const double e_ref = std::max(max_abs_diff(run_backend(Backend::kScalar, p).output, r64.output),
                                  max_abs_diff(run_reference32(p, DotRounding::kFused).output, r64.output));
    EXPECT_LE(max_abs_diff(r.output, r64.output), tolerance(p, e_ref)) << what << " threads=" << threads;
  }
}

Problem gqa_problem(int64_t Lq, int64_t Lk, int64_t E, uint32_t seed) {
  Problem p = make_problem({2, 8, Lq, E}, {2, 2, Lk, E}, {2, 2, Lk, E}, seed, 2.0f);
  p.request.enable_gqa = true;
  return p;
}

TEST(Float16, DecodeReadsAFiniteFloat16CacheInPlace) {
  set_max_threads(4);
  for (int64_t Lk : {64, 65, 300, 1000}) {
    for (int64_t E : {7, 16, 64}) {
      ExpectFloat16MatchesReference(gqa_problem(1, Lk, E, 5 + static_cast<uint32_t>(Lk + E)), Backend::kSimd128, Lk + 37,
                                    true, true, "decode in place Lk=" + std::to_string(Lk) + " E=" + std::to_string(E));
    }
  }
  // 5 rows per KV head (a block of 4 and one), value dims with a block of 8 and a scalar tail.
  for (int64_t Ev : {12, 24, 29}) {
    Problem rows5 = make_problem({1, 5, 1, 20}, {1, 1, 333, 20}, {1, 1, 333, Ev}, 70 + static_cast<uint32_t>(Ev), 2.0f);
    rows5.request.enable_gqa = true;
    ExpectFloat16MatchesReference(rows5, Backend::kSimd128, 340, true, true, "5 rows, Ev=" + std::to_string(Ev));
  }
  Problem causal = gqa_problem(2, 200, 32, 9);
  causal.request.causal = CausalAlignment::kBottomRight;
  ExpectFloat16MatchesReference(causal, Backend::kSimd128, 256, true, true, "decode in place, causal");
}

TEST(Float16, WidenedWhenNotKnownFiniteOrNotDecodeShaped) {
  set_max_threads(4);
  ExpectFloat16MatchesReference(gqa_problem(1, 300, 16, 41), Backend::kSimd128, 300, false, false, "decode, widened");
  ExpectFloat16MatchesReference(gqa_problem(40, 300, 16, 42), Backend::kSimd128, 310, true, false, "tile kernel");
  ExpectFloat16MatchesReference(gqa_problem(3, 70, 8, 43), Backend::kScalar, 80, true, false, "scalar");
}

}  // namespace
}  // namespace sdpa::testing
