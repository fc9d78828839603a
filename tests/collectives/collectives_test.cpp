// Multi-process tests of the Communicator over loopback: results against a serial reference,
// and every way a job can go wrong ending in a clear error, never a hang.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <set>

#include "job.h"

namespace tnt::test {
namespace {

using namespace std::chrono_literals;

const std::string kWorker = TNT_TEST_WORKER;
const std::string kBadPeer = TNT_TEST_BAD_PEER;
const std::string kLaunch = TNT_LAUNCH_BIN;

std::string describe(const std::vector<Outcome>& outcomes) {
  std::string text;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    text += "--- process " + std::to_string(i) + ": exit " + std::to_string(outcomes[i].exit_code) + " signal " +
            std::to_string(outcomes[i].signal) + (outcomes[i].timed_out ? " TIMED OUT" : "") + "\n" +
            outcomes[i].output;
  }
  return text;
}

// ---- correctness -------------------------------------------------------------------------------

struct CheckCase {
  int ranks;
  bool ring_only;   // force the ring with tiny segments, also for small buffers
  bool shm = true;  // false: TNT_SHM=0, so ranks on this host talk TCP
  // > 0: the ranks form this many virtual hosts (TNT_VIRTUAL_HOSTS) and every allreduce and
  // allgather is forced onto the hierarchical path; with ring_only its rings use tiny segments.
  int virtual_hosts = 0;
  // true: TNT_SHM_SINGLE_COPY_KB=64 (the default is 0, every message through the ring), and every
  // allreduce gathers whole buffers (up to 4 MiB), so large messages are read from the sender
  // instead of passing the shared-memory ring in chunks (Note [Single copy]).
  bool single_copy = false;
};

class CollectivesCheck : public ::testing::TestWithParam<CheckCase> {};

TEST_P(CollectivesCheck, MatchSerialReference) {
  const auto [ranks, ring_only, shm, virtual_hosts, single_copy] = GetParam();
  Job job(ranks);
  Job::Env env;
  if (ring_only) {
    env = {{"TNT_SMALL_ALLREDUCE_KB", "0"},
           {"TNT_SEGMENT_KB", "1"},
           {"TNT_PIPELINE_DEPTH", "3"},
           {"TNT_HOST_ALLREDUCE_KB", "0"}};
  }
  env["TNT_SHM"] = shm ? "1" : "0";
  if (single_copy) {
    env["TNT_SHM_SINGLE_COPY_KB"] = "64";
    env["TNT_SMALL_ALLREDUCE_KB"] = "16384";
  }
  if (virtual_hosts > 0) {
    env["TNT_VIRTUAL_HOSTS"] = std::to_string(virtual_hosts);
    env["TNT_ALLREDUCE_ALGORITHM"] = "hierarchical";
    env["TNT_ALLGATHER_ALGORITHM"] = "hierarchical";
    // Each rank says once that it took the hierarchical path, and over which hosts.
    env["TNT_LOG_LEVEL"] = "DEBUG";
    env["TNT_LOG_ON_ALL_DEVICES"] = "1";
  }
  job.start_all({kWorker, "check"}, env);
  auto outcomes = job.wait(240s);
  // The worker checks every element of each allreduce against the serial reference: 5 types,
  // 4 ops, its largest buffer alone is (1 << 20) + 3 elements.
  constexpr long long kAtLeast = 5LL * 4 * ((1LL << 20) + 3);
  const int hosts = std::min(virtual_hosts, ranks);
  const std::string hierarchy =
      "hierarchical collectives: " + std::to_string(hosts) + " hosts x " + std::to_string(ranks / std::max(hosts, 1));
  for (const auto& outcome : outcomes) {
    EXPECT_TRUE(outcome.exited && outcome.exit_code == 0) << describe(outcomes);
    EXPECT_NE(outcome.output.find(" 0 failures"), std::string::npos) << outcome.output;
    EXPECT_GE(checks_reported(outcome.output), kAtLeast) << outcome.output;
    if (virtual_hosts > 0) {
      EXPECT_NE(outcome.output.find(hierarchy), std::string::npos) << outcome.output;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, CollectivesCheck,
    ::testing::Values(CheckCase{1, false}, CheckCase{2, false}, CheckCase{3, false}, CheckCase{4, false},
                      CheckCase{2, true}, CheckCase{3, true}, CheckCase{4, true}, CheckCase{2, false, false},
                      CheckCase{3, false, false}, CheckCase{4, false, false}, CheckCase{2, true, false},
                      CheckCase{3, true, false}, CheckCase{4, true, false},
                      // The hierarchical paths: 2 hosts x 2 ranks, and the degenerate layouts
                      // (one rank per host, one host) that the same code must get right.
                      CheckCase{4, false, true, 2}, CheckCase{4, true, true, 2}, CheckCase{4, false, false, 2},
                      CheckCase{2, false, true, 2}, CheckCase{3, true, true, 3}, CheckCase{3, false, true, 1},
                      CheckCase{2, false, true, 0, true}),
    [](const auto& test_info) {
      const CheckCase& c = test_info.param;
      return std::to_string(c.ranks) + "ranks" +
             (c.virtual_hosts > 0 ? "_" + std::to_string(c.virtual_hosts) + "hosts_hierarchical" : "") +
             (c.ring_only ? (c.virtual_hosts > 0 ? "_small_segments" : "_ring_only") : "") + (c.shm ? "" : "_tcp") +
             (c.single_copy ? "_shm_single_copy" : "");
    });

// Note [One world per process]: two Communicators built from the environment in one process are
// the same world (before, the second master bound TNT_MASTER_PORT again and failed).
TEST(World, TwoCommunicatorsFromTheEnvironmentAreOneWorld) {
  Job job(3);
  job.start_all({kWorker, "two-worlds"});
  for (const auto& outcome : job.wait(60s)) {
    EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
    EXPECT_NE(outcome.output.find("two worlds, 4 checks, 0 failures"), std::string::npos) << outcome.output;
  }
}

// ---- point-to-point ----------------------------------------------------------------------------

struct P2pCase {
  int ranks;
  bool shm;
  std::string eager_kb;   // TNT_P2P_EAGER_KB
  int virtual_hosts = 0;  // > 0: ranks on different virtual hosts talk TCP, on one host shared memory
  std::string credit_kb;  // TNT_P2P_CREDIT_KB, where set
};

class PointToPoint : public testing::TestWithParam<P2pCase> {};

// Note [Point-to-point]: every size across the eager limit between every pair and to itself,
// wildcards, ordering, probes, synchronous sends, truncation, 1000 requests, refusals.
TEST_P(PointToPoint, MatchesMpiSemantics) {
  const P2pCase& c = GetParam();
  Job job(c.ranks);
  Job::Env env = {{"TNT_P2P_EAGER_KB", c.eager_kb}};
  if (!c.shm) env["TNT_SHM"] = "0";
  if (c.virtual_hosts) env["TNT_VIRTUAL_HOSTS"] = std::to_string(c.virtual_hosts);
  if (!c.credit_kb.empty()) env["TNT_P2P_CREDIT_KB"] = c.credit_kb;
  job.start_all({kWorker, "p2p", "--large", "1"}, env);
  for (const auto& outcome : job.wait(180s)) {
    EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
    EXPECT_NE(outcome.output.find(", 0 failures"), std::string::npos) << outcome.output;
    EXPECT_GE(checks_reported(outcome.output), 1500) << outcome.output;  // 1000 requests and 300 in order
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, PointToPoint,
                         testing::Values(P2pCase{1, true, "16"}, P2pCase{2, true, "16"}, P2pCase{3, true, "16"},
                                         P2pCase{4, true, "16"}, P2pCase{2, false, "16"}, P2pCase{4, false, "16"},
                                         P2pCase{2, true, "0"}, P2pCase{4, true, "16", 2},
                                         // No limit given: 64 KiB over TCP, 16 over shared memory,
                                         // both in one job (Note [Eager over TCP]).
                                         P2pCase{2, false, ""}, P2pCase{4, true, "", 2},
                                         // Credit and an eager limit for more eager data than a
                                         // lane holds: the ordering part's 300 messages (2.2 MB)
                                         // wait for room, in order (Note [Fast lane]).
                                         P2pCase{2, true, "64", 0, "8192"}, P2pCase{3, true, "64", 0, "8192"}),
                         [](const auto& param_info) {
                           const P2pCase& c = param_info.param;
                           return std::to_string(c.ranks) + "ranks" + (c.shm ? "" : "_tcp") +
                                  (c.virtual_hosts ? "_" + std::to_string(c.virtual_hosts) + "hosts" : "") +
                                  (c.eager_kb == "0" ? "_rendezvous_only" : "") +
                                  (c.eager_kb.empty() ? "_default_eager" : "") +
                                  (c.credit_kb.empty() ? ""
                                                       : "_eager_" + c.eager_kb + "kb_credit_" + c.credit_kb + "kb");
                         });

// ---- the rest of MPI's collectives ----------------------------------------------------------------

class MoreCollectives : public testing::TestWithParam<P2pCase> {};

// Note [Exchanges]: every new collective against a serial reference, every root, uneven counts
// with zeros, sizes 0, 1, 7, 1000 and 2^20 + 3 (of the reductions, for float64, float64-int32
// pairs and int64's prod, logical_or and bit_xor), every operation of every type (the reductions are the fold in rank
// order) and the refusal of every pair that cannot be reduced; the nonblocking forms all in
// flight at once; in-place scan, reduce and gather.
TEST_P(MoreCollectives, MatchSerialReference) {
  const P2pCase& c = GetParam();
  Job job(c.ranks);
  Job::Env env = {{"TNT_P2P_EAGER_KB", c.eager_kb}};
  if (!c.shm) env["TNT_SHM"] = "0";
  job.start_all({kWorker, "more"}, env);
  for (const auto& outcome : job.wait(180s)) {
    EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
    EXPECT_NE(outcome.output.find(", 0 failures"), std::string::npos) << outcome.output;
    EXPECT_GE(checks_reported(outcome.output), 15000000) << outcome.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, MoreCollectives,
                         testing::Values(P2pCase{1, true, "16"}, P2pCase{2, true, "16"}, P2pCase{3, true, "16"},
                                         P2pCase{4, true, "16"}, P2pCase{4, false, "0"}),
                         [](const auto& param_info) {
                           const P2pCase& c = param_info.param;
                           return std::to_string(c.ranks) + "ranks" + (c.shm ? "" : "_tcp") +
                                  (c.eager_kb == "0" ? "_rendezvous_only" : "");
                         });

// ---- communicators of communicators ------------------------------------------------------------

struct SplitCase {
  int ranks;
  bool shm;
  int virtual_hosts = 0;
};

class Split : public testing::TestWithParam<SplitCase> {};

// Note [World and groups]: 7 ranks split into colors of 4 and 3 with reversed keys (each color's
// order checked against the world's), every collective (allreduce, reduce_scatter, broadcast,
// allgather, barrier, and the whole MoreCollectives check but its 2^20 + 3 sizes) and
// point-to-point (sizes and MPI's rules) on each against a serial reference, with a world
// allreduce and alltoall in flight; a dup carries the same tags as the world without a mix-up.
TEST_P(Split, EveryOperationWorksOnSubCommunicators) {
  const SplitCase& c = GetParam();
  Job job(c.ranks);
  Job::Env env;
  if (!c.shm) env["TNT_SHM"] = "0";
  if (c.virtual_hosts) {
    env["TNT_VIRTUAL_HOSTS"] = std::to_string(c.virtual_hosts);
    env["TNT_ALLREDUCE_ALGORITHM"] = "hierarchical";
  }
  job.start_all({kWorker, "split"}, env);
  for (const auto& outcome : job.wait(180s)) {
    EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
    EXPECT_NE(outcome.output.find(", 0 failures"), std::string::npos) << outcome.output;
    EXPECT_GE(checks_reported(outcome.output), 1000000) << outcome.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, Split,
                         testing::Values(SplitCase{7, true}, SplitCase{7, false}, SplitCase{4, false},
                                         SplitCase{2, true}, SplitCase{8, true, 2}),
                         [](const auto& param_info) {
                           const SplitCase& c = param_info.param;
                           return std::to_string(c.ranks) + "ranks" + (c.shm ? "" : "_tcp") +
                                  (c.virtual_hosts ? "_" + std::to_string(c.virtual_hosts) + "hosts" : "");
                         });

// ---- start-up refusals -------------------------------------------------------------------------

Job::Env quick(Job::Env env) {
  env["TNT_CONNECT_TIMEOUT_S"] = "3";
  env["TNT_HANDSHAKE_TIMEOUT_S"] = "2";
  return env;
}

TEST(Rendezvous, WrongJobTokenIsRefused) {
  Job job(2);
  job.start({kWorker, "barrier"}, quick(job.rank_env(0)));
  auto bad = quick(job.rank_env(1));
  bad["TNT_JOB_TOKEN"] = "some-other-token-0123456789";
  job.start({kWorker, "barrier"}, bad);
  auto outcomes = job.wait(20s);
  EXPECT_NE(outcomes[0].exit_code, 0) << describe(outcomes);
  EXPECT_NE(outcomes[0].output.find("rank(s) 1 never joined"), std::string::npos) << describe(outcomes);
  EXPECT_NE(outcomes[1].exit_code, 0);
  EXPECT_NE(outcomes[1].output.find("could not prove it holds this job's token"), std::string::npos)
      << describe(outcomes);
  for (auto& o : outcomes) EXPECT_FALSE(o.timed_out);
}

TEST(Rendezvous, DuplicateRankIsRefused) {
  Job job(3);
  job.start({kWorker, "barrier"}, quick(job.rank_env(0)));
  job.start({kWorker, "barrier"}, quick(job.rank_env(1)));
  job.start({kWorker, "barrier"}, quick(job.rank_env(1)));
  auto outcomes = job.wait(20s);
  EXPECT_NE(outcomes[0].exit_code, 0) << describe(outcomes);
  EXPECT_NE(outcomes[0].output.find("duplicate rank: rank 1"), std::string::npos) << describe(outcomes);
  for (auto& o : outcomes) {
    EXPECT_FALSE(o.timed_out);
    EXPECT_NE(o.exit_code, 0) << describe(outcomes);
  }
}

TEST(Transport, UnknownCongestionControlIsAClearError) {
  Job job(2);
  Job::Env env = quick({});
  env["TNT_TCP_CONGESTION"] = "nosuchcc";
  job.start_all({kWorker, "barrier"}, env);
  auto outcomes = job.wait(20s);
  for (auto& o : outcomes) {
    EXPECT_FALSE(o.timed_out);
    EXPECT_NE(o.exit_code, 0) << describe(outcomes);
  }
  EXPECT_NE(describe(outcomes).find("TNT_TCP_CONGESTION='nosuchcc' cannot be used here"), std::string::npos)
      << describe(outcomes);
}

TEST(Rendezvous, DifferentConfigurationIsRefused) {
  Job job(2);
  job.start({kWorker, "barrier", "--config", "lr=0.1"}, quick(job.rank_env(0)));
  job.start({kWorker, "barrier", "--config", "lr=0.2"}, quick(job.rank_env(1)));
  auto outcomes = job.wait(20s);
  for (auto& o : outcomes) {
    EXPECT_NE(o.exit_code, 0) << describe(outcomes);
    EXPECT_NE(o.output.find("different run configuration"), std::string::npos) << describe(outcomes);
  }
}

TEST(Rendezvous, UnknownProtocolVersionIsRefused) {
  Job job(2);
  job.start({kWorker, "barrier"}, quick(job.rank_env(0)));
  job.start({kBadPeer, "version"}, quick(job.rank_env(1)));
  auto outcomes = job.wait(20s);
  EXPECT_NE(outcomes[0].exit_code, 0) << describe(outcomes);
  EXPECT_NE(outcomes[0].output.find("speaks tnt protocol version 99 but the master speaks 1"), std::string::npos)
      << describe(outcomes);
  EXPECT_EQ(outcomes[1].exit_code, 0) << describe(outcomes);
  EXPECT_NE(outcomes[1].output.find("refused to start the job"), std::string::npos) << describe(outcomes);
}

TEST(Rendezvous, MalformedHelloIsRefused) {
  Job job(2);
  job.start({kWorker, "barrier"}, quick(job.rank_env(0)));
  job.start({kBadPeer, "malformed"}, quick(job.rank_env(1)));
  auto outcomes = job.wait(20s);
  EXPECT_NE(outcomes[0].exit_code, 0) << describe(outcomes);
  EXPECT_NE(outcomes[0].output.find("malformed Hello"), std::string::npos) << describe(outcomes);
  EXPECT_EQ(outcomes[1].exit_code, 0) << describe(outcomes);
  EXPECT_NE(outcomes[1].output.find("refused: malformed Hello"), std::string::npos) << describe(outcomes);
}

TEST(Rendezvous, MalformedControlMessageFailsTheJobNamingItsSender) {
  Job job(2);
  job.start({kWorker, "barrier"}, quick(job.rank_env(0)));
  job.start({kBadPeer, "bad-control"}, quick(job.rank_env(1)));
  auto outcomes = job.wait(20s);
  EXPECT_NE(outcomes[0].exit_code, 0) << describe(outcomes);
  EXPECT_NE(outcomes[0].output.find("sent a malformed control message"), std::string::npos) << describe(outcomes);
  EXPECT_NE(outcomes[0].output.find("rank 1 (bad-peer"), std::string::npos) << describe(outcomes);
}

TEST(Rendezvous, OversizedHelloIsRefusedWithoutAllocating) {
  Job job(2);
  job.start({kWorker, "barrier"}, quick(job.rank_env(0)));
  job.start({kBadPeer, "oversized"}, quick(job.rank_env(1)));
  auto outcomes = job.wait(20s);
  EXPECT_NE(outcomes[0].exit_code, 0) << describe(outcomes);
  EXPECT_NE(outcomes[0].output.find("invalid length of 1073741824 bytes (limit 65536"), std::string::npos)
      << describe(outcomes);
  EXPECT_EQ(outcomes[1].exit_code, 0) << describe(outcomes);
}

TEST(Rendezvous, UnreachableMasterIsReportedWithItsAddress) {
  Job job(2);
  job.start({kWorker, "barrier"}, quick(job.rank_env(1)));  // no rank 0 listens
  auto outcomes = job.wait(20s);
  EXPECT_NE(outcomes[0].exit_code, 0);
  EXPECT_FALSE(outcomes[0].timed_out);
  EXPECT_NE(outcomes[0].output.find("cannot reach the master rank at 127.0.0.1:" + std::to_string(job.port())),
            std::string::npos)
      << describe(outcomes);
  EXPECT_LT(outcomes[0].seconds, 10);
}

TEST(Rendezvous, GarbageFloodDoesNotStopTheJob) {
  Job job(3);
  job.start({kWorker, "barrier"}, job.rank_env(0));
  job.start({kBadPeer, "flood", "300"}, job.rank_env(1));  // uses rank 1's view of the job
  ASSERT_TRUE(job.wait_for_output(1, "flooded with", 30s)) << job.output(1);
  const std::string flood = job.output(1);
  const int connected = std::stoi(flood.substr(flood.find("flooded with ") + 13));
  EXPECT_GE(connected, 290) << flood;  // the flood really reached the master
  job.start({kWorker, "barrier"}, job.rank_env(1));
  job.start({kWorker, "barrier"}, job.rank_env(2));
  auto outcomes = job.wait(60s);
  EXPECT_EQ(outcomes[1].exit_code, 0) << describe(outcomes);
  for (int i : {0, 2, 3}) {
    EXPECT_EQ(outcomes[i].exit_code, 0) << describe(outcomes);
    EXPECT_NE(outcomes[i].output.find("done"), std::string::npos) << describe(outcomes);
  }
  EXPECT_NE(outcomes[0].output.find("rendezvous: ignored connection"), std::string::npos) << describe(outcomes);
}

// ---- failures while running --------------------------------------------------------------------

// SIGKILL of rank 2 of 4 mid-allreduce: every survivor names it within 5 s. `env` chooses the
// data plane: same-host ranks use shared memory unless TNT_SHM=0, and the host board unless
// TNT_HOST_ALLREDUCE_KB=0 (`board` says which); `floats` the allreduce's size.
void expect_killed_peer_named_quickly(const Job::Env& env, bool board, const std::string& floats = "262144") {
  Job job(4);
  job.start_all({kWorker, "loop", "--floats", floats}, env);
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(job.wait_for_output(r, "running", 30s)) << job.output(r);
  for (int r = 0; r < 4; ++r) {
    EXPECT_NE(job.output(r).find(board ? "board=yes" : "board=no"), std::string::npos) << job.output(r);
  }
  std::this_thread::sleep_for(100ms);
  const auto killed_at = std::chrono::steady_clock::now();
  job.signal(2, SIGKILL);
  auto outcomes = job.wait(5s, {0, 1, 3});
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_LT(elapsed, 5.0);
  for (auto& o : outcomes) {
    EXPECT_FALSE(o.timed_out) << describe(outcomes);
    EXPECT_NE(o.exit_code, 0);
    EXPECT_NE(o.output.find("rank 2 ("), std::string::npos) << describe(outcomes);
  }
}

// Through the shared-memory channels and the event loop.
TEST(Failure, PeerKilledMidAllreduceFailsEveryRankQuickly) {
  expect_killed_peer_named_quickly({{"TNT_HOST_ALLREDUCE_KB", "0"}}, false);
}

TEST(Failure, PeerKilledMidAllreduceOverTcpFailsEveryRankQuickly) {
  expect_killed_peer_named_quickly({{"TNT_SHM", "0"}}, false);
}

// The same on the host board (Note [Host board]): no channel carries the data there, so the news
// comes through the control plane while the survivors sleep in slices.
TEST(Failure, PeerKilledMidBoardAllreduceFailsEveryRankQuickly) { expect_killed_peer_named_quickly({}, true, "1024"); }

// 4 MiB: four rounds of 1 MiB pieces each.
TEST(Failure, PeerKilledMidLargeBoardAllreduceFailsEveryRankQuickly) {
  expect_killed_peer_named_quickly({}, true, "1048576");
}

// What tnt could have left in /dev/shm: not OpenMPI's shared memory (vader_segment.*) nor LLVM
// OpenMP's registrations (__KMP_REGISTERED_LIB_*), which tests running beside this one make and
// remove (tnt itself names nothing there: its segments are memfds).
std::set<std::string> dev_shm_entries() {
  std::set<std::string> names;
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ignored)) {
    const std::string name = entry.path().filename();
    if (name.rfind("vader_segment.", 0) == 0 || name.rfind("__KMP_REGISTERED_LIB_", 0) == 0) continue;
    names.insert(name);
  }
  return names;
}

TEST(SharedMemory, SameHostRanksUseItAndLeaveNothingWhenAllAreKilled) {
  const auto before = dev_shm_entries();
  Job job(3);
  job.start_all({kWorker, "loop"}, {{"TNT_LOG_LEVEL", "DEBUG"}, {"TNT_LOG_ON_ALL_DEVICES", "1"}});
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(job.wait_for_output(r, "running", 30s)) << job.output(r);
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(job.output(r).find("through shared memory"), std::string::npos) << job.output(r);
    EXPECT_NE(job.output(r).find("host board: 3 ranks"), std::string::npos) << job.output(r);
    EXPECT_NE(job.output(r).find("board=yes"), std::string::npos) << job.output(r);
  }
  for (int r = 0; r < 3; ++r) job.signal(r, SIGKILL);
  job.wait(10s);
  EXPECT_EQ(dev_shm_entries(), before);
}

TEST(Failure, StoppedPeerIsDetectedByTimeout) {
  Job job(3);
  job.start_all({kWorker, "loop"}, {{"TNT_PEER_TIMEOUT_S", "1.5"}});
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(job.wait_for_output(r, "running", 30s)) << job.output(r);
  job.signal(1, SIGSTOP);
  auto outcomes = job.wait(8s, {0, 2});
  job.signal(1, SIGKILL);
  for (auto& o : outcomes) {
    EXPECT_FALSE(o.timed_out) << describe(outcomes);
    EXPECT_NE(o.exit_code, 0);
    EXPECT_NE(o.output.find("rank 1 ("), std::string::npos) << describe(outcomes);
    EXPECT_NE(o.output.find("silent"), std::string::npos) << describe(outcomes);
  }
}

// A rank waiting in a point-to-point receive from a peer that dies or stops is told, naming it.
void expect_receivers_told(int signal, const Job::Env& env, std::chrono::seconds within, const std::string& words) {
  Job job(3);
  job.start_all({kWorker, "p2p-wait", "--quiet-rank", "1"}, env);
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(job.wait_for_output(r, "running", 30s)) << job.output(r);
  std::this_thread::sleep_for(200ms);  // the receives are posted
  const auto signalled_at = std::chrono::steady_clock::now();
  job.signal(1, signal);
  auto outcomes = job.wait(within, {0, 2});
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled_at).count();
  job.signal(1, SIGKILL);
  EXPECT_LT(elapsed, static_cast<double>(within.count()));
  for (auto& o : outcomes) {
    EXPECT_FALSE(o.timed_out) << describe(outcomes);
    EXPECT_NE(o.exit_code, 0);
    EXPECT_NE(o.output.find("rank 1 ("), std::string::npos) << describe(outcomes);
    EXPECT_NE(o.output.find(words), std::string::npos) << describe(outcomes);
  }
}

TEST(Failure, PeerKilledWhileOthersWaitInAReceiveFromItIsNamedWithin5s) {
  expect_receivers_told(SIGKILL, {}, 5s, "rank 1 (");
}

TEST(Failure, StoppedSenderIsNamedWithinThePeerTimeout) {
  expect_receivers_told(SIGSTOP, {{"TNT_PEER_TIMEOUT_S", "1.5"}}, 8s, "silent");
}

// ---- stalls and mismatched calls (Note [Stall watch]) ---------------------------------------------

// Note [Receives nobody sends to]: ranks 0 and 2 wait in a receive from rank 1, which is alive and
// sends nothing: each names its receive after TNT_STALL_WARN_S, and fails after TNT_STALL_TIMEOUT_S.
TEST(Stall, ReceiveThatNoRankSendsToIsNamedAndTimesOut) {
  Job job(3);
  job.start_all({kWorker, "p2p-wait", "--quiet-rank", "1"},
                {{"TNT_STALL_WARN_S", "1"}, {"TNT_STALL_TIMEOUT_S", "3"}, {"TNT_LOG_ON_ALL_DEVICES", "1"}});
  auto outcomes = job.wait(20s, {0, 2});
  job.signal(1, SIGKILL);
  int timed_out_stalls = 0;
  for (auto& o : outcomes) {
    EXPECT_FALSE(o.timed_out) << describe(outcomes);
    EXPECT_NE(o.exit_code, 0);
    EXPECT_NE(o.output.find("s in a receive from rank 1 ("), std::string::npos) << describe(outcomes);
    EXPECT_NE(o.output.find("with tag 1 and no rank has sent a message it matches"), std::string::npos)
        << describe(outcomes);
    // The first to time out ends; the other may learn of it as that rank goes.
    if (o.output.find("point-to-point stall") != std::string::npos) ++timed_out_stalls;
  }
  EXPECT_GE(timed_out_stalls, 1) << describe(outcomes);
}

// Rank 2 of 3 stops issuing collectives and stays alive: ranks 0 and 1 warn, naming it and the
// call it is missing, within 5 s of TNT_STALL_WARN_S=2.
TEST(Stall, MissingRankIsNamedByEveryWaitingRank) {
  Job job(3);
  job.start_all({kWorker, "stall", "--skip-rank", "2"}, {{"TNT_STALL_WARN_S", "2"}, {"TNT_LOG_ON_ALL_DEVICES", "1"}});
  ASSERT_TRUE(job.wait_for_output(2, "skipping collective #3", 30s)) << job.output(2);
  const auto skipped_at = std::chrono::steady_clock::now();
  for (int r : {0, 1}) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(5s - (std::chrono::steady_clock::now() - skipped_at));
    EXPECT_TRUE(job.wait_for_output(r, "rank 2 (", left)) << job.output(r);
    const auto output = job.output(r);
    EXPECT_NE(output.find("WARNING stall: rank 2 ("), std::string::npos) << output;
    EXPECT_NE(output.find("has not joined collective #3 allreduce(sum, float32, 4096 bytes)"), std::string::npos)
        << output;
    EXPECT_NE(output.find("last completed #2 allreduce"), std::string::npos) << output;
  }
}

// Note [Silent ranks]: a stopped master is named by every other rank, with what each waits in,
// within 10 s of TNT_STALL_WARN_S=5 (the peer timeout, 60 s, is far off). Five runs of five.
TEST(Stall, StoppedMasterIsNamedByEveryOtherRank) {
  for (int run = 0; run < 5; ++run) {
    Job job(3);
    job.start_all({kWorker, "stall", "--calls", "4", "--pause-s", "0.3", "--stop-ranks", "0"},
                  {{"TNT_STALL_WARN_S", "5"}, {"TNT_PEER_TIMEOUT_S", "60"}, {"TNT_LOG_ON_ALL_DEVICES", "1"}});
    ASSERT_TRUE(job.wait_for_output(0, "rank 0: stopping after collective #2", 30s)) << job.output(0);
    const auto stopped_at = std::chrono::steady_clock::now();
    for (int r : {1, 2}) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(10s - (std::chrono::steady_clock::now() - stopped_at));
      EXPECT_TRUE(job.wait_for_output(r, "silence: nothing heard from rank 0 (", left)) << "run " << run << "\n"
                                                                                        << job.output(r);
      EXPECT_NE(job.output(r).find("this rank last completed #2 allreduce"), std::string::npos) << job.output(r);
    }
  }
}

