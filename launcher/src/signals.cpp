#include "signals.h"
#include "tnt/core/error.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tnt::launcher::detail {

int open_signal_fd() {
  signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGCHLD}) sigaddset(&set, s);
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) {
    throw Error(std::string("sigprocmask: ") + std::strerror(errno));
  }
  const int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) throw Error(std::string("signalfd: ") + std::strerror(errno));
  return fd;
}

int read_signal(int fd) {
  signalfd_siginfo info{};
  const ssize_t r = read(fd, &info, sizeof(info));
  if (r != static_cast<ssize_t>(sizeof(info))) return 0;
  return static_cast<int>(info.ssi_signo);
}

}  // namespace tnt::launcher::detail
