// Shared helpers for the native tests: random inputs, running a backend, the float64 oracle and
// the tolerance rule  max|o − o64| ≤ 2·e_ref + 1e-5·max(1, |V|max),
// where e_ref = max|o_scalar32 − o64| is the error of the plain float32 reference.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dispatch/dispatch.h"
#include "core/problem.h"
#include "core/reference.h"
#include "cpu/thread_pool.h"

namespace sdpa::testing {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

struct Problem {
  AttentionRequest request;
  std::vector<float> query, key, value, float_mask;
  std::vector<uint8_t> bool_mask;
  std::vector<int32_t> query_documents, key_documents;  // with request.has_documents

  const void* mask() const {
    if (request.mask_kind == MaskKind::kBool) return bool_mask.data();
    if (request.mask_kind == MaskKind::kAdditive) return float_mask.data();
    return nullptr;
  }
  AttentionInputs inputs() const {
    AttentionInputs in{query.data(), key.data(), value.data(), mask()};
    if (request.has_documents) {
      in.query_documents = query_documents.data();
      in.key_documents = key_documents.data();
    }
    return in;
  }
};

inline int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

inline Problem make_problem(std::vector<int64_t> q, std::vector<int64_t> k, std::vector<int64_t> v,
                            uint32_t seed, float scale_of_values = 1.0f) {
  Problem p;
  p.request.query_shape = std::move(q);
  p.request.key_shape = std::move(k);
  p.request.value_shape = std::move(v);
  p.query = random_floats(product(p.request.query_shape), seed, -scale_of_values, scale_of_values);
  p.key = random_floats(product(p.request.key_shape), seed + 1, -scale_of_values, scale_of_values);
  p.value = random_floats(product(p.request.value_shape), seed + 2);
  return p;
}

struct Result {
  std::vector<float> output, weights;
};

inline AttentionPlan plan_or_die(const AttentionRequest& r) {
  AttentionPlan plan;
  Status s = plan_attention(r, &plan);
  if (!s.ok()) throw std::runtime_error(s.message);
  return plan;
}

// Guard values written around every output buffer and the workspace; a kernel that writes out
// of bounds changes them (checked after every run: odd shapes, the sweep and the fuzz corpus).
constexpr size_t kCanaryFloats = 64;
constexpr float kCanary = -1234.5f;

inline std::vector<float> with_canaries(size_t n) {
  std::vector<float> v(n + 2 * kCanaryFloats, NAN);
  std::fill_n(v.begin(), kCanaryFloats, kCanary);
  std::fill_n(v.end() - kCanaryFloats, kCanaryFloats, kCanary);
  return v;
}

inline void check_canaries(const std::vector<float>& v, const char* what) {
  for (size_t i = 0; i < kCanaryFloats; ++i) {
    if (v[i] != kCanary || v[v.size() - 1 - i] != kCanary) {
      std::fprintf(stderr, "out-of-bounds write around %s\n", what);
      std::abort();
    }
  }
}

inline std::vector<float> strip_canaries(const std::vector<float>& v) {
  return std::vector<float>(v.begin() + kCanaryFloats, v.end() - kCanaryFloats);
}

// The forward of `plan` on `in`, its output, weights and workspace inside canaries (`what`
// prefixes their names in a report).
inline Result run_with_canaries(Backend backend, const AttentionPlan& plan, const AttentionInputs& in, int threads,
                                const std::string& what = "") {
  std::vector<float> output = with_canaries(plan.output_elements());
  std::vector<float> weights = with_canaries(plan.return_weights ? plan.weights_elements() : 0);
  std::vector<float> workspace = with_canaries((workspace_bytes(backend, plan, threads) + 3) / 4);
  run_attention(backend, plan, in, output.data() + kCanaryFloats, weights.data() + kCanaryFloats,
                workspace.data() + kCanaryFloats, threads);
  check_canaries(output, (what + "output").c_str());
  check_canaries(weights, (what + "weights").c_str());
  check_canaries(workspace, (what + "workspace").c_str());
  return {strip_canaries(output), strip_canaries(weights)};
}

inline Result run_backend(Backend backend, const Problem& problem, int threads = 1) {
  return run_with_canaries(backend, plan_or_die(problem.request), problem.inputs(), threads);
}

// Whether two float vectors hold the same bits (NaN payloads included).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// The SIMD forward with query, key and value streamed in while it runs (core/input_arrival.h),
// by a copier written from the protocol's description that pauses `pause` before each piece:
// the destination starts as NaN, so a row read before it arrived would spoil the output.
inline Result run_streamed(const Problem& p, int threads, int32_t chunks, std::chrono::microseconds pause) {
  const AttentionPlan plan = plan_or_die(p.request);
  std::vector<float> query(p.query.size(), NAN), key(p.key.size(), NAN), value(p.value.size(), NAN);
  InputArrivalRecord record;
  record.arrived.store(0);
  record.chunks = chunks;
  struct Copier {
    const Problem& p;
    const AttentionPlan& plan;
    std::vector<float>&query, &key, &value;
    InputArrivalRecord& record;
    std::chrono::microseconds pause;
    void copy() {
      const int64_t groups = plan.B * plan.Hkv, group = plan.heads_per_kv(), C = record.chunks;
      const auto start = [&](int64_t L, int64_t c) { return (L * c + C - 1) / C; };
      const auto rows = [](const std::vector<float>& from, std::vector<float>& to, int64_t head, int64_t L,
                           int64_t width, int64_t r0, int64_t r1) {
        std::copy(from.begin() + (head * L + r0) * width, from.begin() + (head * L + r1) * width,
                  to.begin() + (head * L + r0) * width);
      };
      for (int64_t g = 0; g < groups; ++g) {
        for (int64_t c = C - 1; c >= 0; --c) {
          if (pause.count() > 0) std::this_thread::sleep_for(pause);
          rows(p.key, key, g, plan.Lk, plan.E, start(plan.Lk, c), start(plan.Lk, c + 1));
          rows(p.value, value, g, plan.Lk, plan.Ev, start(plan.Lk, c), start(plan.Lk, c + 1));
          for (int64_t h = g * group; h < (g + 1) * group; ++h) {
            rows(p.query, query, h, plan.Lq, plan.E, start(plan.Lq, c), start(plan.Lq, c + 1));
          }
          record.arrived.store(static_cast<int32_t>(g * C + C - c), std::memory_order_release);
        }
      }
    }
  } copier{p, plan, query, key, value, record, pause};
  AttentionInputs in = p.inputs();
  in.query = query.data();
  in.key = key.data();
  in.value = value.data();
  in.arrival.record = &record;
  Result result;
  {
    OverlappedWork work([](void* c) { static_cast<Copier*>(c)->copy(); }, &copier);
    result = run_with_canaries(Backend::kSimd128, plan, in, threads, "streamed ");
  }
  if (!same_bits(query, p.query)) {
    std::fprintf(stderr, "streamed query rows left uncopied\n");
    std::abort();
  }
  return result;
}

// The float32 reference with the given dot-product rounding (run_backend(kScalar) is kSeparate).
inline Result run_reference32(const Problem& problem, DotRounding rounding) {
  const AttentionPlan plan = plan_or_die(problem.request);
  Result r;
  r.output.assign(plan.output_elements(), NAN);
  r.weights.assign(plan.return_weights ? plan.weights_elements() : 0, NAN);
  std::vector<float> workspace(reference_workspace_bytes<float>(plan) / sizeof(float) + 1);
  ReferenceOutputs<float> out;
  out.output = r.output.data();
  out.weights = plan.return_weights ? r.weights.data() : nullptr;
  const AttentionInputs in = problem.inputs();
  attention_reference<float>(plan, in, out, workspace.data(), rounding);
  return r;
}

struct Result64 {
  std::vector<double> output, weights;
};

inline Result64 run_reference64(const Problem& problem) {
  const AttentionPlan plan = plan_or_die(problem.request);
  Result64 r;
  r.output.assign(plan.output_elements(), NAN);
  r.weights.assign(plan.weights_elements(), NAN);
  std::vector<double> workspace(reference_workspace_bytes<double>(plan) / sizeof(double) + 1);
  ReferenceOutputs<double> out;
  out.output = r.output.data();
  out.weights = r.weights.data();
  const AttentionInputs in = problem.inputs();
  attention_reference<double>(plan, in, out, workspace.data());
  return r;
}

// max |a − b| where NaN positions must agree (NaN vs non-NaN counts as infinite error).
template <typename A>
double max_abs_diff(const std::vector<A>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool nan_a = std::isnan(static_cast<double>(a[i])), nan_b = std::isnan(b[i]);
    if (nan_a != nan_b) return INFINITY;
    if (!nan_a) worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return worst;
}

inline double tolerance(const Problem& problem, double e_ref) {
  double vmax = 0;
  for (float x : problem.value) {
    if (std::isfinite(x)) vmax = std::max(vmax, static_cast<double>(std::fabs(x)));
  }
  return 2 * e_ref + 1e-5 * std::max(1.0, vmax);
}

}  // namespace sdpa::testing
