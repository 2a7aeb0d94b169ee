#include "extras/modules.h"

#include <algorithm>
#include <cmath>

#include "extras/prng.h"

namespace sdpa {
namespace {

Status check_positive_int(double value, const std::string& name) {
  if (!(value >= 1 && value <= static_cast<double>(kMaxTensorElements) && std::floor(value) == value)) {
    return Status::RangeError(name + " must be an integer >= 1; got " + std::to_string(value));
  }
  return Status::Ok();
}

std::string dims(int64_t a, int64_t b) { return shape_to_string({a, b}); }

}  // namespace

Status plan_self_attention(double d_model, double d_k, double d_v, double seed) {
  for (auto [name, v] : {std::pair<const char*, double>{"dModel", d_model}, {"dK", d_k}, {"dV", d_v}}) {
    Status s = check_positive_int(v, name);
    if (!s.ok()) return s;
  }
  if (d_model * std::max(d_k, d_v) > static_cast<double>(kMaxTensorElements)) {
    return Status::RangeError("the projection matrices [dModel, dK] / [dModel, dV] have more than 2^30 elements");
  }
  return check_seed(seed, "seed");
}

Status check_self_attention_weights(const std::map<std::string, std::vector<int64_t>>& shapes,
                                    int64_t d_model, int64_t d_k, int64_t d_v) {
  const std::map<std::string, std::vector<int64_t>> expected = {
      {"wQ", {d_model, d_k}}, {"wK", {d_model, d_k}}, {"wV", {d_model, d_v}}};
  for (const auto& [name, shape] : shapes) {
    const auto it = expected.find(name);
    if (it == expected.end()) return Status::TypeError("weights has an unknown entry '" + name + "'; expected wQ, wK, wV");
    if (shape != it->second) {
      return Status::RangeError("weights." + name + " must have shape " + shape_to_string(it->second) +
                                (name == "wV" ? " ([dModel, dV])" : " ([dModel, dK])") + "; got " +
                                shape_to_string(shape));
    }
  }
  if (!shapes.empty() && shapes.size() != 3) {
    return Status::TypeError("weights needs all of wQ, wK and wV (or none: Xavier init from seed)");
  }
  return Status::Ok();
}

Status check_self_attention_input(const std::vector<int64_t>& x, int64_t d_model) {
  if ((x.size() != 2 && x.size() != 3) || x.back() != d_model) {
    return Status::RangeError("x must have shape [L, dModel] or [B, L, dModel] with dModel = " +
                              std::to_string(d_model) + "; got " + shape_to_string(x));
  }
  return Status::Ok();
}

Status plan_multihead(const MultiheadConfig& c) {
  for (auto [name, v] : {std::pair<const char*, double>{"embedDim", c.embed_dim},
                         {"numHeads", c.num_heads},
                         {"numKvHeads", c.num_kv_heads},
                         {"kdim", c.kdim},
                         {"vdim", c.vdim}}) {
    Status s = check_positive_int(v, name);
    if (!s.ok()) return s;
  }
  const auto E = static_cast<int64_t>(c.embed_dim), H = static_cast<int64_t>(c.num_heads),
             Hkv = static_cast<int64_t>(c.num_kv_heads), kdim = static_cast<int64_t>(c.kdim),
             vdim = static_cast<int64_t>(c.vdim);
  if (E % H != 0) {
    return Status::RangeError("embedDim = " + std::to_string(E) + " must be divisible by numHeads = " +
                              std::to_string(H));
  }
  if (H % Hkv != 0) {
    return Status::RangeError("numHeads = " + std::to_string(H) + " must be a multiple of numKvHeads = " +
                              std::to_string(Hkv));
  }
  if (static_cast<double>(E) * std::max({E, kdim, vdim}) * 3 > static_cast<double>(kMaxTensorElements)) {
    return Status::RangeError("the projection matrices have more than 2^30 elements");
  }
  Status s = check_seed(c.seed, "seed");
  if (!s.ok() || c.weight_shapes.empty()) return s;

  const int64_t kv = Hkv * (E / H);
  const std::map<std::string, std::vector<int64_t>> expected = {
      {"inProjWeight", {3 * E, E}}, {"inProjBias", {3 * E}},  {"qProjWeight", {E, E}},
      {"kProjWeight", {kv, kdim}},  {"vProjWeight", {kv, vdim}}, {"qProjBias", {E}},
      {"kProjBias", {kv}},          {"vProjBias", {kv}},        {"outProjWeight", {E, E}},
      {"outProjBias", {E}}};
  for (const auto& [name, shape] : c.weight_shapes) {
    const auto it = expected.find(name);
    if (it == expected.end()) return Status::TypeError("weights has an unknown entry '" + name + "'");
    if (shape != it->second) {
      return Status::RangeError("weights." + name + " must have shape " + shape_to_string(it->second) +
                                "; got " + shape_to_string(shape));
    }
  }
  auto has = [&](const char* n) { return c.weight_shapes.count(n) > 0; };
  const bool packed = has("inProjWeight");
  const bool separate = has("qProjWeight") || has("kProjWeight") || has("vProjWeight");
  if (packed == separate || (separate && !(has("qProjWeight") && has("kProjWeight") && has("vProjWeight")))) {
    return Status::TypeError("weights needs either inProjWeight [3E, E] or all of qProjWeight, kProjWeight, vProjWeight");
  }
  if (packed && (Hkv != H || kdim != E || vdim != E)) {
    return Status::TypeError("weights.inProjWeight (packed [3E, E]) needs kdim = vdim = embedDim and numKvHeads = numHeads; "
                             "pass qProjWeight, kProjWeight, vProjWeight instead");
  }
  if (has("inProjBias") && !packed) return Status::TypeError("weights.inProjBias goes with inProjWeight");
  if (!has("outProjWeight")) return Status::TypeError("weights needs outProjWeight [E, E] = " + dims(E, E));
  if (!c.bias) {
    for (const char* n : {"inProjBias", "qProjBias", "kProjBias", "vProjBias", "outProjBias"}) {
      if (has(n)) return Status::TypeError(std::string("weights.") + n + " given, but bias is false");
    }
  }
  return Status::Ok();
}

Status check_multihead_inputs(const MultiheadInputs& in, MultiheadDims* d) {
  const size_t rank = in.query_shape.size();
  const std::string layout = in.batch_first ? "[B, L, E]" : "[L, B, E]";
  if (rank != 2 && rank != 3) {
    return Status::RangeError("query must have shape [L, E] or " + layout + " (batchFirst " +
                              (in.batch_first ? "true" : "false") + "); got " + shape_to_string(in.query_shape));
  }
  d->unbatched = rank == 2;
  d->B = d->unbatched ? 1 : in.query_shape[in.batch_first ? 0 : 1];
  d->L = in.query_shape[d->unbatched ? 0 : (in.batch_first ? 1 : 0)];
  if (in.query_shape.back() != in.embed_dim) {
    return Status::RangeError("query's last dim must be embedDim = " + std::to_string(in.embed_dim) + "; got " +
                              shape_to_string(in.query_shape));
  }
  auto expect = [&](const char* name, const std::vector<int64_t>& shape, int64_t dim) -> Status {
    std::vector<int64_t> want;
    if (d->unbatched) want = {-1, dim};
    else want = in.batch_first ? std::vector<int64_t>{d->B, -1, dim} : std::vector<int64_t>{-1, d->B, dim};
    bool ok = shape.size() == want.size();
    for (size_t i = 0; ok && i < want.size(); ++i) ok = want[i] < 0 || shape[i] == want[i];
    if (!ok) {
      const std::string b = std::to_string(d->B), dd = std::to_string(dim);
      const std::string w = d->unbatched ? "[S, " + dd + "]" : in.batch_first ? "[" + b + ", S, " + dd + "]" : "[S, " + b + ", " + dd + "]";
      return Status::RangeError(std::string(name) + " must have shape " + w + " (query's batch, " + name +
                                (name[0] == 'k' ? " dim kdim" : " dim vdim") + "); got " + shape_to_string(shape));
    }
    return Status::Ok();
  };
  Status s = expect("key", in.key_shape, in.kdim);
  if (!s.ok()) return s;
  s = expect("value", in.value_shape, in.vdim);
  if (!s.ok()) return s;
  d->S = in.key_shape[d->unbatched ? 0 : (in.batch_first ? 1 : 0)];
  const size_t s_axis = d->unbatched ? 0 : (in.batch_first ? 1 : 0);
  if (in.value_shape[s_axis] != d->S) {
    return Status::RangeError("value must have key's length S = " + std::to_string(d->S) + "; got " +
                              shape_to_string(in.value_shape));
  }
  if (in.has_key_padding_mask) {
    const std::vector<int64_t> want = d->unbatched ? std::vector<int64_t>{d->S} : std::vector<int64_t>{d->B, d->S};
    if (in.key_padding_mask_shape != want) {
      return Status::RangeError("keyPaddingMask must have shape " + shape_to_string(want) + " ([B, S]; [S] unbatched); got " +
                                shape_to_string(in.key_padding_mask_shape));
    }
  }
  if (in.has_attn_mask) {
    const std::vector<int64_t> two = {d->L, d->S}, three = {d->B * in.num_heads, d->L, d->S};
    if (in.attn_mask_shape != two && (d->unbatched || in.attn_mask_shape != three)) {
      return Status::RangeError("attnMask must have shape " + shape_to_string(two) + " ([L, S])" +
                                (d->unbatched ? "" : " or " + shape_to_string(three) + " ([B·numHeads, L, S])") +
                                "; got " + shape_to_string(in.attn_mask_shape));
    }
  }
  return Status::Ok();
}

}  // namespace sdpa
