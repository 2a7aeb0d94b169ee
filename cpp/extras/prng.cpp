#include "extras/prng.h"

#include <cmath>
#include <string>

namespace sdpa {

Status check_seed(double seed, const char* name) {
  if (!(seed >= 0 && seed <= 4294967295.0 && std::floor(seed) == seed)) {
    return Status::RangeError(std::string(name) + " must be an integer in [0, 2^32); got " +
                              std::to_string(seed));
  }
  return Status::Ok();
}

Status plan_xavier(double fan_in, double fan_out, double seed) {
  for (auto [name, fan] : {std::pair<const char*, double>{"fanIn", fan_in}, {"fanOut", fan_out}}) {
    if (!(fan >= 1 && fan <= static_cast<double>(kMaxTensorElements) && std::floor(fan) == fan)) {
      return Status::RangeError(std::string(name) + " must be an integer >= 1; got " +
                                std::to_string(fan));
    }
  }
  if (fan_in * fan_out > static_cast<double>(kMaxTensorElements)) {
    return Status::RangeError("a [fanIn, fanOut] matrix of " + std::to_string(fan_in * fan_out) +
                              " elements has more than 2^30 elements");
  }
  return check_seed(seed, "seed");
}

void xavier_uniform(int64_t fan_in, int64_t fan_out, uint32_t seed, uint64_t offset, float* out) {
  const double a = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  const int64_t n = fan_in * fan_out;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>((2.0 * uniform_at(seed, offset + static_cast<uint64_t>(i)) - 1.0) * a);
  }
}

Status plan_uniform(double n, double low, double high, double seed) {
  if (!(n >= 0 && n <= static_cast<double>(kMaxTensorElements) && std::floor(n) == n)) {
    return Status::RangeError("a uniform tensor must have an integer count of elements in [0, 2^30]; got " +
                              std::to_string(n));
  }
  if (!(std::isfinite(low) && std::isfinite(high) && low <= high)) {
    return Status::RangeError("low and high must be finite with low <= high; got " + std::to_string(low) +
                              " and " + std::to_string(high));
  }
  return check_seed(seed, "seed");
}

void uniform_fill(int64_t n, double low, double high, uint32_t seed, uint64_t offset, float* out) {
  const double width = high - low;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>(low + uniform_at(seed, offset + static_cast<uint64_t>(i)) * width);
  }
}

Status plan_dropout(double p, double seed) {
  if (!(p >= 0 && p <= 1)) {
    return Status::RangeError("dropout probability p must be a number in [0, 1]; got " + std::to_string(p));
  }
  return check_seed(seed, "seed");
}

void dropout(const float* x, int64_t n, double p, uint32_t seed, float* out) {
  const float keep_scale = p < 1 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = uniform_at(seed, static_cast<uint64_t>(i)) >= p ? x[i] * keep_scale : 0.0f;
  }
}

}  // namespace sdpa
