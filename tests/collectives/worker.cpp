// One rank of the multi-process collective tests (tests/collectives/*_test.cpp start it).
//   tnt-test-worker check        every collective, dtype, op and count against a serial reference
//   tnt-test-worker loop         allreduces until killed; prints "running rank=R pid=P board=yes/no" once
//   tnt-test-worker barrier      joins, one barrier, leaves
//   tnt-test-worker print-job    prints where this rank thinks it is (JobEnvironment::describe), joins nothing
// --config TEXT sets the run configuration (ranks must agree).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tnt/collectives/communicator.h"
#include "tnt/core/log.h"

namespace {

using tnt::bfloat16;
using tnt::DataType;
using tnt::ReduceOp;

// Unique per (rank, index), so a misplaced element shows; small integers so that float sums
// of four ranks are exact and bfloat16 holds them.
double input_value(int rank, std::size_t index, DataType type) {
  const long long v = static_cast<long long>((index * 7919 + static_cast<std::size_t>(rank) * 104729) % 1999) - 999;
  if (type == DataType::bfloat16) return static_cast<double>(v % 128);
  if (type == DataType::float32 || type == DataType::float64) return static_cast<double>(v) / 8.0;
  return static_cast<double>(v * 1009 + rank);
}

template <class T>
T from_double(double value) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return bfloat16(static_cast<float>(value));
  else
    return static_cast<T>(value);
}

template <class T>
double to_double(T value) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return static_cast<double>(static_cast<float>(value));
  else
    return static_cast<double>(value);
}

int failures = 0;
long long checks = 0;

void report(const std::string& what) {
  if (++failures <= 10) std::fprintf(stderr, "MISMATCH %s\n", what.c_str());
}

template <class T>
std::vector<T> make_input(int rank, std::size_t count) {
  std::vector<T> data(count);
  for (std::size_t i = 0; i < count; ++i) data[i] = from_double<T>(input_value(rank, i, tnt::data_type_of<T>()));
  return data;
}

// The serial reference: reduce every rank's input in rank order, in the type's own arithmetic
// (float32 for bfloat16, as tnt promises).
template <class T>
double reference(int ranks, std::size_t index, ReduceOp op) {
  using Acc = std::conditional_t<std::is_same_v<T, bfloat16>, float, T>;
  auto value = [&](int r) {
    return static_cast<Acc>(to_double(from_double<T>(input_value(r, index, tnt::data_type_of<T>()))));
  };
  Acc acc = value(0);
  for (int r = 1; r < ranks; ++r) {
    Acc v = value(r);
    if (op == ReduceOp::min)
      acc = v < acc ? v : acc;
    else if (op == ReduceOp::max)
      acc = acc < v ? v : acc;
    else
      acc = static_cast<Acc>(acc + v);
  }
  if (op == ReduceOp::avg) acc = static_cast<Acc>(acc / static_cast<Acc>(ranks));
  return to_double(from_double<T>(static_cast<double>(acc)));
}

template <class T>
void verify(const std::vector<T>& data, int ranks, ReduceOp op, const std::string& what, std::size_t begin = 0,
            std::size_t end = std::size_t(-1)) {
  end = std::min(end, data.size());
  constexpr bool exact = std::is_integral_v<T>;
  for (std::size_t i = begin; i < end; ++i) {
    const double want = reference<T>(ranks, i, op);
    const double got = to_double(data[i]);
    ++checks;
    const double tolerance =
        exact || op == ReduceOp::min || op == ReduceOp::max
            ? 0.0
            : 1e-6 * (1 + std::fabs(want)) * ranks + (std::is_same_v<T, bfloat16> ? std::fabs(want) / 128 : 0);
    if (!(std::fabs(got - want) <= tolerance)) {
      report(what + " index " + std::to_string(i) + ": got " + std::to_string(got) + " want " + std::to_string(want));
      return;
    }
  }
}

