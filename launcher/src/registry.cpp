#include "registry.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "host_launch.h"
#include "process.h"

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
    throw std::runtime_error("cannot create job registry " + dir + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw std::runtime_error("job registry " + dir + " is not a directory");
  }
  if (st.st_uid != getuid()) {
    throw std::runtime_error("job registry " + dir + " belongs to another user");
  }
  if ((st.st_mode & 0077) != 0) chmod(dir.c_str(), 0700);
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

std::string write_registry(const RegistryEntry& entry) {
  const std::string dir = registry_dir();
  const std::string path = dir + "/" + host_prefix() + entry.job_id + "." + std::to_string(getpid()) + ".job";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write job registry file " + tmp);
    out << "job " << escape_field(entry.job_id) << "\n";
    out << "program " << escape_field(entry.program) << "\n";
    out << "executable " << escape_field(entry.executable) << "\n";
    for (const auto& p : entry.processes) {
      out << "process " << p.rank << " " << p.pid << " " << p.start_time << "\n";
    }
    if (!out.flush()) throw std::runtime_error("cannot write job registry file " + tmp);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("cannot write job registry file " + path + ": " + std::strerror(errno));
  }
  return path;
}

void remove_registry(const std::string& path) {
  if (!path.empty()) unlink(path.c_str());
}

RegistryEntry parse_registry_entry(const std::string& text, const std::string& path) {
  RegistryEntry entry;
  entry.path = path;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto sp = line.find(' ');
    const std::string key = line.substr(0, sp);
    const std::string value = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (key == "job") {
      entry.job_id = unescape_field(value);
    } else if (key == "program") {
      entry.program = unescape_field(value);
    } else if (key == "executable") {
      entry.executable = unescape_field(value);
    } else if (key == "process") {
      std::istringstream f(value);
      RegisteredProcess p;
      f >> p.rank >> p.pid >> p.start_time;
      if (f) entry.processes.push_back(p);
    }
  }
  return entry;
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
    std::ifstream in(dir + "/" + name);
    std::stringstream text;
    text << in.rdbuf();
    RegistryEntry entry = parse_registry_entry(text.str(), dir + "/" + name);
    entries.push_back(std::move(entry));
  }
  closedir(d);
  return entries;
}

}  // namespace tnt::launcher::detail
