// f32x4: the 128-bit float vector the SIMD kernels are written in. Under Emscripten with
// -msimd128 it is wasm SIMD128 (wasm_simd128.h; -mrelaxed-simd adds a fused multiply-add);
// natively it is a GCC/Clang vector extension, so the same kernel code runs in native unit tests
// and fuzzers. Only operations whose semantics are
// identical on both sides are offered (max propagates NaN, as wasm's f32x4.max does).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#endif

namespace sdpa::simd {

// Hides a pointer's value from the optimizer (no instruction). A pointer advanced this way in a
// loop stays a value of its own, so loads through it take constant offsets (wasm load offsets,
// x64 displacements); several pointers that loop strength reduction merges into one base plus a
// shared index instead cost V8 an address computation per load.
template <typename T>
inline void opaque_pointer(T*& p) {
  __asm__("" : "+r"(p));
}

#if defined(__wasm_simd128__)

using f32x4 = v128_t;
using mask32x4 = v128_t;  // all-ones lanes where a comparison holds

inline f32x4 load(const float* p) { return wasm_v128_load(p); }
inline void store(float* p, f32x4 v) { wasm_v128_store(p, v); }
inline f32x4 splat(float x) { return wasm_f32x4_splat(x); }
inline f32x4 add(f32x4 a, f32x4 b) { return wasm_f32x4_add(a, b); }
inline f32x4 sub(f32x4 a, f32x4 b) { return wasm_f32x4_sub(a, b); }
inline f32x4 mul(f32x4 a, f32x4 b) { return wasm_f32x4_mul(a, b); }
inline f32x4 div(f32x4 a, f32x4 b) { return wasm_f32x4_div(a, b); }
inline f32x4 and_bits(f32x4 a, f32x4 b) { return wasm_v128_and(a, b); }
inline f32x4 max(f32x4 a, f32x4 b) { return wasm_f32x4_max(a, b); }
// a·b + c. Relaxed-SIMD build (-mrelaxed-simd): one f32x4.relaxed_madd, fused where the CPU
// has FMA (LLVM 14 calls it f32x4.fma and emits an early opcode that
// cmake/relaxed_simd_opcodes.mjs rewrites). SIMD128 build: a multiply, then an add.
#if defined(__wasm_relaxed_simd__)
inline f32x4 madd(f32x4 a, f32x4 b, f32x4 c) { return __builtin_wasm_fma_f32x4(a, b, c); }
constexpr bool kFusedMadd = true;
#else
inline f32x4 madd(f32x4 a, f32x4 b, f32x4 c) { return wasm_f32x4_add(wasm_f32x4_mul(a, b), c); }
constexpr bool kFusedMadd = false;
#endif
// a < b ? b : a, lane-wise (wasm's f32x4.pmax): one maxps on x86 (max() needs ~7 for its
// NaN/±0 rules). A NaN in `b` is dropped, a NaN in `a` kept.
inline f32x4 pmax(f32x4 a, f32x4 b) { return wasm_f32x4_pmax(a, b); }
// b < a ? b : a, lane-wise (wasm's f32x4.pmin): a NaN in `b` is dropped, a NaN in `a` kept.
inline f32x4 pmin(f32x4 a, f32x4 b) { return wasm_f32x4_pmin(a, b); }
inline mask32x4 less(f32x4 a, f32x4 b) { return wasm_f32x4_lt(a, b); }
inline mask32x4 equal(f32x4 a, f32x4 b) { return wasm_f32x4_eq(a, b); }
inline mask32x4 bits_differ(f32x4 a, f32x4 b) { return wasm_i32x4_ne(a, b); }
inline bool any(mask32x4 m) { return wasm_v128_any_true(m); }
inline bool all(mask32x4 m) { return wasm_i32x4_all_true(m); }
// Lanes of `a` where `m` holds, else 0.
inline f32x4 keep_where(f32x4 a, mask32x4 m) { return wasm_v128_and(a, m); }
inline f32x4 or_bits(f32x4 a, f32x4 b) { return wasm_v128_or(a, b); }
// Lanes of `a` where `m` holds, else `b`.
inline f32x4 select(mask32x4 m, f32x4 a, f32x4 b) { return wasm_v128_bitselect(a, b, m); }
inline f32x4 from_bits(int32_t bits) { return wasm_i32x4_splat(bits); }
// Lanes (i0, i1, i2, i3) of the 8 lanes of a then b.
template <int i0, int i1, int i2, int i3>
inline f32x4 shuffle(f32x4 a, f32x4 b) { return wasm_i32x4_shuffle(a, b, i0, i1, i2, i3); }
// 2^n from lanes holding 1.5·2^23 + n (bit pattern 0x4B400000 + n), n in [-126, 127]: move
// n + 127 into the exponent field.
inline f32x4 exp2_from_magic(f32x4 n_plus_magic) {
  return wasm_i32x4_shl(wasm_i32x4_add(n_plus_magic, wasm_i32x4_splat(127 - 0x4B400000)), 23);
}
// float16 values (bit patterns) as floats scaled by 2^-112 (kHalfScaled), exactly, for finite
// halves only (Inf and NaN come out as finite numbers): each half moved to its lane's top 16 bits
// (one punpcklwd/punpckhwd), shifted arithmetically into a float's sign/exponent/mantissa places,
// and the sign's copies cleared from the exponent's top bits. The value·2^-112 is exact (a
// subnormal half becomes a normal or subnormal float); callers multiply their sums by 2^112.
constexpr float kHalfScaled = 0x1p-112f;
inline v128_t half_bits_to_scaled(v128_t high) {
  return wasm_v128_and(wasm_i32x4_shr(high, 3), wasm_i32x4_const_splat(static_cast<int32_t>(0x8FFFFFFF)));
}
// Halves p[0, 4) into one vector.
inline f32x4 load_half4_scaled(const uint16_t* p) {
  const v128_t halves = wasm_v128_load64_zero(p);
  return half_bits_to_scaled(wasm_i16x8_shuffle(wasm_i32x4_const_splat(0), halves, 0, 8, 1, 9, 2, 10, 3, 11));
}
// Halves p[0, 8) into two vectors (one 16-byte load).
inline void load_half8_scaled(const uint16_t* p, f32x4* v) {
  const v128_t halves = wasm_v128_load(p);
  const v128_t zero = wasm_i32x4_const_splat(0);
  v[0] = half_bits_to_scaled(wasm_i16x8_shuffle(zero, halves, 0, 8, 1, 9, 2, 10, 3, 11));
  v[1] = half_bits_to_scaled(wasm_i16x8_shuffle(zero, halves, 4, 12, 5, 13, 6, 14, 7, 15));
}
// Halves p[0, 8) as load_half8_scaled gives them, but the even-indexed ones (0, 2, 4, 6) in v[0]
// and the odd ones (1, 3, 5, 7) in v[1]: 5 instructions instead of 6, no lane shuffle. An even
// half moves to its lane's top by a shift; an odd one is there already, and the shift right and
// the mask drop its even neighbour's bits.
inline void load_half8_scaled_split(const uint16_t* p, f32x4* v) {
  const v128_t halves = wasm_v128_load(p);
  v[0] = half_bits_to_scaled(wasm_i32x4_shl(halves, 16));
  v[1] = wasm_v128_and(wasm_i32x4_shr(halves, 3), wasm_i32x4_const_splat(static_cast<int32_t>(0x8FFFE000)));
}
inline float lane(f32x4 v, int i) {
  switch (i) {
    case 0: return wasm_f32x4_extract_lane(v, 0);
    case 1: return wasm_f32x4_extract_lane(v, 1);
    case 2: return wasm_f32x4_extract_lane(v, 2);
    default: return wasm_f32x4_extract_lane(v, 3);
  }
}

#else

using f32x4 = float __attribute__((vector_size(16)));
using mask32x4 = int32_t __attribute__((vector_size(16)));

template <typename To, typename From>
inline To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}

