// attention_common.wgsl: what every attention kernel shares, prepended by the C++ glue
// (cpp/webgpu/webgpu_attention.cpp) after the variant's constants and before the kernel. The
// functions below read bindings each kernel declares: `p` (Params), `query`, `key` and `mask`.
// Params is the uniform block; cpp/core/webgpu_plan.cpp (webgpu_uniforms) packs it: 32 u32 words.
// NaN and -inf are tested by bit pattern: WGSL lets implementations assume finite math.

struct Params {
  Lq: u32, Lk: u32, E: u32, Ev: u32,
  Hq: u32, Hkv: u32, group: u32, bh0: u32,
  nbh: u32, row0: u32, rows: u32, kv0: u32,
  mask_base: u32, mask_sb: u32, mask_sh: u32, mask_sq: u32,
  mask_sk: u32, scale: f32, causal_offset: i32, x_base: u32,
  y_base: u32, nan_bits: u32, pad1: u32, pad2: u32,  // nan_bits: a run-time NaN (WGSL rejects NaN constants)
  pad3: vec4<u32>, pad4: vec4<u32>,
}

const NEG_INF_BITS: u32 = 0xff800000u;

fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn is_neg_inf(x: f32) -> bool { return bitcast<u32>(x) == NEG_INF_BITS; }
fn all_finite4(v: vec4<f32>) -> bool {
  return all((bitcast<vec4<u32>>(v) & vec4<u32>(0x7f800000u)) != vec4<u32>(0x7f800000u));
}

// Mask element `idx` (absolute, as in the full broadcast mask) of this chunk's mask buffer.
fn mask_bool(idx: u32) -> bool {
  let rel = idx - p.mask_base;
  return ((mask[rel >> 2u] >> ((rel & 3u) * 8u)) & 0xffu) != 0u;
}
fn mask_add(idx: u32) -> f32 { return bitcast<f32>(mask[idx - p.mask_base]); }

// q·k times the scale, plus the additive mask element `mask_idx`; hidden where that element or
// the sum is -inf. (A flag, not a -inf score: WGSL rejects a constant -inf.)
struct MaskedScore { s: f32, hidden: bool }
fn scaled_masked_score(qk: f32, mask_idx: u32) -> MaskedScore {
  var s = qk * p.scale;
  if (MASK_KIND == 2u) {
    let mv = mask_add(mask_idx);
    if (is_neg_inf(mv)) { return MaskedScore(s, true); }
    s += mv;
  }
  return MaskedScore(s, is_neg_inf(s));
}

// Four consecutive floats of a row (of `n` valid ones) starting at column c, zeros past n.
fn query4(base: u32, c: u32, n: u32) -> vec4<f32> {
  var r = vec4<f32>(0.0);
  for (var d = 0u; d < 4u; d++) { if (c + d < n) { r[d] = query[base + c + d]; } }
  return r;
}
fn key4(base: u32, c: u32, n: u32) -> vec4<f32> {
  var r = vec4<f32>(0.0);
  for (var d = 0u; d < 4u; d++) { if (c + d < n) { r[d] = key[base + c + d]; } }
  return r;
}
