// attention_backward_prep.wgsl: the backward's first pass, one invocation per query row r:
// D_r = dO_r·O_r (O, the forward's output, bound as `grads`) into rowstats [R, 2R).
// Constants: those of attention_backward_common.wgsl.inc and INVOCATIONS.

//! include attention_common.wgsl.inc
//! include attention_backward_common.wgsl.inc

@compute @workgroup_size(INVOCATIONS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let r = (wg.x + p.x_base) * INVOCATIONS + t;
  let rows = total_rows();
  if (r >= rows) { return; }
  var d = 0.0;
  for (var c = 0u; c < p.Ev; c++) { d += d_output_at(r * p.Ev + c) * grads[r * p.Ev + c]; }
  rowstats[rows + r] = d;
}