inline f32x4 load(const float* p) {
  f32x4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, f32x4 v) { std::memcpy(p, &v, sizeof v); }
inline f32x4 splat(float x) { return f32x4{x, x, x, x}; }
inline f32x4 add(f32x4 a, f32x4 b) { return a + b; }
inline f32x4 sub(f32x4 a, f32x4 b) { return a - b; }
inline f32x4 mul(f32x4 a, f32x4 b) { return a * b; }
inline f32x4 div(f32x4 a, f32x4 b) { return a / b; }
#if defined(SDPA_EMULATE_FUSED_MADD)
// A stand-in for the relaxed-SIMD build's fused multiply-add, so that native tests and the
// fuzzer also run its code path (the overflow repair of dot_madd below).
inline f32x4 madd(f32x4 a, f32x4 b, f32x4 c) {
  return f32x4{std::fma(a[0], b[0], c[0]), std::fma(a[1], b[1], c[1]), std::fma(a[2], b[2], c[2]),
               std::fma(a[3], b[3], c[3])};
}
constexpr bool kFusedMadd = true;
#else
inline f32x4 madd(f32x4 a, f32x4 b, f32x4 c) { return a * b + c; }
constexpr bool kFusedMadd = false;
#endif
inline f32x4 max(f32x4 a, f32x4 b) {
  const mask32x4 nan = (a != a) | (b != b);
  const f32x4 larger = a > b ? a : b;
  return nan ? a + b : larger;
}
inline f32x4 pmax(f32x4 a, f32x4 b) { return a < b ? b : a; }
inline f32x4 pmin(f32x4 a, f32x4 b) { return b < a ? b : a; }
inline mask32x4 less(f32x4 a, f32x4 b) { return a < b; }
inline mask32x4 equal(f32x4 a, f32x4 b) { return a == b; }
inline mask32x4 bits_differ(f32x4 a, f32x4 b) {
  return bit_cast<mask32x4>(a) != bit_cast<mask32x4>(b);
}
inline bool any(mask32x4 m) { return (m[0] | m[1] | m[2] | m[3]) != 0; }
inline bool all(mask32x4 m) { return (m[0] & m[1] & m[2] & m[3]) != 0; }
inline f32x4 keep_where(f32x4 a, mask32x4 m) { return bit_cast<f32x4>(bit_cast<mask32x4>(a) & m); }
inline f32x4 or_bits(f32x4 a, f32x4 b) {
  return bit_cast<f32x4>(bit_cast<mask32x4>(a) | bit_cast<mask32x4>(b));
}
inline f32x4 and_bits(f32x4 a, f32x4 b) {
  return bit_cast<f32x4>(bit_cast<mask32x4>(a) & bit_cast<mask32x4>(b));
}
inline f32x4 select(mask32x4 m, f32x4 a, f32x4 b) { return m ? a : b; }
inline f32x4 from_bits(int32_t bits) { return bit_cast<f32x4>(mask32x4{bits, bits, bits, bits}); }
template <int i0, int i1, int i2, int i3>
inline f32x4 shuffle(f32x4 a, f32x4 b) { return __builtin_shufflevector(a, b, i0, i1, i2, i3); }
inline f32x4 exp2_from_magic(f32x4 n_plus_magic) {
  return bit_cast<f32x4>((bit_cast<mask32x4>(n_plus_magic) + (127 - 0x4B400000)) << 23);
}
inline float lane(f32x4 v, int i) { return v[i]; }
constexpr float kHalfScaled = 0x1p-112f;
inline f32x4 load_half4_scaled(const uint16_t* p) {
  const auto top = [](uint16_t h) { return static_cast<int32_t>(static_cast<uint32_t>(h) << 16); };
  const mask32x4 high = {top(p[0]), top(p[1]), top(p[2]), top(p[3])};
  return bit_cast<f32x4>((high >> 3) & static_cast<int32_t>(0x8FFFFFFF));
}
inline void load_half8_scaled(const uint16_t* p, f32x4* v) {
  v[0] = load_half4_scaled(p);
  v[1] = load_half4_scaled(p + 4);
}
inline void load_half8_scaled_split(const uint16_t* p, f32x4* v) {
  const uint16_t even[4] = {p[0], p[2], p[4], p[6]}, odd[4] = {p[1], p[3], p[5], p[7]};
  v[0] = load_half4_scaled(even);
  v[1] = load_half4_scaled(odd);
}

