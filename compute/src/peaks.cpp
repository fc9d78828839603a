#include "tnt/compute/peaks.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace tnt::compute {
namespace {

using Clock = std::chrono::steady_clock;

// Each loop keeps enough independent accumulators to cover the FMA latency
// on both FMA ports (4-5 cycles x 2 ports) and returns their sum so that the
// compiler cannot drop the work. Returns flops done.
constexpr int kAccumulators = 12;

__attribute__((target("avx2,fma"))) double fma_avx2(int64_t iterations, float* sink) {
  __m256 acc[kAccumulators];
  for (int k = 0; k < kAccumulators; ++k) {
    acc[k] = _mm256_set1_ps(0.001f * static_cast<float>(k));
  }
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
    for (int k = 0; k < kAccumulators; ++k) {
      acc[k] = _mm256_fmadd_ps(acc[k], a, b);
    }
  }
  __m256 total = acc[0];
  for (int k = 1; k < kAccumulators; ++k) {
    total = _mm256_add_ps(total, acc[k]);
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, total);
  *sink = lanes[0];
  return static_cast<double>(iterations) * kAccumulators * 8 * 2;
}

__attribute__((target("avx512f"))) double fma_avx512(int64_t iterations, float* sink) {
  __m512 acc[kAccumulators];
  for (int k = 0; k < kAccumulators; ++k) {
    acc[k] = _mm512_set1_ps(0.001f * static_cast<float>(k));
  }
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
    for (int k = 0; k < kAccumulators; ++k) {
      acc[k] = _mm512_fmadd_ps(acc[k], a, b);
    }
  }
  __m512 total = acc[0];
  for (int k = 1; k < kAccumulators; ++k) {
    total = _mm512_add_ps(total, acc[k]);
  }
  float lanes[16];
  _mm512_storeu_ps(lanes, total);
  *sink = lanes[0];
  return static_cast<double>(iterations) * kAccumulators * 16 * 2;
}

// VDPBF16PS: 16 lanes, each two bf16 products added to an fp32 sum (4 flops).
__attribute__((target("avx512f,avx512bf16"))) double dot_bf16(int64_t iterations, float* sink) {
  __m512 acc[kAccumulators];
  for (int k = 0; k < kAccumulators; ++k) {
    acc[k] = _mm512_set1_ps(0.001f * static_cast<float>(k));
  }
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(2e-3f));
  for (int64_t i = 0; i < iterations; ++i) {
    for (int k = 0; k < kAccumulators; ++k) {
      acc[k] = _mm512_dpbf16_ps(acc[k], a, b);
    }
  }
  __m512 total = acc[0];
  for (int k = 1; k < kAccumulators; ++k) {
    total = _mm512_add_ps(total, acc[k]);
  }
  float lanes[16];
  _mm512_storeu_ps(lanes, total);
  *sink = lanes[0];
  return static_cast<double>(iterations) * kAccumulators * 16 * 4;
}

double scalar_fma(int64_t iterations, float* sink) {
  float acc[kAccumulators];
  for (int k = 0; k < kAccumulators; ++k) {
    acc[k] = 0.001f * static_cast<float>(k);
  }
  for (int64_t i = 0; i < iterations; ++i) {
    for (float& v : acc) {
      v = v * 0.999999f + 1e-7f;
    }
  }
  *sink = acc[0] + acc[kAccumulators - 1];
  return static_cast<double>(iterations) * kAccumulators * 2;
}

// Best rate of `rounds` rounds of `kernel` on `threads` threads, in units/s.
template <typename Kernel>
double best_rate(int threads, double seconds, Kernel kernel) {
  constexpr int kRounds = 5;
  double best = 0.0;
  for (int r = 0; r < kRounds; ++r) {
    double work = 0.0;
    const auto start = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : work)
    work += kernel(omp_get_thread_num(), seconds / kRounds);
    best = std::max(best, work / std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

// Flops per second of `loop`, its iteration count calibrated to the time.
double loop_rate(int threads, double seconds, double (*loop)(int64_t, float*)) {
  float sink = 0.0f;
  const int64_t probe = int64_t{1} << 16;
  const auto start = Clock::now();
  loop(probe, &sink);
  const double per_iteration =
      std::max(std::chrono::duration<double>(Clock::now() - start).count() / static_cast<double>(probe), 1e-12);
  return best_rate(threads, seconds, [&](int, double round_seconds) {
    float s = 0.0f;
    return loop(std::max<int64_t>(1, static_cast<int64_t>(round_seconds / per_iteration)), &s);
  });
}

}  // namespace

Peaks measure_arithmetic_peaks(int threads, double seconds) {
  Peaks p;
  double (*fma)(int64_t, float*) = scalar_fma;
  p.fma_isa = "scalar";
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    fma = fma_avx512;
    p.fma_isa = "avx512f";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    fma = fma_avx2;
    p.fma_isa = "avx2+fma";
  }
  p.fp32_gflops = loop_rate(threads, seconds, fma) * 1e-9;
  if (__builtin_cpu_supports("avx512bf16")) {
    p.bf16_gflops = loop_rate(threads, seconds, dot_bf16) * 1e-9;
  }
  return p;
}

Peaks measure_peaks(int threads, double seconds) {
  Peaks p = measure_arithmetic_peaks(threads, seconds);
  // A copy of twice the last-level cache size or more (64 MiB per thread):
  // memory-bound layers stream tensors of that order.
  const size_t floats = size_t{16} << 20;
  std::vector<std::vector<float>> from(static_cast<size_t>(threads)), to(static_cast<size_t>(threads));
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int t = 0; t < threads; ++t) {
    from[static_cast<size_t>(t)].assign(floats, 1.0f);  // first touch on the thread that copies
    to[static_cast<size_t>(t)].assign(floats, 0.0f);
  }
  p.copy_gbps =
      1e-9 * best_rate(threads, seconds, [&](int t, double) {
        std::memcpy(to[static_cast<size_t>(t)].data(), from[static_cast<size_t>(t)].data(), floats * sizeof(float));
        return 2.0 * static_cast<double>(floats * sizeof(float));
      });
  return p;
}

}  // namespace tnt::compute
