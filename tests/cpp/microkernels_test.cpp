// The SIMD kernels' building blocks on their own (cpu/microkernels.h, cpu/simd128.h,
// core/round_up.h), each against a plain double-precision loop: at tile − 1, tile and tile + 1 of
// each block's tile, with Inf/NaN lanes, −0.0 (a hidden key's weight) and subnormals.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/float16.h"
#include "core/round_up.h"
#include "cpu/microkernels.h"
#include "cpu/simd128.h"

namespace sdpa::testing {
namespace {

using namespace simd;

constexpr double kUnitRoundoff = 0x1p-24;  // float32
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// `got` against the double-precision `want`: the same NaN/±Inf where `want` is not finite, else
// within `bound`.
void ExpectClose(float got, double want, double bound, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": got " << got << ", want NaN";
  } else if (std::isinf(want)) {
    EXPECT_EQ(static_cast<double>(got), want) << what;
  } else {
    EXPECT_LE(std::fabs(static_cast<double>(got) - want), bound) << what << ": got " << got << ", want " << want;
  }
}

std::vector<float> random_floats(size_t n, uint32_t seed, float low = -1.0f, float high = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(low, high);
  std::vector<float> x(n);
  for (float& v : x) v = u(rng);
  return x;
}

bool is_negative_zero(float x) { return x == 0.0f && std::signbit(x); }

// ---- round_up, kNegativeZeroBits, all_finite -----------------------------------------------------

TEST(Microkernels, RoundUp) {
  for (int64_t multiple : {1, 2, 4, 16, 64}) {
    for (int64_t x : {int64_t{0}, multiple - 1, multiple, multiple + 1, 3 * multiple + 1}) {
      const int64_t r = round_up(x, multiple);
      EXPECT_EQ(r % multiple, 0) << x << " " << multiple;
      EXPECT_GE(r, x);
      EXPECT_LT(r - x, multiple);
    }
  }
  EXPECT_EQ(round_up(uint64_t{17}, 16), uint64_t{32});
  EXPECT_EQ(round_up(std::ptrdiff_t{5}, 4), std::ptrdiff_t{8});
}

TEST(Microkernels, NegativeZeroBits) {
  const float negative_zero = -0.0f;
  int32_t bits;
  std::memcpy(&bits, &negative_zero, sizeof bits);
  EXPECT_EQ(bits, kNegativeZeroBits);
  EXPECT_TRUE(is_negative_zero(lane(from_bits(kNegativeZeroBits), 2)));
}

// Vectors of 4 and a scalar tail: n at 4 − 1, 4, 4 + 1 and 8 ± 1; one Inf, −Inf or NaN in any lane.
TEST(Microkernels, AllFinite) {
  for (std::ptrdiff_t n : {0, 1, 3, 4, 5, 7, 8, 9}) {
    std::vector<float> x = random_floats(static_cast<size_t>(n), 11);
    const float finite_specials[] = {-0.0f, 0.0f, FLT_TRUE_MIN, -FLT_MIN / 2, FLT_MAX, -FLT_MAX};
    for (std::ptrdiff_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = finite_specials[i % 6];
    EXPECT_TRUE(all_finite(x.data(), n)) << "n=" << n;
    for (std::ptrdiff_t i = 0; i < n; ++i) {
      for (float bad : {kInf, -kInf, kNaN}) {
        std::vector<float> y = x;
        y[static_cast<size_t>(i)] = bad;
        EXPECT_FALSE(all_finite(y.data(), n)) << "n=" << n << " at " << i << ": " << bad;
      }
    }
  }
}

// ---- dot_2x16 ------------------------------------------------------------------------------------

// Two rows against 16 columns of an [E, kStride] tile, E at 16 − 1, 16, 16 + 1 and 64 ± 1 (kE = 0)
// and at the compile-time E = 64; Inf and NaN in a row or a column.
template <int kStride, int kE>
void CheckDot2x16(std::ptrdiff_t E, uint32_t seed) {
  for (int special = 0; special < 4; ++special) {
    std::vector<float> x0 = random_floats(static_cast<size_t>(E), seed), x1 = random_floats(static_cast<size_t>(E), seed + 1);
    std::vector<float> tile = random_floats(static_cast<size_t>(E * kStride), seed + 2);
    if (special == 1) x0[static_cast<size_t>(E / 2)] = kInf;                 // row 0: ±Inf, NaN where ·0
    if (special == 2) tile[static_cast<size_t>((E - 1) * kStride + 5)] = kNaN;  // column 5: NaN in both rows
    if (special == 3) {
      tile[5] = 0.0f;  // Inf·0 = NaN in column 5 of row 1, Inf in column 6
      x1[0] = -kInf;
    }
    f32x4 a[2 * kTileVectors];
    dot_2x16<kStride, kE>(x0.data(), x1.data(), tile.data(), E, splat(-kInf), a);
    for (int r = 0; r < 2; ++r) {
      const std::vector<float>& x = r == 0 ? x0 : x1;
      for (int col = 0; col < 16; ++col) {
        double want = 0, magnitude = 0;
        for (std::ptrdiff_t e = 0; e < E; ++e) {
          const double term = static_cast<double>(x[static_cast<size_t>(e)]) * tile[static_cast<size_t>(e * kStride + col)];
          want += term;
          magnitude += std::fabs(term);
        }
        ExpectClose(lane(a[r * kTileVectors + col / 4], col % 4), want, (E + 1) * kUnitRoundoff * magnitude,
                    "E=" + std::to_string(E) + " row " + std::to_string(r) + " col " + std::to_string(col) +
                        " case " + std::to_string(special));
      }
    }
  }
}

TEST(Microkernels, Dot2x16) {
  for (std::ptrdiff_t E : {1, 15, 16, 17, 63, 64, 65}) {
    CheckDot2x16<64, 0>(E, static_cast<uint32_t>(E));
    CheckDot2x16<32, 0>(E, static_cast<uint32_t>(100 + E));
  }
  CheckDot2x16<64, 64>(64, 200);
}

// ---- dot_rows_2keys ------------------------------------------------------------------------------

// kRows rows against 2 keys read in place (float32, or float16 scaled by 2^-112); E_main is a
// whole number of loads (kWidth), so the tile is one load: E_main at kWidth, 2·kWidth, 16·kWidth.
template <int kRows, typename T>
void CheckDotRows2Keys(uint32_t seed) {
  using Load = ValueLoad<T>;
  for (std::ptrdiff_t E : {Load::kWidth, 2 * Load::kWidth, 16 * Load::kWidth}) {
    std::vector<std::vector<float>> q(kRows);
    const float* rows[kRows];
    for (int r = 0; r < kRows; ++r) {
      q[static_cast<size_t>(r)] = random_floats(static_cast<size_t>(E), seed + static_cast<uint32_t>(r));
      rows[r] = q[static_cast<size_t>(r)].data();
    }
    const std::vector<float> keys = random_floats(static_cast<size_t>(2 * E), seed + 50);
    std::vector<T> k(keys.size());
    std::vector<double> exact(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      if constexpr (sizeof(T) == 2) {
        k[i] = float32_to_float16(keys[i]);
      } else {
        k[i] = keys[i];
      }
      exact[i] = Load::exact(k[i]);
    }
    if constexpr (sizeof(T) == 4) k[static_cast<size_t>(E + 1)] = kNaN;  // key 1: NaN for every row
    f32x4 a[2 * kRows];
    dot_rows_2keys<kRows>(rows, k.data(), k.data() + E, E, splat(-kInf), a);
    for (int r = 0; r < kRows; ++r) {
      for (int key = 0; key < 2; ++key) {
        double want = 0, magnitude = 0;
        for (std::ptrdiff_t e = 0; e < E; ++e) {
          const double kv = sizeof(T) == 4 ? static_cast<double>(k[static_cast<size_t>(key * E + e)])
                                           : exact[static_cast<size_t>(key * E + e)];
          want += rows[r][e] * kv;
          magnitude += std::fabs(rows[r][e] * kv);
        }
        const double got = static_cast<double>(horizontal_sum(a[2 * r + key])) * Load::kUnscale;
        ExpectClose(static_cast<float>(got), want, (E + 2) * kUnitRoundoff * magnitude,
                    "E=" + std::to_string(E) + " row " + std::to_string(r) + " key " + std::to_string(key));
      }
    }
  }
}

TEST(Microkernels, DotRows2Keys) {
  CheckDotRows2Keys<1, float>(300);
  CheckDotRows2Keys<2, float>(310);
  CheckDotRows2Keys<4, float>(320);
  CheckDotRows2Keys<1, uint16_t>(330);
  CheckDotRows2Keys<4, uint16_t>(340);
}

// horizontal_sums against horizontal_sum register by register, bit for bit (NaN payloads aside):
// counts below, at and past a group of 4, lanes of ±Inf, NaN, −0.0, subnormals and sums that
// overflow or cancel.
template <int n>
void CheckHorizontalSums(uint32_t seed) {
  std::mt19937 rng(seed);
  const float specials[] = {kInf, -kInf, kNaN, -0.0f, 0.0f, FLT_MAX, -FLT_MAX, FLT_TRUE_MIN, 1e-40f, 1.0f, -1.0f};
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  std::uniform_int_distribution<int> pick(0, 3 * static_cast<int>(std::size(specials)) - 1);
  for (int trial = 0; trial < 200; ++trial) {
    alignas(16) float lanes[4 * n];
    for (float& x : lanes) {
      const int k = pick(rng);
      x = k < static_cast<int>(std::size(specials)) ? specials[k] : uniform(rng);
    }
    f32x4 v[n];
    for (int i = 0; i < n; ++i) v[i] = load(lanes + 4 * i);
    float sums[n];
    horizontal_sums<n>(v, sums);
    for (int i = 0; i < n; ++i) {
      const float want = horizontal_sum(v[i]);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(sums[i])) << "n=" << n << " register " << i;
      } else {
        uint32_t got_bits, want_bits;
        std::memcpy(&got_bits, &sums[i], 4);
        std::memcpy(&want_bits, &want, 4);
        EXPECT_EQ(got_bits, want_bits) << "n=" << n << " register " << i << ": " << sums[i] << " vs " << want;
      }
    }
  }
}

