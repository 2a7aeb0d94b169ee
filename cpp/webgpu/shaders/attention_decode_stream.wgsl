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
// plan takes KEY_LANES ≤ subgroupMinSize). A group takes tiles of KEY_LANES consecutive keys
// (group g the g-th tile of each GROUPS·KEY_LANES keys), each in three steps:
//  1. scores, lanes along E: for each key of the tile, lane ℓ loads the vec4 columns ℓ,
//     ℓ + KEY_LANES, … of its K row (one coalesced run) and dots them with the same columns of
//     every row's query; the lanes' parts of SUB_KEYS keys at a time are summed by a
//     reduce-scatter over subgroupShuffleXor (each halving step keeps half the keys and adds the
//     partner lane's parts of them; four rows share one vec4 shuffle): (SUB_KEYS − 1 +
//     log2(KEY_LANES / SUB_KEYS)) / SUB_KEYS shuffles a key (9/8 with 32 lanes and 8 keys)
//     instead of a butterfly's log2(KEY_LANES), and each lane ends with one key's (own_key);
//  2. the online softmax, lanes along keys: each lane masks and scores its own key for every row
//     (ranges, documents, mask, softcap, ALiBi: once per (row, key), not once per lane), the
//     tile's max of each row is a butterfly, each lane weighs its key against the row's new max
//     and keeps its part of the denominator, and the output is rescaled once per tile;
//  3. O += P·V, lanes along Ev: key i's weights come from its lane (subgroupShuffle), and its V
//     row is read as K was, only for a key some row uses and only into those rows (a hidden
//     key's value is never read into an output).
// Each lane keeps the same vec4 columns of every row's query and output, its part of each row's
// denominator, visible count, last key and NaN flag; the group's running max is the same on
// every lane. No workgroup memory and no barrier in the key loop, so loads stay in flight. After
// it the lanes' parts are summed, the groups combine their states through workgroup memory in
// group order (deterministic), and the record is written as the tile kernel writes it (with its
// recomputation where l·o overflowed).
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
// Keys whose scores the lanes sum together (step 1): as many as keep a lane's parts of every row
// within 8 vec4s. The tile's SUB_TILES sub-tiles of SUB_KEYS keys each; key kk of sub-tile sub
// ends on the lanes ℓ with ℓ / SUB_TILES = kk, and lane ℓ keeps it where ℓ % SUB_TILES = sub.
const SUB_KEYS: u32 = min(KEY_LANES, 8u / ROW_VEC4S);
const SUB_TILES: u32 = KEY_LANES / SUB_KEYS;
fn own_key(lane: u32) -> u32 { return SUB_KEYS * (lane % SUB_TILES) + lane / SUB_TILES; }
fn owner_lane(key: u32) -> u32 { return (key % SUB_KEYS) * SUB_TILES + key / SUB_KEYS; }

fn recompute_output4(row: QueryRow, m: f32, l: f32, c4: u32) -> vec4<f32> {
  return normalized_output4(row, query_vec4s(row), m, l, c4);
}

@compute @workgroup_size(DECODE_INVOCATIONS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32,
        @builtin(subgroup_invocation_id) subgroup_lane: u32) {
  let work = decode_workgroup(wg);
  let lane = t % KEY_LANES;
  let g = t / KEY_LANES;
  let group_base = subgroup_lane - lane;  // the group's lane 0 in the subgroup
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
  // The rows' online-softmax state (StreamState) and this lane's output columns of every row.
  var state = stream_state();
  var acc: array<array<vec4<f32>, LANE_V>, DECODE_ROWS>;
  for (var j0 = wg_first; j0 <= wg_last; j0 += i32(GROUPS * KEY_LANES)) {
    let tile_first = j0 + i32(g * KEY_LANES);

    // 1. Scores of the group's tile of KEY_LANES keys with the lanes along E, SUB_KEYS keys at a
    //    time, summed over the lanes by a reduce-scatter: each halving step keeps half of the
    //    keys' parts (the upper half where the lane has the step's bit) and adds the partner
    //    lane's parts of the same keys, so log2(SUB_KEYS) steps leave each lane one key's parts,
    //    and a butterfly over the low lane bits completes its sum. Lane ℓ keeps key own_key(ℓ).
    //    Past the range a group scores its last key again (the shuffles stay in uniform control
    //    flow) and uses nothing.
    var mine: array<vec4<f32>, ROW_VEC4S>;
    for (var sub = 0u; sub < SUB_TILES; sub++) {
      var parts: array<array<vec4<f32>, ROW_VEC4S>, SUB_KEYS>;
      for (var kk = 0u; kk < SUB_KEYS; kk++) {
        let key_i = u32(min(tile_first + i32(sub * SUB_KEYS + kk), wg_last));
        var k: array<vec4<f32>, LANE_Q>;
        for (var c = 0u; c < LANE_Q; c++) { k[c] = key4(k_base + key_i * p.E, 4u * (lane + c * KEY_LANES), p.E); }
        for (var r = 0u; r < DECODE_ROWS; r++) {
          var d = 0.0;
          for (var c = 0u; c < LANE_Q; c++) { d += dot(q[r][c], k[c]); }
          parts[kk][r / 4u][r % 4u] = d;
        }
      }
      var width = SUB_KEYS;
      for (var mask = KEY_LANES / 2u; width > 1u; mask >>= 1u) {
        width /= 2u;
        let upper = (lane & mask) != 0u;
        for (var kk = 0u; kk < width; kk++) {
          for (var v = 0u; v < ROW_VEC4S; v++) {
            let keep = select(parts[kk][v], parts[kk + width][v], upper);
            let send = select(parts[kk + width][v], parts[kk][v], upper);
            parts[kk][v] = keep + shuffle_xor(send, mask);
          }
        }
      }
      for (var v = 0u; v < ROW_VEC4S; v++) {
        var sum = parts[0][v];
        for (var mask = 1u; mask < SUB_TILES; mask <<= 1u) { sum += shuffle_xor(sum, mask); }
        mine[v] = select(mine[v], sum, lane % SUB_TILES == sub);
      }
    }

    // 2. The online softmax once per tile, each lane for its own key.
    let j = tile_first + i32(own_key(lane));
    let step = step_softmax(&state, rows, mine, u32(j), j <= wg_last);
    for (var r = 0u; r < DECODE_ROWS; r++) {
      for (var c = 0u; c < LANE_V; c++) { acc[r][c] *= step.alpha[r]; }
    }

    // 3. O += P·V over the tile, the lanes along Ev again: key i's weights and rows from its lane;
    //    a V row is read only for a key some row uses, and only into those rows.
    for (var i = 0u; i < KEY_LANES; i++) {
      let key = owner_weights(step, group_base + owner_lane(i));
      if (key.used != 0u) {
        let key_i = u32(tile_first + i32(i));
        var val: array<vec4<f32>, LANE_V>;
        for (var c = 0u; c < LANE_V; c++) { val[c] = value4(v_base + key_i * p.Ev, 4u * (lane + c * KEY_LANES), p.Ev); }
        for (var r = 0u; r < DECODE_ROWS; r++) {
          if (((key.used >> r) & 1u) == 0u) { continue; }
          for (var c = 0u; c < LANE_V; c++) { acc[r][c] += key.weights[r / 4u][r % 4u] * val[c]; }
        }
      }
    }
  }

  store_stream_state(g, lane, state);
  for (var r = 0u; r < DECODE_ROWS; r++) {
    for (var c = 0u; c < LANE_V; c++) { store_group_columns(g, r, lane + c * KEY_LANES, acc[r][c]); }
  }
  write_split_records(work, rows, t);
}
