// attention_decode_partial.wgsl: flash-decoding, step 1 of 2: the query rows that read one
// key/value head over one split of its keys, together.
//
// Computes, for each query row r of the chunk that reads KV head `kv` and key split s (keys
// [s·split_keys, (s + 1)·split_keys) within the row's visible range), the split's softmax
// state: m_s (its max score), l_s = Σ_j e^(s_j − m_s) and the normalized partial output
// o_s = Σ_j e^(s_j − m_s)·v_j / l_s (normalized, so that it overflows only where the output
// itself would), the number of visible keys, the last one, and whether a visible score was NaN.
// attention_decode_merge.wgsl combines a row's splits by their log-sum-exp.
//
// Algorithm: one workgroup per (KV head of the chunk, block of DECODE_ROWS of the rows that read
// it, split): with GQA every query head of the group (and each of its few query rows) shares the
// workgroup, so K and V are read once per group, not once per row. Per key tile of BLOCK_KEYS
// keys, all invocations load the K and V tiles into workgroup memory (consecutive invocations,
// consecutive vec4s: coalesced); each row has DECODE_LANES lanes: lane k scores keys k,
// k + DECODE_LANES, … of the tile, the lanes combine their (max, count, last key, NaN) (lanes_combine:
// subgroupShuffleXor where the device has subgroups and the plan chose it, else through
// workgroup memory), rescale (online softmax), write the tile's weights to workgroup memory, and
// each lane accumulates its own vec4 columns of the output from the V tile. Each lane keeps its
// part of the denominator; the parts are summed once at the end. Scores, masks,
// causal/window/key-length ranges, softcap, ALiBi and documents use the flash kernels' helpers
// (attention_common.wgsl.inc, attention_flash_common.wgsl.inc); the sink joins in the merge.
//
// Chosen by cpp/webgpu/plan.cpp (webgpu_decode_splits, webgpu_decode_variant; the rules and the
// tile/rows/lanes choice are there): few query rows per head and many keys, no weights or
// scores. The glue defines shuffle_xor (subgroupShuffleXor, or a stand-in never called) and, with
// SUBGROUPS, `enable subgroups;`.
//
// Writes `stats` (the partials): DECODE_STRIDE floats per (row, split), split-minor:
// m_s, l_s, visible count, last visible key, NaN flag (1.0 / 0.0), o_s [EV_PAD].

//! include attention_common.wgsl.inc
//! include attention_flash_common.wgsl.inc

const DECODE_STRIDE: u32 = 5u + EV_PAD;
// vec4 output columns a lane owns: c4 = lane + k·DECODE_LANES.
const LANE_COLUMNS: u32 = (EV4 + DECODE_LANES - 1u) / DECODE_LANES;

var<workgroup> k_tile: array<vec4<f32>, BLOCK_KEYS * E4>;
var<workgroup> v_tile: array<vec4<f32>, BLOCK_KEYS * EV4>;
// Per row, the tile's scores (a hidden key: -inf bits), then its weights e^(s − m) (a hidden
// key: −0.0 bits, skipped, so that its value is never read into the output even if it is Inf/NaN).
const HIDDEN_WEIGHT_BITS: u32 = 0x80000000u;
var<workgroup> tile_weights: array<f32, DECODE_ROWS * BLOCK_KEYS>;
// The lanes' parts for lanes_combine without subgroups (one element with them).
var<workgroup> lane_parts: array<vec4<f32>, select(DECODE_INVOCATIONS, 1u, SUBGROUPS)>;

// Two lanes' (max score, visible count, last visible key, NaN flag): a max over no key is ignored.
fn combine(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
  var x = max(a.x, b.x);
  if (a.y == 0.0) { x = b.x; } else if (b.y == 0.0) { x = a.x; }
  return vec4<f32>(x, a.y + b.y, max(a.z, b.z), max(a.w, b.w));
}

// `part` combined over the DECODE_LANES lanes of invocation t's row (consecutive invocations);
// every lane of the row gets the result. Called in workgroup-uniform control flow.
fn lanes_combine(part: vec4<f32>, t: u32) -> vec4<f32> {
  if (SUBGROUPS) {
    // DECODE_LANES divides the subgroup size (the plan checks subgroupMinSize): a row's lanes
    // share a subgroup.
    var r = part;
    for (var mask = 1u; mask < DECODE_LANES; mask <<= 1u) { r = combine(r, shuffle_xor(r, mask)); }
    return r;
  }
  lane_parts[t] = part;
  workgroupBarrier();
  let first = t / DECODE_LANES * DECODE_LANES;
  var r = lane_parts[first];
  for (var k = 1u; k < DECODE_LANES; k++) { r = combine(r, lane_parts[first + k]); }
  workgroupBarrier();
  return r;
}

