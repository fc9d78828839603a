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

// Everything after the first "--" is the program, whatever it looks like; returns the rest.
std::vector<std::string> split_off_program(const std::vector<std::string>& args, LaunchOptions& opts) {
  std::vector<std::string> own;
  bool saw_separator = false;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (!saw_separator && args[i] == "--") {
      saw_separator = true;
      continue;
    }
    (saw_separator ? opts.program : own).push_back(args[i]);
  }
  return own;
}

// What the command line gives besides LaunchOptions' own fields.
struct Extras {
  bool help = false;
  bool version = false;
  bool cleanup = false;
  bool agent = false;
  bool srun_task = false;
  int n = 0;
  int per_node = 0;
  int master_port = 0;
  bool bind_to_core = false;
  std::string bind_to;
  std::vector<std::string> exports;
  std::vector<std::string> stray;
};

// The options that say where ranks run, and how.
void add_placement_options(CLI::App& app, LaunchOptions& opts, Extras& x) {
  app.add_option("-n", x.n, "Number of ranks on the local machine");
  app.add_option("--hostfile", opts.hostfile,
                 "File naming the hosts, one per line ('host' or 'host slots=N'; '#' comments)");
  app.add_option("--n-per-node,--npernode,--devices-per-node", x.per_node,
                 "Ranks per host of the hostfile (default: its slots, or 1)");
  app.add_flag("--pin-to-socket", opts.pin_to_socket, "Run local rank i on NUMA node (i mod number of nodes)");
  app.add_flag("--pin-memory-to-socket", opts.pin_memory_to_socket, "Also bind each rank's memory to its NUMA node");
  app.add_option("--bind-to", x.bind_to,
                 "core: run each local rank on a block of its own of the cores tnt-launch may use (cores / ranks "
                 "each), as OpenMPI binds its ranks; none: leave ranks unbound. Default: core where a host has 2 "
                 "or more ranks and no more ranks than cores, unless --pin-to-socket or srun places them")
      ->check(CLI::IsMember({"core", "none"}));
  app.add_flag("--bind-to-core", x.bind_to_core, "The same as --bind-to core");
  app.add_option("--numa-topology", opts.numa_topology,
                 "Use this NUMA topology instead of libnuma's: 'CPUS[@MEM];...' per node, "
                 "e.g. '0-3@0;4-7@1' (for tests and odd machines)");
  app.add_option("--master-port", x.master_port, "Port of rank 0's rendezvous (default: a free port)")
      ->check(CLI::Range(1, 65535));
  app.add_option("--launcher", opts.launcher,
                 "How ranks are started: ssh, srun (inside a Slurm allocation) or auto (srun inside an allocation "
                 "when srun is present and neither -n nor --hostfile is given; default)")
      ->check(CLI::IsMember({"ssh", "srun", "auto"}));
  app.add_option("--ssh-command", opts.ssh_command,
                 "ssh client and options for remote hosts (env TNT_LAUNCH_SSH; default 'ssh')");
  app.add_option("--ssh-connect-timeout", opts.ssh_connect_timeout_s, "Seconds to wait for each ssh connection")
      ->check(CLI::Range(1, 600));
}

