// tnt-launch across hosts: network namespaces on a private bridge, each with its own sshd,
// hostname and address, set up by netns_hosts.sh in a temporary directory and removed afterwards.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "harness.h"

namespace tnt::launcher::test {
namespace {

const std::string kLaunch = TNT_LAUNCH_BIN;
const std::string kProbeBuilt = LAUNCH_PROBE_BIN;
const std::string kScript = NETNS_HOSTS_SCRIPT;
const std::string kWorker = TNT_TEST_WORKER;

struct Host {
  std::string name;  // its hostname (UTS namespace) and network namespace
  std::string addr;
  std::string addr6;  // its IPv6 address (sshd listens on both)
};

// Four hosts: 1-3 normal, 4 sees an empty bin/ (the program is missing there).
struct Cluster {
  bool ready = false;
  std::string skip_reason;
  std::string dir;
  std::string tag;
  std::vector<Host> hosts;
  std::string unreachable;
  std::string probe;  // dir/bin/launch_probe
  std::string ssh;    // --ssh-command value
};

Cluster& cluster() {
  static Cluster c;
  return c;
}

std::string shell(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), p)) out += buf;
  const int st = pclose(p);
  if (status) *status = st;
  return out;
}

class ClusterEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    Cluster& c = cluster();
    if (geteuid() != 0) {
      c.skip_reason = "needs root to create network namespaces and run sshd";
      return;
    }
    c.tag = std::to_string(getpid() % 100000);
    int st = 0;
    const std::string probe_ns = "tprobe" + c.tag;
    shell("ip netns add " + probe_ns + " 2>&1", &st);
    shell("ip netns del " + probe_ns + " 2>/dev/null");
    if (st != 0) {
      c.skip_reason = "cannot create network namespaces here (ip netns add failed)";
      return;
    }
    char tmpl[] = "/tmp/tnt-launch-hosts-XXXXXX";
    if (!mkdtemp(tmpl)) {
      c.skip_reason = "mkdtemp failed";
      return;
    }
    c.dir = std::string(tmpl) + "/h";
    const std::string out = shell(kScript + " up " + c.dir + " " + c.tag + " 4 4 2>&1", &st);
    if (st != 0) {
      shell(kScript + " down " + c.dir + " " + c.tag + " 4");
      rmdir(tmpl);
      c.skip_reason = "setting up namespaces and sshd failed: " + out;
      return;
    }
    std::istringstream lines(out);
    std::string kind;
    while (lines >> kind) {
      if (kind == "host") {
        Host h;
        lines >> h.name >> h.addr >> h.addr6;
        c.hosts.push_back(h);
      } else if (kind == "unreachable") {
        lines >> c.unreachable;
      }
    }
    c.probe = c.dir + "/bin/launch_probe";
    shell("cp " + kProbeBuilt + " " + c.probe);
    c.ssh = "ssh -F " + c.dir + "/ssh_config";
    c.ready = c.hosts.size() == 4 && !c.unreachable.empty();
    if (!c.ready) c.skip_reason = "unexpected output from netns_hosts.sh: " + out;
  }
  void TearDown() override {
    Cluster& c = cluster();
    if (c.dir.empty()) return;
    shell(kScript + " down " + c.dir + " " + c.tag + " 4");
    rmdir(c.dir.substr(0, c.dir.rfind('/')).c_str());
  }
};

const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new ClusterEnvironment);

#define REQUIRE_CLUSTER()                                        \
  do {                                                           \
    if (!cluster().ready) GTEST_SKIP() << cluster().skip_reason; \
  } while (0)

