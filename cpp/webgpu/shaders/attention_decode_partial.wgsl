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
// Algorithm (attention_decode_split.wgsl.inc, shared with attention_decode_quantized.wgsl): one
// workgroup per (KV head of the chunk, block of DECODE_ROWS of the rows that read it, split):
// with GQA every query head of the group (and each of its few query rows) shares the workgroup,
// so K and V are read once per group, not once per row. Per key tile of BLOCK_KEYS keys, all
// invocations load the K and V tiles into workgroup memory (consecutive invocations,
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
//! include attention_decode_workgroup.wgsl.inc
//! include attention_decode_split.wgsl.inc

alias DecodeQuery = array<vec4<f32>, E4>;
const TILE_KEY_ALIGN: u32 = 1u;

// A key's row in k_tile is E4 + 1 vec4s long: a row's lanes score keys lane, lane + LANES, …
// at the same e4, and rows of E4 vec4s (a multiple of 128 bytes) would all fall in one bank.
const K_ROW: u32 = E4 + 1u;
var<workgroup> k_tile: array<vec4<f32>, BLOCK_KEYS * K_ROW>;
var<workgroup> v_tile: array<vec4<f32>, BLOCK_KEYS * EV4>;

fn decode_query(row: QueryRow) -> DecodeQuery { return query_vec4s(row); }

// Zeros for keys past `last`.
fn load_tiles(kv_local: u32, j0: i32, last: i32, t: u32) {
  let k_base = kv_local * p.key_stride;
  let v_base = kv_local * p.value_stride;
  for (var x = t; x < BLOCK_KEYS * E4; x += DECODE_INVOCATIONS) {
    let j = j0 + i32(x / E4);
    k_tile[x / E4 * K_ROW + x % E4] = select(vec4<f32>(0.0), key4(k_base + u32(j) * p.E, 4u * (x % E4), p.E), j <= last);
  }
  for (var x = t; x < BLOCK_KEYS * EV4; x += DECODE_INVOCATIONS) {
    let j = j0 + i32(x / EV4);
    v_tile[x] = select(vec4<f32>(0.0), value4(v_base + u32(j) * p.Ev, 4u * (x % EV4), p.Ev), j <= last);
  }
}

fn tile_dot(q: DecodeQuery, jj: u32) -> TileDot {
  var qk = 0.0;
  for (var e4 = 0u; e4 < E4; e4++) { qk += dot(q[e4], k_tile[jj * K_ROW + e4]); }
  return TileDot(qk, false);
}

fn tile_value4(jj: u32, c4: u32) -> vec4<f32> { return v_tile[jj * EV4 + c4]; }

fn overflow_output4(row: QueryRow, q: DecodeQuery, m: f32, l: f32, c4: u32) -> vec4<f32> {
  return normalized_output4(row, q, m, l, c4);
}