// What the ranks get (TNT_* settings, exports) and how their output and exit are handled.
void add_job_options(CLI::App& app, LaunchOptions& opts, Extras& x) {
  app.add_option("--transport", opts.transport, "Data transport of the job (TNT_TRANSPORT)")
      ->check(CLI::IsMember({"tcp", "ib"}));
  // The range is checked in finish_options, whose message says what is valid.
  app.add_option("--fusion-threshold", opts.fusion_threshold_kb,
                 "Gradient fusion threshold in KiB, " + std::to_string(settings::kFusionThresholdKb.min_kib) + " to " +
                     std::to_string(settings::kFusionThresholdKb.max_kib) + " (TNT_FUSION_THRESHOLD_KB)");
  app.add_option("--log-level", opts.log_level, "INFO, WARNING, DEBUG or ERROR (TNT_LOG_LEVEL)")
      ->transform(CLI::IsMember({"INFO", "WARNING", "DEBUG", "ERROR"}, CLI::ignore_case));
  app.add_flag("--log-on-all-devices", opts.log_on_all_devices,
               "Every rank logs, not only rank 0; their logs (stderr) are shown, each line prefixed with its rank");
  app.add_flag("--output-on-all-devices", opts.output_on_all_devices,
               "Show every rank's output, each line prefixed with its rank");
  app.add_option("-x", x.exports, "Export VAR=VALUE to every rank (repeatable, kept in order)")
      ->allow_extra_args(false);
  app.add_option("--stop-grace", opts.stop_grace_s,
                 "Seconds between SIGTERM and SIGKILL when stopping ranks (default 2)")
      ->check(CLI::Range(0.0, 60.0));
  app.add_option("--max-restarts", opts.max_restarts,
                 "When a rank fails (exits 1 or dies by a signal; never a usage error, exit 2, nor a preemption, "
                 "exit 3), end the job and start it again, up to K times; ranks see TNT_RESTART_COUNT and "
                 "TNT_MAX_RESTARTS (tnt-train then resumes from its checkpoint path, and needs one)")
      ->check(CLI::Range(0, 1000));
  app.add_option("--min-ranks", opts.min_ranks,
                 "With --max-restarts: a restart that cannot reach a host (ssh fails within --ssh-connect-timeout) "
                 "goes on without it, down to M ranks; below M the job ends naming the hosts lost. The hostfile is "
                 "read again at each restart, so hosts can come back. Ranks see TNT_MIN_RANKS (tnt-train refuses "
                 "settings whose meaning depends on the rank count)")
      ->check(CLI::Range(1, 1 << 20));
}

void add_mode_options(CLI::App& app, LaunchOptions& opts, Extras& x) {
  app.add_flag("-h,--help", x.help, "Print this help and exit");
  app.add_flag("--version", x.version, "Print the version and exit");
  app.add_flag("--dry-run", opts.dry_run,
               "Print what would run on each host and run nothing (with --cleanup: what would be stopped)");
  app.add_flag("--cleanup", x.cleanup, "Stop this user's ranks of the program after -- on every host of the hostfile");
  app.add_flag("--force", opts.force, "With --cleanup: SIGKILL what SIGTERM did not stop");
  app.add_flag("--agent", x.agent, "Internal: the per-host side of a remote launch")->group("");
  app.add_flag("--srun-task", x.srun_task, "Internal: one rank of a launch through srun")->group("");
  app.add_option("--srun-export", opts.srun_exports, "Internal: a -x variable of a launch through srun")
      ->allow_extra_args(false)
      ->group("");
  app.add_option("stray", x.stray)->group("");
}

// --cleanup reads the registry of the hosts (hostfile, Slurm or this machine) and stops what it
// finds there: options about starting ranks would be silently ignored, so they are refused.
void refuse_options_cleanup_ignores(const CLI::App& app) {
  static const std::vector<std::string> kUsed = {"--help",        "--cleanup",   "--hostfile",
                                                 "--force",       "--dry-run",   "--stop-grace",
                                                 "--ssh-command", "--log-level", "--ssh-connect-timeout"};
  std::string unused;
  for (const CLI::Option* o : app.get_options()) {
    if (o->count() == 0 || std::find(kUsed.begin(), kUsed.end(), o->get_name()) != kUsed.end()) continue;
    unused += (unused.empty() ? " " : ", ") + o->get_name();
  }
  if (!unused.empty()) {
    throw UsageError("--cleanup does not use" + unused +
                     ": leave them out (cleanup stops the registered jobs of the program after -- on the hosts of "
                     "--hostfile, of Slurm's node list, or of this machine)");
  }
}

