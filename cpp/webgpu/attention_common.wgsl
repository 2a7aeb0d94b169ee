// attention_common.wgsl: what both attention kernels share, prepended by the C++ glue
// (cpp/webgpu/webgpu_attention.cpp) after the variant's constants and before the kernel.
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
fn is_finite(x: f32) -> bool { return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u; }
