// tnt-launch -n N: local ranks started by fork/exec.
#include <gtest/gtest.h>
#include <signal.h>

#include <unistd.h>

#include <set>

#include "harness.h"

namespace tnt::launcher::test {
namespace {

const std::string kLaunch = TNT_LAUNCH_BIN;
const std::string kProbe = LAUNCH_PROBE_BIN;

void expect_no_leftovers(const std::string& marker) {
  const auto left = live_processes("TNT_TEST_MARKER=" + marker);
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) of the job remain, first pid "
                            << (left.empty() ? 0 : left.front());
}

TEST(LocalLaunch, EveryRankGetsTheDesignEnvironment) {
  const std::string m = unique_marker();
  auto r = run({kLaunch,
                "-n",
                "3",
                "--output-on-all-devices",
                "-x",
                "TNT_TEST_MARKER=" + m,
                "-x",
                "FIRST=1",
                "-x",
                "SECOND=two words",
                "--transport",
                "ib",
                "--fusion-threshold",
                "64",
                "--log-level",
                "debug",
                "--log-on-all-devices",
                "--",
                kProbe,
                "--var",
                "FIRST",
                "--var",
                "SECOND"});
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  const auto lines = lines_with(r.out, "probe rank=");
  ASSERT_EQ(lines.size(), 3u) << r.out;
  std::set<std::string> ranks;
  std::set<std::string> job_ids;
  std::set<std::string> ports;
  for (const auto& l : lines) {
    const std::string rank = field(l, "rank");
    ranks.insert(rank);
    // --output-on-all-devices prefixes each line with its rank.
    EXPECT_EQ(l.rfind("[" + rank + "] probe", 0), 0u) << l;
    EXPECT_EQ(field(l, "size"), "3");
    EXPECT_EQ(field(l, "local_rank"), rank);
    EXPECT_EQ(field(l, "local_size"), "3");
    EXPECT_EQ(field(l, "token_len"), "64");
    EXPECT_EQ(field(l, "transport"), "ib");
    EXPECT_EQ(field(l, "fusion_kb"), "64");
    EXPECT_EQ(field(l, "log_level"), "DEBUG");
    EXPECT_EQ(field(l, "log_all"), "1");
    EXPECT_EQ(field(l, "output_all"), "1");
    EXPECT_EQ(field(l, "pin_socket"), "-1");
    EXPECT_EQ(field(l, "pin_memory"), "0");
    EXPECT_EQ(field(l, "FIRST"), "1");
    EXPECT_EQ(field(l, "SECOND"), "two");  // the probe's line is space separated
    const std::string master = field(l, "master");
    EXPECT_EQ(master.substr(0, master.find(':')), "127.0.0.1");
    ports.insert(master.substr(master.find(':') + 1));
    job_ids.insert(field(l, "job_id"));
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2"}));
  EXPECT_EQ(job_ids.size(), 1u);
  EXPECT_EQ(ports.size(), 1u);
  EXPECT_GT(std::stoi(*ports.begin()), 0);
  expect_no_leftovers(m);
}

TEST(LocalLaunch, JobIdAndTokenAreFreshEachRun) {
  auto a = run({kLaunch, "-n", "1", "--", "/bin/sh", "-c", "echo $TNT_JOB_ID $TNT_JOB_TOKEN"});
  auto b = run({kLaunch, "-n", "1", "--", "/bin/sh", "-c", "echo $TNT_JOB_ID $TNT_JOB_TOKEN"});
  ASSERT_EQ(a.exit_code(), 0) << a.err;
  ASSERT_EQ(b.exit_code(), 0) << b.err;
  EXPECT_NE(a.out, b.out);
  EXPECT_EQ(a.out.size(), b.out.size());
}

TEST(LocalLaunch, ExportsAreAppliedInOrderAndMayOverride) {
  auto r = run({kLaunch, "-n", "1", "-x", "V=first", "-x", "V=second", "-x", "TNT_TRANSPORT=x", "--", "/bin/sh", "-c",
                "echo V=$V T=$TNT_TRANSPORT"});
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  EXPECT_EQ(r.out, "V=second T=x\n");
}

TEST(LocalLaunch, ByDefaultOnlyTheMasterRankIsShown) {
  auto r = run({kLaunch, "-n", "3", "--", "/bin/sh", "-c", "echo out-$TNT_RANK; echo err-$TNT_RANK >&2"});
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  EXPECT_EQ(r.out, "out-0\n");
  EXPECT_EQ(r.err, "err-0\n");
}

TEST(LocalLaunch, OutputOnAllDevicesPrefixesEveryLineOnItsOwnStream) {
  auto r = run({kLaunch, "-n", "2", "--output-on-all-devices", "--", "/bin/sh", "-c",
                "echo out-$TNT_RANK; echo err-$TNT_RANK >&2; printf no-newline-$TNT_RANK"});
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  for (const char* rank : {"0", "1"}) {
    const std::string p = std::string("[") + rank + "] ";
    EXPECT_EQ(count_occurrences(r.out, p + "out-" + rank + "\n"), 1) << r.out;
    EXPECT_EQ(count_occurrences(r.out, p + "no-newline-" + rank + "\n"), 1) << r.out;
    EXPECT_EQ(count_occurrences(r.err, p + "err-" + rank + "\n"), 1) << r.err;
  }
}

// tnt's ranks log to stderr; --log-on-all-devices must show it without --output-on-all-devices.
TEST(LocalLaunch, LogOnAllDevicesShowsEveryRanksLog) {
  auto r = run({kLaunch, "-n", "3", "--log-on-all-devices", "--", "/bin/sh", "-c",
                "echo out-$TNT_RANK; echo log-$TNT_RANK-$TNT_LOG_ON_ALL_DEVICES >&2"});
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  EXPECT_EQ(r.out, "out-0\n");  // output stays the master's
  for (const char* rank : {"0", "1", "2"}) {
    const std::string line = std::string("[") + rank + "] log-" + rank + "-1\n";
    EXPECT_EQ(count_occurrences(r.err, line), 1) << r.err;
  }
}

TEST(LocalLaunch, RankExitingWithStatus3StopsTheOthers) {
  const std::string m = unique_marker();
  auto r = run({kLaunch, "-n", "3", "-x", "TNT_TEST_MARKER=" + m, "--", kProbe, "--wait", "--exit-rank", "1",
                "--exit-code", "3"});
  EXPECT_FALSE(r.timed_out);
  EXPECT_LT(r.seconds, 10);
  EXPECT_EQ(r.exit_code(), 3);
  EXPECT_NE(r.err.find("rank 1 on host localhost exited with status 3"), std::string::npos) << r.err;
  expect_no_leftovers(m);
}

TEST(LocalLaunch, RankKilledBySigkillStopsTheOthers) {
  const std::string m = unique_marker();
  Launched l({kLaunch, "-n", "3", "--output-on-all-devices", "-x", "TNT_TEST_MARKER=" + m, "--", kProbe, "--wait"});
  ASSERT_TRUE(l.wait_for("ready rank=", 3, 10)) << l.err();
  const auto lines = lines_with(l.out(), "probe rank=2 ");
  ASSERT_EQ(lines.size(), 1u);
  const pid_t victim = std::stoi(field(lines[0], "pid"));
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  auto r = l.finish(10);
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code(), 0);
  EXPECT_NE(r.err.find("rank 2 on host localhost was killed by SIGKILL"), std::string::npos) << r.err;
  expect_no_leftovers(m);
}

class LocalSignal : public ::testing::TestWithParam<int> {};

TEST_P(LocalSignal, StopsEveryRankAndExitsWith128PlusSignal) {
  const int sig = GetParam();
  const std::string m = unique_marker();
  Launched l({kLaunch, "-n", "2", "--output-on-all-devices", "-x", "TNT_TEST_MARKER=" + m, "--", kProbe, "--wait"});
  ASSERT_TRUE(l.wait_for("ready rank=", 2, 10)) << l.err();
  // SIGINT as a terminal sends it on Ctrl+C: to the whole foreground process group.
  if (sig == SIGINT) {
    l.send_to_group(sig);
  } else {
    l.send(sig);
  }
  auto r = l.finish(10);
  EXPECT_FALSE(r.timed_out);
  EXPECT_LT(r.seconds, 10);
  EXPECT_EQ(r.exit_code(), 128 + sig);
  EXPECT_NE(r.err.find("interrupted by"), std::string::npos) << r.err;
  expect_no_leftovers(m);
}

INSTANTIATE_TEST_SUITE_P(CtrlCAndTerm, LocalSignal, ::testing::Values(SIGINT, SIGTERM));

// SIGUSR1 is a notice (a scheduler's warning before preemption): every rank gets it, and the
// job is not stopped for it: here the ranks end on it by themselves, with status 0.
TEST(LocalLaunch, Sigusr1IsForwardedToEveryRankWithoutStoppingTheJob) {
  const std::string m = unique_marker();
  Launched l(
      {kLaunch, "-n", "2", "--output-on-all-devices", "-x", "TNT_TEST_MARKER=" + m, "--", kProbe, "--wait", "--usr1"});
  ASSERT_TRUE(l.wait_for("ready rank=", 2, 10)) << l.err();
  l.send(SIGUSR1);
  auto r = l.finish(10);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code(), 0) << r.err;
  EXPECT_EQ(lines_with(r.out, "usr1 rank=0").size(), 1u) << r.out;
  EXPECT_EQ(lines_with(r.out, "usr1 rank=1").size(), 1u) << r.out;
  EXPECT_EQ(r.err.find("interrupted"), std::string::npos) << r.err;
  expect_no_leftovers(m);
}

