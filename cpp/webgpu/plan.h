// The pure-C++ half of the WebGPU backend: how one attention call is cut into dispatches that
// respect a device's limits, which pipeline variant (kernel and WGSL constants) it needs, and the
// uniform block each dispatch reads. No Emscripten here (tested natively in
// tests/cpp/webgpu_plan_test.cpp); the device glue that acts on these plans is
// cpp/webgpu/device.cpp, the kernels are in cpp/webgpu/shaders/.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/problem.h"

namespace sdpa {

// The kernels' tile constants. They exist only here: wgsl_constants() injects them into the WGSL.
// Query rows per flash workgroup (the per-row kernel always; the tiled kernel at most, see
// webgpu_flash_rows), keys per weights workgroup (one invocation per key), and the most keys a
// flash workgroup holds in workgroup memory at once.
constexpr uint32_t kWebGpuFlashRows = 64;
constexpr uint32_t kWebGpuWeightsKeys = 64;
constexpr uint32_t kWebGpuMaxBlockKeys = 64;

// The device limits the planner respects (the smaller of the device's and any caps the caller
// sets, e.g. a test forcing splits).
struct WebGpuLimits {
  uint64_t max_storage_binding_bytes = 128ull << 20;  // maxStorageBufferBindingSize
  uint64_t max_buffer_bytes = 256ull << 20;           // maxBufferSize
  uint32_t max_workgroups_per_dim = 65535;            // maxComputeWorkgroupsPerDimension
  uint32_t max_workgroup_storage_bytes = 16384;       // maxComputeWorkgroupStorageSize
  uint32_t max_invocations_per_workgroup = 256;       // maxComputeInvocationsPerWorkgroup
  bool shader_f16 = false;                            // the device has 'shader-f16' (and the caller allows it)
  bool subgroups = false;                             // the device has 'subgroups' (and the caller allows it)
  uint32_t subgroup_min_size = 4;                     // adapterInfo.subgroupMinSize (4: the spec's least)
  // WGSL has the packed_4x8_integer_dot_product language feature (dot4I8Packed; and the caller allows it)
  bool packed_dot = false;
  // The fewest keys a prefill key split holds (webgpu_flash_key_splits; gpuLimits.prefillSplitKeys
  // lowers it, e.g. to split the small calls of the tests).
  uint32_t min_split_keys = 512;

