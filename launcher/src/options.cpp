#include "tnt/launcher/options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "tnt/core/settings.h"

namespace tnt::launcher {
namespace {

bool valid_env_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::pair<std::string, std::string> parse_export(const std::string& item) {
  const auto eq = item.find('=');
  std::string name = item.substr(0, eq);
  if (!valid_env_name(name)) {
    throw UsageError("-x '" + item + "': '" + name + "' is not a valid environment variable name (expected VAR=VALUE)");
  }
  if (eq != std::string::npos) return {name, item.substr(eq + 1)};
  // Like mpirun: a bare name exports the launcher's own value.
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) {
    throw UsageError("-x " + name + ": the variable is not set here; write -x " + name + "=VALUE");
  }
  return {name, value};
}

}  // namespace

LaunchOptions parse_command_line(const std::vector<std::string>& args) {
  LaunchOptions opts;
  opts.ssh_command = settings::kLaunchSsh.read();

  // Everything after the first "--" is the program, whatever it looks like.
  std::vector<std::string> own;
  bool saw_separator = false;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (!saw_separator && args[i] == "--") {
      saw_separator = true;
      continue;
    }
    (saw_separator ? opts.program : own).push_back(args[i]);
  }

  CLI::App app{"tnt-launch: start a tnt job (or any program) on local and remote hosts", "tnt-launch"};
  app.footer(
      "Everything after -- is the program and its arguments.\n"
      "Examples:\n"
      "  tnt-launch -n 4 -- ./my_program --flag\n"
      "  tnt-launch --hostfile hosts --n-per-node 2 --pin-to-socket -- tnt-train --transport=tcp\n"
      "  tnt-launch --cleanup --hostfile hosts -- tnt-train");
  app.set_help_flag();  // handled below so that --help works without a program

  bool help = false;
  bool version = false;
  bool cleanup = false;
  bool agent = false;
  int n = 0;
  int per_node = 0;
  int master_port = 0;
  std::vector<std::string> exports;
  std::vector<std::string> stray;

  app.add_flag("-h,--help", help, "Print this help and exit");
  app.add_flag("--version", version, "Print the version and exit");
  auto* n_opt = app.add_option("-n", n, "Number of ranks on the local machine");
  auto* hostfile_opt = app.add_option("--hostfile", opts.hostfile,
                                      "File naming the hosts, one per line ('host' or 'host slots=N'; '#' comments)");
  auto* per_node_opt = app.add_option("--n-per-node,--npernode,--devices-per-node", per_node,
                                      "Ranks per host of the hostfile (default: its slots, or 1)");
  app.add_flag("--pin-to-socket", opts.pin_to_socket, "Run local rank i on NUMA node (i mod number of nodes)");
  app.add_flag("--pin-memory-to-socket", opts.pin_memory_to_socket, "Also bind each rank's memory to its NUMA node");
  app.add_option("--numa-topology", opts.numa_topology,
                 "Use this NUMA topology instead of libnuma's: 'CPUS[@MEM];...' per node, "
                 "e.g. '0-3@0;4-7@1' (for tests and odd machines)");
  app.add_option("--transport", opts.transport, "Data transport of the job (TNT_TRANSPORT)")
      ->check(CLI::IsMember({"tcp", "ib"}));
  app.add_option("--fusion-threshold", opts.fusion_threshold_kb,
                 "Gradient fusion threshold in KiB (TNT_FUSION_THRESHOLD_KB)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--log-level", opts.log_level, "INFO, WARNING, DEBUG or ERROR (TNT_LOG_LEVEL)")
      ->transform(CLI::IsMember({"INFO", "WARNING", "DEBUG", "ERROR"}, CLI::ignore_case));
  app.add_flag("--log-on-all-devices", opts.log_on_all_devices, "Every rank logs, not only rank 0");
  app.add_flag("--output-on-all-devices", opts.output_on_all_devices,
               "Show every rank's output, each line prefixed with its rank");
  app.add_option("-x", exports, "Export VAR=VALUE to every rank (repeatable, kept in order)")->allow_extra_args(false);
  app.add_flag("--dry-run", opts.dry_run, "Print what would run on each host and run nothing");
  app.add_flag("--cleanup", cleanup, "Stop this user's ranks of the program after -- on every host of the hostfile");
  app.add_flag("--force", opts.force, "With --cleanup: SIGKILL what SIGTERM did not stop");
  auto* port_opt = app.add_option("--master-port", master_port, "Port of rank 0's rendezvous (default: a free port)")
                       ->check(CLI::Range(1, 65535));
  app.add_option("--stop-grace", opts.stop_grace_s,
                 "Seconds between SIGTERM and SIGKILL when stopping ranks (default 2)")
      ->check(CLI::Range(0.0, 60.0));
  app.add_option("--ssh-command", opts.ssh_command,
                 "ssh client and options for remote hosts (env TNT_LAUNCH_SSH; default 'ssh')");
  app.add_option("--ssh-connect-timeout", opts.ssh_connect_timeout_s, "Seconds to wait for each ssh connection")
      ->check(CLI::Range(1, 600));
  app.add_flag("--agent", agent, "Internal: the per-host side of a remote launch")->group("");
  app.add_option("stray", stray)->group("");

  try {
    std::vector<std::string> reversed(own.rbegin(), own.rend());
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw UsageError(std::string(e.what()) + " (see tnt-launch --help)");
  }

  if (help) {
    opts.mode = Mode::help;
    opts.help_text = app.help();
    return opts;
  }
  if (version) {
    opts.mode = Mode::version;
    return opts;
  }
  if (agent) {
    opts.mode = Mode::agent;
    return opts;
  }
  if (!stray.empty()) {
    throw UsageError("unexpected argument '" + stray.front() + "': put the program after --, e.g. tnt-launch -n 2 -- " +
                     stray.front());
  }
  for (const auto& e : exports) opts.exports.push_back(parse_export(e));
  opts.log_level = [&] {
    std::string l = opts.log_level;
    std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return l;
  }();

  if (n_opt->count() > 0) {
    if (n < 1) throw UsageError("-n " + std::to_string(n) + ": the number of ranks must be at least 1");
    opts.local_ranks = n;
  }
  if (per_node_opt->count() > 0) {
    if (per_node < 1) {
      throw UsageError("--n-per-node " + std::to_string(per_node) + ": must be at least 1");
    }
    opts.n_per_node = per_node;
  }
  if (port_opt->count() > 0) opts.master_port = master_port;
  if (opts.pin_memory_to_socket) opts.pin_to_socket = true;

  if (cleanup) {
    opts.mode = Mode::cleanup;
    if (opts.program.empty()) {
      throw UsageError(
          "--cleanup needs the program whose ranks to stop, after --, "
          "e.g. tnt-launch --cleanup --hostfile hosts -- tnt-train");
    }
    return opts;
  }
  if (opts.force) throw UsageError("--force only goes with --cleanup");
  if (opts.local_ranks && hostfile_opt->count() > 0) {
    throw UsageError(
        "-n and --hostfile exclude each other: -n starts ranks on this machine only; "
        "with a hostfile use --n-per-node");
  }
  if (opts.local_ranks && opts.n_per_node) {
    throw UsageError(
        "-n and --n-per-node exclude each other: -n already is the number of ranks "
        "on this machine");
  }
  if (opts.program.empty()) {
    throw UsageError("no program given: write it after --, e.g. tnt-launch -n 2 -- ./my_program");
  }
  return opts;
}

}  // namespace tnt::launcher
