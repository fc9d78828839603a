// Pinning with an explicit NUMA topology, --dry-run and --cleanup on this machine.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "harness.h"
#include "tnt/launcher/numa.h"

namespace tnt::launcher::test {
namespace {

const std::string kLaunch = TNT_LAUNCH_BIN;
const std::string kProbe = LAUNCH_PROBE_BIN;

TEST(Pinning, RanksGoRoundRobinOverAnExplicitTopology) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs 2 CPUs for a 2-node topology";
  auto r = run({kLaunch, "-n", "3", "--pin-memory-to-socket", "--numa-topology", "0@0;1@0", "--log-level", "DEBUG",
                "--output-on-all-devices", "--", kProbe});
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  const char* expected_cpus[] = {"0", "1", "0"};
  const char* expected_node[] = {"0", "1", "0"};
  for (int rank = 0; rank < 3; ++rank) {
    const auto lines = lines_with(r.out, "probe rank=" + std::to_string(rank) + " ");
    ASSERT_EQ(lines.size(), 1u) << r.out;
    // What the kernel says in the rank's own /proc/self/status and numa_maps.
    EXPECT_EQ(field(lines[0], "cpus"), expected_cpus[rank]) << lines[0];
    EXPECT_EQ(field(lines[0], "mempolicy"), "bind:0") << lines[0];
    EXPECT_EQ(field(lines[0], "pin_socket"), expected_node[rank]) << lines[0];
    EXPECT_EQ(field(lines[0], "pin_memory"), "1") << lines[0];
    EXPECT_NE(r.err.find("debug: rank " + std::to_string(rank) + " on localhost: pinned to NUMA node " +
                         expected_node[rank] + " (cpus " + expected_cpus[rank] +
                         ", memory 0): Cpus_allowed_list=" + expected_cpus[rank] + " mempolicy=bind:0"),
              std::string::npos)
        << r.err;
  }
  EXPECT_NE(r.err.find("warning: localhost: 3 ranks but 2 NUMA node(s): ranks share nodes "
                       "round-robin"),
            std::string::npos)
      << r.err;
}

TEST(Pinning, CpuPinningAloneLeavesTheMemoryPolicyAlone) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs 2 CPUs for a 2-node topology";
  auto r =
      run({kLaunch, "-n", "2", "--pin-to-socket", "--numa-topology", "1;0", "--output-on-all-devices", "--", kProbe});
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  const auto l0 = lines_with(r.out, "probe rank=0 ");
  const auto l1 = lines_with(r.out, "probe rank=1 ");
  ASSERT_EQ(l0.size(), 1u);
  ASSERT_EQ(l1.size(), 1u);
  EXPECT_EQ(field(l0[0], "cpus"), "1");
  EXPECT_EQ(field(l1[0], "cpus"), "0");
  EXPECT_EQ(field(l0[0], "mempolicy"), "default");
  EXPECT_EQ(field(l0[0], "pin_memory"), "0");
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;  // 2 ranks, 2 nodes
}

TEST(Pinning, DetectedTopologyPinsEveryRank) {
  // libnuma's view of this machine (one node here): every rank gets that node's CPUs.
  auto r = run({kLaunch, "-n", "2", "--pin-to-socket", "--output-on-all-devices", "--", kProbe});
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  EXPECT_EQ(lines_with(r.out, " pin_socket=0 ").size() + lines_with(r.out, " pin_socket=1 ").size(), 2u) << r.out;
}

// The rank lines of `r` show each of 2 ranks bound to its own block of `cpus`.
void expect_blocks_of_their_own(const RunResult& r, const std::vector<int>& cpus) {
  for (int rank = 0; rank < 2; ++rank) {
    const auto lines = lines_with(r.out, "probe rank=" + std::to_string(rank) + " ");
    ASSERT_EQ(lines.size(), 1u) << r.out;
    // What the kernel says in the rank's own /proc/self/status.
    EXPECT_EQ(field(lines[0], "cpus"), format_cpu_list(core_block(cpus, 2, rank))) << lines[0];
    EXPECT_EQ(field(lines[0], "host_cores"), std::to_string(cpus.size())) << lines[0];
    EXPECT_EQ(field(lines[0], "pin_socket"), "-1") << lines[0];
  }
  EXPECT_NE(r.err.find("debug: rank 1 on localhost: bound to cpus " + format_cpu_list(core_block(cpus, 2, 1))),
            std::string::npos)
      << r.err;
}

TEST(Pinning, BindToCoreGivesEachRankABlockOfItsOwn) {
  const std::vector<int> cpus = affinity_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs in this process's affinity mask";
  for (const char* flag : {"--bind-to-core", "--bind-to=core"}) {
    SCOPED_TRACE(flag);
    auto r = run({kLaunch, "-n", "2", flag, "--log-level", "DEBUG", "--output-on-all-devices", "--", kProbe});
    ASSERT_EQ(r.exit_code(), 0) << r.err;
    expect_blocks_of_their_own(r, cpus);
  }
}

