#include "core/problem.h"

#include <gtest/gtest.h>

#include <cmath>

namespace sdpa {
namespace {

AttentionRequest request(std::vector<int64_t> q, std::vector<int64_t> k, std::vector<int64_t> v) {
  AttentionRequest r;
  r.query_shape = std::move(q);
  r.key_shape = std::move(k);
  r.value_shape = std::move(v);
  return r;
}

Status plan(const AttentionRequest& r, AttentionPlan* p = nullptr) {
  AttentionPlan scratch;
  return plan_attention(r, p ? p : &scratch);
}

TEST(PlanAttention, NormalizesRanksToFourDims) {
  AttentionPlan p;
  ASSERT_TRUE(plan(request({5, 8}, {7, 8}, {7, 3}), &p).ok());
  EXPECT_EQ(p.B * p.Hq * p.Hkv, 1);
  EXPECT_EQ(p.Lq, 5);
  EXPECT_EQ(p.Lk, 7);
  EXPECT_EQ(p.E, 8);
  EXPECT_EQ(p.Ev, 3);
  EXPECT_EQ(p.output_shape, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(p.weights_shape, (std::vector<int64_t>{5, 7}));
  EXPECT_FLOAT_EQ(p.scale, 1.0f / std::sqrt(8.0f));

  ASSERT_TRUE(plan(request({2, 3, 5, 4}, {2, 3, 6, 4}, {2, 3, 6, 2}), &p).ok());
  EXPECT_EQ(p.B, 2);
  EXPECT_EQ(p.Hq, 3);
  EXPECT_EQ(p.output_shape, (std::vector<int64_t>{2, 3, 5, 2}));
}

TEST(PlanAttention, RejectsMalformedShapesWithNamedArguments) {
  struct Case {
    AttentionRequest r;
    const char* needle;
  };
  std::vector<Case> cases = {
      {request({4}, {4}, {4}), "query must have shape"},
      {request({1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}), "query must have shape"},
      {request({2, 4}, {1, 2, 4}, {2, 4}), "key must have the same rank"},
      {request({2, 4}, {3, 4}, {1, 3, 4}), "value must have the same rank"},
      {request({2, 4}, {3, 5}, {3, 4}), "key must have shape"},
      {request({2, 4}, {3, 4}, {2, 4}), "value must have shape"},
      {request({2, 2, 4}, {3, 2, 4}, {3, 2, 4}), "key batch size"},
      {request({1, 4, 2, 8}, {1, 2, 3, 8}, {1, 2, 3, 8}), "enableGqa"},
      {request({2, 0}, {3, 0}, {3, 1}), "E = 0"},
      {request({-1, 4}, {3, 4}, {3, 4}), "negative"},
      {request({46341, 46341}, {1, 46341}, {1, 1}), "2^30"},
  };
  for (const auto& c : cases) {
    Status s = plan(c.r);
    EXPECT_EQ(s.kind, ErrorKind::kRange) << c.needle;
    EXPECT_NE(s.message.find(c.needle), std::string::npos) << s.message;
  }
}

TEST(PlanAttention, GqaNeedsDivisibleHeads) {
  AttentionRequest r = request({1, 6, 2, 8}, {1, 4, 3, 8}, {1, 4, 3, 8});
  r.enable_gqa = true;
  Status s = plan(r);
  EXPECT_EQ(s.kind, ErrorKind::kRange);
  EXPECT_NE(s.message.find("multiple"), std::string::npos);
  r.key_shape[1] = r.value_shape[1] = 3;
  AttentionPlan p;
  ASSERT_TRUE(plan(r, &p).ok());
  EXPECT_EQ(p.heads_per_kv(), 2);
}

TEST(PlanAttention, MaskBroadcastsLikePyTorch) {
  AttentionRequest r = request({2, 3, 5, 4}, {2, 3, 7, 4}, {2, 3, 7, 4});
  r.mask_kind = MaskKind::kBool;
  AttentionPlan p;
  r.mask_shape = {7};  // one key mask for everything
  ASSERT_TRUE(plan(r, &p).ok());
  EXPECT_EQ(p.mask_stride_k, 1);
  EXPECT_EQ(p.mask_stride_q + p.mask_stride_h + p.mask_stride_b, 0);

  r.mask_shape = {2, 1, 5, 1};  // per batch and query row
  ASSERT_TRUE(plan(r, &p).ok());
  EXPECT_EQ(p.mask_stride_b, 5);
  EXPECT_EQ(p.mask_stride_h, 0);
  EXPECT_EQ(p.mask_stride_q, 1);
  EXPECT_EQ(p.mask_stride_k, 0);

  r.mask_shape = {3, 5, 7};
  ASSERT_TRUE(plan(r, &p).ok());
  EXPECT_EQ(p.mask_stride_h, 35);
  EXPECT_EQ(p.mask_stride_b, 0);

  r.mask_shape = {5, 6};
  Status s = plan(r);
  EXPECT_EQ(s.kind, ErrorKind::kRange);
  EXPECT_NE(s.message.find("does not broadcast"), std::string::npos) << s.message;

  r.mask_shape = {1, 2, 3, 5, 7};
  EXPECT_EQ(plan(r).kind, ErrorKind::kRange);

  // Rank-3 inputs: the mask aligns with [B, Lq, Lk], so its leading dim is the batch.
  AttentionRequest r3 = request({2, 5, 4}, {2, 7, 4}, {2, 7, 4});
  r3.mask_kind = MaskKind::kAdditive;
  r3.mask_shape = {2, 1, 7};
  ASSERT_TRUE(plan(r3, &p).ok());
  EXPECT_EQ(p.mask_stride_b, 7);
  EXPECT_EQ(p.mask_stride_q, 0);
}

// isCausal with attnMask composes them (ONNX Attention), where PyTorch rejects the pair.
TEST(PlanAttention, CausalWithMaskComposes) {
  AttentionRequest r = request({3, 4}, {3, 4}, {3, 4});
  r.mask_kind = MaskKind::kBool;
  r.mask_shape = {3, 3};
  r.causal = CausalAlignment::kTopLeft;
  AttentionPlan p;
  ASSERT_TRUE(plan(r, &p).ok());
  EXPECT_TRUE(p.causal);
  EXPECT_EQ(p.mask_kind, MaskKind::kBool);
  EXPECT_EQ(p.mask_stride_q, 3);
  EXPECT_EQ(p.last_visible_key(0, 1), 1);
}

TEST(PlanAttention, ScaleMustBeFinite) {
  AttentionRequest r = request({3, 4}, {3, 4}, {3, 4});
  r.has_scale = true;
  r.scale = NAN;
  EXPECT_EQ(plan(r).kind, ErrorKind::kRange);
  r.scale = 0;
  AttentionPlan p;
  ASSERT_TRUE(plan(r, &p).ok());
  EXPECT_EQ(p.scale, 0.0f);
}

TEST(PlanAttention, CausalAlignments) {
  AttentionRequest r = request({2, 4}, {5, 4}, {5, 4});
  AttentionPlan p;
  r.causal = CausalAlignment::kTopLeft;
  ASSERT_TRUE(plan(r, &p).ok());
  EXPECT_EQ(p.last_visible_key(0, 0), 0);
  EXPECT_EQ(p.last_visible_key(0, 1), 1);
  r.causal = CausalAlignment::kBottomRight;
  ASSERT_TRUE(plan(r, &p).ok());
  EXPECT_EQ(p.last_visible_key(0, 0), 3);
  EXPECT_EQ(p.last_visible_key(0, 1), 4);
  r = request({5, 4}, {2, 4}, {2, 4});  // Lq > Lk: bottom-right hides everything from early rows
  r.causal = CausalAlignment::kBottomRight;
  ASSERT_TRUE(plan(r, &p).ok());
  EXPECT_LT(p.last_visible_key(0, 2), 0);
  EXPECT_EQ(p.last_visible_key(0, 3), 0);
}

// Query i sits at position i + o (o: the causal offset, or Lk - Lq without isCausal), key j at j.
TEST(PlanAttention, PositionsAndCausalOffsets) {
  AttentionRequest r = request({2, 4}, {5, 4}, {5, 4});  // Lq = 2, Lk = 5
  AttentionPlan p;
  ASSERT_TRUE(plan(r, &p).ok());
  EXPECT_FALSE(p.causal);
  EXPECT_EQ(p.position_offset, 3);
  EXPECT_EQ(p.query_position(0, 1), 4);
  EXPECT_EQ(p.last_visible_key(0, 0), 4);
  r.causal = CausalAlignment::kTopLeft;
  ASSERT_TRUE(plan(r, &p).ok());
  EXPECT_EQ(p.position_offset, 0);
  r.causal = CausalAlignment::kBottomRight;
  ASSERT_TRUE(plan(r, &p).ok());
  EXPECT_EQ(p.position_offset, 3);
  r.causal = CausalAlignment::kOffset;
  for (int64_t offset : {-3, -1, 0, 2, 3, 7}) {
    r.causal_offset = offset;
    ASSERT_TRUE(plan(r, &p).ok());
    EXPECT_EQ(p.position_offset, offset);
    for (int64_t i = 0; i < 2; ++i) EXPECT_EQ(p.last_visible_key(0, i), std::min<int64_t>(i + offset, 4)) << offset;
  }
  // Beyond ±2^53 (what a JavaScript number holds exactly): a RangeError naming the option.
  r.causal_offset = kMaxCausalOffset;
  ASSERT_TRUE(plan(r, &p).ok());
  EXPECT_EQ(p.last_visible_key(0, 1), 4);
  r.causal_offset = -kMaxCausalOffset;
  ASSERT_TRUE(plan(r, &p).ok());
  EXPECT_LT(p.last_visible_key(0, 1), 0);
  r.causal_offset = kMaxCausalOffset + 1;
  const Status s = plan(r);
  EXPECT_EQ(s.kind, ErrorKind::kRange);
  EXPECT_NE(s.message.find("isCausal.offset"), std::string::npos) << s.message;
}

TEST(PlanMatmulAndSoftmax, ValidateShapes) {
  MatmulPlan m;
  ASSERT_TRUE(plan_matmul({2, 3, 4}, {4, 5}, &m).ok());
  EXPECT_EQ(m.batch, 2);
  EXPECT_FALSE(m.b_is_batched);
  EXPECT_EQ(m.output_shape, (std::vector<int64_t>{2, 3, 5}));
  EXPECT_EQ(plan_matmul({3, 4}, {5, 5}, &m).kind, ErrorKind::kRange);
  EXPECT_EQ(plan_matmul({2, 3, 4}, {3, 4, 5}, &m).kind, ErrorKind::kRange);
  SoftmaxPlan s;
  ASSERT_TRUE(plan_softmax({2, 3}, 0.5, &s).ok());
  EXPECT_EQ(s.rows, 2);
  EXPECT_EQ(plan_softmax({3}, 0, &s).kind, ErrorKind::kRange);
  EXPECT_EQ(plan_softmax({}, 1, &s).kind, ErrorKind::kRange);
}

// softcap: 0 = off; a positive float32-finite number; anything else is a RangeError naming it.
TEST(PlanAttention, SoftcapRange) {
  AttentionRequest r;
  r.query_shape = {2, 4};
  r.key_shape = {3, 4};
  r.value_shape = {3, 2};
  AttentionPlan plan;
  for (double ok : {0.0, 1e-40, 0.5, 50.0, 3.4e38}) {
    r.softcap = ok;
    EXPECT_TRUE(plan_attention(r, &plan).ok()) << ok;
    EXPECT_EQ(plan.softcap, static_cast<float>(ok));
  }
  for (double bad : {-1.0, -1e-30, double(NAN), double(INFINITY), -double(INFINITY), 1e39, 1e-50}) {
    r.softcap = bad;
    const Status s = plan_attention(r, &plan);
    EXPECT_EQ(s.kind, ErrorKind::kRange) << bad;
    EXPECT_NE(s.message.find("softcap"), std::string::npos) << s.message;
  }
}

}  // namespace
}  // namespace sdpa
