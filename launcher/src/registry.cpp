#include "registry.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "process.h"
#include "record.h"
#include "tnt/core/error.h"

namespace tnt::launcher::detail {
namespace {

// Registry files carry the host name: where the runtime directory is shared between hosts (or,
// in tests, between network namespaces), a host only ever acts on its own entries.
std::string host_prefix() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return std::string(name) + ".";
}

void ensure_private_dir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw Error("cannot create job registry " + dir + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw Error("job registry " + dir + " is not a directory");
  }
  if (st.st_uid != getuid()) {
    throw Error("job registry " + dir + " belongs to another user");
  }
  if ((st.st_mode & 0077) != 0) chmod(dir.c_str(), 0700);
}

// A registry file is input this process did not write: read no more than a record may hold.
std::string read_bounded(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::size_t limit = RecordLimits{}.max_bytes;
  std::string text;
  char buf[16384];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (text.size() > limit) throw RecordError("job registry file " + path + ": larger than a record may be");
  }
  return text;
}

}  // namespace

std::string registry_dir() {
  std::string base;
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg) {
    base = xdg;
  } else {
    const std::string run_user = "/run/user/" + std::to_string(getuid());
    struct stat st {};
    if (stat(run_user.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid()) {
      base = run_user;
    }
  }
  const std::string dir = base.empty() ? "/tmp/tnt-launch-" + std::to_string(getuid()) : base + "/tnt-launch";
  ensure_private_dir(dir);
  return dir;
}

unsigned long long process_start_time(pid_t pid) {
  const std::string base = "/proc/" + std::to_string(pid);
  struct stat st {};
  if (stat(base.c_str(), &st) != 0 || st.st_uid != getuid()) return 0;
  std::ifstream in(base + "/stat");
  std::string text;
  std::getline(in, text);
  // The command name may hold spaces and parentheses: fields start after the last ')'.
  const auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string f;
  char state = '?';
  fields >> state;
  if (state == 'Z' || state == 'X') return 0;
  for (int i = 4; i < 22 && fields >> f; ++i) {
  }
  unsigned long long start = 0;
  fields >> start;
  return start;
}

bool still_running(const RegisteredProcess& p) {
  return p.pid > 0 && p.start_time != 0 && process_start_time(p.pid) == p.start_time;
}

std::string register_job(const std::string& job_id, const std::string& program, const std::vector<pid_t>& rank_pids,
                         int first_rank) {
  RegistryEntry entry;
  entry.job_id = job_id;
  entry.program = program;
  const char* path_env = std::getenv("PATH");
  entry.executable = find_program(program, path_env ? path_env : "");
  entry.processes.push_back({getpid(), process_start_time(getpid()), -1});
  for (std::size_t i = 0; i < rank_pids.size(); ++i) {
    entry.processes.push_back({rank_pids[i], process_start_time(rank_pids[i]), first_rank + static_cast<int>(i)});
  }
  return write_registry(entry);
}

std::string encode_registry_entry(const RegistryEntry& entry) {
  RecordWriter w;
  w.add("job", entry.job_id).add("program", entry.program).add("executable", entry.executable);
  for (const auto& p : entry.processes) {
    w.add("process", std::to_string(p.rank) + " " + std::to_string(p.pid) + " " + std::to_string(p.start_time));
  }
  return w.finish();
}

RegistryEntry decode_registry_entry(const std::string& text, const std::string& path) {
  const Record r = Record::parse(text, "job registry file " + path, {"job", "program", "executable", "process"});
  RegistryEntry entry;
  entry.path = path;
  entry.job_id = r.text("job");
  entry.program = r.text("program");
  entry.executable = r.text("executable");
  for (const auto& item : r.all("process")) {
    // "rank pid start_time": exactly three numbers.
    const auto sp1 = item.find(' ');
    const auto sp2 = sp1 == std::string::npos ? sp1 : item.find(' ', sp1 + 1);
    long long rank = 0;
    long long pid = 0;
    long long start = 0;
    const std::string_view v(item);
    if (sp2 == std::string::npos || !parse_integer(v.substr(0, sp1), -1, INT_MAX, rank) ||
        !parse_integer(v.substr(sp1 + 1, sp2 - sp1 - 1), 1, INT_MAX, pid) ||
        !parse_integer(v.substr(sp2 + 1), 1, LLONG_MAX, start)) {
      throw r.error("process", "process '" + item.substr(0, 60) + "' is not 'RANK PID START_TIME'");
    }
    entry.processes.push_back(
        {static_cast<pid_t>(pid), static_cast<unsigned long long>(start), static_cast<int>(rank)});
  }
  return entry;
}

std::string write_registry(const RegistryEntry& entry) {
  const std::string dir = registry_dir();
  const std::string path = dir + "/" + host_prefix() + entry.job_id + "." + std::to_string(getpid()) + ".job";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw Error("cannot write job registry file " + tmp);
    out << encode_registry_entry(entry);
    if (!out.flush()) throw Error("cannot write job registry file " + tmp);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    throw Error("cannot write job registry file " + path + ": " + std::strerror(errno));
  }
  return path;
}

void remove_registry(const std::string& path) {
  if (!path.empty()) unlink(path.c_str());
}

std::vector<RegistryEntry> read_registry() {
  std::vector<RegistryEntry> entries;
  const std::string dir = registry_dir();
  DIR* d = opendir(dir.c_str());
  if (!d) return entries;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 5 || name.substr(name.size() - 4) != ".job") continue;
    if (name.rfind(host_prefix(), 0) != 0) continue;
    const std::string path = dir + "/" + name;
    try {
      entries.push_back(decode_registry_entry(read_bounded(path), path));
    } catch (const RecordError& err) {
      spdlog::warn("{}: skipped (remove it if no job of this host is running)", err.what());
    }
  }
  closedir(d);
  return entries;
}

}  // namespace tnt::launcher::detail