TEST(Pinning, TwoRanksAreBoundByDefaultWhereEachHasACore) {
  const std::vector<int> cpus = affinity_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs in this process's affinity mask";
  auto r = run({kLaunch, "-n", "2", "--log-level", "DEBUG", "--output-on-all-devices", "--", kProbe});
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  expect_blocks_of_their_own(r, cpus);
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
}

TEST(Pinning, BindToNoneAndOneRankAndTooManyRanksLeaveRanksUnbound) {
  const std::vector<int> cpus = affinity_cpus();
  const std::string all = format_cpu_list(cpus);
  const std::string too_many = std::to_string(cpus.size() + 1);
  const std::vector<std::vector<std::string>> cases = {{"-n", "2", "--bind-to", "none"}, {"-n", "1"}, {"-n", too_many}};
  for (const auto& placement : cases) {
    std::vector<std::string> args = {kLaunch};
    args.insert(args.end(), placement.begin(), placement.end());
    args.insert(args.end(), {"--output-on-all-devices", "--", kProbe});
    SCOPED_TRACE(placement.back());
    auto r = run(args);
    ASSERT_EQ(r.exit_code(), 0) << r.err;
    const auto lines = lines_with(r.out, "probe rank=");
    ASSERT_FALSE(lines.empty()) << r.out;
    for (const auto& line : lines) EXPECT_EQ(field(line, "cpus"), all) << line;
    EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;  // the default asks for nothing
  }
}

TEST(Pinning, BindToCoreAndBindToNoneContradictEachOther) {
  auto r = run({kLaunch, "-n", "2", "--bind-to-core", "--bind-to", "none", "--", kProbe});
  EXPECT_EQ(r.exit_code(), 2) << r.err;
  EXPECT_NE(r.err.find("--bind-to-core and --bind-to none contradict each other"), std::string::npos) << r.err;
  auto bad = run({kLaunch, "-n", "2", "--bind-to", "socket", "--", kProbe});
  EXPECT_EQ(bad.exit_code(), 2) << bad.err;
  EXPECT_NE(bad.err.find("--bind-to"), std::string::npos) << bad.err;
}

