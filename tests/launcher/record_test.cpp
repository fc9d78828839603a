// The launcher's records (Note [Records] in launcher/src/record.h): what crosses ssh to the agent
// and what the job registry keeps. Round trips, and malformed input refused with a clear error.
#include <gtest/gtest.h>

#include <string>

#include "host_checks.h"
#include "host_launch.h"
#include "record.h"
#include "registry.h"

namespace tnt::launcher::detail {
namespace {

// The message of the RecordError `f` throws, or "<no error>".
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const RecordError& e) {
    return e.what();
  }
  return "<no error>";
}

HostLaunch sample_launch() {
  HostLaunch h;
  h.host = "node1";
  h.job_id = "tnt-1";
  h.program = {"/bin/prog", "two words", "new\nline\\back\rslash", ""};
  h.cwd = "/work dir";
  h.job_env = {{"TNT_SIZE", "4"}, {"TNT_JOB_TOKEN", "ab=cd"}};
  h.exports = {{"EMPTY", ""}, {"MULTI", "a\nb"}};
  h.first_rank = 2;
  h.n_ranks = 2;
  h.pin = true;
  h.pin_memory = false;
  h.core_binding = CoreBinding::none;
  h.numa_topology = "0-3@0;4-7@1";
  h.log_level = "DEBUG";
  h.stop_grace_s = 1.5;
  return h;
}

TEST(Record, HostLaunchRoundTripKeepsEveryByte) {
  const HostLaunch in = sample_launch();
  const HostLaunch out = deserialize_host_launch(serialize(in));
  EXPECT_EQ(out.host, in.host);
  EXPECT_EQ(out.job_id, in.job_id);
  EXPECT_EQ(out.program, in.program);
  EXPECT_EQ(out.cwd, in.cwd);
  EXPECT_EQ(out.job_env, in.job_env);
  EXPECT_EQ(out.exports, in.exports);
  EXPECT_EQ(out.first_rank, 2);
  EXPECT_EQ(out.n_ranks, 2);
  EXPECT_TRUE(out.pin);
  EXPECT_FALSE(out.pin_memory);
  EXPECT_EQ(out.core_binding, CoreBinding::none);
  EXPECT_EQ(out.numa_topology, in.numa_topology);
  EXPECT_EQ(out.log_level, "DEBUG");
  EXPECT_DOUBLE_EQ(out.stop_grace_s, 1.5);
}

TEST(Record, CheckAndCleanupRequestsAndRegistryEntriesRoundTrip) {
  CheckRequest c{"node2", "tnt train", "/w", 3, true, "0;1", 0, 7};
  const CheckRequest c2 = decode_check_request(encode_check_request(c));
  EXPECT_EQ(c2.host, "node2");
  EXPECT_EQ(c2.program, "tnt train");
  EXPECT_EQ(c2.n_ranks, 3);
  EXPECT_TRUE(c2.pin);
  EXPECT_EQ(c2.numa_topology, "0;1");
  EXPECT_EQ(c2.want_port, 0);
  EXPECT_EQ(c2.ssh_clients, 7);

  const CleanupRequest k = decode_cleanup_request(encode_cleanup_request({"prog", true, 2.5, true}));
  EXPECT_EQ(k.program, "prog");
  EXPECT_TRUE(k.force);
  EXPECT_DOUBLE_EQ(k.grace_s, 2.5);
  EXPECT_TRUE(k.dry_run);

  RegistryEntry e;
  e.job_id = "tnt-x";
  e.program = "prog\nname";
  e.executable = "/bin/prog";
  e.processes = {{100, 5000, -1}, {101, 5001, 0}};
  const RegistryEntry e2 = decode_registry_entry(encode_registry_entry(e), "/r/x.job");
  EXPECT_EQ(e2.job_id, "tnt-x");
  EXPECT_EQ(e2.program, "prog\nname");
  EXPECT_EQ(e2.path, "/r/x.job");
  ASSERT_EQ(e2.processes.size(), 2u);
  EXPECT_EQ(e2.processes[1].pid, 101);
  EXPECT_EQ(e2.processes[1].start_time, 5001u);
  EXPECT_EQ(e2.processes[0].rank, -1);
}