std::string write_hostfile(const std::string& name, const std::string& text) {
  const std::string path = cluster().dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::string hostfile_of(const std::vector<int>& hosts) {
  std::string text = "# test hosts\n";
  for (int i : hosts) text += cluster().hosts[static_cast<std::size_t>(i)].addr + "\n";
  static int n = 0;
  return write_hostfile("hosts" + std::to_string(++n), text);
}

std::vector<std::string> launch_args(const std::string& hostfile, const std::string& marker) {
  return {kLaunch, "--hostfile", hostfile, "--ssh-command", cluster().ssh, "-x", "TNT_TEST_MARKER=" + marker};
}

// Processes of a job anywhere: ranks (by marker), ssh clients (their command line names our
// ssh_config) and anything in a host's namespace besides its sshd listener.
std::vector<std::string> leftovers(const std::string& marker) {
  std::vector<std::string> left;
  for (pid_t p : live_processes("TNT_TEST_MARKER=" + marker, cluster().dir + "/ssh_config")) {
    left.push_back("pid " + std::to_string(p) + ": " + shell("tr '\\0' ' ' < /proc/" + std::to_string(p) + "/cmdline"));
  }
  for (std::size_t i = 0; i < cluster().hosts.size(); ++i) {
    std::ifstream pidfile(cluster().dir + "/sshd" + std::to_string(i + 1) + ".pid");
    std::string sshd;
    pidfile >> sshd;
    std::istringstream pids(shell("ip netns pids " + cluster().hosts[i].name));
    std::string p;
    while (pids >> p) {
      if (p == sshd) continue;
      const std::string stat = shell("cat /proc/" + p + "/stat 2>/dev/null");
      if (stat.empty() || stat.find(") Z") != std::string::npos) continue;
      left.push_back(cluster().hosts[i].name + " pid " + p + ": " + shell("tr '\\0' ' ' < /proc/" + p + "/cmdline"));
    }
  }
  return left;
}

void expect_no_leftovers(const std::string& marker) {
  // sshd tears a finished session down asynchronously: give it a moment, no more.
  std::vector<std::string> left;
  for (int i = 0; i < 60; ++i) {
    left = leftovers(marker);
    if (left.empty()) return;
    usleep(50000);
  }
  for (const auto& l : left) ADD_FAILURE() << "left behind: " << l;
}

TEST(MultiHost, EveryRankReportsRankSizeLocalRankHostAndExports) {
  REQUIRE_CLUSTER();
  const std::string m = unique_marker();
  // Two NUMA nodes of one CPU each (the same CPU on a one-CPU machine).
  const bool two_cpus = sysconf(_SC_NPROCESSORS_ONLN) >= 2;
  auto args = launch_args(hostfile_of({0, 1, 2}), m);
  for (const char* a : {"--n-per-node", "2", "--output-on-all-devices", "-x", "ALPHA=1", "-x", "BETA=b",
                        "--pin-memory-to-socket", "--numa-topology", two_cpus ? "0@0;1@0" : "0@0;0@0", "--log-level",
                        "DEBUG", "--", "PROBE", "--var", "ALPHA", "--var", "BETA"}) {
    args.push_back(std::string(a) == "PROBE" ? cluster().probe : a);
  }
  auto r = run(args, 20);
  ASSERT_EQ(r.exit_code(), 0) << r.err << r.out;
  const auto lines = lines_with(r.out, "probe rank=");
  ASSERT_EQ(lines.size(), 6u) << r.out;
  std::set<std::string> seen;
  std::set<std::string> job_ids;
  for (const auto& l : lines) {
    const int rank = std::stoi(field(l, "rank"));
    seen.insert(field(l, "rank"));
    const Host& h = cluster().hosts[static_cast<std::size_t>(rank / 2)];
    EXPECT_EQ(field(l, "size"), "6") << l;
    EXPECT_EQ(field(l, "local_rank"), std::to_string(rank % 2)) << l;
    EXPECT_EQ(field(l, "local_size"), "2") << l;
    EXPECT_EQ(field(l, "host"), h.name) << l;
    EXPECT_EQ(field(l, "master").substr(0, cluster().hosts[0].addr.size() + 1), cluster().hosts[0].addr + ":") << l;
    EXPECT_EQ(field(l, "token_len"), "64") << l;
    EXPECT_EQ(field(l, "ALPHA"), "1") << l;
    EXPECT_EQ(field(l, "BETA"), "b") << l;
    EXPECT_EQ(l.rfind("[" + std::to_string(rank) + "] ", 0), 0u) << l;
    // Pinned by the agent on its host, as the explicit two-node topology says.
    EXPECT_EQ(field(l, "pin_socket"), std::to_string(rank % 2)) << l;
    EXPECT_EQ(field(l, "cpus"), two_cpus ? std::to_string(rank % 2) : "0") << l;
    EXPECT_EQ(field(l, "mempolicy"), "bind:0") << l;
    EXPECT_NE(r.err.find("[" + h.addr + "] tnt-launch agent: debug: rank " + std::to_string(rank) + " on " + h.addr +
                         ": pinned to NUMA node " + std::to_string(rank % 2)),
              std::string::npos)
        << r.err;
    job_ids.insert(field(l, "job_id"));
  }
  EXPECT_EQ(seen.size(), 6u);
  EXPECT_EQ(job_ids.size(), 1u);
  expect_no_leftovers(m);
}

// Two hosts of two ranks each: every collective, type, op and size of the collectives' check
// (tests/collectives/worker.cpp) through the hierarchical paths, within each host through shared
// memory and across the hosts' network namespaces through TCP.
TEST(MultiHost, HierarchicalCollectivesOnTwoHostsOfTwoRanks) {
  REQUIRE_CLUSTER();
  const std::string m = unique_marker();
  auto args = launch_args(
      write_hostfile("hosts_2x2", cluster().hosts[0].addr + " slots=2\n" + cluster().hosts[1].addr + " slots=2\n"), m);
  for (const char* a :
       {"-x", "TNT_ALLREDUCE_ALGORITHM=hierarchical", "-x", "TNT_ALLGATHER_ALGORITHM=hierarchical",
        "--output-on-all-devices", "--log-on-all-devices", "--log-level", "DEBUG", "--", "WORKER", "check"}) {
    args.push_back(std::string(a) == "WORKER" ? kWorker : a);
  }
  auto r = run(args, 200);
  ASSERT_EQ(r.exit_code(), 0) << r.err << r.out;
  const std::string all = r.out + r.err;
  // Every rank checked everything, found no difference from the serial reference, and took the
  // hierarchical path over the two real hosts (no virtual hosts here).
  const auto reports = lines_with(all, " checks, ");
  ASSERT_EQ(reports.size(), 4u) << all;
  std::set<std::string> ranks;
  for (const auto& report : reports) {
    EXPECT_NE(report.find(" checks, 0 failures"), std::string::npos) << report;
    ranks.insert(report.substr(report.find("rank ")));
  }
  EXPECT_EQ(ranks.size(), 4u) << all;
  EXPECT_EQ(lines_with(all, "hierarchical collectives: 2 hosts x 2 ranks").size(), 4u) << all;
  expect_no_leftovers(m);
}

// IPv6 addresses in a hostfile, bracketed or not: ssh gets them bare (with brackets it would look
// up "[fd00::1]" as a name and fail).
TEST(MultiHost, Ipv6AddressesBracketedOrNot) {
  REQUIRE_CLUSTER();
  const std::string m = unique_marker();
  const auto& h = cluster().hosts;
  const std::string hf = write_hostfile("hosts_ipv6", "[" + h[0].addr6 + "] slots=2\n" + h[1].addr6 + "\n");
  auto args = launch_args(hf, m);
  args.insert(args.end(), {"--output-on-all-devices", "--", cluster().probe});
  auto r = run(args, 30);
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  const auto lines = lines_with(r.out, "probe rank=");
  ASSERT_EQ(lines.size(), 3u) << r.out;
  for (const auto& l : lines) {
    const std::string rank = field(l, "rank");
    EXPECT_EQ(field(l, "host"), rank == "2" ? h[1].name : h[0].name) << l;
    EXPECT_EQ(field(l, "master").rfind(h[0].addr6 + ":", 0), 0u) << l;  // bare, as the transport resolves it
  }
  expect_no_leftovers(m);
}

TEST(MultiHost, TheJobTokenIsOnNoCommandLine) {
  REQUIRE_CLUSTER();
  const std::string m = unique_marker();
  auto args = launch_args(hostfile_of({0, 1}), m);
  for (const char* a : {"--output-on-all-devices", "--", "PROBE", "--wait", "--show-token"}) {
    args.push_back(std::string(a) == "PROBE" ? cluster().probe : a);
  }
  Launched l(args);
  ASSERT_TRUE(l.wait_for("ready rank=", 2, 20)) << l.err();
  const auto lines = lines_with(l.out(), "probe rank=");
  ASSERT_EQ(lines.size(), 2u);
  const std::string token = field(lines[0], "token");
  ASSERT_EQ(token.size(), 64u);
  EXPECT_EQ(field(lines[1], "token"), token);
  for (pid_t p : live_processes("", token)) {
    ADD_FAILURE() << "the token shows in the command line of " << p << ": "
                  << shell("tr '\\0' ' ' < /proc/" + std::to_string(p) + "/cmdline");
  }
  l.send(SIGINT);
  auto r = l.finish(10);
  EXPECT_EQ(r.exit_code(), 128 + SIGINT);
  expect_no_leftovers(m);
}

TEST(MultiHost, CtrlCStopsEveryRankOnEveryHost) {
  REQUIRE_CLUSTER();
  const std::string m = unique_marker();
  auto args = launch_args(hostfile_of({0, 1, 2}), m);
  for (const char* a : {"--n-per-node", "2", "--output-on-all-devices", "--", "PROBE", "--wait"}) {
    args.push_back(std::string(a) == "PROBE" ? cluster().probe : a);
  }
  Launched l(args);
  ASSERT_TRUE(l.wait_for("ready rank=", 6, 20)) << l.err();
  l.send_to_group(SIGINT);  // as a terminal does on Ctrl+C
  auto r = l.finish(10);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code(), 128 + SIGINT);
  EXPECT_NE(r.err.find("interrupted by SIGINT"), std::string::npos) << r.err;
  expect_no_leftovers(m);
}

