// attention_backward_dkdv.wgsl: dK and dV, one workgroup per (key/value head, tile of KEYS keys),
// one invocation per key j, its key and value rows and its dK/dV accumulators in registers. The
// grid (BackwardTileGrid in cpp/webgpu/plan.h) runs over the heads in x and the key tiles in y.
// FlashAttention-2's outer loop over key tiles: the query heads of the GQA group, then their
// query rows in blocks of QUERY_BLOCK (Q and dO rows in workgroup memory) that can see the tile,
// and per visible (row i, key j), with P = e^(s − lse_i) recomputed:
//   dV_j += P·dO_i,   dP = dO_i·V_j,   dS = P·(dP − D_i)·(softcap slope),   dK_j += dS·Q_i;
// dK is scaled once at the end. Each dK/dV row is written by one invocation: no atomics, the
// same sums in the same order every run. Keys hidden from a row (mask, causal, window, key
// length, document, −inf score) add nothing, and a row that saw nothing (lse −inf) is skipped,
// so their K/V values are never multiplied in.
// Constants: those of attention_backward_common.wgsl.inc, KEYS, QUERY_BLOCK.

//! include attention_common.wgsl.inc
//! include attention_backward_common.wgsl.inc

var<workgroup> q_tile: array<vec4<f32>, QUERY_BLOCK * E4>;
var<workgroup> do_tile: array<vec4<f32>, QUERY_BLOCK * EV4>;

@compute @workgroup_size(KEYS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let kv = wg.x + p.x_base;        // b·Hkv + kv head
  let key_tile = wg.y + p.y_base;  // the first tiles, seen by the most rows, start first
  let b = kv / p.Hkv;
  let j_first = key_tile * KEYS;
  let j_last = min(j_first + KEYS, p.Lk) - 1u;
  let j = j_first + t;
  let in_range = j < p.Lk;

  var k_row: array<vec4<f32>, E4>;
  var v_row: array<vec4<f32>, EV4>;
  var dk: array<vec4<f32>, E4>;
  var dv: array<vec4<f32>, EV4>;
  if (in_range) {
    for (var e4 = 0u; e4 < E4; e4++) { k_row[e4] = key4(kv * p.key_stride + j * p.E, 4u * e4, p.E); }
    for (var c4 = 0u; c4 < EV4; c4++) { v_row[c4] = value4(kv * p.value_stride + j * p.Ev, 4u * c4, p.Ev); }
  }

  for (var g = 0u; g < p.group; g++) {
    let h = (kv % p.Hkv) * p.group + g;
    for (var i0 = 0u; i0 < p.Lq; i0 += QUERY_BLOCK) {
      let i1 = min(i0 + QUERY_BLOCK, p.Lq) - 1u;
      // Rows' ranges move right with the row: the block's last row sees the latest keys, its
      // first row the earliest (workgroup-uniform: read-only buffers and uniforms).
      if (visible_last(b, i1) < i32(j_first) || visible_first(b, i0) > i32(j_last)) { continue; }
      let rows = i1 - i0 + 1u;
      let row0 = (b * p.Hq + h) * p.Lq + i0;
      workgroupBarrier();  // the previous block is read
      for (var x = t; x < QUERY_BLOCK * E4; x += KEYS) {
        let r = x / E4;
        var q4 = vec4<f32>(0.0);
        if (r < rows) { q4 = query4((row0 + r) * p.E, 4u * (x % E4), p.E); }
        q_tile[x] = q4;
      }
      for (var x = t; x < QUERY_BLOCK * EV4; x += KEYS) {
        let r = x / EV4;
        var o4 = vec4<f32>(0.0);
        if (r < rows) { o4 = d_output4((row0 + r) * p.Ev, 4u * (x % EV4)); }
        do_tile[x] = o4;
      }
      workgroupBarrier();
      if (in_range) {
        for (var r = 0u; r < rows; r++) {
          let row = grad_row(b, h, i0 + r);
          if (!row.sees || !visible(row, j)) { continue; }
          var qk = 0.0;
          for (var e4 = 0u; e4 < E4; e4++) { qk += dot(q_tile[r * E4 + e4], k_row[e4]); }
          let w = weight(row, j, qk);
          if (w.hidden) { continue; }
          var dp = 0.0;
          for (var c4 = 0u; c4 < EV4; c4++) { dp += dot(do_tile[r * EV4 + c4], v_row[c4]); }
          let ds = w.p * (dp - row.delta) * w.slope;
          for (var c4 = 0u; c4 < EV4; c4++) { dv[c4] += w.p * do_tile[r * EV4 + c4]; }
          for (var e4 = 0u; e4 < E4; e4++) { dk[e4] += ds * q_tile[r * E4 + e4]; }
        }
      }
    }
  }

  if (!in_range) { return; }
  let dk_at = (kv * p.Lk + j) * p.E;
  let dv_at = p.B * p.Hkv * p.Lk * p.E + (kv * p.Lk + j) * p.Ev;
  for (var e = 0u; e < p.E; e++) { grads[dk_at + e] = dk[e / 4u][e % 4u] * p.scale; }
  for (var c = 0u; c < p.Ev; c++) { grads[dv_at + c] = dv[c / 4u][c % 4u]; }
}
