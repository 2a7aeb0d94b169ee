// The int8 and int4 KV-cache formats: how a quantized key or value tensor [B, Hkv, maxLength, D]
// (D = E for keys, Ev for values) is laid out in bytes, and the scalar quantizer and dequantizer
// that define its values. The CPU kernels and the WebGPU kernels read these same bytes;
// docs/kv-cache-formats.md describes the format with its reasons.
//
// Values are quantized in blocks of kQuantBlock = 32 consecutive elements along D, each with its
// own float32 scale, symmetrically (no zero point): scale = max|x| / L (the next float toward 0
// when scale · L would round above max|x|, so that no value reads beyond the block's largest, nor
// overflows) and level = x / max|x| · L rounded to the nearest integer, ties to even, where
// L = 127 (int8) or 7 (int4); a value is level · scale (float32). The last block of a row whose D is not a multiple of 32 is padded with zeros.
// A block holding a NaN or ±Inf stores the scale NaN and levels 0: every element of it reads NaN.
//
// Byte layout of one tensor: the levels of every head, then the scales of every head.
//   Keys are grouped in tiles of kQuantTileKeys = 4 consecutive keys (a head holds
//   round_up(maxLength, 4) rows); a tile's levels are stored block by block, and within a block in
//   4-byte words, the words of the tile's 4 keys interleaved: word w of key k is word 4·w + k.
//   int8: word w holds elements 4w..4w+3 of the block (byte i: element 4w + i, two's complement);
//         a tile-block is 8 words × 4 keys = 128 bytes.
//   int4: word w holds elements 8w..8w+7: byte i's low nibble is element 8w + i, its high nibble
//         element 8w + 4 + i, each stored as level + 8 (1…15); a tile-block is 64 bytes.
//   So one 16-byte load holds 4 keys × 4 consecutive elements (int4: the low nibbles of a load
//   are 4 keys × elements 8w..8w+3, the high nibbles 4 keys × 8w+4..8w+7), and an integer dot
//   product of a load with a query word splat over its lanes leaves each key's partial dot in its
//   own lane: no horizontal sums.
//   Scales: float32, after all levels (byte offset QuantizedLayout::scale_offset); those of a
//   tile-block are 4 consecutive floats, one per key, in the tiles' and blocks' order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace sdpa {

enum class KvQuant { kInt8, kInt4 };

constexpr int kQuantBlock = 32;  // elements per scale along D
constexpr int kQuantTileKeys = 4;     // keys interleaved in a tile

// The largest level: int8 ±127 (−128 is never stored), int4 ±7.
constexpr int quant_max_level(KvQuant kind) { return kind == KvQuant::kInt8 ? 127 : 7; }
// Bytes of one key's block of 32 levels.
constexpr int64_t quant_block_bytes(KvQuant kind) { return kind == KvQuant::kInt8 ? 32 : 16; }

// Where the levels and scales of a quantized tensor of `heads` (B·Hkv) heads × max_length rows × dim
// elements live, in bytes from the tensor's start.
struct QuantizedLayout {
  KvQuant kind = KvQuant::kInt8;
  int64_t heads = 0, max_length = 0, dim = 0;
  int64_t rows = 0;          // rows per head: max_length rounded up to whole tiles
  int64_t blocks = 0;        // blocks per row: ceil(dim / 32)
  int64_t scale_offset = 0;  // bytes of levels = where the scales start
  int64_t total_bytes = 0;   // levels and scales

  // The tile-block of key j of head `head`, block c: its index among all tile-blocks, which is
  // also where its 4 scales start (in floats from scale_offset, the key's at + j % 4).
  int64_t tile_block(int64_t head, int64_t j, int64_t c) const {
    return (head * (rows / kQuantTileKeys) + j / kQuantTileKeys) * blocks + c;
  }
  // Byte offset of a tile-block's levels.
  int64_t tile_block_bytes() const { return kQuantTileKeys * quant_block_bytes(kind); }
  int64_t level_offset(int64_t head, int64_t j, int64_t c) const { return tile_block(head, j, c) * tile_block_bytes(); }
  int64_t scale_index(int64_t head, int64_t j, int64_t c) const { return tile_block(head, j, c) * kQuantTileKeys + j % kQuantTileKeys; }
  // Bytes of levels, and scales, from one head to the next.
  int64_t head_level_bytes() const { return rows * blocks * quant_block_bytes(kind); }
  int64_t head_scales() const { return rows * blocks; }
};

inline QuantizedLayout quantized_layout(KvQuant kind, int64_t heads, int64_t max_length, int64_t dim) {
  QuantizedLayout q;
  q.kind = kind;
  q.heads = heads;
  q.max_length = max_length;
  q.dim = dim;
  q.rows = (max_length + kQuantTileKeys - 1) / kQuantTileKeys * kQuantTileKeys;
  q.blocks = (dim + kQuantBlock - 1) / kQuantBlock;
  const int64_t tile_blocks = heads * (q.rows / kQuantTileKeys) * q.blocks;
  q.scale_offset = tile_blocks * q.tile_block_bytes();
  q.total_bytes = q.scale_offset + tile_blocks * kQuantTileKeys * static_cast<int64_t>(sizeof(float));
  return q;
}

// The scale of a block whose largest magnitude is amax (finite, > 0) at largest level L: amax / L,
// or the next float toward 0 where scale · L would round above amax.
inline float quantized_scale(float amax, float L) {
  const float scale = amax / L;
  return scale * L > amax ? std::nextafter(scale, 0.0f) : scale;
}

