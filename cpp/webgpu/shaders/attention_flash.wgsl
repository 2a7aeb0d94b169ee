// attention_flash.wgsl: fused scaled dot-product attention, flash style.
//
// Computes, for every query row i of every (batch·head) of one chunk,
//   output[i] = softmax_j(q_i·k_j · scale + mask_ij) · V     over the keys j that row i may see,
// without ever building the [Lq, Lk] score matrix, and (WRITE_STATS) each row's softmax
// statistics (running max m, denominator l) for attention_weights.wgsl, and (WRITE_LSE) each
// row's log-sum-exp m + log l for the backward (returnLogSumExp).
//
// Tiling: one workgroup of ROWS invocations per (batch·head, tile of ROWS query rows); invocation
// t owns query row tile·ROWS + t: its query row (E_PAD floats) and its output accumulator (EV_PAD
// floats) live in private memory as vec4s. Keys and values stream through workgroup memory in
// tiles of BLOCK_KEYS keys (K tile [BLOCK_KEYS][E_PAD] + V tile [BLOCK_KEYS][EV_PAD], zero-padded,
// at most the device's maxComputeWorkgroupStorageSize, 16 KiB by default), loaded cooperatively
// by the whole workgroup. All inner loops run to compile-time bounds (E_PAD/4, EV_PAD/4,
// BLOCK_KEYS) so they can be unrolled. Per tile each row computes its scores, then an online-softmax update: new
// running max, rescale of denominator and accumulator by exp(m_old - m_new), accumulation of
// exp(s - m_new)·v. Causal workgroups stop at the last tile any of their rows can see.
//
// Variants (constants RANGES, ALIBI, SINKS, DOCUMENTS; attention_common.wgsl.inc): a workgroup's
// key tiles run from its first row's first visible key to its last row's last, so a window of w
// costs O(Lq·w); ALiBi's bias joins each score after the softcap; other documents' keys are
// hidden; a sink joins the row's max and denominator at the end.
//
// Semantics (as cpp/core/reference.cpp): hidden keys (bool 0, additive -inf, causal, window,
// key length, document) are never read into the sums, so NaN/Inf there cannot leak; a row that sees no key writes
// zeros; a NaN score on a visible key makes the whole row NaN; a row with exactly one visible key
// gets that key's value row bit for bit. NaN/-inf are tested through their
// bit patterns, since WGSL lets implementations assume float math stays finite.
//
// Key split (SPLIT; cpp/webgpu/plan.h, webgpu_flash_key_splits): the workgroup takes one split of
// the keys (p.split_keys each, from the grid, flash_workgroup) and writes each row's partial record
// (finish_row) for attention_decode_merge.wgsl instead of its output.
//
// Chosen by cpp/webgpu/plan.cpp (webgpu_flash_variant) when attention_flash_tiled.wgsl cannot
// run: E or Ev padded past 128, or a workgroup memory too small for its smallest tile.
//
// Prepended by the C++ glue (cpp/webgpu/plan.cpp, FlashVariant::wgsl_constants): the element
// types' declarations (QueryElement, KeyElement, ValueElement, query_at/key_at/value_at,
// query4/key4/value4; attention_common.wgsl.inc), then
//   const ROWS: u32 (64); const HEAVIEST_FIRST: bool, const SPLIT: bool (flash_workgroup, attention_flash_common.wgsl.inc);
//   const E_PAD: u32; const EV_PAD: u32; const BLOCK_KEYS: u32;
//   const MASK_KIND: u32 (0 none, 1 bool bytes packed in u32 words, 2 additive f32);
//   const CAUSAL: bool; const WRITE_STATS: bool; const WRITE_LSE: bool; const RANGES, ALIBI, SINKS, DOCUMENTS: bool;
//   const TRACE_ROW: u32; const TRACE_LANES: u32 (= 1) (the trace, attention_flash_common.wgsl.inc);
// Buffers hold one chunk (cpp/webgpu/plan.h, WebGpuChunk): query/output/stats rows
// [chunk heads × rows], key/value heads [kv0, kv0 + nkv), mask elements from mask_base.

//! include attention_common.wgsl.inc
//! include attention_flash_common.wgsl.inc
//! include attention_flash_finish.wgsl.inc

const LANES: u32 = 1u;  // invocations per query row (finish_row)

// Zero-padded to E_PAD/EV_PAD columns, so every loop below has a compile-time trip count
// (unrollable, private arrays stay in registers) and padding adds exact zeros.
var<workgroup> k_tile: array<vec4<f32>, BLOCK_KEYS * E4>;
var<workgroup> v_tile: array<vec4<f32>, BLOCK_KEYS * EV4>;