TEST(MultiHost, RanksIgnoringSigtermAreKilledWithinFiveSeconds) {
  REQUIRE_CLUSTER();
  const std::string m = unique_marker();
  auto args = launch_args(hostfile_of({0, 1}), m);
  for (const char* a : {"--output-on-all-devices", "--", "PROBE", "--wait", "--ignore-term"}) {
    args.push_back(std::string(a) == "PROBE" ? cluster().probe : a);
  }
  Launched l(args);
  ASSERT_TRUE(l.wait_for("ready rank=", 2, 20)) << l.err();
  const auto start = std::chrono::steady_clock::now();
  l.send(SIGTERM);
  auto r = l.finish(10);
  const double stop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(r.timed_out);
  EXPECT_LT(stop_s, 5.0);
  EXPECT_EQ(r.exit_code(), 128 + SIGTERM);
  expect_no_leftovers(m);
}

TEST(MultiHost, OutputRoutingAcrossHosts) {
  REQUIRE_CLUSTER();
  const std::string m = unique_marker();
  const std::string script = "echo out-$TNT_RANK; echo err-$TNT_RANK >&2";
  auto args = launch_args(hostfile_of({0, 1}), m);
  args.insert(args.end(), {"--", "/bin/sh", "-c", script});
  auto r = run(args, 20);
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  EXPECT_EQ(r.out, "out-0\n");  // only the master rank by default
  EXPECT_NE(r.err.find("err-0\n"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("err-1"), std::string::npos) << r.err;

  args = launch_args(hostfile_of({0, 1}), m);
  args.insert(args.end(), {"--output-on-all-devices", "--", "/bin/sh", "-c", script});
  r = run(args, 20);
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  for (const char* rank : {"0", "1"}) {
    const std::string p = std::string("[") + rank + "] ";
    EXPECT_NE(r.out.find(p + "out-" + rank + "\n"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find(p + "err-" + rank + "\n"), std::string::npos) << r.err;
  }
  expect_no_leftovers(m);
}

TEST(MultiHost, RankKilledWithSigkillStopsTheJob) {
  REQUIRE_CLUSTER();
  const std::string m = unique_marker();
  auto args = launch_args(hostfile_of({0, 1, 2}), m);
  for (const char* a : {"--n-per-node", "2", "--output-on-all-devices", "--", "PROBE", "--wait"}) {
    args.push_back(std::string(a) == "PROBE" ? cluster().probe : a);
  }
  Launched l(args);
  ASSERT_TRUE(l.wait_for("ready rank=", 6, 20)) << l.err();
  const auto lines = lines_with(l.out(), "probe rank=3 ");
  ASSERT_EQ(lines.size(), 1u);
  ASSERT_EQ(kill(std::stoi(field(lines[0], "pid")), SIGKILL), 0);
  auto r = l.finish(10);
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code(), 0);
  EXPECT_NE(r.err.find("rank 3 on host " + cluster().hosts[1].addr + " was killed by SIGKILL"), std::string::npos)
      << r.err;
  expect_no_leftovers(m);
}

TEST(MultiHost, RankExitingWithStatus3StopsTheJob) {
  REQUIRE_CLUSTER();
  const std::string m = unique_marker();
  auto args = launch_args(hostfile_of({0, 1, 2}), m);
  for (const char* a : {"--n-per-node", "2", "--", "PROBE", "--wait", "--exit-rank", "4", "--exit-code", "3"}) {
    args.push_back(std::string(a) == "PROBE" ? cluster().probe : a);
  }
  auto r = run(args, 10);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code(), 3);
  EXPECT_NE(r.err.find("rank 4 on host " + cluster().hosts[2].addr + " exited with status 3"), std::string::npos)
      << r.err;
  expect_no_leftovers(m);
}

