#include "webgpu/plan.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/round_up.h"

namespace sdpa {
namespace {

const char* mask_name(MaskKind m) {
  return m == MaskKind::kBool ? "bool" : m == MaskKind::kAdditive ? "additive" : "none";
}
uint32_t mask_code(MaskKind m) {
  return m == MaskKind::kBool ? 1u : m == MaskKind::kAdditive ? 2u : 0u;
}
uint64_t mask_element_bytes(const AttentionPlan& p) {
  return p.mask_kind == MaskKind::kBool ? 1 : p.mask_kind == MaskKind::kAdditive ? 4 : 0;
}
// Slack for aligning a bool mask slice to whole u32 words at both ends.
constexpr uint64_t kMaskAlignSlack = 8;

int64_t kv_of(const AttentionPlan& p, int64_t bh) {
  return (bh / p.Hq) * p.Hkv + (bh % p.Hq) / p.heads_per_kv();
}
int64_t head_mask_offset(const AttentionPlan& p, int64_t bh) {
  return (bh / p.Hq) * p.mask_stride_b + (bh % p.Hq) * p.mask_stride_h;
}
// Mask elements that rows [row0, row0 + rows) of one head span, from that head's offset.
int64_t mask_row_span(const AttentionPlan& p, int64_t row0, int64_t rows, int64_t* first) {
  *first = row0 * p.mask_stride_q;
  return (rows - 1) * p.mask_stride_q + (p.Lk - 1) * p.mask_stride_k + 1;
}

std::string u32_const(const char* name, uint64_t value) {
  return "const " + std::string(name) + ": u32 = " + std::to_string(value) + "u;\n";
}
std::string bool_const(const char* name, bool value) {
  return "const " + std::string(name) + ": bool = " + (value ? "true" : "false") + ";\n";
}

uint32_t tiled_workgroup_bytes(uint32_t e_pad, uint32_t ev_pad, uint32_t block_keys, uint32_t rows) {
  const uint32_t kv_tile = 16 * block_keys * (std::max(e_pad, ev_pad) / 4 + 1);
  const uint32_t p_tile = 4 * rows * (block_keys + kWebGpuTiledLanes);
  const uint32_t lane_share = 4 * rows * kWebGpuTiledLanes;  // a word per invocation
  return kv_tile + p_tile + lane_share + 4;
}

// Bytes of one key in a flash-decoding partial kernel's K and V tiles (mirrors their
// var<workgroup>s, whose key rows are padded against bank conflicts): float32 elements and a
// vec4 more per key (attention_decode_partial.wgsl), or the levels' words and block scales of
// each padded dimension's blocks of 32 and a word more per 4 keys' key block
// (attention_decode_quantized.wgsl; block_keys is a multiple of 4, so this is exact).
uint32_t decode_tile_bytes_per_key(const FlashVariant& v) {
  if (v.decode != 3) return 4 * (v.e_pad + 4 + v.ev_pad);
  auto dim_bytes = [](uint32_t pad, ElementType type) {
    const uint32_t block_words = type == ElementType::kInt4 ? 4 : 8;
    return 4 * ((pad + 31) / 32) * (block_words + 1);
  };
  return dim_bytes(v.e_pad, v.types.key_type) + ((v.e_pad + 31) / 32) + dim_bytes(v.ev_pad, v.types.value_type);
}

// Workgroup memory of the partial kernels (attention_decode_split.wgsl.inc and the tiles): the
// K and V tiles, the rows' tile weights, and the lanes' parts (without subgroups).
uint32_t decode_workgroup_bytes(const FlashVariant& v, uint32_t block_keys) {
  return block_keys * decode_tile_bytes_per_key(v) + 4 * v.decode_rows * block_keys +
         16 * (v.subgroups ? 1 : v.decode_rows * v.decode_lanes);
}

bool decode_partial(uint32_t decode) { return decode == 1 || decode == 3 || decode == 4 || decode == 5; }
bool decode_stream(uint32_t decode) { return decode == 4 || decode == 5; }

// vec4<u32> loads of a tile of 4 quantized keys (or values) of `pad` padded dimensions: its
// blocks of 32 times the 4 keys' words of a block (int8 8, int4 4).
uint32_t quantized_tile_vec4s(uint32_t pad, ElementType type) { return (pad + 31) / 32 * (type == ElementType::kInt4 ? 4 : 8); }

// Workgroup memory of the streaming kernels (attention_decode_stream_common.wgsl.inc): each
// group's row states (a vec4), NaN flags and output columns.
uint32_t decode_stream_workgroup_bytes(uint32_t groups, uint32_t rows, uint32_t ev_pad) {
  return groups * rows * (16 + 4 + 4 * ev_pad);
}

uint32_t pow2_at_least(uint64_t n) {
  uint32_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// The largest power of two at most n (1 for n = 0).
uint32_t pow2_at_most(uint32_t n) { return pow2_at_least(uint64_t{n} + 1) / 2; }

}  // namespace

std::string WebGpuVariantFlags::key() const {
  auto flag = [](const char* name, bool on) { return std::string(":") + name + (on ? "=1" : "=0"); };
  return flag("ranges", ranges) + flag("alibi", alibi) + flag("sinks", sinks) + flag("docs", documents);
}

std::string WebGpuVariantFlags::wgsl_constants() const {
  return bool_const("RANGES", ranges) + bool_const("ALIBI", alibi) + bool_const("SINKS", sinks) +
         bool_const("DOCUMENTS", documents);
}

const char* webgpu_float16_path_name(WebGpuFloat16Path path) {
  return path == WebGpuFloat16Path::kShaderF16 ? "shader-f16" : "unpack2x16float";
}

bool WebGpuElementTypes::any_float16() const {
  return query_type == ElementType::kFloat16 || key_type == ElementType::kFloat16 ||
         value_type == ElementType::kFloat16;
}

std::string WebGpuElementTypes::key() const {
  const bool query_vector_reads = query_vectors && !query_levels;
  std::string vectors;
  if (query_vector_reads || key_vectors || value_vectors) {
    vectors = std::string(":vec4=") + (query_vector_reads ? "q" : "") + (key_vectors ? "k" : "") + (value_vectors ? "v" : "");
  }
  if (!any_float16() && !any_quantized()) return vectors;
  auto name = [](ElementType t) {
    switch (t) {
      case ElementType::kFloat16: return "f16";
      case ElementType::kInt8: return "i8";
      case ElementType::kInt4: return "i4";
      default: return "f32";
    }
  };
  std::string text = std::string(":q=") + (query_levels ? "i8" : name(query_type)) + ":k=" + name(key_type) +
                     ":v=" + name(value_type) + ":f16=" + webgpu_float16_path_name(path);
  if (any_quantized()) text += packed_dot ? ":dot4=packed" : ":dot4=unpack";
  return text + vectors;
}

namespace {

// What every kernel on a quantized cache gets before its text: the tile layout's arithmetic, the
// level extraction and dot4_i8. `packed`: dot4I8Packed, else sign-extended bytes by extractBits.
std::string quantized_helpers(bool packed) {
  std::string text =
      "fn quant_rows(stride: u32, dim: u32) -> u32 { return (stride / dim + 3u) & ~3u; }\n"
      "fn quant_blocks(dim: u32) -> u32 { return (dim + 31u) / 32u; }\n"
      "fn quant_tile_block(head: u32, j: u32, c: u32, rows: u32, blocks: u32) -> u32 { return (head * (rows / 4u) + j / 4u) * blocks + c; }\n"
      "fn quant_scale_start(rows: u32, blocks: u32, tile_words: u32) -> u32 { return p.B * p.Hkv * (rows / 4u) * blocks * tile_words; }\n"
      "fn quant_level_int8(word: u32, byte: u32) -> i32 { return extractBits(bitcast<i32>(word), 8u * byte, 8u); }\n"
      "fn quant_level_int4(word: u32, e: u32) -> i32 { return i32(extractBits(word, 8u * (e % 4u) + 4u * ((e / 4u) % 2u), 4u)) - 8; }\n"
      "fn quant_value(level: i32, scale: f32) -> f32 { return select(f32(level) * scale, scale, is_nan(scale)); }\n";
  if (packed) {
    text += "fn dot4_i8(a: u32, b: u32) -> i32 { return dot4I8Packed(a, b); }\n";
  } else {
    text +=
        "fn dot4_i8(a: u32, b: u32) -> i32 {\n"
        "  let x = bitcast<i32>(a);\n"
        "  let y = bitcast<i32>(b);\n"
        "  return extractBits(x, 0u, 8u) * extractBits(y, 0u, 8u) + extractBits(x, 8u, 8u) * extractBits(y, 8u, 8u) +\n"
        "         extractBits(x, 16u, 8u) * extractBits(y, 16u, 8u) + extractBits(x, 24u, 8u) * extractBits(y, 24u, 8u);\n"
        "}\n";
  }
  return text;
}

// The element alias, the word reader tensor_word(i) and the loader of a quantized key or value
// binding `tensor` (the cache's whole tensor, as u32 words or, with `vectors`, vec4<u32>):
// element i = head·stride + j·dim + e of the chunk (head from the chunk's kv0).
std::string quantized_loader(const std::string& tensor, ElementType type, const std::string& dim,
                             const std::string& stride, bool vectors) {
  const bool int4 = type == ElementType::kInt4;
  const std::string tile_words = int4 ? "16u" : "32u";
  const std::string word = tensor + "_word";
  const std::string level = int4 ? "quant_level_int4(" + word + "(tb * 16u + 4u * ((e % 32u) / 8u) + j % 4u), e % 32u)"
                                 : "quant_level_int8(" + word + "(tb * 32u + 4u * ((e % 32u) / 4u) + j % 4u), e % 4u)";
  const std::string element = vectors ? "vec4<u32>" : "u32";
  return "alias " + std::string(tensor == "key" ? "KeyElement" : "ValueElement") + " = " + element + ";\n" +
         "fn " + word + "(i: u32) -> u32 { return " + tensor + (vectors ? "[i >> 2u][i & 3u]" : "[i]") + "; }\n" +
         "fn " + tensor + "_at(i: u32) -> f32 {\n"
         "  let rows = quant_rows(p." + stride + ", p." + dim + ");\n"
         "  let blocks = quant_blocks(p." + dim + ");\n"
         "  let head = i / p." + stride + " + p.kv0;\n"
         "  let j = (i % p." + stride + ") / p." + dim + ";\n"
         "  let e = (i % p." + stride + ") % p." + dim + ";\n"
         "  let tb = quant_tile_block(head, j, e / 32u, rows, blocks);\n"
         "  let scale = bitcast<f32>(" + word + "(quant_scale_start(rows, blocks, " + tile_words + ") + tb * 4u + j % 4u));\n"
         "  return quant_value(" + level + ", scale);\n"
         "}\n";
}

// The vec4 loader of `tensor` from its scalar loader: 4 loads, bounds-checked one by one.
std::string scalar_loads4(const std::string& t) {
  return "fn " + t + "4(base: u32, c: u32, n: u32) -> vec4<f32> {\n"
         "  var r = vec4<f32>(0.0);\n"
         "  for (var d = 0u; d < 4u; d++) { if (c + d < n) { r[d] = " + t + "_at(base + c + d); } }\n"
         "  return r;\n"
         "}\n";
}

// The element type alias and the loaders t_at(i) -> f32 and t4(base, c, n) -> vec4<f32> of the
// binding `t` of `type`: a: the alias's name; b: the Params field of its base (float16 only);
// vectors: the binding holds vectors of 4 elements (n, base and c then multiples of 4: a whole
// vector or none).
std::string element_loaders(ElementType type, bool shader_f16, const std::string& t, const std::string& a,
                            const std::string& b, bool vectors) {
  std::string text;
  if (!vectors) {
    if (type == ElementType::kFloat32) {
      text += "alias " + a + " = f32;\n";
      text += "fn " + t + "_at(i: u32) -> f32 { return " + t + "[i]; }\n";
    } else if (shader_f16) {
      text += "alias " + a + " = f16;\n";
      text += "fn " + t + "_at(i: u32) -> f32 { return f32(" + t + "[p." + b + " + i]); }\n";
    } else {
      text += "alias " + a + " = u32;\n";
      text += "fn " + t + "_at(i: u32) -> f32 { let e = p." + b + " + i; return unpack2x16float(" + t +
              "[e >> 1u])[e & 1u]; }\n";
    }
    return text + scalar_loads4(t);
  }
  std::string load;  // the vector holding elements e … e + 3, as vec4<f32>
  if (type == ElementType::kFloat32) {
    text += "alias " + a + " = vec4<f32>;\n";
    text += "fn " + t + "_at(i: u32) -> f32 { return " + t + "[i >> 2u][i & 3u]; }\n";
    load = t + "[e >> 2u]";
  } else if (shader_f16) {
    text += "alias " + a + " = vec4<f16>;\n";
    text += "fn " + t + "_at(i: u32) -> f32 { let e = p." + b + " + i; return f32(" + t + "[e >> 2u][e & 3u]); }\n";
    load = "vec4<f32>(" + t + "[e >> 2u])";
  } else {
    // Two words of two halves each.
    text += "alias " + a + " = vec2<u32>;\n";
    text += "fn " + t + "_at(i: u32) -> f32 { let e = p." + b + " + i; return unpack2x16float(" + t +
            "[e >> 2u][(e >> 1u) & 1u])[e & 1u]; }\n";
    load = "vec4<f32>(unpack2x16float(" + t + "[e >> 2u].x), unpack2x16float(" + t + "[e >> 2u].y))";
  }
  const std::string first = type == ElementType::kFloat32 ? "base + c" : "p." + b + " + base + c";
  text += "fn " + t + "4(base: u32, c: u32, n: u32) -> vec4<f32> {\n"
          "  if (c >= n) { return vec4<f32>(0.0); }\n"
          "  let e = " + first + ";\n"
          "  return " + load + ";\n"
          "}\n";
  return text;
}

}  // namespace

std::string WebGpuElementTypes::wgsl_declarations(bool value_binding) const {
  const bool shader_f16 = path == WebGpuFloat16Path::kShaderF16;
  std::string text = shader_f16 && any_float16() ? "enable f16;\n" : "";
  if (query_levels) {
    // Row r's block c: levels in words (r·blocks + c)·8 …, scales after the chunk's rows' levels.
    text += "alias QueryElement = u32;\n"
            "fn query_at(i: u32) -> f32 {\n"
            "  let blocks = quant_blocks(p.E);\n"
            "  let block = (i / p.E) * blocks + (i % p.E) / 32u;\n"
            "  let scale = bitcast<f32>(query[p.nbh * p.rows * blocks * 8u + block]);\n"
            "  return quant_value(quant_level_int8(query[block * 8u + (i % 32u) / 4u], i % 4u), scale);\n"
            "}\n";
    text += scalar_loads4("query");
  } else {
    text += element_loaders(query_type, shader_f16, "query", "QueryElement", "query_base", query_vectors);
  }
  if (webgpu_quantized(key_type)) {
    text += quantized_loader("key", key_type, "E", "key_stride", key_vectors);
    text += scalar_loads4("key");
  } else {
    text += element_loaders(key_type, shader_f16, "key", "KeyElement", "key_base", key_vectors);
  }
  if (value_binding && webgpu_quantized(value_type)) {
    text += quantized_loader("value", value_type, "Ev", "value_stride", value_vectors);
    text += scalar_loads4("value");
  } else if (value_binding) {
    text += element_loaders(value_type, shader_f16, "value", "ValueElement", "value_base", value_vectors);
  }
  if (any_quantized() || query_levels) {
    auto bits = [](ElementType t) { return t == ElementType::kInt4 ? 4 : t == ElementType::kInt8 ? 8 : 0; };
    text += u32_const("KEY_QUANT_BITS", bits(key_type)) + u32_const("VALUE_QUANT_BITS", bits(value_type)) +
            quantized_helpers(packed_dot);
  }
  return text;
}

bool webgpu_vector_reads(ElementType type, int64_t row_length, int64_t head_stride, uint64_t offset_bytes) {
  if (type != ElementType::kFloat32 && type != ElementType::kFloat16) return false;
  if (row_length <= 0 || row_length % kWebGpuVectorWidth != 0 || head_stride % kWebGpuVectorWidth != 0) return false;
  return type == ElementType::kFloat32 || offset_bytes % (2 * kWebGpuVectorWidth) == 0;
}

WebGpuElementTypes webgpu_element_types(const AttentionPlan& plan, const WebGpuLimits& limits,
                                        const WebGpuInputOffsets& offsets) {
  WebGpuElementTypes t;
  t.query_type = plan.query_type;
  t.key_type = plan.key_type;
  t.value_type = plan.value_type;
  t.path = limits.shader_f16 ? WebGpuFloat16Path::kShaderF16 : WebGpuFloat16Path::kUnpack;
  // On a quantized cache the flash and weights kernels read the query dequantized (float32, from
  // kv_quantize.wgsl): the scores are those of the quantized query, as on every backend.
  if (t.any_quantized()) t.query_type = ElementType::kFloat32;
  t.packed_dot = limits.packed_dot && t.any_quantized();
  // On a quantized cache the query binding is a workspace of the glue's (offset 0).
  t.query_vectors = webgpu_vector_reads(t.query_type, plan.E, plan.Lq * plan.E, t.any_quantized() ? 0 : offsets.query);
  t.key_vectors = webgpu_vector_reads(t.key_type, plan.E, plan.key_head_stride, offsets.key);
  t.value_vectors = webgpu_vector_reads(t.value_type, plan.Ev, plan.value_head_stride, offsets.value);
  return t;
}

WebGpuVariantFlags webgpu_variant_flags(const AttentionPlan& p) {
  WebGpuVariantFlags f;
  f.ranges = !p.key_lengths.empty() || p.window_left != AttentionPlan::kUnbounded ||
             p.window_right != AttentionPlan::kUnbounded;
  f.alibi = !p.alibi_slopes.empty();
  f.sinks = !p.sinks.empty();
  f.documents = p.documents;
  return f;
}

std::vector<uint32_t> webgpu_variant_data(const AttentionPlan& p, const AttentionInputs& in,
                                          uint32_t block_keys) {
  std::vector<uint32_t> words;
  auto i32_word = [](int64_t v) { return static_cast<uint32_t>(static_cast<int32_t>(v)); };
  auto f32_word = [](float x) {
    uint32_t w;
    std::memcpy(&w, &x, sizeof w);
    return w;
  };
  const int64_t low = -p.Lq - 1, high = p.Lk + 1;
  for (int64_t b = 0; b < p.B; ++b) {
    const int64_t offset = p.position_offset_of(b);
    // first = p − left; last = min(p (causal), p + right); either side absent: no bound there.
    const int64_t first = p.window_left == AttentionPlan::kUnbounded ? low : offset - p.window_left;
    int64_t last = high;
    if (p.causal) last = std::min(last, offset);
    if (p.window_right != AttentionPlan::kUnbounded) last = std::min(last, offset + p.window_right);
    words.push_back(i32_word(std::clamp(first, low, high)));
    words.push_back(i32_word(std::clamp(last, low, high)));
    words.push_back(i32_word(p.key_length(b)));
    words.push_back(f32_word(static_cast<float>(offset)));
  }
  for (int64_t h = 0; h < p.Hq; ++h) words.push_back(p.alibi_slopes.empty() ? 0u : f32_word(p.alibi_slopes[h]));
  for (int64_t h = 0; h < p.Hq; ++h) words.push_back(p.sinks.empty() ? 0u : f32_word(p.sinks[h]));
  if (p.documents) {
    words.insert(words.end(), in.query_documents, in.query_documents + p.B * p.Lq);
    words.insert(words.end(), in.key_documents, in.key_documents + p.B * p.Lk);
    const int64_t tiles = (p.Lk + block_keys - 1) / block_keys;
    for (int64_t b = 0; b < p.B; ++b) {
      for (int64_t t = 0; t < tiles; ++t) {
        const int32_t* ids = in.key_documents + b * p.Lk + t * block_keys;
        const int64_t n = std::min<int64_t>(block_keys, p.Lk - t * block_keys);
        words.push_back(static_cast<uint32_t>(*std::min_element(ids, ids + n)));
        words.push_back(static_cast<uint32_t>(*std::max_element(ids, ids + n)));
      }
    }
  }
  if (words.size() < 4) words.resize(4, 0);
  return words;
}

uint32_t FlashVariant::workgroup_bytes() const {
  if (decode_stream(decode)) return decode_stream_workgroup_bytes(decode_groups, decode_rows, ev_pad);
  if (decode_partial(decode)) return decode_workgroup_bytes(*this, block_keys);
  if (decode == 2) return 0;
  return tiled ? tiled_workgroup_bytes(e_pad, ev_pad, block_keys, rows) : 4 * block_keys * (e_pad + ev_pad);
}

std::string FlashVariant::key() const {
  static const char* const kNames[] = {"flash", "decode-partial", "decode-merge", "decode-partial-quantized", "decode-stream",
                                             "decode-stream-quantized"};
  return std::string(tiled ? "flash-tiled" : kNames[decode]) + ":e" + std::to_string(e_pad) + ":ev" + std::to_string(ev_pad) + ":bk" +
         std::to_string(block_keys) + (decode == 0 ? ":rows" + std::to_string(rows) : "") + ":mask=" + mask_name(mask) + ":causal=" + (causal ? "1" : "0") +
         ":stats=" + (write_stats ? "1" : "0") + variants.key() + types.key() + (write_lse ? ":lse=1" : "") +
         (decode == 0 && heaviest_first ? ":heaviest-first" : "") + (decode == 0 && key_splits > 1 ? ":split" : "") + (trace_row == kNoTrace ? "" : ":trace=" + std::to_string(trace_row)) +
         (decode_partial(decode) ? ":rows" + std::to_string(decode_rows) + ":lanes" + std::to_string(decode_lanes) +
                                       (decode_stream(decode) ? ":groups" + std::to_string(decode_groups) : "") +
                                       (subgroups ? ":subgroups" : ":wgmem")
                      : "");
}

FlashGrid FlashVariant::grid(int64_t query_rows, int64_t heads) const {
  const uint64_t tiles = row_tiles(query_rows);
  const uint64_t head_count = static_cast<uint64_t>(heads) * std::max<uint32_t>(key_splits, 1);
  if (heaviest_first) return FlashGrid{head_count, tiles};
  return FlashGrid{tiles, head_count};
}

uint32_t FlashVariant::trace_stride() const { return 2 + (tiled ? kWebGpuTiledLanes : 1) + ev_pad; }

uint64_t FlashVariant::trace_floats(int64_t Lk) const {
  return (static_cast<uint64_t>(Lk) + block_keys - 1) / block_keys * trace_stride();
}

std::string FlashVariant::wgsl_constants() const {
  std::string decode_constants;
  if (decode_partial(decode)) {
    // shuffle_xor: subgroupShuffleXor, or (without subgroups) a stand-in the kernel never calls.
    const bool stream = decode_stream(decode);
    decode_constants = u32_const("DECODE_INVOCATIONS", (stream ? decode_groups : decode_rows) * decode_lanes) +
                       u32_const("DECODE_ROWS", decode_rows) + u32_const(stream ? "KEY_LANES" : "DECODE_LANES", decode_lanes) +
                       (stream ? u32_const("GROUPS", decode_groups) : "") + bool_const("SUBGROUPS", subgroups) +
                       (subgroups ? "fn shuffle_xor(v: vec4<f32>, mask: u32) -> vec4<f32> { return subgroupShuffleXor(v, mask); }\n"
                                  : "fn shuffle_xor(v: vec4<f32>, mask: u32) -> vec4<f32> { return v; }\n");
  } else if (decode == 2) {
    decode_constants = u32_const("DECODE_INVOCATIONS", kWebGpuDecodeInvocations);
  }
  // The decode kernels read row tile 0 only (query_row): the flash kernel's rows and order are
  // not theirs, so they share one text (and key) whatever those are.
  const bool flash = decode == 0;
  return (subgroups ? "enable subgroups;\n" : "") + types.wgsl_declarations() + u32_const("ROWS", flash ? rows : kWebGpuFlashRows) +
         bool_const("HEAVIEST_FIRST", flash && heaviest_first) + bool_const("SPLIT", flash && key_splits > 1) + (tiled ? u32_const("LANES", kWebGpuTiledLanes) : "") +
         u32_const("E_PAD", e_pad) + u32_const("EV_PAD", ev_pad) + u32_const("BLOCK_KEYS", block_keys) +
         u32_const("MASK_KIND", mask_code(mask)) + bool_const("CAUSAL", causal) +
         bool_const("WRITE_STATS", write_stats) + bool_const("WRITE_LSE", write_lse) + variants.wgsl_constants() + u32_const("TRACE_ROW", trace_row) +
         u32_const("TRACE_LANES", tiled ? kWebGpuTiledLanes : 1) + decode_constants;
}

uint32_t webgpu_decode_split_keys(const AttentionPlan& p) {
  return webgpu_tile_for_grid(p.Lk, p.B * p.Hkv, kWebGpuDecodeMaxSplitKeys, kWebGpuDecodeSplitKeys);
}

uint32_t webgpu_decode_splits(const AttentionPlan& p) {
  if (p.Lq > kWebGpuDecodeMaxRows || p.Lk < 2 * static_cast<int64_t>(kWebGpuDecodeSplitKeys)) return 0;
  if (p.return_weights || p.return_scores != ScoreStage::kNone) return 0;
  const int64_t keys = webgpu_decode_split_keys(p);
  return static_cast<uint32_t>((p.Lk + keys - 1) / keys);
}

// The STAGE constant of attention_weights.wgsl: 0 weights, 1 scaled, 2 softcapped, 3 masked scores.
uint32_t stage_code(ScoreStage s) {
  switch (s) {
    case ScoreStage::kNone: return 0;
    case ScoreStage::kScaled: return 1;
    case ScoreStage::kSoftcapped: return 2;
    case ScoreStage::kMasked: return 3;
  }
  return 0;
}

std::string WeightsVariant::key() const {
  return std::string(stage == ScoreStage::kNone ? "weights" : "scores") + ":mask=" + mask_name(mask) +
         ":causal=" + (causal ? "1" : "0") + ":stage=" + std::to_string(stage_code(stage)) + variants.key() +
         types.key();
}

std::string WeightsVariant::wgsl_constants() const {
  return types.wgsl_declarations(false) + u32_const("KEYS", kWebGpuWeightsKeys) + u32_const("MASK_KIND", mask_code(mask)) +
         bool_const("CAUSAL", causal) + u32_const("STAGE", stage_code(stage)) + variants.wgsl_constants();
}

uint32_t webgpu_pad_head_dim(int64_t d) {
  for (uint32_t p : {16u, 32u, 64u, 128u, 256u}) {
    if (d <= p) return p;
  }
  return static_cast<uint32_t>((d + 63) / 64 * 64);
}

uint32_t webgpu_tile_for_grid(int64_t length, int64_t heads, uint32_t largest, uint32_t smallest) {
  const auto workgroups = [&](uint32_t tile) { return static_cast<uint64_t>(heads) * ((static_cast<uint64_t>(length) + tile - 1) / tile); };
  uint32_t tile = largest;
  while (tile > smallest && workgroups(tile) < kWebGpuTargetWorkgroups) tile /= 2;
  return tile;
}

uint32_t webgpu_flash_rows(const AttentionPlan& plan) {
  return webgpu_tile_for_grid(plan.Lq, plan.B * plan.Hq, kWebGpuFlashRows, kWebGpuTiledMinRows);
}

FlashVariant webgpu_flash_key_splits(const AttentionPlan& plan, const WebGpuLimits& limits, const FlashVariant& flash,
                                     int64_t chunk_rows) {
  FlashVariant v = flash;
  v.key_splits = 1;
  v.split_keys = 0;
  if (flash.decode != 0 || flash.trace_row != FlashVariant::kNoTrace || flash.write_stats) return v;
  if (plan.return_weights || plan.return_scores != ScoreStage::kNone || plan.Lq <= kWebGpuDecodeMaxRows) return v;
  const uint64_t workgroups = static_cast<uint64_t>(plan.B * plan.Hq) * flash.row_tiles(plan.Lq);
  if (workgroups == 0 || workgroups >= kWebGpuTargetWorkgroups) return v;
  const uint64_t most = static_cast<uint64_t>(plan.Lk) / std::max<uint32_t>(limits.min_split_keys, 1);
  uint64_t splits = 1;
  while (2 * splits <= most && workgroups * splits < kWebGpuTargetWorkgroups) splits *= 2;
  while (splits >= 2 && static_cast<uint64_t>(chunk_rows) * splits * flash.record_bytes() > limits.largest_binding_bytes()) splits /= 2;
  if (splits < 2) return v;
  const uint64_t lk = static_cast<uint64_t>(plan.Lk);
  const uint64_t keys = ((lk + splits - 1) / splits + flash.block_keys - 1) / flash.block_keys * flash.block_keys;
  if ((lk + keys - 1) / keys < 2) return v;
  v.split_keys = static_cast<uint32_t>(keys);
  v.key_splits = static_cast<uint32_t>((lk + keys - 1) / keys);
  return v;
}

FlashVariant webgpu_merge_variant(const FlashVariant& flash, bool query_levels) {
  FlashVariant merge = flash;
  merge.tiled = false;
  merge.decode = 2;
  merge.key_splits = 1;
  merge.split_keys = 0;
  merge.types.query_levels = query_levels;
  return merge;
}

Status webgpu_flash_variant(const AttentionPlan& plan, const WebGpuLimits& limits,
                            FlashVariant* variant, const WebGpuInputOffsets& offsets) {
  FlashVariant v;
  v.heaviest_first = plan.causal || plan.window_right != AttentionPlan::kUnbounded;
  v.e_pad = webgpu_pad_head_dim(plan.E);
  v.ev_pad = webgpu_pad_head_dim(plan.Ev);
  v.mask = plan.mask_kind;
  v.causal = plan.causal;
  v.write_stats = plan.return_weights;
  v.write_lse = plan.return_lse;
  v.variants = webgpu_variant_flags(plan);
  v.types = webgpu_element_types(plan, limits, offsets);
  const uint32_t tiled_rows = webgpu_flash_rows(plan);
  if (v.e_pad <= kWebGpuTiledMaxHeadDim && v.ev_pad <= kWebGpuTiledMaxHeadDim &&
      limits.max_invocations_per_workgroup >= tiled_rows * kWebGpuTiledLanes) {
    // The largest key tile that fits: more keys per barrier and per row-max exchange. Fewer
    // keys than one tile leave lanes idle behind the tile's barriers, so such calls (and
    // software adapters' many tiny ones) stay on the per-row kernel.
    for (uint32_t keys = kWebGpuMaxBlockKeys; keys >= kWebGpuTiledMinBlockKeys; keys /= 2) {
      if (tiled_workgroup_bytes(v.e_pad, v.ev_pad, keys, tiled_rows) <= limits.max_workgroup_storage_bytes) {
        if (plan.Lk < keys) break;
        v.tiled = true;
        v.rows = tiled_rows;
        v.block_keys = keys;
        *variant = v;
        return Status::Ok();
      }
    }
  }
  const uint64_t per_key = 4ull * (v.e_pad + v.ev_pad);
  const uint64_t fit = limits.max_workgroup_storage_bytes / per_key;
  if (fit < 1) {
    return Status::RangeError("E = " + std::to_string(plan.E) + " and Ev = " + std::to_string(plan.Ev) +
                              " need " + std::to_string(per_key) +
                              " bytes of workgroup memory per key, more than this device's "
                              "maxComputeWorkgroupStorageSize (" +
                              std::to_string(limits.max_workgroup_storage_bytes) + ")");
  }
  v.block_keys = static_cast<uint32_t>(std::min<uint64_t>(fit, kWebGpuMaxBlockKeys));
  *variant = v;
  return Status::Ok();
}

bool webgpu_decode_variant(const AttentionPlan& plan, const WebGpuLimits& limits, const FlashVariant& flash,
                           FlashVariant* partial) {
  FlashVariant v = flash;
  v.tiled = false;
  // A quantized cache's kernel reads the query as int8 levels and scales (kv_quantize.wgsl).
  v.decode = v.types.any_quantized() ? 3 : 1;
  v.types.query_levels = v.decode == 3;
  v.write_lse = false;  // the merge writes it
  v.write_stats = false;
  const uint64_t group_rows = static_cast<uint64_t>(plan.heads_per_kv()) * static_cast<uint64_t>(plan.Lq);
  v.decode_rows = pow2_at_least(std::min<uint64_t>(group_rows, kWebGpuDecodeMaxWorkgroupRows));
  v.decode_lanes = std::max<uint32_t>(1, std::min(kWebGpuDecodeInvocations / v.decode_rows, v.ev_pad / 4));
  v.subgroups = limits.subgroups && limits.subgroup_min_size >= 4;
  if (v.subgroups) v.decode_lanes = std::min(v.decode_lanes, pow2_at_most(limits.subgroup_min_size));
  if (v.decode_rows * v.decode_lanes > limits.max_invocations_per_workgroup) return false;
  if (v.subgroups) {
    // The streaming kernels: KEY_LANES lanes a key (within one subgroup), each holding the same
    // vec4 columns of every row's query and output, where those fit a lane's registers. On a
    // float cache a lane holds at least a vec4 column of each row; on a quantized one the lanes
    // take the vec4<u32> loads of a tile of 4 keys, a query word (int4: two) and a block scale
    // per key load, and one output column (int4: two) per value load.
    FlashVariant stream = v;
    const uint32_t subgroup_lanes = pow2_at_most(limits.subgroup_min_size);
    uint32_t lane_vec4s = 0;  // of all its rows
    if (v.decode == 1) {
      stream.decode = 4;
      stream.decode_lanes = std::min({kWebGpuDecodeStreamLanes, subgroup_lanes, v.e_pad / 4, v.ev_pad / 4});
      lane_vec4s = stream.decode_rows * (v.e_pad + v.ev_pad) / 4 / stream.decode_lanes;
    } else {
      stream.decode = 5;
      stream.types.key_vectors = stream.types.value_vectors = true;
      const uint32_t key_tile = quantized_tile_vec4s(v.e_pad, v.types.key_type);
      const uint32_t value_tile = quantized_tile_vec4s(v.ev_pad, v.types.value_type);
      stream.decode_lanes = std::min({kWebGpuDecodeStreamLanes, subgroup_lanes, pow2_at_most(key_tile), pow2_at_most(value_tile)});
      const uint32_t lanes = stream.decode_lanes;
      const uint32_t value_columns = v.types.value_type == ElementType::kInt4 ? 2 : 1;
      lane_vec4s = stream.decode_rows * ((key_tile + lanes - 1) / lanes + (value_tile + lanes - 1) / lanes * value_columns);
    }
    if (lane_vec4s <= kWebGpuDecodeStreamLaneVec4s) {
      const auto fits = [&](uint32_t groups) {
        return groups * stream.decode_lanes <= limits.max_invocations_per_workgroup &&
               decode_stream_workgroup_bytes(groups, stream.decode_rows, v.ev_pad) <= limits.max_workgroup_storage_bytes;
      };
      stream.decode_groups = std::max<uint32_t>(1, kWebGpuDecodeStreamInvocations / stream.decode_lanes);
      while (stream.decode_groups > 1 && !fits(stream.decode_groups)) stream.decode_groups /= 2;
      if (fits(stream.decode_groups)) {
        // No key tiles; BLOCK_KEYS stays nonzero for the flash helpers the kernel includes.
        stream.block_keys = kWebGpuDecodeSplitKeys;
        *partial = stream;
        return true;
      }
    }
  }
  for (uint32_t keys = kWebGpuDecodeMaxBlockKeys; keys >= kWebGpuDecodeMinBlockKeys; keys /= 2) {
    if (keys > kWebGpuDecodeSplitKeys) continue;
    if (decode_workgroup_bytes(v, keys) <= limits.max_workgroup_storage_bytes) {
      v.block_keys = keys;
      *partial = v;
      return true;
    }
  }
  return false;
}

WeightsVariant webgpu_weights_variant(const AttentionPlan& plan, const WebGpuLimits& limits, ScoreStage stage,
                                      const WebGpuInputOffsets& offsets) {
  WeightsVariant v;
  v.mask = plan.mask_kind;
  v.causal = plan.causal;
  v.variants = webgpu_variant_flags(plan);
  v.types = webgpu_element_types(plan, limits, offsets);
  v.types.value_type = ElementType::kFloat32;  // it reads no value
  v.types.value_vectors = false;
  v.stage = stage;
  return v;
}

uint64_t WebGpuChunkBytes::largest() const {
  return std::max({query, key, value, mask, output, weights, stats, scores, lse});
}

WebGpuChunkElements webgpu_chunk_elements(const AttentionPlan& p, const WebGpuChunk& c) {
  WebGpuChunkElements n;
  n.query = c.query_rows() * p.E;
  n.output = c.query_rows() * p.Ev;
  // Heads kv0…kv0 + nkv − 1 at the plan's head strides (a KV cache's maxLength·E), the last one
  // Lk rows rounded up to kWebGpuBoundKeyRows within its stride (a dense tensor's: Lk).
  const auto heads = [&](int64_t stride, int64_t width) {
    if (c.nkv == 0 || width == 0) return int64_t{0};
    const int64_t last_rows = std::min(stride / width, round_up(p.Lk, kWebGpuBoundKeyRows));
    return (c.nkv - 1) * stride + last_rows * width;
  };
  n.key = heads(p.key_head_stride, p.E);
  n.value = heads(p.value_head_stride, p.Ev);
  return n;
}

WebGpuChunkBytes webgpu_chunk_bytes(const AttentionPlan& p, const WebGpuChunk& c) {
  WebGpuChunkBytes b;
  const uint64_t rows = static_cast<uint64_t>(c.query_rows());
  const WebGpuChunkElements n = webgpu_chunk_elements(p, c);
  auto input_bytes = [](ElementType type, int64_t elements) {
    if (elements == 0) return uint64_t{0};
    const uint64_t slack = type == ElementType::kFloat16 ? kWebGpuFloat16BindingSlack : 0;
    return webgpu_element_bytes(type) * static_cast<uint64_t>(elements) + slack;
  };
  b.query = input_bytes(p.query_type, n.query);
  b.key = p.quantized_kv() ? static_cast<uint64_t>(p.key_layout().total_bytes) : input_bytes(p.key_type, n.key);
  b.value = p.quantized_kv() ? static_cast<uint64_t>(p.value_layout().total_bytes) : input_bytes(p.value_type, n.value);
  b.output = 4 * static_cast<uint64_t>(n.output);
  if (p.mask_kind != MaskKind::kNone) {
    b.mask = static_cast<uint64_t>(c.mask_hi - c.mask_lo) * mask_element_bytes(p) + kMaskAlignSlack;
  }
  if (p.return_weights) {
    b.weights = 4 * rows * p.Lk;
    b.stats = 8 * rows;
  }
  if (p.return_scores != ScoreStage::kNone) b.scores = 4 * rows * p.Lk;
  if (p.return_lse) b.lse = 4 * rows;
  return b;
}

int64_t webgpu_most_chunk_rows(const std::vector<WebGpuChunk>& chunks) {
  int64_t most = 0;
  for (const WebGpuChunk& c : chunks) most = std::max(most, c.query_rows());
  return most;
}

Status plan_webgpu_chunks(const AttentionPlan& p, const WebGpuLimits& limits,
                          std::vector<WebGpuChunk>* chunks) {
  chunks->clear();
  const int64_t heads = p.B * p.Hq;
  if (heads == 0 || p.Lq == 0 || p.Lk == 0) return Status::Ok();
  const uint64_t cap = limits.largest_binding_bytes();
  const bool masked = p.mask_kind != MaskKind::kNone;

  // One key/value head is the unit that cannot be cut (its softmax needs every key).
  WebGpuChunk one_head;
  one_head.nkv = 1;
  const WebGpuChunkBytes head_bytes = webgpu_chunk_bytes(p, one_head);
  const uint64_t kv_bytes = std::max(head_bytes.key, head_bytes.value);
  if (kv_bytes > cap) {
    return Status::RangeError("one head's key/value (Lk = " + std::to_string(p.Lk) + ", E = " +
                              std::to_string(p.E) + ", Ev = " + std::to_string(p.Ev) + ") needs " +
                              std::to_string(kv_bytes) +
                              " bytes in one buffer, more than this WebGPU device allows (" +
                              std::to_string(cap) + " bytes: maxStorageBufferBindingSize/maxBufferSize)");
  }

  auto whole_heads = [&](int64_t bh0, int64_t nbh, int64_t mask_min, int64_t mask_max) {
    WebGpuChunk c;
    c.bh0 = bh0;
    c.nbh = nbh;
    c.row0 = 0;
    c.rows = p.Lq;
    c.kv0 = kv_of(p, bh0);
    c.nkv = kv_of(p, bh0 + nbh - 1) - c.kv0 + 1;
    if (masked) {
      int64_t first;
      const int64_t span = mask_row_span(p, 0, p.Lq, &first);
      c.mask_lo = mask_min + first;
      c.mask_hi = mask_max + first + span;
    }
    return c;
  };

  int64_t bh = 0;
  while (bh < heads) {
    int64_t mask_min = head_mask_offset(p, bh), mask_max = mask_min;
    WebGpuChunk chunk = whole_heads(bh, 1, mask_min, mask_max);
    if (webgpu_chunk_bytes(p, chunk).largest() <= cap) {
      // As many whole heads as fit (the flash grid's y = nbh is cut by split_grid if needed).
      while (bh + chunk.nbh < heads) {
        const int64_t off = head_mask_offset(p, bh + chunk.nbh);
        const int64_t next_min = std::min(mask_min, off), next_max = std::max(mask_max, off);
        const WebGpuChunk grown = whole_heads(bh, chunk.nbh + 1, next_min, next_max);
        if (webgpu_chunk_bytes(p, grown).largest() > cap) break;
        chunk = grown;
        mask_min = next_min;
        mask_max = next_max;
      }
      chunks->push_back(chunk);
      bh += chunk.nbh;
      continue;
    }
    // One head is too big as a whole: cut its query rows.
    const bool full_rows = p.return_weights || p.return_scores != ScoreStage::kNone;
    const uint64_t per_row = 4ull * std::max<int64_t>({p.E, p.Ev, full_rows ? p.Lk : 0,
                                                       p.return_weights ? 2 : 0, p.return_lse ? 1 : 0, 1});
    int64_t rows = static_cast<int64_t>(cap / per_row);
    if (masked && p.mask_stride_q > 0) {
      const int64_t budget = static_cast<int64_t>((cap - kMaskAlignSlack) / mask_element_bytes(p));
      const int64_t fixed = (p.Lk - 1) * p.mask_stride_k + 1;
      rows = std::min(rows, budget < fixed ? 0 : (budget - fixed) / p.mask_stride_q + 1);
    }
    if (rows < 1) {
      return Status::RangeError("one query row of this attention call needs more than this WebGPU "
                                "device allows in one buffer (" + std::to_string(cap) + " bytes)");
    }
    const int64_t head_off = head_mask_offset(p, bh);
    for (int64_t row0 = 0; row0 < p.Lq; row0 += rows) {
      WebGpuChunk c;
      c.bh0 = bh;
      c.nbh = 1;
      c.row0 = row0;
      c.rows = std::min(rows, p.Lq - row0);
      c.kv0 = kv_of(p, bh);
      c.nkv = 1;
      if (masked) {
        int64_t first;
        const int64_t span = mask_row_span(p, row0, c.rows, &first);
        c.mask_lo = head_off + first;
        c.mask_hi = c.mask_lo + span;
      }
      chunks->push_back(c);
    }
    ++bh;
  }
  return Status::Ok();
}

std::vector<GridPart> split_grid(uint64_t x, uint64_t y, uint32_t max_per_dim) {
  std::vector<GridPart> parts;
  if (x == 0 || y == 0 || max_per_dim == 0) return parts;
  for (uint64_t y0 = 0; y0 < y; y0 += max_per_dim) {
    for (uint64_t x0 = 0; x0 < x; x0 += max_per_dim) {
      GridPart g;
      g.x_base = static_cast<uint32_t>(x0);
      g.y_base = static_cast<uint32_t>(y0);
      g.x = static_cast<uint32_t>(std::min<uint64_t>(max_per_dim, x - x0));
      g.y = static_cast<uint32_t>(std::min<uint64_t>(max_per_dim, y - y0));
      parts.push_back(g);
    }
  }
  return parts;
}

WebGpuUniforms webgpu_uniforms(const AttentionPlan& p, const WebGpuChunk& c, int64_t mask_base,
                               const GridPart& part) {
  WebGpuUniforms u{};
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  u[kUfLq] = u32(p.Lq);
  u[kUfLk] = u32(p.Lk);
  u[kUfE] = u32(p.E);
  u[kUfEv] = u32(p.Ev);
  u[kUfHq] = u32(p.Hq);
  u[kUfHkv] = u32(p.Hkv);
  u[kUfGroup] = u32(p.heads_per_kv());
  u[kUfBh0] = u32(c.bh0);
  u[kUfNbh] = u32(c.nbh);
  u[kUfRow0] = u32(c.row0);
  u[kUfRows] = u32(c.rows);
  u[kUfKv0] = u32(c.kv0);
  u[kUfMaskBase] = u32(mask_base);
  u[kUfMaskSb] = u32(p.mask_stride_b);
  u[kUfMaskSh] = u32(p.mask_stride_h);
  u[kUfMaskSq] = u32(p.mask_stride_q);
  u[kUfMaskSk] = u32(p.mask_stride_k);
  std::memcpy(&u[kUfScaleBits], &p.scale, sizeof(float));
  std::memcpy(&u[kUfSoftcapBits], &p.softcap, sizeof(float));
  u[kUfSoftcapOn] = p.softcap > 0.0f ? 1u : 0u;
  // last visible key of row i = min(i + offset, Lk - 1) (two's complement i32 in the shader).
  // Offsets below -Lq (no row sees a key) or above Lk (every row sees every key) act as those
  // bounds, so the offset is clamped to [-Lq, Lk]: i + offset then stays within i32.
  const int64_t offset = std::clamp<int64_t>(p.position_offset, -p.Lq, p.Lk);
  u[kUfCausalOffset] = static_cast<uint32_t>(static_cast<int32_t>(offset));
  u[kUfXBase] = part.x_base;
  u[kUfYBase] = part.y_base;
  u[kUfNanBits] = 0x7fc00000u;  // quiet NaN, handed in at run time (WGSL has no NaN constants)
  u[kUfB] = u32(p.B);
  u[kUfNegInfBits] = 0xff800000u;  // -inf, also handed in at run time
  u[kUfKeyStride] = u32(p.key_head_stride);
  u[kUfValueStride] = u32(p.value_head_stride);
  u[kUfSplits] = webgpu_decode_splits(p);
  u[kUfSplitKeys] = webgpu_decode_split_keys(p);
  return u;
}

std::string BackwardVariant::key(const char* kernel) const {
  return std::string("backward-") + kernel + ":e" + std::to_string(e_pad) + ":ev" + std::to_string(ev_pad) + ":bq" +
         std::to_string(query_block) + ":bk" + std::to_string(key_block) + ":tk" + std::to_string(dkdv.tile) + ":tq" +
         std::to_string(dq.tile) + ":mask=" + mask_name(mask) +
         ":causal=" + (causal ? "1" : "0") + ":ds=" + (write_d_scores ? "1" : "0") + variants.key() + types.key() +
         (d_output_vectors ? ":dout-vec4" : "") + ":lanes" + std::to_string(lanes) + (subgroups ? ":subgroups" : ":wgmem");
}

std::string BackwardVariant::wgsl_constants(uint32_t stage) const {
  // lane_shuffle_xor: subgroupShuffleXor, or (without subgroups) a stand-in the kernels never call.
  const std::string shuffle =
      subgroups ? "fn lane_shuffle_xor(v: vec2<f32>, mask: u32) -> vec2<f32> { return subgroupShuffleXor(v, mask); }\n"
                : "fn lane_shuffle_xor(v: vec2<f32>, mask: u32) -> vec2<f32> { return v; }\n";
  // dOutput: float32, bound from its first element.
  const std::string d_output = element_loaders(ElementType::kFloat32, false, "d_output", "DOutputElement", "", d_output_vectors);
  return (subgroups ? "enable subgroups;\n" : "") + types.wgsl_declarations() + d_output + u32_const("E_PAD", e_pad) +
         u32_const("EV_PAD", ev_pad) + u32_const("KEYS", dkdv.tile) + u32_const("ROWS", dq.tile) +
         u32_const("LANES", lanes) + bool_const("SUBGROUPS", subgroups) + shuffle +
         bool_const("LAST_TILE_FIRST", dq.last_tile_first) +
         u32_const("INVOCATIONS", kWebGpuBackwardInvocations) + u32_const("QUERY_BLOCK", query_block) +
         u32_const("KEY_BLOCK", key_block) + u32_const("MASK_KIND", mask_code(mask)) + bool_const("CAUSAL", causal) +
         bool_const("WRITE_DS", write_d_scores) + u32_const("STAGE", stage) +
         u32_const("ROW_REGIONS", kWebGpuBackwardRowRegions) +
         "const RENORMALIZE_FROM: f32 = " + std::to_string(kBackwardRenormalizeFrom) + ";\n" + variants.wgsl_constants();
}

namespace {

// The tile pass over `heads` heads of `length` keys or rows (webgpu_tile_for_grid's tile, at
// most `largest`).
BackwardTileGrid backward_tile_grid(int64_t length, int64_t heads, uint32_t largest, bool last_tile_first) {
  BackwardTileGrid g;
  g.heads = static_cast<uint64_t>(heads);
  g.last_tile_first = last_tile_first;
  g.tile = webgpu_tile_for_grid(length, heads, largest, std::min(largest, kWebGpuBackwardMinTile));
  g.tiles = (static_cast<uint64_t>(length) + g.tile - 1) / g.tile;
  return g;
}

// Floats of a pass's outputs and of one segment's scratch slot (see WebGpuBackwardBytes).
struct BackwardPassFloats {
  uint64_t outputs = 0, slot = 0;
};
BackwardPassFloats dkdv_floats(const AttentionPlan& p) {
  const uint64_t f = static_cast<uint64_t>(p.B * p.Hkv * p.Lk) * static_cast<uint64_t>(p.E + p.Ev);
  return {f, f};
}
BackwardPassFloats dq_floats(const AttentionPlan& p, bool d_scores, bool sinks) {
  const uint64_t rows = static_cast<uint64_t>(p.B * p.Hq * p.Lq);
  return {rows * (static_cast<uint64_t>(p.E) + (d_scores ? static_cast<uint64_t>(p.Lk) : 0)),
          rows * (static_cast<uint64_t>(p.E) + (sinks ? 1 : 0))};
}
uint64_t backward_pass_bytes(const BackwardPassFloats& f, uint32_t splits) {
  return 4 * (f.outputs + (splits > 1 ? splits * f.slot : 0));
}

// Cuts the loop of `grid` (over `items` keys or rows of all its heads) over `length` rows or keys
// in blocks of `block` into the rule's segments, halved while the pass's buffer with its scratch
// would exceed `cap` bytes; each segment holds whole blocks.
void split_backward_pass(BackwardTileGrid* grid, int64_t items, int64_t length, uint32_t block,
                         const BackwardPassFloats& floats, uint64_t cap) {
  uint32_t splits = webgpu_backward_splits(items, length, block);
  while (splits > 1 && backward_pass_bytes(floats, splits) > cap) splits /= 2;
  const uint64_t blocks = (static_cast<uint64_t>(length) + block - 1) / block;
  grid->splits = splits;
  grid->segment = static_cast<uint32_t>((blocks + splits - 1) / splits * block);
}

}  // namespace

Status webgpu_backward_variant(const AttentionPlan& plan, const WebGpuLimits& limits, bool d_mask,
                               BackwardVariant* variant, const WebGpuInputOffsets& offsets) {
  BackwardVariant v;
  v.e_pad = webgpu_pad_head_dim(plan.E);
  v.ev_pad = webgpu_pad_head_dim(plan.Ev);
  v.mask = plan.mask_kind;
  v.causal = plan.causal;
  v.write_d_scores = d_mask && plan.mask_kind == MaskKind::kAdditive;
  v.variants = webgpu_variant_flags(plan);
  v.types = webgpu_element_types(plan, limits, offsets);
  v.d_output_vectors = webgpu_vector_reads(ElementType::kFloat32, plan.Ev, plan.Lq * plan.Ev, 0);
  // Lanes per key or row where a workgroup of the smallest tile can hold them (WebGPU's least
  // maxComputeInvocationsPerWorkgroup, 256, always can), at most a vec4 column each (a power of
  // two up to E_PAD / 4 and EV_PAD / 4 divides both); the lanes sum their parts by
  // subgroupShuffleXor where a subgroup always holds a key's (row's) lanes.
  const uint32_t lanes = std::min({kWebGpuBackwardLanes, v.e_pad / 4, v.ev_pad / 4});
  v.lanes = limits.max_invocations_per_workgroup >= kWebGpuBackwardMinTile * lanes ? lanes : 1;
  v.subgroups = v.lanes > 1 && limits.subgroups && limits.subgroup_min_size >= v.lanes;
  uint32_t largest = kWebGpuBackwardMaxTile;
  while (largest > 1 && largest * v.lanes > limits.max_invocations_per_workgroup) largest /= 2;
  // Under a causal mask a row tile sees more keys the later it is; dK/dV's first key tiles,
  // seen by the most rows, start first in their natural order.
  v.dkdv = backward_tile_grid(plan.Lk, plan.B * plan.Hkv, largest, false);
  v.dq = backward_tile_grid(plan.Lq, plan.B * plan.Hq, largest, plan.causal);
  // Both kernels hold rows of E + Ev floats: Q and dO rows (dK/dV), K and V rows (dQ), beside the
  // lanes' parts (a vec2 per invocation without subgroups).
  const uint64_t lane_parts = 8ull * (v.subgroups ? 1 : std::max(v.dkdv.tile, v.dq.tile) * v.lanes);
  const uint64_t per_row = 4ull * (v.e_pad + v.ev_pad);
  const uint64_t fit = limits.max_workgroup_storage_bytes > lane_parts ? (limits.max_workgroup_storage_bytes - lane_parts) / per_row : 0;
  if (fit < 1) {
    return Status::RangeError("the WebGPU backward with E = " + std::to_string(plan.E) + " and Ev = " +
                              std::to_string(plan.Ev) + " needs " + std::to_string(per_row) +
                              " bytes of workgroup memory per row (and " + std::to_string(lane_parts) +
                              " for its lanes' sums), more than this device's maxComputeWorkgroupStorageSize (" +
                              std::to_string(limits.max_workgroup_storage_bytes) + ")");
  }
  v.query_block = v.key_block = static_cast<uint32_t>(std::min<uint64_t>(fit, kWebGpuBackwardMaxBlock));
  const uint64_t cap = limits.largest_binding_bytes();
  split_backward_pass(&v.dkdv, plan.B * plan.Hkv * plan.Lk, plan.Lq, v.query_block, dkdv_floats(plan), cap);
  split_backward_pass(&v.dq, plan.B * plan.Hq * plan.Lq, plan.Lk, v.key_block,
                      dq_floats(plan, v.write_d_scores, v.variants.sinks), cap);
  *variant = v;
  return Status::Ok();
}

uint32_t webgpu_backward_splits(int64_t items, int64_t length, uint32_t block) {
  const uint64_t blocks = (static_cast<uint64_t>(std::max<int64_t>(length, 0)) + block - 1) / block;
  const uint64_t work = static_cast<uint64_t>(std::max<int64_t>(items, 1));
  uint32_t splits = 1;
  while (work * splits < kWebGpuBackwardTargetItems && 2ull * splits * kWebGpuBackwardMinSegmentBlocks <= blocks) {
    splits *= 2;
  }
  return splits;
}

WebGpuBackwardBytes webgpu_backward_bytes(const AttentionPlan& p, const BackwardVariant& v) {
  WebGpuBackwardBytes b;
  const uint64_t rows = static_cast<uint64_t>(p.B * p.Hq * p.Lq);
  b.rowstats = 4 * (kWebGpuBackwardRowRegions * rows + (v.write_d_scores ? static_cast<uint64_t>(p.mask_elements) : 0) + static_cast<uint64_t>(p.Hq));
  b.grad_query = backward_pass_bytes(dq_floats(p, v.write_d_scores, v.variants.sinks), v.dq.splits);
  b.grad_key_value = backward_pass_bytes(dkdv_floats(p), v.dkdv.splits);
  return b;
}

WebGpuChunk webgpu_whole_chunk(const AttentionPlan& p) {
  WebGpuChunk c;
  c.bh0 = 0;
  c.nbh = p.B * p.Hq;
  c.row0 = 0;
  c.rows = p.Lq;
  c.kv0 = 0;
  c.nkv = p.B * p.Hkv;
  c.mask_lo = 0;
  c.mask_hi = p.mask_elements;
  return c;
}

Status check_webgpu_backward_fits(const AttentionPlan& p, const WebGpuLimits& limits, const BackwardVariant& variant) {
  const uint64_t cap = limits.largest_binding_bytes();
  const WebGpuChunkBytes inputs = webgpu_chunk_bytes(p, webgpu_whole_chunk(p));
  const WebGpuBackwardBytes own = webgpu_backward_bytes(p, variant);
  const std::pair<const char*, uint64_t> buffers[] = {
      {"query", inputs.query},        {"key", inputs.key},   {"value", inputs.value},
      {"attnMask", inputs.mask},      {"dOutput", inputs.output}, {"the per-row statistics", own.rowstats},
      {"dQuery (with dS for dAttnMask)", own.grad_query}, {"dKey and dValue", own.grad_key_value}};
  for (const auto& [name, bytes] : buffers) {
    if (bytes > cap) {
      return Status::RangeError("the WebGPU backward runs in one piece and " + std::string(name) + " needs " +
                                std::to_string(bytes) + " bytes in one buffer, more than this device allows (" +
                                std::to_string(cap) + " bytes: maxStorageBufferBindingSize/maxBufferSize)");
    }
  }
  return Status::Ok();
}

}  // namespace sdpa
