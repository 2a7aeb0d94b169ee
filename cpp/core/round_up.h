// round_up: the one rounding of a count or a size up to a multiple, for every layer.
#pragma once

namespace sdpa {

// The least multiple of `multiple` (> 0) that is >= x (x >= 0), in x's integer type.
template <typename Int, typename Multiple>
constexpr Int round_up(Int x, Multiple multiple) {
  const Int m = static_cast<Int>(multiple);
  return (x + m - 1) / m * m;
}

}  // namespace sdpa
