// One rank of the multi-process collective tests (tests/collectives/*_test.cpp start it).
//   tnt-test-worker check        every collective, dtype, op and count against a serial reference
//   tnt-test-worker loop         allreduces until killed; prints "running rank=R pid=P board=yes/no" once
//   tnt-test-worker barrier      joins, one barrier, leaves
//   tnt-test-worker more         alltoall(v), allgatherv, gather(v), scatter(v), reduce, scan,
//                                exscan, reduce_scatter with counts, every type and operation
//   tnt-test-worker alltoall-rounds
//                                alltoall(v) with blocks above 64 KiB, meant for more than 9
//                                ranks: posted in rounds of at most 8 peers (Note [Exchanges])
//   tnt-test-worker split        split and dup: every collective and point-to-point on each,
//                                beside the world's
//   tnt-test-worker p2p          point-to-point: sizes, MPI's matching rules, refusals
//                                (--large 1: 64 MiB too)
//   tnt-test-worker print-job    where this rank thinks it is (JobEnvironment::describe); joins
//                                nothing
// --config TEXT sets the run configuration (ranks must agree).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
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
// Which communicator the checks run on ("split color 1: "), when it is not the world.
std::string report_context;

void report(const std::string& what) {
  if (++failures <= 10) std::fprintf(stderr, "MISMATCH %s%s\n", report_context.c_str(), what.c_str());
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

// Note [bf16 on the ring]: on two ranks a bfloat16 sum travels as bfloat16 and must still be
// bitwise the float32 sum of the two inputs rounded once, for values that bfloat16 sums round.
void check_bfloat16_bitwise(tnt::Communicator& comm) {
  if (comm.size() != 2) return;
  const std::size_t count = (std::size_t{1} << 20) + 3;  // the ring's size, not the small path's
  const auto input = [](int rank, std::size_t i) {
    return bfloat16(std::sin(static_cast<float>(i) * 0.37f + static_cast<float>(rank)) * 3.1f);
  };
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
    std::vector<bfloat16> data(count);
    for (std::size_t i = 0; i < count; ++i) data[i] = input(comm.rank(), i);
    comm.allreduce(data.data(), count, DataType::bfloat16, op);
    for (std::size_t i = 0; i < count; ++i) {
      float want = static_cast<float>(input(0, i)) + static_cast<float>(input(1, i));
      if (op == ReduceOp::avg) want /= 2;
      ++checks;
      if (static_cast<float>(data[i]) != static_cast<float>(bfloat16(want))) {
        report("bfloat16 " + std::string(tnt::name_of(op)) + " on 2 ranks not bitwise at " + std::to_string(i));
        break;
      }
    }
  }
}

