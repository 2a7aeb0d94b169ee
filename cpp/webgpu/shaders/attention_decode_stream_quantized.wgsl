// attention_decode_stream_quantized.wgsl: flash-decoding, step 1 of 2, on an int8/int4 KV cache
// where the device has subgroups: the query rows that read one key/value head over one split of
// its keys, streaming the cache's levels and block scales (cpp/core/kv_cache_format.h) straight
// into registers.
//
// Computes what attention_decode_quantized.wgsl (the tile kernel) computes, into the same record,
// for which attention_decode_merge.wgsl combines the splits, with the same scores:
//   q·k_j = Σ_blocks (scale_q · scale_k) · Σ_block level_q · level_k,
// each block's sum an exact integer dot product (dot4_i8: dot4I8Packed or unpacked bytes).
//
// Algorithm: attention_decode_stream.wgsl's (one workgroup per (KV head of the chunk, block of
// DECODE_ROWS of the rows that read it, split); GROUPS groups of KEY_LANES lanes of one subgroup;
// no workgroup memory and no barrier in the key loop; the online softmax once per step, each lane
// for its own key), with a group taking KEY_LANES / 4 tiles of 4 keys a step, each in turn:
//  1. scores: in the tile layout a vec4<u32> of the key binding holds word w of one block of the
//     4 keys (int8: elements 4w … 4w + 3, int4: 8w … 8w + 7 as nibbles); a tile's loads are
//     consecutive, so lane ℓ of the group loads the tile's vec4s ℓ, ℓ + KEY_LANES, … (one
//     coalesced run) and dots each with the query word(s) it holds for them, which gives the 4
//     keys' partial integer sums at once (a vec4<i32>). The BLOCK_LANES lanes of one block sum
//     them by subgroupShuffleXor (exact integers); each lane then scales its blocks' sums by
//     scale_q · scale_k (the 4 keys' block scales: one vec4<f32> load per tile and block, the
//     same address for the block's lanes) and the rest of the butterfly sums the blocks, so every
//     lane has the 4 scores with the same bits; lane ℓ keeps key ℓ % 4 of tile ℓ / 4;
//  2. the online softmax as in attention_decode_stream.wgsl;
//  3. P·V: a tile's 4 keys' weights come from lanes 4·tile … (subgroupShuffle); each lane loads
//     its value words of a tile some row uses and keeps the output columns of them (int8: column
//     x of value vec4 x; int4: columns 2x, 2x + 1), dequantized in registers (level · scale) and
//     added only into the rows that use the key: a hidden key's value is never added into an
//     output.
// After the loop the lanes' parts are summed and the groups combine their states
// (attention_decode_stream_common.wgsl.inc). Variants (masks, ranges, softcap, ALiBi, documents)
// use the flash kernels' helpers; the sink joins in the merge.
//
// Chosen by cpp/webgpu/plan.cpp (webgpu_decode_variant) on quantized caches when the adapter has
// subgroups and every row's query words and output columns fit a lane's registers; else
// attention_decode_quantized.wgsl. The glue defines shuffle_xor (subgroupShuffleXor on a vec4),
// `enable subgroups;`, and the key and value bindings as vec4<u32>.

//! include attention_common.wgsl.inc
//! include attention_flash_common.wgsl.inc
//! include attention_decode_workgroup.wgsl.inc
//! include attention_decode_quantized.wgsl.inc
//! include attention_decode_stream_common.wgsl.inc

// vec4<u32> loads of a tile of 4 keys (of E_PAD) and of 4 values (of EV_PAD).
const KEY_TILE_VEC4S: u32 = QBLOCKS * KEY_BLOCK_WORDS;
const VALUE_TILE_VEC4S: u32 = VALUE_BLOCKS * VALUE_BLOCK_WORDS;
// A lane's key loads, in slots of one block each (KEY_LANES below a block's vec4s: several
// loads of one block a slot), and its value loads.
const BLOCK_LANES: u32 = min(KEY_LANES, KEY_BLOCK_WORDS);  // lanes that hold one block's loads
const SLOT_LOADS: u32 = KEY_BLOCK_WORDS / BLOCK_LANES;
const LANE_SLOTS: u32 = (KEY_TILE_VEC4S + KEY_LANES * SLOT_LOADS - 1u) / (KEY_LANES * SLOT_LOADS);
const LANE_K: u32 = LANE_SLOTS * SLOT_LOADS;
const LANE_V: u32 = (VALUE_TILE_VEC4S + KEY_LANES - 1u) / KEY_LANES;
const QUERY_WORDS: u32 = select(1u, 2u, KEY_INT4);      // query words a key word meets
const VALUE_COLUMNS: u32 = select(1u, 2u, VALUE_INT4);  // output vec4 columns a value word holds
const STEP_TILES: u32 = KEY_LANES / 4u;  // tiles a group takes per step: one key per lane

