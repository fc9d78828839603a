// Two ranks, as two Communicators on two threads of this process, running collectives over the
// real InfiniBand back end (ib_transport.cpp) with fake_verbs.cpp standing in for libibverbs.
// This runs the back end's own code — device and port choice, the authenticated set-up, queue
// pair state changes, work requests, completion events through the completion channel's fd —
// on a machine without an RDMA device. It cannot show that real drivers and HCAs behave as the
// fake does; that needs tnt-ib-job-test on a machine with a device.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "job.h"
#include "tnt/collectives/communicator.h"
#include "tnt/transport/event_loop.h"
#include "tnt/transport/transport.h"

extern "C" void fake_verbs_fail_send_after(long count);  // fake_verbs.cpp

namespace tnt::test {
namespace {

using namespace std::chrono_literals;

// spdlog's registry is made on its first use, inside Debian's libspdlog, which ThreadSanitizer
// does not instrument: it cannot see the guard of that first use, and reported the two in-process
// ranks' first log calls as a data race. Used here first, before any rank's thread starts.
[[maybe_unused]] const spdlog::logger* const kLoggerMadeBeforeAnyRank = spdlog::default_logger_raw();

struct FabricCase {
  const char* name;
  std::vector<std::pair<std::string, std::string>> env;  // TNT_IB_* settings
  std::size_t segment_bytes;
  std::size_t small_allreduce_bytes;
};

void PrintTo(const FabricCase& c, std::ostream* out) { *out << c.name; }

// Settings from the environment the test runs in must not leak into it.
void clear_ib_settings() {
  for (const char* name : {"TNT_IB_DEVICE", "TNT_IB_PORT", "TNT_IB_GID_INDEX", "TNT_IB_EAGER_KB", "TNT_IB_BUFFERS",
                           "TNT_IB_REG_CACHE_MB", "TNT_FAKE_VERBS_ROCE"}) {
    ::unsetenv(name);
  }
}

class IbFakeFabric : public ::testing::TestWithParam<FabricCase> {
 protected:
  void TearDown() override { clear_ib_settings(); }
  void SetUp() override {
    clear_ib_settings();
    for (const auto& [name, value] : GetParam().env) ::setenv(name.c_str(), value.c_str(), 1);
  }
};

// Integer-valued floats: sums are exact, so results compare bitwise.
float value(int rank, std::size_t i) {
  return static_cast<float>(static_cast<int>((i * 7919 + rank * 104729) % 2001) - 1000);
}

JobEnvironment rank_env(int rank, int port) {
  JobEnvironment env;
  env.rank = rank;
  env.size = 2;
  env.local_rank = rank;
  env.local_size = 2;
  env.master_addr = "127.0.0.1";
  env.master_port = static_cast<std::uint16_t>(port);
  env.job_id = "fake-fabric";
  env.job_token = "fake-fabric-token-0123456789abcdef";
  env.transport = "ib";
  env.shared_memory = false;  // both ranks are on this host: keep them on the (fake) fabric
  env.connect_timeout = 20s;
  env.peer_timeout = 10s;
  return env;
}

void run_rank(int rank, int port, const FabricCase& setting, std::string& error, long& checks) {
  try {
    CommunicatorOptions options;
    options.environment = rank_env(rank, port);
    options.configuration = "fake fabric test";
    options.segment_bytes = setting.segment_bytes;
    options.small_allreduce_bytes = setting.small_allreduce_bytes;
    Communicator comm(options);

    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{100003},
                              (std::size_t{1} << 20) + 3}) {
      std::vector<float> data(count);
      for (std::size_t i = 0; i < count; ++i) data[i] = value(rank, i);
      comm.allreduce(data.data(), count, DataType::float32, ReduceOp::sum);
      for (std::size_t i = 0; i < count; ++i, ++checks) {
        if (data[i] != value(0, i) + value(1, i))
          throw Error("allreduce of " + std::to_string(count) + " floats wrong at " + std::to_string(i));
      }
    }
    // Several operations in flight at once.
    std::vector<std::vector<std::int64_t>> buffers(4);
    std::vector<Request> requests;
    for (std::size_t k = 0; k < buffers.size(); ++k) {
      buffers[k].assign(50000 * (k + 1), 0);
      for (std::size_t i = 0; i < buffers[k].size(); ++i) buffers[k][i] = static_cast<std::int64_t>(i * (rank + 1) + k);
      requests.push_back(comm.allreduce_async(buffers[k].data(), buffers[k].size(), DataType::int64, ReduceOp::max));
    }
    for (auto& request : requests) request.wait();
    for (std::size_t k = 0; k < buffers.size(); ++k) {
      for (std::size_t i = 0; i < buffers[k].size(); ++i, ++checks) {
        if (buffers[k][i] != static_cast<std::int64_t>(i * 2 + k))
          throw Error("async allreduce " + std::to_string(k) + " wrong at " + std::to_string(i));
      }
    }
    std::vector<std::uint8_t> broadcast((3 << 20) + 5);
    for (std::size_t i = 0; i < broadcast.size(); ++i)
      broadcast[i] = static_cast<std::uint8_t>(rank == 1 ? i * 31 : 0xEE);
    comm.broadcast(broadcast.data(), broadcast.size(), 1);
    for (std::size_t i = 0; i < broadcast.size(); ++i, ++checks) {
      if (broadcast[i] != static_cast<std::uint8_t>(i * 31)) throw Error("broadcast wrong at " + std::to_string(i));
    }
    comm.barrier();
    // Point-to-point over the verbs back end (Note [Point-to-point]), both ways at once, across
    // its eager limit and the back end's.
    const int other = 1 - rank;
    for (std::size_t bytes :
         {std::size_t{0}, std::size_t{1}, std::size_t{4096}, std::size_t{20000}, (std::size_t{1} << 20) + 7}) {
      std::vector<std::uint8_t> out(bytes);
      std::vector<std::uint8_t> in(bytes + 1);
      for (std::size_t i = 0; i < bytes; ++i)
        out[i] = static_cast<std::uint8_t>(i * 13 + static_cast<std::size_t>(rank));
      Request receive = comm.irecv(in.data(), in.size(), any_source, 7);
      comm.send(out.data(), bytes, other, 7);
      receive.wait();
      const MessageStatus status = receive.status();
      if (status.source != other || status.tag != 7 || status.bytes != bytes)
        throw Error("point-to-point status wrong for " + std::to_string(bytes) + " bytes");
      for (std::size_t i = 0; i < bytes; ++i, ++checks) {
        if (in[i] != static_cast<std::uint8_t>(i * 13 + static_cast<std::size_t>(other)))
          throw Error("point-to-point message of " + std::to_string(bytes) + " bytes wrong at " + std::to_string(i));
      }
    }
    // The exchanges (Note [Exchanges]) over the same back end, below and above its eager limit.
    for (std::size_t block : {std::size_t{3}, std::size_t{40000}}) {
      std::vector<std::int32_t> mine(2 * block), got(2 * block), expected(2 * block);
      for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<std::int32_t>(rank * 1000003 + i);
      comm.alltoall(mine.data(), got.data(), block * sizeof(std::int32_t));
      for (int from = 0; from < 2; ++from)
        for (std::size_t j = 0; j < block; ++j)
          expected[from * block + j] = static_cast<std::int32_t>(from * 1000003 + rank * block + j);
      if (got != expected) throw Error("alltoall of " + std::to_string(block) + " ints per rank wrong");
      std::vector<std::int32_t> sum(block), prefix(block);
      comm.reduce(mine.data(), sum.data(), block, DataType::int32, ReduceOp::sum, 1);
      comm.scan(mine.data(), prefix.data(), block, DataType::int32, ReduceOp::sum);
      for (std::size_t j = 0; j < block; ++j, ++checks) {
        const auto first = static_cast<std::int32_t>(j);
        const auto both = static_cast<std::int32_t>(2 * j + 1000003);
        if (rank == 1 && sum[j] != both) throw Error("reduce wrong at " + std::to_string(j));
        if (prefix[j] != (rank == 0 ? first : both)) throw Error("scan wrong at " + std::to_string(j));
      }
      for (int root : {0, 1}) {  // each rank checks once, so both count alike
        comm.gather(mine.data(), got.data(), block * sizeof(std::int32_t), root);
        if (rank != root) continue;
        for (int from = 0; from < 2; ++from)
          for (std::size_t j = 0; j < block; ++j, ++checks)
            if (got[from * block + j] != static_cast<std::int32_t>(from * 1000003 + j))
              throw Error("gather to " + std::to_string(root) + " wrong at " + std::to_string(j));
      }
    }
    // A dup carries the same tags as the world, both in flight at once, without a mix-up.
    Communicator library = comm.dup();
    std::vector<std::uint8_t> world_in(5000), library_in(5000), world_out(5000, 0x11), library_out(5000, 0x22);
    Request world_receive = comm.irecv(world_in.data(), world_in.size(), other, 9);
    Request library_receive = library.irecv(library_in.data(), library_in.size(), other, 9);
    library.send(library_out.data(), library_out.size(), other, 9);
    comm.send(world_out.data(), world_out.size(), other, 9);
    world_receive.wait();
    library_receive.wait();
    if (world_in != world_out || library_in != library_out) throw Error("a dup's message reached the world");
    checks += 2;
  } catch (const std::exception& e) {
    error = e.what();
  }
}

