// attention_flash.wgsl: fused scaled dot-product attention, flash style.
//
// Computes, for every query row i of every (batch·head) of one chunk,
//   output[i] = softmax_j(q_i·k_j · scale + mask_ij) · V     over the keys j that row i may see,
// without ever building the [Lq, Lk] score matrix, and (WRITE_STATS) each row's softmax
// statistics (running max m, denominator l) for attention_weights.wgsl.
//
// Tiling: one workgroup of 64 invocations per (batch·head, tile of 64 query rows); invocation t
// owns query row tile·64 + t: its query row (E_PAD floats) and its output accumulator (EV_PAD
// floats) live in private memory. Keys and values stream through workgroup memory in tiles of
// BLOCK_KEYS keys (K tile [BLOCK_KEYS][E_PAD] + V tile [BLOCK_KEYS][EV_PAD], at most the
// device's maxComputeWorkgroupStorageSize, 16 KiB by default), loaded cooperatively by the
// whole workgroup. Per tile each row computes its scores, then an online-softmax update: new
// running max, rescale of denominator and accumulator by exp(m_old - m_new), accumulation of
// exp(s - m_new)·v. Causal workgroups stop at the last tile any of their rows can see.
//
// Semantics (as cpp/core/attention_reference.cpp): hidden keys (bool 0, additive -inf, causal)
// are never read into the sums, so NaN/Inf there cannot leak; a row that sees no key writes
// zeros; a NaN score on a visible key makes the whole row NaN; a row with exactly one visible key
// gets that key's value row bit for bit. NaN/-inf are tested through their
// bit patterns, since WGSL lets implementations assume float math stays finite.
//
// Prepended by the C++ glue (cpp/core/webgpu_plan.cpp, FlashVariant::wgsl_constants):
//   const E_PAD: u32; const EV_PAD: u32; const BLOCK_KEYS: u32;
//   const MASK_KIND: u32 (0 none, 1 bool bytes packed in u32 words, 2 additive f32);
//   const CAUSAL: bool; const WRITE_STATS: bool;
// Buffers hold one chunk (cpp/core/webgpu_plan.h, WebGpuChunk): query/output/stats rows
// [chunk heads × rows], key/value heads [kv0, kv0 + nkv), mask elements from mask_base.

struct Params {
  Lq: u32, Lk: u32, E: u32, Ev: u32,
  Hq: u32, Hkv: u32, group: u32, bh0: u32,
  nbh: u32, row0: u32, rows: u32, kv0: u32,
  mask_base: u32, mask_sb: u32, mask_sh: u32, mask_sq: u32,
  mask_sk: u32, scale: f32, causal_offset: i32, x_base: u32,
  y_base: u32, nan_bits: u32, pad1: u32, pad2: u32,  // nan_bits: a run-time NaN (WGSL rejects NaN constants)
  pad3: vec4<u32>, pad4: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> query: array<f32>;
@group(0) @binding(2) var<storage, read> key: array<f32>;
@group(0) @binding(3) var<storage, read> value: array<f32>;
@group(0) @binding(4) var<storage, read> mask: array<u32>;
@group(0) @binding(5) var<storage, read_write> output: array<f32>;
@group(0) @binding(6) var<storage, read_write> stats: array<f32>;

const ROWS: u32 = 64u;
const NEG_INF_BITS: u32 = 0xff800000u;

var<workgroup> k_tile: array<f32, BLOCK_KEYS * E_PAD>;
var<workgroup> v_tile: array<f32, BLOCK_KEYS * EV_PAD>;

fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn is_neg_inf(x: f32) -> bool { return bitcast<u32>(x) == NEG_INF_BITS; }

// Mask element `idx` (absolute, as in the full broadcast mask) of this chunk's mask buffer.
fn mask_bool(idx: u32) -> bool {
  let rel = idx - p.mask_base;
  return ((mask[rel >> 2u] >> ((rel & 3u) * 8u)) & 0xffu) != 0u;
}
fn mask_add(idx: u32) -> f32 { return bitcast<f32>(mask[idx - p.mask_base]); }

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let tile = wg.x + p.x_base;
  let head = wg.y + p.y_base;              // head within the chunk
  let row_local = tile * ROWS + t;         // row within the chunk's rows of this head
  let in_range = row_local < p.rows;
  let i = p.row0 + row_local;              // query row in [0, Lq)
  let bh = p.bh0 + head;
  let b = bh / p.Hq;
  let h = bh % p.Hq;
  let kv = b * p.Hkv + h / p.group - p.kv0;  // GQA: query head h reads kv head h / (Hq/Hkv)
  let out_row = head * p.rows + row_local;

