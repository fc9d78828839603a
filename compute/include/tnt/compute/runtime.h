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
//
// Note [Mixed precision]: Precision::bf16 runs the arithmetic-heavy layers
// (convolutions, Dense and the sequence models' position-wise Dense) on
// oneDNN's bf16 kernels: each such layer rounds its input, its weights and
// its output gradient to bf16 at its own boundary, and its outputs, input
// gradients and weight gradients come out in fp32, accumulated in fp32 by
// the kernels; except where a convolution feeds a BatchNorm that feeds
// another convolution, or a residual block's sum feeds the next block's
// convolutions, which pass bf16 between them (BatchNorm and the sum working
// in bf16 with fp32 arithmetic inside; Note [bf16 between layers] in
// src/layers_basic.cpp). Everything else stays fp32: the weights themselves
// (the master copy the optimizer updates, so updates smaller than a bf16 step
// are not lost), optimizer state, BatchNorm statistics, the other
// BatchNorms, LayerNorm, activations, pooling, the loss, gradients in the
// buckets and checkpoints (which are interchangeable between precisions). The
// memory-bound layers gain little from bf16 and the conversions at the
// heavy layers' boundaries cost a read and a write of their inputs; what
// bf16 pays is the dot products, which run at twice the fp32 rate on
// AVX512-BF16 cores. bf16 is refused where oneDNN has no native bf16 ISA
// (it would emulate it, slower than fp32): bf16_unsupported_reason().
#include <string>

namespace tnt::compute {

enum class Precision { fp32, bf16 };

const char* to_string(Precision precision);
// "fp32" or "bf16"; anything else throws a ConfigError naming `what`.
Precision parse_precision(const std::string& text, const std::string& what = "precision");
// Empty where oneDNN runs bf16 natively on this CPU (AVX512-BF16 or AMX);
// otherwise why bf16 is refused. ONEDNN_MAX_CPU_ISA lowers what oneDNN uses.
std::string bf16_unsupported_reason();

// Sets the number of threads oneDNN and compute/'s own kernels use
// (omp_set_num_threads). Call before the first forward pass of a model.
void set_num_threads(int threads);
int num_threads();

// "oneDNN 2.6.3 (cpu runtime: OpenMP), ISA: ..." for logs and benchmark tables.
std::string runtime_description();

}  // namespace tnt::compute