template <class T>
void check_type(tnt::Communicator& comm, const std::vector<std::size_t>& counts) {
  const DataType type = tnt::data_type_of<T>();
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max}) {
    for (std::size_t count : counts) {
      const std::string what =
          std::string(tnt::name_of(type)) + " " + std::string(tnt::name_of(op)) + " count " + std::to_string(count);
      auto data = make_input<T>(comm.rank(), count);
      comm.allreduce(data.data(), count, type, op);
      verify(data, comm.size(), op, "allreduce " + what);

      auto scattered = make_input<T>(comm.rank(), count);
      comm.reduce_scatter(scattered.data(), count, type, op);
      auto mine = tnt::Communicator::block(count, comm.size(), comm.rank());
      verify(scattered, comm.size(), op, "reduce_scatter " + what, mine.offset, mine.offset + mine.count);
    }
  }
}

// The types and operations beyond the five above (MPI's): inputs chosen so that every result is
// exact whatever the order of the reduction (products of multiples of 1/4 near 1, small
// integers, few distinct values so that min_loc and max_loc meet ties).
template <class T>
T small_input(int rank, std::size_t index, ReduceOp op) {
  const auto mix = static_cast<long long>((index * 31 + static_cast<std::size_t>(rank) * 17) % 13);
  if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bfloat16>) {
    const double value = op == ReduceOp::prod ? 0.5 + static_cast<double>(mix % 5) / 4 : static_cast<double>(mix - 6);
    return from_double<T>(value);
  } else if constexpr (std::is_integral_v<T>) {
    if (op == ReduceOp::logical_and || op == ReduceOp::logical_or || op == ReduceOp::logical_xor)
      return static_cast<T>(mix % 3 == 0 ? 0 : mix);
    if (op == ReduceOp::bit_and || op == ReduceOp::bit_or || op == ReduceOp::bit_xor)
      return static_cast<T>((index * 2654435761u + static_cast<std::size_t>(rank) * 40503u) >> 3);
    return static_cast<T>(std::is_signed_v<T> ? mix - 6 : mix);
  } else {  // a value-index pair
    return T{static_cast<decltype(T::value)>(mix % 4), static_cast<std::int32_t>((rank * 7 + index) % 5)};
  }
}

// The reference, one pair of values at a time, as plainly as it can be said.
template <class T>
T combine(T a, T b, ReduceOp op) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    return bfloat16(static_cast<float>(combine(static_cast<float>(a), static_cast<float>(b), op)));
  } else if constexpr (std::is_arithmetic_v<T>) {
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        if constexpr (std::is_floating_point_v<T>)
          return a + b;
        else
          return static_cast<T>(static_cast<unsigned long long>(a) + static_cast<unsigned long long>(b));
      case ReduceOp::prod:
        if constexpr (std::is_floating_point_v<T>)
          return a * b;
        else
          return static_cast<T>(static_cast<unsigned long long>(a) * static_cast<unsigned long long>(b));
      case ReduceOp::min: return b < a ? b : a;
      case ReduceOp::max: return a < b ? b : a;
      default: break;
    }
    if constexpr (std::is_integral_v<T>) {
      switch (op) {
        case ReduceOp::logical_and: return static_cast<T>(a && b);
        case ReduceOp::logical_or: return static_cast<T>(a || b);
        case ReduceOp::logical_xor: return static_cast<T>(!a != !b);
        case ReduceOp::bit_and: return static_cast<T>(a & b);
        case ReduceOp::bit_or: return static_cast<T>(a | b);
        case ReduceOp::bit_xor: return static_cast<T>(a ^ b);
        default: break;
      }
    }
    return a;
  } else {
    const bool take_b = op == ReduceOp::min_loc ? b.value < a.value || (b.value == a.value && b.index < a.index)
                                                : a.value < b.value || (b.value == a.value && b.index < a.index);
    return take_b ? b : a;
  }
}

