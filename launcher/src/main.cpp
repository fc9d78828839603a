// tnt-launch: starts a tnt job (or any program) on local and remote hosts.
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "launch.h"
#include "srun_launch.h"
#include "tnt/launcher/hostfile.h"
#include "tnt/launcher/options.h"

#ifndef TNT_VERSION
#define TNT_VERSION "unknown"
#endif

int main(int argc, char** argv) {
  auto logger = spdlog::stderr_logger_st("tnt-launch");
  logger->set_pattern("tnt-launch: %l: %v");
  spdlog::set_default_logger(logger);

  using namespace tnt::launcher;
  LaunchOptions opts;
  try {
    opts = parse_command_line(std::vector<std::string>(argv, argv + argc));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "tnt-launch: error: %s\n", e.what());
    return 2;
  }
  detail::set_log_level(opts.log_level);
  try {
    switch (opts.mode) {
      case Mode::help: std::fputs(opts.help_text.c_str(), stdout); return 0;
      case Mode::version: std::printf("tnt-launch %s\n", TNT_VERSION); return 0;
      case Mode::agent: logger->set_pattern("tnt-launch agent: %l: %v"); return detail::run_agent(opts);
      case Mode::cleanup: return detail::run_cleanup(opts);
      case Mode::launch: return detail::run_launch(opts);
      case Mode::srun_task: return detail::run_srun_task(opts);
    }
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return tnt::exit_status_of(e);  // 2 for a usage or hostfile error
  }
  return 1;
}
