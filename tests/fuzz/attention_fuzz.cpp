// Differential fuzz target: the SIMD kernel against the float32 and float64 scalar reference on
// fuzzer-chosen shapes, masks, options (causal alignments and offsets, alone or composed with a
// mask; softcaps; windows, key lengths, ALiBi, sinks, document ids) and values (NaN, ±Inf, −0, subnormals, FLT_MAX mixed into random data). Built with
// libFuzzer + ASan/UBSan (`npm run fuzz -- <seconds>`), and with replay_main.cpp natively and to
// wasm to replay the corpus in `npm test`; each also with a fused multiply-add
// (-DSDPA_EMULATE_FUSED_MADD natively, the relaxed-SIMD build in wasm).
//
// Rule, per output (and weights) element, against the float32 reference r32 and float64 r64:
//  - non-finite exactly where r32 is non-finite. Which non-finite value (NaN or ±Inf) may differ
//    where ±Inf meets 0 or −Inf in a different order (Inf·0, Inf − Inf), but two infinities must
//    have the same sign: a NaN never turns finite, a finite result never turns NaN;
//  - elsewhere |simd − r64| ≤ 2·e_ref + 1e-5·max(1, |V|max), e_ref = max finite |r32 − r64|.
// Builds with a fused multiply-add (relaxed SIMD, or natively -DSDPA_EMULATE_FUSED_MADD) are held
// to the same rule against either float32 reference, r32 or r32f (whose q·k multiply-adds are
// fused, DotRounding::kFused), with e_ref the larger of their two errors, or with r64 in r32's
// place: a fused multiply-add does not overflow where a separate multiply does, so it can be
// right where both float32 references are not.
// float16: every input also runs with query, key and value rounded to float16, through the
// float16 paths of dispatch (widened; finite keys/values read in place by the decode kernel, whose
// 2^-112-scaled sums cannot overflow where the float32 reference's do), held to the same rule
// against the references of the rounded values, the float64 one also standing in for r32 (as with
// a fused multiply-add); the array conversions (KvCache.append's rounding, dispatch's widening)
// give the scalar ones' bits.
// int8/int4: every input also runs with its keys and values quantized into a KV cache
// (core/kv_cache_format.h; NaN/Inf blocks read NaN), read in place by the quantized decode kernel
// or dequantized for the others, held to the same rule against the references of the dequantized
// keys and values and the query rounded through int8 blocks (the float64 one also standing in for
// r32: the kernel's integer dot products round differently from a float32 one); the vector
// quantizer of whole blocks (the query's, an append's) gives the format's levels and scales, and
// an append's rows and the dequantized copy the scalar code's bytes and floats, bit for bit.
// Every input also runs on 2 threads with its query, key and value streamed in while the kernel
// runs (core/input_arrival.h): bit for bit the 1-thread result.
// The backward pass runs on every input too (ASan/UBSan and the canaries around its outputs
// watch it). Where the finite entries of Q, K, V, dO and the additive mask are at most 1e10 in
// magnitude (NaN and ±Inf allowed; the mask's padding entries, below, too), the finite logits are
// bounded (|q|max·|k|max·E·|scale| + |additive mask|max ≤ 64 over finite entries other than
// padding) and so are the finite products dP = dO·Vᵀ (|dO|max·|v|max·Ev·2^-24 ≤ 1e-5), its
// gradients, with the forward's output passed in and recomputed, are held to the rule of the
// backward tests, per gradient tensor g, at every element where the float32 and float64
// references are finite:
//   |g − g64| ≤ 2·e_ref + 1e-5·max(1, max|g64|),   e_ref = max|g_scalar32 − g64|,
// and g is non-finite where both references are: NaN or Inf in a Q, K, V or dO row reaches only
// the gradients of the (row, key) pairs that see each other.
// Larger logits and products are left out of the comparison, because there which of two equally
// accurate summation orders happens to round closer decides e_ref:
//  - a score S (the mask's entry included) carries a float32 rounding of up to |S|·2^-24, which
//    moves its weight by as much relative: a score of ~1e3 differing by half an ulp moved a dValue
//    by 3.6e-5 relative, beyond a rule set by a luckier scalar reference; a mask entry of 1e10
//    rounds every score of its row to a multiple of 1024;
//  - dS = P ⊙ (dP − D) cancels terms of the size of dP (the kernel takes D = rowsum(dO ⊙ O), the
//    reference rowsum(P ⊙ dP)), so a gradient near 0 built from them (an additive mask's,
//    broadcast over the keys, is exactly 0) carries a rounding of about |dO|·|v|·Ev·2^-24, above
//    the rule's 1e-5 floor for larger products: with dO and V entries of 1e10, such a dMask came
//    out 686 where the scalar reference gave −114 and float64 6e-7.
// Padding entries of the additive mask (|m| ≥ 1e30: FLT_MAX, −3.4e38, the way Hugging Face masks
// padding) stay in the comparison: such an entry absorbs its score whole in float32 and in
// float64 alike (|S| ≤ 64 is far below half an ulp of 1e30 in either), so the weights of its row
// are exact on both sides (uniform over equal padding entries that are the row's largest, 0
// beside larger ones). A row of them is where a float32 log-sum-exp loses log Σ
// (kBackwardRenormalizeFrom, core/problem.h).
// Any difference beyond that aborts (libFuzzer reports it as a crash with its input).
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../cpp/attention_backward_support.h"
#include "core/kv_cache_format.h"
#include "cpu/float16_convert_simd128.h"
#include "cpu/quantized_rows_simd128.h"
#include "cpu/simd128.h"
#include "cpu/simd128_int.h"

