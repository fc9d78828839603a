// The three things tnt-launch does: launch a job, print it (--dry-run), or clean it up.
#pragma once

#include <string>

#include "tnt/launcher/options.h"

namespace tnt::launcher::detail {

// Sets tnt-launch's own log level from a Tarantella level name (INFO, WARNING, DEBUG, ERROR).
void set_log_level(const std::string& level);

// Each returns the process exit status of tnt-launch.
int run_launch(const LaunchOptions& opts);
int run_agent(const LaunchOptions& opts);
int run_cleanup(const LaunchOptions& opts);

}  // namespace tnt::launcher::detail