// Quantizes x[0, n) (n ≤ 32; the block's other elements are zeros) into levels[0, 32) and returns
// its scale: max|x| / L (one float below where L times it rounds above max|x|), NaN when x holds a
// NaN or ±Inf (levels then all 0), 0 for an all-zero block. Each level is x / max|x| · L (float32 operations) rounded to nearest, ties to even, so
// the block's largest magnitude gets ±L exactly.
inline float quantize_block(KvQuant kind, const float* x, int n, int8_t* levels) {
  const float L = static_cast<float>(quant_max_level(kind));
  float amax = 0.0f;
  bool finite = true;
  for (int i = 0; i < n; ++i) {
    finite &= std::isfinite(x[i]);
    amax = std::fmax(amax, std::fabs(x[i]));
  }
  for (int i = 0; i < kQuantBlock; ++i) levels[i] = 0;
  if (!finite) return std::numeric_limits<float>::quiet_NaN();
  if (amax == 0.0f) return 0.0f;
  for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(std::nearbyint(x[i] / amax * L));
  return quantized_scale(amax, L);
}

// The value of a level (as float32 arithmetic gives it; the float64 reference multiplies exactly).
inline float dequantize_level(int level, float scale) { return static_cast<float>(level) * scale; }

// A query row of a call on a quantized cache as the scores see it: x[0, n) quantized to int8 in
// blocks of 32 (quantize_block) and read back, level · scale (T = float: float32 products; double:
// exact).
template <typename T>
void round_query_row(const float* x, int64_t n, T* out) {
  for (int64_t c = 0; c < n; c += kQuantBlock) {
    int8_t levels[kQuantBlock];
    const int count = static_cast<int>(std::min<int64_t>(kQuantBlock, n - c));
    const T scale = static_cast<T>(quantize_block(KvQuant::kInt8, x + c, count, levels));
    for (int i = 0; i < count; ++i) out[c + i] = static_cast<T>(levels[i]) * scale;
  }
}

// The byte and nibble of element i (0…31) of key k (0…3) in its tile-block: byte offset, and for
// int4 whether it is the high nibble.
struct LevelPosition {
  int64_t byte;
  bool high;
};
inline LevelPosition level_position(KvQuant kind, int64_t k, int i) {
  if (kind == KvQuant::kInt8) return {(i / 4 * kQuantTileKeys + k) * 4 + i % 4, false};
  return {(i / 8 * kQuantTileKeys + k) * 4 + i % 4, (i / 4) % 2 == 1};
}

// Quantizes row `x` (dim floats) into key j of head `head` of a tensor laid out as `layout`.
inline void store_quantized_row(const QuantizedLayout& layout, uint8_t* tensor, int64_t head, int64_t j, const float* x) {
  float* scales = reinterpret_cast<float*>(tensor + layout.scale_offset);
  const int64_t k = j % kQuantTileKeys;
  for (int64_t c = 0; c < layout.blocks; ++c) {
    int8_t levels[kQuantBlock];
    const int n = static_cast<int>(std::min<int64_t>(kQuantBlock, layout.dim - c * kQuantBlock));
    const float scale = quantize_block(layout.kind, x + c * kQuantBlock, n, levels);
    std::memcpy(scales + layout.scale_index(head, j, c), &scale, sizeof scale);
    uint8_t* block = tensor + layout.level_offset(head, j, c);
    for (int i = 0; i < kQuantBlock; ++i) {
      const LevelPosition at = level_position(layout.kind, k, i);
      if (layout.kind == KvQuant::kInt8) {
        block[at.byte] = static_cast<uint8_t>(levels[i]);
      } else {
        const uint8_t nibble = static_cast<uint8_t>(levels[i] + 8);
        block[at.byte] = at.high ? static_cast<uint8_t>((block[at.byte] & 0x0F) | (nibble << 4))
                                 : static_cast<uint8_t>((block[at.byte] & 0xF0) | nibble);
      }
    }
  }
}

// The level of element e of key j of head `head`.
inline int quantized_level(const QuantizedLayout& layout, const uint8_t* tensor, int64_t head, int64_t j, int64_t e) {
  const LevelPosition at = level_position(layout.kind, j % kQuantTileKeys, static_cast<int>(e % kQuantBlock));
  const uint8_t byte = tensor[layout.level_offset(head, j, e / kQuantBlock) + at.byte];
  if (layout.kind == KvQuant::kInt8) return static_cast<int8_t>(byte);
  return (at.high ? byte >> 4 : byte & 0x0F) - 8;
}

inline float quantized_scale(const QuantizedLayout& layout, const uint8_t* tensor, int64_t head, int64_t j, int64_t c) {
  float scale;
  std::memcpy(&scale, tensor + layout.scale_offset + layout.scale_index(head, j, c) * static_cast<int64_t>(sizeof(float)), sizeof scale);
  return scale;
}

// Key j of head `head` dequantized into x[0, dim) (T = float: level · scale in float32; double:
// exact).
template <typename T>
void load_quantized_row(const QuantizedLayout& layout, const uint8_t* tensor, int64_t head, int64_t j, T* x) {
  for (int64_t e = 0; e < layout.dim; ++e) {
    const T scale = static_cast<T>(quantized_scale(layout, tensor, head, j, e / kQuantBlock));
    x[e] = static_cast<T>(quantized_level(layout, tensor, head, j, e)) * scale;
  }
}

}  // namespace sdpa