TEST(Microkernels, HorizontalSums) {
  CheckHorizontalSums<1>(400);
  CheckHorizontalSums<3>(401);
  CheckHorizontalSums<4>(402);
  CheckHorizontalSums<6>(403);
  CheckHorizontalSums<8>(404);
  CheckHorizontalSums<9>(405);
}

// ---- pv_block, pv_columns ------------------------------------------------------------------------

// How a P·V test fills its inputs.
enum class Values {
  kFinite,              // random V, some subnormal; a quarter of the weights −0.0 (hidden)
  kNonfiniteAtHidden,   // and NaN/±Inf in the V rows of keys hidden from every row
  kNonfiniteAtVisible,  // and a NaN and an Inf lane in the V row of a visible key
};

// o_r[0, columns) += Σ_{j<n} p_r[j·kPStride]·v[j·v_stride + (0, columns)] through `run` (pv_block
// or pv_columns) against the double-precision sum: with kDropHidden, keys of weight −0.0 left out.
template <int kRows, bool kDropHidden, int kPStride, typename T, typename Run>
void CheckPv(std::ptrdiff_t n, std::ptrdiff_t columns, Values values, uint32_t seed, Run&& run) {
  using Load = ValueLoad<T>;
  const std::ptrdiff_t v_stride = columns + 4;  // rows apart by more than the columns read
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<std::vector<float>> p(kRows, std::vector<float>(static_cast<size_t>((n + 1) * kPStride)));
  std::vector<bool> hidden_from_all(static_cast<size_t>(n), true);
  for (int r = 0; r < kRows; ++r) {
    for (std::ptrdiff_t j = 0; j < n; ++j) {
      const bool hidden = j % 4 == r % 4 || (j % 7 == 3);
      p[static_cast<size_t>(r)][static_cast<size_t>(j * kPStride)] = hidden ? -0.0f : u(rng);
      if (!hidden) hidden_from_all[static_cast<size_t>(j)] = false;
    }
  }
  std::vector<float> v_values = random_floats(static_cast<size_t>(n * v_stride), seed + 1, -2.0f, 2.0f);
  for (size_t i = 0; i < v_values.size(); i += 5) v_values[i] *= FLT_MIN;  // subnormals
  if (values == Values::kNonfiniteAtHidden) {
    for (std::ptrdiff_t j = 0; j < n; ++j) {
      if (!hidden_from_all[static_cast<size_t>(j)]) continue;
      for (std::ptrdiff_t c = 0; c < columns; ++c) v_values[static_cast<size_t>(j * v_stride + c)] = c % 3 == 0 ? kNaN : (c % 3 == 1 ? kInf : -kInf);
    }
  }
  if (values == Values::kNonfiniteAtVisible && n > 1) {
    const std::ptrdiff_t j = 1;  // visible to row 0 (see the weights above)
    v_values[static_cast<size_t>(j * v_stride)] = kNaN;
    v_values[static_cast<size_t>(j * v_stride + columns - 1)] = kInf;
  }
  std::vector<T> v(v_values.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (sizeof(T) == 2) {
      v[i] = float32_to_float16(v_values[i] * 1e3f);
    } else {
      v[i] = v_values[i];
    }
  }
  std::vector<std::vector<float>> o(kRows);
  const float* p_rows[kRows];
  float* o_rows[kRows];
  for (int r = 0; r < kRows; ++r) {
    o[static_cast<size_t>(r)] = random_floats(static_cast<size_t>(columns), seed + 10 + static_cast<uint32_t>(r));
    if constexpr (sizeof(T) == 2) {
      for (float& x : o[static_cast<size_t>(r)]) x *= kHalfScaled;
    }
    p_rows[r] = p[static_cast<size_t>(r)].data();
  }
  const std::vector<std::vector<float>> before = o;
  for (int r = 0; r < kRows; ++r) o_rows[r] = o[static_cast<size_t>(r)].data();
  run(p_rows, v.data(), v_stride, n, o_rows);

  for (int r = 0; r < kRows; ++r) {
    for (std::ptrdiff_t c = 0; c < columns; ++c) {
      double want = static_cast<double>(before[static_cast<size_t>(r)][static_cast<size_t>(c)]) * Load::kUnscale;
      double magnitude = std::fabs(want);
      for (std::ptrdiff_t j = 0; j < n; ++j) {
        const float w = p[static_cast<size_t>(r)][static_cast<size_t>(j * kPStride)];
        if (kDropHidden && is_negative_zero(w)) continue;
        const double term = static_cast<double>(w) * Load::exact(v[static_cast<size_t>(j * v_stride + c)]);
        want += term;
        magnitude += std::fabs(term);
      }
      // The float sums' rounding, and a float16 product's rounding where it is subnormal after
      // the 2^-112 scaling.
      const double bound = (n + 2) * kUnitRoundoff * magnitude + (n + 1) * 0x1p-149 * Load::kUnscale;
      const double got = static_cast<double>(o[static_cast<size_t>(r)][static_cast<size_t>(c)]) * Load::kUnscale;
      ExpectClose(static_cast<float>(got), want, bound,
                  "n=" + std::to_string(n) + " columns=" + std::to_string(columns) + " row " + std::to_string(r) +
                      " col " + std::to_string(c) + " values " + std::to_string(static_cast<int>(values)));
    }
  }
}