TEST(MultiHost, LosingAHostStopsTheJob) {
  REQUIRE_CLUSTER();
  const std::string m = unique_marker();
  auto args = launch_args(hostfile_of({0, 1}), m);
  for (const char* a : {"--n-per-node", "2", "--output-on-all-devices", "--", "PROBE", "--wait"}) {
    args.push_back(std::string(a) == "PROBE" ? cluster().probe : a);
  }
  Launched l(args);
  ASSERT_TRUE(l.wait_for("ready rank=", 4, 20)) << l.err();
  // Kill the agent on host 2: as if the machine went away under the job.
  int killed = 0;
  std::istringstream pids(shell("ip netns pids " + cluster().hosts[1].name));
  std::string p;
  while (pids >> p) {
    if (shell("tr '\\0' ' ' < /proc/" + p + "/cmdline").find("--agent") != std::string::npos) {
      killed += kill(std::stoi(p), SIGKILL) == 0 ? 1 : 0;
    }
  }
  ASSERT_EQ(killed, 1);
  auto r = l.finish(10);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code(), 1);
  EXPECT_NE(r.err.find("lost host " + cluster().hosts[1].addr + ": its ssh connection ended"), std::string::npos)
      << r.err;
  expect_no_leftovers(m);
}

TEST(MultiHost, RanksStopWhenTheLauncherIsKilled) {
  REQUIRE_CLUSTER();
  const std::string m = unique_marker();
  auto args = launch_args(hostfile_of({0, 1}), m);
  for (const char* a : {"--output-on-all-devices", "--", "PROBE", "--wait"}) {
    args.push_back(std::string(a) == "PROBE" ? cluster().probe : a);
  }
  Launched l(args);
  ASSERT_TRUE(l.wait_for("ready rank=", 2, 20)) << l.err();
  l.send(SIGKILL);
  l.finish(5);
  // The ssh clients die with tnt-launch (parent-death signal); each agent sees its input close
  // and stops its ranks. All of it must be over within 5 s.
  std::vector<std::string> left;
  for (int i = 0; i < 100; ++i) {
    left = leftovers(m);
    if (left.empty()) break;
    usleep(50000);
  }
  EXPECT_TRUE(left.empty()) << left.size() << " left, first: " << (left.empty() ? "" : left[0]);
}

