// Signals as file descriptor events (signalfd), so the poll loop sees them in order with output.
#pragma once

#include <signal.h>

namespace tnt::launcher::detail {

// Blocks SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGCHLD, ignores SIGPIPE, and returns a
// non-blocking signalfd for them. Children restore the defaults before exec (see spawn()).
int open_signal_fd();
// Reads one pending signal; 0 if none.
int read_signal(int fd);

}  // namespace tnt::launcher::detail