#endif

// Lanes (2, 3, 0, 1) and (1, 0, 3, 2): one pshufd each.
inline f32x4 swap_halves(f32x4 v) { return shuffle<2, 3, 0, 1>(v, v); }
inline f32x4 swap_pairs(f32x4 v) { return shuffle<1, 0, 3, 2>(v, v); }
// Lanes (a0, b0, a1, b1), (a2, b2, a3, b3), (a0, a1, b0, b1) and (a2, a3, b2, b3).
inline f32x4 interleave_low(f32x4 a, f32x4 b) { return shuffle<0, 4, 1, 5>(a, b); }
inline f32x4 interleave_high(f32x4 a, f32x4 b) { return shuffle<2, 6, 3, 7>(a, b); }
inline f32x4 low_halves(f32x4 a, f32x4 b) { return shuffle<0, 1, 4, 5>(a, b); }
inline f32x4 high_halves(f32x4 a, f32x4 b) { return shuffle<2, 3, 6, 7>(a, b); }

// The bit pattern of -0.0f: the kernels' weight of a hidden key (e^-inf = +0 with its sign set),
// which adds nothing to a finite sum and which a bit compare tells from a true 0.
constexpr int32_t kNegativeZeroBits = INT32_MIN;

// Transposes the 4×4 block whose rows are r[0..3], in place (eight shuffles).
inline void transpose4(f32x4 r[4]) {
  const f32x4 t0 = interleave_low(r[0], r[1]), t1 = interleave_high(r[0], r[1]);
  const f32x4 t2 = interleave_low(r[2], r[3]), t3 = interleave_high(r[2], r[3]);
  r[0] = low_halves(t0, t2);
  r[1] = high_halves(t0, t2);
  r[2] = low_halves(t1, t3);
  r[3] = high_halves(t1, t3);
}