namespace sdpa::testing {
namespace {

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t next() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint32_t next32() { return next() | next() << 8 | next() << 16 | static_cast<uint32_t>(next()) << 24; }
  bool empty() const { return pos_ >= size_; }

 private:
  const uint8_t* data_;
  size_t size_, pos_ = 0;
};

const float kSpecials[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, FLT_MIN / 4, -FLT_MIN / 8,
                           FLT_MIN, FLT_MAX, -FLT_MAX, 1e10f, -1e10f, 1e3f, -3.4e38f, -1e4f, 1.0f};

// Random data (seeded by the input), then (position, special value) overrides from the input.
void fill(std::vector<float>& v, ByteReader& in, uint32_t seed, float magnitude) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-magnitude, magnitude);
  for (auto& x : v) x = dist(rng);
  const int overrides = in.next() % 8;
  for (int i = 0; i < overrides && !v.empty(); ++i) {
    const uint32_t at = in.next32() % v.size();
    v[at] = kSpecials[in.next() % (sizeof kSpecials / sizeof *kSpecials)];
  }
}

struct FuzzCase {
  Problem p;
  bool valid = false;           // the request plans (else nothing runs)
  AttentionPlan plan;
  std::vector<float> d_output;  // the backward's dO
};

constexpr uint8_t kExtensionMarker[2] = {0xC5, 0x5C};
constexpr uint8_t kSoftcapMarker[2] = {0x5C, 0xAF};
constexpr uint8_t kVariantsMarker[2] = {0xD0, 0xC5};

