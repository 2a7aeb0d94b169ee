// attention_decode_quantized.wgsl: flash-decoding on an int8/int4 KV cache, step 1 of 2 (step 2
// is attention_decode_merge.wgsl, unchanged): one query row over one split of its keys, reading
// the cache's levels and scales in place (cpp/core/kv_cache_format.h).
//
// Computes what attention_decode_partial.wgsl computes (the split's m_s, l_s, normalized partial
// output, visible count, last key, NaN flag: the same record in `stats`) with the scores of the
// quantized query (kv_quantize.wgsl wrote the chunk's query rows as int8 levels and block scales
// into the query binding):
//   q·k_j = Σ_blocks (scale_q · scale_k) · Σ_block level_q · level_k,
// each block's sum an exact integer dot product of 8 words of 4 bytes (dot4_i8: dot4I8Packed
// where WGSL has packed_4x8_integer_dot_product, else unpacked). int4 keys (levels + 8 in
// nibbles) go through the same dot products: the low and high nibbles of a word are 4 keys'
// worth of non-negative bytes each, and Σ (n − 8)·q = Σ n·q − 8·Σ q. Values are dequantized in
// registers, one word (int8: 4 elements; int4: 8) at a time. A NaN key scale, or a NaN query
// scale, makes the score NaN; a NaN value scale makes that block's elements NaN.
//
// Algorithm: one invocation per (row, split), key by key with an online softmax, as the float
// partial kernel. Chosen by cpp/webgpu/device.cpp for a decode (webgpu_decode_splits) on a
// quantized cache.

//! include attention_common.wgsl.inc
//! include attention_flash_common.wgsl.inc

const DECODE_STRIDE: u32 = 5u + EV_PAD;
const QBLOCKS: u32 = (E_PAD + 31u) / 32u;
const QWORDS: u32 = QBLOCKS * 8u;
const KEY_INT4: bool = KEY_QUANT_BITS == 4u;
const VALUE_INT4: bool = VALUE_QUANT_BITS == 4u;

// The row's quantized query: levels (4 a word), block scales and, for int4 keys, block sums.
struct QuantizedQuery {
  words: array<u32, QWORDS>,
  scales: array<f32, QBLOCKS>,
  sums: array<i32, QBLOCKS>,
  nan: bool,
}

fn load_query(out_row: u32) -> QuantizedQuery {
  var q: QuantizedQuery;
  let blocks = quant_blocks(p.E);
  for (var c = 0u; c < blocks; c++) {
    let block = out_row * blocks + c;
    var sum = 0;
    for (var w = 0u; w < 8u; w++) {
      let word = query[block * 8u + w];
      q.words[8u * c + w] = word;
      sum += dot4_i8(word, 0x01010101u);
    }
    q.sums[c] = sum;
    q.scales[c] = bitcast<f32>(query[p.nbh * p.rows * blocks * 8u + block]);
    q.nan = q.nan || is_nan(q.scales[c]);
  }
  return q;
}

// q·k_j from the levels (head: the cache's, from 0), and whether it is NaN.
struct QuantizedDot { qk: f32, nan: bool }
fn quantized_dot(q: QuantizedQuery, head: u32, j: u32) -> QuantizedDot {
  let rows = quant_rows(p.key_stride, p.E);
  let blocks = quant_blocks(p.E);
  let scales = quant_scale_start(rows, blocks, select(32u, 16u, KEY_INT4));
  var qk = 0.0;
  var nan = q.nan;
  for (var c = 0u; c < blocks; c++) {
    let tb = quant_tile_block(head, j, c, rows, blocks);
    var d = 0;
    if (KEY_INT4) {
      for (var w = 0u; w < 4u; w++) {
        let word = key[tb * 16u + 4u * w + j % 4u];
        d += dot4_i8(word & 0x0f0f0f0fu, q.words[8u * c + 2u * w]) + dot4_i8((word >> 4u) & 0x0f0f0f0fu, q.words[8u * c + 2u * w + 1u]);
      }
      d -= 8 * q.sums[c];
    } else {
      for (var w = 0u; w < 8u; w++) { d += dot4_i8(q.words[8u * c + w], key[tb * 32u + 4u * w + j % 4u]); }
    }
    let key_scale = bitcast<f32>(key[scales + tb * 4u + j % 4u]);
    nan = nan || is_nan(key_scale);
    qk += (q.scales[c] * key_scale) * f32(d);
  }
  return QuantizedDot(qk, nan);
}

