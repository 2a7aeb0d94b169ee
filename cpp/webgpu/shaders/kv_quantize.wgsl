// kv_quantize.wgsl: quantizes rows of floats in blocks of 32 (the int8/int4 KV-cache format,
// cpp/core/kv_cache_format.h and docs/kv-cache-formats.md) on the GPU, bit for bit as the CPU's
// quantize_block: scale = max|x| / L (the float below when L times it rounds above max|x|) and
// level = round(x / max|x| · L) in float32 operations, ties to even (L = 127 for int8, 7 for
// int4); a block holding a NaN or ±Inf gets the scale NaN and levels 0, an all-zero block scale 0.
//
// WGSL's float division may be off by 2.5 ulp and a GPU may flush subnormals, so the float32
// operations are done on the bits with integers (quotient_bits, product_bits, nearest_integer),
// each rounded to nearest even with gradual underflow as IEEE 754 rounds them: the levels and
// scales equal the CPU's for every input, subnormals included.
//
// One invocation per (source row, block). OUT (a constant from the C++ glue) says what it writes
// into `destination`:
//   0 / 1: a KV cache's int8 / int4 keys or values: source rows [heads, n, dim] of a KvCache.append,
//          row t of head `head` (batch head / hkv) going to key held[b] + t when t < added[b]
//          (`segments`: held, added per batch), in the tile layout; its scale after the levels.
//   2: a call's query rows as int8 levels, row r's block c in words (r·blocks + c)·8 … + 7 (byte i
//      of word w: element 4w + i), then the scales (word scale_start + r·blocks + c).
//   3: the same query rows dequantized (level · scale as float32), row-major [rows, dim].
// SOURCE_F16: the source holds halves (two a word), else float32; both read as bits.

struct QuantizeParams {
  x_base: u32, units: u32, hkv: u32, n: u32,
  dim: u32, blocks: u32, source_base: u32, rows: u32,
  scale_start: u32, pad0: u32, pad1: u32, pad2: u32,
}
@group(0) @binding(0) var<uniform> qp: QuantizeParams;
@group(0) @binding(1) var<storage, read> segments: array<u32>;
@group(0) @binding(2) var<storage, read> source: array<u32>;
@group(0) @binding(3) var<storage, read_write> destination: array<u32>;

const NAN_BITS: u32 = 0x7fc00000u;  // the CPU's quiet_NaN()
const INF_BITS: u32 = 0x7f800000u;

// Float32 bits of the positive value (s + f)·2^e, f in [0, 1) nonzero when `sticky`, rounded to
// nearest even, subnormal below 2^-126 and +Inf past the largest float.
fn round_to_bits(s: u32, e: i32, sticky: bool) -> u32 {
  if (s == 0u) { return 0u; }
  let length = 32 - i32(countLeadingZeros(s));
  let shift = max(length - 24, -149 - e);  // low bits dropped: 24 significant, or the subnormal lsb 2^-149
  var m: u32;
  var lsb_exponent = e + shift;
  if (shift <= 0) {
    m = s << u32(-shift);
  } else {
    var rest = s;
    m = 0u;
    var half = 0u;
    if (shift < 32) {
      m = s >> u32(shift);
      rest = s & ((1u << u32(shift)) - 1u);
      half = 1u << u32(shift - 1);
    }
    var up = false;
    if (shift <= 32) {
      if (shift == 32) { half = 0x80000000u; }
      up = rest > half || (rest == half && (sticky || (m & 1u) == 1u));
    }
    if (up) { m += 1u; }
    if (m == 0x1000000u) {
      m = 0x800000u;
      lsb_exponent += 1;
    }
  }
  if (m < 0x800000u) { return m; }  // subnormal (lsb 2^-149)
  let biased = lsb_exponent + 150;
  if (biased >= 255) { return INF_BITS; }
  return (u32(biased) << 23u) | (m & 0x7fffffu);
}

// A positive finite float's bits as significand · 2^exponent, the significand in [2^23, 2^24)
// (0 for zero).
struct Unpacked { s: u32, e: i32 }
fn unpack_bits(bits: u32) -> Unpacked {
  let biased = i32(bits >> 23u);
  var s = bits & 0x7fffffu;
  var e = -149;
  if (biased != 0) {
    s = s | 0x800000u;
    e = biased - 150;
  }
  if (s == 0u) { return Unpacked(0u, 0); }
  let normalize = i32(countLeadingZeros(s)) - 8;
  return Unpacked(s << u32(normalize), e - normalize);
}

// x / y of positive finite floats (y > 0), correctly rounded, as bits.
fn quotient_bits(x: u32, y: u32) -> u32 {
  let a = unpack_bits(x);
  let b = unpack_bits(y);
  if (a.s == 0u) { return 0u; }
  // q = floor(a.s · 2^25 / b.s) (25 or 26 bits), by restoring division; the remainder is the sticky bit.
  var q = 0u;
  var r = a.s;
  for (var i = 0; i < 26; i++) {
    q = q << 1u;
    if (r >= b.s) {
      q = q | 1u;
      r -= b.s;
    }
    r = r << 1u;
  }
  return round_to_bits(q, a.e - b.e - 25, r != 0u);
}

