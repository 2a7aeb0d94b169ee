// attention_weights.wgsl: the attention weights, for calls with returnWeights.
//
// Computes weights[i, j] = exp(q_i·k_j · scale + mask_ij - m_i) / l_i for every query row i and
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
//
// Prepended by the C++ glue (WeightsVariant::wgsl_constants):
//   const KEYS: u32; const MASK_KIND: u32 (0 none, 1 bool, 2 additive); const CAUSAL: bool;

//! include attention_common.wgsl.inc

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> query: array<f32>;
@group(0) @binding(2) var<storage, read> key: array<f32>;
@group(0) @binding(3) var<storage, read> mask: array<u32>;
@group(0) @binding(4) var<storage, read> stats: array<f32>;
@group(0) @binding(5) var<storage, read_write> weights: array<f32>;

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

  let m = stats[2u * r];
  let l = stats[2u * r + 1u];
  if (is_nan(m)) { weights[out] = bitcast<f32>(p.nan_bits); return; }
  if (l == 0.0) { weights[out] = 0.0; return; }

  var vis = true;
  if (CAUSAL) { vis = i32(j) <= min(i32(i) + p.causal_offset, i32(p.Lk) - 1); }
  let mask_idx = b * p.mask_sb + h * p.mask_sh + i * p.mask_sq + j * p.mask_sk;
  if (vis && MASK_KIND == 1u) { vis = mask_bool(mask_idx); }
  var w = 0.0;
  if (vis) {
    let q0 = r * p.E;
    let k0 = (kv * p.Lk + j) * p.E;
    // The flash pass's sum exactly: dot products of zero-padded vec4s, in order.
    var qk = 0.0;
    for (var e = 0u; e < p.E; e += 4u) { qk += dot(query4(q0, e, p.E), key4(k0, e, p.E)); }
    let scored = scaled_masked_score(qk, mask_idx);
    if (!scored.hidden) { w = exp(scored.s - m) / l; }
  }
  weights[out] = w;
}