@compute @workgroup_size(ROWS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let at = flash_workgroup(wg);
  let tile = at.tile;
  let head = at.head;  // head within the chunk
  let split = at.split;
  let row = split_row(query_row(tile, head, t), split);  // invocation t owns query row t of the tile
  // With SPLIT, the keys of the tile's rows within the split; a split none of them sees costs
  // only its empty records.
  let tile_first = max(tile_first_key(tile, head), split_first_key(split));
  let tile_last = min(tile_last_key(tile, head), split_last_key(split));
  if (SPLIT && i32(tile_first) > tile_last) {
    if (row.in_range) { write_split_header(row, split, 0.0, 0.0, 0u, 0u, false, false); }
    return;
  }
  let documents = workgroup_documents(tile, head);
  let batch = (p.bh0 + head) / p.Hq;
  var q_row = query_vec4s(row);  // var: indexed in loops

  var m = 0.0;          // running max (valid once `seen`)
  var l = 0.0;          // running denominator
  var seen = false;     // some visible key so far
  var nan_row = false;  // a visible score was NaN
  var visible_count = 0u;
  var single_key = 0u;  // the visible key, when there is exactly one
  var acc: array<vec4<f32>, EV4>;
  var s_tile: array<f32, BLOCK_KEYS>;
  var visible: array<bool, BLOCK_KEYS>;

  for (var j0 = tile_first; i32(j0) <= tile_last; j0 += BLOCK_KEYS) {
    if (!tile_meets_documents(batch, j0 / BLOCK_KEYS, documents)) { continue; }
    let nk = min(BLOCK_KEYS, p.Lk - j0);
    // Cooperative load of the K and V tiles, zero-padded (keys past Lk and columns past E/Ev).
    for (var x = t; x < BLOCK_KEYS * E4; x += ROWS) {
      let jj = x / E4;
      var k4 = vec4<f32>(0.0);
      if (jj < nk) { k4 = key4(row.kv * p.key_stride + (j0 + jj) * p.E, 4u * (x % E4), p.E); }
      k_tile[x] = k4;
    }
    for (var x = t; x < BLOCK_KEYS * EV4; x += ROWS) {
      let jj = x / EV4;
      var v4 = vec4<f32>(0.0);
      if (jj < nk) { v4 = value4(row.kv * p.value_stride + (j0 + jj) * p.Ev, 4u * (x % EV4), p.Ev); }
      v_tile[x] = v4;
    }
    workgroupBarrier();

    if (row.in_range) {
      // Scores of this tile, and their max over visible keys.
      var tile_has_key = false;
      var tile_max = 0.0;
      for (var jj = 0u; jj < BLOCK_KEYS; jj++) {
        let j = j0 + jj;
        var vis = jj < nk && i32(j) >= row.first && i32(j) <= row.last;
        var s = 0.0;
        if (vis) { vis = key_visible(row, j); }
        if (vis) {
          for (var e4 = 0u; e4 < E4; e4++) { s += dot(q_row[e4], k_tile[jj * E4 + e4]); }
          let scored = scaled_masked_score(s, row.mask_row + j * p.mask_sk, alibi_bias(row.b, row.h, row.i, j));
          s = scored.s;
          if (scored.hidden) { vis = false; }
          if (vis && is_nan(s)) { nan_row = true; vis = false; }
        }
        visible[jj] = vis;
        s_tile[jj] = s;
        if (vis) {
          tile_max = select(s, max(tile_max, s), tile_has_key);
          tile_has_key = true;
        }
      }
      // Online softmax update.
      if (tile_has_key) {
        let m_new = select(tile_max, max(m, tile_max), seen);
        if (seen) {
          let alpha = exp(m - m_new);
          l *= alpha;
          for (var c4 = 0u; c4 < EV4; c4++) { acc[c4] *= alpha; }
        }
        for (var jj = 0u; jj < BLOCK_KEYS; jj++) {
          if (visible[jj]) {
            visible_count += 1u;
            single_key = j0 + jj;
            let w = exp(s_tile[jj] - m_new);
            l += w;
            for (var c4 = 0u; c4 < EV4; c4++) { acc[c4] += w * v_tile[jj * EV4 + c4]; }
          }
        }
        m = m_new;
        seen = true;
        if (TRACE_ROW != NO_TRACE && is_traced(row)) {
          let at = trace_state(j0, 0u, m, l);
          for (var c4 = 0u; c4 < EV4; c4++) {
            for (var d = 0u; d < 4u; d++) { stats[at + 4u * c4 + d] = acc[c4][d]; }
          }
        }
      }
    }
    workgroupBarrier();
  }

  if (!row.in_range) { return; }
  finish_row(row, q_row, 0u, m, l, acc, visible_count, single_key, seen, nan_row, split);
}