template <class T>
bool same(const T& a, const T& b) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return a.bits == b.bits;
  else if constexpr (std::is_arithmetic_v<T>)
    return a == b;
  else
    return a.value == b.value && a.index == b.index;
}

template <class T>
T average(T sum, int ranks) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return bfloat16(static_cast<float>(sum) / static_cast<float>(ranks));
  else if constexpr (std::is_arithmetic_v<T>)
    return static_cast<T>(sum / static_cast<T>(ranks));
  else
    return sum;
}

template <class T>
void check_every_op(tnt::Communicator& comm, const std::vector<std::size_t>& counts) {
  const DataType type = tnt::data_type_of<T>();
  for (int o = 0; o < tnt::kReduceOps; ++o) {
    const auto op = static_cast<ReduceOp>(o);
    if (!tnt::supports(type, op)) {
      std::vector<T> data(3);
      ++checks;
      try {
        comm.allreduce(data.data(), data.size(), type, op);
        report("allreduce of " + std::string(tnt::name_of(type)) + " with " + std::string(tnt::name_of(op)) +
               " was not refused");
      } catch (const tnt::ConfigError&) {
      }
      continue;
    }
    // An average of integers rounds each rank's partial sums alike only when the sum is exact:
    // avg is sum then divide, and the five types above test it; here it is checked once.
    for (std::size_t count : counts) {
      const std::string what =
          std::string(tnt::name_of(type)) + " " + std::string(tnt::name_of(op)) + " count " + std::to_string(count);
      std::vector<T> data(count);
      std::vector<T> want(count);
      for (std::size_t i = 0; i < count; ++i) {
        data[i] = small_input<T>(comm.rank(), i, op);
        want[i] = small_input<T>(0, i, op);
        for (int r = 1; r < comm.size(); ++r) want[i] = combine(want[i], small_input<T>(r, i, op), op);
        if (op == ReduceOp::avg) want[i] = average(want[i], comm.size());
      }
      auto scattered = data;
      comm.allreduce(data.data(), count, type, op);
      comm.reduce_scatter(scattered.data(), count, type, op);
      const auto mine = tnt::Communicator::block(count, comm.size(), comm.rank());
      for (std::size_t i = 0; i < count; ++i) {
        ++checks;
        if (!same(data[i], want[i])) {
          report("allreduce " + what + " index " + std::to_string(i));
          break;
        }
      }
      for (std::size_t i = mine.offset; i < mine.offset + mine.count; ++i) {
        ++checks;
        if (!same(scattered[i], want[i])) {
          report("reduce_scatter " + what + " index " + std::to_string(i));
          break;
        }
      }
    }
  }
}

void check_new_types(tnt::Communicator& comm) {
  const std::vector<std::size_t> counts = {0, 1, 7, 1000, 12345};
  check_every_op<float>(comm, counts);
  check_every_op<double>(comm, counts);
  check_every_op<std::int32_t>(comm, counts);
  check_every_op<std::int64_t>(comm, counts);
  check_every_op<bfloat16>(comm, counts);
  check_every_op<std::int8_t>(comm, counts);
  check_every_op<std::int16_t>(comm, counts);
  check_every_op<std::uint8_t>(comm, counts);
  check_every_op<std::uint16_t>(comm, counts);
  check_every_op<std::uint32_t>(comm, counts);
  check_every_op<std::uint64_t>(comm, {0, 1, 7, 1000, 12345, (std::size_t{1} << 20) + 3});
  check_every_op<char>(comm, {7});
  check_every_op<tnt::ValueIndex<float>>(comm, counts);
  check_every_op<tnt::ValueIndex<double>>(comm, {0, 1, 7, 1000, 12345, (std::size_t{1} << 20) + 3});
  check_every_op<tnt::ValueIndex<std::int32_t>>(comm, counts);
  check_every_op<tnt::ValueIndex<std::int64_t>>(comm, counts);
}