// Note [bf16 on the ring]: on a ring of three the partial sums travel as bfloat16 too. These
// inputs (228, 1288 and 239 / 4096) sum to 0.4296875 with a rounding to bfloat16 after every
// addition, in any order, where one rounding of the float32 sum gives 0.427734375: a ring that
// carried float32 fails here.
void check_bfloat16_partial_sums(tnt::Communicator& comm) {
  if (comm.size() != 3) return;
  const std::size_t count = (std::size_t{1} << 20) + 3;  // the ring's size, not the small path's
  const float inputs[] = {228.0f / 4096, 1288.0f / 4096, 239.0f / 4096};
  std::vector<bfloat16> data(count, bfloat16(inputs[comm.rank()]));
  // Asynchronous: the rings (flat or hierarchical), never the host board, which has no wire and
  // sums in float32 once.
  comm.allreduce_async(data.data(), count, DataType::bfloat16, ReduceOp::sum).wait();
  ++checks;
  for (std::size_t i = 0; i < count; ++i) {
    if (static_cast<float>(data[i]) != 0.4296875f) {
      report("bfloat16 sum on 3 ranks at " + std::to_string(i) + ": " + std::to_string(static_cast<float>(data[i])) +
             ", want 0.4296875 (partial sums rounded to bfloat16 as they travel)");
      return;
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
  // The loops are element-wise: small counts test each type and operation; one type at 12345
  // (over the host board's whole-message size) covers the block paths. The five types above
  // test the large ones.
  const std::vector<std::size_t> counts = {0, 1, 7, 1000};
  const std::vector<std::size_t> more = {0, 1, 7, 1000, 12345};
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
  check_every_op<std::uint64_t>(comm, more);
  check_every_op<char>(comm, {7});
  check_every_op<tnt::ValueIndex<float>>(comm, counts);
  check_every_op<tnt::ValueIndex<double>>(comm, more);
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
// ---- Point-to-point ------------------------------------------------------------------------------

std::byte pattern_byte(int source, int tag, std::size_t index) {
  return static_cast<std::byte>(
      (static_cast<std::size_t>(source) * 31 + static_cast<std::size_t>(tag) * 7 + index + (index >> 9)) & 0xff);
}

std::vector<std::byte> pattern(int source, int tag, std::size_t bytes) {
  std::vector<std::byte> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = pattern_byte(source, tag, i);
  return data;
}

void expect_pattern(const std::vector<std::byte>& data, std::size_t bytes, int source, int tag,
                    const std::string& what) {
  ++checks;
  for (std::size_t i = 0; i < bytes; ++i) {
    if (data[i] != pattern_byte(source, tag, i)) {
      report(what + ": byte " + std::to_string(i) + " of " + std::to_string(bytes) + " differs");
      return;
    }
  }
}

void expect_status(const tnt::MessageStatus& status, int source, int tag, std::size_t bytes, const std::string& what) {
  ++checks;
  if (status.source != source || status.tag != tag || status.bytes != bytes) {
    report(what + ": status source " + std::to_string(status.source) + " tag " + std::to_string(status.tag) +
           " bytes " + std::to_string(status.bytes) + ", want " + std::to_string(source) + " " + std::to_string(tag) +
           " " + std::to_string(bytes));
  }
}

// Every rank sends to every other and to itself, at every size, with the receive posted before
// the send on one side of each pair and after it on the other.
// Note [Awaited work]: a nonblocking request whose issuer calls nothing still completes, the
// progress thread stepping in once it has made no progress. Request::status() observes the
// completion without running the loop, as test() would. 1 MiB: over every eager limit, so the
// sender's loop must answer the receiver's clear-to-send (TCP) or read (shared memory).
void check_p2p_progress(tnt::Communicator& comm) {
  const int me = comm.rank(), n = comm.size();
  const std::size_t bytes = std::size_t{1} << 20;
  const auto out = pattern(me, 77, bytes);
  std::vector<std::byte> in(bytes);
  comm.barrier();
  tnt::Request receive = comm.irecv(in.data(), in.size(), (me + n - 1) % n, 77);
  tnt::Request send = comm.isend(out.data(), out.size(), (me + 1) % n, 77);
  ++checks;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (receive.status().bytes != bytes && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (receive.status().bytes != bytes) report("irecv: not done after 20 s while its issuer called nothing");
  tnt::Request::wait_all(std::vector<tnt::Request>{receive, send});
  expect_pattern(in, bytes, (me + n - 1) % n, 77, "irecv completed with nobody waiting");
  // A loop of test() progresses as a wait does.
  receive = comm.irecv(in.data(), in.size(), (me + n - 1) % n, 78);
  send = comm.isend(out.data(), out.size(), (me + 1) % n, 78);
  ++checks;
  while (!(receive.test() && send.test()) && std::chrono::steady_clock::now() < give_up + std::chrono::seconds(20)) {
  }
  if (!receive.test() || !send.test()) report("test() loop: not done after 20 s");
  comm.barrier();
}

void check_p2p_sizes(tnt::Communicator& comm, const std::vector<std::size_t>& sizes) {
  const int me = comm.rank();
  const int n = comm.size();
  for (std::size_t bytes : sizes) {
    const int tag = static_cast<int>(bytes % 1000);
    std::vector<std::vector<std::byte>> in(static_cast<std::size_t>(n), std::vector<std::byte>(bytes + 3));
    std::vector<tnt::Request> receives;
    std::vector<tnt::Request> sends;
    const auto out = pattern(me, tag, bytes);
    // Odd ranks post their receives first, even ranks send first.
    auto post_receives = [&] {
      for (int from = 0; from < n; ++from)
        receives.push_back(comm.irecv(in[static_cast<std::size_t>(from)].data(), bytes + 3, from, tag));
    };
    if (me % 2) post_receives();
    for (int to = 0; to < n; ++to) sends.push_back(comm.isend(out.data(), bytes, to, tag));
    if (me % 2 == 0) post_receives();
    tnt::Request::wait_all(receives);
    tnt::Request::wait_all(sends);
    for (int from = 0; from < n; ++from) {
      const std::string what = "p2p " + std::to_string(bytes) + " bytes from rank " + std::to_string(from);
      expect_status(receives[static_cast<std::size_t>(from)].status(), from, tag, bytes, what);
      expect_pattern(in[static_cast<std::size_t>(from)], bytes, from, tag, what);
    }
    comm.barrier();
  }
}

// MPI's rules: wildcards, non-overtaking, probes, synchronous sends, truncation, many requests.
void check_p2p_semantics(tnt::Communicator& comm) {
  const int me = comm.rank();
  const int n = comm.size();
  const int right = (me + 1) % n;
  const int left = (me + n - 1) % n;

  // Non-overtaking: 300 messages of one tag from the left, sizes across the eager limit, all in
  // flight before the right posts a receive; they arrive in the order sent.
  {
    constexpr int kMessages = 300;
    std::vector<std::vector<std::byte>> out(kMessages);
    std::vector<tnt::Request> sends;
    for (int i = 0; i < kMessages; ++i) {
      out[static_cast<std::size_t>(i)] = pattern(me, i, static_cast<std::size_t>(i % 7 == 0 ? 40000 : i * 13));
      sends.push_back(
          comm.isend(out[static_cast<std::size_t>(i)].data(), out[static_cast<std::size_t>(i)].size(), right, 5));
    }
    comm.barrier();
    std::vector<std::byte> in(40000);
    for (int i = 0; i < kMessages; ++i) {
      const auto status = comm.recv(in.data(), in.size(), left, 5);
      const std::size_t bytes = static_cast<std::size_t>(i % 7 == 0 ? 40000 : i * 13);
      expect_status(status, left, 5, bytes, "ordering, message " + std::to_string(i));
      expect_pattern(in, bytes, left, i, "ordering, message " + std::to_string(i));
    }
    tnt::Request::wait_all(sends);
  }
  comm.barrier();

  // any_source and any_tag: every rank sends one message to rank 0 with tag 100 + its rank.
  {
    const auto out = pattern(me, 100 + me, 64);
    auto send = comm.isend(out.data(), out.size(), 0, 100 + me);
    if (me == 0) {
      std::vector<bool> seen(static_cast<std::size_t>(n));
      std::vector<std::byte> in(64);
      for (int i = 0; i < n; ++i) {
        const auto status = comm.recv(in.data(), in.size(), tnt::any_source, tnt::any_tag);
        ++checks;
        if (status.source < 0 || status.source >= n || status.tag != 100 + status.source ||
            seen[static_cast<std::size_t>(status.source)]) {
          report("any_source/any_tag: source " + std::to_string(status.source) + " tag " + std::to_string(status.tag));
          break;
        }
        seen[static_cast<std::size_t>(status.source)] = true;
        expect_pattern(in, 64, status.source, status.tag, "any_source/any_tag");
      }
    }
    send.wait();
  }
  comm.barrier();

  // probe, iprobe and a tag picked out of order: the left sends tags 1 then 2; the receive for
  // tag 2 comes first.
  {
    const auto one = pattern(me, 1, 10);
    const auto two = pattern(me, 2, 20000);
    auto a = comm.isend(one.data(), one.size(), right, 1);
    auto b = comm.isend(two.data(), two.size(), right, 2);
    const auto probed = comm.probe(left, 2);
    expect_status(probed, left, 2, 20000, "probe");
    std::vector<std::byte> in(20000);
    expect_status(comm.recv(in.data(), in.size(), left, 2), left, 2, 20000, "receive by tag out of order");
    expect_pattern(in, 20000, left, 2, "receive by tag out of order");
    std::optional<tnt::MessageStatus> maybe;
    while (!(maybe = comm.iprobe(tnt::any_source, tnt::any_tag))) {
    }
    expect_status(*maybe, left, 1, 10, "iprobe");
    expect_status(comm.recv(in.data(), in.size(), left, 1), left, 1, 10, "receive after iprobe");
    a.wait();
    b.wait();
    ++checks;
    if (comm.iprobe(tnt::any_source, tnt::any_tag)) report("iprobe found a message that was received");
  }
  comm.barrier();

  // A synchronous send completes only once its receive has matched: the right posts it only
  // after the barrier.
  {
    const auto out = pattern(me, 9, 8);
    auto send = comm.isend(out.data(), out.size(), right, 9, tnt::SendMode::synchronous);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ++checks;
    if (send.test()) report("a synchronous send completed before its receive was posted");
    comm.barrier();
    std::vector<std::byte> in(8);
    comm.recv(in.data(), in.size(), left, 9);
    send.wait();
    expect_pattern(in, 8, left, 9, "synchronous send");
  }
  comm.barrier();

  // sendrecv along the ring (every rank at once: no deadlock), and a truncated receive, eager
  // and rendezvous: the receive fails naming both sizes and keeps what fits; the job goes on.
  {
    const auto out = pattern(me, 11, 300);
    std::vector<std::byte> in(300);
    expect_status(comm.sendrecv(out.data(), out.size(), right, 11, in.data(), in.size(), left, 11), left, 11, 300,
                  "sendrecv");
    expect_pattern(in, 300, left, 11, "sendrecv");
    for (std::size_t bytes : {std::size_t{100}, std::size_t{100000}}) {
      const auto big = pattern(me, 12, bytes);
      auto send = comm.isend(big.data(), big.size(), right, 12);
      std::vector<std::byte> small(bytes / 2);
      ++checks;
      try {
        comm.recv(small.data(), small.size(), left, 12);
        report("a truncated receive of " + std::to_string(bytes) + " bytes did not fail");
      } catch (const tnt::JobError& e) {
        report(std::string("a truncated receive failed the job: ") + e.what());
      } catch (const tnt::Error& e) {
        if (std::string(e.what()).find("truncated: " + std::to_string(bytes) + " bytes") == std::string::npos)
          report(std::string("truncation message: ") + e.what());
      }
      expect_pattern(small, bytes / 2, left, 12, "truncated receive");
      send.wait();
    }
  }
  comm.barrier();

  // 1000 outstanding requests each way; wait_any hands back each finished one exactly once.
  {
    constexpr int kRequests = 1000;
    std::vector<std::int32_t> out(kRequests);
    std::vector<std::int32_t> in(kRequests, -1);
    std::vector<tnt::Request> receives;
    for (int i = 0; i < kRequests; ++i)
      receives.push_back(comm.irecv(&in[static_cast<std::size_t>(i)], 4, left, 20 + i));
    std::vector<tnt::Request> sends;
    for (int i = kRequests; i-- > 0;) {
      out[static_cast<std::size_t>(i)] = me * 100000 + i;
      sends.push_back(comm.isend(&out[static_cast<std::size_t>(i)], 4, right, 20 + i));
    }
    std::vector<bool> handed(kRequests);
    for (int done = 0; done < kRequests; ++done) {
      const std::size_t i = tnt::Request::wait_any(receives);
      ++checks;
      if (i >= receives.size() || handed[i]) {
        report("wait_any returned " + std::to_string(i) + " twice or out of range");
        break;
      }
      handed[i] = true;
      receives[i].wait();
      if (in[i] != left * 100000 + static_cast<int>(i)) report("request " + std::to_string(i) + " got the wrong data");
      receives[i] = tnt::Request();  // handed back: skipped from now on
    }
    ++checks;
    if (tnt::Request::wait_any(receives) != receives.size()) report("wait_any over no valid request");
    tnt::Request::wait_all(sends);
    ++checks;
    if (!tnt::Request::test_all(sends)) report("test_all after wait_all");
  }
  comm.barrier();

  // Bad arguments are refused, naming them.
  auto expect_refusal = [&](const std::function<void()>& call, const std::string& words) {
    ++checks;
    try {
      call();
      report("not refused: " + words);
    } catch (const tnt::ConfigError& e) {
      if (std::string(e.what()).find(words) == std::string::npos) report(std::string("refusal says: ") + e.what());
    }
  };
  char byte = 0;
  expect_refusal([&] { comm.send(&byte, 1, n, 0); }, "send: peer " + std::to_string(n) + " is not a rank");
  expect_refusal([&] { comm.send(&byte, 1, tnt::any_source, 0); }, "any_source is for receives only");
  expect_refusal([&] { comm.isend(&byte, 1, 0, -3); }, "isend: tag -3 is negative");
  expect_refusal([&] { comm.irecv(&byte, 1, -7, 0); }, "irecv: peer -7 is not a rank");
  expect_refusal([&] { comm.recv(&byte, 1, 0, -2); }, "recv: tag -2 is negative");
}

// Resident memory of this process, from /proc/self/status (bytes).
std::size_t resident_bytes() {
  std::FILE* status = std::fopen("/proc/self/status", "r");
  if (!status) return 0;
  char line[256];
  std::size_t kib = 0;
  while (std::fgets(line, sizeof line, status)) {
    if (std::sscanf(line, "VmRSS: %zu kB", &kib) == 1) break;
  }
  std::fclose(status);
  return kib * 1024;
}

// One message over 2 GiB from rank 0 to rank 1 (the back ends stop at 2 GiB per message).
int run_p2p_huge(tnt::Communicator& comm) {
  const std::size_t bytes = (std::size_t{2} << 30) + 5;
  std::vector<unsigned char> buffer(bytes);
  auto expected = [](std::size_t i) { return static_cast<unsigned char>((i * 131 + (i >> 20)) & 0xff); };
  if (comm.rank() == 0) {
    for (std::size_t i = 0; i < bytes; ++i) buffer[i] = expected(i);
    comm.send(buffer.data(), bytes, 1, 4);
  } else if (comm.rank() == 1) {
    const auto status = comm.recv(buffer.data(), bytes, 0, 4);
    expect_status(status, 0, 4, bytes, "a message over 2 GiB");
    for (std::size_t i = 0; i < bytes; ++i) {
      if (buffer[i] != expected(i)) {
        report("a message over 2 GiB differs at byte " + std::to_string(i));
        break;
      }
    }
    ++checks;
  }
  comm.barrier();
  std::printf("rank %d: p2p over 2 GiB, %lld checks, %d failures\n", comm.rank(), checks, failures);
  return failures == 0 ? 0 : 1;
}

// Rank 0 sends 4 GiB (4096 sends of one 1 MiB buffer) to rank 1, which keeps its event loop
// running for `seconds` without posting a receive, then receives them all: its resident memory
// meanwhile grows by what the protocol holds, not by what was sent (Note [Point-to-point]).
int run_p2p_flood(tnt::Communicator& comm, double seconds) {
  constexpr int kMessages = 4096;
  std::vector<char> buffer(std::size_t{1} << 20, 'x');
  if (comm.rank() == 0) {
    std::vector<tnt::Request> sends;
    for (int i = 0; i < kMessages; ++i) sends.push_back(comm.isend(buffer.data(), buffer.size(), 1, 3));
    tnt::Request::wait_all(sends);
  } else if (comm.rank() == 1) {
    const std::size_t before = resident_bytes();
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    std::size_t peak = before;
    while (std::chrono::steady_clock::now() < until) {
      comm.iprobe(tnt::any_source, 999);  // runs the event loop; nothing ever matches
      peak = std::max(peak, resident_bytes());
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const auto announced = comm.iprobe(0, 3);
    ++checks;
    if (!announced) report("no message was announced while the receiver waited");
    for (int i = 0; i < kMessages; ++i) comm.recv(buffer.data(), buffer.size(), 0, 3);
    std::printf("rank 1: resident memory grew by %zu bytes while 4 GiB waited to be received\n", peak - before);
  }
  comm.barrier();
  std::printf("rank %d: p2p flood, %lld checks, %d failures\n", comm.rank(), checks, failures);
  return failures == 0 ? 0 : 1;
}

// Note [Eager over TCP]: with no TNT_P2P_EAGER_KB, 64 KiB goes eagerly over TCP: the send
// completes before its receive is posted.
void check_tcp_eager_limit(tnt::Communicator& comm) {
  const char* shm = std::getenv("TNT_SHM");
  const char* eager = std::getenv("TNT_P2P_EAGER_KB");
  if (comm.size() < 2 || !shm || std::string(shm) != "0" || (eager && *eager)) return;
  std::vector<std::uint8_t> message(64 * 1024, 0x5a), got(message.size());
  if (comm.rank() == 0) {
    tnt::Request sent = comm.isend(message.data(), message.size(), 1, 11);
    ++checks;
    if (!sent.wait_for(std::chrono::seconds(2))) report("a 64 KiB send over TCP waited for its receive: not eager");
    comm.send(nullptr, 0, 1, 12);  // only now does rank 1 post the receive
    sent.wait();
  } else if (comm.rank() == 1) {
    comm.recv(nullptr, 0, 0, 12);
    comm.recv(got.data(), got.size(), 0, 11);
    ++checks;
    if (got != message) report("the eager 64 KiB message arrived wrong");
  }
}

int run_p2p(tnt::Communicator& comm, bool large) {
  std::vector<std::size_t> sizes = {0, 1, 4096, 16 * 1024, 16 * 1024 + 1, 65536, 65536 + 1, 1 << 20};
  if (large) sizes.push_back(std::size_t{64} << 20);
  check_p2p_sizes(comm, sizes);
  check_p2p_semantics(comm);
  check_tcp_eager_limit(comm);
  std::printf("rank %d: p2p, %lld checks, %d failures\n", comm.rank(), checks, failures);
  return failures == 0 ? 0 : 1;
}

// ---- The rest of MPI's collectives ------------------------------------------------------------------

// reduce (every root), scan, exscan and reduce-scatter with uneven counts, for every operation
// on T, against the fold in rank order computed here.
template <class T>
void check_folds(tnt::Communicator& comm, const std::vector<std::size_t>& counts,
                 const std::vector<ReduceOp>& only = {}) {
  const DataType type = tnt::data_type_of<T>();
  const int me = comm.rank();
  const int n = comm.size();
  for (int o = 0; o < tnt::kReduceOps; ++o) {
    const auto op = static_cast<ReduceOp>(o);
    if (!only.empty() && std::find(only.begin(), only.end(), op) == only.end()) continue;
    if (!tnt::supports(type, op)) {
      // Every rank refuses the pair before anything is sent, naming the call and both.
      T one[3]{};
      const std::vector<std::size_t> thirds(static_cast<std::size_t>(n), 1);
      std::vector<T> whole(static_cast<std::size_t>(n));
      const std::string pair = std::string(tnt::name_of(op)) + " does not apply to " + std::string(tnt::name_of(type));
      const std::vector<std::pair<std::string, std::function<void()>>> calls = {
          {"reduce", [&] { comm.reduce(one, one + 1, 1, type, op, 0); }},
          {"scan", [&] { comm.scan(one, one + 1, 1, type, op); }},
          {"exscan", [&] { comm.exscan(one, one + 1, 1, type, op); }},
          {"reduce_scatter", [&] { comm.reduce_scatter(whole.data(), one, thirds, type, op); }}};
      for (const auto& [call, run] : calls) {
        ++checks;
        try {
          run();
          report(call + " of " + std::string(tnt::name_of(type)) + " with " + std::string(tnt::name_of(op)) +
                 " was not refused");
        } catch (const tnt::ConfigError& e) {
          const std::string message = e.what();
          if (message.find(call + ": ") != 0 || message.find(pair) == std::string::npos)
            report(call + " refusal says: " + message);
        }
      }
      continue;
    }
    for (std::size_t count : counts) {
      const std::string what =
          std::string(tnt::name_of(type)) + " " + std::string(tnt::name_of(op)) + " count " + std::to_string(count);
      auto input = [&](int r, std::size_t i) { return small_input<T>(r, i, op); };
      auto fold = [&](int upto, std::size_t i) {  // ranks 0..upto-1
        T acc = input(0, i);
        for (int r = 1; r < upto; ++r) acc = combine(acc, input(r, i), op);
        return acc;
      };
      std::vector<T> mine(count);
      for (std::size_t i = 0; i < count; ++i) mine[i] = input(me, i);
      for (int root = 0; root < n; ++root) {
        std::vector<T> out(count);
        comm.reduce(mine.data(), out.data(), count, type, op, root);
        if (me != root) continue;
        for (std::size_t i = 0; i < count; ++i) {
          T want = fold(n, i);
          if (op == ReduceOp::avg) want = average(want, n);
          ++checks;
          if (!same(out[i], want)) {
            report("reduce to " + std::to_string(root) + " " + what + " at " + std::to_string(i));
            break;
          }
        }
      }
      if (op == ReduceOp::avg) continue;
      std::vector<T> inclusive(count);
      std::vector<T> exclusive(count, T{});
      comm.scan(mine.data(), inclusive.data(), count, type, op);
      comm.exscan(mine.data(), exclusive.data(), count, type, op);
      for (std::size_t i = 0; i < count; ++i) {
        ++checks;
        if (!same(inclusive[i], fold(me + 1, i))) {
          report("scan " + what + " at " + std::to_string(i));
          break;
        }
        if (me > 0 && !same(exclusive[i], fold(me, i))) {
          report("exscan " + what + " at " + std::to_string(i));
          break;
        }
      }
      // Uneven blocks, one of them empty: rank r's block is (r * 3 + count) % 5 elements.
      std::vector<std::size_t> blocks(static_cast<std::size_t>(n));
      std::size_t total = 0;
      for (int r = 0; r < n; ++r)
        total += blocks[static_cast<std::size_t>(r)] = (static_cast<std::size_t>(r) * 3 + count) % 5;
      std::vector<T> whole(total);
      for (std::size_t i = 0; i < total; ++i) whole[i] = input(me, i);
      std::vector<T> block(blocks[static_cast<std::size_t>(me)]);
      comm.reduce_scatter(whole.data(), block.data(), blocks, type, op);
      std::size_t offset = 0;
      for (int r = 0; r < me; ++r) offset += blocks[static_cast<std::size_t>(r)];
      for (std::size_t i = 0; i < block.size(); ++i) {
        ++checks;
        if (!same(block[i], fold(n, offset + i))) {
          report("reduce_scatter with counts " + what + " at " + std::to_string(i));
          break;
        }
      }
    }
  }
}

constexpr std::size_t kLargeCount = (std::size_t{1} << 20) + 3;

// alltoallv: s sends r pair_bytes(s, r) bytes, blocks laid out in reverse rank order on both
// sides.
void check_alltoallv(tnt::Communicator& comm, const std::function<std::size_t(int, int)>& pair_bytes,
                     const std::string& what) {
  const int me = comm.rank();
  const int n = comm.size();
  const auto ranks = static_cast<std::size_t>(n);
  std::vector<std::size_t> send_bytes(ranks), send_offsets(ranks), recv_bytes(ranks), recv_offsets(ranks);
  std::size_t send_total = 0;
  std::size_t recv_total = 0;
  for (int r = n - 1; r >= 0; --r) {
    const auto i = static_cast<std::size_t>(r);
    send_bytes[i] = pair_bytes(me, r);
    send_offsets[i] = send_total;
    send_total += send_bytes[i];
    recv_bytes[i] = pair_bytes(r, me);
    recv_offsets[i] = recv_total;
    recv_total += recv_bytes[i];
  }
  std::vector<std::byte> out(send_total);
  std::vector<std::byte> in(recv_total);
  for (int r = 0; r < n; ++r) {
    const auto block = pattern(me, r, send_bytes[static_cast<std::size_t>(r)]);
    std::copy(block.begin(), block.end(),
              out.begin() + static_cast<std::ptrdiff_t>(send_offsets[static_cast<std::size_t>(r)]));
  }
  comm.alltoallv(out.data(), send_bytes, send_offsets, in.data(), recv_bytes, recv_offsets);
  for (int r = 0; r < n; ++r) {
    const auto i = static_cast<std::size_t>(r);
    std::vector<std::byte> got(in.begin() + static_cast<std::ptrdiff_t>(recv_offsets[i]),
                               in.begin() + static_cast<std::ptrdiff_t>(recv_offsets[i] + recv_bytes[i]));
    expect_pattern(got, recv_bytes[i], r, me, what + " from rank " + std::to_string(r));
  }
}

// allgatherv, and gatherv and scatterv with every root; rank r's block is block_of(r) bytes.
void check_vector_forms(tnt::Communicator& comm, const std::function<std::size_t(int)>& block_of,
                        const std::string& what) {
  const int me = comm.rank();
  const int n = comm.size();
  const auto ranks = static_cast<std::size_t>(n);
  std::vector<std::size_t> block_bytes(ranks), block_offsets(ranks);
  std::size_t total = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    block_bytes[r] = block_of(static_cast<int>(r));
    block_offsets[r] = total;
    total += block_bytes[r];
  }
  const auto my_block = pattern(me, 77, block_bytes[static_cast<std::size_t>(me)]);
  auto expect_blocks = [&](const std::vector<std::byte>& all, const std::string& which) {
    for (int r = 0; r < n; ++r) {
      const auto i = static_cast<std::size_t>(r);
      std::vector<std::byte> got(all.begin() + static_cast<std::ptrdiff_t>(block_offsets[i]),
                                 all.begin() + static_cast<std::ptrdiff_t>(block_offsets[i] + block_bytes[i]));
      expect_pattern(got, block_bytes[i], r, 77, which + ", block of rank " + std::to_string(r));
    }
  };
  std::vector<std::byte> all(total);
  comm.allgatherv(my_block.data(), my_block.size(), all.data(), block_bytes, block_offsets);
  expect_blocks(all, what + ": allgatherv");
  // In place: this rank's block already where it belongs (the sharded optimizer's weights).
  std::vector<std::byte> in_place(total);
  std::byte* mine = in_place.data() + block_offsets[static_cast<std::size_t>(me)];
  std::copy(my_block.begin(), my_block.end(), mine);
  comm.allgatherv(mine, my_block.size(), in_place.data(), block_bytes, block_offsets);
  expect_blocks(in_place, what + ": allgatherv in place");
  for (int root = 0; root < n; ++root) {
    std::vector<std::byte> gathered(total);
    comm.gatherv(my_block.data(), my_block.size(), gathered.data(), block_bytes, block_offsets, root);
    if (me == root) expect_blocks(gathered, what + ": gatherv to " + std::to_string(root));
    std::vector<std::byte> scattered(block_bytes[static_cast<std::size_t>(me)]);
    comm.scatterv(all.data(), block_bytes, block_offsets, scattered.data(), scattered.size(), root);
    expect_pattern(scattered, scattered.size(), me, 77, what + ": scatterv from " + std::to_string(root));
  }
}

// gather and scatter of `each` bytes per rank, every root; at the root the gather is in place
// on odd sizes (its own block already in `recv`).
void check_gather_scatter(tnt::Communicator& comm, std::size_t each) {
  const int me = comm.rank();
  const int n = comm.size();
  const auto ranks = static_cast<std::size_t>(n);
  for (int root = 0; root < n; ++root) {
    const std::string what = std::to_string(each) + " bytes per rank, root " + std::to_string(root);
    const auto fixed = pattern(me, root, each);
    std::vector<std::byte> uniform(ranks * each);
    const bool in_place = me == root && each % 2 == 1;
    const auto own = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(me) * each);
    if (in_place) std::copy(fixed.begin(), fixed.end(), uniform.begin() + own);
    comm.gather(in_place ? uniform.data() + own : fixed.data(), uniform.data(), each, root);
    if (me == root) {
      for (int r = 0; r < n; ++r) {
        std::vector<std::byte> got(
            uniform.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * each),
            uniform.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r + 1) * each));
        expect_pattern(got, each, r, root, "gather of " + what);
      }
    }
    std::vector<std::byte> piece(each);
    // The root scatters the blocks it gathered: each rank gets its own back.
    comm.scatter(uniform.data(), piece.data(), each, root);
    expect_pattern(piece, each, me, root, "scatter of " + what);
  }
}

