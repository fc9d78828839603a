#include "host_launch.h"

#include <charconv>
#include <sstream>
#include <stdexcept>

namespace tnt::launcher::detail {
namespace {

int to_int(const std::string& s, const std::string& key) {
  int v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc{} || r.ptr != s.data() + s.size()) {
    throw std::runtime_error("host launch description: bad number '" + s + "' for " + key);
  }
  return v;
}

}  // namespace

std::string escape_field(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescape_field(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      const char n = s[++i];
      out += n == 'n' ? '\n' : n == 'r' ? '\r' : n;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string serialize(const HostLaunch& h) {
  std::ostringstream out;
  out << "host " << escape_field(h.host) << "\n";
  out << "job_id " << escape_field(h.job_id) << "\n";
  out << "cwd " << escape_field(h.cwd) << "\n";
  for (const auto& a : h.program) out << "arg " << escape_field(a) << "\n";
  for (const auto& [k, v] : h.job_env) out << "env " << k << "=" << escape_field(v) << "\n";
  for (const auto& [k, v] : h.exports) out << "export " << k << "=" << escape_field(v) << "\n";
  out << "first_rank " << h.first_rank << "\n";
  out << "n_ranks " << h.n_ranks << "\n";
  out << "pin " << (h.pin ? 1 : 0) << "\n";
  out << "pin_memory " << (h.pin_memory ? 1 : 0) << "\n";
  out << "numa_topology " << escape_field(h.numa_topology) << "\n";
  out << "log_level " << h.log_level << "\n";
  out << "stop_grace_ms " << static_cast<int>(h.stop_grace_s * 1000) << "\n";
  out << "end\n";
  return out.str();
}

HostLaunch deserialize_host_launch(const std::string& text) {
  HostLaunch h;
  std::istringstream in(text);
  std::string line;
  bool ended = false;
  while (std::getline(in, line)) {
    const auto sp = line.find(' ');
    const std::string key = line.substr(0, sp);
    const std::string value = sp == std::string::npos ? "" : line.substr(sp + 1);
    auto env_pair = [&] {
      const auto eq = value.find('=');
      if (eq == std::string::npos) {
        throw std::runtime_error("host launch description: bad variable '" + value + "'");
      }
      return std::make_pair(value.substr(0, eq), unescape_field(value.substr(eq + 1)));
    };
    if (key == "host") {
      h.host = unescape_field(value);
    } else if (key == "job_id") {
      h.job_id = unescape_field(value);
    } else if (key == "cwd") {
      h.cwd = unescape_field(value);
    } else if (key == "arg") {
      h.program.push_back(unescape_field(value));
    } else if (key == "env") {
      h.job_env.push_back(env_pair());
    } else if (key == "export") {
      h.exports.push_back(env_pair());
    } else if (key == "first_rank") {
      h.first_rank = to_int(value, key);
    } else if (key == "n_ranks") {
      h.n_ranks = to_int(value, key);
    } else if (key == "pin") {
      h.pin = to_int(value, key) != 0;
    } else if (key == "pin_memory") {
      h.pin_memory = to_int(value, key) != 0;
    } else if (key == "numa_topology") {
      h.numa_topology = unescape_field(value);
    } else if (key == "log_level") {
      h.log_level = value;
    } else if (key == "stop_grace_ms") {
      h.stop_grace_s = to_int(value, key) / 1000.0;
    } else if (key == "end") {
      ended = true;
      break;
    } else {
      throw std::runtime_error("host launch description: unknown line '" + key + "'");
    }
  }
  if (!ended) throw std::runtime_error("host launch description: truncated (no 'end')");
  if (h.program.empty()) throw std::runtime_error("host launch description: no program");
  if (h.n_ranks < 1) throw std::runtime_error("host launch description: no ranks");
  return h;
}

}  // namespace tnt::launcher::detail