TEST_P(IbFakeFabric, TwoRankCollectivesOverTheVerbsBackEnd) {
  const int port = free_port();
  std::string errors[2];
  long checks[2] = {0, 0};
  std::thread rank1(run_rank, 1, port, std::cref(GetParam()), std::ref(errors[1]), std::ref(checks[1]));
  run_rank(0, port, GetParam(), errors[0], checks[0]);
  rank1.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_GT(checks[0], 1'000'000);
  EXPECT_EQ(checks[0], checks[1]);
}

INSTANTIATE_TEST_SUITE_P(
    Settings, IbFakeFabric,
    ::testing::Values(
        FabricCase{"defaults", {}, 0, std::size_t(-1)}, FabricCase{"eager_only", {}, 1024, 0},
        FabricCase{"rendezvous_only", {{"TNT_IB_EAGER_KB", "0"}, {"TNT_IB_BUFFERS", "4"}}, 64 * 1024, 0},
        FabricCase{"roce", {{"TNT_FAKE_VERBS_ROCE", "1"}}, 0, std::size_t(-1)},
        FabricCase{"rendezvous_cached", {{"TNT_IB_EAGER_KB", "1"}, {"TNT_IB_REG_CACHE_MB", "64"}}, 256 * 1024, 0}),
    [](const auto& test_info) { return std::string(test_info.param.name); });

