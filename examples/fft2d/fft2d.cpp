// A distributed 2-D FFT: each rank holds a block of rows of an N x N complex grid, transforms its
// rows with FFTW, transposes the grid with one alltoall, and transforms the rows again; the
// result is the 2-D transform, transposed (rank r holds its columns). Rank 0 gathers it and
// checks it against FFTW's serial 2-D transform of the whole grid: max|delta| / max|X| <= 1e-12.
//   tnt-launch -n 4 -- tnt-fft2d [N]      (N a multiple of the number of ranks; default 256)
#include <fftw3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tnt/collectives/communicator.h"

namespace {

using Complex = std::complex<double>;

Complex input(std::size_t i, std::size_t j) {
  return {static_cast<double>((i * 131 + j * 71) % 97) / 97.0 - 0.5,
          static_cast<double>((i * 29 + j * 113) % 89) / 89.0 - 0.5};
}

// In place, `rows` transforms of length n, one per row of a row-major rows x n block.
void transform_rows(std::vector<Complex>& block, int rows, int n) {
  auto* data = reinterpret_cast<fftw_complex*>(block.data());
  fftw_plan plan =
      fftw_plan_many_dft(1, &n, rows, data, nullptr, 1, n, data, nullptr, 1, n, FFTW_FORWARD, FFTW_ESTIMATE);
  fftw_execute(plan);
  fftw_destroy_plan(plan);
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  try {
    tnt::Communicator comm;
    const auto ranks = static_cast<std::size_t>(comm.size());
    const auto me = static_cast<std::size_t>(comm.rank());
    if (n == 0 || n % ranks != 0) {
      if (me == 0) std::fprintf(stderr, "tnt-fft2d: N=%zu must be a positive multiple of the %zu ranks\n", n, ranks);
      comm.finish();
      return 2;
    }
    const std::size_t rows = n / ranks;  // this rank's rows, and the side of each block it exchanges
    std::vector<Complex> block(rows * n);
    for (std::size_t a = 0; a < rows; ++a)
      for (std::size_t j = 0; j < n; ++j) block[a * n + j] = input(me * rows + a, j);

    comm.barrier();
    const auto start = std::chrono::steady_clock::now();
    transform_rows(block, static_cast<int>(rows), static_cast<int>(n));
    // Transpose: the rows x rows block of columns s*rows.. goes to rank s, which lays the blocks it
    // receives side by side as its rows of the transposed grid.
    std::vector<Complex> out(rows * n);
    for (std::size_t s = 0; s < ranks; ++s)
      for (std::size_t a = 0; a < rows; ++a)
        for (std::size_t b = 0; b < rows; ++b) out[(s * rows + a) * rows + b] = block[a * n + s * rows + b];
    std::vector<Complex> in(rows * n);
    comm.alltoall(out.data(), in.data(), rows * rows * sizeof(Complex));
    for (std::size_t r = 0; r < ranks; ++r)
      for (std::size_t a = 0; a < rows; ++a)
        for (std::size_t b = 0; b < rows; ++b) block[b * n + r * rows + a] = in[(r * rows + a) * rows + b];
    transform_rows(block, static_cast<int>(rows), static_cast<int>(n));
    comm.barrier();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    // Rank r's row b is column r*rows + b of the 2-D transform.
    std::vector<Complex> whole(me == 0 ? n * n : 0);
    comm.gather(block.data(), whole.data(), rows * n * sizeof(Complex), 0);
    int status = 0;
    if (me == 0) {
      std::vector<Complex> serial(n * n);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j) serial[i * n + j] = input(i, j);
      auto* data = reinterpret_cast<fftw_complex*>(serial.data());
      fftw_plan plan =
          fftw_plan_dft_2d(static_cast<int>(n), static_cast<int>(n), data, data, FFTW_FORWARD, FFTW_ESTIMATE);
      fftw_execute(plan);
      fftw_destroy_plan(plan);
      double largest = 0;
      double worst = 0;
      for (std::size_t k1 = 0; k1 < n; ++k1) {
        for (std::size_t k2 = 0; k2 < n; ++k2) {
          largest = std::max(largest, std::abs(serial[k1 * n + k2]));
          worst = std::max(worst, std::abs(serial[k1 * n + k2] - whole[k2 * n + k1]));
        }
      }
      const double relative = worst / largest;
      const bool ok = relative <= 1e-12;
      std::printf("fft2d N=%zu on %zu ranks: %.3f ms, max|delta|/max|X| = %.3g %s\n", n, ranks, seconds * 1e3, relative,
                  ok ? "OK" : "WRONG");
      status = ok ? 0 : 1;
    }
    comm.broadcast(&status, sizeof status, 0);
    comm.finish();
    return status;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tnt-fft2d: %s\n", error.what());
    return 1;
  }
}
