#include "tnt/transport/environment.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>

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