TEST(MultiHost, UnreachableHostFailsFast) {
  REQUIRE_CLUSTER();
  const std::string m = unique_marker();
  const std::string hf = write_hostfile("unreachable", cluster().hosts[0].addr + "\n" + cluster().unreachable + "\n");
  auto args = launch_args(hf, m);
  for (const char* a : {"--ssh-connect-timeout", "2", "--", "PROBE"}) {
    args.push_back(std::string(a) == "PROBE" ? cluster().probe : a);
  }
  auto r = run(args, 10);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code(), 1);
  EXPECT_NE(r.err.find("host " + cluster().unreachable + " is not reachable over ssh"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");  // nothing started
  expect_no_leftovers(m);
}

TEST(MultiHost, MissingProgramOnOneHostFailsBeforeAnythingStarts) {
  REQUIRE_CLUSTER();
  const std::string m = unique_marker();
  auto args = launch_args(hostfile_of({0, 3}), m);
  args.push_back("--");
  args.push_back(cluster().probe);
  auto r = run(args, 10);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code(), 1);
  EXPECT_NE(
      r.err.find("program '" + cluster().probe + "' not found or not executable on host " + cluster().hosts[3].addr),
      std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
  expect_no_leftovers(m);
}

TEST(MultiHost, LauncherMissingOnAHostIsNamed) {
  REQUIRE_CLUSTER();
  const std::string m = unique_marker();
  // A copy of tnt-launch under bin/, which host 4 sees empty: the agent cannot start there.
  const std::string launcher_copy = cluster().dir + "/bin/tnt-launch";
  shell("cp " + kLaunch + " " + launcher_copy);
  auto args = launch_args(hostfile_of({0, 3}), m);
  args[0] = launcher_copy;
  args.insert(args.end(), {"--", "/bin/true"});
  auto r = run(args, 10);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code(), 1);
  EXPECT_NE(r.err.find("tnt-launch not found at " + launcher_copy + " on host " + cluster().hosts[3].addr),
            std::string::npos)
      << r.err;
  expect_no_leftovers(m);
}