FuzzCase decode(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  FuzzCase fuzz_case;
  Problem& p = fuzz_case.p;
  AttentionRequest& r = p.request;
  const int rank = 2 + in.next() % 3;
  const int64_t B = rank >= 3 ? 1 + in.next() % 2 : 1;
  const int64_t Hkv = rank == 4 ? 1 + in.next() % 2 : 1;
  const int64_t group = rank == 4 ? 1 + in.next() % 3 : 1;
  const int64_t Lq = in.next() % 80, Lk = in.next() % 140, E = 1 + in.next() % 40, Ev = in.next() % 40;
  auto shape = [&](int64_t h, int64_t l, int64_t d) {
    std::vector<int64_t> s = {B, h, l, d};
    return std::vector<int64_t>(s.end() - rank, s.end());
  };
  r.query_shape = shape(Hkv * group, Lq, E);
  r.key_shape = shape(Hkv, Lk, E);
  r.value_shape = shape(Hkv, Lk, Ev);
  r.enable_gqa = group > 1;
  const uint8_t mode = in.next();
  switch (mode % 5) {
    case 1: r.mask_kind = MaskKind::kBool; break;
    case 2: r.mask_kind = MaskKind::kAdditive; break;
    case 3: r.causal = CausalAlignment::kTopLeft; break;
    case 4: r.causal = CausalAlignment::kBottomRight; break;
    default: break;
  }
  // The mask's shape: the weights [..., Lq, Lk] with the dims whose bit is set broadcast.
  const auto mask_shape = [&](uint8_t broadcast) {
    std::vector<int64_t> weights = shape(Hkv * group, Lq, Lk);
    weights.back() = Lk;
    for (size_t d = 0; d < weights.size(); ++d) {
      if (broadcast & (1 << d)) weights[d] = 1;
    }
    return weights;
  };
  if (r.mask_kind != MaskKind::kNone) r.mask_shape = mask_shape(in.next());
  switch ((mode / 5) % 4) {
    case 1: r.has_scale = true, r.scale = 0; break;
    case 2: r.has_scale = true, r.scale = -0.5; break;
    case 3: r.has_scale = true, r.scale = (in.next() + 1) / 8.0; break;
    default: break;
  }
  r.return_weights = mode & 0x80;
  const uint32_t seed = in.next32();
  const float magnitude = in.next() % 2 ? 30.0f : 1.0f;  // 30: logits up to ~1e4·scale
  p.query.resize(product(r.query_shape));
  p.key.resize(product(r.key_shape));
  p.value.resize(product(r.value_shape));
  fill(p.query, in, seed, magnitude);
  fill(p.key, in, seed + 1, magnitude);
  fill(p.value, in, seed + 2, 1.0f);
  const auto mask_values = [&] {
    const size_t mask_n = static_cast<size_t>(product(r.mask_shape));
    std::mt19937 rng(seed + 3);
    for (size_t i = 0; i < mask_n && r.mask_kind != MaskKind::kNone; ++i) {
      const bool visible = rng() % 3 != 0;
      p.bool_mask.push_back(visible);
      p.float_mask.push_back(visible ? static_cast<float>(static_cast<int>(rng() % 9) - 4) : -INFINITY);
    }
    if (r.mask_kind == MaskKind::kAdditive) fill(p.float_mask, in, seed + 4, 4.0f);
    // A padding row (every entry −3.4e38, the way Hugging Face masks padding) in a quarter of the
    // additive masks: its float32 log-sum-exp loses log Σ.
    if (r.mask_kind == MaskKind::kAdditive && mask_n > 0 && seed % 4 == 0) {
      const size_t row_length = static_cast<size_t>(r.mask_shape.back());
      const size_t row = seed / 4 % (mask_n / row_length);
      std::fill_n(p.float_mask.begin() + static_cast<std::ptrdiff_t>(row * row_length), row_length, -3.4e38f);
    }
  };
  mask_values();
  fuzz_case.valid = plan_attention(r, &fuzz_case.plan).ok();
  if (fuzz_case.valid) {
    fuzz_case.d_output.resize(static_cast<size_t>(fuzz_case.plan.output_elements()));
    fill(fuzz_case.d_output, in, seed + 5, 1.0f);
  }
  // Extension: bytes left after the case above that start with kExtensionMarker choose a causal
  // offset and a mask composed with causality. Inputs without them decode as they always have.
  if (fuzz_case.valid && in.next() == kExtensionMarker[0] && in.next() == kExtensionMarker[1]) {
    const uint8_t e = in.next();
    switch (e % 4) {
      case 1: r.causal = CausalAlignment::kTopLeft; break;
      case 2: r.causal = CausalAlignment::kBottomRight; break;
      case 3: {
        r.causal = CausalAlignment::kOffset;
        // Within ±299: negative (rows that see nothing) to beyond Lk (< 140); or ±2^53.
        const auto raw = static_cast<int16_t>(in.next() | in.next() << 8);
        r.causal_offset = raw % 300;
        if (e & 0x10) r.causal_offset = e & 0x20 ? kMaxCausalOffset : -kMaxCausalOffset;
        break;
      }
      default: break;
    }
    if ((e & 0x4) && r.mask_kind == MaskKind::kNone) {
      r.mask_kind = e & 0x8 ? MaskKind::kAdditive : MaskKind::kBool;
      r.mask_shape = mask_shape(in.next());
      mask_values();
    }
    fuzz_case.valid = plan_attention(r, &fuzz_case.plan).ok();
    // A second extension after the first, starting with kSoftcapMarker: a softcap (0 = off,
    // tiny, saturating, large, subnormal, near FLT_MAX or one drawn from a byte).
    if (fuzz_case.valid && in.next() == kSoftcapMarker[0] && in.next() == kSoftcapMarker[1]) {
      static constexpr double kSoftcaps[] = {0.0, 0.5, 1.0, 5.0, 20.0, 50.0, 1e-40, 3e38};
      const uint8_t c = in.next();
      r.softcap = c < 8 ? kSoftcaps[c] : std::ldexp(1.0 + (c & 15) / 16.0, (c >> 4) - 8);
      fuzz_case.valid = plan_attention(r, &fuzz_case.plan).ok();
      // A third, starting with kVariantsMarker: a window (each side absent, 0…199 or 2^53), key
      // lengths per batch, ALiBi (standard or drawn slopes), sinks (−inf, 0, drawn, ±3e38) and
      // document ids (runs of a drawn length, or drawn ids).
      if (fuzz_case.valid && in.next() == kVariantsMarker[0] && in.next() == kVariantsMarker[1]) {
        const uint8_t v = in.next();
        const int64_t Bq = fuzz_case.plan.B, Hq = fuzz_case.plan.Hq;
        auto side = [&](bool* present, double* value) {
          const uint8_t w = in.next();
          *present = w != 0xFF;
          *value = w == 0xFE ? 9007199254740992.0 : static_cast<double>(w % 200);
        };
        if (v & 0x01) side(&r.has_window_left, &r.window_left);
        if (v & 0x02) side(&r.has_window_right, &r.window_right);
        if (v & 0x04) {
          r.has_key_lengths = true;
          for (int64_t b = 0; b < Bq; ++b) r.key_lengths.push_back(static_cast<double>(in.next() % (Lk + 1)));
        }
        if (v & 0x08) {
          if (v & 0x80) {
            r.has_alibi_slopes = true;
            for (int64_t h = 0; h < Hq; ++h) r.alibi_slopes.push_back((static_cast<int>(in.next()) - 128) / 64.0);
          } else {
            r.alibi = true;
          }
        }
        if (v & 0x10) {
          static constexpr double kSinks[] = {-INFINITY, 0.0, 1.0, -3.0, 20.0, 3e38, -3e38, 1e4};
          r.has_sinks = true;
          for (int64_t h = 0; h < Hq; ++h) r.sinks.push_back(kSinks[in.next() % 8]);
        }
        if (v & 0x20) {
          r.has_documents = true;
          r.query_documents_shape = {Bq, Lq};
          r.key_documents_shape = {Bq, Lk};
          const uint8_t d = in.next();
          const int run = 1 + d % 50;
          std::mt19937 rng(seed + 6);
          for (int64_t b = 0; b < Bq; ++b) {
            for (int64_t i = 0; i < Lq; ++i) p.query_documents.push_back(d & 0x80 ? static_cast<int32_t>(rng() % 3) : static_cast<int32_t>(i / run));
            for (int64_t j = 0; j < Lk; ++j) p.key_documents.push_back(d & 0x80 ? static_cast<int32_t>(rng() % 3) : static_cast<int32_t>(j / run));
          }
        }
        fuzz_case.valid = plan_attention(r, &fuzz_case.plan).ok();
      }
    }
  }
  return fuzz_case;
}