// pv_block<kRows, NV, ...> at n = tile − 1, tile, tile + 1 keys, for every kind of values.
template <int kRows, int NV, bool kDropHidden, int kChains, int kPStride, typename T = float>
void CheckPvBlock(std::ptrdiff_t tile, uint32_t seed) {
  for (std::ptrdiff_t n : {tile - 1, tile, tile + 1}) {
    for (Values values : {Values::kFinite, Values::kNonfiniteAtHidden, Values::kNonfiniteAtVisible}) {
      if (sizeof(T) == 2 && values != Values::kFinite) continue;  // float16 K/V are finite (ValueLoad)
      CheckPv<kRows, kDropHidden, kPStride, T>(n, 4 * NV, values, seed++, [](const float* const* p, const T* v, std::ptrdiff_t s, std::ptrdiff_t keys, float* const* o) {
        pv_block<kRows, NV, kDropHidden, kChains, kPStride, 0>(p, v, s, keys, o);
      });
    }
  }
}

// The forward kernel's shapes: 2 rows, 1 to 4 vectors, a tile of 64 keys, also at its compile-time
// count.
TEST(Microkernels, PvBlockForward) {
  CheckPvBlock<2, 4, false, 1, 1>(64, 400);
  CheckPvBlock<2, 4, true, 1, 1>(64, 410);
  CheckPvBlock<2, 1, true, 1, 1>(64, 420);
  CheckPvBlock<2, 3, false, 1, 1>(64, 430);
  for (Values values : {Values::kFinite, Values::kNonfiniteAtHidden}) {
    CheckPv<2, true, 1, float>(64, 16, values, 440, [](const float* const* p, const float* v, std::ptrdiff_t s, std::ptrdiff_t n, float* const* o) {
      pv_block<2, 4, true, 1, 1, 64>(p, v, s, n, o);
    });
  }
}