@compute @workgroup_size(DECODE_INVOCATIONS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let split = wg.x + p.x_base;
  let row_blocks = (p.group * p.rows + DECODE_ROWS - 1u) / DECODE_ROWS;
  let kv_local = (wg.y + p.y_base) / row_blocks;
  let block = (wg.y + p.y_base) % row_blocks;
  // The chunk's query heads that read KV head kv0 + kv_local: [lo, hi) (flattened b·Hq + h).
  let kv = p.kv0 + kv_local;
  let group_first = (kv / p.Hkv) * p.Hq + (kv % p.Hkv) * p.group;
  let lo = max(group_first, p.bh0);
  let hi = min(group_first + p.group, p.bh0 + p.nbh);
  let rows_here = select(0u, (hi - lo) * p.rows, hi > lo);
  let lane = t % DECODE_LANES;
  let r_local = block * DECODE_ROWS + t / DECODE_LANES;
  let valid = r_local < rows_here;
  let row_slot = (t / DECODE_LANES) * BLOCK_KEYS;
  var row = query_row(0u, select(0u, lo - p.bh0 + r_local / p.rows, valid), select(0u, r_local % p.rows, valid));
  if (!valid) {
    row.in_range = false;
    row.last = -1;
  }
  let q_row = query_vec4s(row);
  let split_first = split * p.split_keys;
  let split_end = min(split_first + p.split_keys, p.Lk);
  row.first = max(row.first, i32(split_first));
  row.last = min(row.last, i32(split_end) - 1);
  // The keys any row here may see (rows' ranges move right with the row; every row of the chunk
  // is within [row0, row0 + rows)): workgroup-uniform bounds of the tile loop.
  let b = kv / p.Hkv;
  let wg_first = max(i32(split_first), visible_first(b, p.row0));
  let wg_last = min(i32(split_end) - 1, visible_last(b, p.row0 + p.rows - 1u));
  let k_base = kv_local * p.key_stride;
  let v_base = kv_local * p.value_stride;

  var m = 0.0;
  var l = 0.0;  // this lane's part of the denominator
  var count = 0u;
  var last_key = 0u;
  var nan_row = false;
  var acc: array<vec4<f32>, LANE_COLUMNS>;
  for (var j0 = wg_first; j0 <= wg_last; j0 += i32(BLOCK_KEYS)) {
    workgroupBarrier();  // the previous tile is no longer read
    for (var x = t; x < BLOCK_KEYS * E4; x += DECODE_INVOCATIONS) {
      let j = j0 + i32(x / E4);
      k_tile[x] = select(vec4<f32>(0.0), key4(k_base + u32(j) * p.E, 4u * (x % E4), p.E), j <= wg_last);
    }
    for (var x = t; x < BLOCK_KEYS * EV4; x += DECODE_INVOCATIONS) {
      let j = j0 + i32(x / EV4);
      v_tile[x] = select(vec4<f32>(0.0), value4(v_base + u32(j) * p.Ev, 4u * (x % EV4), p.Ev), j <= wg_last);
    }
    workgroupBarrier();

    // This lane's keys: scores into tile_weights, (max, count, last key, NaN) into part.
    var part = vec4<f32>(0.0);
    for (var jj = lane; jj < BLOCK_KEYS; jj += DECODE_LANES) {
      let j = u32(j0) + jj;
      var s = bitcast<f32>(p.neg_inf_bits);
      if (i32(j) >= row.first && i32(j) <= row.last && key_visible(row, j)) {
        var qk = 0.0;
        for (var e4 = 0u; e4 < E4; e4++) { qk += dot(q_row[e4], k_tile[jj * E4 + e4]); }
        let scored = scaled_masked_score(qk, row.mask_row + j * p.mask_sk, alibi_bias(row.b, row.h, row.i, j));
        if (!scored.hidden) {
          if (is_nan(scored.s)) {
            part.w = 1.0;
          } else {
            s = scored.s;
            part.x = select(s, max(part.x, s), part.y > 0.0);
            part.y += 1.0;
            part.z = f32(j);  // keys ascend
          }
        }
      }
      tile_weights[row_slot + jj] = s;
    }
    let tile = lanes_combine(part, t);
    nan_row = nan_row || tile.w != 0.0;
    var alpha = 1.0;
    if (tile.y > 0.0) {
      let m_new = select(tile.x, max(m, tile.x), count > 0u);
      alpha = select(1.0, exp(m - m_new), count > 0u);  // l and acc are 0 before the first key
      m = m_new;
      count += u32(tile.y);
      last_key = u32(tile.z);
    }
    l *= alpha;
    for (var jj = lane; jj < BLOCK_KEYS; jj += DECODE_LANES) {
      let s = tile_weights[row_slot + jj];
      let hidden = is_neg_inf(s);
      let w = select(exp(s - m), bitcast<f32>(HIDDEN_WEIGHT_BITS), hidden);
      if (!hidden) { l += w; }
      tile_weights[row_slot + jj] = w;
    }
    workgroupBarrier();  // the row's weights, from all its lanes
    for (var k = 0u; k < LANE_COLUMNS; k++) {
      let c4 = lane + k * DECODE_LANES;
      var a = acc[k] * alpha;
      if (c4 < EV4) {
        for (var jj = 0u; jj < BLOCK_KEYS; jj++) {
          let w = tile_weights[row_slot + jj];
          if (bitcast<u32>(w) != HIDDEN_WEIGHT_BITS) { a += w * v_tile[jj * EV4 + c4]; }
        }
      }
      acc[k] = a;
    }
  }
  l = lanes_combine(vec4<f32>(0.0, l, 0.0, 0.0), t).y;

  if (!valid) { return; }
  // acc holds l·o_s; where it overflowed, o_s is recomputed with normalized weights.
  let inv_l = select(0.0, 1.0 / l, count > 0u);
  let base = (row.out_row * p.splits + split) * DECODE_STRIDE;
  for (var k = 0u; k < LANE_COLUMNS; k++) {
    let c4 = lane + k * DECODE_LANES;
    if (c4 >= EV4) { break; }
    var o = acc[k] * inv_l;
    if (!all_finite4(acc[k]) && count > 1u && !nan_row) { o = normalized_output4(row, q_row, m, l, c4); }
    for (var d = 0u; d < 4u; d++) { stats[base + 5u + 4u * c4 + d] = o[d]; }
  }
  if (lane == 0u) {
    stats[base] = m;
    stats[base + 1u] = l;
    stats[base + 2u] = f32(count);
    stats[base + 3u] = f32(last_key);
    stats[base + 4u] = select(0.0, 1.0, nan_row);
  }
}
