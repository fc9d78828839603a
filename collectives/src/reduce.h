#pragma once
#include <cstddef>
#include <span>

#include "tnt/collectives/types.h"

namespace tnt::detail {

// accumulator[i] = op(accumulator[i], input[i]) for i < count. Not for bfloat16, which tnt
// reduces in float32 (see widen/narrow).
using ReduceFn = void (*)(void* accumulator, const void* input, std::size_t count);
ReduceFn reducer_for(DataType type, ReduceOp op);

// The element type the ring reduces in for `type`: bfloat16 in float32 (each addition in float32;
// partial sums travel as bfloat16, Note [bf16 on the ring] in ring.cpp); every other type as
// itself.
DataType accumulation_type(DataType type);

void widen(const bfloat16* in, float* out, std::size_t count);
void narrow(const float* in, bfloat16* out, std::size_t count);

// For ReduceOp::avg: divides the summed values by `ranks` in place.
void divide(void* data, std::size_t count, DataType type, int ranks);

// out = inputs[0] op inputs[1] op ... in this order, each input `count` elements of `type`
// (avg divides by inputs.size()): every rank that reduces the same inputs this way gets bitwise
// the same result. `out` may be inputs[0], and no other input.
void reduce_in_order(std::span<const std::byte* const> inputs, void* out, std::size_t count, DataType type,
                     ReduceOp op);

}  // namespace tnt::detail