// x · n for a positive finite float x and an integer n < 128, correctly rounded, as bits.
fn product_bits(x: u32, n: u32) -> u32 {
  let a = unpack_bits(x);
  return round_to_bits(a.s * n, a.e, false);
}

// The integer nearest the positive finite float (ties to even), for values below 2^24.
fn nearest_integer(bits: u32) -> i32 {
  let a = unpack_bits(bits);
  if (a.s == 0u) { return 0; }
  if (a.e >= 0) { return i32(a.s << u32(a.e)); }
  let shift = u32(-a.e);
  if (shift > 24u) { return 0; }  // below 1/2
  let whole = a.s >> shift;
  let rest = a.s & ((1u << shift) - 1u);
  let half = 1u << (shift - 1u);
  return i32(whole + select(0u, 1u, rest > half || (rest == half && (whole & 1u) == 1u)));
}

// Element i of the source, as float32 bits (a half widened exactly).
fn source_bits(i: u32) -> u32 {
  if (!SOURCE_F16) { return source[i]; }
  let h = (source[i >> 1u] >> (16u * (i & 1u))) & 0xffffu;
  let sign = (h & 0x8000u) << 16u;
  let exponent = (h >> 10u) & 0x1fu;
  let mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) { return sign | INF_BITS | (mantissa << 13u); }
  if (exponent == 0u) { return sign | round_to_bits(mantissa, -24, false); }
  return sign | ((exponent + 112u) << 23u) | (mantissa << 13u);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = (wg.x + qp.x_base) * 64u + t;
  if (g >= qp.units) { return; }
  let c = g % qp.blocks;
  let row = g / qp.blocks;  // head · n + i
  let head = row / qp.n;
  let i = row % qp.n;
  var key = 0u;
  if (OUT <= 1u) {
    let b = head / qp.hkv;
    if (i >= segments[2u * b + 1u]) { return; }
    key = segments[2u * b] + i;
  }

  // The block's elements (n of them; the rest are the zero padding).
  let first = qp.source_base + row * qp.dim + 32u * c;
  let count = min(32u, qp.dim - 32u * c);
  var bits: array<u32, 32>;
  var largest = 0u;
  var finite = true;
  for (var e = 0u; e < count; e++) {
    bits[e] = source_bits(first + e);
    let magnitude = bits[e] & 0x7fffffffu;
    finite = finite && magnitude < INF_BITS;
    largest = max(largest, magnitude);
  }
  let top = select(7u, 127u, OUT != 1u);
  let top_bits = select(0x40e00000u, 0x42fe0000u, OUT != 1u);  // 7.0, 127.0
  var levels: array<i32, 32>;
  var scale = 0u;
  if (!finite) {
    scale = NAN_BITS;
  } else if (largest != 0u) {
    // max|x| / L, one float toward 0 when L times it rounds above max|x| (no value reads beyond the
    // block's largest, nor overflows).
    scale = quotient_bits(largest, top_bits);
    if (product_bits(scale, top) > largest) { scale -= 1u; }
    for (var e = 0u; e < count; e++) {
      let level = nearest_integer(product_bits(quotient_bits(bits[e] & 0x7fffffffu, largest), top));
      levels[e] = select(level, -level, (bits[e] & 0x80000000u) != 0u);
    }
  }

  if (OUT <= 1u) {
    let k = key % 4u;
    let tile_block = (head * (qp.rows / 4u) + key / 4u) * qp.blocks + c;
    if (OUT == 0u) {
      for (var w = 0u; w < 8u; w++) {
        var word = 0u;
        for (var b = 0u; b < 4u; b++) { word = word | ((u32(levels[4u * w + b]) & 0xffu) << (8u * b)); }
        destination[tile_block * 32u + 4u * w + k] = word;
      }
    } else {
      for (var w = 0u; w < 4u; w++) {
        var word = 0u;
        for (var b = 0u; b < 4u; b++) {
          word = word | (u32(levels[8u * w + b] + 8) << (8u * b)) | (u32(levels[8u * w + 4u + b] + 8) << (8u * b + 4u));
        }
        destination[tile_block * 16u + 4u * w + k] = word;
      }
    }
    destination[qp.scale_start + tile_block * 4u + k] = scale;
  } else if (OUT == 2u) {
    for (var w = 0u; w < 8u; w++) {
      var word = 0u;
      for (var b = 0u; b < 4u; b++) { word = word | ((u32(levels[4u * w + b]) & 0xffu) << (8u * b)); }
      destination[g * 8u + w] = word;
    }
    destination[qp.scale_start + g] = scale;
  } else {
    let value_scale = bitcast<f32>(scale);
    for (var e = 0u; e < count; e++) {
      let value = bitcast<u32>(f32(levels[e]) * value_scale);
      destination[row * qp.dim + 32u * c + e] = select(value, NAN_BITS, scale == NAN_BITS);
    }
  }
}
