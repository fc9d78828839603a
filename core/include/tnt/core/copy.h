#pragma once
#include <cstddef>

namespace tnt {

// memcpy for the data plane: as fast as memcpy wherever the two buffers lie, where glibc's memcpy
// is 20x slower for some relative placements on some processors (Note [Copies at any distance]
// in core/src/copy.cpp). The buffers must not overlap.
void copy_bytes(void* to, const void* from, std::size_t bytes);

}  // namespace tnt