// The decode kernel's shapes: 1, 2 or 4 rows of a KV-head group, float32 or float16 values, a
// chunk of 64 keys.
TEST(Microkernels, PvBlockDecode) {
  CheckPvBlock<4, 2, false, 1, 1>(64, 500);
  CheckPvBlock<4, 2, true, 1, 1>(64, 510);
  CheckPvBlock<1, 4, true, 1, 1>(64, 520);
  CheckPvBlock<2, 4, false, 1, 1, uint16_t>(64, 530);
  CheckPvBlock<4, 2, true, 1, 1, uint16_t>(64, 540);
}

// The backward's shapes: one row, two accumulator sets (odd and even key counts), weights a
// transposed tile's column apart (32) or adjacent; a tile of 32 keys.
TEST(Microkernels, PvBlockBackward) {
  CheckPvBlock<1, 4, false, 2, 32>(32, 600);
  CheckPvBlock<1, 4, true, 2, 1>(32, 610);
  CheckPvBlock<1, 2, true, 2, 1>(2, 620);
  CheckPvBlock<1, 3, false, 2, 32>(2, 630);
}

// pv_columns: the columns at a block's width − one load, the width, and the width + one load.
TEST(Microkernels, PvColumns) {
  for (std::ptrdiff_t columns : {12, 16, 20, 36}) {
    CheckPv<2, true, 1, float>(65, columns, Values::kNonfiniteAtHidden, 700, [&](const float* const* p, const float* v, std::ptrdiff_t s, std::ptrdiff_t n, float* const* o) {
      pv_columns<2, 4, true>(p, v, s, n, columns, o);
    });
    CheckPv<1, false, 32, float>(33, columns, Values::kFinite, 710, [&](const float* const* p, const float* v, std::ptrdiff_t s, std::ptrdiff_t n, float* const* o) {
      pv_columns<1, 4, false, 2, 32>(p, v, s, n, columns, o);
    });
  }
  for (std::ptrdiff_t columns : {4, 8, 12}) {
    CheckPv<4, true, 1, float>(63, columns, Values::kNonfiniteAtVisible, 720, [&](const float* const* p, const float* v, std::ptrdiff_t s, std::ptrdiff_t n, float* const* o) {
      pv_columns<4, 2, true>(p, v, s, n, columns, o);
    });
  }
  for (std::ptrdiff_t columns : {8, 16, 24}) {
    CheckPv<2, false, 1, uint16_t>(64, columns, Values::kFinite, 730, [&](const float* const* p, const uint16_t* v, std::ptrdiff_t s, std::ptrdiff_t n, float* const* o) {
      pv_columns<2, 4, false>(p, v, s, n, columns, o);
    });
  }
}