// Checks and conversions that need several options at once; `app` tells which were given.
void finish_options(const CLI::App& app, const Extras& x, LaunchOptions& opts) {
  for (const auto& e : x.exports) opts.exports.push_back(parse_export(e));
  std::transform(opts.log_level.begin(), opts.log_level.end(), opts.log_level.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  // The ranks would refuse the value (core/'s settings table has the range): refuse it here, once.
  const auto& fusion = settings::kFusionThresholdKb;
  if (opts.fusion_threshold_kb < fusion.min_kib || opts.fusion_threshold_kb > fusion.max_kib) {
    throw UsageError("--fusion-threshold " + std::to_string(opts.fusion_threshold_kb) +
                     ": must be a whole number of KiB from " + std::to_string(fusion.min_kib) + " to " +
                     std::to_string(fusion.max_kib) + " (" + std::string(fusion.name) + ")");
  }
  if (app.count("-n") > 0) {
    if (x.n < 1) throw UsageError("-n " + std::to_string(x.n) + ": the number of ranks must be at least 1");
    opts.local_ranks = x.n;
  }
  if (app.count("--n-per-node") > 0) {
    if (x.per_node < 1) throw UsageError("--n-per-node " + std::to_string(x.per_node) + ": must be at least 1");
    opts.n_per_node = x.per_node;
  }
  if (app.count("--master-port") > 0) opts.master_port = x.master_port;
  if (x.bind_to_core && x.bind_to == "none")
    throw UsageError("--bind-to-core and --bind-to none contradict each other");
  if (x.bind_to_core || x.bind_to == "core") opts.core_binding = CoreBinding::core;
  if (x.bind_to == "none") opts.core_binding = CoreBinding::none;
  if (opts.pin_memory_to_socket) opts.pin_to_socket = true;
}

void check_launch_options(const CLI::App& app, const LaunchOptions& opts) {
  if (opts.force) throw UsageError("--force only goes with --cleanup");
  if (opts.local_ranks && app.count("--hostfile") > 0) {
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
  if (opts.core_binding == CoreBinding::core && opts.pin_to_socket) {
    throw UsageError("--bind-to core and --pin-to-socket exclude each other: choose cores or NUMA nodes");
  }
  if (opts.core_binding == CoreBinding::core && opts.launcher == "srun") {
    throw UsageError("--bind-to core: under srun, Slurm binds the tasks (srun's --cpu-bind or the site's default)");
  }
  if (opts.min_ranks > 0 && opts.max_restarts == 0) {
    throw UsageError("--min-ranks " + std::to_string(opts.min_ranks) +
                     " applies when the job restarts: give --max-restarts K too");
  }
  if (opts.launcher == "srun" && (opts.local_ranks || app.count("--hostfile") > 0)) {
    throw UsageError(
        "--launcher srun starts the ranks on the nodes of the Slurm allocation: leave out -n and --hostfile "
        "(--n-per-node sets the ranks per node)");
  }
}

}  // namespace

LaunchOptions parse_command_line(const std::vector<std::string>& args) {
  LaunchOptions opts;
  opts.ssh_command = settings::kLaunchSsh.read();
  const std::vector<std::string> own = split_off_program(args, opts);

  CLI::App app{"tnt-launch: start a tnt job (or any program) on local and remote hosts", "tnt-launch"};
  app.footer(
      "Everything after -- is the program and its arguments.\n"
      "Examples:\n"
      "  tnt-launch -n 4 -- ./my_program --flag\n"
      "  tnt-launch --hostfile hosts --n-per-node 2 --pin-to-socket -- tnt-train --transport=tcp\n"
      "  salloc -N 2 --ntasks-per-node 4 tnt-launch -- tnt-train run.toml   (ranks started by srun)\n"
      "  tnt-launch --cleanup --hostfile hosts -- tnt-train");
  app.set_help_flag();  // handled below so that --help works without a program
  Extras x;
  add_mode_options(app, opts, x);
  add_placement_options(app, opts, x);
  add_job_options(app, opts, x);
  try {
    std::vector<std::string> reversed(own.rbegin(), own.rend());
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw UsageError(std::string(e.what()) + " (see tnt-launch --help)");
  }

  if (x.help) {
    opts.mode = Mode::help;
    opts.help_text = app.help();
    return opts;
  }
  if (x.version || x.agent) {
    opts.mode = x.version ? Mode::version : Mode::agent;
    return opts;
  }
  if (x.srun_task) {
    opts.mode = Mode::srun_task;
    if (opts.pin_memory_to_socket) opts.pin_to_socket = true;
    if (opts.program.empty()) throw UsageError("--srun-task needs the program after --");
    return opts;
  }
  if (!x.stray.empty()) {
    throw UsageError("unexpected argument '" + x.stray.front() +
                     "': put the program after --, e.g. tnt-launch -n 2 -- " + x.stray.front());
  }
  if (x.cleanup) {
    refuse_options_cleanup_ignores(app);
    opts.mode = Mode::cleanup;
    if (opts.program.empty()) {
      throw UsageError(
          "--cleanup needs the program whose ranks to stop, after --, "
          "e.g. tnt-launch --cleanup --hostfile hosts -- tnt-train");
    }
  }
  finish_options(app, x, opts);
  if (!x.cleanup) check_launch_options(app, opts);
  return opts;
}

}  // namespace tnt::launcher