// The nonblocking forms, all in flight at once beside each other, waited for in reverse order:
// each is matched with its own kind on every rank, whatever finishes first.
void check_exchanges_in_flight(tnt::Communicator& comm) {
  const int me = comm.rank();
  const int n = comm.size();
  const auto ranks = static_cast<std::size_t>(n);
  const std::size_t each = 333;
  std::vector<std::byte> to_all(ranks * each);
  std::vector<std::byte> from_all(ranks * each);
  for (int r = 0; r < n; ++r) {
    const auto block = pattern(me, 200 + r, each);
    std::copy(block.begin(), block.end(),
              to_all.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * each));
  }
  // Rank r's block is 5 r bytes (rank 0's is empty).
  std::vector<std::size_t> block_bytes(ranks), block_offsets(ranks);
  std::size_t total = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    block_bytes[r] = 5 * r;
    block_offsets[r] = total;
    total += block_bytes[r];
  }
  const auto my_block = pattern(me, 300, block_bytes[static_cast<std::size_t>(me)]);
  std::vector<std::byte> everyone(total);
  std::vector<std::byte> at_root(total);
  std::vector<std::byte> to_scatter(total);
  for (int r = 0; r < n; ++r) {
    const auto block = pattern(r, 400, block_bytes[static_cast<std::size_t>(r)]);
    std::copy(block.begin(), block.end(),
              to_scatter.begin() + static_cast<std::ptrdiff_t>(block_offsets[static_cast<std::size_t>(r)]));
  }
  std::vector<std::byte> scattered(block_bytes[static_cast<std::size_t>(me)]);
  constexpr std::size_t kCount = 1000;
  std::vector<std::int64_t> values(kCount);
  for (std::size_t i = 0; i < kCount; ++i) values[i] = small_input<std::int64_t>(me, i, ReduceOp::sum);
  std::vector<std::int64_t> reduced(kCount), inclusive(kCount), exclusive(kCount, -1);
  std::vector<std::size_t> counts(ranks);
  std::size_t counted = 0;
  for (std::size_t r = 0; r < ranks; ++r) counted += counts[r] = (r * 3 + 1) % 4;
  std::vector<std::int64_t> whole(counted);
  for (std::size_t i = 0; i < counted; ++i) whole[i] = small_input<std::int64_t>(me, i, ReduceOp::max);
  std::vector<std::int64_t> block(counts[static_cast<std::size_t>(me)]);
  const int reduce_root = n / 2;

  std::vector<tnt::Request> requests;
  requests.push_back(comm.alltoall_async(to_all.data(), from_all.data(), each));
  requests.push_back(
      comm.allgatherv_async(my_block.data(), my_block.size(), everyone.data(), block_bytes, block_offsets));
  requests.push_back(
      comm.gatherv_async(my_block.data(), my_block.size(), at_root.data(), block_bytes, block_offsets, 0));
  requests.push_back(
      comm.scatterv_async(to_scatter.data(), block_bytes, block_offsets, scattered.data(), scattered.size(), n - 1));
  requests.push_back(
      comm.reduce_async(values.data(), reduced.data(), kCount, DataType::int64, ReduceOp::sum, reduce_root));
  requests.push_back(comm.scan_async(values.data(), inclusive.data(), kCount, DataType::int64, ReduceOp::sum));
  requests.push_back(comm.exscan_async(values.data(), exclusive.data(), kCount, DataType::int64, ReduceOp::sum));
  requests.push_back(comm.reduce_scatter_async(whole.data(), block.data(), counts, DataType::int64, ReduceOp::max));
  for (auto it = requests.rbegin(); it != requests.rend(); ++it) it->wait();

  for (int r = 0; r < n; ++r) {
    const auto i = static_cast<std::size_t>(r);
    std::vector<std::byte> got(from_all.begin() + static_cast<std::ptrdiff_t>(i * each),
                               from_all.begin() + static_cast<std::ptrdiff_t>((i + 1) * each));
    expect_pattern(got, each, r, 200 + me, "alltoall_async from rank " + std::to_string(r));
    std::vector<std::byte> theirs(everyone.begin() + static_cast<std::ptrdiff_t>(block_offsets[i]),
                                  everyone.begin() + static_cast<std::ptrdiff_t>(block_offsets[i] + block_bytes[i]));
    expect_pattern(theirs, block_bytes[i], r, 300, "allgatherv_async, block of rank " + std::to_string(r));
    if (me == 0) {
      std::vector<std::byte> gathered(at_root.begin() + static_cast<std::ptrdiff_t>(block_offsets[i]),
                                      at_root.begin() + static_cast<std::ptrdiff_t>(block_offsets[i] + block_bytes[i]));
      expect_pattern(gathered, block_bytes[i], r, 300, "gatherv_async, block of rank " + std::to_string(r));
    }
  }
  expect_pattern(scattered, scattered.size(), me, 400, "scatterv_async");
  auto sum_of = [&](int upto, std::size_t i) {
    std::int64_t acc = 0;
    for (int r = 0; r < upto; ++r) acc += small_input<std::int64_t>(r, i, ReduceOp::sum);
    return acc;
  };
  for (std::size_t i = 0; i < kCount; ++i) {
    ++checks;
    if ((me == reduce_root && reduced[i] != sum_of(n, i)) || inclusive[i] != sum_of(me + 1, i) ||
        (me > 0 && exclusive[i] != sum_of(me, i)) || (me == 0 && exclusive[i] != -1)) {
      report("reduce_async, scan_async or exscan_async at " + std::to_string(i));
      break;
    }
  }
  std::size_t offset = 0;
  for (int r = 0; r < me; ++r) offset += counts[static_cast<std::size_t>(r)];
  for (std::size_t i = 0; i < block.size(); ++i) {
    std::int64_t want = small_input<std::int64_t>(0, offset + i, ReduceOp::max);
    for (int r = 1; r < n; ++r) want = std::max(want, small_input<std::int64_t>(r, offset + i, ReduceOp::max));
    ++checks;
    if (block[i] != want) {
      report("reduce_scatter_async with counts at " + std::to_string(i));
      break;
    }
  }
  // In place: scan's send is its recv, and reduce's at the root.
  std::vector<std::int64_t> prefix = values;
  comm.scan(prefix.data(), prefix.data(), kCount, DataType::int64, ReduceOp::sum);
  std::vector<std::int64_t> folded = values;
  comm.reduce(folded.data(), me == 0 ? folded.data() : nullptr, kCount, DataType::int64, ReduceOp::sum, 0);
  for (std::size_t i = 0; i < kCount; ++i) {
    ++checks;
    if (prefix[i] != sum_of(me + 1, i) || (me == 0 && folded[i] != sum_of(n, i))) {
      report("scan or reduce in place at " + std::to_string(i));
      break;
    }
  }
}

