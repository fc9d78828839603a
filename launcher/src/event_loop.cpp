#include "event_loop.h"
#include "tnt/core/error.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace tnt::launcher::detail {

void EventLoop::poll_once(int timeout_ms) {
  std::vector<pollfd> fds;
  fds.reserve(handlers_.size());
  for (const auto& [fd, handler] : handlers_) fds.push_back({fd, POLLIN, 0});
  const int n = poll(fds.data(), fds.size(), timeout_ms);
  if (n < 0) {
    if (errno == EINTR) return;
    throw Error(std::string("poll failed: ") + std::strerror(errno));
  }
  for (const auto& p : fds) {
    if (p.revents == 0) continue;
    auto it = handlers_.find(p.fd);
    if (it == handlers_.end()) continue;  // unwatched by an earlier handler
    Handler h = it->second;               // the handler may unwatch itself
    h(p.revents);
  }
}

}  // namespace tnt::launcher::detail
