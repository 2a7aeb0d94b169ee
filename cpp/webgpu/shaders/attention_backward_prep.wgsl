// attention_backward_prep.wgsl: the backward's first pass, one invocation per query row r:
// D_r = dO_r·O_r (O, the forward's output, bound as `grads`) into rowstats [R, 2R), and r's
// normalizer (row_normalizer) into [3R, 4R).
// Constants: those of attention_backward_common.wgsl.inc and INVOCATIONS.

//! include attention_common.wgsl.inc
//! include attention_backward_common.wgsl.inc

// 1, or for a row whose |lse| passes RENORMALIZE_FROM (kBackwardRenormalizeFrom in
// cpp/core/problem.h: its float32 log-sum-exp may have lost log Σ) 1 / Σ_j e^(s_j − lse) over its
// visible keys, the sink's term included, so that its P sums to 1. The scores are recomputed as
// weight() scores them; only visible keys are read. A NaN or infinite lse keeps 1.
fn row_normalizer(b: u32, h: u32, i: u32) -> f32 {
  var row = grad_row(b, h, i);
  let magnitude = bitcast<u32>(row.lse) & 0x7fffffffu;
  if (magnitude >= 0x7f800000u || abs(row.lse) < RENORMALIZE_FROM) { return 1.0; }
  row.norm = 1.0;
  var sum = 0.0;
  let last = min(row.last, i32(p.Lk) - 1);
  for (var j = u32(max(row.first, 0)); i32(j) <= last; j++) {
    if (!visible(row, j)) { continue; }
    var qk = 0.0;
    for (var x = 0u; x < E4; x++) {
      qk += dot(query4(row.row * p.E, 4u * x, p.E), key4(row.kv * p.key_stride + j * p.E, 4u * x, p.E));
    }
    let w = weight(row, j, qk);
    if (!w.hidden) { sum += w.p; }
  }
  if (SINKS) {
    let sink = sink_logit(h);
    if (!is_neg_inf(sink)) { sum += exp(sink - row.lse); }
  }
  return select(1.0, 1.0 / sum, sum > 0.0);
}

@compute @workgroup_size(INVOCATIONS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let r = (wg.x + p.x_base) * INVOCATIONS + t;
  let rows = total_rows();
  if (r >= rows) { return; }
  var d = 0.0;
  for (var c = 0u; c < p.Ev; c++) { d += d_output_at(r * p.Ev + c) * grads[r * p.Ev + c]; }
  rowstats[rows + r] = d;
  let bh = r / p.Lq;
  rowstats[3u * rows + r] = row_normalizer(bh / p.Hq, bh % p.Hq, r % p.Lq);
}
