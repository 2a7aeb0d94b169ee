// attention_backward_reduce.wgsl: the backward's sums, one invocation per result, each summing in
// a fixed order (deterministic, no atomics). STAGE 0: the additive mask's gradient, element e of
// the mask in its own shape = Σ dS over the dims where the mask broadcasts (dS, the [R, Lk]
// region after dQ in `grads`, written by attention_backward_dq.wgsl); STAGE 1: ∂L/∂sink_h = Σ
// over batches and rows of the rows' sink terms (attention_backward_dq.wgsl, or STAGE 3). Both go
// to rowstats after its row regions: the mask's gradient, then the sinks'.
// STAGE 2 and 3 combine the p.splits segments of a pass (`grads` its gradient buffer, the
// layout in attention_backward_common.wgsl.inc): each output element is its slots' sum in segment
// order, scaled for dK and dQ. STAGE 2: dK then dV. STAGE 3: dQ, then with SINKS one invocation
// per row for its sink term (whether any segment saw a key) into rowstats [2R, 3R).
// Constants: those of attention_backward_common.wgsl.inc, INVOCATIONS, STAGE.

//! include attention_common.wgsl.inc
//! include attention_backward_common.wgsl.inc

// One coordinate of mask element `e` along a dim of `extent` with stride `stride` (0: the mask
// broadcasts there): [first, end) is the range summed over.
fn mask_axis(e: u32, stride: u32, extent: u32) -> vec2<u32> {
  if (stride == 0u) { return vec2<u32>(0u, extent); }
  let c = (e / stride) % extent;
  return vec2<u32>(c, c + 1u);
}

@compute @workgroup_size(INVOCATIONS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let n = (wg.x + p.x_base) * INVOCATIONS + t;
  let rows = total_rows();
  if (STAGE == 0u) {
    let count = mask_elements();
    if (n >= count) { return; }
    let b_range = mask_axis(n, p.mask_sb, p.B);
    let h_range = mask_axis(n, p.mask_sh, p.Hq);
    let i_range = mask_axis(n, p.mask_sq, p.Lq);
    let j_range = mask_axis(n, p.mask_sk, p.Lk);
    let ds = rows * p.E;
    var sum = 0.0;
    for (var b = b_range.x; b < b_range.y; b++) {
      for (var h = h_range.x; h < h_range.y; h++) {
        for (var i = i_range.x; i < i_range.y; i++) {
          let at = ds + ((b * p.Hq + h) * p.Lq + i) * p.Lk;
          for (var j = j_range.x; j < j_range.y; j++) { sum += grads[at + j]; }
        }
      }
    }
    rowstats[reductions_at() + n] = sum;
  } else if (STAGE == 2u) {
    let count = dkdv_floats();
    if (n >= count) { return; }
    var sum = 0.0;
    for (var s = 0u; s < p.splits; s++) { sum += grads[(1u + s) * count + n]; }
    grads[n] = select(sum, sum * p.scale, n < p.B * p.Hkv * p.Lk * p.E);
  } else if (STAGE == 3u) {
    let dq = rows * p.E;
    if (n < dq) {
      var sum = 0.0;
      for (var s = 0u; s < p.splits; s++) { sum += grads[dq_slot(s) + n]; }
      grads[n] = sum * p.scale;
    } else if (SINKS && n < dq + rows) {
      let r = n - dq;
      var saw_key = false;
      for (var s = 0u; s < p.splits; s++) { saw_key = saw_key || grads[saw_key_slot(s) + r] != 0.0; }
      let bh = r / p.Lq;
      rowstats[2u * rows + r] = sink_term(grad_row(bh / p.Hq, bh % p.Hq, r % p.Lq), saw_key);
    }
  } else {
    if (n >= p.Hq) { return; }
    var sum = 0.0;
    for (var b = 0u; b < p.B; b++) {
      let at = 2u * rows + (b * p.Hq + n) * p.Lq;
      for (var i = 0u; i < p.Lq; i++) { sum += rowstats[at + i]; }
    }
    rowstats[reductions_at() + d_mask_floats() + n] = sum;
  }
}
