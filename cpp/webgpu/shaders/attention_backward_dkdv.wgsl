// attention_backward_dkdv.wgsl: dK and dV, one workgroup per (key/value head, tile of KEYS keys,
// segment of query rows), LANES lanes per key j (attention_backward_lanes.wgsl.inc), each holding
// its share of the key's K and V columns and of its dK/dV accumulators in registers. The grid
// (BackwardTileGrid in cpp/webgpu/plan.h) runs over the heads in x and, in y, the key tiles, each
// tile's p.splits segments of p.split_keys query rows consecutive.
// FlashAttention-2's outer loop over key tiles: the query heads of the GQA group, then their
// query rows of the segment in blocks of QUERY_BLOCK (Q and dO rows in workgroup memory, loaded by
// the whole workgroup) that can see the tile, and per visible (row i, key j), with P = e^(s − lse_i)
// recomputed from q·k (the lanes' parts summed by lanes_sum):
//   dV_j += P·dO_i,   dP = dO_i·V_j,   dS = P·(dP − D_i)·(softcap slope),   dK_j += dS·Q_i;
// With one segment dK is scaled once at the end and dK/dV go to their outputs; with more, each
// segment's sums (an empty segment's zeros) go unscaled to its scratch slot, which
// attention_backward_reduce.wgsl (STAGE 2) adds in segment order. Each element is written by one
// lane: no atomics, the same sums in the same order every run. Keys hidden from a row (mask,
// causal, window, key length, document, −inf score) add nothing, and a row that saw nothing (lse
// −inf) is skipped, so their K/V values are never multiplied in.
// Constants: those of attention_backward_common.wgsl.inc and attention_backward_lanes.wgsl.inc,
// KEYS, QUERY_BLOCK.

//! include attention_common.wgsl.inc
//! include attention_backward_common.wgsl.inc
//! include attention_backward_lanes.wgsl.inc

const TILE_INVOCATIONS: u32 = KEYS * LANES;

var<workgroup> q_tile: array<vec4<f32>, QUERY_BLOCK * E4>;
var<workgroup> do_tile: array<vec4<f32>, QUERY_BLOCK * EV4>;

@compute @workgroup_size(TILE_INVOCATIONS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let kv = wg.x + p.x_base;  // b·Hkv + kv head
  let y = wg.y + p.y_base;
  let key_tile = y / p.splits;  // the first tiles, seen by the most rows, start first
  let segment = y % p.splits;
  let i_begin = segment * p.split_keys;  // the segment's query rows [i_begin, i_end): whole blocks
  let i_end = min(i_begin + p.split_keys, p.Lq);
  let b = kv / p.Hkv;
  let j_first = key_tile * KEYS;
  let j_last = min(j_first + KEYS, p.Lk) - 1u;
  let lane = t % LANES;
  let j = j_first + t / LANES;
  let in_range = j < p.Lk;

  // x-th vec4 of the lane: columns 4·(lane + LANES·x) … + 3.
  var k_part: array<vec4<f32>, LANE_E4>;
  var v_part: array<vec4<f32>, LANE_EV4>;
  var dk: array<vec4<f32>, LANE_E4>;
  var dv: array<vec4<f32>, LANE_EV4>;
  if (in_range) {
    for (var x = 0u; x < LANE_E4; x++) { k_part[x] = key4(kv * p.key_stride + j * p.E, 4u * (lane + LANES * x), p.E); }
    for (var x = 0u; x < LANE_EV4; x++) { v_part[x] = value4(kv * p.value_stride + j * p.Ev, 4u * (lane + LANES * x), p.Ev); }
  }

  for (var g = 0u; g < p.group; g++) {
    let h = (kv % p.Hkv) * p.group + g;
    for (var i0 = i_begin; i0 < i_end; i0 += QUERY_BLOCK) {
      let i1 = min(i0 + QUERY_BLOCK, p.Lq) - 1u;
      // Rows' ranges move right with the row: the block's last row sees the latest keys, its
      // first row the earliest (workgroup-uniform: read-only buffers and uniforms).
      if (visible_last(b, i1) < i32(j_first) || visible_first(b, i0) > i32(j_last)) { continue; }
      let rows = i1 - i0 + 1u;
      let row0 = (b * p.Hq + h) * p.Lq + i0;
      workgroupBarrier();  // the previous block is read
      for (var x = t; x < QUERY_BLOCK * E4; x += TILE_INVOCATIONS) {
        let r = x / E4;
        var q4 = vec4<f32>(0.0);
        if (r < rows) { q4 = query4((row0 + r) * p.E, 4u * (x % E4), p.E); }
        q_tile[x] = q4;
      }
      for (var x = t; x < QUERY_BLOCK * EV4; x += TILE_INVOCATIONS) {
        let r = x / EV4;
        var o4 = vec4<f32>(0.0);
        if (r < rows) { o4 = d_output4((row0 + r) * p.Ev, 4u * (x % EV4), p.Ev); }
        do_tile[x] = o4;
      }
      workgroupBarrier();
      // Workgroup-uniform: lanes_sum runs for every row, the row's work only where it sees j.
      for (var r = 0u; r < rows; r++) {
        let row = grad_row(b, h, i0 + r);
        let sees_key = in_range && row.sees && visible(row, j);
        var part = vec2<f32>(0.0);  // (q·k, dO·v) over the lane's columns
        if (sees_key) {
          for (var x = 0u; x < LANE_E4; x++) { part.x += dot(q_tile[r * E4 + lane + LANES * x], k_part[x]); }
          for (var x = 0u; x < LANE_EV4; x++) { part.y += dot(do_tile[r * EV4 + lane + LANES * x], v_part[x]); }
        }
        let sums = lanes_sum(part, t);
        if (sees_key) {
          let w = weight(row, j, sums.x);
          if (!w.hidden) {
            let ds = w.p * (sums.y - row.delta) * w.slope;
            for (var x = 0u; x < LANE_EV4; x++) { dv[x] += w.p * do_tile[r * EV4 + lane + LANES * x]; }
            for (var x = 0u; x < LANE_E4; x++) { dk[x] += ds * q_tile[r * E4 + lane + LANES * x]; }
          }
        }
      }
    }
  }

  if (!in_range) { return; }
  var slot = 0u;  // the outputs, or this segment's scratch slot
  var dk_scale = p.scale;
  if (p.splits > 1u) {
    slot = (1u + segment) * dkdv_floats();
    dk_scale = 1.0;
  }
  let dk_at = slot + (kv * p.Lk + j) * p.E;
  let dv_at = slot + p.B * p.Hkv * p.Lk * p.E + (kv * p.Lk + j) * p.Ev;
  for (var x = 0u; x < LANE_E4; x++) {
    for (var d = 0u; d < 4u; d++) {
      let e = 4u * (lane + LANES * x) + d;
      if (e < p.E) { grads[dk_at + e] = dk[x][d] * dk_scale; }
    }
  }
  for (var x = 0u; x < LANE_EV4; x++) {
    for (var d = 0u; d < 4u; d++) {
      let c = 4u * (lane + LANES * x) + d;
      if (c < p.Ev) { grads[dv_at + c] = dv[x][d]; }
    }
  }
}