const Problem* current = nullptr;  // for the failure report

[[noreturn]] void fail(const char* what, size_t at, double got, double want32, double want64) {
  const AttentionRequest& r = current->request;
  std::fprintf(stderr,
               "attention_fuzz: %s at element %zu: simd %.9g, float32 reference %.9g, float64 %.9g\n"
               "  query %s key %s value %s mask kind %d shape %s causal %d offset %lld scale %s%g softcap %g gqa %d weights %d\n"
               "  window %s%g/%s%g key lengths %zu alibi %d slopes %zu sinks %zu documents %d\n",
               what, at, got, want32, want64, shape_to_string(r.query_shape).c_str(),
               shape_to_string(r.key_shape).c_str(), shape_to_string(r.value_shape).c_str(),
               static_cast<int>(r.mask_kind), shape_to_string(r.mask_shape).c_str(),
               static_cast<int>(r.causal), static_cast<long long>(r.causal_offset), r.has_scale ? "" : "default/", r.scale, r.softcap, r.enable_gqa,
               r.return_weights, r.has_window_left ? "" : "none ", r.window_left, r.has_window_right ? "" : "none ",
               r.window_right, r.key_lengths.size(), r.alibi, r.alibi_slopes.size(), r.sinks.size(), r.has_documents);
  std::abort();
}

