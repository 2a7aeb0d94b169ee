// The PRNG (mulberry32), Xavier/Glorot init, dropout, and the score functions' gradients
// (float64 finite-difference gradcheck).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "attention_test_support.h"
#include "extras/prng.h"
#include "extras/score_functions.h"

namespace sdpa::testing {
namespace {

TEST(Prng, Mulberry32KnownAnswers) {
  // First draws of the reference mulberry32 (Tommy Ettinger's public-domain C) for seeds 42 and 0.
  EXPECT_EQ(mulberry32_at(42, 0), 2581720956u);
  EXPECT_EQ(mulberry32_at(42, 1), 1925393290u);
  EXPECT_EQ(mulberry32_at(42, 2), 3661312704u);
  EXPECT_EQ(mulberry32_at(0, 0), 1144304738u);
}

TEST(Prng, SeedValidation) {
  EXPECT_TRUE(check_seed(0, "seed").ok());
  EXPECT_TRUE(check_seed(4294967295.0, "seed").ok());
  EXPECT_EQ(check_seed(-1, "seed").kind, ErrorKind::kRange);
  EXPECT_EQ(check_seed(1.5, "seed").kind, ErrorKind::kRange);
  EXPECT_EQ(check_seed(4294967296.0, "seed").kind, ErrorKind::kRange);
  EXPECT_EQ(check_seed(NAN, "seed").kind, ErrorKind::kRange);
}

TEST(Uniform, DrawsScaledToTheRangeAndAddressable) {
  std::vector<float> all(10), tail(4);
  uniform_fill(10, -2.0, 3.0, 42, 0, all.data());
  uniform_fill(4, -2.0, 3.0, 42, 6, tail.data());
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(all[i], static_cast<float>(-2.0 + uniform_at(42, i) * 5.0));
    EXPECT_GE(all[i], -2.0f);
    EXPECT_LE(all[i], 3.0f);
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(tail[i], all[6 + i]);
  EXPECT_TRUE(plan_uniform(0, 1, 1, 0).ok());
  EXPECT_EQ(plan_uniform(-1, 0, 1, 0).kind, ErrorKind::kRange);
  EXPECT_EQ(plan_uniform(2.5, 0, 1, 0).kind, ErrorKind::kRange);
  EXPECT_EQ(plan_uniform(4, 1, 0, 0).kind, ErrorKind::kRange);
  EXPECT_EQ(plan_uniform(4, 0, INFINITY, 0).kind, ErrorKind::kRange);
  EXPECT_EQ(plan_uniform(4, 0, 1, -1).kind, ErrorKind::kRange);
}

TEST(Xavier, BoundMeanAndVariance) {
  const int64_t fan_in = 300, fan_out = 200;
  std::vector<float> w(fan_in * fan_out);
  xavier_uniform(fan_in, fan_out, 7, 0, w.data());
  const double a = std::sqrt(6.0 / (fan_in + fan_out));
  double sum = 0, sq = 0;
  for (float x : w) {
    ASSERT_LE(std::fabs(x), a);
    sum += x;
    sq += double(x) * x;
  }
  const double n = static_cast<double>(w.size());
  EXPECT_NEAR(sum / n, 0.0, 0.01 * a);
  EXPECT_NEAR(sq / n, 2.0 / (fan_in + fan_out), 0.02 * 2.0 / (fan_in + fan_out));  // a²/3
  std::vector<float> again(w.size()), other(w.size());
  xavier_uniform(fan_in, fan_out, 7, 0, again.data());
  xavier_uniform(fan_in, fan_out, 8, 0, other.data());
  EXPECT_EQ(w, again);
  EXPECT_NE(w, other);
  EXPECT_EQ(plan_xavier(0, 3, 1).kind, ErrorKind::kRange);
  EXPECT_EQ(plan_xavier(2.5, 3, 1).kind, ErrorKind::kRange);
}

TEST(Dropout, KeptFractionScaleAndDeterminism) {
  const int64_t n = 1 << 20;
  std::vector<float> x(n, 1.0f), y(n), z(n);
  for (double p : {0.1, 0.5, 0.9}) {
    dropout(x.data(), n, p, 123, y.data());
    int64_t kept = 0;
    for (float v : y) {
      if (v != 0.0f) {
        ++kept;
        EXPECT_FLOAT_EQ(v, static_cast<float>(1.0 / (1.0 - p)));
      }
    }
    EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - p, 0.01) << "p=" << p;
    dropout(x.data(), n, p, 123, z.data());
    EXPECT_EQ(y, z);
  }
  dropout(x.data(), 1000, 0.0, 5, y.data());
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(y[i], 1.0f);
  dropout(x.data(), 1000, 1.0, 5, y.data());
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(y[i], 0.0f);
  EXPECT_EQ(plan_dropout(-0.1, 1).kind, ErrorKind::kRange);
  EXPECT_EQ(plan_dropout(1.5, 1).kind, ErrorKind::kRange);
  EXPECT_TRUE(plan_dropout(0.5, 1).ok());
}

// ---- score functions ---------------------------------------------------------------------------

struct ScoreCase {
  ScoreRequest request;
  std::vector<float> q, k, w, w1, w2, v;
  ScoreParams params() const { return {w.data(), w1.data(), w2.data(), v.data()}; }
};

void quantize(std::vector<float>& x) {
  for (auto& v : x) v = std::round(v * 256.0f) / 256.0f;
}

ScoreCase make_case(ScoreKind kind, uint32_t seed) {
  ScoreCase c;
  c.request.kind = kind;
  const int64_t B = 2, Lq = 3, Lk = 4, Dq = 3, Dk = kind == ScoreKind::kDot || kind == ScoreKind::kScaledDot ? 3 : 5, H = 4;
  c.request.query_shape = {B, Lq, Dq};
  c.request.key_shape = {B, Lk, Dk};
  c.q = random_floats(B * Lq * Dq, seed);
  c.k = random_floats(B * Lk * Dk, seed + 1);
  if (kind == ScoreKind::kMultiplicative) {
    c.request.w_shape = {Dq, Dk};
    c.w = random_floats(Dq * Dk, seed + 2);
  }
  if (kind == ScoreKind::kAdditive) {
    c.request.w1_shape = {H, Dq};
    c.request.w2_shape = {H, Dk};
    c.request.v_shape = {H};
    c.w1 = random_floats(H * Dq, seed + 3);
    c.w2 = random_floats(H * Dk, seed + 4);
    c.v = random_floats(H, seed + 5);
  }
  for (auto* x : {&c.q, &c.k, &c.w, &c.w1, &c.w2, &c.v}) quantize(*x);
  return c;
}

double score_loss64(const ScoreCase& c, const ScorePlan& plan, const std::vector<float>& ds) {
  std::vector<double> s(plan.batch * plan.Lq * plan.Lk), ws(score_workspace_elements(plan) + 1);
  attention_scores<double>(plan, c.q.data(), c.k.data(), c.params(), s.data(), ws.data());
  double l = 0;
  for (size_t i = 0; i < s.size(); ++i) l += ds[i] * s[i];
  return l;
}

TEST(ScoreFunctions, GradcheckEveryKind) {
  for (auto kind : {ScoreKind::kDot, ScoreKind::kScaledDot, ScoreKind::kMultiplicative, ScoreKind::kAdditive}) {
    ScoreCase c = make_case(kind, 10 + static_cast<uint32_t>(kind));
    ScorePlan plan;
    ASSERT_TRUE(plan_scores(c.request, &plan).ok());
    const std::vector<float> ds = random_floats(plan.batch * plan.Lq * plan.Lk, 99);
    std::vector<double> dq(c.q.size()), dk(c.k.size()), dw(c.w.size()), dw1(c.w1.size()),
        dw2(c.w2.size()), dv(c.v.size()), ws(score_workspace_elements(plan) + 1);
    ScoreGradients<double> g{dq.data(), dk.data(), dw.data(), dw1.data(), dw2.data(), dv.data()};
    attention_scores_backward<double>(plan, c.q.data(), c.k.data(), c.params(), ds.data(), g, ws.data());
    const float h = 1.0f / 1024;
    for (auto [name, x, analytic] : {std::tuple<const char*, std::vector<float>*, std::vector<double>*>{"dq", &c.q, &dq},
                                     {"dk", &c.k, &dk}, {"dw", &c.w, &dw}, {"dw1", &c.w1, &dw1},
                                     {"dw2", &c.w2, &dw2}, {"dv", &c.v, &dv}}) {
      for (size_t i = 0; i < x->size(); ++i) {
        const float x0 = (*x)[i];
        (*x)[i] = x0 + h;
        const double up = score_loss64(c, plan, ds);
        (*x)[i] = x0 - h;
        const double down = score_loss64(c, plan, ds);
        (*x)[i] = x0;
        const double numeric = (up - down) / (2.0 * h);
        EXPECT_NEAR((*analytic)[i], numeric, 1e-6 + 1e-4 * std::fabs(numeric))
            << "kind " << static_cast<int>(kind) << " " << name << "[" << i << "]";
      }
    }
  }
}

TEST(ScoreFunctions, ScaledDotMatchesTheAttentionReferenceScores) {
  ScoreCase c = make_case(ScoreKind::kScaledDot, 30);
  ScorePlan plan;
  ASSERT_TRUE(plan_scores(c.request, &plan).ok());
  EXPECT_FLOAT_EQ(plan.scale, static_cast<float>(1 / std::sqrt(3.0)));
  std::vector<double> s(plan.batch * plan.Lq * plan.Lk);
  attention_scores<double>(plan, c.q.data(), c.k.data(), c.params(), s.data(), nullptr);
  Problem p;
  p.request.query_shape = c.request.query_shape;
  p.request.key_shape = c.request.key_shape;
  p.request.value_shape = {2, 4, 1};
  p.query = c.q;
  p.key = c.k;
  p.value.assign(8, 0.0f);
  const AttentionPlan ap = plan_or_die(p.request);
  std::vector<double> scaled(ap.weights_elements()), out(ap.output_elements());
  std::vector<double> ws(reference_workspace_bytes<double>(ap) / 8 + 1);
  ReferenceOutputs<double> o;
  o.output = out.data();
  o.scaled_scores = scaled.data();
  attention_reference<double>(ap, {p.query.data(), p.key.data(), p.value.data(), nullptr}, o, ws.data());
  for (size_t i = 0; i < s.size(); ++i) EXPECT_DOUBLE_EQ(s[i], scaled[i]);
}

TEST(ScoreFunctions, ValidationNamesArguments) {
  ScoreCase c = make_case(ScoreKind::kAdditive, 40);
  ScorePlan plan;
  c.request.w2_shape = {4, 3};
  Status s = plan_scores(c.request, &plan);
  EXPECT_EQ(s.kind, ErrorKind::kRange);
  EXPECT_NE(s.message.find("w2"), std::string::npos);
  EXPECT_NE(s.message.find("[4, 5]"), std::string::npos);
  ScoreCase d = make_case(ScoreKind::kDot, 41);
  d.request.key_shape = {2, 4, 5};
  EXPECT_NE(plan_scores(d.request, &plan).message.find("Dq = Dk"), std::string::npos);
  ScoreCase m = make_case(ScoreKind::kMultiplicative, 42);
  m.request.w_shape = {5, 3};
  EXPECT_NE(plan_scores(m.request, &plan).message.find("[3, 5]"), std::string::npos);
}

}  // namespace
}  // namespace sdpa::testing