// Note [Lingering work] in event_loop.cpp: a standard send that goes eagerly at tnt's level
// completes at once, but with TNT_IB_EAGER_KB=1 its 5000 bytes go by the verbs back end's own
// rendezvous, which needs the sender's loop once more. The sender then computes, calling nothing,
// for longer than the receiver waits: the message must still arrive, and so must the one sent
// just before the sender frees the communicator it went on.
TEST(IbFakeFabricProgress, EagerSendArrivesWhileTheSenderCallsNothing) {
  clear_ib_settings();
  ::setenv("TNT_IB_EAGER_KB", "1", 1);
  const int port = free_port();
  std::string errors[2];
  auto rank_main = [&](int rank) {
    try {
      CommunicatorOptions options;
      options.environment = rank_env(rank, port);
      options.configuration = "fake fabric progress";
      Communicator comm(options);
      std::vector<std::uint8_t> message(5000);
      for (int round = 0; round < 3; ++round) {
        Communicator library = comm.dup();
        if (rank == 1) {
          std::fill(message.begin(), message.end(), static_cast<std::uint8_t>(round + 1));
          comm.send(message.data(), message.size(), 0, round);
          library.send(message.data(), message.size(), 0, round);
          std::this_thread::sleep_for(1500ms);  // computing: no tnt call while rank 0 waits
        } else {
          std::vector<std::uint8_t> world_in(5000), library_in(5000);
          Request receive = comm.irecv(world_in.data(), world_in.size(), 1, round);
          if (!receive.wait_for(1000ms)) {
            const std::string what = "round " + std::to_string(round) + ": the message never came";
            comm.abort(what);  // ends the pending receive, and rank 1's job, instead of waiting on
            throw Error(what);
          }
          library.recv(library_in.data(), library_in.size(), 1, round);
          if (world_in != std::vector<std::uint8_t>(5000, static_cast<std::uint8_t>(round + 1)) ||
              library_in != world_in)
            throw Error("round " + std::to_string(round) + ": the message is wrong");
        }
      }
    } catch (const std::exception& e) {
      errors[rank] = e.what();
    }
  };
  std::thread rank1(rank_main, 1);
  rank_main(0);
  rank1.join();
  clear_ib_settings();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

// A work request fails in the middle of the job, as when a link or a peer dies: both ranks must
// fail promptly with an error that names the other rank, never hang.
TEST(IbFakeFabricFailure, FailedWorkRequestFailsBothRanks) {
  clear_ib_settings();
  const int port = free_port();
  std::string errors[2];
  auto rank_main = [&](int rank) {
    try {
      CommunicatorOptions options;
      options.environment = rank_env(rank, port);
      options.configuration = "fake fabric failure";
      Communicator comm(options);
      if (rank == 0) fake_verbs_fail_send_after(200);
      comm.barrier();  // both ranks past set-up before the countdown matters
      std::vector<float> data(1 << 18, 1.0f);
      for (int i = 0; i < 1000; ++i) comm.allreduce(data.data(), data.size(), DataType::float32, ReduceOp::sum);
      errors[rank] = "no error after 1000 allreduces";
    } catch (const JobError& e) {
      errors[rank] = std::string("JobError: ") + e.what();
    } catch (const std::exception& e) {
      errors[rank] = std::string("unexpected: ") + e.what();
    }
  };
  const auto start = std::chrono::steady_clock::now();
  std::thread rank1(rank_main, 1);
  rank_main(0);
  rank1.join();
  fake_verbs_fail_send_after(-1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(errors[rank].rfind("JobError: ", 0), 0u) << errors[rank];
    EXPECT_NE(errors[rank].find("rank " + std::to_string(1 - rank)), std::string::npos) << errors[rank];
  }
  // Which report reaches the master first (the failed work request on rank 0, or rank 1 seeing
  // rank 0 close the channel) is a race, so the wording of the verdict is not checked here.
}

// The Transport interface directly: a message each way through the pairs, then one side goes
// away. The other must report exactly one error, naming the lost rank, and nothing after close().
TEST(IbFakeFabricTransport, LostPeerIsReportedOnceByName) {
  clear_ib_settings();
  transport::EventLoop loop0;
  transport::EventLoop loop1;
  auto t0 = transport::make_transport(loop0, rank_env(0, 1));
  auto t1 = transport::make_transport(loop1, rank_env(1, 1));
  const std::vector<transport::PeerAddress> book = {{0, "host0", t0->listen("127.0.0.1")},
                                                    {1, "host1", t1->listen("127.0.0.1")}};
  std::thread connect1([&] { t1->connect(book, {0}); });
  t0->connect(book, {1});
  connect1.join();

  struct Sink final : transport::CompletionSink {
    std::atomic<int> sent{0};
    std::atomic<int> received{0};
    std::atomic<std::size_t> bytes{0};
    void on_send_complete(std::uint64_t) override { ++sent; }
    void on_recv_complete(std::uint64_t, std::size_t n) override {
      bytes = n;
      ++received;
    }
  } sink0, sink1;
  std::vector<std::uint8_t> small_out(100, 7), small_in(100), large_out(1 << 20), large_in(1 << 20);
  for (std::size_t i = 0; i < large_out.size(); ++i) large_out[i] = static_cast<std::uint8_t>(i * 13);
  boost::asio::post(t0->executor(), [&] {
    t0->pair(1).send(tnt::transport::Tag{1}, small_out.data(), small_out.size(), sink0, 0);
    t0->pair(1).recv(tnt::transport::Tag{2}, large_in.data(), large_in.size(), sink0, 0);
  });
  boost::asio::post(t1->executor(), [&] {
    t1->pair(0).recv(tnt::transport::Tag{1}, small_in.data(), small_in.size(), sink1, 0);
    t1->pair(0).send(tnt::transport::Tag{2}, large_out.data(), large_out.size(), sink1, 0);
  });
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while ((sink0.sent + sink0.received + sink1.sent + sink1.received < 4) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(sink0.sent + sink0.received + sink1.sent + sink1.received, 4);
  EXPECT_EQ(small_in, small_out);
  EXPECT_EQ(large_in, large_out);

  std::mutex mutex;
  std::vector<std::string> reports;
  std::promise<void> first;
  t0->set_error_handler([&](int peer, const std::string& message) {
    std::lock_guard lock(mutex);
    reports.push_back(std::to_string(peer) + ": " + message);
    if (reports.size() == 1) first.set_value();
  });
  t1.reset();  // closes its side of every channel
  ASSERT_EQ(first.get_future().wait_for(5s), std::future_status::ready);
  t0.reset();  // close() and wait for every handler: any later report would have come by now
  std::lock_guard lock(mutex);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].rfind("1: the connection to rank 1 (host1, 127.0.0.1:", 0), 0u) << reports[0];
}

}  // namespace
}  // namespace tnt::test