TEST(Record, MalformedHostLaunchesAreRefusedNamingTheLine) {
  const std::string good = serialize(sample_launch());
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  auto decode = [](const std::string& text) { return error_of([&] { deserialize_host_launch(text); }); };
  EXPECT_EQ(decode(good.substr(0, good.size() - 4)), "host launch description: truncated (no 'end' line)");
  EXPECT_EQ(decode(good.substr(0, good.size() - 1)), "host launch description: truncated (no 'end' line)");
  EXPECT_EQ(decode(""), "host launch description: truncated (no 'end' line)");
  EXPECT_NE(decode(good + "host again\n").find("after 'end'"), std::string::npos);
  EXPECT_NE(decode(replace("n_ranks 2", "n_ranks -2")).find("n_ranks '-2' is not a whole number from 1 to"),
            std::string::npos);
  EXPECT_NE(decode(replace("n_ranks 2", "n_ranks 2x")).find("is not a whole number"), std::string::npos);
  EXPECT_NE(decode(replace("n_ranks 2", "n_ranks 99999999999999999999")).find("is not a whole number"),
            std::string::npos);
  EXPECT_NE(decode(replace("first_rank 2\n", "")).find("no 'first_rank' line"), std::string::npos);
  EXPECT_NE(decode(replace("host node1\n", "host node1\nhost node2\n")).find("line 2: 'host' given twice"),
            std::string::npos);
  EXPECT_NE(decode(replace("pin 1", "pin 2")).find("pin '2' is not a whole number from 0 to 1"), std::string::npos);
  EXPECT_NE(decode(replace("host node1", "bogus node1")).find("line 1: unknown key 'bogus'"), std::string::npos);
  EXPECT_NE(decode(replace("host node1", "Host node1")).find("is not a 'key value' line"), std::string::npos);
  EXPECT_NE(decode(replace("host node1", "host")).find("line 1: 'host' is not a 'key value' line"), std::string::npos);
  EXPECT_NE(decode(replace("cwd /work dir", "cwd /work\\x")).find("unknown escape '\\x'"), std::string::npos);
  EXPECT_NE(decode(replace("cwd /work dir", "cwd /work\\")).find("lone backslash"), std::string::npos);
  EXPECT_NE(decode(replace("env TNT_SIZE=4", "env 4SIZE=4")).find("not NAME=VALUE"), std::string::npos);
  EXPECT_NE(decode(replace("env TNT_SIZE=4", "env TNT_SIZE")).find("not NAME=VALUE"), std::string::npos);
  EXPECT_NE(decode(replace("log_level DEBUG", "log_level LOUD")).find("'LOUD' is not INFO"), std::string::npos);
  EXPECT_NE(decode(replace("core_binding none", "core_binding socket")).find("'socket' is not auto, core or none"),
            std::string::npos);
  std::string no_program = good;
  while (no_program.find("\narg ") != std::string::npos) {
    const auto at = no_program.find("\narg ");
    no_program.erase(at, no_program.find('\n', at + 1) - at);
  }
  EXPECT_NE(decode(no_program).find("no program"), std::string::npos);
}

TEST(Record, SizesAreBounded) {
  RecordLimits small;
  small.max_bytes = 64;
  small.max_fields = 3;
  EXPECT_NE(error_of([&] {
              Record::parse(std::string(65, 'a'), "r", {"a"}, small);
            }).find("65 bytes, more than the 64 a record may have"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              Record::parse("a 1\na 2\na 3\na 4\nend\n", "r", {"a"}, small);
            }).find("line 4: more than 3 fields"),
            std::string::npos);
  EXPECT_EQ(Record::parse("a 1\na 2\na 3\nend\n", "r", {"a"}, small).all("a").size(), 3u);
  const std::string long_key(33, 'k');
  EXPECT_NE(error_of([&] { Record::parse(long_key + " v\nend\n", "r", {long_key}); }).find("is not a 'key value'"),
            std::string::npos);
  // Binary garbage is named in printable form.
  const std::string garbage("\x01\xff\x7f zz\nend\n", 9);
  EXPECT_EQ(error_of([&] { Record::parse(garbage, "r", {"a"}); }), "r: line 1: '??? zz' is not a 'key value' line");
}

TEST(Record, MalformedRequestsAndRegistryEntriesAreRefused) {
  EXPECT_NE(error_of([] {
              decode_check_request(
                  "host h\nprogram p\ncwd /\nn_ranks 0\npin 0\nnuma_topology \nwant_port -1\nssh_clients 0\nend\n");
            }).find("n_ranks '0'"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              decode_check_request(
                  "host h\nprogram p\ncwd /\nn_ranks 1\npin 0\nnuma_topology \nwant_port 70000\nssh_clients 0\nend\n");
            }).find("want_port '70000'"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              decode_cleanup_request("program \nforce 0\ngrace_ms 10\ndry_run 0\nend\n");
            }).find("program is empty"),
            std::string::npos);
  EXPECT_NE(error_of([] { decode_cleanup_request("program p\nforce 0\ndry_run 0\nend\n"); }).find("no 'grace_ms' line"),
            std::string::npos);
  const std::string head = "job j\nprogram p\nexecutable /p\n";
  for (const char* bad : {"process 0 12\n", "process 0 12 34 56\n", "process 0 -5 34\n", "process x 12 34\n",
                          "process 0 12 0\n", "process 0  12 34\n"}) {
    EXPECT_NE(error_of([&] {
                decode_registry_entry(head + bad + "end\n", "/r/f.job");
              }).find("job registry file /r/f.job: line 4: process"),
              std::string::npos)
        << bad;
  }
  // The old format had no "end": such a file is not taken for a complete entry.
  EXPECT_NE(error_of([&] { decode_registry_entry(head + "process 0 12 34\n", "/r/f.job"); }).find("truncated"),
            std::string::npos);
}

}  // namespace
}  // namespace tnt::launcher::detail
