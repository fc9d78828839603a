#include "tnt/launcher/hostfile.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <system_error>

#include "tnt/core/slurm.h"

namespace tnt::launcher {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// Note [Hostfile bounds]: a host name is at most 253 characters (DNS's limit for a whole name), a
// user name before '@' at most 32 (Linux's useradd), a hostfile at most kMaxHostfileBytes and
// kMaxSlurmNodes hosts. Longer names can only fail later, at ssh's exec ("Argument list too
// long") after megabytes were echoed; they are refused while the file is read, --dry-run too.
constexpr std::size_t kMaxHostNameLength = 253;
constexpr std::size_t kMaxUserNameLength = 32;

void check_name_length(const std::string& name, const std::string& where) {
  const auto at = name.rfind('@');
  const std::size_t user = at == std::string::npos ? 0 : at;
  const std::size_t host = at == std::string::npos ? name.size() : name.size() - at - 1;
  if (host > kMaxHostNameLength || user > kMaxUserNameLength) {
    throw HostfileError(where + ": '" + quote_cut(name, 80) + "' is not a valid host name (a host name has at most " +
                        std::to_string(kMaxHostNameLength) + " characters, a user name before '@' at most " +
                        std::to_string(kMaxUserNameLength) + ")");
  }
}

bool valid_host_name(const std::string& h) {
  // Names go to ssh as one argument; refuse anything that could be read as an option or that
  // a shell would treat specially.
  if (h.empty() || h[0] == '-') return false;
  for (char c : h) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '-' || c == '_' || c == ':' || c == '@' || c == '%';
    if (!ok) return false;
  }
  return true;
}

// "[fd00::1]" and "user@[fd00::1]" as in URLs and mpirun hostfiles: ssh wants the address bare
// (with the brackets it looks up "[fd00::1]" as a name), so they go here. Brackets around anything
// but an IPv6 address, or followed by a port, are refused.
std::string without_ipv6_brackets(const std::string& name, const std::string& where) {
  const auto at = name.rfind('@');
  const std::string user = at == std::string::npos ? "" : name.substr(0, at + 1);
  const std::string host = name.substr(user.size());
  if (host.find_first_of("[]") == std::string::npos) return name;
  const std::string inner = host.size() >= 2 ? host.substr(1, host.size() - 2) : "";
  const std::string address = inner.substr(0, inner.find('%'));  // without a zone ("%eth0")
  in6_addr parsed{};
  if (host.front() != '[' || host.back() != ']' || inet_pton(AF_INET6, address.c_str(), &parsed) != 1) {
    throw HostfileError(where + ": '" + name +
                        "': brackets are only for an IPv6 address, e.g. [fd00::1] or user@[fd00::1] (no port; "
                        "a host name goes without them)");
  }
  return user + inner;
}

}  // namespace

std::vector<HostEntry> parse_hostfile_text(const std::string& text, const std::string& origin) {
  if (text.size() > kMaxHostfileBytes) {
    throw HostfileError(origin + ": " + std::to_string(text.size()) + " bytes, more than a hostfile may have (" +
                        std::to_string(kMaxHostfileBytes) + ")");
  }
  std::vector<HostEntry> hosts;
  std::set<std::string> seen;
  // A UTF-8 byte-order mark, as some editors write it, is no part of the first host's name.
  constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";
  std::istringstream in(text.rfind(kByteOrderMark, 0) == 0 ? text.substr(kByteOrderMark.size()) : text);
  std::string raw;
  int line_no = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    const std::string where = origin + ":" + std::to_string(line_no);
    std::string line = raw.substr(0, raw.find('#'));
    line = trim(line);
    if (line.empty()) continue;
    std::istringstream words(line);
    HostEntry entry;
    words >> entry.name;
    check_name_length(entry.name, where);
    entry.name = without_ipv6_brackets(entry.name, where);
    if (!valid_host_name(entry.name)) {
      throw HostfileError(where + ": '" + quote_cut(entry.name, 80) + "' is not a valid host name");
    }
    std::string word;
    while (words >> word) {
      std::string_view key = "slots=";
      if (word.rfind(key, 0) != 0) {
        throw HostfileError(where + ": unexpected '" + quote_cut(word, 80) + "' (a line is 'host' or 'host slots=N')");
      }
      int slots = 0;
      const char* first = word.data() + key.size();
      const char* last = word.data() + word.size();
      auto [ptr, ec] = std::from_chars(first, last, slots);
      if (ec != std::errc{} || ptr != last || slots < 1) {
        throw HostfileError(where + ": '" + quote_cut(word, 80) + "': slots must be a whole number >= 1");
      }
      entry.slots = slots;
    }
    if (!seen.insert(entry.name).second) {
      throw HostfileError(where + ": host '" + entry.name +
                          "' is listed twice (each host once; use slots=N or --n-per-node for "
                          "several ranks per host)");
    }
    hosts.push_back(std::move(entry));
    if (hosts.size() > kMaxSlurmNodes) {
      throw HostfileError(where + ": more than " + std::to_string(kMaxSlurmNodes) + " hosts");
    }
  }
  if (hosts.empty()) {
    throw HostfileError(origin + ": no hosts (the file is empty or only has comments)");
  }
  return hosts;
}

std::vector<HostEntry> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw HostfileError("cannot read hostfile '" + path + "'");
  std::error_code ec;  // Note [Hostfile bounds]: refused before it is read
  if (const auto bytes = std::filesystem::file_size(path, ec); !ec && bytes > kMaxHostfileBytes) {
    throw HostfileError(path + ": " + std::to_string(bytes) + " bytes, more than a hostfile may have (" +
                        std::to_string(kMaxHostfileBytes) + ")");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw HostfileError("error reading hostfile '" + path + "'");
  return parse_hostfile_text(ss.str(), path);
}

std::vector<std::string> expand_slurm_nodelist(const std::string& nodelist) {
  try {
    return tnt::expand_slurm_nodelist(nodelist, "SLURM_JOB_NODELIST");
  } catch (const ConfigError& e) {
    throw HostfileError(e.what());
  }
}

bool is_local_host(const std::string& host) {
  if (host == "localhost" || host == "127.0.0.1" || host == "::1") return true;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) {
    const std::string self = name;
    if (host == self) return true;
    const auto dot = self.find('.');
    if (dot != std::string::npos && host == self.substr(0, dot)) return true;
  }
  return false;
}

}  // namespace tnt::launcher