TEST(LocalLaunch, RanksIgnoringSigtermAreKilledWithinFiveSeconds) {
  const std::string m = unique_marker();
  Launched l({kLaunch, "-n", "2", "--output-on-all-devices", "-x", "TNT_TEST_MARKER=" + m, "--", kProbe, "--wait",
              "--ignore-term"});
  ASSERT_TRUE(l.wait_for("ready rank=", 2, 10)) << l.err();
  l.send(SIGTERM);
  auto r = l.finish(10);
  EXPECT_FALSE(r.timed_out);
  EXPECT_LT(r.seconds, 5 + 1);  // includes start-up
  EXPECT_EQ(r.exit_code(), 128 + SIGTERM);
  EXPECT_NE(r.err.find("SIGKILL"), std::string::npos) << r.err;
  expect_no_leftovers(m);
}

TEST(LocalLaunch, RanksDieWhenTheLauncherIsKilled) {
  const std::string m = unique_marker();
  Launched l({kLaunch, "-n", "2", "--output-on-all-devices", "-x", "TNT_TEST_MARKER=" + m, "--", kProbe, "--wait"});
  ASSERT_TRUE(l.wait_for("ready rank=", 2, 10)) << l.err();
  l.send(SIGKILL);
  l.finish(5);
  // The parent-death signal arrives at once; allow the kernel a moment to deliver it.
  for (int i = 0; i < 100 && !live_processes("TNT_TEST_MARKER=" + m).empty(); ++i) usleep(50000);
  expect_no_leftovers(m);
}