// The rule above for one element: simd s, its non-finite pattern from f, its value from r64.
bool agrees(float s, double f, double r64, double bound) {
  if (!std::isfinite(f) || !std::isfinite(s)) {
    return !std::isfinite(f) && !std::isfinite(s) && !(std::isinf(f) && std::isinf(s) && s != f);
  }
  // float32 finite where float64 is not: no finite oracle
  return !std::isfinite(r64) || std::fabs(s - r64) <= bound;
}

// r32f: the float32 reference with fused dot products, compared against only in fused builds.
template <typename T>
void compare(const char* what, const std::vector<float>& simd, const std::vector<float>& r32,
             const std::vector<float>& r32f, const std::vector<T>& r64, double value_scale,
             bool exact_may_stand_in = false) {
  double e_ref = 0;
  for (const std::vector<float>* r : {&r32, &r32f}) {
    for (size_t i = 0; i < r->size(); ++i) {
      if (std::isfinite((*r)[i]) && std::isfinite(r64[i])) e_ref = std::max(e_ref, std::fabs((*r)[i] - r64[i]));
    }
  }
  const double bound = 2 * e_ref + 1e-5 * std::max(1.0, value_scale);
  for (size_t i = 0; i < simd.size(); ++i) {
    const double exact = static_cast<double>(r64[i]);
    if (agrees(simd[i], r32[i], exact, bound)) continue;
    if ((!r32f.empty() || exact_may_stand_in) && agrees(simd[i], exact, exact, bound)) continue;
    if (!r32f.empty() && agrees(simd[i], r32f[i], exact, bound)) continue;
    fail(what, i, simd[i], r32[i], exact);
  }
}

// An additive mask entry that absorbs any bounded score whole (see the header).
bool is_padding(float x) { return std::isfinite(x) && std::fabs(x) >= 1e30f; }

// The additive mask's entries are moderate, −inf or padding.
bool moderate_or_padding_mask(const std::vector<float>& mask) {
  for (float x : mask) {
    if (!(std::fabs(x) <= 1e10f) && x != -INFINITY && !is_padding(x)) return false;
  }
  return true;
}

double max_finite_abs(const std::vector<float>& v, bool skip_padding = false) {
  double m = 0;
  for (float x : v) {
    if (std::isfinite(x) && !(skip_padding && is_padding(x))) m = std::max(m, static_cast<double>(std::fabs(x)));
  }
  return m;
}

// Every finite entry at most 1e10 in magnitude (NaN and ±Inf allowed).
bool moderate_where_finite(const std::vector<float>& v) {
  for (float x : v) {
    if (std::isfinite(x) && !(std::fabs(x) <= 1e10f)) return false;
  }
  return true;
}

// The logits of finite entries, the additive mask's included (but not its padding), are bounded
// (non-finite entries give non-finite scores).
bool bounded_finite_logits(const Problem& p, const AttentionPlan& plan) {
  if (!moderate_where_finite(p.query) || !moderate_where_finite(p.key)) return false;
  const double mask = plan.mask_kind == MaskKind::kAdditive ? max_finite_abs(p.float_mask, true) : 0.0;
  return max_finite_abs(p.query) * max_finite_abs(p.key) * static_cast<double>(plan.E) * std::fabs(plan.scale) + mask <= 64;
}

// The float32 rounding of the finite products dP = dO·Vᵀ stays under the rule's 1e-5 floor.
bool bounded_finite_products(const Problem& p, const std::vector<float>& d_output, const AttentionPlan& plan) {
  return max_finite_abs(d_output) * max_finite_abs(p.value) * static_cast<double>(plan.Ev) * 0x1p-24 <= 1e-5;
}