  // The most bytes one storage binding may hold: a buffer can be no larger than maxBufferSize.
  uint64_t largest_binding_bytes() const { return std::min(max_storage_binding_bytes, max_buffer_bytes); }
};

// Keys or values of an int8/int4 KV cache (core/kv_cache_format.h), read in place by the kernels.
inline bool webgpu_quantized(ElementType type) { return type == ElementType::kInt8 || type == ElementType::kInt4; }

// How the kernels read a float16 query, key or value: as `array<f16>` storage (`enable f16;`,
// devices with 'shader-f16'), or as `array<u32>` words of two halves (element i: word i >> 1,
// half i & 1) through unpack2x16float. Either way the loads give f32 and every accumulator, the
// row max and the denominator stay f32.
enum class WebGpuFloat16Path { kUnpack, kShaderF16 };
const char* webgpu_float16_path_name(WebGpuFloat16Path path);  // "unpack2x16float" | "shader-f16"

// The element types of query, key and value as the kernels read them: part of every variant.
struct WebGpuElementTypes {
  ElementType query_type = ElementType::kFloat32, key_type = ElementType::kFloat32,
              value_type = ElementType::kFloat32;
  WebGpuFloat16Path path = WebGpuFloat16Path::kUnpack;
  // On a quantized cache: the query binding holds the call's query rows as int8 levels and scales
  // (kv_quantize.wgsl, OUT 2) for the quantized decode kernel; else it holds floats.
  bool query_levels = false;
  // Integer dot products of 4 int8 pairs by dot4I8Packed, else by unpacking (extractBits).
  bool packed_dot = false;
  // The bindings read as vectors of kWebGpuVectorWidth elements (webgpu_vector_reads): one load
  // per 4 elements of a row in query4/key4/value4, instead of one per element. The query's is
  // ignored with query_levels. A quantized key or value binding read as vectors holds vec4<u32>
  // (4 words of the tile layout a load: the streaming quantized decode kernel's).
  bool query_vectors = false, key_vectors = false, value_vectors = false;
  bool any_float16() const;
  bool any_quantized() const { return webgpu_quantized(key_type) || webgpu_quantized(value_type); }
  // The element types when any is not float32, e.g. ":q=f16:k=f16:v=f32:f16=unpack2x16float" or
  // ":q=f32:k=i8:v=i8:f16=unpack2x16float:dot4=packed", then the vector bindings when any, e.g.
  // ":vec4=qkv" (all three) or ":vec4=kv"; "" for float32 tensors read one element at a time.
  std::string key() const;
  // What the kernels' text needs first: `enable f16;` (shader-f16 path with a float16 tensor),
  // the storage element aliases QueryElement/KeyElement/ValueElement, the loaders
  // query_at/key_at/value_at(i) -> f32 (element i of the chunk's tensor; a float16 tensor's
  // binding may start before its data: Params.query_base/key_base/value_base elements), and
  // query4/key4/value4(base, c, n) -> vec4<f32> (elements base + c … base + c + 3 of a row of n,
  // zeros past n: for c a multiple of 4). A vector binding's element is a vec4<f32>, vec4<f16>
  // or vec2<u32> (4 halves), and its *4 loader one load; otherwise *4 reads 4 elements by *_at.
  // Without `value_binding` (a kernel with no value binding) nothing of the value.
  // A quantized key/value binding is the cache's whole tensor (levels, then scales), of u32 words
  // or, with key_vectors/value_vectors, of vec4<u32> (4 words a load); key_word/value_word(i)
  // give its word i either way. Its loader finds element i = head·stride + j·dim + e (head
  // counted from the chunk's kv0) in the tile layout and returns level · scale (NaN for a NaN
  // scale); with query_levels the query loader dequantizes the level workspace. Quantized types
  // also get dot4_i8(a, b) -> i32, the dot product of two words of 4 signed bytes.
  // Without `value_binding` (a kernel with no value binding) nothing of the value.
  std::string wgsl_declarations(bool value_binding = true) const;
};
// Byte offsets at which the call's query, key and value start in the caller's GPU buffers
// (0 for arrays, which the glue uploads into buffers of their own).
struct WebGpuInputOffsets {
  uint64_t query = 0, key = 0, value = 0;
};
// Elements of one vector load (16 bytes of float32, 8 of float16).
constexpr uint32_t kWebGpuVectorWidth = 4;
// Whether the kernels read a float tensor of `type` whose rows hold `row_length` elements (E for
// query and key, Ev for value), its heads `head_stride` elements apart, as vectors: when every
// row starts on a vector (row_length and head_stride multiples of kWebGpuVectorWidth, row_length
// > 0: a chunk starts at a head or a row) and so does the binding's data. A float32 binding
// always starts at its data (the glue binds a GPU tensor in place only at a binding-aligned
// offset, else copies it); a float16 GPU tensor is bound from the aligned offset before it
// (Params' *_base elements skipped), a whole number of vectors before it when `offset_bytes`
// (its byte offset) is a multiple of 8. The bindings then hold whole vectors (a 16-byte
// multiple for float32, 8 for float16), none left unreachable. No quantized type.
bool webgpu_vector_reads(ElementType type, int64_t row_length, int64_t head_stride, uint64_t offset_bytes);
// The one place the float16 read path is chosen (shader-f16 where the device has it and
// limits.shader_f16, else unpack2x16float), and the vector bindings (webgpu_vector_reads).
WebGpuElementTypes webgpu_element_types(const AttentionPlan& plan, const WebGpuLimits& limits,
                                        const WebGpuInputOffsets& offsets = {});
// Bytes of one element of `type` in a GPU buffer (float types).
inline uint64_t webgpu_element_bytes(ElementType type) { return type == ElementType::kFloat16 ? 2 : 4; }

// Largest padded head dim the tiled flash kernel (attention_flash_tiled.wgsl) takes, and its
// smallest key tile; larger head dims, or a workgroup memory too small for that tile, run the
// one-invocation-per-row kernel (attention_flash.wgsl). The tiled kernel serves each query row
// with kWebGpuTiledLanes invocations: its workgroup has rows · kWebGpuTiledLanes of them.
constexpr uint32_t kWebGpuTiledMaxHeadDim = 128;
constexpr uint32_t kWebGpuTiledMinBlockKeys = 16;
constexpr uint32_t kWebGpuTiledLanes = 4;

// The workgroups a pass over rows or keys in tiles should launch (the tiled flash kernel's row
// tiles, the backward's key and row tiles): a tile is halved while `heads` heads of `length`
// rows or keys in tiles of it would launch fewer than kWebGpuTargetWorkgroups, from `largest`
// down to `smallest`. A small grid (few heads: one head of 4096 rows is 64 workgroups of 64)
// leaves most of a GPU idle; smaller tiles multiply the workgroups, at the price of reading
// the K/V (or Q/dO) blocks more often. WebGPU does not expose the number of cores: the target
// is a constant sized for a large GPU, an H100's 132 SMs times about 4 resident workgroups (an
// estimate: an SM holds at most 2048 invocations, fewer at a kernel's register use); a smaller
// GPU is full sooner and then pays only the extra reads.
constexpr uint64_t kWebGpuTargetWorkgroups = 512;
uint32_t webgpu_tile_for_grid(int64_t length, int64_t heads, uint32_t largest, uint32_t smallest);

// The tiled kernel's rows per workgroup: webgpu_tile_for_grid over the B·Hq heads of Lq rows,
// from kWebGpuFlashRows down to kWebGpuTiledMinRows.
constexpr uint32_t kWebGpuTiledMinRows = 16;
uint32_t webgpu_flash_rows(const AttentionPlan& plan);

// Flash-decoding (attention_decode_partial.wgsl, or attention_decode_quantized.wgsl on an
// int8/int4 cache, then attention_decode_merge.wgsl): the keys are cut into splits of
// webgpu_decode_split_keys keys; one workgroup per (KV head, block of the query rows that read
// it, split) computes the split's softmax state of those rows, and one workgroup of
// kWebGpuDecodeInvocations per row merges them by log-sum-exp.
constexpr uint32_t kWebGpuDecodeSplitKeys = 128;
// Longer splits cost a workgroup's query load, its record and the merge's share less per key:
// on an H100, B = 1 (8 KV heads of 32768 keys) took 2.4 ms a step with splits of 512 keys (512
// workgroups) against 2.8 ms with 128 (2048) and 3.1 ms with 128 and unpadded tiles.
constexpr uint32_t kWebGpuDecodeMaxSplitKeys = 1024;
constexpr uint32_t kWebGpuDecodeMaxRows = 8;
constexpr uint32_t kWebGpuDecodeInvocations = 64;
// The partial kernel's most rows per workgroup (a GQA group of up to 16 query heads, or its
// query rows, shares one K/V tile) and its key tiles (the largest of these that fits).
constexpr uint32_t kWebGpuDecodeMaxWorkgroupRows = 16;
constexpr uint32_t kWebGpuDecodeMaxBlockKeys = 64;
constexpr uint32_t kWebGpuDecodeMinBlockKeys = 4;
// The streaming kernels (attention_decode_stream.wgsl on float caches, its quantized twin
// attention_decode_stream_quantized.wgsl on int8/int4 caches): lanes per key or per tile of 4
// quantized keys (at most a subgroup), the workgroup's invocations (groups of those lanes, fewer
// where the groups' combine does not fit the workgroup memory), and the most vec4s of query and
// output columns (quantized: query words and block scales, output columns) a lane may hold.
constexpr uint32_t kWebGpuDecodeStreamLanes = 32;
constexpr uint32_t kWebGpuDecodeStreamInvocations = 128;
constexpr uint32_t kWebGpuDecodeStreamLaneVec4s = 64;
// Floats of one split's record in the partials buffer: m, l, count, last key, NaN flag, o [ev_pad].
constexpr uint32_t kWebGpuDecodeRecordHeader = 5;

// The one place flash-decoding is chosen: the number of key splits for `plan`, or 0 when the
// flash kernels run. Chosen when each head has few query rows (Lq ≤ kWebGpuDecodeMaxRows: a
// decode step, or a few speculative tokens) and its keys fill at least two splits of
// kWebGpuDecodeSplitKeys, and the call returns no weights or scores (those passes read the
// flash kernel's per-row statistics). The flash kernels then run one workgroup per head; the
// splits give the GPU Lk / split keys times more parallel work.
uint32_t webgpu_decode_splits(const AttentionPlan& plan);
// Keys per split: webgpu_tile_for_grid over the B·Hkv KV heads' Lk keys, from
// kWebGpuDecodeMaxSplitKeys down to kWebGpuDecodeSplitKeys.
uint32_t webgpu_decode_split_keys(const AttentionPlan& plan);

// Which of the attention variants a pipeline computes (each a WGSL constant; their data is in
// the variants buffer, webgpu_variant_data): per-batch visible ranges (a window or key lengths),
// ALiBi, sinks, document ids.
struct WebGpuVariantFlags {
  bool ranges = false, alibi = false, sinks = false, documents = false;
  std::string key() const;              // e.g. ":ranges=1:alibi=0:sinks=0:docs=0"
  std::string wgsl_constants() const;   // RANGES, ALIBI, SINKS, DOCUMENTS
};
WebGpuVariantFlags webgpu_variant_flags(const AttentionPlan& plan);

// The variants buffer every kernel reads (`variants` in the WGSL), as u32 words:
//   per batch b, words [4b, 4b + 4): first base, last base (i32: query row i sees keys
//   [max(0, i + first base), min(key length − 1, i + last base)]), the key length, and the
//   batch's position offset (f32 bits: query row i sits at position i + offset);
//   then ALiBi slopes [Hq] and sinks [Hq] (f32 bits), query document ids [B·Lq], key ids [B·Lk],
//   and, per batch and tile of `block_keys` keys, the tile's lowest and highest key id (the
//   flash kernels skip the tiles whose ids miss their rows').
// The bases are clamped to [−Lq − 1, Lk + 1], which leaves every row's range as it is and keeps
// i + base within i32. At least 4 words (a binding is never empty).
std::vector<uint32_t> webgpu_variant_data(const AttentionPlan& plan, const AttentionInputs& in,
                                          uint32_t block_keys);

// A dispatch's workgroups, x × y (before split_grid cuts them to the per-dimension limit).
struct FlashGrid {
  uint64_t x = 0, y = 0;
};

// One pipeline variant of the flash kernel. Head dims are padded to a few sizes so that the
// private arrays (query row, accumulator) have compile-time lengths and few variants exist.
struct FlashVariant {
  bool tiled = false;              // attention_flash_tiled.wgsl (4 lanes a row), else attention_flash.wgsl
  uint32_t rows = kWebGpuFlashRows;  // query rows per flash workgroup (the kernels' ROWS)
  // The flash grid runs tile-major, heaviest first (grid()): the row tiles whose rows see the
  // most keys start first, in every head, so the call does not end waiting on a heavy tile.
  // Set when the last visible key grows with the row (causal, or a window's right side); either
  // order gives each tile the same bits.
  bool heaviest_first = false;
  uint32_t e_pad = 0, ev_pad = 0;  // padded E and Ev
  uint32_t block_keys = 0;         // keys per K/V tile in workgroup memory
  MaskKind mask = MaskKind::kNone;
  bool causal = false;  // its offset is a uniform (kUfCausalOffset), so one pipeline serves every offset
  bool write_stats = false;  // also write each row's (max, denominator) for the weights pass
  bool write_lse = false;    // also write each row's log-sum-exp (returnLogSumExp) to the lse binding
  // 0: a flash kernel; 1: attention_decode_partial.wgsl; 2: attention_decode_merge.wgsl (with
  // the flash kernel's constants, tiled = false); 3: attention_decode_quantized.wgsl (the
  // partial kernel of a quantized cache); 4: attention_decode_stream.wgsl;
  // 5: attention_decode_stream_quantized.wgsl (its key and value bindings read as vec4<u32>:
  // types.key_vectors and value_vectors set).
  uint32_t decode = 0;
  // The partial kernels (decode 1, 3, 4, 5): query rows per workgroup, lanes per row (decode 4
  // and 5: per key or tile of keys; a power of two; the workgroup has decode_rows·decode_lanes
  // invocations, decode 4 and 5 decode_groups·decode_lanes), and whether the lanes combine their
  // softmax statistics with subgroupShuffleXor (else through workgroup memory; decode 4 and 5
  // always do).
  uint32_t decode_rows = 0, decode_lanes = 0, decode_groups = 0;
  bool subgroups = false;
  WebGpuVariantFlags variants;
  WebGpuElementTypes types;
  // The query row (b·Hq + h)·Lq + i whose online-softmax state after each key tile goes to the
  // stats binding (traceOnlineSoftmax), or kNoTrace.
  static constexpr uint32_t kNoTrace = 0xffffffffu;
  uint32_t trace_row = kNoTrace;
  // Prefill split over the keys (webgpu_flash_key_splits; flash kernels only): with key_splits > 1
  // each workgroup takes one split of split_keys keys (a multiple of block_keys) of its row tile's
  // keys and writes the rows' partial records, which attention_decode_merge.wgsl combines.
  uint32_t key_splits = 1, split_keys = 0;
  // Bytes of one row's record per key split (flash-decoding's partials, the prefill key split's
  // records): kWebGpuDecodeRecordHeader floats, then the padded value row.
  uint64_t record_bytes() const { return 4ull * (kWebGpuDecodeRecordHeader + ev_pad); }
  // Floats of the trace: trace_stride() per key tile, trace_floats(Lk) for a call over Lk keys.
  uint32_t trace_stride() const;
  uint64_t trace_floats(int64_t Lk) const;
  // The pipeline-cache key, e.g.
  // "flash-tiled:e64:ev32:bk32:mask=bool:causal=1:stats=0:ranges=0:alibi=0:sinks=0:docs=0"
  // (then the element types' key when a tensor is float16, ":lse=1" when it writes the
  // log-sum-exp, ":heaviest-first", ":split" for a key split, and ":trace=<row>" for a trace).
  std::string key() const;
  // What the glue puts before the kernel: the element types' declarations, the variant's and
  // the tile constants.
  std::string wgsl_constants() const;
  // Workgroup memory the kernel declares (the formulas mirror its `var<workgroup>`s).
  uint32_t workgroup_bytes() const;
  // Row tiles of a flash dispatch over `query_rows` rows of each head.
  uint64_t row_tiles(int64_t query_rows) const { return (static_cast<uint64_t>(query_rows) + rows - 1) / rows; }
  // The grid of a flash dispatch over `heads` heads of `query_rows` rows: row tiles on x and heads
  // on y; with heaviest_first, heads on x and the row tiles on y, last tile first (flash_workgroup
  // in attention_flash_common.wgsl.inc maps a workgroup back). GPUs start workgroups in x-fastest
  // order, so then every head's heaviest tile starts before any head's next one: the order holds
  // across heads, not only within each. With key splits the head axis holds heads × splits
  // (head·key_splits + split), so the order holds over every split too.
  FlashGrid grid(int64_t query_rows, int64_t heads) const;
};

// attention_weights.wgsl: the weights (stage kNone) or, for returnScores, a stage of the scores.
struct WeightsVariant {
  MaskKind mask = MaskKind::kNone;
  bool causal = false;
  WebGpuVariantFlags variants;
  WebGpuElementTypes types;  // of query and key (value: float32, unread)
  ScoreStage stage = ScoreStage::kNone;
  std::string key() const;
  std::string wgsl_constants() const;
};

// 16, 32, 64, 128, 256, then multiples of 64.
uint32_t webgpu_pad_head_dim(int64_t d);

// The flash variant for `plan` under `limits`; a RangeError when even one key of E + Ev floats
// does not fit the workgroup storage.
Status webgpu_flash_variant(const AttentionPlan& plan, const WebGpuLimits& limits,
                            FlashVariant* variant, const WebGpuInputOffsets& offsets = {});
// The prefill key split: with few heads and query rows, the flash grid leaves a large GPU idle
// while each workgroup walks every key tile its rows see one after another (one head of 4096
// rows: 256 workgroups of 16 rows, each a chain of 64 key tiles). Cutting the keys into S splits
// multiplies the workgroups by S and divides the chains by S; each (row, split) writes a partial
// record (max, denominator, visible count, last key, NaN flag, normalized output, as the
// flash-decoding partials) and attention_decode_merge.wgsl combines a row's records in split
// order. Chosen (the flash variant returned with key_splits > 1, split_keys set) when:
// - the flash kernels write only the output and log-sum-exp (no weights, scores or trace), and
//   the call is not one flash-decoding takes (Lq > kWebGpuDecodeMaxRows);
// - the flash grid, B·Hq·⌈Lq / rows⌉ workgroups at the rows webgpu_flash_rows chose (the fewest
//   it takes whenever the grid stays small), is below kWebGpuTargetWorkgroups;
// - the keys fill at least two splits of limits.min_split_keys (512: eight 64-key tiles, so a
//   split's fixed costs, its query load, record and merge share, stay small beside its key loop).
// S is the smallest power of two with which the grid reaches kWebGpuTargetWorkgroups, at most
// Lk / min_split_keys, halved while the records of `chunk_rows` rows (the most query rows a chunk
// of the call holds: webgpu_most_chunk_rows) exceed maxStorageBufferBindingSize; the
// keys per split are ⌈Lk / S⌉ rounded up to the key tile (documents' per-tile ids stay whole), S
// then ⌈Lk / split_keys⌉. It depends on the plan and the limits only: every run gives the same
// bits. 1×4096×64 (16 rows, 256 workgroups): S = 2 of 2048 keys; 32×2048×64: no split.
FlashVariant webgpu_flash_key_splits(const AttentionPlan& plan, const WebGpuLimits& limits, const FlashVariant& flash,
                                     int64_t chunk_rows);
// attention_decode_merge.wgsl's variant, combining the records of the flash variant `flash`
// (in its key split, or as flash-decoding's partial kernel runs for it): its constants, one
// workgroup of kWebGpuDecodeInvocations per query row, no split. `query_levels`: the query
// binding holds a quantized cache's int8 query levels.
FlashVariant webgpu_merge_variant(const FlashVariant& flash, bool query_levels);
// The partial kernel of flash-decoding for `plan` (whose flash variant is `flash`) under
// `limits` (decode 3, reading the query as int8 levels, on a quantized cache), or false when its smallest key tile does not fit the workgroup storage (the flash
// kernels run then). Rows per workgroup: the rows that read one KV head (heads per KV head ×
// Lq), rounded up to a power of two, at most kWebGpuDecodeMaxWorkgroupRows. Lanes per row: as
// many as fill kWebGpuDecodeInvocations, at most one per output vec4, and with subgroups at most
// subgroup_min_size (a row's lanes then always share a subgroup). Key tile: the largest power of
// two from kWebGpuDecodeMaxBlockKeys down to kWebGpuDecodeMinBlockKeys whose K and V tiles (of
// a quantized cache: its levels and block scales) fit. With subgroups, the streaming kernel
// instead (decode 4 on a float cache, 5 on a quantized one) where a lane can hold each row's
// query and output columns (kWebGpuDecodeStreamLaneVec4s) and one group's combine fits the
// workgroup memory.
bool webgpu_decode_variant(const AttentionPlan& plan, const WebGpuLimits& limits, const FlashVariant& flash,
                           FlashVariant* partial);
// The weights pass (stage kNone), or the score pass of `stage`.
WeightsVariant webgpu_weights_variant(const AttentionPlan& plan, const WebGpuLimits& limits,
                                      ScoreStage stage = ScoreStage::kNone, const WebGpuInputOffsets& offsets = {});

// A piece of the work whose tensors all fit one storage binding: query heads
// [bh0, bh0 + nbh) (flattened b·Hq + h), query rows [row0, row0 + rows) of each of them
// (rows < Lq only when nbh == 1), the key/value heads they read [kv0, kv0 + nkv), and the mask
// elements they read [mask_lo, mask_hi) (element offsets into the broadcast mask buffer).
struct WebGpuChunk {
  int64_t bh0 = 0, nbh = 0, row0 = 0, rows = 0;
  int64_t kv0 = 0, nkv = 0;
  int64_t mask_lo = 0, mask_hi = 0;