// ---- exp_nonpositive -----------------------------------------------------------------------------

// e^x for x in every lane against std::exp in double: within the documented relative error,
// 2.1e-7 for the polynomial in float32 plus |y|·6e-8 for the rounding of y = x·log2(e), from 0
// down to where 2^n is still a normal (x >= -87.6); exactly 0 below about -87.7 and at -inf,
// exactly 1 at ±0, NaN for NaN.
TEST(Microkernels, ExpNonpositive) {
  const ExpConstants k = ExpConstants::load();
  const auto exp4 = [&](float x0, float x1, float x2, float x3, bool clamped) {
    alignas(16) float in[4] = {x0, x1, x2, x3}, out[4];
    const f32x4 x = load(in);
    store(out, clamped ? exp_nonpositive(x, k) : exp_nonpositive_unclamped(x, k));
    return std::vector<float>(out, out + 4);
  };
  double worst = 0;
  std::mt19937 rng(800);
  std::uniform_real_distribution<float> near_zero(-2.0f, 0.0f), wide(-87.6f, 0.0f);
  for (int i = 0; i < 50000; ++i) {
    const float xs[4] = {near_zero(rng), wide(rng), -static_cast<float>(i) * (87.6f / 50000), wide(rng)};
    for (bool clamped : {true, false}) {
      if (!clamped && std::min({xs[0], xs[1], xs[2], xs[3]}) < kUnclampedExpMin) continue;
      const std::vector<float> got = exp4(xs[0], xs[1], xs[2], xs[3], clamped);
      for (int l = 0; l < 4; ++l) {
        const double want = std::exp(static_cast<double>(xs[l]));
        const double relative = std::fabs(got[static_cast<size_t>(l)] - want) / want;
        const double y = std::fabs(static_cast<double>(xs[l]) * 1.4426950408889634);
        ASSERT_LE(relative, 2.1e-7 + y * 6e-8) << "x=" << xs[l] << (clamped ? "" : " (unclamped)");
        if (y < 1) worst = std::max(worst, relative);
      }
    }
  }
  EXPECT_LE(worst, 2.1e-7 + 6e-8);
  const std::vector<float> specials = exp4(0.0f, -0.0f, -kInf, kNaN, true);
  EXPECT_EQ(specials[0], 1.0f);
  EXPECT_EQ(specials[1], 1.0f);
  EXPECT_EQ(specials[2], 0.0f);
  EXPECT_TRUE(std::isnan(specials[3]));
  EXPECT_TRUE(std::isnan(exp4(kNaN, 0, 0, 0, false)[0]));
  EXPECT_EQ(exp4(kUnclampedExpMin, 0, 0, 0, false)[0], exp4(kUnclampedExpMin, 0, 0, 0, true)[0]);
  for (float large_negative : {-87.7f, -88.0f, -100.0f, -1e30f, -FLT_MAX}) {
    for (float got : exp4(large_negative, large_negative, large_negative, large_negative, true)) {
      EXPECT_EQ(got, 0.0f) << large_negative;
      EXPECT_FALSE(std::signbit(got));
    }
  }
}

}  // namespace
}  // namespace sdpa::testing