  var q_row: array<f32, E_PAD>;
  if (in_range) {
    for (var e = 0u; e < p.E; e++) { q_row[e] = query[out_row * p.E + e]; }
  }

  // Last key this row may see, and (workgroup-uniform) the last key any row of the tile may see.
  var last = i32(p.Lk) - 1;
  var tile_last = last;
  if (CAUSAL) {
    last = min(i32(i) + p.causal_offset, last);
    let tile_rows_end = min(tile * ROWS + ROWS, p.rows);
    tile_last = min(i32(p.row0 + tile_rows_end) - 1 + p.causal_offset, tile_last);
  }
  let mask_row = b * p.mask_sb + h * p.mask_sh + i * p.mask_sq;

  var m = 0.0;          // running max (valid once `seen`)
  var l = 0.0;          // running denominator
  var seen = false;     // some visible key so far
  var nan_row = false;  // a visible score was NaN
  var visible_count = 0u;
  var single_key = 0u;  // the visible key, when there is exactly one
  var acc: array<f32, EV_PAD>;
  var s_tile: array<f32, BLOCK_KEYS>;
  var visible: array<bool, BLOCK_KEYS>;

  for (var j0 = 0u; i32(j0) <= tile_last; j0 += BLOCK_KEYS) {
    let nk = min(BLOCK_KEYS, p.Lk - j0);
    // Cooperative load of the K and V tiles (contiguous in memory: [Lk, E] and [Lk, Ev]).
    let k_base = (kv * p.Lk + j0) * p.E;
    for (var x = t; x < nk * p.E; x += ROWS) {
      k_tile[(x / p.E) * E_PAD + x % p.E] = key[k_base + x];
    }
    let v_base = (kv * p.Lk + j0) * p.Ev;
    for (var x = t; x < nk * p.Ev; x += ROWS) {
      v_tile[(x / p.Ev) * EV_PAD + x % p.Ev] = value[v_base + x];
    }
    workgroupBarrier();

    if (in_range) {
      // Scores of this tile, and their max over visible keys.
      var tile_has_key = false;
      var tile_max = 0.0;
      for (var jj = 0u; jj < nk; jj++) {
        let j = j0 + jj;
        var vis = i32(j) <= last;
        var s = 0.0;
        if (vis && MASK_KIND == 1u) { vis = mask_bool(mask_row + j * p.mask_sk); }
        if (vis) {
          for (var e = 0u; e < p.E; e++) { s += q_row[e] * k_tile[jj * E_PAD + e]; }
          s *= p.scale;
          if (MASK_KIND == 2u) {
            let mv = mask_add(mask_row + j * p.mask_sk);
            if (is_neg_inf(mv)) { vis = false; } else { s += mv; }
          }
          if (vis && is_neg_inf(s)) { vis = false; }
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
          for (var c = 0u; c < p.Ev; c++) { acc[c] *= alpha; }
        }
        for (var jj = 0u; jj < nk; jj++) {
          if (visible[jj]) {
            visible_count += 1u;
            single_key = j0 + jj;
            let w = exp(s_tile[jj] - m_new);
            l += w;
            for (var c = 0u; c < p.Ev; c++) { acc[c] += w * v_tile[jj * EV_PAD + c]; }
          }
        }
        m = m_new;
        seen = true;
      }
    }
    workgroupBarrier();
  }

  if (!in_range) { return; }
  let nan = bitcast<f32>(p.nan_bits);
  let inv_l = select(0.0, 1.0 / l, seen);
  // One visible key: its weight is exactly 1, so the output is its value row, copied (not
  // multiplied: GPUs may flush subnormal products to zero, WGSL allows it).
  let single_row = (kv * p.Lk + single_key) * p.Ev;
  for (var c = 0u; c < p.Ev; c++) {
    var o = acc[c] * inv_l;
    if (visible_count == 1u) { o = value[single_row + c]; }
    if (!seen) { o = 0.0; }
    if (nan_row) { o = nan; }
    output[out_row * p.Ev + c] = o;
  }
  if (WRITE_STATS) {
    stats[2u * out_row] = select(select(0.0, m, seen), nan, nan_row);
    stats[2u * out_row + 1u] = select(0.0, l, seen);
  }
}
