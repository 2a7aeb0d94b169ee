// attention_flash_tiled.wgsl: fused scaled dot-product attention, flash style, with four
// invocations per query row, for GPUs.
//
// Computes exactly what attention_flash.wgsl computes (same bindings, uniforms, row statistics,
// semantics and grid: one workgroup per (batch·head, ROWS query rows)) with LANES·ROWS
// invocations instead of ROWS, so a GPU core holds more independent work and each invocation fewer registers.
//
// Tiling (LANES = 4): invocation t serves query row r = t / 4 of the tile as lane x = t % 4. It
// keeps the query row in registers (E_PAD/4 vec4s), scores keys x, x+4, x+8, ... of each K tile
// (BLOCK_KEYS/4 independent dot products) and owns output vec4 columns x, x+4, ... of its row.
// Per tile of BLOCK_KEYS keys, with a barrier after each step:
//   1. the workgroup loads the K tile into workgroup memory (rows padded by one vec4, so the four
//      lanes' reads of different keys fall in different banks);
//   2. each lane scores its keys (scale, mask, causal) and shares its maximum over visible keys;
//   3. each lane takes the row's maximum over the four lanes, rescales its accumulator and its part
//      of the denominator (online softmax), writes its weights exp(s − m) into the P tile (a hidden
//      key as −0.0), and the workgroup loads the V tile over the K tile;
//   4. each lane accumulates Σ_j P[r, j]·V[j, its columns]. A hidden key adds −0.0·V = ±0 when V is
//      finite; a tile whose V holds Inf/NaN skips hidden keys one by one (hidden keys are never
//      read into a sum, as in every backend).
// The lanes' denominators, visible-key counts and NaN flags are summed once, at the end.
// With SPLIT the workgroup walks only its split of the keys and writes partial records, as
// attention_flash.wgsl does.
// Chosen by cpp/webgpu/plan.cpp (webgpu_flash_variant) when E and Ev pad to at most 128 and
// a tile of 16 keys fits the workgroup memory; otherwise attention_flash.wgsl runs.
//
// Prepended by the C++ glue, as for attention_flash.wgsl, plus LANES:
//   const ROWS: u32 (64, 32 or 16: cpp/webgpu/plan.h, webgpu_flash_rows); const HEAVIEST_FIRST: bool; const SPLIT: bool;
//   const LANES: u32; const E_PAD: u32; const EV_PAD: u32; const BLOCK_KEYS: u32 (16, 32 or 64);
//   const MASK_KIND: u32; const CAUSAL: bool; const WRITE_STATS: bool; const WRITE_LSE: bool;
//   const RANGES, ALIBI, SINKS, DOCUMENTS: bool (the variants, as in attention_flash.wgsl);
//   const TRACE_ROW: u32; const TRACE_LANES: u32 (= LANES) (the trace, attention_flash_common.wgsl.inc).

//! include attention_common.wgsl.inc
//! include attention_flash_common.wgsl.inc
//! include attention_flash_finish.wgsl.inc

const THREADS: u32 = ROWS * LANES;
const KEYS_PER_LANE: u32 = BLOCK_KEYS / LANES;
const KV_STRIDE: u32 = max(E4, EV4) + 1u;
// A P tile row holds BLOCK_KEYS weights, padded by LANES words: the 8 rows of a 32-invocation
// subgroup then start on 8 different multiples of 4 banks (of 32), so its lanes' writes of keys
// lane + 4k in step 3 hit 32 different banks (a pad of 1 put rows r and lanes x with equal r + x
// on one bank, up to 4 ways), and step 4's reads of one key by its 8 rows stay apart too.
const P_STRIDE: u32 = BLOCK_KEYS + LANES;
const HIDDEN_BITS: u32 = 0x80000000u;  // −0.0: a hidden key's weight in the P tile
const NO_KEY: u32 = 0x7fc00001u;       // a NaN: "no visible key" (a visible score is never NaN)

var<workgroup> kv_tile: array<vec4<f32>, BLOCK_KEYS * KV_STRIDE>;  // K, then V, of this tile
var<workgroup> p_tile: array<u32, ROWS * P_STRIDE>;                // f32 bits of the weights
var<workgroup> lane_share: array<u32, ROWS * LANES>;               // one word per lane
var<workgroup> v_not_finite: atomic<u32>;