TEST(LocalLaunch, LeftoverChildrenOfARankAreStopped) {
  const std::string m = unique_marker();
  // The rank starts a background child that would outlive it.
  auto r = run({kLaunch, "-n", "1", "-x", "TNT_TEST_MARKER=" + m, "--", "/bin/sh", "-c", "sleep 30 & echo started"});
  EXPECT_EQ(r.exit_code(), 0) << r.err;
  EXPECT_LT(r.seconds, 10);
  expect_no_leftovers(m);
}

TEST(LocalLaunch, ProcessesEscapingTheRanksGroupAreStoppedToo) {
  const std::string m = unique_marker();
  // setsid leaves the rank's process group; the launcher adopts and stops it when the rank ends.
  auto r =
      run({kLaunch, "-n", "2", "-x", "TNT_TEST_MARKER=" + m, "--", "/bin/sh", "-c", "setsid sleep 30 & echo started"});
  EXPECT_EQ(r.exit_code(), 0) << r.err;
  EXPECT_LT(r.seconds, 5);
  expect_no_leftovers(m);
}

struct BadInvocation {
  std::string name;
  std::vector<std::string> args;
  std::string message;
};
void PrintTo(const BadInvocation& b, std::ostream* os) { *os << b.name; }

class LocalBadInvocation : public ::testing::TestWithParam<BadInvocation> {};