TEST(MultiHost, SlurmNodeListIsUsedWithoutAHostfile) {
  REQUIRE_CLUSTER();
  const std::string m = unique_marker();
  const std::string nodes = cluster().hosts[0].addr + "," + cluster().hosts[1].addr;
  auto r = run({kLaunch, "--ssh-command", cluster().ssh, "-x", "TNT_TEST_MARKER=" + m, "--npernode", "2",
                "--output-on-all-devices", "--", cluster().probe},
               20, {{"SLURM_JOB_NODELIST", nodes}});
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  const auto lines = lines_with(r.out, "probe rank=");
  ASSERT_EQ(lines.size(), 4u) << r.out;
  for (const auto& l : lines) {
    const int rank = std::stoi(field(l, "rank"));
    EXPECT_EQ(field(l, "host"), cluster().hosts[static_cast<std::size_t>(rank / 2)].name) << l;
    EXPECT_EQ(field(l, "size"), "4") << l;
  }
  expect_no_leftovers(m);
}

TEST(MultiHost, DuplicateAndEmptyHostfilesAreRefused) {
  REQUIRE_CLUSTER();
  const std::string m = unique_marker();
  const std::string a = cluster().hosts[0].addr;
  const std::string dup = write_hostfile("dup", a + "\n" + cluster().hosts[1].addr + "\n" + a + "\n");
  auto args = launch_args(dup, m);
  args.insert(args.end(), {"--", cluster().probe});
  auto r = run(args, 10);
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_NE(r.err.find(dup + ":3: host '" + a + "' is listed twice"), std::string::npos) << r.err;

  const std::string empty = write_hostfile("empty", "# nothing here\n\n");
  args = launch_args(empty, m);
  args.insert(args.end(), {"--", cluster().probe});
  r = run(args, 10);
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_NE(r.err.find(empty + ": no hosts"), std::string::npos) << r.err;
  expect_no_leftovers(m);
}

