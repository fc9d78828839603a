#include "tnt/transport/environment.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tnt/transport/error.h"

namespace tnt {
namespace {

const char* get(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

long long parse_integer(const char* name, const char* text, long long min, long long max) {
  long long value = 0;
  const char* end = text + std::char_traits<char>::length(text);
  auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc{} || ptr != end || value < min || value > max) {
    std::ostringstream message;
    message << name << "='" << text << "' is not an integer in [" << min << ", " << max << "]";
    throw ConfigError(message.str());
  }
  return value;
}

void read_seconds(const char* name, std::chrono::milliseconds& out) {
  const char* text = get(name);
  if (!text) return;
  char* end = nullptr;
  double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0) || seconds > 86400) {
    throw ConfigError(std::string(name) + "='" + text + "' is not a number of seconds in (0, 86400]");
  }
  out = std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

}  // namespace

JobEnvironment JobEnvironment::from_env() {
  JobEnvironment env;
  if (const char* size = get("TNT_SIZE")) env.size = static_cast<int>(parse_integer("TNT_SIZE", size, 1, 1 << 20));
  if (const char* rank = get("TNT_RANK")) env.rank = static_cast<int>(parse_integer("TNT_RANK", rank, 0, env.size - 1));
  env.local_size = env.size;
  env.local_rank = env.rank;
  if (const char* v = get("TNT_LOCAL_SIZE"))
    env.local_size = static_cast<int>(parse_integer("TNT_LOCAL_SIZE", v, 1, env.size));
  if (const char* v = get("TNT_LOCAL_RANK"))
    env.local_rank = static_cast<int>(parse_integer("TNT_LOCAL_RANK", v, 0, env.local_size - 1));
  if (const char* v = get("TNT_MASTER_ADDR")) env.master_addr = v;
  if (const char* v = get("TNT_MASTER_PORT"))
    env.master_port = static_cast<std::uint16_t>(parse_integer("TNT_MASTER_PORT", v, 1, 65535));
  if (const char* v = get("TNT_JOB_ID")) env.job_id = v;
  if (const char* v = get("TNT_TRANSPORT")) env.transport = v;
  if (const char* v = get("TNT_DATA_ADDR")) env.data_addr = v;
  if (env.transport != "tcp" && env.transport != "ib") {
    throw ConfigError("TNT_TRANSPORT='" + env.transport + "' is not one of: tcp, ib");
  }
  if (const char* v = get("TNT_SOCKET_BUFFER_KB")) {
    env.socket_buffer_bytes = static_cast<int>(parse_integer("TNT_SOCKET_BUFFER_KB", v, 0, 1 << 20)) * 1024;
  }
  if (const char* v = std::getenv("TNT_TCP_CONGESTION")) {
    env.tcp_congestion = v;
    const bool plausible = env.tcp_congestion.size() < 16 &&
                           std::all_of(env.tcp_congestion.begin(), env.tcp_congestion.end(),
                                       [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (!plausible)
      throw ConfigError(std::string("TNT_TCP_CONGESTION='") + v +
                        "' is not a congestion control name (e.g. reno, cubic, bbr; empty for the system's)");
  }
  read_seconds("TNT_CONNECT_TIMEOUT_S", env.connect_timeout);
  read_seconds("TNT_PEER_TIMEOUT_S", env.peer_timeout);
  read_seconds("TNT_HANDSHAKE_TIMEOUT_S", env.handshake_timeout);

  if (const char* token = get("TNT_JOB_TOKEN")) {
    env.job_token = token;
  } else if (const char* path = get("TNT_JOB_TOKEN_FILE")) {
    std::ifstream in(path);
    if (!in || !std::getline(in, env.job_token) || env.job_token.empty()) {
      throw ConfigError(std::string("TNT_JOB_TOKEN_FILE='") + path + "' cannot be read or is empty");
    }
  }
  if (env.size > 1) {
    if (!get("TNT_MASTER_PORT"))
      throw ConfigError("TNT_SIZE=" + std::to_string(env.size) +
                        " but TNT_MASTER_PORT is not set (start jobs with tnt-launch)");
    if (env.job_token.size() < 16) {
      throw ConfigError(
          "TNT_JOB_TOKEN is missing or shorter than 16 characters: every rank of a job needs the job's secret token "
          "(tnt-launch provides it)");
    }
  }
  return env;
}

}  // namespace tnt
