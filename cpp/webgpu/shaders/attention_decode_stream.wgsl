// attention_decode_stream.wgsl: flash-decoding, step 1 of 2, on a float32 or float16 KV cache
// where the device has subgroups: the query rows that read one key/value head over one split of
// its keys, streaming K and V straight from the cache into registers.
//
// Computes what attention_decode_partial.wgsl computes, into the same record (the split's m_s,
// l_s, normalized partial output o_s, visible count, last visible key, NaN flag), for which
// attention_decode_merge.wgsl combines the splits.
//
// Algorithm: one workgroup per (KV head of the chunk, block of DECODE_ROWS of the rows that read
// it, split), of GROUPS groups of KEY_LANES consecutive lanes (a group lies in one subgroup: the
// plan takes KEY_LANES ≤ subgroupMinSize). Group g takes the split's keys g, g + GROUPS, …: its
// lane ℓ loads the vec4 columns ℓ, ℓ + KEY_LANES, … of the key's K row (the group's loads of a
// row are one coalesced run) and holds the same columns of every row's query, so each row's q·k
// is the lanes' parts summed by subgroupShuffleXor (a butterfly: every lane gets the same bits;
// four rows share one vec4 shuffle). Each lane keeps every row's online-softmax state (max,
// denominator, count, last key, NaN) and the same vec4 columns of the row's output, rescaled per
// key, reading the V row as it read K, and only for a key some row uses: no workgroup memory and
// no barrier in the key loop, so each lane keeps its loads in flight. After the loop the groups
// combine their states through workgroup memory in group order (deterministic), and the record
// is written as the tile kernel writes it (with its recomputation where l·o overflowed).
// Variants (masks, ranges, softcap, ALiBi, documents) use the flash kernels' helpers; the sink
// joins in the merge.
//
// Chosen by cpp/webgpu/plan.cpp (webgpu_decode_variant) on float caches when the adapter has
// subgroups and every row's columns fit a lane's registers; else attention_decode_partial.wgsl.
// The glue defines shuffle_xor (subgroupShuffleXor on a vec4) and `enable subgroups;`.

//! include attention_common.wgsl.inc
//! include attention_flash_common.wgsl.inc
//! include attention_decode_workgroup.wgsl.inc
//! include attention_decode_stream_common.wgsl.inc

const LANE_Q: u32 = E4 / KEY_LANES;   // query/key vec4 columns a lane holds
const LANE_V: u32 = EV4 / KEY_LANES;  // value/output vec4 columns a lane holds

fn recompute_output4(row: QueryRow, m: f32, l: f32, c4: u32) -> vec4<f32> {
  return normalized_output4(row, query_vec4s(row), m, l, c4);
}

@compute @workgroup_size(DECODE_INVOCATIONS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let work = decode_workgroup(wg);
  let lane = t % KEY_LANES;
  let g = t / KEY_LANES;
  var rows: array<QueryRow, DECODE_ROWS>;
  var q: array<array<vec4<f32>, LANE_Q>, DECODE_ROWS>;
  for (var r = 0u; r < DECODE_ROWS; r++) {
    rows[r] = decode_row(work, r);
    for (var c = 0u; c < LANE_Q; c++) {
      q[r][c] = select(vec4<f32>(0.0), query4(rows[r].out_row * p.E, 4u * (lane + c * KEY_LANES), p.E), rows[r].in_range);
    }
  }
  let wg_first = work.keys_first;
  let wg_last = work.keys_last;
  let k_base = work.kv_local * p.key_stride;
  let v_base = work.kv_local * p.value_stride;

  var m: array<f32, DECODE_ROWS>;
  var l: array<f32, DECODE_ROWS>;
  var count: array<u32, DECODE_ROWS>;
  var last_key: array<u32, DECODE_ROWS>;
  var nan_row: array<bool, DECODE_ROWS>;
  var acc: array<array<vec4<f32>, LANE_V>, DECODE_ROWS>;
  for (var j0 = wg_first; j0 <= wg_last; j0 += i32(GROUPS)) {
    // Past the range, a group scores its last key again (the shuffles stay in uniform control
    // flow) and uses nothing.
    let j = j0 + i32(g);
    let in_split = j <= wg_last;
    let key_j = u32(min(j, wg_last));
    var k: array<vec4<f32>, LANE_Q>;
    for (var c = 0u; c < LANE_Q; c++) { k[c] = key4(k_base + key_j * p.E, 4u * (lane + c * KEY_LANES), p.E); }
    var dots: array<vec4<f32>, ROW_VEC4S>;
    for (var r = 0u; r < DECODE_ROWS; r++) {
      var d = 0.0;
      for (var c = 0u; c < LANE_Q; c++) { d += dot(q[r][c], k[c]); }
      dots[r / 4u][r % 4u] = d;
    }
    for (var v = 0u; v < ROW_VEC4S; v++) { dots[v] = group_sum(dots[v]); }

    var weight: array<f32, DECODE_ROWS>;
    var alpha: array<f32, DECODE_ROWS>;
    var used: array<bool, DECODE_ROWS>;
    var any_used = false;
    for (var r = 0u; r < DECODE_ROWS; r++) {
      used[r] = false;  // set again: SwiftShader kept the last key's flags in this loop-scoped var
      let row = rows[r];
      if (!in_split || i32(key_j) < row.first || i32(key_j) > row.last || !key_visible(row, key_j)) { continue; }
      let scored = scaled_masked_score(dots[r / 4u][r % 4u], row.mask_row + key_j * p.mask_sk, alibi_bias(row.b, row.h, row.i, key_j));
      if (scored.hidden) { continue; }
      if (is_nan(scored.s)) {
        nan_row[r] = true;
        continue;
      }
      let m_new = select(scored.s, max(m[r], scored.s), count[r] > 0u);
      alpha[r] = select(1.0, exp(m[r] - m_new), count[r] > 0u);  // l and acc are 0 before the first key
      weight[r] = exp(scored.s - m_new);
      m[r] = m_new;
      l[r] = l[r] * alpha[r] + weight[r];
      count[r] += 1u;
      last_key[r] = key_j;
      used[r] = true;
      any_used = true;
    }
    if (any_used) {
      var v: array<vec4<f32>, LANE_V>;
      for (var c = 0u; c < LANE_V; c++) { v[c] = value4(v_base + key_j * p.Ev, 4u * (lane + c * KEY_LANES), p.Ev); }
      for (var r = 0u; r < DECODE_ROWS; r++) {
        if (!used[r]) { continue; }
        for (var c = 0u; c < LANE_V; c++) { acc[r][c] = acc[r][c] * alpha[r] + weight[r] * v[c]; }
      }
    }
  }

  for (var r = 0u; r < DECODE_ROWS; r++) {
    store_group_state(g, r, lane, m[r], l[r], count[r], last_key[r], nan_row[r]);
    for (var c = 0u; c < LANE_V; c++) { store_group_columns(g, r, lane + c * KEY_LANES, acc[r][c]); }
  }
  write_split_records(work, rows, t);
}
