#pragma once
// Process-wide compute settings.
//
// Note [Determinism]: oneDNN's CPU runtime here is OpenMP. For a fixed thread
// count, the same inputs and the same weights give bitwise the same outputs
// and gradients run after run: oneDNN 2.6's CPU primitives split work
// statically by thread count and reduce in a fixed order, and every
// non-oneDNN kernel in compute/ (losses, optimizers, Dropout masks, max
// pooling) is sequential or splits statically. Changing the thread count
// may change the last bits of results (different reduction trees). Keep
// OMP_DYNAMIC off (set_num_threads does so).
#include <string>

namespace tnt::compute {

// Sets the number of threads oneDNN and compute/'s own kernels use
// (omp_set_num_threads). Call before the first forward pass of a model.
void set_num_threads(int threads);
int num_threads();

// "oneDNN 2.6.3 (cpu runtime: OpenMP), ISA: ..." for logs and benchmark tables.
std::string runtime_description();

}  // namespace tnt::compute
