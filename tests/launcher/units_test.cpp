// Unit tests of the launcher's parts: command line, hostfile, Slurm node lists, NUMA topology
// specs, the plan and each rank's environment.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <map>

#include "capacity.h"
#include "tnt/core/error.h"
#include "tnt/core/slurm.h"
#include "tnt/launcher/hostfile.h"
#include "tnt/launcher/numa.h"
#include "tnt/launcher/options.h"
#include "tnt/launcher/plan.h"

namespace tnt::launcher {
namespace {

LaunchOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "tnt-launch");
  return parse_command_line(args);
}

TEST(Options, EverythingAfterTheSeparatorIsTheProgram) {
  auto o = parse({"-n", "2", "--", "prog", "-n", "5", "--", "--hostfile"});
  EXPECT_EQ(o.local_ranks, 2);
  EXPECT_EQ(o.program, (std::vector<std::string>{"prog", "-n", "5", "--", "--hostfile"}));
}

TEST(Options, TarantellaSpellingsOfRanksPerNode) {
  for (const char* spelling : {"--n-per-node", "--npernode", "--devices-per-node"}) {
    auto o = parse({"--hostfile", "h", spelling, "3", "--", "p"});
    EXPECT_EQ(o.n_per_node, 3) << spelling;
    EXPECT_EQ(o.hostfile, "h");
  }
}

TEST(Options, ExportsKeepTheirOrderAndBareNamesCopyTheValue) {
  setenv("TNT_UNIT_TEST_VALUE", "from-env", 1);
  auto o = parse({"-x", "B=2", "-x", "A=1=one", "-x", "TNT_UNIT_TEST_VALUE", "-x", "E=", "--", "p"});
  ASSERT_EQ(o.exports.size(), 4u);
  EXPECT_EQ(o.exports[0], (std::pair<std::string, std::string>{"B", "2"}));
  EXPECT_EQ(o.exports[1], (std::pair<std::string, std::string>{"A", "1=one"}));
  EXPECT_EQ(o.exports[2], (std::pair<std::string, std::string>{"TNT_UNIT_TEST_VALUE", "from-env"}));
  EXPECT_EQ(o.exports[3], (std::pair<std::string, std::string>{"E", ""}));
  unsetenv("TNT_UNIT_TEST_VALUE");
  EXPECT_THROW(parse({"-x", "TNT_UNIT_TEST_VALUE", "--", "p"}), UsageError);
}

TEST(Options, DefaultsAndValues) {
  auto o = parse({"--", "p"});
  EXPECT_EQ(o.transport, "tcp");
  EXPECT_EQ(o.fusion_threshold_kb, 32);
  EXPECT_EQ(o.log_level, "INFO");
  EXPECT_FALSE(o.pin_to_socket);
  o = parse({"--transport", "ib", "--fusion-threshold", "128", "--log-level", "warning", "--pin-memory-to-socket",
             "--log-on-all-devices", "--output-on-all-devices", "--", "p"});
  EXPECT_EQ(o.transport, "ib");
  EXPECT_EQ(o.fusion_threshold_kb, 128);
  EXPECT_EQ(o.log_level, "WARNING");
  EXPECT_TRUE(o.pin_to_socket);  // memory pinning implies CPU pinning
  EXPECT_TRUE(o.pin_memory_to_socket);
  EXPECT_TRUE(o.log_on_all_devices);
  EXPECT_TRUE(o.output_on_all_devices);
}