void check_async(tnt::Communicator& comm, std::size_t count) {
  // Several operations in flight at once, of different types, ops and sizes.
  auto a = make_input<float>(comm.rank(), count);
  auto b = make_input<std::int64_t>(comm.rank(), count / 3 + 1);
  auto c = make_input<double>(comm.rank(), 7);
  auto d = make_input<bfloat16>(comm.rank(), count / 2 + 5);
  auto e = make_input<std::int32_t>(comm.rank(), count);
  int callbacks = 0;
  std::vector<tnt::Request> requests;
  requests.push_back(comm.allreduce_async(a.data(), a.size(), DataType::float32, ReduceOp::sum));
  requests.push_back(comm.allreduce_async(b.data(), b.size(), DataType::int64, ReduceOp::max));
  requests.push_back(comm.allreduce_async(c.data(), c.size(), DataType::float64, ReduceOp::avg,
                                          [&](const std::string& error) { callbacks += error.empty() ? 1 : 100; }));
  requests.push_back(comm.allreduce_async(d.data(), d.size(), DataType::bfloat16, ReduceOp::sum));
  requests.push_back(comm.allreduce_async(e.data(), e.size(), DataType::int32, ReduceOp::min));
  for (auto it = requests.rbegin(); it != requests.rend(); ++it) it->wait();  // any order
  for (auto& r : requests) {
    ++checks;
    if (!r.test()) report("request not done after wait");
  }
  ++checks;
  if (callbacks != 1) report("completion callback ran " + std::to_string(callbacks) + " times");
  verify(a, comm.size(), ReduceOp::sum, "async float32 sum");
  verify(b, comm.size(), ReduceOp::max, "async int64 max");
  verify(c, comm.size(), ReduceOp::avg, "async float64 avg");
  verify(d, comm.size(), ReduceOp::sum, "async bfloat16 sum");
  verify(e, comm.size(), ReduceOp::min, "async int32 min");
}

// Who runs the event loop changes hands (Note [Driving]): asynchronous work must progress with
// nobody waiting, beside a blocking call, and when several threads wait at once.
void check_progress(tnt::Communicator& comm) {
  const std::size_t count = (std::size_t{1} << 18) + 3;
  auto expect_done_without_waiting = [&](const tnt::Request& request, const char* what) {
    ++checks;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!request.test() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!request.test()) report(std::string(what) + ": not done after 20 s with nobody waiting");
  };

  // Nobody waits: the progress thread runs the loop. The callback chains a second operation.
  auto a = make_input<float>(comm.rank(), count);
  auto b = make_input<std::int32_t>(comm.rank(), 1000);
  std::atomic<bool> chained_done{false};
  tnt::Request chained;
  auto first =
      comm.allreduce_async(a.data(), a.size(), DataType::float32, ReduceOp::sum, [&](const std::string& error) {
        if (!error.empty()) return;
        chained = comm.allreduce_async(b.data(), b.size(), DataType::int32, ReduceOp::max,
                                       [&](const std::string& e) { chained_done = e.empty(); });
      });
  expect_done_without_waiting(first, "asynchronous allreduce");
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!chained_done && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ++checks;
  if (!chained_done) report("allreduce issued from a completion callback did not finish");
  verify(a, comm.size(), ReduceOp::sum, "nobody-waits float32 sum");
  verify(b, comm.size(), ReduceOp::max, "chained int32 max");

  // A blocking call while asynchronous work is in flight, then the async one.
  auto c = make_input<double>(comm.rank(), count);
  auto d = make_input<std::int64_t>(comm.rank(), 7);
  auto pending = comm.allreduce_async(c.data(), c.size(), DataType::float64, ReduceOp::min);
  comm.allreduce(d.data(), d.size(), DataType::int64, ReduceOp::sum);
  verify(d, comm.size(), ReduceOp::sum, "blocking int64 sum beside an async one");
  pending.wait();
  verify(c, comm.size(), ReduceOp::min, "float64 min beside a blocking one");

  // Two threads wait at once; either may end up running the loop.
  auto e = make_input<float>(comm.rank(), count);
  auto f = make_input<float>(comm.rank(), 1000);
  auto first_of_two = comm.allreduce_async(e.data(), e.size(), DataType::float32, ReduceOp::max);
  auto second_of_two = comm.allreduce_async(f.data(), f.size(), DataType::float32, ReduceOp::avg);
  std::thread other([&] { first_of_two.wait(); });
  second_of_two.wait();
  other.join();
  verify(e, comm.size(), ReduceOp::max, "float32 max waited for by another thread");
  verify(f, comm.size(), ReduceOp::avg, "float32 avg waited for beside it");
}

