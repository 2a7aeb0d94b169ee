// attention_backward_dq.wgsl: dQ (and, for the additive mask's gradient, dS), one workgroup per
// (query head, tile of ROWS query rows, segment of keys), LANES lanes per row i
// (attention_backward_lanes.wgsl.inc), each holding its share of the row's query, dO and dQ
// columns in registers. The grid (BackwardTileGrid in cpp/webgpu/plan.h) runs over the heads in x
// and, in y, the row tiles (the last tile first with LAST_TILE_FIRST), each tile's p.splits
// segments of p.split_keys keys consecutive. FlashAttention-2's loop over key tiles of KEY_BLOCK
// keys (K and V in workgroup memory, loaded by the whole workgroup) within the segment, from the
// first key the tile's first row sees to the last its last row sees; per visible key j, with
// P = e^(s − lse_i) recomputed from q·k (the lanes' parts summed by lanes_sum):
//   dS = P·(dO_i·V_j − D_i),   dQ_i += dS·(softcap slope)·K_j
// With one segment dQ is scaled once at the end, and with sinks the row's share of ∂L/∂sink
// (sink_term) goes to rowstats [2R, 3R) for attention_backward_reduce.wgsl. With more, each
// segment's dQ sums (an empty segment's zeros) go unscaled to its scratch slot, and with sinks
// whether the row saw a key in the segment; attention_backward_reduce.wgsl (STAGE 3) adds the
// slots in segment order and writes the sink terms. With WRITE_DS, dS (before the softcap's
// slope: the mask is added after the softcap) goes to the [R, Lk] dS region, which
// attention_backward_reduce.wgsl sums into the mask's shape; entries of hidden keys stay 0 (a
// fresh buffer). Each element is written by one lane of one workgroup (dS, the sink term and the
// flag by lane 0): no atomics.
// Constants: those of attention_backward_common.wgsl.inc and attention_backward_lanes.wgsl.inc,
// ROWS, KEY_BLOCK, WRITE_DS, LAST_TILE_FIRST.

//! include attention_common.wgsl.inc
//! include attention_backward_common.wgsl.inc
//! include attention_backward_lanes.wgsl.inc

const TILE_INVOCATIONS: u32 = ROWS * LANES;

var<workgroup> k_tile: array<vec4<f32>, KEY_BLOCK * E4>;
var<workgroup> v_tile: array<vec4<f32>, KEY_BLOCK * EV4>;

@compute @workgroup_size(TILE_INVOCATIONS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let bh = wg.x + p.x_base;  // b·Hq + h
  let y = wg.y + p.y_base;
  let rank = y / p.splits;
  let segment = y % p.splits;
  let tile = select(rank, (p.Lq + ROWS - 1u) / ROWS - 1u - rank, LAST_TILE_FIRST);
  let j_begin = segment * p.split_keys;  // the segment's keys [j_begin, j_end): whole blocks
  let j_end = min(j_begin + p.split_keys, p.Lk);
  let b = bh / p.Hq;
  let h = bh % p.Hq;
  let i_first = tile * ROWS;
  let i_last = min(i_first + ROWS, p.Lq) - 1u;
  let lane = t % LANES;
  let i = i_first + t / LANES;
  let in_range = i < p.Lq;
  let row = grad_row(b, h, min(i, p.Lq - 1u));
  let kv = row.kv;
  let row_active = in_range && row.sees;

  // x-th vec4 of the lane: columns 4·(lane + LANES·x) … + 3.
  var q_part: array<vec4<f32>, LANE_E4>;
  var do_part: array<vec4<f32>, LANE_EV4>;
  var dq: array<vec4<f32>, LANE_E4>;
  if (row_active) {
    for (var x = 0u; x < LANE_E4; x++) { q_part[x] = query4(row.row * p.E, 4u * (lane + LANES * x), p.E); }
    for (var x = 0u; x < LANE_EV4; x++) { do_part[x] = d_output4(row.row * p.Ev, 4u * (lane + LANES * x), p.Ev); }
  }
  let ds_base = total_rows() * p.E + row.row * p.Lk;
  var saw_key = false;

  let last = min(visible_last(b, i_last), i32(j_end) - 1);
  for (var j0 = max(j_begin, u32(visible_first(b, i_first)) / KEY_BLOCK * KEY_BLOCK); i32(j0) <= last; j0 += KEY_BLOCK) {
    let nk = min(KEY_BLOCK, p.Lk - j0);
    for (var x = t; x < KEY_BLOCK * E4; x += TILE_INVOCATIONS) {
      let jj = x / E4;
      var k4 = vec4<f32>(0.0);
      if (jj < nk) { k4 = key4(kv * p.key_stride + (j0 + jj) * p.E, 4u * (x % E4), p.E); }
      k_tile[x] = k4;
    }
    for (var x = t; x < KEY_BLOCK * EV4; x += TILE_INVOCATIONS) {
      let jj = x / EV4;
      var v4 = vec4<f32>(0.0);
      if (jj < nk) { v4 = value4(kv * p.value_stride + (j0 + jj) * p.Ev, 4u * (x % EV4), p.Ev); }
      v_tile[x] = v4;
    }
    workgroupBarrier();
    // Workgroup-uniform: lanes_sum runs for every key, the key's work only where the row sees it.
    for (var jj = 0u; jj < nk; jj++) {
      let j = j0 + jj;
      let sees_key = row_active && visible(row, j);
      var part = vec2<f32>(0.0);  // (q·k, dO·v) over the lane's columns
      if (sees_key) {
        for (var x = 0u; x < LANE_E4; x++) { part.x += dot(q_part[x], k_tile[jj * E4 + lane + LANES * x]); }
        for (var x = 0u; x < LANE_EV4; x++) { part.y += dot(do_part[x], v_tile[jj * EV4 + lane + LANES * x]); }
      }
      let sums = lanes_sum(part, t);
      if (sees_key) {
        let w = weight(row, j, sums.x);
        if (!w.hidden) {
          saw_key = true;
          let ds = w.p * (sums.y - row.delta);
          if (WRITE_DS && lane == 0u) { grads[ds_base + j] = ds; }
          let g = ds * w.slope;
          for (var x = 0u; x < LANE_E4; x++) { dq[x] += g * k_tile[jj * E4 + lane + LANES * x]; }
        }
      }
    }
    workgroupBarrier();
  }

  if (!in_range) { return; }
  let split = p.splits > 1u;
  let dq_at = select(0u, dq_slot(segment), split) + row.row * p.E;
  let dq_scale = select(p.scale, 1.0, split);
  for (var x = 0u; x < LANE_E4; x++) {
    for (var d = 0u; d < 4u; d++) {
      let e = 4u * (lane + LANES * x) + d;
      if (e < p.E) { grads[dq_at + e] = dq[x][d] * dq_scale; }
    }
  }
  if (SINKS && lane == 0u) {
    if (split) {
      grads[saw_key_slot(segment) + row.row] = select(0.0, 1.0, saw_key);
    } else {
      rowstats[2u * total_rows() + row.row] = sink_term(row, saw_key);
    }
  }
}