void compare_gradient(const char* what, const std::vector<float>& got, const std::vector<float>& r32,
                      const std::vector<double>& r64) {
  double e_ref = 0, magnitude = 0;
  for (size_t i = 0; i < r64.size(); ++i) {
    if (!std::isfinite(r64[i])) continue;
    magnitude = std::max(magnitude, std::fabs(r64[i]));
    if (std::isfinite(r32[i])) e_ref = std::max(e_ref, std::fabs(r32[i] - r64[i]));
  }
  const double bound = 2 * e_ref + 1e-5 * std::max(1.0, magnitude);
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(r32[i]) && !std::isfinite(r64[i])) {
      if (std::isfinite(got[i])) fail(what, i, got[i], r32[i], r64[i]);
      continue;
    }
    if (!std::isfinite(r32[i]) || !std::isfinite(r64[i])) continue;
    if (!(std::fabs(got[i] - r64[i]) <= bound)) fail(what, i, got[i], r32[i], r64[i]);
  }
}

void check_backward(const FuzzCase& c, const AttentionPlan& plan) {
  const Problem& p = c.p;
  const bool comparable = bounded_finite_logits(p, plan) && moderate_where_finite(p.value) &&
                          moderate_where_finite(c.d_output) && bounded_finite_products(p, c.d_output, plan) &&
                          (plan.mask_kind != MaskKind::kAdditive || moderate_or_padding_mask(p.float_mask));
  const Grads64 g64 = comparable ? backward64(p, c.d_output) : Grads64(plan);
  const Grads32 r32 = comparable ? backward32(Backend::kScalar, p, c.d_output, false) : Grads32(plan);
  for (bool pass_forward : {false, true}) {
    const Grads32 g = backward32(Backend::kSimd128, p, c.d_output, pass_forward);
    if (!comparable) continue;
    compare_gradient(pass_forward ? "dQuery (forward passed)" : "dQuery", g.dq, r32.dq, g64.dq);
    compare_gradient(pass_forward ? "dKey (forward passed)" : "dKey", g.dk, r32.dk, g64.dk);
    compare_gradient(pass_forward ? "dValue (forward passed)" : "dValue", g.dv, r32.dv, g64.dv);
    if (plan.mask_kind == MaskKind::kAdditive) {
      compare_gradient(pass_forward ? "dMask (forward passed)" : "dMask", g.dmask, r32.dmask, g64.dmask);
    }
  }
}

// v rounded to float16 in place (the scalar rules); the halves returned. The array conversions
// (cpu/float16_convert_simd128: KvCache.append, dispatch's widening) must give the same bits.
std::vector<uint16_t> round_to_float16(std::vector<float>& v) {
  const auto n = static_cast<int64_t>(v.size());
  std::vector<uint16_t> halves(v.size()), array_halves(v.size());
  const bool array_special = round_to_float16_simd128(v.data(), array_halves.data(), n);
  bool special = false;
  for (size_t i = 0; i < v.size(); ++i) {
    halves[i] = float32_to_float16(v[i]);
    special |= (halves[i] & 0x7C00) == 0x7C00;
    v[i] = float16_to_float32(halves[i]);
  }
  std::vector<float> widened(v.size());
  widen_float16_simd128(halves.data(), widened.data(), n);
  if (array_halves != halves || array_special != special || !same_bits(widened, v)) {
    std::fprintf(stderr, "the array float16 conversions differ from the scalar ones\n");
    std::abort();
  }
  return halves;
}

