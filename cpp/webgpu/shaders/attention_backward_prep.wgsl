// attention_backward_prep.wgsl: the backward's first pass, one invocation per query row r:
// D_r = dO_r·O_r (O, the forward's output, bound as `grads`) into rowstats [R, 2R), and with
// sinks the row's share of ∂L/∂sink, −e^(sink − lse_r)·D_r (0 for a head without a sink, NaN for
// a NaN row) into [2R, 3R), summed per head by attention_backward_reduce.wgsl.
// Constants: those of attention_backward_common.wgsl.inc and INVOCATIONS.

//! include attention_common.wgsl.inc
//! include attention_backward_common.wgsl.inc

@compute @workgroup_size(INVOCATIONS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let r = (wg.x + p.x_base) * INVOCATIONS + t;
  let rows = total_rows();
  if (r >= rows) { return; }
  var d = 0.0;
  for (var c = 0u; c < p.Ev; c++) { d += d_output[r * p.Ev + c] * grads[r * p.Ev + c]; }
  rowstats[rows + r] = d;
  if (SINKS) {
    let sink = sink_logit((r / p.Lq) % p.Hq);
    let lse = rowstats[r];
    var term = 0.0;
    if (!is_neg_inf(sink)) { term = -exp(sink - lse) * d; }
    if (is_nan(lse)) { term = bitcast<f32>(p.nan_bits); }
    rowstats[2u * rows + r] = term;
  }
}