// The row's query as a lane holds it: the words its key loads meet and (int4 keys) 8·Σ of those
// query levels, which the keys' levels + 8 overcount; per slot, the block's query scale.
struct LaneQuery {
  words: array<u32, LANE_K * QUERY_WORDS>,
  bias: array<i32, LANE_K>,
  scales: array<f32, LANE_SLOTS>,
}

// Key load n of the lane (the tile's vec4 lane + n·KEY_LANES).
fn key_load(lane: u32, n: u32) -> u32 { return lane + n * KEY_LANES; }

fn lane_query(row: QueryRow, lane: u32) -> LaneQuery {
  var q: LaneQuery;
  if (!row.in_range) { return q; }
  let blocks = quant_blocks(p.E);
  for (var n = 0u; n < LANE_K; n++) {
    let x = key_load(lane, n);
    if (x >= blocks * KEY_BLOCK_WORDS) { continue; }  // past E's blocks: zeros
    // The query words of the tile vec4 x: block x / KEY_BLOCK_WORDS, word x % KEY_BLOCK_WORDS
    // of it, which meets query words QUERY_WORDS·x … (8 query words a block).
    for (var i = 0u; i < QUERY_WORDS; i++) {
      let word = query[row.out_row * blocks * 8u + QUERY_WORDS * x + i];
      q.words[n * QUERY_WORDS + i] = word;
      if (KEY_INT4) { q.bias[n] += 8 * dot4_i8(word, 0x01010101u); }
    }
    q.scales[n / SLOT_LOADS] = bitcast<f32>(query[p.nbh * p.rows * blocks * 8u + row.out_row * blocks + x / KEY_BLOCK_WORDS]);
  }
  return q;
}

// The 4 keys' Σ level_q·level_k over one vec4 load of their levels (word w of a block; int4:
// levels + 8 in nibbles, low then high, meeting query words 2w and 2w + 1).
fn load_dots(levels: vec4<u32>, q: LaneQuery, n: u32) -> vec4<i32> {
  var d: vec4<i32>;
  for (var k = 0u; k < 4u; k++) {
    if (KEY_INT4) {
      d[k] = dot4_i8(levels[k] & 0x0f0f0f0fu, q.words[2u * n]) + dot4_i8((levels[k] >> 4u) & 0x0f0f0f0fu, q.words[2u * n + 1u]);
    } else {
      d[k] = dot4_i8(q.words[n], levels[k]);
    }
  }
  return d - vec4<i32>(q.bias[n]);
}

fn recompute_output4(row: QueryRow, m: f32, l: f32, c4: u32) -> vec4<f32> {
  return overflow_output4(row, decode_query(row), m, l, c4);
}

