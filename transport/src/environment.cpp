#include "tnt/transport/environment.h"

#include <algorithm>
#include <cctype>
#include <fstream>

#include "tnt/core/error.h"
#include "tnt/core/settings.h"

namespace tnt {
namespace {

std::string read_job_token() {
  if (settings::is_set(settings::kJobToken.name)) return settings::kJobToken.read();
  if (!settings::is_set(settings::kJobTokenFile.name)) return {};
  const std::string path = settings::kJobTokenFile.read();
  std::ifstream in(path);
  std::string token;
  if (!in || !std::getline(in, token) || token.empty()) {
    throw ConfigError(std::string(settings::kJobTokenFile.name) + "='" + path + "' cannot be read or is empty");
  }
  return token;
}

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
  using settings::is_set;
  env.size = static_cast<int>(settings::kSize.read());
  env.rank = static_cast<int>(settings::kRank.read(0, env.size - 1));
  env.local_size =
      is_set(settings::kLocalSize.name) ? static_cast<int>(settings::kLocalSize.read(1, env.size)) : env.size;
  env.local_rank =
      is_set(settings::kLocalRank.name) ? static_cast<int>(settings::kLocalRank.read(0, env.local_size - 1)) : env.rank;
  env.master_addr = settings::kMasterAddr.read();
  env.master_port = static_cast<std::uint16_t>(settings::kMasterPort.read());
  env.job_id = settings::kJobId.read();
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
  env.job_token = read_job_token();
  if (env.size > 1) {
    if (env.master_port == 0) {
      throw ConfigError("TNT_SIZE=" + std::to_string(env.size) +
                        " but TNT_MASTER_PORT is not set (start jobs with tnt-launch)");
    }
    if (env.job_token.size() < 16) {
      throw ConfigError(
          "TNT_JOB_TOKEN is missing or shorter than 16 characters: every rank of a job needs the job's secret token "
          "(tnt-launch provides it)");
    }
  }
  return env;
}

}  // namespace tnt