// Ranks 2 and 3 of 4 stop together: the master's warning and the job's failure at
// TNT_PEER_TIMEOUT_S name both, each with the call it last completed (its report is sent within
// kProgressReportDelay of a change, not at the next heartbeat: the calls are 0.5 s apart, longer
// than a heartbeat). Five runs of five.
TEST(Stall, StoppedRanksAreAllNamedInTheWarningAndTheFailure) {
  for (int run = 0; run < 5; ++run) {
    Job job(4);
    job.start_all({kWorker, "stall", "--calls", "4", "--pause-s", "0.5", "--stop-ranks", "2,3"},
                  {{"TNT_STALL_WARN_S", "2"}, {"TNT_PEER_TIMEOUT_S", "6"}, {"TNT_LOG_ON_ALL_DEVICES", "1"}});
    const auto outcomes = job.wait(60s, {0, 1});
    for (int r : {0, 1}) {
      const auto& output = outcomes[static_cast<std::size_t>(r)].output;
      EXPECT_FALSE(outcomes[static_cast<std::size_t>(r)].timed_out) << output;
      EXPECT_NE(outcomes[static_cast<std::size_t>(r)].exit_code, 0) << output;
      const auto warning = output.find("silence: nothing heard from rank 2 (");
      ASSERT_NE(warning, std::string::npos) << "run " << run << "\n" << output;
      const auto warning_line = output.substr(warning, output.find('\n', warning) - warning);
      for (int stopped : {2, 3}) {
        EXPECT_NE(warning_line.find("rank " + std::to_string(stopped) + " ("), std::string::npos) << warning_line;
      }
      EXPECT_NE(warning_line.find("last completed #2 allreduce"), std::string::npos) << warning_line;
      EXPECT_EQ(warning_line.find("last completed #1 "), std::string::npos) << "a stale report: " << warning_line;
      const auto failure = output.find("silent: rank 2 (");
      ASSERT_NE(failure, std::string::npos) << output;
      const auto failure_line = output.substr(failure, output.find('\n', failure) - failure);
      EXPECT_NE(failure_line.find("rank 3 ("), std::string::npos) << failure_line;
    }
  }
}