void check_data_movement(tnt::Communicator& comm) {
  for (std::size_t bytes :
       {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(1000), std::size_t(3 << 20) + 5}) {
    for (int root = 0; root < comm.size(); ++root) {
      std::vector<std::uint8_t> data(bytes);
      for (std::size_t i = 0; i < bytes; ++i)
        data[i] = static_cast<std::uint8_t>(comm.rank() == root ? (i * 31 + root) : 0xEE);
      comm.broadcast(data.data(), bytes, root);
      for (std::size_t i = 0; i < bytes; ++i) {
        ++checks;
        if (data[i] != static_cast<std::uint8_t>(i * 31 + root)) {
          report("broadcast root " + std::to_string(root) + " bytes " + std::to_string(bytes) + " index " +
                 std::to_string(i));
          break;
        }
      }
    }
    std::vector<std::uint8_t> mine(bytes), all(bytes * static_cast<std::size_t>(comm.size()));
    for (std::size_t i = 0; i < bytes; ++i) mine[i] = static_cast<std::uint8_t>(i * 13 + comm.rank() * 101);
    comm.allgather(mine.data(), all.data(), bytes);
    for (int r = 0; r < comm.size(); ++r) {
      for (std::size_t i = 0; i < bytes; ++i) {
        ++checks;
        if (all[static_cast<std::size_t>(r) * bytes + i] != static_cast<std::uint8_t>(i * 13 + r * 101)) {
          report("allgather bytes " + std::to_string(bytes) + " block " + std::to_string(r) + " index " +
                 std::to_string(i));
          break;
        }
      }
    }
  }
  comm.barrier();
}

std::string option(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 2; i + 1 < argc; ++i) {
    if (argv[i] == name) return argv[i + 1];
  }
  return fallback;
}

// Ranks allreduce `--calls` times, `--pause-s` apart (computing, as far as the job can tell).
// `--skip-rank R` stops issuing before the last call and stays alive; `--mismatch-rank R` makes
// its last call a broadcast of the same size instead (Note [Stall watch]); `--stop-ranks R,S`
// stop themselves (SIGSTOP) before the last call, after `--pause-s` of computing.
int run_stall_scenario(tnt::Communicator& comm, int argc, char** argv) {
  const int calls = std::stoi(option(argc, argv, "--calls", "4"));
  const int skip = std::stoi(option(argc, argv, "--skip-rank", "-1"));
  const int mismatch = std::stoi(option(argc, argv, "--mismatch-rank", "-1"));
  const int other_size = std::stoi(option(argc, argv, "--other-size-rank", "-1"));
  const auto pause = std::chrono::duration<double>(std::stod(option(argc, argv, "--pause-s", "0")));
  const std::string stop_ranks = "," + option(argc, argv, "--stop-ranks", "") + ",";
  const bool stops = stop_ranks.find("," + std::to_string(comm.rank()) + ",") != std::string::npos;
  std::vector<float> data(1024, 1.0f);
  for (int call = 0; call < calls; ++call) {
    if (call > 0) std::this_thread::sleep_for(pause);
    const bool last = call == calls - 1;
    if (last && stops) {
      std::printf("rank %d: stopping after collective #%d\n", comm.rank(), call - 1);
      std::fflush(stdout);
      std::raise(SIGSTOP);
    }
    if (last && comm.rank() == skip) {
      std::printf("rank %d: skipping collective #%d\n", comm.rank(), call);
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::seconds(120));
      return 0;
    }
    if (last && comm.rank() == mismatch) {
      comm.broadcast(data.data(), data.size() * sizeof(float), 0);
    } else if (last && comm.rank() == other_size) {
      comm.allreduce(data.data(), data.size() / 2, DataType::float32, ReduceOp::sum);
    } else {
      comm.allreduce(data.data(), data.size(), DataType::float32, ReduceOp::sum);
    }
  }
  std::printf("rank %d: %d collectives done\n", comm.rank(), calls);
  return 0;
}

