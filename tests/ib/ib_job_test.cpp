// Real multi-process jobs with TNT_TRANSPORT=ib (tests/collectives/job.h starts the ranks).
// Without an RDMA device (as on the CI machines) only the start-up error can be checked; the
// data-path tests then skip and say why. With a device they run the collectives' full check
// through InfiniBand verbs.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <csignal>

#include "job.h"

namespace tnt::test {
namespace {

using namespace std::chrono_literals;

const std::string kWorker = TNT_TEST_WORKER;

// Why the InfiniBand data path cannot run here; empty when it can.
std::string no_device_reason() {
  int count = 0;
  ibv_device** devices = ibv_get_device_list(&count);
  if (!devices || count == 0) {
    if (devices) ibv_free_device_list(devices);
    return "no InfiniBand device: ibv_get_device_list found 0 devices";
  }
  std::string names;
  bool active = false;
  for (int i = 0; i < count && !active; ++i) {
    names += std::string(names.empty() ? "" : ", ") + ibv_get_device_name(devices[i]);
    ibv_context* context = ibv_open_device(devices[i]);
    if (!context) continue;
    ibv_device_attr attributes{};
    if (ibv_query_device(context, &attributes) == 0) {
      for (int port = 1; port <= attributes.phys_port_cnt; ++port) {
        ibv_port_attr port_attributes{};
        if (ibv_query_port(context, static_cast<std::uint8_t>(port), &port_attributes) == 0 &&
            port_attributes.state == IBV_PORT_ACTIVE) {
          active = true;
        }
      }
    }
    ibv_close_device(context);
  }
  ibv_free_device_list(devices);
  return active ? "" : "InfiniBand device(s) " + names + " found, but no port is ACTIVE";
}

std::string describe(const std::vector<Outcome>& outcomes) {
  std::string text;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    text += "--- rank " + std::to_string(i) + ": exit " + std::to_string(outcomes[i].exit_code) + " signal " +
            std::to_string(outcomes[i].signal) + (outcomes[i].timed_out ? " TIMED OUT" : "") + "\n" +
            outcomes[i].output;
  }
  return text;
}

// Runs everywhere without a device: both ranks must stop at once with the clear error, before
// they even join the job (no hang waiting for each other, no crash).
TEST(IbJob, NoDeviceFailsWithClearError) {
  int count = 0;
  ibv_device** devices = ibv_get_device_list(&count);
  if (devices) ibv_free_device_list(devices);
  if (devices && count > 0) GTEST_SKIP() << "an RDMA device is present: the no-device error cannot be provoked here";
  Job job(2);
  job.start_all({kWorker, "barrier"}, {{"TNT_TRANSPORT", "ib"}, {"TNT_SHM", "0"}});
  auto outcomes = job.wait(30s);
  for (const auto& outcome : outcomes) {
    EXPECT_FALSE(outcome.timed_out) << describe(outcomes);
    EXPECT_TRUE(outcome.exited) << "killed by signal " << outcome.signal << "\n" << describe(outcomes);
    EXPECT_NE(outcome.exit_code, 0) << describe(outcomes);
    EXPECT_NE(
        outcome.output.find("--transport=ib: no InfiniBand device found (ibv_get_device_list returned 0 devices); "
                            "use --transport=tcp"),
        std::string::npos)
        << describe(outcomes);
    EXPECT_LT(outcome.seconds, 10.0) << describe(outcomes);
  }
}

// Runs everywhere: a bad InfiniBand setting is refused by name on every rank.
TEST(IbJob, BadSettingIsRejectedByName) {
  Job job(2);
  job.start_all({kWorker, "barrier"}, {{"TNT_TRANSPORT", "ib"}, {"TNT_SHM", "0"}, {"TNT_IB_BUFFERS", "2"}});
  auto outcomes = job.wait(30s);
  for (const auto& outcome : outcomes) {
    EXPECT_FALSE(outcome.timed_out) << describe(outcomes);
    EXPECT_TRUE(outcome.exited && outcome.exit_code != 0) << describe(outcomes);
    EXPECT_NE(outcome.output.find("TNT_IB_BUFFERS='2' is not an integer in [4, 4096]"), std::string::npos)
        << describe(outcomes);
  }
}

struct DataPathCase {
  const char* name;
  Job::Env env;
};

void PrintTo(const DataPathCase& c, std::ostream* out) { *out << c.name; }

class IbDataPath : public ::testing::TestWithParam<DataPathCase> {};

// The collectives' full check (every dtype, op and count, async calls, broadcast, allgather)
// over two ranks on InfiniBand: default settings (eager for small messages, rendezvous for the
// 512 KiB ring segments), only eager (tiny segments), and only rendezvous with few buffers. The
// registration cache stays off: this worker allocates a fresh vector per call, exactly the case
// Note [Stale registrations] warns about.
TEST_P(IbDataPath, TwoRankCollectivesMatchReference) {
  if (const auto reason = no_device_reason(); !reason.empty()) GTEST_SKIP() << reason;
  Job job(2);
  Job::Env env = GetParam().env;
  env["TNT_TRANSPORT"] = "ib";
  env["TNT_SHM"] = "0";  // one host: keep the ranks on the fabric
  job.start_all({kWorker, "check"}, env);
  auto outcomes = job.wait(240s);
  for (const auto& outcome : outcomes) {
    EXPECT_TRUE(outcome.exited && outcome.exit_code == 0) << describe(outcomes);
    EXPECT_NE(outcome.output.find(" 0 failures"), std::string::npos) << describe(outcomes);
    // As in CollectivesCheck: every element of 5 types x 4 ops of the largest allreduce.
    EXPECT_GE(checks_reported(outcome.output), 5LL * 4 * ((1LL << 20) + 3)) << describe(outcomes);
  }
}

INSTANTIATE_TEST_SUITE_P(Settings, IbDataPath,
                         ::testing::Values(DataPathCase{"defaults", {}},
                                           DataPathCase{"eager_only",
                                                        {{"TNT_SMALL_ALLREDUCE_KB", "0"},
                                                         {"TNT_SEGMENT_KB", "1"},
                                                         {"TNT_PIPELINE_DEPTH", "3"}}},
                                           DataPathCase{"rendezvous_only",
                                                        {{"TNT_SMALL_ALLREDUCE_KB", "0"},
                                                         {"TNT_SEGMENT_KB", "64"},
                                                         {"TNT_IB_EAGER_KB", "0"},
                                                         {"TNT_IB_BUFFERS", "4"}}}),
                         [](const auto& test_info) { return std::string(test_info.param.name); });

// A rank killed in the middle of an allreduce: the survivor fails within 5 s, naming it.
TEST(IbJob, KilledPeerFailsTheSurvivorNamingIt) {
  if (const auto reason = no_device_reason(); !reason.empty()) GTEST_SKIP() << reason;
  Job job(2);
  job.start_all({kWorker, "loop"}, {{"TNT_TRANSPORT", "ib"}, {"TNT_SHM", "0"}});
  ASSERT_TRUE(job.wait_for_output(1, "running", 60s)) << job.output(1);
  const auto killed = std::chrono::steady_clock::now();
  job.signal(1, SIGKILL);
  auto outcomes = job.wait(10s, {0});
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 5s) << outcomes[0].output;
  EXPECT_FALSE(outcomes[0].timed_out) << outcomes[0].output;
  EXPECT_NE(outcomes[0].exit_code, 0) << outcomes[0].output;
  EXPECT_NE(outcomes[0].output.find("rank 1"), std::string::npos) << outcomes[0].output;
}

}  // namespace
}  // namespace tnt::test