// With TNT_STALL_TIMEOUT_S the job fails instead: tnt-launch exits non-zero naming rank 2, and
// nothing of the job is left running.
TEST(Stall, TimeoutFailsTheWholeJobUnderTntLaunch) {
  const std::string marker = "stall-timeout-" + std::to_string(::getpid());
  Job job(1);
  const auto started = std::chrono::steady_clock::now();
  job.start({kLaunch, "-n", "3", "--", kWorker, "stall", "--skip-rank", "2", "--config", marker},
            {{"TNT_STALL_TIMEOUT_S", "3"}});
  auto outcomes = job.wait(20s);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_FALSE(outcomes[0].timed_out) << describe(outcomes);
  EXPECT_NE(outcomes[0].exit_code, 0) << describe(outcomes);
  EXPECT_LT(elapsed, 12.0) << "start-up plus 3 s of stall, then every process ended";
  EXPECT_NE(outcomes[0].output.find("stall: rank 2 ("), std::string::npos) << describe(outcomes);
  EXPECT_NE(outcomes[0].output.find("TNT_STALL_TIMEOUT_S=3"), std::string::npos) << describe(outcomes);
  // "[s]tall..." matches the workers' command lines but not the shell's that runs pgrep.
  EXPECT_NE(std::system(("pgrep -f '[s]" + marker.substr(1) + "' >/dev/null").c_str()), 0)
      << "a process of the job is left";
}

