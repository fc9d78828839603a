// A minimal poll(2) loop: the launcher and the per-host agent are single-threaded, so output,
// child exits and signals are handled one at a time without locks.
#pragma once

#include <poll.h>

#include <functional>
#include <map>

namespace tnt::launcher::detail {

class EventLoop {
 public:
  using Handler = std::function<void(short revents)>;

  // A handler may watch or unwatch any fd, itself included.
  void watch(int fd, Handler handler) { handlers_[fd] = std::move(handler); }
  void unwatch(int fd) { handlers_.erase(fd); }
  bool empty() const { return handlers_.empty(); }

  // Waits up to timeout_ms (-1: forever) and runs the handlers of ready fds.
  void poll_once(int timeout_ms);

 private:
  std::map<int, Handler> handlers_;
};

}  // namespace tnt::launcher::detail