// alltoall: rank s's block for r is pattern(s, r).
void check_alltoall(tnt::Communicator& comm, std::size_t bytes) {
  const int me = comm.rank();
  const int n = comm.size();
  const auto ranks = static_cast<std::size_t>(n);
  std::vector<std::byte> out(ranks * bytes);
  std::vector<std::byte> in(ranks * bytes);
  for (int r = 0; r < n; ++r) {
    const auto block = pattern(me, r, bytes);
    std::copy(block.begin(), block.end(),
              out.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * bytes));
  }
  comm.alltoall(out.data(), in.data(), bytes);
  for (int r = 0; r < n; ++r) {
    std::vector<std::byte> got(in.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * bytes),
                               in.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r + 1) * bytes));
    expect_pattern(got, bytes, r, me, "alltoall of " + std::to_string(bytes) + " from rank " + std::to_string(r));
  }
}

// Every new collective against a serial reference; `large` adds 2^20 + 3 (bytes per pair,
// per block or elements) to the sizes of the data movements and of three types' reductions.
void check_more_collectives(tnt::Communicator& comm, bool large) {
  const int n = comm.size();
  std::vector<std::size_t> sizes = {0, 1, 7, 1000, 100000};
  if (large) sizes.push_back(kLargeCount);
  // 100000 bytes per pair: the rule for blocks above 64 KiB (Note [Exchanges]).
  for (std::size_t bytes : sizes) check_alltoall(comm, bytes);
  // Uneven pairs with zeros among them; large: about 2^20 bytes where not zero.
  check_alltoallv(
      comm, [](int s, int r) { return static_cast<std::size_t>((s * 3 + r * 5) % 4) * 37; }, "alltoallv");
  if (large) {
    check_alltoallv(
        comm,
        [](int s, int r) { return (s * 3 + r * 5) % 4 == 0 ? 0 : kLargeCount + static_cast<std::size_t>(2 * s + r); },
        "large alltoallv");
  }
  check_vector_forms(
      comm, [](int r) { return static_cast<std::size_t>(r % 3) * 1000 + static_cast<std::size_t>(r); },
      "uneven blocks");
  if (large) {
    check_vector_forms(
        comm, [n](int r) { return r == n - 1 ? kLargeCount : static_cast<std::size_t>(r % 2) * 7; }, "large blocks");
  }
  for (std::size_t each : sizes) check_gather_scatter(comm, each);

  const std::vector<std::size_t> counts = {0, 1, 7, 1000};
  std::vector<std::size_t> with_large = counts;
  if (large) with_large.push_back(kLargeCount);
  check_folds<float>(comm, counts);
  check_folds<double>(comm, with_large);
  check_folds<bfloat16>(comm, counts);
  check_folds<std::int8_t>(comm, counts);
  check_folds<std::int16_t>(comm, counts);
  check_folds<std::int32_t>(comm, counts);
  check_folds<std::int64_t>(comm, counts);
  if (large) {  // the integer operations of each kind at 2^20 + 3 (all of them would double the time)
    check_folds<std::int64_t>(comm, {kLargeCount}, {ReduceOp::prod, ReduceOp::logical_or, ReduceOp::bit_xor});
  }
  check_folds<std::uint8_t>(comm, counts);
  check_folds<std::uint16_t>(comm, counts);
  check_folds<std::uint32_t>(comm, counts);
  check_folds<std::uint64_t>(comm, counts);
  check_folds<char>(comm, {7});  // never reduced: every call refuses it
  check_folds<tnt::ValueIndex<float>>(comm, counts);
  check_folds<tnt::ValueIndex<double>>(comm, with_large);
  check_folds<tnt::ValueIndex<std::int32_t>>(comm, counts);
  check_folds<tnt::ValueIndex<std::int64_t>>(comm, counts);
  check_exchanges_in_flight(comm);
  // Refusals name the call and what is wrong.
  char byte = 0;
  ++checks;
  try {
    comm.scan(&byte, &byte, 1, DataType::float32, ReduceOp::avg);
    report("scan with avg was not refused");
  } catch (const tnt::ConfigError& e) {
    if (std::string(e.what()).find("scan: avg") == std::string::npos) report(std::string("scan refusal: ") + e.what());
  }
  ++checks;
  try {
    comm.gather(&byte, &byte, 1, n);
    report("gather to a root that is no rank was not refused");
  } catch (const tnt::ConfigError& e) {
    if (std::string(e.what()).find("gather: root " + std::to_string(n)) == std::string::npos)
      report(std::string("gather refusal: ") + e.what());
  }
}

