#pragma once
// What tnt's and MPI's allreduce benchmarks share, so that their tables line up: the sizes,
// the number of timed iterations per size, the statistics and the output formats.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace tnt::bench {

struct Options {
  std::size_t min_bytes = 4 << 10;
  std::size_t max_bytes = std::size_t{256} << 20;
  bool json = false;
  double seconds_per_size = 0.5;  // timed iterations per size: about this long, 5..2000 of them
};

inline std::size_t parse_size(const char* text) {
  char* end = nullptr;
  double value = std::strtod(text, &end);
  std::string unit(end);
  if (unit == "K" || unit == "KiB")
    value *= 1024;
  else if (unit == "M" || unit == "MiB")
    value *= 1024 * 1024;
  else if (unit == "G" || unit == "GiB")
    value *= 1024.0 * 1024 * 1024;
  else if (!unit.empty()) {
    std::fprintf(stderr, "bad size '%s' (use e.g. 4K, 64M)\n", text);
    std::exit(2);
  }
  return static_cast<std::size_t>(value);
}

inline Options parse_options(int argc, char** argv, const char* program) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: %s needs a value\n", program, arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--json")
      options.json = true;
    else if (arg == "--min")
      options.min_bytes = parse_size(value());
    else if (arg == "--max")
      options.max_bytes = parse_size(value());
    else if (arg == "--seconds")
      options.seconds_per_size = std::atof(value());
    else if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: %s [--min 4K] [--max 256M] [--seconds 0.5] [--json]\n"
          "Allreduce (float32 sum, in place) of every power-of-4 size from --min to --max;\n"
          "prints the median time per allreduce (slowest rank per iteration) and the bus\n"
          "bandwidth 2(p-1)/p * bytes / time. Run it with all ranks of a job.\n",
          program);
      std::exit(0);
    } else {
      std::fprintf(stderr, "%s: unknown option '%s' (see --help)\n", program, arg.c_str());
      std::exit(2);
    }
  }
  if (options.min_bytes < 4 || options.min_bytes > options.max_bytes) {
    std::fprintf(stderr, "%s: need 4 <= --min <= --max\n", program);
    std::exit(2);
  }
  return options;
}

inline std::vector<std::size_t> sizes(const Options& options) {
  std::vector<std::size_t> out;
  for (std::size_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= 4) out.push_back(bytes);
  return out;
}

struct Row {
  std::size_t bytes;
  int iterations;
  double median_seconds;
  double bus_bandwidth;  // bytes per second
};

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

inline Row make_row(std::size_t bytes, int ranks, const std::vector<double>& slowest_rank_seconds) {
  Row row{bytes, static_cast<int>(slowest_rank_seconds.size()), median(slowest_rank_seconds), 0};
  row.bus_bandwidth = 2.0 * (ranks - 1) / ranks * static_cast<double>(bytes) / row.median_seconds;
  return row;
}

inline std::string human(std::size_t bytes) {
  char text[32];
  if (bytes >= (1u << 20))
    std::snprintf(text, sizeof(text), "%zu MiB", bytes >> 20);
  else if (bytes >= 1024)
    std::snprintf(text, sizeof(text), "%zu KiB", bytes >> 10);
  else
    std::snprintf(text, sizeof(text), "%zu B", bytes);
  return text;
}

inline void print(const char* implementation, int ranks, const std::vector<Row>& rows, bool json) {
  if (json) {
    std::printf("{\"implementation\": \"%s\", \"ranks\": %d, \"dtype\": \"float32\", \"op\": \"sum\", \"results\": [",
                implementation, ranks);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::printf("%s{\"bytes\": %zu, \"iterations\": %d, \"median_us\": %.3f, \"bus_bandwidth_GBps\": %.4f}",
                  i ? ", " : "", rows[i].bytes, rows[i].iterations, rows[i].median_seconds * 1e6,
                  rows[i].bus_bandwidth / 1e9);
    }
    std::printf("]}\n");
    return;
  }
  std::printf("%s allreduce, %d ranks, float32 sum (median over iterations of the slowest rank)\n", implementation,
              ranks);
  std::printf("%12s %10s %14s %16s\n", "size", "iters", "time [us]", "busbw [GB/s]");
  for (const auto& row : rows) {
    std::printf("%12s %10d %14.1f %16.3f\n", human(row.bytes).c_str(), row.iterations, row.median_seconds * 1e6,
                row.bus_bandwidth / 1e9);
  }
}

}  // namespace tnt::bench
