// The call record: how one attention call's tensors reach the core and its results come back,
// without a JavaScript object to read field by field. It is a static block of float64 slots in
// the wasm heap; the TypeScript layer (web/src/core-call.ts) writes each tensor's heap address,
// element type and shape into it, makes the call, and reads the result slots the core wrote.
// Slot names and offsets reach TypeScript from callRecordLayout() (sdpa_bindings.cpp), made from
// the lists below, so the layout is written down here only. Used from the main thread only.
#pragma once

#include <cstdint>

namespace sdpa {

// The tensors a call may carry, in slot order.
#define SDPA_CALL_TENSORS(X) \
  X(query)                   \
  X(key)                     \
  X(value)                   \
  X(attnMask)                \
  X(queryDocuments)          \
  X(keyDocuments)            \
  X(dOutput)                 \
  X(output)                  \
  X(logSumExp)

// A tensor's element type in its slot (0: the tensor is absent).
// kInt8/kInt4: the keys or values of a quantized KV cache, the whole tensor (levels then scales,
// core/kv_cache_format.h) at the address, its maxLength given by the head strides.
enum class SlotType { kAbsent = 0, kFloat32 = 1, kFloat16 = 2, kUint8 = 3, kInt32 = 4, kInt8 = 5, kInt4 = 6 };

constexpr int kMaxSlotRank = 8;

struct TensorSlot {
  double address;  // heap byte address (0 for an empty tensor, or one that lives elsewhere)
  double type;     // SlotType
  double rank;     // dims used; a rank above kMaxSlotRank is reported, not read
  double dims[kMaxSlotRank];
};

// The results a call returns, in the block the core allocated for them (`results`): the
// TypeScript layer copies them out and frees the block (`_free`).
#define SDPA_CALL_RESULTS(X) \
  X(output)                  \
  X(weights)                 \
  X(logSumExp)               \
  X(scores)                  \
  X(dQuery)                  \
  X(dKey)                    \
  X(dValue)                  \
  X(dMask)                   \
  X(dSinks)                  \
  X(scaledScores)            \
  X(maskedScores)            \
  X(trace)                   \
  X(visited)

struct CallRecord {
  // In: set by the TypeScript layer before each call.
  double threads;            // threads asked for (<= 0: all the module may use)
  double key_head_stride;    // a KV cache's maxLength·E and maxLength·Ev (0: dense)
  double value_head_stride;
  double key_value_finite;   // 1: float16 keys and values known to hold no Inf/NaN
  double input_arrival;      // an InputArrivalRecord's address: the inputs arrive while the
                             // kernel runs (core/input_arrival.h), else 0
#define SDPA_TENSOR_SLOT(name) TensorSlot name;
  SDPA_CALL_TENSORS(SDPA_TENSOR_SLOT)
#undef SDPA_TENSOR_SLOT
  // Out: set by the core.
  double results;            // the block holding the results below (0: none)
#define SDPA_RESULT_SLOT(name) double name##_result;
  SDPA_CALL_RESULTS(SDPA_RESULT_SLOT)
#undef SDPA_RESULT_SLOT
  double output_rank;        // the output's shape [..., Lq, Ev]
  double output_dims[4];
  double weights_rank;       // the weights' and scores' shape [..., Lq, Lk]
  double weights_dims[4];
  double output_float16;     // 1: the output is to be rounded to float16 (outputDtype)
  double steps;              // a trace's steps written
  double trace_tile_keys;    // the traced kernel's keys per tile and query rows per block
  double trace_block_rows;
};

}  // namespace sdpa
