#pragma once
// Machine limits measured with short loops, for the roofline of
// tnt-bench-compute and the trainer's bf16 check (Note [Mixed precision] in
// runtime.h): what this processor's cores reach in fp32 multiply-adds, in
// bf16 dot products where the ISA has them, and in a memory copy larger than
// the caches.
#include <optional>
#include <string>

namespace tnt::compute {

struct Peaks {
  std::string fma_isa;                // "avx512f", "avx2+fma" or "scalar"
  double fp32_gflops = 0.0;           // fused multiply-adds, 2 flops each
  std::optional<double> bf16_gflops;  // VDPBF16PS, where the CPU has AVX512-BF16
  double copy_gbps = 0.0;             // bytes read + bytes written per second
};

// Runs each loop on `threads` OpenMP threads for about `seconds` in a few
// rounds and keeps the best round (other processes only ever slow a loop).
Peaks measure_peaks(int threads, double seconds);
// The same without the copy (copy_gbps stays 0): the two arithmetic peaks.
Peaks measure_arithmetic_peaks(int threads, double seconds);

}  // namespace tnt::compute