TEST(Pinning, BindToCoreWithMoreRanksThanCoresWarnsAndLeavesThemUnbound) {
  const std::vector<int> cpus = affinity_cpus();
  const std::string ranks = std::to_string(cpus.size() + 1);
  auto r = run({kLaunch, "-n", ranks, "--bind-to-core", "--", kProbe});
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  EXPECT_NE(r.err.find("--bind-to core: " + ranks + " ranks but " + std::to_string(cpus.size()) +
                       " core(s): ranks are not bound"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(field(lines_with(r.out, "probe rank=0 ").at(0), "cpus"), format_cpu_list(cpus)) << r.out;
}

TEST(Pinning, BindToCoreAndPinToSocketExcludeEachOther) {
  auto r = run({kLaunch, "-n", "2", "--bind-to-core", "--pin-to-socket", "--", kProbe});
  EXPECT_EQ(r.exit_code(), 2) << r.err;
  EXPECT_NE(r.err.find("--bind-to core and --pin-to-socket exclude each other"), std::string::npos) << r.err;
}

TEST(Pinning, BadTopologyIsRefused) {
  auto r = run({kLaunch, "-n", "2", "--pin-to-socket", "--numa-topology", "0-x", "--", kProbe});
  EXPECT_EQ(r.exit_code(), 2);  // a usage error, like every bad option
  EXPECT_NE(r.err.find("bad CPU list part '0-x'"), std::string::npos) << r.err;
}

TEST(DryRun, LocalJobPrintsEveryRankAndRunsNothing) {
  const std::string m = unique_marker();
  const std::string witness = "/tmp/tnt-launch-dry-run-" + m;
  auto r = run({kLaunch, "-n", "2", "--dry-run", "--pin-to-socket", "--numa-topology", "0;1", "--master-port", "29500",
                "-x", "TNT_TEST_MARKER=" + m, "--", "/bin/sh", "-c", "touch " + witness});
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  EXPECT_NE(r.out.find("# job: 2 rank(s) on 1 host(s), master 127.0.0.1:29500"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("host localhost: ranks 0-1, started here by fork/exec"), std::string::npos);
  EXPECT_NE(r.out.find("  rank 1 [cpus 1]: cd "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" TNT_MASTER_PORT=29500 "), std::string::npos);
  EXPECT_NE(r.out.find(" TNT_PIN_SOCKET=1 "), std::string::npos);
  EXPECT_NE(r.out.find(" /bin/sh -c 'touch " + witness + "'\n"), std::string::npos) << r.out;
  EXPECT_NE(access(witness.c_str(), F_OK), 0) << "--dry-run ran the program";
  EXPECT_TRUE(live_processes("TNT_TEST_MARKER=" + m).empty());
}

TEST(Cleanup, StopsAStuckLaunchersRanksAndForceKillsWhatIgnoresSigterm) {
  const std::string m = unique_marker();
  // A private copy of the probe, so that only this test's job matches the program name.
  const std::string prog = "/tmp/tnt-launch-cleanup-probe-" + m;
  {
    std::ifstream src(kProbe, std::ios::binary);
    std::ofstream dst(prog, std::ios::binary);
    dst << src.rdbuf();
  }
  chmod(prog.c_str(), 0755);
  Launched job({kLaunch, "-n", "2", "--output-on-all-devices", "-x", "TNT_TEST_MARKER=" + m, "--", prog, "--wait",
                "--ignore-term"});
  ASSERT_TRUE(job.wait_for("ready rank=", 2, 10)) << job.err();
  job.send(SIGSTOP);  // a launcher that no longer reacts

  // SIGTERM is not enough for these ranks: cleanup says so and what to do.
  auto c = run({kLaunch, "--cleanup", "--stop-grace", "0.3", "--", prog}, 15);
  EXPECT_EQ(c.exit_code(), 1) << c.out << c.err;
  EXPECT_NE(c.out.find("still has"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("use --cleanup --force"), std::string::npos) << c.out;
  EXPECT_FALSE(live_processes("TNT_TEST_MARKER=" + m).empty());

  c = run({kLaunch, "--cleanup", "--force", "--stop-grace", "0.3", "--", prog}, 15);
  EXPECT_EQ(c.exit_code(), 0) << c.out << c.err;
  EXPECT_NE(c.out.find("host localhost: stopped job "), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("(2 rank(s))"), std::string::npos) << c.out;
  EXPECT_TRUE(live_processes("TNT_TEST_MARKER=" + m).empty());
  auto r = job.finish(5);
  EXPECT_FALSE(r.timed_out);
  unlink(prog.c_str());
}

std::string private_probe_copy(const std::string& marker) {
  const std::string prog = "/tmp/tnt-launch-cleanup-probe-" + marker;
  {
    std::ifstream src(kProbe, std::ios::binary);
    std::ofstream dst(prog, std::ios::binary);
    dst << src.rdbuf();
  }
  chmod(prog.c_str(), 0755);
  return prog;
}

TEST(Cleanup, DryRunSaysWhatItWouldStopAndStopsNothing) {
  const std::string m = unique_marker();
  const std::string prog = private_probe_copy(m);
  Launched job({kLaunch, "-n", "2", "--output-on-all-devices", "-x", "TNT_TEST_MARKER=" + m, "--", prog, "--wait"});
  ASSERT_TRUE(job.wait_for("ready rank=", 2, 10)) << job.err();
  const auto before = live_processes("TNT_TEST_MARKER=" + m);
  ASSERT_EQ(before.size(), 2u);

  auto c = run({kLaunch, "--cleanup", "--dry-run", "--force", "--stop-grace", "0.3", "--", prog}, 15);
  EXPECT_EQ(c.exit_code(), 0) << c.out << c.err;
  EXPECT_NE(c.out.find("host localhost: would stop job "), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("(2 rank(s), pids "), std::string::npos) << c.out;
  for (pid_t pid : before) EXPECT_NE(c.out.find(std::to_string(pid)), std::string::npos) << pid << ": " << c.out;
  EXPECT_EQ(c.out.find("stopped job"), std::string::npos) << c.out;
  // Nothing was signalled: the ranks and their launcher still run.
  EXPECT_EQ(live_processes("TNT_TEST_MARKER=" + m), before);
  EXPECT_EQ(kill(job.pid(), 0), 0);
  EXPECT_EQ(job.out().find("rank 0 on host"), std::string::npos);

  job.send(SIGTERM);
  auto r = job.finish(10);
  EXPECT_FALSE(r.timed_out);
  EXPECT_TRUE(live_processes("TNT_TEST_MARKER=" + m).empty());
  unlink(prog.c_str());
}

TEST(Cleanup, OptionsThatMeanNothingThereAreRefused) {
  auto r = run({kLaunch, "--cleanup", "-n", "2", "--fusion-threshold", "64", "--", "/no/such/job/program"});
  EXPECT_EQ(r.exit_code(), 2) << r.out << r.err;
  EXPECT_NE(r.err.find("-n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--fusion-threshold"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("no registered job"), std::string::npos) << r.out;
}

TEST(Cleanup, NeedsAProgramAndNothingRegisteredIsNotAnError) {
  auto r = run({kLaunch, "--cleanup"});
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_NE(r.err.find("--cleanup needs the program"), std::string::npos) << r.err;
  r = run({kLaunch, "--cleanup", "--", "/no/such/job/program"});
  EXPECT_EQ(r.exit_code(), 0) << r.err;
  EXPECT_NE(r.out.find("no registered job of '/no/such/job/program'"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tnt::launcher::test