// Each lane's `word`, as every lane of row r sees it after a barrier. (The next write to
// lane_share comes after the loop's later barriers, so no barrier is needed after the reads.)
fn share_row(r: u32, lane: u32, word: u32) -> array<u32, LANES> {
  lane_share[r * LANES + lane] = word;
  workgroupBarrier();
  var words: array<u32, LANES>;
  for (var x = 0u; x < LANES; x++) { words[x] = lane_share[r * LANES + x]; }
  return words;
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let r = t / LANES;
  let lane = t % LANES;
  let at = flash_workgroup(wg);
  let tile = at.tile;
  let head = at.head;  // head within the chunk
  let split = at.split;
  let row = split_row(query_row(tile, head, r), split);
  // With SPLIT, the keys of the tile's rows within the split; a split none of them sees costs
  // only its empty records.
  let tile_first = max(tile_first_key(tile, head), split_first_key(split));
  let tile_last = min(tile_last_key(tile, head), split_last_key(split));
  if (SPLIT && i32(tile_first) > tile_last) {
    if (row.in_range && lane == 0u) { write_split_header(row, split, 0.0, 0.0, 0u, 0u, false, false); }
    return;
  }
  let documents = workgroup_documents(tile, head);
  let batch = (p.bh0 + head) / p.Hq;
  var q_row = query_vec4s(row);  // var: indexed in loops

  var m = 0.0;          // running max of the row (valid once `seen`), the same in its four lanes
  var seen = false;     // the row has a visible key so far
  var l = 0.0;          // this lane's part of the running denominator
  var count = 0u;       // this lane's visible keys
  var nan_row = false;  // this lane met a visible NaN score
  var some_key = 0u;    // one visible key of this lane
  var acc: array<vec4<f32>, COLS_PER_LANE>;
  var s: array<f32, KEYS_PER_LANE>;

  for (var j0 = tile_first; i32(j0) <= tile_last; j0 += BLOCK_KEYS) {
    if (!tile_meets_documents(batch, j0 / BLOCK_KEYS, documents)) { continue; }
    let nk = min(BLOCK_KEYS, p.Lk - j0);
    if (t == 0u) { atomicStore(&v_not_finite, 0u); }
    // 1. K tile, zero-padded past Lk and E.
    for (var x = t; x < BLOCK_KEYS * E4; x += THREADS) {
      let jj = x / E4;
      var k4 = vec4<f32>(0.0);
      if (jj < nk) { k4 = key4(row.kv * p.key_stride + (j0 + jj) * p.E, 4u * (x % E4), p.E); }
      kv_tile[jj * KV_STRIDE + x % E4] = k4;
    }
    workgroupBarrier();

    // 2. Scores of this lane's keys j0 + lane + 4k.
    for (var k = 0u; k < KEYS_PER_LANE; k++) { s[k] = 0.0; }
    for (var e4 = 0u; e4 < E4; e4++) {
      let qv = q_row[e4];
      for (var k = 0u; k < KEYS_PER_LANE; k++) { s[k] += dot(qv, kv_tile[(lane + LANES * k) * KV_STRIDE + e4]); }
    }
    var visible_bits = 0u;
    var lane_max = 0.0;
    for (var k = 0u; k < KEYS_PER_LANE; k++) {
      let jj = lane + LANES * k;
      let j = j0 + jj;
      var vis = jj < nk && i32(j) >= row.first && i32(j) <= row.last;
      if (vis) { vis = key_visible(row, j); }
      if (vis) {
        let scored = scaled_masked_score(s[k], row.mask_row + j * p.mask_sk, alibi_bias(row.b, row.h, row.i, j));
        s[k] = scored.s;
        if (scored.hidden) { vis = false; }
        if (vis && is_nan(scored.s)) { nan_row = true; vis = false; }
      }
      if (vis) {
        lane_max = select(s[k], max(lane_max, s[k]), visible_bits != 0u);
        visible_bits |= 1u << k;
      }
    }
    let maxima = share_row(r, lane, select(NO_KEY, bitcast<u32>(lane_max), visible_bits != 0u));

    // 3. Online-softmax update with the row's maximum; weights into the P tile; V tile.
    var row_has = false;
    var row_max = 0.0;
    for (var x = 0u; x < LANES; x++) {
      if (maxima[x] != NO_KEY) {
        row_max = select(bitcast<f32>(maxima[x]), max(row_max, bitcast<f32>(maxima[x])), row_has);
        row_has = true;
      }
    }
    if (row_has) {
      let m_new = select(row_max, max(m, row_max), seen);
      if (seen) {
        let alpha = exp(m - m_new);
        l *= alpha;
        for (var c = 0u; c < COLS_PER_LANE; c++) { acc[c] *= alpha; }
      }
      m = m_new;
      seen = true;
    }
    for (var k = 0u; k < KEYS_PER_LANE; k++) {
      let jj = lane + LANES * k;
      var w_bits = HIDDEN_BITS;
      if (((visible_bits >> k) & 1u) != 0u) {
        let w = exp(s[k] - m);
        l += w;
        count += 1u;
        some_key = j0 + jj;
        w_bits = bitcast<u32>(w);
      }
      p_tile[r * P_STRIDE + jj] = w_bits;
    }
    var bad_v = false;
    for (var x = t; x < BLOCK_KEYS * EV4; x += THREADS) {
      let jj = x / EV4;
      var v4 = vec4<f32>(0.0);
      if (jj < nk) { v4 = value4(row.kv * p.value_stride + (j0 + jj) * p.Ev, 4u * (x % EV4), p.Ev); }
      bad_v = bad_v || !all_finite4(v4);
      kv_tile[jj * KV_STRIDE + x % EV4] = v4;
    }
    if (bad_v) { atomicOr(&v_not_finite, 1u); }
    workgroupBarrier();

    // 4. acc += P[r, :]·V[:, this lane's columns].
    if (row_has) {
      if (atomicLoad(&v_not_finite) == 0u) {
        for (var jj = 0u; jj < BLOCK_KEYS; jj++) {
          let w = bitcast<f32>(p_tile[r * P_STRIDE + jj]);
          for (var c = 0u; c < COLS_PER_LANE; c++) { acc[c] += w * kv_tile[jj * KV_STRIDE + lane + LANES * c]; }
        }
      } else {
        for (var jj = 0u; jj < BLOCK_KEYS; jj++) {
          let w_bits = p_tile[r * P_STRIDE + jj];
          if (w_bits == HIDDEN_BITS) { continue; }
          for (var c = 0u; c < COLS_PER_LANE; c++) { acc[c] += bitcast<f32>(w_bits) * kv_tile[jj * KV_STRIDE + lane + LANES * c]; }
        }
      }
    }
    if (TRACE_ROW != NO_TRACE && row_has && is_traced(row)) {
      let at = trace_state(j0, lane, m, l);
      for (var c = 0u; c < COLS_PER_LANE; c++) {
        for (var d = 0u; d < 4u; d++) { stats[at + 4u * (lane + LANES * c) + d] = acc[c][d]; }
      }
    }
    workgroupBarrier();
  }

  // The row's totals over its four lanes, through the P tile (free now): each lane's denominator
  // part, visible-key count, NaN flag and one visible key (or the max-u32 sentinel).
  let base = r * P_STRIDE + 4u * lane;
  p_tile[base] = bitcast<u32>(l);
  p_tile[base + 1u] = count;
  p_tile[base + 2u] = select(0u, 1u, nan_row);
  p_tile[base + 3u] = select(0xffffffffu, some_key, count > 0u);
  workgroupBarrier();
  var l_row = 0.0;
  var count_row = 0u;
  var nan_any = false;
  var single_key = 0u;
  for (var x = 0u; x < LANES; x++) {
    let at = r * P_STRIDE + 4u * x;
    l_row += bitcast<f32>(p_tile[at]);
    count_row += p_tile[at + 1u];
    nan_any = nan_any || p_tile[at + 2u] != 0u;
    if (p_tile[at + 3u] != 0xffffffffu) { single_key = p_tile[at + 3u]; }
  }
  if (!row.in_range) { return; }

  finish_row(row, q_row, lane, m, l_row, acc, count_row, single_key, seen, nan_any, split);
}