// a·b + c with a rounding after the multiply, in every build.
inline f32x4 madd_unfused(f32x4 a, f32x4 b, f32x4 c) { return add(mul(a, b), c); }

// A dot product's multiply-adds, fused or not. Fused, a sum that overflows to -Inf stays -Inf
// when a later product overflows the other way (that product is never rounded to +Inf), where
// separate multiplies and adds give +Inf − Inf = NaN; a -Inf score would hide its key where the
// reference's row turns NaN. So the kernels check each register tile of fused dot products with
// may_have_overflowed() and, rarely, recompute it unfused to replace its -Inf lanes
// (take_unfused_where_neg_inf): the other lanes keep their bits, so values stored at hidden
// keys never change a visible key's score.
template <bool kFused>
inline f32x4 dot_madd(f32x4 a, f32x4 b, f32x4 c) {
  return kFused ? madd(a, b, c) : madd_unfused(a, b, c);
}

// Whether any lane of the n vectors is -Inf or NaN (or their sum overflows: a false alarm
// costs a recompute, never a changed result).
inline bool may_have_overflowed(const f32x4* v, int n, f32x4 neg_inf) {
  f32x4 sum = v[0];
  for (int i = 1; i < n; ++i) sum = add(sum, v[i]);
  return !all(less(neg_inf, sum));  // false for -Inf and NaN lanes
}

