// tnt-bench-mpi-allreduce: the same measurement as tnt-bench-allreduce with MPI_Allreduce, so
// that compare_mpi.sh can put the two side by side.
//   mpirun -n 2 tnt-bench-mpi-allreduce [--min 4K] [--max 256M] [--json]
#include <mpi.h>

#include <vector>

#include "bench_common.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const auto options = tnt::bench::parse_options(argc, argv, "tnt-bench-mpi-allreduce");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<tnt::bench::Row> rows;
  for (std::size_t bytes : tnt::bench::sizes(options)) {
    std::vector<float> data(bytes / sizeof(float), 1.0f);
    const int count = static_cast<int>(data.size());
    auto once = [&] {
      const double start = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, data.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      return MPI_Wtime() - start;
    };
    double estimate = 0;
    for (int i = 0; i < 3; ++i) estimate = once();
    MPI_Bcast(&estimate, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    const int iterations = std::clamp(static_cast<int>(options.seconds_per_size / std::max(estimate, 1e-7)), 5, 2000);
    std::vector<double> seconds(iterations);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iterations; ++i) seconds[i] = once();
    MPI_Allreduce(MPI_IN_PLACE, seconds.data(), iterations, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    rows.push_back(tnt::bench::make_row(bytes, size, seconds));
  }
  if (rank == 0) tnt::bench::print("mpi", size, rows, options.json);
  MPI_Finalize();
  return 0;
}
