// Query, key and value rows that arrive while a kernel runs: the calling thread copies them into
// place (from arrays outside the wasm heap, which no helper thread can read) while the helper
// threads start on the rows already there, so the serial copy overlaps the kernel.
//
// Order of arrival: per key/value head group G = b·Hkv + g in turn (the key and value rows of
// head g and the query rows of its query heads g·group … (g+1)·group − 1), the rows in `chunks`
// chunks from the last to the first. Chunk k of a length L holds rows
// [ceil(L·k/chunks), ceil(L·(k+1)/chunks)), so row r lies in chunk r·chunks/L (integer
// division). Once chunk k of group G (its key, value and query rows) is in place, the copier
// stores G·chunks + (chunks − k) into `arrived` with release order (or a later count, when it
// publishes several pieces at once): `arrived` counts the (group, chunk) pieces in place, and
// every row of a piece counted is readable.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>

namespace sdpa {

// The shared record: written by the copier, read by the kernel's threads.
struct InputArrivalRecord {
  std::atomic<int32_t> arrived;
  int32_t chunks;  // >= 1
};

struct InputArrival {
  InputArrivalRecord* record = nullptr;  // null: every input is in place before the call

  bool streamed() const { return record != nullptr; }

  // Returns once query rows [query_row, Lq) and key/value rows [key_row, Lk) of group `group`
  // are in place (a row at or past its length asks for none of that tensor).
  void wait_for_rows(int64_t group, int64_t query_row, int64_t Lq, int64_t key_row, int64_t Lk) const {
    if (record == nullptr) return;
    const int64_t chunks = record->chunks;
    const int64_t first_chunk = std::min(chunk_of(query_row, Lq, chunks), chunk_of(key_row, Lk, chunks));
    const int64_t needed = group * chunks + (chunks - first_chunk);
    while (record->arrived.load(std::memory_order_acquire) < needed) std::this_thread::yield();
  }

 private:
  // The chunk holding row r of a length L; `chunks` (no chunk) for a row past the end.
  static int64_t chunk_of(int64_t r, int64_t L, int64_t chunks) {
    if (r >= L) return chunks;
    return r <= 0 ? 0 : r * chunks / L;
  }
};

static_assert(sizeof(std::atomic<int32_t>) == sizeof(int32_t), "the record is two int32 words");

}  // namespace sdpa