inline void take_unfused_where_neg_inf(f32x4* fused, const f32x4* unfused, int n, f32x4 neg_inf) {
  for (int i = 0; i < n; ++i) fused[i] = select(equal(fused[i], neg_inf), unfused[i], fused[i]);
}

inline float max_propagating_nan(float a, float b) {
  return (a != a || b != b) ? a + b : (a > b ? a : b);
}
inline float horizontal_sum(f32x4 v) { return (lane(v, 0) + lane(v, 1)) + (lane(v, 2) + lane(v, 3)); }
// The lane sums of v[0, n), each formed as horizontal_sum forms it (bit for bit), into sums[0, n):
// four registers at a time by a transpose, 6 shuffles and 3 adds for the four sums where four
// horizontal_sums take 16 lane extracts and 12 adds.
template <int n>
inline void horizontal_sums(const f32x4* v, float* sums) {
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const f32x4 ab = add(shuffle<0, 2, 4, 6>(v[i], v[i + 1]), shuffle<1, 3, 5, 7>(v[i], v[i + 1]));
    const f32x4 cd = add(shuffle<0, 2, 4, 6>(v[i + 2], v[i + 3]), shuffle<1, 3, 5, 7>(v[i + 2], v[i + 3]));
    store(sums + i, add(shuffle<0, 2, 4, 6>(ab, cd), shuffle<1, 3, 5, 7>(ab, cd)));
  }
  for (; i < n; ++i) sums[i] = horizontal_sum(v[i]);
}
// Whether x[0, n) holds no NaN or Inf: x − x is 0 for a finite x (−0, subnormals and FLT_MAX
// included) and NaN otherwise, so the sum of them stays 0 exactly when every element is finite.
inline bool all_finite(const float* x, std::ptrdiff_t n) {
  f32x4 probe = splat(0.0f);
  std::ptrdiff_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const f32x4 v = load(x + i);
    probe = add(probe, sub(v, v));
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += x[i] - x[i];
  return horizontal_sum(probe) + tail == 0.0f;
}

// The smallest and the largest lane; lanes must not be NaN. Two shuffles and two pmin/pmax, no
// branch: scalar compares of the lanes cost V8 a mispredicted branch on most score rows.
inline float horizontal_min(f32x4 v) {
  v = pmin(v, swap_halves(v));
  return lane(pmin(v, swap_pairs(v)), 0);
}
inline float horizontal_max(f32x4 v) {
  v = pmax(v, swap_halves(v));
  return lane(pmax(v, swap_pairs(v)), 0);
}

// e^x for x <= 0 (the only range softmax needs after subtracting the row max), as 2^y with
// y = x·log2(e): y = n + f with n = round(y), |f| <= 1/2, 2^f by a degree-5 minimax polynomial
// with its constant term rounded to 1, so that e^0 is exactly 1, as in the reference (relative
// error 1.6e-7; 2.1e-7 evaluated in float32, as for the degree-6 Taylor polynomial it replaced;
// the rounding of y adds |y|·6e-8 relative), times 2^n built in the exponent bits.
// exp_nonpositive first clamps y to -127, where n = -127 makes the 2^n factor exactly 0: the
// result is 0 below about -87.7 (and for -inf), NaN for NaN. exp_nonpositive_unclamped skips the
// clamp (one instruction of 14): only for x >= kUnclampedExpMin, where 2^n is still a normal.
//
// The constants live in a mutable table that the caller loads once, outside its loop
// (ExpConstants::load()): a v128.const in a loop costs V8 several instructions every iteration,
// and LLVM would sink constants from a const table back into the loop.
// The last two entries are not used by exp: -inf and -0.0 for kernels that need them in a loop.
inline float exp_constant_table[11] = {
    -127.0f,          1.44269504088896341f, 12582912.0f,         1.0f,
    0.693146967064733f, 0.2402211972384865f, 0.05550713273543075f, 0.009675541334209831f,
    0.0013276471979286704f, -__builtin_inff(), -0.0f};
constexpr float kUnclampedExpMin = -87.0f;  // y >= -125.6 > -127 after the roundings