TEST(MultiHost, DryRunPrintsEachHostsCommandsAndStartsNothing) {
  REQUIRE_CLUSTER();
  const std::string m = unique_marker();
  auto args = launch_args(hostfile_of({0, 1}), m);
  for (const char* a : {"--n-per-node", "2", "--dry-run", "-x", "GREETING=hello world", "--", "PROBE", "--wait"}) {
    args.push_back(std::string(a) == "PROBE" ? cluster().probe : a);
  }
  auto r = run(args, 10);
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  for (std::size_t i = 0; i < 2; ++i) {
    const std::string& addr = cluster().hosts[i].addr;
    EXPECT_NE(r.out.find("host " + addr + ": ranks " + std::to_string(2 * i) + "-" + std::to_string(2 * i + 1) +
                         ", started through: ssh -o BatchMode=yes"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("-T -- " + addr + " 'exec '\\''" + kLaunch + "'\\'' --agent'"), std::string::npos) << r.out;
  }
  for (int rank = 0; rank < 4; ++rank) {
    // Two ranks per host: bound to blocks of the host's cores by default (Note [Default binding]).
    const auto lines =
        lines_with(r.out, "  rank " + std::to_string(rank) + " [cores: block " + std::to_string(rank % 2) +
                              " of 2 of the host's cores, where it has 2 "
                              "or more]: cd ");
    ASSERT_EQ(lines.size(), 1u) << r.out;
    const std::string& l = lines[0];
    EXPECT_NE(l.find(" TNT_RANK=" + std::to_string(rank) + " "), std::string::npos) << l;
    EXPECT_NE(l.find(" TNT_LOCAL_RANK=" + std::to_string(rank % 2) + " "), std::string::npos) << l;
    EXPECT_NE(l.find(" TNT_SIZE=4 "), std::string::npos) << l;
    EXPECT_NE(l.find(" TNT_MASTER_ADDR=" + cluster().hosts[0].addr + " "), std::string::npos);
    EXPECT_NE(l.find(" GREETING='hello world' " + cluster().probe + " --wait"), std::string::npos) << l;
    EXPECT_NE(l.find("TNT_JOB_TOKEN=<secret made at launch>"), std::string::npos) << l;
  }
  EXPECT_TRUE(leftovers(m).empty());
}

TEST(MultiHost, CleanupStopsTheJobOnEveryHost) {
  REQUIRE_CLUSTER();
  const std::string m = unique_marker();
  // A copy of the probe under its own name, so that only this job matches.
  const std::string prog = cluster().dir + "/bin/cleanup_probe_" + m;
  shell("cp " + cluster().probe + " " + prog);
  const std::string hf = hostfile_of({0, 1});
  auto args = launch_args(hf, m);
  for (const char* a : {"--n-per-node", "2", "--output-on-all-devices", "--", "PROG", "--wait"}) {
    args.push_back(std::string(a) == "PROG" ? prog : a);
  }
  Launched job(args);
  ASSERT_TRUE(job.wait_for("ready rank=", 4, 20)) << job.err();
  // A stuck launcher is what --cleanup is for: it must not be the one that stops the ranks.
  job.send(SIGSTOP);

  auto c = run({kLaunch, "--cleanup", "--hostfile", hf, "--ssh-command", cluster().ssh, "--", prog}, 15);
  EXPECT_EQ(c.exit_code(), 0) << c.out << c.err;
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_NE(c.out.find("host " + cluster().hosts[i].name + ": stopped job "), std::string::npos) << c.out << c.err;
  }
  job.send(SIGCONT);
  auto r = job.finish(10);
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code(), 0);
  expect_no_leftovers(m);

  // Nothing left to stop: says so and succeeds.
  c = run({kLaunch, "--cleanup", "--hostfile", hf, "--ssh-command", cluster().ssh, "--", prog}, 15);
  EXPECT_EQ(c.exit_code(), 0) << c.err;
  EXPECT_NE(c.out.find("no registered job of '" + prog + "'"), std::string::npos) << c.out;
}

}  // namespace
}  // namespace tnt::launcher::test