// Ranks that compute for 10 s between collectives, all in the same place, are no stall.
TEST(Stall, RanksComputingBetweenCollectivesAreNotReported) {
  Job job(3);
  job.start_all({kWorker, "stall", "--calls", "2", "--pause-s", "10"},
                {{"TNT_STALL_WARN_S", "2"}, {"TNT_LOG_ON_ALL_DEVICES", "1"}});
  auto outcomes = job.wait(40s);
  for (auto& o : outcomes) {
    EXPECT_EQ(o.exit_code, 0) << describe(outcomes);
    EXPECT_NE(o.output.find("2 collectives done"), std::string::npos) << describe(outcomes);
    EXPECT_EQ(o.output.find("stall"), std::string::npos) << describe(outcomes);
  }
}

// An allreduce against a broadcast of the same size, at the same place: the job fails at once,
// naming both ranks and both calls.
// Without the host board: there an allreduce and a broadcast at one place fail at once, each
// rank naming its own call and the other's size (as DifferentSizesOnTheHostBoard... checks).
TEST(Stall, DifferentCollectivesAtOnePlaceFailTheJobNamingBoth) {
  Job job(3);
  const auto started = std::chrono::steady_clock::now();
  job.start_all({kWorker, "stall", "--mismatch-rank", "1"}, {{"TNT_HOST_ALLREDUCE_KB", "0"}});
  auto outcomes = job.wait(30s);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(elapsed, 10.0) << "found within a heartbeat or two, not after TNT_PEER_TIMEOUT_S";
  for (auto& o : outcomes) {
    EXPECT_FALSE(o.timed_out) << describe(outcomes);
    EXPECT_NE(o.exit_code, 0) << describe(outcomes);
    EXPECT_NE(o.output.find("called different collectives as call #3"), std::string::npos) << describe(outcomes);
    EXPECT_NE(o.output.find("broadcast(root 0, 4096 bytes)"), std::string::npos) << describe(outcomes);
    EXPECT_NE(o.output.find("allreduce(sum, float32, 4096 bytes)"), std::string::npos) << describe(outcomes);
  }
}

// Allreduces of different sizes at one place, both on the host board: every rank fails at once,
// naming the other's size and its own call.
TEST(Stall, DifferentSizesOnTheHostBoardFailTheJobAtOnce) {
  Job job(3);
  const auto started = std::chrono::steady_clock::now();
  job.start_all({kWorker, "stall", "--other-size-rank", "1"});
  auto outcomes = job.wait(30s);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(elapsed, 10.0);
  for (auto& o : outcomes) {
    EXPECT_FALSE(o.timed_out) << describe(outcomes);
    EXPECT_NE(o.exit_code, 0) << describe(outcomes);
  }
  EXPECT_NE(outcomes[0].output.find("rank 1 called another collective (2048 bytes) where rank 0 called allreduce(sum, "
                                    "float32, 4096 bytes)"),
            std::string::npos)
      << describe(outcomes);
  EXPECT_NE(outcomes[1].output.find("rank 0 called another collective (4096 bytes) where rank 1 called allreduce(sum, "
                                    "float32, 2048 bytes)"),
            std::string::npos)
      << describe(outcomes);
}

}  // namespace
}  // namespace tnt::test
