// Validation of the attention modules' configurations and inputs (the TypeScript layer composes
// the modules from the core's matmul, attention, dropout and Xavier init). Every message names
// the argument and the expected shape, as plan_attention's do.
//   Self-attention (single head, no bias): x [..., L, dModel] -> Q = x·W_Q, K = x·W_K, V = x·W_V
//     with W_Q, W_K [dModel, dK], W_V [dModel, dV] -> softmax(QKᵀ/√dK)·V [..., L, dV].
//   Multi-head attention (PyTorch nn.MultiheadAttention numerics): E = embedDim, numHeads heads of
//     hd = E / numHeads dims, numKvHeads key/value heads (GQA/MQA; numHeads % numKvHeads == 0).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/problem.h"

namespace sdpa {

// Each value arrives as a JS number: integers >= 1 are checked here.
Status plan_self_attention(double d_model, double d_k, double d_v, double seed);

// Given projection weights (any of wQ, wK [dModel, dK], wV [dModel, dV]; empty shape = not given).
Status check_self_attention_weights(const std::map<std::string, std::vector<int64_t>>& shapes,
                                    int64_t d_model, int64_t d_k, int64_t d_v);

// x must be [L, dModel] or [B, L, dModel].
Status check_self_attention_input(const std::vector<int64_t>& x_shape, int64_t d_model);

struct MultiheadConfig {
  double embed_dim = 0, num_heads = 0, num_kv_heads = 0, kdim = 0, vdim = 0, seed = 0;
  bool bias = true;
  // Given weights, by PyTorch name (inProjWeight, qProjWeight, ..., outProjBias); empty = init.
  std::map<std::string, std::vector<int64_t>> weight_shapes;
};
Status plan_multihead(const MultiheadConfig& config);

struct MultiheadInputs {
  int64_t embed_dim = 0, num_heads = 0, kdim = 0, vdim = 0;
  bool batch_first = false;
  std::vector<int64_t> query_shape, key_shape, value_shape;
  std::vector<int64_t> key_padding_mask_shape;  // empty: none
  std::vector<int64_t> attn_mask_shape;         // empty: none
  bool has_key_padding_mask = false, has_attn_mask = false;
};
struct MultiheadDims {
  int64_t B = 0, L = 0, S = 0;
  bool unbatched = false;
};
Status check_multihead_inputs(const MultiheadInputs& in, MultiheadDims* dims);

}  // namespace sdpa
