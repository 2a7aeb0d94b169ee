// attention_decode_quantized.wgsl: flash-decoding on an int8/int4 KV cache, step 1 of 2 (step 2
// is attention_decode_merge.wgsl, shared with float caches): the query rows that read one
// key/value head over one split of its keys, together, reading the cache's levels and scales in
// place (cpp/core/kv_cache_format.h).
//
// Computes what attention_decode_partial.wgsl computes (the split's m_s, l_s, normalized partial
// output, visible count, last key, NaN flag: the same record in `stats`) with the scores of the
// quantized query (kv_quantize.wgsl wrote the chunk's query rows as int8 levels and block scales
// into the query binding):
//   q·k_j = Σ_blocks (scale_q · scale_k) · Σ_block level_q · level_k,
// each block's sum an exact integer dot product of 8 words of 4 bytes (dot4_i8: dot4I8Packed
// where WGSL has packed_4x8_integer_dot_product, else unpacked). int4 keys (levels + 8 in
// nibbles) go through the same dot products: the low and high nibbles of a word are 4 keys'
// worth of non-negative bytes each, and Σ (n − 8)·q = Σ n·q − 8·Σ q. Values are dequantized
// from workgroup memory, one word (int8: 4 elements; int4: 8) at a time. A NaN key scale, or a
// NaN query scale, makes the score NaN; a NaN value scale makes that block's elements NaN.
//
// Algorithm: the float kernel's (attention_decode_split.wgsl.inc: one workgroup per KV head,
// block of the rows that read it and split; lanes per row; the same reductions). The cache
// stores 4 keys' levels interleaved in tiles of one block of 32 elements, then every tile's 4
// block scales (kv_cache_format.h), so the levels of keys [j0, j0 + BLOCK_KEYS) (j0 a multiple
// of 4) are one run of words and their scales another: each is copied into workgroup memory
// (consecutive invocations, consecutive words: coalesced) as it lies, once for every row.
// Chosen by cpp/webgpu/plan.cpp (webgpu_decode_variant) for a decode on a quantized cache.

//! include attention_common.wgsl.inc
//! include attention_flash_common.wgsl.inc
//! include attention_decode_workgroup.wgsl.inc
//! include attention_decode_quantized.wgsl.inc
//! include attention_decode_split.wgsl.inc

const TILE_KEY_ALIGN: u32 = 4u;
alias DecodeQuery = QuantizedQuery;

// The tile's levels and block scales in the cache's order (the tile block of keys jj … jj + 3
// and block c is (jj / 4)·blocks + c). A tile block of key levels takes K_TILE_BLOCK words, one
// more than it holds: a row's lanes read keys jj, jj + 4, … of one block, one tile block apart,
// which would otherwise fall in the same banks.
const K_TILE_BLOCK: u32 = 4u * KEY_BLOCK_WORDS + 1u;
var<workgroup> k_words: array<u32, BLOCK_KEYS / 4u * QBLOCKS * K_TILE_BLOCK>;
var<workgroup> k_scales: array<f32, BLOCK_KEYS * QBLOCKS>;
var<workgroup> v_words: array<u32, BLOCK_KEYS * VALUE_BLOCKS * VALUE_BLOCK_WORDS>;
var<workgroup> v_scales: array<f32, BLOCK_KEYS * VALUE_BLOCKS>;

// Copies the tile blocks of keys [j0, last] rounded out to whole tiles of 4 (j0 is a multiple of
// 4; the cache holds its rows rounded up to 4): levels, then scales. The keys past `last` there
// are never scored, and their weights are hidden.
fn load_tiles(kv_local: u32, j0: i32, last: i32, t: u32) {
  let head = p.kv0 + kv_local;
  let groups = (min(BLOCK_KEYS, u32(last - j0) + 1u) + 3u) / 4u;
  let k_rows = quant_rows(p.key_stride, p.E);
  let k_blocks = quant_blocks(p.E);
  let k_first = quant_tile_block(head, u32(j0), 0u, k_rows, k_blocks);
  for (var x = t; x < groups * k_blocks * 4u * KEY_BLOCK_WORDS; x += DECODE_INVOCATIONS) {
    k_words[x / (4u * KEY_BLOCK_WORDS) * K_TILE_BLOCK + x % (4u * KEY_BLOCK_WORDS)] = key_word(k_first * 4u * KEY_BLOCK_WORDS + x);
  }
  let k_scale_first = quant_scale_start(k_rows, k_blocks, 4u * KEY_BLOCK_WORDS) + 4u * k_first;
  for (var x = t; x < groups * k_blocks * 4u; x += DECODE_INVOCATIONS) { k_scales[x] = bitcast<f32>(key_word(k_scale_first + x)); }
  let v_rows = quant_rows(p.value_stride, p.Ev);
  let v_blocks = quant_blocks(p.Ev);
  let v_first = quant_tile_block(head, u32(j0), 0u, v_rows, v_blocks);
  for (var x = t; x < groups * v_blocks * 4u * VALUE_BLOCK_WORDS; x += DECODE_INVOCATIONS) {
    v_words[x] = value_word(v_first * 4u * VALUE_BLOCK_WORDS + x);
  }
  let v_scale_first = quant_scale_start(v_rows, v_blocks, 4u * VALUE_BLOCK_WORDS) + 4u * v_first;
  for (var x = t; x < groups * v_blocks * 4u; x += DECODE_INVOCATIONS) { v_scales[x] = bitcast<f32>(value_word(v_scale_first + x)); }
}

fn tile_dot(q: DecodeQuery, jj: u32) -> TileDot {
  let blocks = quant_blocks(p.E);
  var qk = 0.0;
  var nan = q.nan;
  for (var c = 0u; c < blocks; c++) {
    let tb = (jj / 4u) * blocks + c;
    var d = 0;
    for (var w = 0u; w < KEY_BLOCK_WORDS; w++) { d += key_word_dot(q, c, w, k_words[tb * K_TILE_BLOCK + 4u * w + jj % 4u]); }
    let key_scale = k_scales[4u * tb + jj % 4u];
    nan = nan || is_nan(key_scale);
    qk += block_qk(q, c, d, key_scale);
  }
  return TileDot(qk, nan);
}

fn tile_value4(jj: u32, c4: u32) -> vec4<f32> {
  let tb = (jj / 4u) * quant_blocks(p.Ev) + c4 / 8u;
  return value_dequantized4(v_words[4u * (tb * VALUE_BLOCK_WORDS + value_block_word(c4)) + jj % 4u], c4, v_scales[4u * tb + jj % 4u]);
}