void check_float16(const FuzzCase& c) {
  Problem rounded = c.p;
  const std::vector<uint16_t> q16 = round_to_float16(rounded.query), k16 = round_to_float16(rounded.key),
                              v16 = round_to_float16(rounded.value);
  AttentionRequest request = rounded.request;
  request.query_type = request.key_type = request.value_type = ElementType::kFloat16;
  request.key_value_finite = !float16_any_nonfinite(k16.data(), static_cast<int64_t>(k16.size())) &&
                             !float16_any_nonfinite(v16.data(), static_cast<int64_t>(v16.size()));
  const AttentionPlan plan = plan_or_die(request);
  AttentionInputs in = rounded.inputs();
  in.query = in.key = in.value = nullptr;
  in.query_f16 = q16.data();
  in.key_f16 = k16.data();
  in.value_f16 = v16.data();
  const Result half = run_with_canaries(Backend::kSimd128, plan, in, 1, "float16 ");
  const Result r32 = run_backend(Backend::kScalar, rounded);
  const Result r32f = simd::kFusedMadd ? run_reference32(rounded, DotRounding::kFused) : Result{};
  const Result64 r64 = run_reference64(rounded);
  compare("float16 output", half.output, r32.output, r32f.output, r64.output, max_finite_abs(rounded.value), true);
  if (plan.return_weights) compare("float16 weights", half.weights, r32.weights, r32f.weights, r64.weights, 1.0, true);
}

// The vector quantizer of whole blocks (simd::quantize_whole_block: the decode kernel's query,
// int8; an append's keys and values, int8 and int4) gives quantize_block's levels and scale bit for
// bit, on every whole block of the query, key and value.
void check_block_quantizer(const FuzzCase& c) {
  for (KvQuant kind : {KvQuant::kInt8, KvQuant::kInt4}) {
    for (const std::vector<float>* tensor : {&c.p.query, &c.p.key, &c.p.value}) {
      for (size_t at = 0; at + kQuantBlock <= tensor->size(); at += kQuantBlock) {
        int8_t want[kQuantBlock], got[kQuantBlock];
        const float want_scale = quantize_block(kind, tensor->data() + at, kQuantBlock, want);
        const float got_scale = simd::quantize_whole_block(kind, tensor->data() + at, got);
        if (std::memcmp(&want_scale, &got_scale, sizeof want_scale) != 0 || std::memcmp(want, got, sizeof want) != 0) {
          std::fprintf(stderr, "the vector block quantizer differs from quantize_block at element %zu\n", at);
          std::abort();
        }
      }
    }
  }
}

