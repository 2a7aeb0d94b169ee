// The project's one pseudo-random generator, used for Xavier/Glorot initialisation and dropout so
// that a seed gives the same numbers on every platform (only 32-bit integer arithmetic, then
// exact conversions).
//
// mulberry32 (Tommy Ettinger, public domain): a 32-bit state advanced by the Weyl increment
// 0x6D2B79F5 and an output mix
//   state += 0x6D2B79F5;  t = state;
//   t = (t ^ t >> 15) * (t | 1);  t ^= t + (t ^ t >> 7) * (t | 61);  return t ^ t >> 14;
// (all mod 2^32). Because the state is a counter, draw n (0-based) of the stream seeded with s is
// mix(s + (n + 1)·0x6D2B79F5): draws can be taken in any order. A uniform number in [0, 1) is
// draw / 2^32 (exact in float64).
#pragma once

#include <cstdint>
#include <vector>

#include "core/problem.h"

namespace sdpa {

// Draw n (0-based) of the mulberry32 stream seeded with `seed`.
inline uint32_t mulberry32_at(uint32_t seed, uint64_t n) {
  uint32_t t = seed + static_cast<uint32_t>(n + 1) * 0x6D2B79F5u;
  t = (t ^ (t >> 15)) * (t | 1u);
  t ^= t + (t ^ (t >> 7)) * (t | 61u);
  return t ^ (t >> 14);
}

// Draw n as a uniform number in [0, 1).
inline double uniform_at(uint32_t seed, uint64_t n) { return mulberry32_at(seed, n) * 0x1p-32; }

// Checks that a seed (a JS number) is an integer in [0, 2^32).
Status check_seed(double seed, const char* name);

// Xavier/Glorot uniform: out[i] = (2·u_i − 1)·a, a = √(6 / (fan_in + fan_out)), u_i the draw
// `offset + i` of the stream `seed`, for i < fan_in·fan_out (row-major [fan_in, fan_out], the
// X·W layout; the bound is symmetric in the two fans, so a transposed [fan_out, fan_in] matrix
// gets the same distribution).
Status plan_xavier(double fan_in, double fan_out, double seed);
void xavier_uniform(int64_t fan_in, int64_t fan_out, uint32_t seed, uint64_t offset, float* out);

// Uniform U(low, high): out[i] = low + u_i·(high − low), u_i the draw `offset + i` of the stream
// `seed`, computed in double and rounded once to float.
Status plan_uniform(double n, double low, double high, double seed);
void uniform_fill(int64_t n, double low, double high, uint32_t seed, uint64_t offset, float* out);

// Inverted dropout: element i is kept when u_i ≥ p (u_i = draw i of the stream `seed`), and kept
// elements are scaled by 1/(1 − p); p = 1 drops everything. `out` may alias `x`.
Status plan_dropout(double p, double seed);
void dropout(const float* x, int64_t n, double p, uint32_t seed, float* out);

}  // namespace sdpa
