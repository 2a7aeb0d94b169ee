// Whole rows of an int8/int4 KV cache, four lanes at a time, bit for bit as the core's scalar
// store_quantized_row and load_quantized_row<float> (core/kv_cache_format.h) write and read them.
//
// Writing (KvCache.append): a whole block of 32 goes through simd::quantize_whole_block (the
// format's max, division, product and nearest-even rounding in every lane), and its levels go to
// the tile-block a word at a time: key k's word w is word 4·w + k, int8 four levels a word, int4
// eight (levels 8w…8w+3 in the low nibbles of its bytes, 8w+4…8w+7 in the high ones, each as
// level + 8). store_quantized_row, element by element with a division each, took 13 µs (int8) and
// 26 µs (int4) to append one token of 8 heads of 128 (keys and values).
// Reading (the dequantized copy that the scalar backend and the tile kernel take): per 16-byte load
// of a tile-block (4 keys × 4 elements; int4 unpacked as level·16), the key's 4 bytes go to the
// tops of int32 lanes and convert exactly (level·2^24, or level·2^28), a multiply by the power of
// two back gives the level, and one by the block's scale its float32 value.
// A row's last block, when dim is not a multiple of 32, takes the scalar code (quantize_block,
// and on reading the core's per-element level). Chosen for every quantized cache in the wasm
// heap: the bytes are the format's, so every backend reads the same.
#include "cpu/quantized_rows_simd128.h"

#include <algorithm>
#include <cstring>

#include "cpu/simd128_int.h"

namespace sdpa {
namespace {

// Levels of one block (32, as quantize_block leaves them) into key k's words of a tile-block.
void store_block_words(KvQuant kind, const int8_t* levels, int64_t k, uint8_t* tile_block) {
  if (kind == KvQuant::kInt8) {
    for (int w = 0; w < kQuantBlock / 4; ++w) std::memcpy(tile_block + (w * kQuantTileKeys + k) * 4, levels + 4 * w, 4);
    return;
  }
  for (int w = 0; w < kQuantBlock / 8; ++w) {
    uint8_t word[4];
    for (int i = 0; i < 4; ++i) {
      word[i] = static_cast<uint8_t>((levels[8 * w + i] + 8) | ((levels[8 * w + 4 + i] + 8) << 4));
    }
    std::memcpy(tile_block + (w * kQuantTileKeys + k) * 4, word, 4);
  }
}

// Key k (0…3) of a tile-block, whole block: 32 floats level · scale into x.
template <KvQuant kKind, int K>
void load_block(const uint8_t* tile_block, float scale, float* x) {
  using namespace simd;
  const f32x4 scale4 = splat(scale);
  if constexpr (kKind == KvQuant::kInt8) {
    const f32x4 unit = splat(0x1p-24f);
    for (int w = 0; w < kQuantBlock / 4; ++w) {
      store(x + 4 * w, mul(mul(lane_bytes_to_float_2p24<K>(load_i8x16(tile_block + 16 * w)), unit), scale4));
    }
  } else {
    const f32x4 unit = splat(0x1p-28f);
    for (int w = 0; w < kQuantBlock / 8; ++w) {
      i8x16 low, high;
      int4_levels_times_16(load_i8x16(tile_block + 16 * w), &low, &high);
      store(x + 8 * w, mul(mul(lane_bytes_to_float_2p24<K>(low), unit), scale4));
      store(x + 8 * w + 4, mul(mul(lane_bytes_to_float_2p24<K>(high), unit), scale4));
    }
  }
}

template <KvQuant kKind>
void load_rows(const QuantizedLayout& layout, const uint8_t* tensor, int64_t head, int64_t first_row, int64_t count,
               float* rows) {
  const int64_t whole_blocks = layout.dim / kQuantBlock;
  for (int64_t t = 0; t < count; ++t) {
    const int64_t j = first_row + t;
    float* x = rows + t * layout.dim;
    for (int64_t c = 0; c < whole_blocks; ++c) {
      const uint8_t* tile_block = tensor + layout.level_offset(head, j, c);
      const float scale = quantized_scale(layout, tensor, head, j, c);
      switch (j % kQuantTileKeys) {
        case 0: load_block<kKind, 0>(tile_block, scale, x + c * kQuantBlock); break;
        case 1: load_block<kKind, 1>(tile_block, scale, x + c * kQuantBlock); break;
        case 2: load_block<kKind, 2>(tile_block, scale, x + c * kQuantBlock); break;
        default: load_block<kKind, 3>(tile_block, scale, x + c * kQuantBlock);
      }
    }
    for (int64_t e = whole_blocks * kQuantBlock; e < layout.dim; ++e) {
      x[e] = static_cast<float>(quantized_level(layout, tensor, head, j, e)) * quantized_scale(layout, tensor, head, j, e / kQuantBlock);
    }
  }
}

}  // namespace

void store_quantized_rows_simd128(const QuantizedLayout& layout, uint8_t* tensor, int64_t head, int64_t first_row,
                                  const float* rows, int64_t count) {
  auto* scales = reinterpret_cast<float*>(tensor + layout.scale_offset);
  for (int64_t t = 0; t < count; ++t) {
    const int64_t j = first_row + t;
    const float* x = rows + t * layout.dim;
    for (int64_t c = 0; c < layout.blocks; ++c) {
      int8_t levels[kQuantBlock];
      const int n = static_cast<int>(std::min<int64_t>(kQuantBlock, layout.dim - c * kQuantBlock));
      const float scale = simd::quantize_block_lanes(layout.kind, x + c * kQuantBlock, n, levels);
      std::memcpy(scales + layout.scale_index(head, j, c), &scale, sizeof scale);
      store_block_words(layout.kind, levels, j % kQuantTileKeys, tensor + layout.level_offset(head, j, c));
    }
  }
}

void load_quantized_rows_simd128(const QuantizedLayout& layout, const uint8_t* tensor, int64_t head, int64_t first_row,
                                 int64_t count, float* rows) {
  if (layout.kind == KvQuant::kInt8) load_rows<KvQuant::kInt8>(layout, tensor, head, first_row, count, rows);
  else load_rows<KvQuant::kInt4>(layout, tensor, head, first_row, count, rows);
}

}  // namespace sdpa
