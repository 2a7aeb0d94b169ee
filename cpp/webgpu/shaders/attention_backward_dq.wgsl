// attention_backward_dq.wgsl: dQ (and, for the additive mask's gradient, dS), one workgroup per
// (query head, tile of ROWS query rows), one invocation per row i, its query and dO rows and its
// dQ accumulator in registers. The grid (BackwardTileGrid in cpp/webgpu/plan.h) runs over the
// heads in x and the row tiles in y, the last tile first with LAST_TILE_FIRST. FlashAttention-2's
// loop over key tiles of KEY_BLOCK keys (K and V in workgroup memory) from the first key the
// tile's first row sees to the last its last row sees; per visible key j, with P = e^(s − lse_i)
// recomputed:
//   dS = P·(dO_i·V_j − D_i),   dQ_i += dS·(softcap slope)·K_j
// and dQ is scaled once at the end. With sinks, the row's share of ∂L/∂sink, −e^(sink − lse_i)·D_i,
// goes to rowstats [2R, 3R) for attention_backward_reduce.wgsl: 0 for a row that saw no visible
// key (its D = Σ_j P_j·dP_j is 0, whatever dO·O holds) or a head without a sink, NaN for a NaN row.
// With WRITE_DS, dS (before the softcap's slope: the mask is
// added after the softcap) goes to the [R, Lk] dS region, which attention_backward_reduce.wgsl
// sums into the mask's shape; entries of hidden keys stay 0 (a fresh buffer). Each row is written
// by one invocation: no atomics.
// Constants: those of attention_backward_common.wgsl.inc, ROWS, KEY_BLOCK, WRITE_DS, LAST_TILE_FIRST.

//! include attention_common.wgsl.inc
//! include attention_backward_common.wgsl.inc

var<workgroup> k_tile: array<vec4<f32>, KEY_BLOCK * E4>;
var<workgroup> v_tile: array<vec4<f32>, KEY_BLOCK * EV4>;

@compute @workgroup_size(ROWS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let bh = wg.x + p.x_base;  // b·Hq + h
  let rank = wg.y + p.y_base;
  let tile = select(rank, (p.Lq + ROWS - 1u) / ROWS - 1u - rank, LAST_TILE_FIRST);
  let b = bh / p.Hq;
  let h = bh % p.Hq;
  let i_first = tile * ROWS;
  let i_last = min(i_first + ROWS, p.Lq) - 1u;
  let i = i_first + t;
  let in_range = i < p.Lq;
  let row = grad_row(b, h, min(i, p.Lq - 1u));
  let kv = row.kv;
  let row_active = in_range && row.sees;

  var q_row: array<vec4<f32>, E4>;
  var do_row: array<vec4<f32>, EV4>;
  var dq: array<vec4<f32>, E4>;
  if (row_active) {
    for (var e4 = 0u; e4 < E4; e4++) { q_row[e4] = query4(row.row * p.E, 4u * e4, p.E); }
    for (var c4 = 0u; c4 < EV4; c4++) { do_row[c4] = d_output4(row.row * p.Ev, 4u * c4); }
  }
  let ds_base = total_rows() * p.E + row.row * p.Lk;
  var saw_key = false;

  let last = visible_last(b, i_last);
  for (var j0 = u32(visible_first(b, i_first)) / KEY_BLOCK * KEY_BLOCK; i32(j0) <= last; j0 += KEY_BLOCK) {
    let nk = min(KEY_BLOCK, p.Lk - j0);
    for (var x = t; x < KEY_BLOCK * E4; x += ROWS) {
      let jj = x / E4;
      var k4 = vec4<f32>(0.0);
      if (jj < nk) { k4 = key4(kv * p.key_stride + (j0 + jj) * p.E, 4u * (x % E4), p.E); }
      k_tile[x] = k4;
    }
    for (var x = t; x < KEY_BLOCK * EV4; x += ROWS) {
      let jj = x / EV4;
      var v4 = vec4<f32>(0.0);
      if (jj < nk) { v4 = value4(kv * p.value_stride + (j0 + jj) * p.Ev, 4u * (x % EV4), p.Ev); }
      v_tile[x] = v4;
    }
    workgroupBarrier();
    if (row_active) {
      for (var jj = 0u; jj < nk; jj++) {
        let j = j0 + jj;
        if (!visible(row, j)) { continue; }
        var qk = 0.0;
        for (var e4 = 0u; e4 < E4; e4++) { qk += dot(q_row[e4], k_tile[jj * E4 + e4]); }
        let w = weight(row, j, qk);
        if (w.hidden) { continue; }
        saw_key = true;
        var dp = 0.0;
        for (var c4 = 0u; c4 < EV4; c4++) { dp += dot(do_row[c4], v_tile[jj * EV4 + c4]); }
        let ds = w.p * (dp - row.delta);
        if (WRITE_DS) { grads[ds_base + j] = ds; }
        let g = ds * w.slope;
        for (var e4 = 0u; e4 < E4; e4++) { dq[e4] += g * k_tile[jj * E4 + e4]; }
      }
    }
    workgroupBarrier();
  }

  if (!in_range) { return; }
  for (var e = 0u; e < p.E; e++) { grads[row.row * p.E + e] = dq[e / 4u][e % 4u] * p.scale; }
  if (SINKS) {
    let sink = sink_logit(h);
    var term = 0.0;
    if (saw_key && !is_neg_inf(sink)) { term = -exp(sink - row.lse) * row.delta; }
    if (row.nan_row) { term = bitcast<f32>(p.nan_bits); }
    rowstats[2u * total_rows() + row.row] = term;
  }
}