int run_more_collectives(tnt::Communicator& comm) {
  check_more_collectives(comm, true);
  std::printf("rank %d: more collectives, %lld checks, %d failures\n", comm.rank(), checks, failures);
  return failures == 0 ? 0 : 1;
}

int run_alltoall_rounds(tnt::Communicator& comm) {
  check_alltoall(comm, 100000);
  check_alltoall(comm, 1000);
  check_alltoallv(
      comm,
      [](int s, int r) { return (s + 2 * r) % 5 == 0 ? 0 : std::size_t{70000} + static_cast<std::size_t>(s * 11 + r); },
      "alltoallv in rounds");
  std::printf("rank %d: alltoall in rounds on %d ranks, %lld checks, %d failures\n", comm.rank(), comm.size(), checks,
              failures);
  return failures == 0 ? 0 : 1;
}

// ---- Communicators of communicators -----------------------------------------------------------

// Every collective and a point-to-point ring on `comm`, checked against what its ranks hold.
void check_group(tnt::Communicator& comm, const std::string& name) {
  const int me = comm.rank();
  const int n = comm.size();
  for (std::size_t count : {std::size_t{1}, std::size_t{1000}, std::size_t{100003}}) {
    std::vector<double> data(count);
    for (std::size_t i = 0; i < count; ++i) data[i] = static_cast<double>(me + 1) * static_cast<double>(i % 97);
    comm.allreduce(data.data(), count, DataType::float64, ReduceOp::sum);
    const double ranks_sum = static_cast<double>(n * (n + 1) / 2);
    for (std::size_t i = 0; i < count; ++i) {
      if (data[i] != ranks_sum * static_cast<double>(i % 97)) {
        report(name + ": allreduce of " + std::to_string(count) + " at " + std::to_string(i));
        break;
      }
    }
    ++checks;
    std::vector<std::int32_t> gathered(static_cast<std::size_t>(n) * count);
    std::vector<std::int32_t> mine(count, me * 7 + 1);
    comm.allgather(mine.data(), gathered.data(), count * sizeof(std::int32_t));
    for (int r = 0; r < n; ++r) {
      if (gathered[static_cast<std::size_t>(r) * count + count - 1] != r * 7 + 1) report(name + ": allgather");
    }
    ++checks;
    std::vector<std::int64_t> spread(count, me == n - 1 ? 42 : 0);
    comm.broadcast(spread.data(), count * sizeof(std::int64_t), n - 1);
    if (spread.front() != 42 || spread.back() != 42) report(name + ": broadcast");
    ++checks;
  }
  comm.barrier();
  // A ring by point-to-point, received by any_source: the message must come from the left.
  const int right = (me + 1) % n;
  const int left = (me + n - 1) % n;
  const std::int32_t out = me * 11;
  std::int32_t in = -1;
  auto send = comm.isend(&out, sizeof out, right, 3);
  const auto status = comm.recv(&in, sizeof in, tnt::any_source, 3);
  send.wait();
  expect_status(status, left, 3, sizeof in, name + ": ring receive");
  if (in != left * 11) report(name + ": ring receive got " + std::to_string(in));
}

