// write_float16.wgsl: writes runs of float16 elements into a buffer of packed halves, from
// float32 (rounded to the nearest half) or from float16 (copied), at any element offsets.
//
// Used where a float16 buffer is written at offsets or lengths that copyBufferToBuffer and
// writeBuffer cannot take (both move whole 4-byte words): a float16 output on the GPU (from the
// kernels' float32 output), appends to a float16 GPU KV cache whose rows start or end mid-word,
// and float32 GPU tensors appended to a float16 cache.
//
// Each segment s (words 3s…3s + 2 of `segments`: first destination element, first source
// element, count) copies source elements [src, src + count) to destination elements
// [dst, dst + count). Grid: x = destination words of the longest segment / WORDS, y = segments
// (both cut by the glue at maxComputeWorkgroupsPerDimension; the bases come in `params`). One
// invocation owns one destination word: a word the run covers whole is stored, a word it shares
// with elements outside the run (its first or last) has only its own half replaced, by an
// atomicAnd and an atomicOr, so the neighbouring element (another row of a cache, another chunk
// of an output) is kept whatever writes it.
//
// float32 → float16 is done on the bits (as cpp/core/float16.h float32_to_float16): ties to
// even, ±Inf beyond 65504 after rounding, NaN kept NaN; WGSL's pack2x16float leaves values out
// of float16's range indeterminate and may round either way.
//
// Prepended by the C++ glue: const WORDS: u32 (invocations a workgroup); const SOURCE_F32: bool.

struct WriteParams { x_base: u32, y_base: u32, pad0: u32, pad1: u32 }

@group(0) @binding(0) var<uniform> params: WriteParams;
@group(0) @binding(1) var<storage, read> segments: array<u32>;
@group(0) @binding(2) var<storage, read> source: array<u32>;
@group(0) @binding(3) var<storage, read_write> destination: array<atomic<u32>>;

// The half nearest to the float with bits `u`.
fn float16_bits(u: u32) -> u32 {
  let sign = (u >> 16u) & 0x8000u;
  let magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {
    let payload = (magnitude >> 13u) & 0x3ffu;
    return sign | 0x7c00u | select(0x200u, payload, payload != 0u);
  }
  if (magnitude >= 0x477ff000u) { return sign | 0x7c00u; }
  if (magnitude < 0x38800000u) {
    // A subnormal half (or zero): the float's significand in units of 2^-24, rounded to even.
    let exponent = magnitude >> 23u;
    if (exponent < 102u) { return sign; }  // below 2^-25: rounds to zero
    let significand = (magnitude & 0x7fffffu) | 0x800000u;
    let shift = 126u - exponent;
    let q = significand >> shift;
    let rest = significand & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    return sign | (q + select(0u, 1u, rest > half || (rest == half && (q & 1u) == 1u)));
  }
  let odd = (magnitude >> 13u) & 1u;
  return sign | ((magnitude + 0xc8000fffu + odd) >> 13u);
}

// Source element i as half bits.
fn source_half(i: u32) -> u32 {
  if (SOURCE_F32) { return float16_bits(source[i]); }
  return (source[i >> 1u] >> (16u * (i & 1u))) & 0xffffu;
}

@compute @workgroup_size(WORDS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let s = wg.y + params.y_base;
  if (3u * s >= arrayLength(&segments)) { return; }
  let dst = segments[3u * s];
  let src = segments[3u * s + 1u];
  let count = segments[3u * s + 2u];
  let word = dst / 2u + (wg.x + params.x_base) * WORDS + t;
  if (2u * word >= dst + count) { return; }
  var bits = 0u;
  var keep = 0xffffffffu;  // the bits of the word this run does not write
  for (var h = 0u; h < 2u; h++) {
    let e = 2u * word + h;
    if (e >= dst && e < dst + count) {
      bits |= source_half(src + e - dst) << (16u * h);
      keep &= ~(0xffffu << (16u * h));
    }
  }
  if (keep == 0u) {
    atomicStore(&destination[word], bits);
  } else {
    atomicAnd(&destination[word], keep);
    atomicOr(&destination[word], bits);
  }
}
