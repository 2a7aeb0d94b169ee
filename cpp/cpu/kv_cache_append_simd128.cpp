// KvCache.append on an int8/int4 cache: each row's blocks quantized as store_quantized_row
// (core/kv_cache_format.h) quantizes them, bit for bit, for the cost of a copy.
//
// Algorithm: a whole block of 32 goes through simd::quantize_whole_block (the format's max,
// division, product and nearest-even rounding in every lane), and its levels go to the tile-block
// a word at a time: key k's word w is word 4·w + k, int8 four levels a word, int4 eight (levels
// 8w…8w+3 in the low nibbles of its bytes, 8w+4…8w+7 in the high ones, each as level + 8). A
// row's last block, when dim is not a multiple of 32, is the core's scalar quantize_block's.
// Chosen for every append to a quantized cache in the wasm heap: the bytes are the format's, so
// every backend reads the same cache. store_quantized_row, element by element with a division
// each, took 13 µs (int8) and 26 µs (int4) to append one token of 8 heads of 128 (keys and values).
#include "cpu/kv_cache_append_simd128.h"

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

}  // namespace

void store_quantized_rows_simd128(const QuantizedLayout& layout, uint8_t* tensor, int64_t head, int64_t first_row,
                                  const float* rows, int64_t count) {
  auto* scales = reinterpret_cast<float*>(tensor + layout.scale_offset);
  const int64_t whole_blocks = layout.dim / kQuantBlock;
  for (int64_t t = 0; t < count; ++t) {
    const int64_t j = first_row + t;
    const float* x = rows + t * layout.dim;
    for (int64_t c = 0; c < whole_blocks; ++c) {
      int8_t levels[kQuantBlock];
      const float scale = simd::quantize_whole_block(layout.kind, x + c * kQuantBlock, levels);
      std::memcpy(scales + layout.scale_index(head, j, c), &scale, sizeof scale);
      store_block_words(layout.kind, levels, j % kQuantTileKeys, tensor + layout.level_offset(head, j, c));
    }
    if (whole_blocks < layout.blocks) {
      int8_t levels[kQuantBlock];
      const int n = static_cast<int>(layout.dim - whole_blocks * kQuantBlock);
      const float scale = quantize_block(layout.kind, x + whole_blocks * kQuantBlock, n, levels);
      std::memcpy(scales + layout.scale_index(head, j, whole_blocks), &scale, sizeof scale);
      store_block_words(layout.kind, levels, j % kQuantTileKeys, tensor + layout.level_offset(head, j, whole_blocks));
    }
  }
}

}  // namespace sdpa
