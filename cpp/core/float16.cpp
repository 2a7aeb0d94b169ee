#include "core/float16.h"

namespace sdpa {

void widen_float16(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = float16_to_float32(src[i]);
}

bool float16_any_nonfinite(const uint16_t* src, int64_t n) {
  uint32_t any = 0;
  for (int64_t i = 0; i < n; ++i) any |= (src[i] & 0x7C00u) == 0x7C00u;
  return any != 0;
}

}  // namespace sdpa