struct ExpConstants {
  f32x4 lowest, log2e, magic, c0, c1, c2, c3, c4, c5;
  static ExpConstants load() {
    const float* t = exp_constant_table;
    return {splat(t[0]), splat(t[1]), splat(t[2]), splat(t[3]), splat(t[4]),
            splat(t[5]), splat(t[6]), splat(t[7]), splat(t[8])};
  }
};

// 2^y for y in [-127, 0] or NaN.
inline f32x4 exp2_nonpositive(f32x4 y, const ExpConstants& k) {
  // Round-to-nearest via the 1.5·2^23 "magic" add: the low mantissa bits then hold n.
  const f32x4 n_plus_magic = add(y, k.magic);
  const f32x4 f = sub(y, sub(n_plus_magic, k.magic));
  f32x4 p = madd(k.c5, f, k.c4);
  p = madd(p, f, k.c3);
  p = madd(p, f, k.c2);
  p = madd(p, f, k.c1);
  p = madd(p, f, k.c0);
  return mul(p, exp2_from_magic(n_plus_magic));
}

inline f32x4 exp_nonpositive(f32x4 x, const ExpConstants& k) {
  return exp2_nonpositive(pmax(mul(x, k.log2e), k.lowest), k);  // pmax keeps a NaN x
}

inline f32x4 exp_nonpositive_unclamped(f32x4 x, const ExpConstants& k) {
  return exp2_nonpositive(mul(x, k.log2e), k);
}

// tanh (wasm SIMD has none), vectorized from Cephes' tanhf: for |x| < 0.625 the odd polynomial
// x + x³·P(x²); above it (1 − e)/(1 + e)·sign(x) with e = e^(−2|x|) from exp_nonpositive, which
// has no cancellation there (e <= 0.29). Within a few float32 ulps of std::tanh (tested);
// exact and sign-keeping at ±0, ±1 from |x| ≈ 9 on and at ±inf, NaN for NaN.
// Constants as for exp (loaded once per task, outside the loop).
inline float tanh_constant_table[9] = {
    0.625f, -5.70498872745e-3f, 2.06390887954e-2f, -5.37397155531e-2f, 1.33314422036e-1f,
    -3.33332819422e-1f, 1.0f, -2.0f, 0.0f};
struct TanhConstants {
  f32x4 small_limit, p4, p3, p2, p1, p0, one, minus_two, abs_mask, sign_mask;
  ExpConstants exp;
  static TanhConstants load() {
    const float* t = tanh_constant_table;
    return {splat(t[0]), splat(t[1]), splat(t[2]), splat(t[3]), splat(t[4]), splat(t[5]),
            splat(t[6]), splat(t[7]), from_bits(0x7fffffff), from_bits(INT32_MIN),
            ExpConstants::load()};
  }
};

inline f32x4 tanh(f32x4 x, const TanhConstants& k) {
  const f32x4 a = and_bits(x, k.abs_mask);
  const f32x4 z = mul(x, x);
  f32x4 p = madd(k.p4, z, k.p3);
  p = madd(p, z, k.p2);
  p = madd(p, z, k.p1);
  p = madd(p, z, k.p0);
  const f32x4 small = madd(mul(p, z), a, a);
  const f32x4 e = exp_nonpositive(mul(a, k.minus_two), k.exp);
  const f32x4 large = div(sub(k.one, e), add(k.one, e));
  // tanh(|x|), then the sign of x (so that −0 stays −0)
  return or_bits(select(less(a, k.small_limit), small, large), and_bits(x, k.sign_mask));
}

// The softcap of scaled scores: c·tanh(s / c) (a division, not a product with 1/c, which
// overflows for a subnormal c and would turn a zero score into NaN).
inline f32x4 softcap(f32x4 s, f32x4 c, const TanhConstants& k) { return mul(c, tanh(div(s, c), k)); }

}  // namespace sdpa::simd