@compute @workgroup_size(DECODE_INVOCATIONS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32,
        @builtin(subgroup_invocation_id) subgroup_lane: u32) {
  let work = decode_workgroup(wg);
  let lane = t % KEY_LANES;
  let g = t / KEY_LANES;
  let group_base = subgroup_lane - lane;  // the group's lane 0 in the subgroup
  var rows: array<QueryRow, DECODE_ROWS>;
  var q: array<LaneQuery, DECODE_ROWS>;
  for (var r = 0u; r < DECODE_ROWS; r++) {
    rows[r] = decode_row(work, r);
    q[r] = lane_query(rows[r], lane);
  }
  let head = p.kv0 + work.kv_local;
  let k_rows = quant_rows(p.key_stride, p.E);
  let k_blocks = quant_blocks(p.E);
  let k_loads = k_blocks * KEY_BLOCK_WORDS;
  // vec4 indices: a tile-block's scales are one vec4 (quant_scale_start is a multiple of 4).
  let k_scales = quant_scale_start(k_rows, k_blocks, 4u * KEY_BLOCK_WORDS) / 4u;
  let v_rows = quant_rows(p.value_stride, p.Ev);
  let v_blocks = quant_blocks(p.Ev);
  let v_loads = v_blocks * VALUE_BLOCK_WORDS;
  let v_scales = quant_scale_start(v_rows, v_blocks, 4u * VALUE_BLOCK_WORDS) / 4u;
  let value_vec4s = (p.Ev + 3u) / 4u;
  // The tiles of 4 keys that hold the keys any row here may see (none when there are none).
  let tile_first = work.keys_first / 4;
  let tile_last = select(-1, work.keys_last / 4, work.keys_first <= work.keys_last);
  // The rows' online-softmax state (StreamState) and this lane's output columns of every row.
  var state = stream_state();
  var acc: array<array<vec4<f32>, LANE_V * VALUE_COLUMNS>, DECODE_ROWS>;
  for (var t0 = tile_first; t0 <= tile_last; t0 += i32(GROUPS * STEP_TILES)) {
    let step_first = t0 + i32(g * STEP_TILES);  // the group's first tile of this step

    // 1. Scores of the group's STEP_TILES tiles, one tile at a time; lane ℓ keeps those of key
    //    ℓ % 4 of tile ℓ / 4. Past the range a group scores its last tile again (the shuffles
    //    stay in uniform control flow) and uses nothing.
    var mine: array<vec4<f32>, ROW_VEC4S>;
    for (var tt = 0u; tt < STEP_TILES; tt++) {
      let tile = u32(min(step_first + i32(tt), tile_last));
      let k_tile = (head * (k_rows / 4u) + tile) * k_blocks;  // its first tile-block
      var levels: array<vec4<u32>, LANE_K>;
      var key_scales: array<vec4<f32>, LANE_SLOTS>;
      for (var n = 0u; n < LANE_K; n++) {
        let x = key_load(lane, n);
        if (x < k_loads) {
          levels[n] = key[k_tile * KEY_BLOCK_WORDS + x];
          if (n % SLOT_LOADS == 0u) { key_scales[n / SLOT_LOADS] = bitcast<vec4<f32>>(key[k_scales + k_tile + x / KEY_BLOCK_WORDS]); }
        }
      }
      // Per row, the 4 keys' q·k: each slot's block summed over its lanes in integers, scaled,
      // then the blocks summed over the lanes.
      for (var r = 0u; r < DECODE_ROWS; r++) {
        var part = vec4<f32>(0.0);
        for (var s = 0u; s < LANE_SLOTS; s++) {
          var d = vec4<i32>(0);
          for (var i = 0u; i < SLOT_LOADS; i++) { d += load_dots(levels[s * SLOT_LOADS + i], q[r], s * SLOT_LOADS + i); }
          for (var mask = 1u; mask < BLOCK_LANES; mask <<= 1u) { d += subgroupShuffleXor(d, mask); }
          part += (q[r].scales[s] * key_scales[s]) * vec4<f32>(d);
        }
        for (var mask = BLOCK_LANES; mask < KEY_LANES; mask <<= 1u) { part += shuffle_xor(part, mask); }
        mine[r / 4u][r % 4u] = select(mine[r / 4u][r % 4u], part[lane % 4u], lane / 4u == tt);
      }
    }

    // 2. The online softmax once per step, each lane for its own key.
    let tile_l = step_first + i32(lane / 4u);
    let step = step_softmax(&state, rows, mine, 4u * u32(max(tile_l, 0)) + lane % 4u, tile_l <= tile_last);
    for (var r = 0u; r < DECODE_ROWS; r++) {
      for (var c = 0u; c < LANE_V * VALUE_COLUMNS; c++) { acc[r][c] *= step.alpha[r]; }
    }

    // 3. O += P·V, a tile at a time: its 4 keys' weights and rows from lanes 4·tt … 4·tt + 3; the
    //    value words are loaded only for a tile some row uses, and a key's dequantized values are
    //    added only into the rows that use it.
    for (var tt = 0u; tt < STEP_TILES; tt++) {
      var keys: array<StepWeights, 4>;
      var key_used: vec4<u32>;
      for (var k = 0u; k < 4u; k++) {
        keys[k] = owner_weights(step, group_base + 4u * tt + k);
        key_used[k] = keys[k].used;
      }
      if (any(key_used != vec4<u32>(0u))) {
        let tile = u32(step_first + i32(tt));
        let v_tile = (head * (v_rows / 4u) + tile) * v_blocks;
        for (var n = 0u; n < LANE_V; n++) {
          let x = lane + n * KEY_LANES;
          if (x >= v_loads) { continue; }
          let words = value[v_tile * VALUE_BLOCK_WORDS + x];
          let scales = bitcast<vec4<f32>>(value[v_scales + v_tile + x / VALUE_BLOCK_WORDS]);
          for (var k = 0u; k < 4u; k++) {
            if (key_used[k] == 0u) { continue; }
            for (var h = 0u; h < VALUE_COLUMNS; h++) {
              // Output column VALUE_COLUMNS·x + h; columns past Ev are zeros: nothing is read for them.
              let c4 = VALUE_COLUMNS * x + h;
              if (c4 >= value_vec4s) { continue; }
              let v4 = value_dequantized4(words[k], c4, scales[k]);
              for (var r = 0u; r < DECODE_ROWS; r++) {
                if (((key_used[k] >> r) & 1u) != 0u) { acc[r][n * VALUE_COLUMNS + h] += keys[k].weights[r / 4u][r % 4u] * v4; }
              }
            }
          }
        }
      }
    }
  }

  store_stream_state(g, lane, state);
  for (var r = 0u; r < DECODE_ROWS; r++) {
    for (var n = 0u; n < LANE_V; n++) {
      for (var h = 0u; h < VALUE_COLUMNS; h++) {
        let c4 = VALUE_COLUMNS * (lane + n * KEY_LANES) + h;
        if (c4 < EV4) { store_group_columns(g, r, c4, acc[r][n * VALUE_COLUMNS + h]); }
      }
    }
  }
  write_split_records(work, rows, t);
}