  int64_t query_rows() const { return nbh * rows; }
};

// Element offset of (bh, row) in a [B·Hq, Lq, width] tensor: a chunk's query/output/weights rows
// are contiguous from webgpu_row_offset(plan, chunk.bh0, chunk.row0, width).
inline int64_t webgpu_row_offset(const AttentionPlan& p, int64_t bh, int64_t row, int64_t width) {
  return (bh * p.Lq + row) * width;
}

// A KV cache's key/value binding ends at its last head's rows rounded up to this (at most its
// maxLength), so that a decode step binds what the step before bound, and keeps its bind group
// (cpp/webgpu/device.cpp), for 256 tokens at a time; a dense tensor's binding is exactly its data.
constexpr int64_t kWebGpuBoundKeyRows = 256;

// Elements of query, key and value a chunk binds (key/value: from its first head kv0 to its
// last head's row Lk rounded up to kWebGpuBoundKeyRows, within the plan's head strides), and of
// the output it writes.
struct WebGpuChunkElements {
  int64_t query = 0, key = 0, value = 0, output = 0;
};
WebGpuChunkElements webgpu_chunk_elements(const AttentionPlan& plan, const WebGpuChunk& chunk);

// A float16 tensor's binding may start up to this many bytes before its data (at the
// minStorageBufferOffsetAlignment at or below it, at most 256 by the WebGPU spec) and end at
// the 4-byte boundary after it.
constexpr uint64_t kWebGpuFloat16BindingSlack = 256 + 4;

// Bytes the chunk's buffers need, by tensor (the mask in its element size, bool = 1 byte; a
// float16 query/key/value in 2 bytes an element plus kWebGpuFloat16BindingSlack; a quantized
// key/value the cache's whole tensor, which every chunk binds; the log-sum-exp a float per query
// row, with returnLogSumExp).
struct WebGpuChunkBytes {
  uint64_t query = 0, key = 0, value = 0, mask = 0, output = 0, weights = 0, stats = 0, scores = 0, lse = 0;
  uint64_t largest() const;
};
WebGpuChunkBytes webgpu_chunk_bytes(const AttentionPlan& plan, const WebGpuChunk& chunk);

// Cuts the work into chunks that fit min(maxStorageBufferBindingSize, maxBufferSize): as many
// whole heads per chunk as fit, else rows of one head. A RangeError when one head's key or value
// alone exceeds the limit. Empty work (no query rows, or Lk = 0) gives no chunks.
Status plan_webgpu_chunks(const AttentionPlan& plan, const WebGpuLimits& limits,
                          std::vector<WebGpuChunk>* chunks);
// The most query rows one of `chunks` holds (0 for none): each chunk's split records (decode or
// prefill key split) share one binding.
int64_t webgpu_most_chunk_rows(const std::vector<WebGpuChunk>& chunks);

// One dispatch of a grid of x × y workgroups cut to at most `max_per_dim` per dimension;
// x_base/y_base are passed to the shader, which adds them to its workgroup id.
struct GridPart {
  uint32_t x_base = 0, y_base = 0, x = 0, y = 0;
};
std::vector<GridPart> split_grid(uint64_t x, uint64_t y, uint32_t max_per_dim);

// The uniform block every kernel reads (`struct Params` in attention_common.wgsl): 36 u32 words.
using WebGpuUniforms = std::array<uint32_t, 36>;
enum WebGpuUniformField : uint32_t {
  kUfLq, kUfLk, kUfE, kUfEv, kUfHq, kUfHkv, kUfGroup, kUfBh0, kUfNbh, kUfRow0, kUfRows, kUfKv0,
  kUfMaskBase, kUfMaskSb, kUfMaskSh, kUfMaskSq, kUfMaskSk, kUfScaleBits, kUfCausalOffset,
  kUfXBase, kUfYBase, kUfNanBits, kUfSoftcapBits, kUfSoftcapOn, kUfB, kUfNegInfBits,
  kUfKeyStride, kUfValueStride, kUfSplits, kUfSplitKeys, kUfQueryBase, kUfKeyBase, kUfValueBase,
  kUfFieldCount
};
// `mask_base`: the element offset the chunk's mask buffer starts at (bool masks: a multiple of 4).
// The query/key/value bases (elements from a float16 tensor's binding to its data) are 0 here;
// the glue sets them where it binds a float16 tensor from before its data.
WebGpuUniforms webgpu_uniforms(const AttentionPlan& plan, const WebGpuChunk& chunk,
                               int64_t mask_base, const GridPart& part);

// ---- the backward (attention_backward_{prep,dkdv,dq,reduce}.wgsl) ----------------------------
// The invocations of the per-row and per-result passes (prep, reduce).
constexpr uint32_t kWebGpuBackwardInvocations = 64;
// The most query rows (dK/dV) or keys (dQ) a backward workgroup holds in workgroup memory.
constexpr uint32_t kWebGpuBackwardMaxBlock = 64;
// Keys per dK/dV workgroup and query rows per dQ workgroup: webgpu_tile_for_grid from 64 down
// to 16 (and to what maxComputeInvocationsPerWorkgroup allows with the lanes). Each key (row)
// loops over every row (key) it sees, so one head at 4096 would make 64 workgroups of 64 keys
// (under a causal mask the busiest of them do 64 times the work of the idlest).
constexpr uint32_t kWebGpuBackwardMaxTile = 64;
constexpr uint32_t kWebGpuBackwardMinTile = 16;
// Lanes per key (dK/dV) and per query row (dQ), a power of two: each lane owns every LANES-th
// vec4 of the key's dK/dV (the row's dQ) columns, and the lanes' parts of q·k and dO·v are
// summed in one fixed order. The plan takes fewer where a head dim has fewer vec4 columns.
constexpr uint32_t kWebGpuBackwardLanes = 4;

// Splits of a tile pass's loop (dK/dV: each key tile's loop over query rows; dQ: each row tile's
// loop over keys) into `splits` segments of consecutive blocks, one workgroup each, whose partial
// sums a combine pass (attention_backward_reduce.wgsl, stages 2 and 3) adds in segment order.
// Each key (row) runs its loop serially within its workgroup, so at one head of 4096, causal,
// key 0's loop is 4096 rows long however small the tiles: the longest chain bounds the pass.
// The rule (webgpu_backward_splits): the smallest power of two with which the pass's work items
// (keys of dK/dV, rows of dQ, over all heads) times its segments reach kWebGpuBackwardTargetItems,
// the work of kWebGpuTargetWorkgroups workgroups of the largest tile (512 · 64: what a grid the
// tile rule leaves at tiles of 64 already launches; 32 heads of 2048 keep 1 segment, one head
// of 4096 gets 8, 8 heads of 1024 get 4), and at most as many as leave each segment
// kWebGpuBackwardMinSegmentBlocks blocks (each segment's partial costs a write of the tile's
// gradients and the combine's read of it; a few blocks of loop amortise that). The partials
// live in scratch after the pass's outputs, in the same buffer (the layout's 8 storage bindings
// are taken); webgpu_backward_variant halves the splits while that buffer would not fit one
// binding. One segment: no scratch, no combine.
constexpr uint64_t kWebGpuBackwardTargetItems = kWebGpuTargetWorkgroups * kWebGpuBackwardMaxTile;
constexpr uint32_t kWebGpuBackwardMinSegmentBlocks = 4;
// Segments for a pass of `items` keys or rows over all heads whose loop runs over `length` rows
// or keys in blocks of `block`.
uint32_t webgpu_backward_splits(int64_t items, int64_t length, uint32_t block);

// The grid of a tile pass (dK/dV over key tiles, dQ over query-row tiles): x runs over the heads
// (B·Hkv or B·Hq), y over each head's tiles in launch order, each tile's segments consecutive
// (y = rank · splits + segment; GPUs start workgroups in x-fastest order, so every head's tile
// of one rank starts before any tile of the next rank). Under a causal mask the first key tiles
// are seen by the most rows and the last row tiles see the most keys, so rank r is key tile r
// of dK/dV and, with `last_tile_first`, row tile tiles − 1 − r of dQ: the heaviest tiles start
// first and the light ones fill in behind them.
struct BackwardTileGrid {
  uint32_t tile = 0;   // keys or query rows per workgroup
  uint64_t heads = 0;  // x
  uint64_t tiles = 0;  // ⌈length / tile⌉
  bool last_tile_first = false;
  uint32_t splits = 1;   // segments of each tile's loop
  uint32_t segment = 0;  // query rows (dK/dV) or keys (dQ) per segment: whole blocks
  uint64_t y() const { return tiles * splits; }
  uint64_t workgroups() const { return heads * y(); }
};

// The kernels of one backward call: padded head dims, the query block of the dK/dV kernel (Q and
// dO rows) and the key block of the dQ kernel (K and V rows) that fit the workgroup memory, the
// grids of the dK/dV and dQ passes, the lanes per key or row and how they sum their parts
// (subgroupShuffleXor, or workgroup memory), the forward's variant flags, and whether dS is kept
// for the additive mask's gradient.
struct BackwardVariant {
  uint32_t e_pad = 0, ev_pad = 0;
  uint32_t query_block = 0, key_block = 0;
  BackwardTileGrid dkdv, dq;
  uint32_t lanes = 1;
  bool subgroups = false;
  MaskKind mask = MaskKind::kNone;
  bool causal = false;
  bool write_d_scores = false;
  WebGpuVariantFlags variants;
  WebGpuElementTypes types;
  // dOutput (float32, bound from its first element) read as vectors (webgpu_vector_reads).
  bool d_output_vectors = false;
  // The pipeline-cache key of `kernel` ("prep", "dkdv", "dq", "reduce-mask", "reduce-sinks",
  // "reduce-dkdv", "reduce-dq"), e.g.
  // "backward-dq:e64:ev64:bq32:bk32:tk16:tq64:mask=additive:causal=0:ds=1:ranges=0:alibi=0:sinks=0:docs=0:vec4=qkv:dout-vec4:lanes4:subgroups"
  // (tk: keys per dK/dV workgroup, tq: rows per dQ workgroup; the lanes sum by subgroups or wgmem).
  std::string key(const char* kernel) const;
  // Declarations and constants the glue puts before every backward kernel (STAGE for the reduce
  // pass: 0 the mask's gradient, 1 the sinks', 2 and 3 the combine of dK/dV's and dQ's segments):
  // the element types', then dOutput's element type
  // DOutputElement and loaders d_output_at(i) -> f32 and d_output4(base, c, n) -> vec4<f32>
  // (columns c … c + 3 of the row at `base`, zeros past n), as the element types' loaders.
  std::string wgsl_constants(uint32_t stage = 0) const;
};
// A RangeError when one key of E + Ev floats does not fit the workgroup memory. The tiles follow
// kWebGpuTargetWorkgroups' rule; the workgroup memory holds the blocks (and, without subgroups,
// a word pair per invocation for the lanes' sums), whatever the tile. The segments follow
// webgpu_backward_splits, fewer where a gradient buffer with its scratch would exceed
// min(maxStorageBufferBindingSize, maxBufferSize).
Status webgpu_backward_variant(const AttentionPlan& plan, const WebGpuLimits& limits, bool d_mask,
                               BackwardVariant* variant, const WebGpuInputOffsets& offsets = {});

// Floats per query row at the start of the backward's per-row buffer: the log-sum-exp, D = dO·O,
// the sink term and r (kBackwardRenormalizeFrom, core/problem.h), one region of B·Hq·Lq each.
constexpr uint64_t kWebGpuBackwardRowRegions = 4;

// Bytes of the backward's own buffers (a float each): the per-row buffer (its row regions, then
// the mask's and the sinks' gradients), dQ (then dS, with the mask's gradient), and
// dK then dV, each gradient buffer followed by its pass's scratch when it has segments:
// - dK/dV (F = B·Hkv·Lk·(E + Ev) floats), then dkdv.splits slots of F: segment s's partial dK
//   (not yet scaled) and dV at the outputs' offsets;
// - dQ [R·E] (and dS [R·Lk]), then dq.splits slots of R·E (segment s's partial dQ, not yet
//   scaled), then with sinks dq.splits slots of R: 1 where the row saw a key in segment s.
// The call runs in one piece: each of these, and each input, must fit one binding.
struct WebGpuBackwardBytes {
  uint64_t rowstats = 0, grad_query = 0, grad_key_value = 0;
};
WebGpuBackwardBytes webgpu_backward_bytes(const AttentionPlan& plan, const BackwardVariant& variant);
// The whole call as one chunk (every head and row, the whole mask).
WebGpuChunk webgpu_whole_chunk(const AttentionPlan& plan);
// A RangeError naming the largest buffer when the call does not fit one binding per tensor.
Status check_webgpu_backward_fits(const AttentionPlan& plan, const WebGpuLimits& limits, const BackwardVariant& variant);

}  // namespace sdpa