TEST_P(LocalBadInvocation, FailsFastWithAClearMessage) {
  const std::string m = unique_marker();
  std::vector<std::string> argv{kLaunch, "-x", "TNT_TEST_MARKER=" + m};
  for (const auto& a : GetParam().args) argv.push_back(a);
  auto r = run(argv);
  expect_no_leftovers(m);
  EXPECT_FALSE(r.timed_out);
  EXPECT_LT(r.seconds, 10);
  EXPECT_NE(r.exit_code(), 0);
  EXPECT_NE(r.err.find(GetParam().message), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LocalBadInvocation,
    ::testing::Values(
        BadInvocation{"ZeroRanks", {"-n", "0", "--", "/bin/true"}, "-n 0: the number of ranks must be at least 1"},
        BadInvocation{"UnknownOption", {"--no-such-option", "--", "/bin/true"}, "--no-such-option"},
        BadInvocation{"NoProgram", {"-n", "2"}, "no program given"},
        BadInvocation{"MissingProgram", {"-n", "2", "--", "/no/such/program"}, "program '/no/such/program' not found"},
        BadInvocation{"BadTransport", {"-n", "2", "--transport", "udp", "--", "/bin/true"}, "udp"},
        BadInvocation{"BadExportName", {"-n", "2", "-x", "1BAD=x", "--", "/bin/true"}, "not a valid environment"},
        BadInvocation{"ProgramWithoutSeparator", {"-n", "2", "/bin/true"}, "put the program after --"},
        BadInvocation{
            "FusionThresholdZero", {"-n", "2", "--fusion-threshold", "0", "--", "/bin/true"}, "from 1 to 1048576"}),
    [](const auto& param_info) { return param_info.param.name; });

TEST(LocalLaunch, BusyMasterPortIsRefused) {
  // Hold a port, then ask for it.
  Launched holder({"/usr/bin/python3", "-c",
                   "import socket,sys\ns=socket.socket()\ns.bind(('0.0.0.0',0))\ns.listen()\n"
                   "print(s.getsockname()[1],flush=True)\nsys.stdin.read()\nimport time\n"
                   "time.sleep(30)"});
  ASSERT_TRUE(holder.wait_for("\n", 1, 10));
  const std::string port = holder.out().substr(0, holder.out().find('\n'));
  auto r = run({kLaunch, "-n", "1", "--master-port", port, "--", "/bin/true"});
  EXPECT_NE(r.exit_code(), 0);
  EXPECT_NE(r.err.find("master port " + port + " is already in use"), std::string::npos) << r.err;
}

std::string write_temp_file(const std::string& text) {
  char path[] = "/tmp/tnt-launch-hostfile-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  return path;
}

TEST(LocalLaunch, HostfileWithAByteOrderMarkRuns) {
  const std::string hostfile = write_temp_file("\xEF\xBB\xBFlocalhost slots=2\n");
  auto r = run({kLaunch, "--hostfile", hostfile, "--output-on-all-devices", "--", kProbe});
  unlink(hostfile.c_str());
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  EXPECT_EQ(lines_with(r.out, "probe rank=").size(), 2u) << r.out;
}

TEST(LocalLaunch, BracketedIpv6LoopbackInAHostfileIsThisMachine) {
  const std::string hostfile = write_temp_file("[::1] slots=2\n");
  auto r = run({kLaunch, "--hostfile", hostfile, "--output-on-all-devices", "--", kProbe});
  unlink(hostfile.c_str());
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  const auto lines = lines_with(r.out, "probe rank=");
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_EQ(field(lines[0], "master"), field(lines[1], "master"));
  EXPECT_EQ(field(lines[0], "master").rfind("127.0.0.1:", 0), 0u) << lines[0];
}

// A job this machine cannot start is refused before anything is forked, not after thousands of
// forks end in "pipe2: Too many open files". The file limit is lowered for the test so that the
// old behaviour stays cheap to see.
TEST(LocalLaunch, MoreRanksThanTheMachineCanStartAreRefusedUpFront) {
  const std::string m = unique_marker();
  const std::string witness = "/tmp/tnt-launch-too-many-" + m;
  auto r = run({"/bin/sh", "-c",
                "ulimit -n 256 && exec " + kLaunch + " -n 1000 -x TNT_TEST_MARKER=" + m + " -- /bin/sh -c 'touch " +
                    witness + "; sleep 5'"});
  // Fatal, so that without the check the second case (which would fork until it fails) never runs.
  ASSERT_NE(r.err.find("RLIMIT_NOFILE (ulimit -n) is 256"), std::string::npos) << r.err;
  EXPECT_EQ(r.exit_code(), 1) << r.err;
  EXPECT_LT(r.seconds, 1.0);
  EXPECT_NE(r.err.find("1000 ranks"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("at most "), std::string::npos) << r.err;
  EXPECT_NE(access(witness.c_str(), F_OK), 0) << "a rank was started";
  unlink(witness.c_str());
  expect_no_leftovers(m);

  // More processes than the kernel has process ids for, whatever the file limit.
  r = run({kLaunch, "-n", "100000000", "--", "/bin/true"});
  EXPECT_EQ(r.exit_code(), 1) << r.err;
  EXPECT_LT(r.seconds, 1.0);
  EXPECT_NE(r.err.find("kernel.pid_max"), std::string::npos) << r.err;
}

TEST(LocalLaunch, VersionAndHelp) {
  auto v = run({kLaunch, "--version"});
  EXPECT_EQ(v.exit_code(), 0);
  EXPECT_EQ(v.out.rfind("tnt-launch ", 0), 0u) << v.out;
  auto h = run({kLaunch, "--help"});
  EXPECT_EQ(h.exit_code(), 0);
  for (const char* opt : {"--hostfile", "--n-per-node", "--pin-to-socket", "--pin-memory-to-socket", "--transport",
                          "-x", "--fusion-threshold", "--log-level", "--log-on-all-devices", "--output-on-all-devices",
                          "--dry-run", "--cleanup", "--force"}) {
    EXPECT_NE(h.out.find(opt), std::string::npos) << opt;
  }
}

// Issue 29: a hostfile with one 10 MB host name failed only at ssh's exec ("Argument list too
// long"), printing the name back; --dry-run accepted it. It is refused while the file is read.
TEST(LocalLaunch, AHugeHostNameIsRefusedQuicklyAndBriefly) {
  char path[] = "/tmp/tnt-hostfile-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  for (const std::size_t length : {std::size_t{10'000'000}, std::size_t{1'000'000}}) {
    const std::string text = std::string(length, 'a') + "\n";
    ASSERT_EQ(ftruncate(fd, 0), 0);
    ASSERT_EQ(pwrite(fd, text.data(), text.size(), 0), static_cast<ssize_t>(text.size()));
    for (const bool dry_run : {true, false}) {
      std::vector<std::string> argv{kLaunch, "--hostfile", path, "--", kProbe};
      if (dry_run) argv.insert(argv.begin() + 1, "--dry-run");
      const auto r = run(argv, 10);
      EXPECT_EQ(r.exit_code(), 2) << r.err.substr(0, 300);
      EXPECT_LT(r.seconds, 1.0) << "a " << length << "-character host name";
      EXPECT_LT(r.err.size() + r.out.size(), 300u) << r.err.substr(0, 300);
      EXPECT_NE(r.err.find(length > 8'000'000 ? "more than a hostfile may have" : "at most 253 characters"),
                std::string::npos)
          << r.err.substr(0, 300);
    }
  }
  close(fd);
  unlink(path);
}

}  // namespace
}  // namespace tnt::launcher::test