int run_split(tnt::Communicator& world) {
  const int me = world.rank();
  const int n = world.size();
  // A world collective in flight while the new communicators are made and used.
  std::vector<float> big((std::size_t{1} << 20) + 3, 1.0f);
  auto world_sum = world.allreduce_async(big.data(), big.size(), DataType::float32, ReduceOp::sum);

  // Two colors (even and odd world ranks), keys reversed: rank order in each is descending.
  auto half = world.split(me % 2, -me);
  ++checks;
  if (!half) {
    report("split gave no communicator for a color >= 0");
    return 1;
  }
  const int color_size = (n + 1 - me % 2) / 2;
  const int expected_rank = color_size - 1 - me / 2;
  ++checks;
  if (half->size() != color_size || half->rank() != expected_rank) {
    report("split: rank " + std::to_string(half->rank()) + " of " + std::to_string(half->size()) + ", want " +
           std::to_string(expected_rank) + " of " + std::to_string(color_size));
  }
  // The ranks of a color in its order are its world ranks in descending order (keys reversed).
  std::vector<std::int32_t> members(static_cast<std::size_t>(half->size()));
  const std::int32_t world_rank = me;
  half->allgather(&world_rank, members.data(), sizeof world_rank);
  const int highest = (n - 1) - ((n - 1) % 2 != me % 2 ? 1 : 0);
  for (int r = 0; r < half->size(); ++r) {
    ++checks;
    if (members[static_cast<std::size_t>(r)] != highest - 2 * r)
      report("split color " + std::to_string(me % 2) + ": its rank " + std::to_string(r) + " is world rank " +
             std::to_string(members[static_cast<std::size_t>(r)]) + ", want " + std::to_string(highest - 2 * r));
  }
  check_group(*half, "split color " + std::to_string(me % 2));
  // Everything the world does, on each color, with world collectives in flight beside it: the
  // first allreduce, and an alltoall issued here.
  const std::size_t world_each = 4096;
  std::vector<std::byte> world_out(static_cast<std::size_t>(n) * world_each);
  std::vector<std::byte> world_in(world_out.size());
  for (int r = 0; r < n; ++r) {
    const auto block = pattern(me, 500 + r, world_each);
    std::copy(block.begin(), block.end(),
              world_out.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * world_each));
  }
  auto world_exchange = world.alltoall_async(world_out.data(), world_in.data(), world_each);
  report_context = "split color " + std::to_string(me % 2) + ": ";
  check_type<float>(*half, {0, 7, 1000, 12345});
  check_type<std::int64_t>(*half, {0, 7, 1000});
  check_data_movement(*half);
  check_more_collectives(*half, false);
  check_p2p_sizes(*half, {0, 1, 4096, 16 * 1024 + 1, 1 << 20});
  check_p2p_semantics(*half);
  report_context.clear();
  world_exchange.wait();
  for (int r = 0; r < n; ++r) {
    std::vector<std::byte> got(
        world_in.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * world_each),
        world_in.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r + 1) * world_each));
    expect_pattern(got, world_each, r, 500 + me, "world alltoall beside the split's, from rank " + std::to_string(r));
  }
  // A negative color gives none, and the ranks that asked for one still agree on the rest.
  auto none = world.split(me == 0 ? -1 : 0, 0);
  ++checks;
  if ((me == 0) != !none.has_value()) report("split with a negative color");
  if (none) check_group(*none, "split without rank 0");

  world_sum.wait();
  ++checks;
  if (big.front() != static_cast<float>(n) || big.back() != static_cast<float>(n)) report("world allreduce beside");

  // dup isolates a library's traffic: the "library" and the application use the same peers and
  // tags at once; each receives only its own messages.
  auto library = world.dup();
  const int right = (me + 1) % n;
  const int left = (me + n - 1) % n;
  std::int32_t from_app = -1;
  std::int32_t from_library = -1;
  auto library_receive = library.irecv(&from_library, 4, tnt::any_source, 9);
  const std::int32_t app_out = 1000 + me;
  const std::int32_t library_out = 2000 + me;
  world.send(&app_out, 4, right, 9);
  world.recv(&from_app, 4, left, 9);
  library.send(&library_out, 4, right, 9);
  library_receive.wait();
  ++checks;
  if (from_app != 1000 + left || from_library != 2000 + left)
    report("dup: the application got " + std::to_string(from_app) + " and the library " + std::to_string(from_library));
  check_group(library, "dup");
  // Collectives on the dup and the world, interleaved, match their own.
  std::int64_t a = me;
  std::int64_t b = 10 * me;
  auto on_library = library.allreduce_async(&b, 1, DataType::int64, ReduceOp::sum);
  world.allreduce(&a, 1, DataType::int64, ReduceOp::sum);
  on_library.wait();
  ++checks;
  if (a != n * (n - 1) / 2 || b != 10LL * n * (n - 1) / 2) report("interleaved world and dup allreduces");

  // Note [Retired engines]: rank 0 sends rank 1 12 eager messages on a dup (its sends complete at
  // once, the data still being written) and destroys the dup at once; rank 1 receives them after
  // that, bitwise, and gives the credit they cost back (64 KiB at a time) to a rank whose dup is
  // gone, while the world's allreduces run there.
  if (n > 1) {
    constexpr int kMessages = 12;
    std::optional<tnt::Communicator> short_lived = world.dup();
    const auto chunk = pattern(0, 40, 16 * 1024);
    if (me == 0) {
      for (int i = 0; i < kMessages; ++i) short_lived->send(chunk.data(), chunk.size(), 1, 40);
    }
    if (me != 1) short_lived.reset();
    // Rank 1 reads nothing meanwhile: what the socket or ring cannot take waits in rank 0's
    // channel, to be written after the dup is gone.
    if (me == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    world.barrier();
    if (me == 1) {
      std::vector<std::byte> in(chunk.size());
      for (int i = 0; i < kMessages; ++i) {
        short_lived->recv(in.data(), in.size(), 0, 40);
        ++checks;
        if (in != chunk) report("message " + std::to_string(i) + " on a dup its sender destroyed");
      }
      short_lived.reset();
    }
    std::vector<std::int64_t> values(1000, me);
    for (int round = 0; round < 3; ++round) {
      world.allreduce(values.data(), values.size(), DataType::int64, ReduceOp::sum);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::printf("rank %d: split, %lld checks, %d failures\n", me, checks, failures);
  return failures == 0 ? 0 : 1;
}

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
      check_bfloat16_bitwise(comm);
      check_bfloat16_partial_sums(comm);
      check_new_types(comm);
      check_async(comm, 1000);
      check_async(comm, (std::size_t{1} << 20) + 3);
      check_data_movement(comm);
      check_progress(comm);
      check_p2p_progress(comm);
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
    if (mode == "split") return run_split(comm);
    if (mode == "p2p-huge") return run_p2p_huge(comm);
    if (mode == "p2p-flood") return run_p2p_flood(comm, std::stod(option(argc, argv, "--seconds", "10")));
    if (mode == "p2p-wait") {
      // Every rank but --quiet-rank waits in a receive from it; it sends nothing and waits.
      const int quiet = std::stoi(option(argc, argv, "--quiet-rank", "1"));
      std::printf("running rank=%d pid=%d\n", comm.rank(), static_cast<int>(getpid()));
      std::fflush(stdout);
      std::int32_t value = 0;
      if (comm.rank() == quiet) {
        std::this_thread::sleep_for(std::chrono::hours(1));
        return 0;
      }
      comm.recv(&value, sizeof value, quiet, 1);
      return 0;
    }
    if (mode == "more") return run_more_collectives(comm);
    if (mode == "alltoall-rounds") return run_alltoall_rounds(comm);
    if (mode == "p2p") return run_p2p(comm, option(argc, argv, "--large", "0") == "1");
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
