// tnt's point-to-point measured as the OSU Micro-Benchmarks 5.3 measure MPI's, step for step
// (mpi/pt2pt/osu_latency.c, osu_bw.c, osu_bibw.c, osu_multi_lat.c and osu_pt2pt.h): the same
// message sizes (0, 1, 2, 4, ... 4 MiB), iterations and warm-up (10000 and 100 up to 8 KiB, 1000
// and 10 above for latency; 100 and 10, 20 and 2 for bandwidth), window (64), tags and output
// format, so that bench/p2p/compare_osu.sh can put the two side by side.
//   tnt-bench-p2p latency|bw|bibw|multi_lat [-m [MIN:]MAX] [-i ITERATIONS] [-x WARMUP]
// Run under tnt-launch with 2 ranks (multi_lat: any even number).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "tnt/collectives/communicator.h"
#include "tnt/core/error.h"

namespace {

constexpr std::size_t kMaxSize = std::size_t{1} << 22;
constexpr std::size_t kLargeSize = 8192;
constexpr int kWindow = 64;

struct Options {
  std::string test;
  std::size_t min_size = 0;
  std::size_t max_size = kMaxSize;
  int loop = -1;  // -1: OSU's defaults per size class
  int skip = -1;
};

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::size_t parse_size(const std::string& text) {
  std::size_t used = 0;
  const unsigned long long value = std::stoull(text, &used);
  if (used != text.size()) throw tnt::ConfigError("'" + text + "' is not a message size in bytes");
  return value;
}

Options parse(int argc, char** argv) {
  const std::string usage = "usage: tnt-bench-p2p latency|bw|bibw|multi_lat [-m [MIN:]MAX] [-i N] [-x N]";
  if (argc < 2) throw tnt::ConfigError(usage);
  Options o;
  o.test = argv[1];
  if (o.test == "--help" || o.test == "-h") {
    std::printf("%s\n", usage.c_str());
    std::exit(0);
  }
  if (o.test != "latency" && o.test != "bw" && o.test != "bibw" && o.test != "multi_lat")
    throw tnt::ConfigError("unknown test '" + o.test + "' (latency, bw, bibw or multi_lat)");
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) throw tnt::ConfigError(arg + " needs a value");
    const std::string value = argv[++i];
    if (arg == "-m") {
      const auto colon = value.find(':');
      if (colon == std::string::npos) {
        o.max_size = parse_size(value);
      } else {
        o.min_size = parse_size(value.substr(0, colon));
        o.max_size = parse_size(value.substr(colon + 1));
      }
    } else if (arg == "-i") {
      o.loop = std::stoi(value);
    } else if (arg == "-x") {
      o.skip = std::stoi(value);
    } else {
      throw tnt::ConfigError("unknown option '" + arg + "'");
    }
  }
  return o;
}

void loops_for(const Options& o, std::size_t size, bool bandwidth, int& loop, int& skip) {
  const bool large = size > kLargeSize;
  loop = o.loop >= 0 ? o.loop : bandwidth ? (large ? 20 : 100) : (large ? 1000 : 10000);
  skip = o.skip >= 0 ? o.skip : bandwidth ? (large ? 2 : 10) : (large ? 10 : 100);
}

void ping_pong(tnt::Communicator& comm, int partner, bool first, std::size_t size, int loop, int skip, char* out,
               char* in, double& elapsed, bool barrier_at_start) {
  double start = 0;
  for (int i = 0; i < loop + skip; ++i) {
    if (i == skip) {
      start = now();
      if (barrier_at_start) comm.barrier();
    }
    if (first) {
      comm.send(out, size, partner, 1);
      comm.recv(in, size, partner, 1);
    } else {
      comm.recv(in, size, partner, 1);
      comm.send(out, size, partner, 1);
    }
  }
  elapsed = now() - start;
}

int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  tnt::Communicator comm;
  const int me = comm.rank();
  const int n = comm.size();
  if (o.test == "multi_lat" ? n % 2 != 0 : n != 2) {
    if (me == 0)
      std::fprintf(stderr, "tnt-bench-p2p %s: needs %s ranks\n", o.test.c_str(),
                   o.test == "multi_lat" ? "an even number of" : "exactly 2");
    comm.finish();
    return 2;
  }
  // OSU's buffers hold its largest size; -m may ask for more.
  std::vector<char> out(std::max(kMaxSize, o.max_size), 'a');
  std::vector<char> in(std::max(kMaxSize, o.max_size), 'b');
  const bool bandwidth = o.test == "bw" || o.test == "bibw";
  if (me == 0) {
    std::printf("# tnt %s (OSU 5.3's method)\n", o.test.c_str());
    std::printf("%-10s%20s\n", "# Size", bandwidth ? "Bandwidth (MB/s)" : "Latency (us)");
  }
  for (std::size_t size = 0; size <= o.max_size; size = size ? size * 2 : 1) {
    if (size < o.min_size) continue;
    int loop = 0;
    int skip = 0;
    loops_for(o, size, bandwidth, loop, skip);
    comm.barrier();
    double elapsed = 0;
    if (o.test == "latency") {
      ping_pong(comm, 1 - me, me == 0, size, loop, skip, out.data(), in.data(), elapsed, false);
      if (me == 0) std::printf("%-10zu%20.2f\n", size, elapsed * 1e6 / (2.0 * loop));
    } else if (o.test == "multi_lat") {
      const int pairs = n / 2;
      const int partner = me < pairs ? me + pairs : me - pairs;
      ping_pong(comm, partner, me < pairs, size, loop, skip, out.data(), in.data(), elapsed, true);
      double latency = elapsed * 1e6 / (2.0 * loop);
      double total = 0;
      comm.reduce(&latency, &total, 1, tnt::DataType::float64, tnt::ReduceOp::sum, 0);
      if (me == 0) std::printf("%-10zu%20.2f\n", size, total / n);
    } else {
      std::vector<tnt::Request> sends(kWindow);
      std::vector<tnt::Request> receives(kWindow);
      const int other = 1 - me;
      double start = 0;
      for (int i = 0; i < loop + skip; ++i) {
        if (i == skip) start = now();
        if (o.test == "bw") {
          if (me == 0) {
            for (auto& r : sends) r = comm.isend(out.data(), size, other, 100);
            tnt::Request::wait_all(sends);
            comm.recv(in.data(), 4, other, 101);
          } else {
            for (auto& r : receives) r = comm.irecv(in.data(), size, other, 100);
            tnt::Request::wait_all(receives);
            comm.send(out.data(), 4, other, 101);
          }
        } else {
          for (auto& r : receives) r = comm.irecv(in.data(), size, other, me == 0 ? 10 : 100);
          for (auto& r : sends) r = comm.isend(out.data(), size, other, me == 0 ? 100 : 10);
          tnt::Request::wait_all(sends);
          tnt::Request::wait_all(receives);
        }
      }
      elapsed = now() - start;
      const double megabytes = static_cast<double>(size) / 1e6 * loop * kWindow * (o.test == "bibw" ? 2 : 1);
      if (me == 0) std::printf("%-10zu%20.2f\n", size, megabytes / elapsed);
    }
    std::fflush(stdout);
  }
  comm.finish();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tnt-bench-p2p: %s\n", error.what());
    return tnt::exit_status_of(error);
  }
}
