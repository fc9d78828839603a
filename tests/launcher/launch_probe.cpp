// A tiny rank program for the launcher tests: prints what tnt-launch gave it, then does what the
// test asks (wait for a signal, exit with a status, ignore SIGTERM, exit 0 on SIGUSR1).
#include <signal.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

// --usr1: a SIGUSR1 prints "usr1 rank=R" and ends the rank with status 0.
char g_usr1_line[64];
std::size_t g_usr1_length = 0;
extern "C" void on_usr1(int) {
  (void)!write(STDOUT_FILENO, g_usr1_line, g_usr1_length);
  _exit(0);
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "<unset>";
}

std::string status_field(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      auto v = line.substr(key.size() + 1);
      return v.substr(v.find_first_not_of(" \t"));
    }
  }
  return "?";
}

// A block that makes sure a [heap] mapping exists while heap_policy() reads numa_maps. Held by a
// global so that the compiler cannot drop the allocation as unused; freed once it has been read,
// because a block still allocated at exit is a leak to GCC's LeakSanitizer (clang's did not
// report it), which fails every rank of the tests that start this probe.
char* g_heap_block = nullptr;
constexpr std::size_t kHeapBlockBytes = 1 << 16;

// The memory policy of the heap mapping as /proc/self/numa_maps shows it ("default", "bind:0").
// The memory policy the kernel shows for the heap, or for the stack where there is no heap (under
// AddressSanitizer malloc does not use brk); both follow the process's policy.
std::string heap_policy() {
  for (const char* region : {"heap", "stack"}) {
    std::ifstream in("/proc/self/numa_maps");
    std::string line;
    while (std::getline(in, line)) {
      if (line.find(region) != std::string::npos) {
        const auto sp = line.find(' ');
        const auto sp2 = line.find(' ', sp + 1);
        return line.substr(sp + 1, sp2 - sp - 1);
      }
    }
  }
  return "?";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> vars;
  int exit_rank = -1;
  int exit_code = 0;
  bool wait = false;
  bool ignore_term = false;
  bool usr1 = false;
  bool show_token = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--var" && i + 1 < argc) {
      vars.emplace_back(argv[++i]);
    } else if (a == "--exit-rank" && i + 1 < argc) {
      exit_rank = std::atoi(argv[++i]);
    } else if (a == "--exit-code" && i + 1 < argc) {
      exit_code = std::atoi(argv[++i]);
    } else if (a == "--wait") {
      wait = true;
    } else if (a == "--show-token") {
      show_token = true;
    } else if (a == "--ignore-term") {
      ignore_term = true;
    } else if (a == "--usr1") {
      usr1 = true;
    } else {
      std::fprintf(stderr, "launch_probe: unknown argument %s\n", a.c_str());
      return 64;
    }
  }
  if (ignore_term) signal(SIGTERM, SIG_IGN);
  if (usr1) {
    const int n = std::snprintf(g_usr1_line, sizeof g_usr1_line, "usr1 rank=%s\n", env("TNT_RANK").c_str());
    g_usr1_length = n > 0 ? static_cast<std::size_t>(n) : 0;
    signal(SIGUSR1, on_usr1);
  }
  g_heap_block = static_cast<char*>(std::malloc(kHeapBlockBytes));
  std::memset(g_heap_block, 1, kHeapBlockBytes);

  utsname u{};
  uname(&u);
  const std::string token = env("TNT_JOB_TOKEN");
  std::string line =
      "probe rank=" + env("TNT_RANK") + " size=" + env("TNT_SIZE") + " local_rank=" + env("TNT_LOCAL_RANK") +
      " local_size=" + env("TNT_LOCAL_SIZE") + " host=" + u.nodename + " master=" + env("TNT_MASTER_ADDR") + ":" +
      env("TNT_MASTER_PORT") + " job_id=" + env("TNT_JOB_ID") +
      " token_len=" + std::to_string(token == "<unset>" ? 0 : token.size()) + " transport=" + env("TNT_TRANSPORT") +
      " fusion_kb=" + env("TNT_FUSION_THRESHOLD_KB") + " log_level=" + env("TNT_LOG_LEVEL") +
      " log_all=" + env("TNT_LOG_ON_ALL_DEVICES") + " output_all=" + env("TNT_OUTPUT_ON_ALL_DEVICES") +
      " pin_socket=" + env("TNT_PIN_SOCKET") + " pin_memory=" + env("TNT_PIN_MEMORY") +
      " host_cores=" + env("TNT_HOST_CORES") + " cpus=" + status_field("Cpus_allowed_list") +
      " mempolicy=" + heap_policy() + " pid=" + std::to_string(getpid());
  std::free(g_heap_block);
  g_heap_block = nullptr;
  for (const auto& v : vars) line += " " + v + "=" + env(v.c_str());
  if (show_token) line += " token=" + token;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);

  const int rank = std::atoi(env("TNT_RANK").c_str());
  if (rank == exit_rank) return exit_code;
  if (wait) {
    std::printf("ready rank=%d\n", rank);
    std::fflush(stdout);
    for (;;) pause();
  }
  return 0;
}