TEST(Options, MistakesAreUsageErrorsThatSayWhatIsWrong) {
  auto message = [](std::vector<std::string> args) {
    try {
      parse(std::move(args));
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_NE(message({"-n", "0", "--", "p"}).find("at least 1"), std::string::npos);
  EXPECT_NE(message({"-n", "-3", "--", "p"}).find("at least 1"), std::string::npos);
  EXPECT_NE(message({"-n", "two", "--", "p"}).find("two"), std::string::npos);
  EXPECT_NE(message({"--log-level", "LOUD", "--", "p"}).find("LOUD"), std::string::npos);
  EXPECT_NE(message({"-n", "2", "--hostfile", "h", "--", "p"}).find("exclude each other"), std::string::npos);
  EXPECT_NE(message({"--force", "--", "p"}).find("--force only goes with --cleanup"), std::string::npos);
  EXPECT_NE(message({"--bogus", "--", "p"}).find("--bogus"), std::string::npos);
  EXPECT_NE(message({"-n", "1"}).find("no program given"), std::string::npos);
  EXPECT_NE(message({"--min-ranks", "2", "--", "p"}).find("give --max-restarts K too"), std::string::npos);
  EXPECT_NE(message({"--max-restarts", "1", "--min-ranks", "0", "--", "p"}).find("--min-ranks"), std::string::npos);
  EXPECT_EQ(parse({"--max-restarts", "1", "--min-ranks", "2", "--", "p"}).min_ranks, 2);
  EXPECT_EQ(parse({"--help"}).mode, Mode::help);
  EXPECT_EQ(parse({"--version"}).mode, Mode::version);
  EXPECT_EQ(parse({"--cleanup", "--force", "--", "p"}).mode, Mode::cleanup);
}

// Every rank refuses TNT_FUSION_THRESHOLD_KB=0, so tnt-launch refuses it first, with the range.
TEST(Options, FusionThresholdOutsideItsRangeIsRefused) {
  for (const char* bad : {"0", "-1", "1048577"}) {
    try {
      parse({"--fusion-threshold", bad, "--", "p"});
      ADD_FAILURE() << "--fusion-threshold " << bad << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--fusion-threshold"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("from 1 to 1048576"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parse({"--fusion-threshold", "1", "--", "p"}).fusion_threshold_kb, 1);
  EXPECT_EQ(parse({"--fusion-threshold", "1048576", "--", "p"}).fusion_threshold_kb, 1048576);
}

TEST(Options, CleanupRefusesOptionsThatMeanNothingThere) {
  try {
    parse({"--cleanup", "-n", "2", "--transport", "ib", "-x", "A=1", "--pin-to-socket", "--", "p"});
    ADD_FAILURE() << "accepted";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    for (const char* name : {"-n", "--transport", "-x", "--pin-to-socket"}) {
      EXPECT_NE(m.find(std::string(" ") + name), std::string::npos) << name << ": " << m;
    }
    EXPECT_NE(m.find("--cleanup"), std::string::npos) << m;
  }
  // What cleanup does use is still accepted.
  auto o = parse({"--cleanup", "--hostfile", "h", "--force", "--dry-run", "--stop-grace", "1", "--ssh-command",
                  "ssh -p 22", "--ssh-connect-timeout", "3", "--log-level", "DEBUG", "--", "p"});
  EXPECT_EQ(o.mode, Mode::cleanup);
  EXPECT_TRUE(o.dry_run);
  EXPECT_TRUE(o.force);
}

TEST(Hostfile, CommentsBlankLinesAndSlots) {
  auto hosts = parse_hostfile_text("# cluster\n\nnode1\n  node2 slots=4  # fat node\n\tnode3\n", "hf");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].name, "node1");
  EXPECT_FALSE(hosts[0].slots);
  EXPECT_EQ(hosts[1].name, "node2");
  EXPECT_EQ(hosts[1].slots, 4);
  EXPECT_EQ(hosts[2].name, "node3");
}

TEST(Hostfile, ErrorsNameTheFileAndLine) {
  auto message = [](const std::string& text) {
    try {
      parse_hostfile_text(text, "hosts.txt");
    } catch (const HostfileError& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_EQ(message("a\nb\na\n"),
            "hosts.txt:3: host 'a' is listed twice (each host once; use slots=N or --n-per-node "
            "for several ranks per host)");
  EXPECT_EQ(message(""), "hosts.txt: no hosts (the file is empty or only has comments)");
  EXPECT_EQ(message("# only\n\n"), "hosts.txt: no hosts (the file is empty or only has comments)");
  EXPECT_NE(message("a slots=0\n").find("hosts.txt:1: 'slots=0'"), std::string::npos);
  EXPECT_NE(message("a slots=x\n").find("slots must be"), std::string::npos);
  EXPECT_NE(message("a b\n").find("hosts.txt:1: unexpected 'b'"), std::string::npos);
  EXPECT_NE(message("-oProxyCommand=x\n").find("not a valid host name"), std::string::npos);
  EXPECT_NE(message("a;rm\n").find("not a valid host name"), std::string::npos);
  EXPECT_THROW(read_hostfile("/no/such/hostfile"), HostfileError);
}

// Note [Hostfile bounds]: DNS's 253 characters for a host name, 32 for a user name, and text that
// is echoed back cut to a few hundred characters.
TEST(Hostfile, NamesAndFilesAreBounded) {
  auto message = [](const std::string& text) {
    try {
      parse_hostfile_text(text, "hosts.txt");
    } catch (const HostfileError& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_EQ(parse_hostfile_text(std::string(253, 'h') + "\n", "hf").at(0).name, std::string(253, 'h'));
  EXPECT_EQ(parse_hostfile_text(std::string(32, 'u') + "@node1\n", "hf").at(0).name, std::string(32, 'u') + "@node1");
  for (const std::string& name : {std::string(254, 'h'), std::string(33, 'u') + "@node1", std::string(1 << 20, 'h'),
                                  "user@" + std::string(1 << 20, 'h')}) {
    const std::string m = message("node0\n" + name + " slots=2\n");
    EXPECT_NE(m.find("hosts.txt:2: '"), std::string::npos) << m.substr(0, 300);
    EXPECT_NE(m.find("at most 253 characters"), std::string::npos) << m.substr(0, 300);
    EXPECT_LT(m.size(), 300u) << m.substr(0, 300);
  }
  EXPECT_LT(message("a " + std::string(1 << 20, 'x') + "\n").size(), 300u);
  EXPECT_LT(message("a slots=" + std::string(1 << 20, '9') + "\n").size(), 300u);
  const std::string huge = message(std::string(kMaxHostfileBytes + 1, '#'));
  EXPECT_NE(huge.find("more than a hostfile may have"), std::string::npos) << huge;
  std::string many;
  for (std::size_t i = 0; i <= kMaxSlurmNodes; ++i) many += "n" + std::to_string(i) + "\n";
  EXPECT_NE(message(many).find("more than 100000 hosts"), std::string::npos);
}

TEST(Hostfile, AUtf8ByteOrderMarkIsSkipped) {
  // Editors on Windows start UTF-8 files with EF BB BF.
  auto hosts = parse_hostfile_text("\xEF\xBB\xBFnode1 slots=2\nnode2\n", "hf");
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].name, "node1");
  EXPECT_EQ(hosts[0].slots, 2);
  // Only at the very start: elsewhere it still is no part of a host name.
  EXPECT_THROW(parse_hostfile_text("node1\n\xEF\xBB\xBFnode2\n", "hf"), HostfileError);
}

TEST(Hostfile, BracketedIpv6AddressesLoseTheirBrackets) {
  // ssh takes an IPv6 address bare; with brackets it tries to resolve "[::1]" as a name.
  auto hosts = parse_hostfile_text("[::1]\n[fd00::2] slots=2\nuser@[fd00::3]\nfd00::4\n", "hf");
  ASSERT_EQ(hosts.size(), 4u);
  EXPECT_EQ(hosts[0].name, "::1");
  EXPECT_EQ(hosts[1].name, "fd00::2");
  EXPECT_EQ(hosts[1].slots, 2);
  EXPECT_EQ(hosts[2].name, "user@fd00::3");
  EXPECT_EQ(hosts[3].name, "fd00::4");
  EXPECT_TRUE(is_local_host(hosts[0].name));
  EXPECT_FALSE(is_local_host(hosts[1].name));
  // The same address with and without brackets is one host.
  EXPECT_THROW(parse_hostfile_text("[fd00::2]\nfd00::2\n", "hf"), HostfileError);
  auto message = [](const std::string& text) {
    try {
      parse_hostfile_text(text, "hf");
    } catch (const HostfileError& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_NE(message("[::1\n").find("hf:1: '[::1'"), std::string::npos) << message("[::1\n");
  EXPECT_NE(message("[node1]\n").find("IPv6"), std::string::npos) << message("[node1]\n");
  EXPECT_NE(message("[::1]:22\n").find("IPv6"), std::string::npos) << message("[::1]:22\n");
}

TEST(Capacity, EveryLimitIsCheckedAndNamedWithWhatWouldFit) {
  using detail::check_capacity;
  using detail::SystemLimits;
  auto has = [](const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; };
  SystemLimits l;  // no limits at all
  EXPECT_EQ(check_capacity(1 << 22, 5, "h", l), "");

  l.open_files = 1024;
  l.open_files_hard = 4096;
  l.open_now = 8;
  EXPECT_EQ(check_capacity(500, 0, "h", l), "");  // 8 open + 2 per rank + 16 spare = 1024
  std::string m = check_capacity(501, 0, "h", l);
  EXPECT_TRUE(has(m, "host h cannot start 501 ranks: they need about 1026 open files")) << m;
  EXPECT_TRUE(has(m, "RLIMIT_NOFILE (ulimit -n) is 1024 (raise it with ulimit -n 1026; the hard limit is 4096)")) << m;
  EXPECT_TRUE(has(m, "at most 500 ranks fit there")) << m;
  m = check_capacity(500, 1, "h", l);  // an ssh client holds 3 more
  EXPECT_TRUE(has(m, "at most 498 ranks fit there")) << m;

  l = SystemLimits{};
  l.pid_max = 32768;
  l.tasks_now = 768;
  EXPECT_EQ(check_capacity(32000, 0, "h", l), "");
  m = check_capacity(32001, 0, "h", l);
  EXPECT_TRUE(has(m, "they need 32001 processes, but kernel.pid_max is 32768 and 768 tasks run already")) << m;
  EXPECT_TRUE(has(m, "at most 32000 ranks fit")) << m;

  l = SystemLimits{};
  l.cgroup_pids_max = 100;
  l.cgroup_pids_current = 40;
  l.cgroup_pids_file = "/sys/fs/cgroup/job/pids.max";
  EXPECT_EQ(check_capacity(58, 2, "h", l), "");
  m = check_capacity(59, 2, "h", l);
  EXPECT_TRUE(has(m, "the cgroup's pids.max (/sys/fs/cgroup/job/pids.max) is 100 with 40 in use")) << m;
  EXPECT_TRUE(has(m, "at most 58 ranks fit")) << m;

  l.nproc = 10;  // only for users other than root
  m = check_capacity(20, 0, "h", l);
  EXPECT_TRUE(has(m, "RLIMIT_NPROC (ulimit -u) is 10")) << m;
  EXPECT_TRUE(has(m, "at most 10 ranks fit")) << m;
  EXPECT_EQ(check_capacity(0, 11, "", l).rfind("this machine cannot start 11 ssh clients", 0), 0u);
}

TEST(Capacity, ThisMachinesLimitsAreRead) {
  const auto l = detail::read_system_limits();
  EXPECT_GT(l.pid_max, 0);
  EXPECT_GT(l.tasks_now, 0);
  EXPECT_GE(l.open_now, 3);  // stdin, stdout, stderr at least
  EXPECT_NE(l.open_files, 0);
}

TEST(Slurm, NodeListsExpand) {
  EXPECT_EQ(expand_slurm_nodelist("node[01-03,7],gpu1"),
            (std::vector<std::string>{"node01", "node02", "node03", "node7", "gpu1"}));
  EXPECT_EQ(expand_slurm_nodelist("a"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(expand_slurm_nodelist("r[8-10]x"), (std::vector<std::string>{"r8x", "r9x", "r10x"}));
  EXPECT_THROW(expand_slurm_nodelist("n[1-"), HostfileError);
  EXPECT_THROW(expand_slurm_nodelist("n[3-1]"), HostfileError);
  EXPECT_THROW(expand_slurm_nodelist(""), HostfileError);
}

// Found by fuzzing (fuzz/regressions/slurm_nodelist): each range was bounded, but not their
// sum, so 1.4 KB of SLURM_JOB_NODELIST expanded to 10 million names (10 s, 850 MB).
TEST(Slurm, NodeListOfTooManyNodesIsRefused) {
  std::string nodelist;
  for (int i = 0; i < 100; ++i) nodelist += (i ? ",n" : "n") + std::to_string(i) + "[0-99999]";
  try {
    expand_slurm_nodelist(nodelist);
    ADD_FAILURE() << "a node list of 10 million nodes was expanded";
  } catch (const HostfileError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 100000 nodes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(expand_slurm_nodelist("n[1-100000]").size(), 100000u);  // the largest allowed
}

TEST(Numa, CoreBlocksSplitTheCpusEvenly) {
  const std::vector<int> cpus = {0, 1, 2, 3, 8, 9, 10};
  EXPECT_EQ(core_block(cpus, 2, 0), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(core_block(cpus, 2, 1), (std::vector<int>{8, 9, 10}));
  EXPECT_EQ(core_block(cpus, 3, 2), (std::vector<int>{9, 10}));
  EXPECT_EQ(core_block(cpus, 7, 6), (std::vector<int>{10}));
  EXPECT_TRUE(core_block(cpus, 8, 0).empty());  // more ranks than CPUs: not bound
  EXPECT_TRUE(core_block(cpus, 2, 2).empty());
}

TEST(Numa, TopologySpecs) {
  auto t = parse_numa_topology("0-3,8@0;4-7@1;9");
  ASSERT_EQ(t.nodes.size(), 3u);
  EXPECT_EQ(t.nodes[0].cpus, (std::vector<int>{0, 1, 2, 3, 8}));
  EXPECT_EQ(t.nodes[1].memory_node, 1);
  EXPECT_EQ(t.nodes[2].memory_node, 2);  // defaults to its index
  EXPECT_EQ(format_cpu_list(t.nodes[0].cpus), "0-3,8");
  EXPECT_EQ(node_for_local_rank(4, t), 1);
  EXPECT_THROW(parse_numa_topology(""), tnt::ConfigError);
  EXPECT_THROW(parse_numa_topology("3-1"), tnt::ConfigError);
  EXPECT_THROW(parse_numa_topology("0@x"), tnt::ConfigError);
  EXPECT_FALSE(detect_numa_topology().nodes.empty());
  EXPECT_FALSE(detect_numa_topology().nodes[0].cpus.empty());
}

TEST(Plan, LocalJob) {
  auto p = make_plan(parse({"-n", "4", "--", "p"}));
  ASSERT_EQ(p.hosts.size(), 1u);
  EXPECT_TRUE(p.hosts[0].local);
  EXPECT_EQ(p.size, 4);
  EXPECT_EQ(p.master_addr, "127.0.0.1");
  EXPECT_NE(make_plan(parse({"--", "p"})).job_id, p.job_id);
  EXPECT_EQ(make_job_token().size(), 64u);
  EXPECT_NE(make_job_token(), make_job_token());
}

TEST(Plan, HostfileWithSlotsAndRanksPerNode) {
  char path[] = "/tmp/tnt-launch-unit-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "alpha slots=3\nbeta\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  auto p = make_plan(parse({"--hostfile", path, "--", "p"}));
  ASSERT_EQ(p.hosts.size(), 2u);
  EXPECT_EQ(p.hosts[0].n_ranks, 3);
  EXPECT_EQ(p.hosts[1].n_ranks, 1);
  EXPECT_EQ(p.hosts[1].first_rank, 3);
  EXPECT_EQ(p.size, 4);
  EXPECT_EQ(p.master_addr, "alpha");
  p = make_plan(parse({"--hostfile", path, "--n-per-node", "2", "--", "p"}));
  EXPECT_EQ(p.size, 4);
  EXPECT_EQ(p.hosts[1].first_rank, 2);
  // A restart under --min-ranks leaves out the hosts it cannot reach: the others are numbered
  // afresh, and the first of them is the master.
  p = make_plan(parse({"--hostfile", path, "--", "p"}), {"alpha"});
  ASSERT_EQ(p.hosts.size(), 1u);
  EXPECT_EQ(p.hosts[0].name, "beta");
  EXPECT_EQ(p.hosts[0].first_rank, 0);
  EXPECT_EQ(p.size, 1);
  EXPECT_EQ(p.master_addr, "beta");
  unlink(path);
}

TEST(Plan, SlurmNodeListWhenNoHostfile) {
  setenv("SLURM_JOB_NODELIST", "cn[1-3]", 1);
  auto p = make_plan(parse({"--n-per-node", "2", "--", "p"}));
  unsetenv("SLURM_JOB_NODELIST");
  ASSERT_EQ(p.hosts.size(), 3u);
  EXPECT_EQ(p.hosts[2].name, "cn3");
  EXPECT_EQ(p.hosts[2].first_rank, 4);
  EXPECT_EQ(p.size, 6);
  EXPECT_EQ(p.master_addr, "cn1");
}

// Inside an allocation the nodes get the tasks Slurm gave them: SLURM_NTASKS_PER_NODE for every
// node, else SLURM_TASKS_PER_NODE node by node; --n-per-node comes first.
TEST(Plan, SlurmTasksPerNode) {
  setenv("SLURM_JOB_NODELIST", "a[1-2]-ib[3,5]", 1);
  setenv("SLURM_TASKS_PER_NODE", "2(x3),1", 1);
  auto p = make_plan(parse({"--", "p"}));
  ASSERT_EQ(p.hosts.size(), 4u);
  EXPECT_EQ(p.hosts[1].name, "a1-ib5");
  EXPECT_EQ(p.hosts[2].first_rank, 4);
  EXPECT_EQ(p.hosts[3].n_ranks, 1);
  EXPECT_EQ(p.size, 7);
  setenv("SLURM_NTASKS_PER_NODE", "3", 1);
  EXPECT_EQ(make_plan(parse({"--", "p"})).size, 12);
  EXPECT_EQ(make_plan(parse({"--n-per-node", "1", "--", "p"})).size, 4);
  unsetenv("SLURM_NTASKS_PER_NODE");
  setenv("SLURM_TASKS_PER_NODE", "2(x3)", 1);  // three counts for four nodes
  EXPECT_THROW(make_plan(parse({"--", "p"})), HostfileError);
  setenv("SLURM_TASKS_PER_NODE", "2(x", 1);
  EXPECT_THROW(make_plan(parse({"--", "p"})), HostfileError);
  unsetenv("SLURM_TASKS_PER_NODE");
  unsetenv("SLURM_JOB_NODELIST");
}

TEST(Options, LauncherChoice) {
  EXPECT_EQ(parse({"--", "p"}).launcher, "auto");
  EXPECT_EQ(parse({"--launcher", "ssh", "--", "p"}).launcher, "ssh");
  EXPECT_THROW(parse({"--launcher", "rsh", "--", "p"}), UsageError);
  EXPECT_THROW(parse({"--launcher", "srun", "-n", "2", "--", "p"}), UsageError);
  const auto task = parse(
      {"--srun-task", "--pin-memory-to-socket", "--srun-export", "A", "--srun-export", "B", "--", "prog", "--flag"});
  EXPECT_EQ(task.mode, Mode::srun_task);
  EXPECT_TRUE(task.pin_to_socket);
  EXPECT_EQ(task.srun_exports, (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(task.program, (std::vector<std::string>{"prog", "--flag"}));
}

TEST(Plan, RankEnvironmentHasEveryDesignVariableThenTheExports) {
  auto o = parse({"-n", "2", "-x", "Z=last", "--transport", "ib", "--", "p"});
  auto p = make_plan(o);
  p.master_port = 4242;
  auto env = rank_environment(job_environment(o, p), o.exports, 1, 1, 2, 0, true);
  std::map<std::string, std::string> m(env.begin(), env.end());
  for (const char* name : {"TNT_RANK", "TNT_SIZE", "TNT_LOCAL_RANK", "TNT_LOCAL_SIZE", "TNT_MASTER_ADDR",
                           "TNT_MASTER_PORT", "TNT_JOB_ID", "TNT_TRANSPORT", "TNT_FUSION_THRESHOLD_KB", "TNT_LOG_LEVEL",
                           "TNT_LOG_ON_ALL_DEVICES", "TNT_OUTPUT_ON_ALL_DEVICES", "TNT_PIN_SOCKET", "TNT_PIN_MEMORY"}) {
    EXPECT_EQ(m.count(name), 1u) << name;
  }
  EXPECT_EQ(m["TNT_RANK"], "1");
  EXPECT_EQ(m["TNT_SIZE"], "2");
  EXPECT_EQ(m["TNT_MASTER_PORT"], "4242");
  EXPECT_EQ(m["TNT_TRANSPORT"], "ib");
  EXPECT_EQ(m["TNT_PIN_SOCKET"], "0");
  EXPECT_EQ(m["TNT_PIN_MEMORY"], "1");
  EXPECT_EQ(env.back(), (std::pair<std::string, std::string>{"Z", "last"}));
  // The token is added by the launcher at start, never part of the plan's environment.
  EXPECT_EQ(m.count("TNT_JOB_TOKEN"), 0u);
}

}  // namespace
}  // namespace tnt::launcher
