// A distributed dot product and a Jacobi sweep on tnt's communicator: the pattern of an HPC code
// that brings its own event loop and wants fast collectives and neighbour exchange.
//
// Every rank owns a contiguous block of x and y (x[i] = i, y[i] = 2),
// computes its partial dot product, and one allreduce gives everybody the global value, which
// is checked against the closed form. Then a few Jacobi sweeps for -u'' = 1 on n points,
// exchanging block boundaries with the neighbours point-to-point, show convergence of the global
// residual.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "tnt/collectives/communicator.h"

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
  try {
    // Embedding: tnt runs its collectives on our io_context, driven by our own thread.
    boost::asio::io_context io;
    auto work = boost::asio::make_work_guard(io);
    std::thread loop([&] { io.run(); });

    int status = 0;
    {
      tnt::CommunicatorOptions options;
      options.io_context = &io;
      options.configuration = "embed-dot n=" + std::to_string(n);
      tnt::Communicator comm(options);
      const auto mine = tnt::Communicator::block(n, comm.size(), comm.rank());

      // Dot product of x[i] = i and y[i] = 2: exactly n(n-1) in int64.
      std::int64_t partial = 0;
      for (std::size_t i = mine.offset; i < mine.offset + mine.count; ++i) partial += static_cast<std::int64_t>(i) * 2;
      comm.allreduce(std::span<std::int64_t>(&partial, 1), tnt::ReduceOp::sum);
      const auto expected = static_cast<std::int64_t>(n) * static_cast<std::int64_t>(n - 1);
      if (comm.is_master_rank()) {
        std::printf("dot product over %d ranks: %lld (expected %lld) %s\n", comm.size(),
                    static_cast<long long>(partial), static_cast<long long>(expected),
                    partial == expected ? "OK" : "WRONG");
      }
      if (partial != expected) status = 1;

      // Jacobi sweeps for -u'' = 1, u(0) = u(1) = 0, on this rank's block of a grid of m points.
      const std::size_t m = 64 * static_cast<std::size_t>(comm.size());
      const auto block = tnt::Communicator::block(m, comm.size(), comm.rank());
      const double h2 = 1.0 / static_cast<double>((m + 1) * (m + 1));
      std::vector<double> u(block.count, 0.0), next(block.count);
      double first_residual = 0, residual = 0;
      for (int sweep = 0; sweep < 200; ++sweep) {
        // Halos: this block's edges to the neighbours, theirs into `left` and `right` (0 at the
        // domain's ends); tag 0 carries leftward edges, tag 1 rightward ones.
        double left = 0.0, right = 0.0;
        std::vector<tnt::Request> halo;
        if (comm.rank() > 0) {
          halo.push_back(comm.irecv(&left, sizeof left, comm.rank() - 1, 1));
          halo.push_back(comm.isend(&u.front(), sizeof(double), comm.rank() - 1, 0));
        }
        if (comm.rank() + 1 < comm.size()) {
          halo.push_back(comm.irecv(&right, sizeof right, comm.rank() + 1, 0));
          halo.push_back(comm.isend(&u.back(), sizeof(double), comm.rank() + 1, 1));
        }
        tnt::Request::wait_all(halo);
        double local = 0;
        for (std::size_t i = 0; i < block.count; ++i) {
          const double l = i ? u[i - 1] : left;
          const double r = i + 1 < block.count ? u[i + 1] : right;
          next[i] = 0.5 * (l + r + h2);
          local += (next[i] - u[i]) * (next[i] - u[i]);
        }
        u.swap(next);
        comm.allreduce(std::span<double>(&local, 1), tnt::ReduceOp::sum);
        residual = std::sqrt(local);
        if (sweep == 0) first_residual = residual;
      }
      if (comm.is_master_rank()) {
        std::printf("jacobi: residual %.3e after 200 sweeps (first %.3e) %s\n", residual, first_residual,
                    residual < first_residual ? "OK" : "NOT CONVERGING");
      }
      if (!(residual < first_residual)) status = 1;
    }
    work.reset();
    loop.join();
    return status;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tnt-embed-dot: %s\n", error.what());
    return 1;
  }
}