void check_quantized(const FuzzCase& c, KvQuant kind) {
  const AttentionPlan& plan = c.plan;
  if (plan.E == 0 || plan.Ev == 0) return;  // a cache has headDim, valueDim ≥ 1
  const int64_t rows = plan.Lk + 3;  // a cache longer than its tokens, rows past a tile boundary
  const QuantizedLayout kl = quantized_layout(kind, plan.B * plan.Hkv, rows, plan.E);
  const QuantizedLayout vl = quantized_layout(kind, plan.B * plan.Hkv, rows, plan.Ev);
  std::vector<uint8_t> keys(static_cast<size_t>(kl.total_bytes)), values(static_cast<size_t>(vl.total_bytes));
  Problem dense = c.p;
  for (int64_t h = 0; h < plan.B * plan.Hkv; ++h) {
    for (int64_t j = 0; j < plan.Lk; ++j) {
      store_quantized_row(kl, keys.data(), h, j, c.p.key.data() + (h * plan.Lk + j) * plan.E);
      store_quantized_row(vl, values.data(), h, j, c.p.value.data() + (h * plan.Lk + j) * plan.Ev);
      load_quantized_row(kl, keys.data(), h, j, dense.key.data() + (h * plan.Lk + j) * plan.E);
      load_quantized_row(vl, values.data(), h, j, dense.value.data() + (h * plan.Lk + j) * plan.Ev);
    }
  }
  // An append's vector path (KvCache.append) writes the same bytes.
  std::vector<uint8_t> appended_keys(keys.size()), appended_values(values.size());
  for (int64_t h = 0; h < plan.B * plan.Hkv; ++h) {
    store_quantized_rows_simd128(kl, appended_keys.data(), h, 0, c.p.key.data() + h * plan.Lk * plan.E, plan.Lk);
    store_quantized_rows_simd128(vl, appended_values.data(), h, 0, c.p.value.data() + h * plan.Lk * plan.Ev, plan.Lk);
  }
  if (appended_keys != keys || appended_values != values) {
    std::fprintf(stderr, "%s: the appended rows' bytes differ from store_quantized_row's\n", kind == KvQuant::kInt8 ? "int8" : "int4");
    std::abort();
  }
  // The dequantized copy's vector path (dispatch) reads load_quantized_row's floats.
  std::vector<float> read_keys(dense.key.size()), read_values(dense.value.size());
  for (int64_t h = 0; h < plan.B * plan.Hkv; ++h) {
    load_quantized_rows_simd128(kl, keys.data(), h, 0, plan.Lk, read_keys.data() + h * plan.Lk * plan.E);
    load_quantized_rows_simd128(vl, values.data(), h, 0, plan.Lk, read_values.data() + h * plan.Lk * plan.Ev);
  }
  if (!same_bits(read_keys, dense.key) || !same_bits(read_values, dense.value)) {
    std::fprintf(stderr, "%s: the rows read back differ from load_quantized_row's\n", kind == KvQuant::kInt8 ? "int8" : "int4");
    std::abort();
  }
  for (int64_t r = 0; r < plan.B * plan.Hq * plan.Lq; ++r) {
    round_query_row(c.p.query.data() + r * plan.E, plan.E, dense.query.data() + r * plan.E);
  }
  AttentionRequest request = c.p.request;
  request.key_type = request.value_type = kind == KvQuant::kInt8 ? ElementType::kInt8 : ElementType::kInt4;
  request.key_head_stride = rows * plan.E;
  request.value_head_stride = rows * plan.Ev;
  const AttentionPlan cache_plan = plan_or_die(request);
  AttentionInputs in = c.p.inputs();
  in.key = in.value = nullptr;
  in.key_quantized = keys.data();
  in.value_quantized = values.data();
  const char* name = kind == KvQuant::kInt8 ? "int8 " : "int4 ";
  const Result got = run_with_canaries(Backend::kSimd128, cache_plan, in, 1, name);
  const Result r32 = run_backend(Backend::kScalar, dense);
  const Result r32f = simd::kFusedMadd ? run_reference32(dense, DotRounding::kFused) : Result{};
  const Result64 r64 = run_reference64(dense);
  compare(kind == KvQuant::kInt8 ? "int8 output" : "int4 output", got.output, r32.output, r32f.output, r64.output,
          max_finite_abs(dense.value), true);
  if (plan.return_weights) {
    compare(kind == KvQuant::kInt8 ? "int8 weights" : "int4 weights", got.weights, r32.weights, r32f.weights, r64.weights, 1.0, true);
  }
}

}  // namespace
}  // namespace sdpa::testing

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sdpa::testing;
  const FuzzCase fuzz_case = decode(data, size);
  const Problem& p = fuzz_case.p;
  current = &p;
  if (!fuzz_case.valid) return 0;  // invalid shapes are the plan tests' job
  const sdpa::AttentionPlan& plan = fuzz_case.plan;
  const Result simd = run_backend(sdpa::Backend::kSimd128, p);
  const Result r32 = run_backend(sdpa::Backend::kScalar, p);
  const Result r32f = sdpa::simd::kFusedMadd ? run_reference32(p, sdpa::DotRounding::kFused) : Result{};
  const Result64 r64 = run_reference64(p);
  double value_scale = 0;
  for (float v : p.value) {
    if (std::isfinite(v)) value_scale = std::max(value_scale, static_cast<double>(std::fabs(v)));
  }
  compare("output", simd.output, r32.output, r32f.output, r64.output, value_scale);
  if (plan.return_weights) compare("weights", simd.weights, r32.weights, r32f.weights, r64.weights, 1.0);
  // The same call on 2 threads with its inputs streamed in: the same bits.
  const Result streamed = run_streamed(p, 2, static_cast<int32_t>(1 + (plan.Lq + plan.Lk) % 16), std::chrono::microseconds(0));
  if (!same_bits(streamed.output, simd.output) || !same_bits(streamed.weights, simd.weights)) {
    std::fprintf(stderr, "streamed inputs on 2 threads differ from inputs in place on 1\n");
    std::abort();
  }
  check_float16(fuzz_case);
  check_block_quantizer(fuzz_case);
  check_quantized(fuzz_case, sdpa::KvQuant::kInt8);
  check_quantized(fuzz_case, sdpa::KvQuant::kInt4);
  check_backward(fuzz_case, plan);
  return 0;
}
