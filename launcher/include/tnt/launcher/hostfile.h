// Where a job runs: a hostfile or Slurm's node list.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "tnt/core/error.h"

namespace tnt::launcher {

// A hostfile or node list that cannot be used; the message names the file, line and problem.
class HostfileError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

struct HostEntry {
  std::string name;
  std::optional<int> slots;  // "host slots=N"
};

// The largest hostfile read (Note [Hostfile bounds] in hostfile.cpp): 100,000 hosts of 80 characters.
inline constexpr std::size_t kMaxHostfileBytes = 8 << 20;

// One host per line, '#' starts a comment, blank lines are ignored, "host slots=N" is accepted,
// names must be unique and at least one host must be given; a host name has at most 253
// characters, a hostfile at most kMaxHostfileBytes and kMaxSlurmNodes hosts. `origin` names the source in errors.
// A leading UTF-8 byte-order mark is skipped; an IPv6 address may be bracketed ("[fd00::1]",
// "user@[fd00::1]"), and its name is then the bare address, as ssh wants it.
std::vector<HostEntry> parse_hostfile_text(const std::string& text, const std::string& origin);
std::vector<HostEntry> read_hostfile(const std::string& path);

// Expands Slurm's compressed node list, e.g. "node[01-03,7],gpu1" -> node01 node02 node03 node7 gpu1.
std::vector<std::string> expand_slurm_nodelist(const std::string& nodelist);

// True when `host` names this machine (no ssh needed).
bool is_local_host(const std::string& host);

}  // namespace tnt::launcher