// Note [One world per process]: two Communicators built from the environment are one world: the
// second joins nothing (the master would bind its port twice), and calls on either are matched
// in one issue order.
int run_two_worlds() {
  tnt::Communicator first;
  tnt::Communicator second;
  ++checks;
  if (first.rank() != second.rank() || first.size() != second.size()) report("two Communicators, two worlds");
  std::vector<float> data(1000);
  for (int round = 0; round < 3; ++round) {
    std::fill(data.begin(), data.end(), static_cast<float>(first.rank() + 1));
    (round % 2 ? first : second).allreduce(data.data(), data.size(), DataType::float32, ReduceOp::sum);
    const float expected = static_cast<float>(first.size() * (first.size() + 1) / 2);
    ++checks;
    if (data.front() != expected || data.back() != expected) report("an allreduce on one of two Communicators");
  }
  std::printf("rank %d: two worlds, %lld checks, %d failures\n", first.rank(), checks, failures);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "check";
  try {
    tnt::CommunicatorOptions options;
    options.configuration = option(argc, argv, "--config", "test-configuration");
    options.environment = tnt::JobEnvironment::from_env();
    if (mode == "two-worlds") return run_two_worlds();
    if (mode == "print-job") {  // where this rank thinks it is, and from which source; joins nothing
      std::fputs(options.environment->describe().c_str(), stdout);
      return 0;
    }
    // Before the communicator, so that what joining the job logs is seen too.
    tnt::init_logging(options.environment->rank, options.environment->size);
    tnt::Communicator comm(options);
    if (mode == "check") {
      // 12345: over the host board's size for reducing whole messages (Note [Host board]).
      const std::vector<std::size_t> counts = {0, 1, 7, 1000, 12345, (std::size_t{1} << 20) + 3};
      check_type<float>(comm, counts);
      check_type<double>(comm, counts);
      check_type<std::int32_t>(comm, counts);
      check_type<std::int64_t>(comm, counts);
      check_type<bfloat16>(comm, counts);
      check_new_types(comm);
      check_async(comm, 1000);
      check_async(comm, (std::size_t{1} << 20) + 3);
      check_data_movement(comm);
      check_progress(comm);
      std::printf("rank %d: %lld checks, %d failures\n", comm.rank(), checks, failures);
      return failures == 0 ? 0 : 1;
    }
    if (mode == "loop") {
      std::vector<float> data(std::stoul(option(argc, argv, "--floats", "262144")), 1.0f);
      for (long iteration = 0;; ++iteration) {
        comm.allreduce(data.data(), data.size(), DataType::float32, ReduceOp::avg);
        if (iteration == 3) {
          std::printf("running rank=%d pid=%d board=%s\n", comm.rank(), static_cast<int>(getpid()),
                      comm.host_board_serves(data.size() * sizeof(float)) ? "yes" : "no");
          std::fflush(stdout);
        }
      }
    }
    if (mode == "stall") return run_stall_scenario(comm, argc, argv);
    if (mode == "barrier") {
      comm.barrier();
      std::printf("rank %d of %d: done\n", comm.rank(), comm.size());
      return 0;
    }
    std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tnt-test-worker: error: %s\n", error.what());
    return 1;
  }
}
