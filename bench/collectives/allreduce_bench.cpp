// tnt-bench-allreduce: time per allreduce and bus bandwidth of tnt's ring over the job's ranks.
//   tnt-launch -n 2 -- tnt-bench-allreduce [--min 4K] [--max 256M] [--json]
#include <chrono>
#include <vector>

#include "bench_common.h"
#include "tnt/collectives/communicator.h"
#include "tnt/core/log.h"

int main(int argc, char** argv) {
  const auto options = tnt::bench::parse_options(argc, argv, "tnt-bench-allreduce");
  try {
    // Before the communicator, whose start-up may log: stdout carries only the table or JSON.
    const auto env = tnt::JobEnvironment::from_env();
    tnt::init_logging(env.rank, env.size);
    tnt::Communicator comm;
    std::vector<tnt::bench::Row> rows;
    for (std::size_t bytes : tnt::bench::sizes(options)) {
      std::vector<float> data(bytes / sizeof(float), 1.0f);
      auto once = [&] {
        const auto start = std::chrono::steady_clock::now();
        comm.allreduce(data.data(), data.size(), tnt::DataType::float32, tnt::ReduceOp::sum);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      };
      // Warm up (connections, scratch buffers), then agree on an iteration count from rank 0's estimate.
      double estimate = 0;
      for (int i = 0; i < 3; ++i) estimate = once();
      comm.broadcast(&estimate, sizeof(estimate), 0);
      const int iterations = std::clamp(static_cast<int>(options.seconds_per_size / std::max(estimate, 1e-7)), 5, 2000);
      std::vector<double> seconds(iterations);
      comm.barrier();
      for (int i = 0; i < iterations; ++i) seconds[i] = once();
      comm.allreduce(seconds.data(), seconds.size(), tnt::DataType::float64, tnt::ReduceOp::max);
      rows.push_back(tnt::bench::make_row(bytes, comm.size(), seconds));
    }
    if (comm.is_master_rank()) tnt::bench::print("tnt", comm.size(), rows, options.json);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tnt-bench-allreduce: %s\n", error.what());
    return 1;
  }
}
