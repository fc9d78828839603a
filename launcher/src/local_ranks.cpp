#include "local_ranks.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>

#include "tnt/core/settings.h"
#include "tnt/launcher/numa.h"

namespace tnt::launcher::detail {

// Note [Default binding]: where a host runs 2 or more ranks and has a core for each, tnt-launch
// gives each local rank a block of cores of its own (--bind-to core), as OpenMPI binds 2 ranks by
// default; --bind-to none leaves them unbound. Unbound ranks that wait by yielding or sleeping
// look half-loaded to the scheduler, which then often runs both on one core beside a busy one:
// every step of a collective became a context switch (~3 us on this project's VM). Measured on
// 2026-11-26, 2 ranks, 4 KiB allreduce, a busy loop pinned to CPU 1: unbound, six runs of
// tnt-bench-allreduce gave 6.0 / 6.0 / 6.0 / 1.0 / 4.3 / 4.3 us as the placement fell; bound,
// 7 rounds of compare_mpi.sh --busy-core gave 1.0-1.25 us, and OpenMPI's defaults (which bind)
// 1.1-1.4 us. Training does not lose by it where the rank's communication waits do not poll
// (Note [Waits beside compute] in actors/trainer/src/trainer.cpp): bench_trainer.py, LeNet-5,
// 2 ranks x 1 thread, 6 alternating rounds on 2026-11-26, medians of samples/s bound against
// --bind-to none: 26.9k against 25.2k at batch 64, 30.0k against 29.3k at batch 256.
// Ranks outnumbering cores stay unbound (a block needs a core), and their collectives yield
// rather than poll (Note [Poll window] in collectives/src/communicator.cpp).

LocalRanks::LocalRanks(HostLaunch spec, EventLoop& loop, RankSink& sink)
    : spec_(std::move(spec)), loop_(loop), sink_(sink) {}

LocalRanks::~LocalRanks() {
  // Never leave a rank behind, whatever path led here.
  for (auto& r : ranks_) {
    if (!r.exited && r.pid > 0) {
      kill(-r.pid, SIGKILL);
      int status = 0;
      waitpid(r.pid, &status, 0);
    }
    for (int* fd : {&r.out_fd, &r.err_fd}) {
      if (*fd >= 0) loop_.unwatch(*fd);
      close_fd(*fd);
    }
  }
}

void LocalRanks::start() {
  NumaTopology topo;
  if (spec_.pin) {
    topo = spec_.numa_topology.empty() ? detect_numa_topology() : parse_numa_topology(spec_.numa_topology);
    if (spec_.n_ranks > static_cast<int>(topo.nodes.size())) {
      spdlog::warn("{}: {} ranks but {} NUMA node(s): ranks share nodes round-robin", spec_.host, spec_.n_ranks,
                   topo.nodes.size());
    }
  }
  // The cores this host's ranks share, before any binding (TNT_HOST_CORES).
  const std::vector<int> cpus = affinity_cpus();
  const bool fits = static_cast<int>(cpus.size()) >= spec_.n_ranks;
  // Note [Default binding]; --bind-to core and --pin-to-socket exclude each other (options.cpp).
  const bool bind = fits && !spec_.pin && wants_core_blocks(spec_.core_binding, spec_.n_ranks);
  if (spec_.core_binding == CoreBinding::core && !fits) {
    spdlog::warn("{}: --bind-to core: {} ranks but {} core(s): ranks are not bound", spec_.host, spec_.n_ranks,
                 cpus.size());
  }
  ranks_.reserve(static_cast<std::size_t>(spec_.n_ranks));
  live_ = isatty(STDOUT_FILENO) == 1;
  for (int local = 0; local < spec_.n_ranks; ++local) {
    const int rank = spec_.first_rank + local;
    SpawnRequest req;
    req.label = "rank " + std::to_string(rank) + " on " + spec_.host;
    req.argv = spec_.program;
    int node = -1;
    if (spec_.pin) {
      node = node_for_local_rank(local, topo);
      const NumaNode& n = topo.nodes[static_cast<std::size_t>(node)];
      req.pin = PinRequest{n.cpus, spec_.pin_memory ? n.memory_node : -1};
    } else if (bind) {
      req.pin = PinRequest{core_block(cpus, spec_.n_ranks, local), -1};
    }
    req.set_env = rank_environment(spec_.job_env, spec_.exports, rank, local, spec_.n_ranks, node, spec_.pin_memory,
                                   static_cast<int>(cpus.size()));
    if (live_ && rank == 0) req.set_env.emplace_back(std::string(settings::kStdoutIsTty.name), "1");
    Child child;
    try {
      child = spawn(req);
    } catch (...) {
      for (auto& started : ranks_) {
        kill(-started.pid, SIGKILL);
        int status = 0;
        waitpid(started.pid, &status, 0);
        started.exited = true;
      }
      throw;
    }
    if (bind) {
      spdlog::debug("rank {} on {}: bound to cpus {}: {}", rank, spec_.host, format_cpu_list(req.pin->cpus),
                    child.pin_report);
    } else if (req.pin) {
      spdlog::debug("rank {} on {}: pinned to NUMA node {} (cpus {}, memory {}): {}", rank, spec_.host, node,
                    format_cpu_list(req.pin->cpus),
                    spec_.pin_memory ? std::to_string(req.pin->memory_node) : "not bound", child.pin_report);
    }
    Rank& r = ranks_.emplace_back();
    r.rank = rank;
    r.pid = child.pid;
    r.out_fd = child.stdout_fd;
    r.err_fd = child.stderr_fd;
    loop_.watch(r.out_fd, [this, idx = ranks_.size() - 1](short) { on_readable(ranks_[idx], 1); });
    loop_.watch(r.err_fd, [this, idx = ranks_.size() - 1](short) { on_readable(ranks_[idx], 2); });
  }
}

void LocalRanks::on_readable(Rank& r, int stream) {
  int& fd = stream == 1 ? r.out_fd : r.err_fd;
  LineSplitter& lines = stream == 1 ? r.out_lines : r.err_lines;
  std::string data;
  const bool open = read_available(fd, data);
  auto emit = [&](std::string_view line) { sink_.on_output(r.rank, stream, line); };
  lines.feed(data, emit);
  if (live_ && stream == 1 && r.rank == 0) {
    const std::string redraw = lines.take_redraw();
    if (!redraw.empty()) sink_.on_redraw(r.rank, redraw);
  }
  if (!open) {
    lines.flush(emit);
    loop_.unwatch(fd);
    close_fd(fd);
  }
}

bool LocalRanks::on_child_exit(pid_t pid, int status) {
  for (auto& r : ranks_) {
    if (r.exited || r.pid != pid) continue;
    r.exited = true;
    // Read what the rank wrote before it ended, so that its last words precede its exit.
    if (r.out_fd >= 0) on_readable(r, 1);
    if (r.err_fd >= 0) on_readable(r, 2);
    // Whatever the rank left running in its group goes with it (and closes its pipes).
    kill(-r.pid, SIGKILL);
    sink_.on_exit(r.rank, status);
    return true;
  }
  return false;
}

void LocalRanks::signal_running(int sig) {
  for (auto& r : ranks_) {
    if (!r.exited) kill(-r.pid, sig);
  }
}

bool LocalRanks::all_exited() const {
  for (const auto& r : ranks_) {
    if (!r.exited) return false;
  }
  return true;
}

bool LocalRanks::finished() const {
  for (const auto& r : ranks_) {
    if (!r.exited || r.out_fd >= 0 || r.err_fd >= 0) return false;
  }
  return true;
}

int LocalRanks::abandon_output() {
  int n = 0;
  for (auto& r : ranks_) {
    for (int stream : {1, 2}) {
      int& fd = stream == 1 ? r.out_fd : r.err_fd;
      if (fd < 0) continue;
      on_readable(r, stream);  // what is there already
      if (fd < 0) continue;
      (stream == 1 ? r.out_lines : r.err_lines).flush([&](std::string_view line) {
        sink_.on_output(r.rank, stream, line);
      });
      loop_.unwatch(fd);
      close_fd(fd);
      ++n;
    }
  }
  return n;
}

int LocalRanks::running() const {
  int n = 0;
  for (const auto& r : ranks_) n += r.exited ? 0 : 1;
  return n;
}

std::vector<pid_t> LocalRanks::pids() const {
  std::vector<pid_t> out;
  for (const auto& r : ranks_) out.push_back(r.pid);
  return out;
}

}  // namespace tnt::launcher::detail
