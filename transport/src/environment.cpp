#include "tnt/transport/environment.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <optional>

#include "bootstrap.h"
#include "tnt/core/error.h"
#include "tnt/core/settings.h"

namespace tnt {
namespace {

std::string read_tcp_congestion() {
  std::string name = settings::kTcpCongestion.read();
  const bool plausible = name.size() < 16 && std::all_of(name.begin(), name.end(), [](char c) {
                           return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                         });
  if (!plausible) {
    throw ConfigError(std::string(settings::kTcpCongestion.name) + "='" + name +
                      "' is not a congestion control name (e.g. reno, cubic, bbr; empty for the system's)");
  }
  return name;
}

std::optional<long> whole_number_in(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  long value = 0;
  const char* end = text + std::char_traits<char>::length(text);
  const auto result = std::from_chars(text, end, value);
  if (result.ec != std::errc{} || result.ptr != end) return std::nullopt;  // the reader of the variable says why
  return value;
}

// Note [Placement conflicts]: TNT_SIZE comes before mpirun's and srun's variables (Note
// [Bootstrap sources] in bootstrap.cpp), so a TNT_SIZE left in the environment of `mpirun -np 2`
// made two jobs of one rank that wrote the same checkpoint (TNT_SIZE=1), or ranks that all
// thought they were rank 0 and met at the master's port ("Address already in use"). A TNT_RANK
// or TNT_SIZE beside a launcher's own must agree with it: the rank is TNT_RANK, or 0 where only
// TNT_SIZE is set, as from_tnt reads them. A process counts as srun's task only when it is the
// process srun started (SLURM_TASK_PID): the ranks tnt-launch starts inside an srun step inherit
// the step's SLURM_* but are placed by tnt-launch. tnt-launch's srun ranks set TNT_RANK from
// SLURM_PROCID and TNT_SIZE to the step's task count, so they agree.
void refuse_conflicting_placement() {
  struct Launcher {
    const char* who;
    const char* size;
    const char* rank;
  };
  std::optional<Launcher> launcher;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr) {
    launcher = Launcher{"OpenMPI's mpirun", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"};
  } else if (std::getenv("SLURM_STEP_ID") != nullptr && whole_number_in("SLURM_TASK_PID") == getpid()) {
    launcher = Launcher{"srun", "SLURM_NTASKS", "SLURM_PROCID"};
  }
  if (!launcher) return;
  const bool size_set = settings::is_set(settings::kSize.name);
  const bool rank_set = settings::is_set(settings::kRank.name);
  const auto ours_size = whole_number_in(settings::kSize.name.data());
  const auto ours_rank = rank_set ? whole_number_in(settings::kRank.name.data()) : std::optional<long>(0);
  const auto theirs_size = whole_number_in(launcher->size);
  const auto theirs_rank = whole_number_in(launcher->rank);
  auto refuse = [&](std::string ours, std::string theirs) {
    throw ConfigError(ours + " but " + launcher->who + " started this process as " + theirs +
                      ": a TNT_RANK or TNT_SIZE set by hand must agree with the launcher's. Unset TNT_RANK and "
                      "TNT_SIZE (" +
                      launcher->who + " places the ranks itself), or start the job with tnt-launch");
  };
  if (size_set && ours_size && theirs_size && *ours_size != *theirs_size) {
    refuse("TNT_SIZE=" + std::to_string(*ours_size), "one of " + std::to_string(*theirs_size) + " ranks (" +
                                                         launcher->size + "=" + std::to_string(*theirs_size) + ")");
  }
  if ((size_set || rank_set) && ours_rank && theirs_rank && *ours_rank != *theirs_rank) {
    refuse(rank_set ? "TNT_RANK=" + std::to_string(*ours_rank) : "TNT_SIZE is set without TNT_RANK (rank 0)",
           "rank " + std::to_string(*theirs_rank) + " (" + launcher->rank + "=" + std::to_string(*theirs_rank) + ")");
  }
}

}  // namespace

JobEnvironment JobEnvironment::from_env() {
  JobEnvironment env;
  env.transport = settings::kTransport.read();
  env.shared_memory = settings::kShm.read();
  env.data_addr = settings::kDataAddr.read();
  env.socket_buffer_bytes = static_cast<int>(settings::kSocketBufferKb.read());
  env.tcp_congestion = read_tcp_congestion();
  env.connect_timeout = settings::kConnectTimeoutS.read();
  env.peer_timeout = settings::kPeerTimeoutS.read();
  env.handshake_timeout = settings::kHandshakeTimeoutS.read();
  env.stall_warn = settings::kStallWarnS.read();
  env.stall_timeout = settings::kStallTimeoutS.read();
  refuse_conflicting_placement();
  bootstrap::place_rank(env);
  return env;
}

std::string JobEnvironment::describe() const {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '?';
  std::string out = "rank " + std::to_string(rank) + " of " + std::to_string(size) + ", local rank " +
                    std::to_string(local_rank) + " of " + std::to_string(local_size) + ", on host " + host + "\n";
  out += "  source: " + source + "\n";
  if (size > 1) {
    out += "  master: " + master_addr + ":" + std::to_string(master_port) + " (" + master_origin + ")\n";
    out += "  job id: " + job_id + "\n";
    out += "  token:  " + std::to_string(job_token.size()) + " characters: " + token_origin + "\n";
  }
  return out;
}

}  // namespace tnt