// Value elements 4·c4 … 4·c4 + 3 of key j (head: the cache's), dequantized (zeros past Ev).
fn value_vec4(head: u32, j: u32, c4: u32) -> vec4<f32> {
  if (4u * c4 >= p.Ev) { return vec4<f32>(0.0); }
  let rows = quant_rows(p.value_stride, p.Ev);
  let blocks = quant_blocks(p.Ev);
  let c = c4 / 8u;
  let tb = quant_tile_block(head, j, c, rows, blocks);
  let scale = bitcast<f32>(value[quant_scale_start(rows, blocks, select(32u, 16u, VALUE_INT4)) + tb * 4u + j % 4u]);
  var levels: vec4<i32>;
  if (VALUE_INT4) {
    let word = value[tb * 16u + 4u * ((c4 % 8u) / 2u) + j % 4u];
    let shift = 4u * (c4 % 2u);
    levels = vec4<i32>(i32(extractBits(word, shift, 4u)), i32(extractBits(word, shift + 8u, 4u)),
                       i32(extractBits(word, shift + 16u, 4u)), i32(extractBits(word, shift + 24u, 4u))) - vec4<i32>(8);
  } else {
    let word = bitcast<i32>(value[tb * 32u + 4u * (c4 % 8u) + j % 4u]);
    levels = vec4<i32>(extractBits(word, 0u, 8u), extractBits(word, 8u, 8u), extractBits(word, 16u, 8u), extractBits(word, 24u, 8u));
  }
  return select(vec4<f32>(levels) * scale, vec4<f32>(scale), is_nan(scale));
}

// The row's score of key j, as scaled_masked_score gives it, NaN folded into `nan`.
struct KeyScore { s: f32, hidden: bool, nan: bool }
fn key_score(row: QueryRow, q: QuantizedQuery, j: u32) -> KeyScore {
  let dot = quantized_dot(q, row.kv + p.kv0, j);
  let scored = scaled_masked_score(select(dot.qk, 0.0, dot.nan), row.mask_row + j * p.mask_sk, alibi_bias(row.b, row.h, row.i, j));
  return KeyScore(scored.s, scored.hidden, dot.nan || is_nan(scored.s));
}

@compute @workgroup_size(DECODE_INVOCATIONS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = (wg.x + p.x_base) * DECODE_INVOCATIONS + t;
  if (g >= p.nbh * p.rows * p.splits) { return; }
  let r = g / p.splits;
  let split = g % p.splits;
  var row = query_row(0u, r / p.rows, r % p.rows);
  let q = load_query(row.out_row);
  row.first = max(row.first, i32(split * p.split_keys));
  row.last = min(row.last, i32(min((split + 1u) * p.split_keys, p.Lk)) - 1);
  let head = row.kv + p.kv0;

  var m = 0.0;
  var l = 0.0;
  var count = 0u;
  var last_key = 0u;
  var nan_row = false;
  var acc: array<vec4<f32>, EV4>;
  for (var j = u32(row.first); i32(j) <= row.last; j++) {
    if (!key_visible(row, j)) { continue; }
    let scored = key_score(row, q, j);
    if (scored.hidden) { continue; }
    if (scored.nan) {
      nan_row = true;
      continue;
    }
    let m_new = select(scored.s, max(m, scored.s), count > 0u);
    let alpha = select(1.0, exp(m - m_new), count > 0u);  // l and acc are 0 before the first key
    let w = exp(scored.s - m_new);
    l = l * alpha + w;
    for (var c4 = 0u; c4 < EV4; c4++) { acc[c4] = acc[c4] * alpha + w * value_vec4(head, j, c4); }
    m = m_new;
    count += 1u;
    last_key = j;
  }

  // acc holds l·o_s; where it overflowed, o_s is recomputed with normalized weights.
  var overflowed = false;
  for (var c4 = 0u; c4 < EV4; c4++) { overflowed = overflowed || !all_finite4(acc[c4]); }
  let inv_l = select(0.0, 1.0 / l, count > 0u);
  let base = g * DECODE_STRIDE;
  for (var c4 = 0u; c4 < EV4; c4++) {
    var o = acc[c4] * inv_l;
    if (overflowed && count > 1u && !nan_row) {
      o = vec4<f32>(0.0);
      for (var j = u32(row.first); i32(j) <= row.last; j++) {
        if (!key_visible(row, j)) { continue; }
        let scored = key_score(row, q, j);
        if (scored.hidden) { continue; }
        o += (exp(scored.s - m) / l) * value_vec4(head, j, c4);
      }
    }
    for (var d = 0u; d < 4u; d++) { stats[base + 5u + 4u * c4 + d] = o[d]; }
  }
  stats[base] = m;
  stats[base + 1u] = l;
  stats[base + 2u] = f32(count);
  stats[base + 3u] = f32(last_key);
  stats[base + 4u] = select(0.0, 1.0, nan_row);
}
