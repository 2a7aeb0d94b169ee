// attention_weights.wgsl: the attention weights, for calls with returnWeights.
//
// Computes weights[i, j] = exp(s_ij - m_i) / l_i (s_ij the scaled, softcapped, biased, masked
// score, as in the flash kernels) for every query row i and
// key j of one chunk, where (m_i, l_i) are the row's softmax max and denominator written by
// attention_flash.wgsl (WRITE_STATS) in the same submission. Hidden keys (bool 0, additive -inf,
// causal) get 0 and are never read; rows that see no key (l = 0) get zeros; a row whose flash
// pass saw a NaN score (m = NaN) is NaN throughout, as in the float reference.
//
// Tiling: one invocation per weight; a workgroup covers KEYS consecutive keys of one query row
// (grid x = key tiles, y = the chunk's query rows, both cut into dispatches of at most
// maxComputeWorkgroupsPerDimension by the glue). The score is recomputed from Q and K (E
// multiply-adds), exactly as the flash pass computed it, so only [rows, Lk] is written and
// nothing larger than the output weights is ever stored.
//
// Chosen whenever a call asks for the weights (returnWeights): it runs after the flash kernel.
// With STAGE > 0 it writes a stage of the scores instead (returnScores, ONNX's qk_matmul_output):
// 1 the scaled scores, 2 after the softcap, 3 after ALiBi and the masks (-inf where hidden); those
// need no statistics and cover every key.
//
// Prepended by the C++ glue (WeightsVariant::wgsl_constants): the element types' declarations
// of query and key (attention_common.wgsl.inc), then
//   const KEYS: u32; const MASK_KIND: u32 (0 none, 1 bool, 2 additive); const CAUSAL: bool;
//   const STAGE: u32; const RANGES, ALIBI, SINKS, DOCUMENTS: bool (attention_common.wgsl.inc).

//! include attention_common.wgsl.inc

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> query: array<QueryElement>;
@group(0) @binding(2) var<storage, read> key: array<KeyElement>;
@group(0) @binding(3) var<storage, read> mask: array<u32>;
@group(0) @binding(4) var<storage, read> stats: array<f32>;
@group(0) @binding(5) var<storage, read_write> weights: array<f32>;
@group(0) @binding(6) var<storage, read> variants: array<u32>;

@compute @workgroup_size(KEYS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let j = (wg.x + p.x_base) * KEYS + t;
  let r = wg.y + p.y_base;  // query row within the chunk: head · rows + row
  if (j >= p.Lk || r >= p.nbh * p.rows) { return; }
  let head = r / p.rows;
  let i = p.row0 + r % p.rows;
  let bh = p.bh0 + head;
  let b = bh / p.Hq;
  let h = bh % p.Hq;
  let kv = b * p.Hkv + h / p.group - p.kv0;
  let out = r * p.Lk + j;
  let mask_idx = b * p.mask_sb + h * p.mask_sh + i * p.mask_sq + j * p.mask_sk;
  let q0 = r * p.E;
  let k0 = kv * p.key_stride + j * p.E;

  // The scaled (and softcapped) scores of every key, hidden or not.
  if (STAGE == 1u || STAGE == 2u) {
    var qk = 0.0;
    for (var e = 0u; e < p.E; e += 4u) { qk += dot(query4(q0, e, p.E), key4(k0, e, p.E)); }
    var s = qk * p.scale;
    if (STAGE == 2u && p.softcap_on != 0u) { s = softcapped(s); }
    weights[out] = s;
    return;
  }

  var m = 0.0;
  var l = 0.0;
  if (STAGE == 0u) {
    m = stats[2u * r];
    l = stats[2u * r + 1u];
    if (is_nan(m)) { weights[out] = bitcast<f32>(p.nan_bits); return; }
    if (l == 0.0) { weights[out] = 0.0; return; }
  }

  var vis = i32(j) >= visible_first(b, i) && i32(j) <= visible_last(b, i);
  if (vis) { vis = same_document(b, i, j); }
  if (vis && MASK_KIND == 1u) { vis = mask_bool(mask_idx); }
  var hidden = true;
  var score = 0.0;
  if (vis) {
    // The flash pass's sum exactly: dot products of zero-padded vec4s, in order.
    var qk = 0.0;
    for (var e = 0u; e < p.E; e += 4u) { qk += dot(query4(q0, e, p.E), key4(k0, e, p.E)); }
    let scored = scaled_masked_score(qk, mask_idx, alibi_bias(b, h, i, j));
    hidden = scored.hidden;
    score = scored.s;
  }
  if (STAGE == 3u) {
    weights[out] = select(score, bitcast<f32>(p.neg_inf_bits), hidden);
    return;
  }
  weights[out] = select(exp(score - m) / l, 0.0, hidden);
}
