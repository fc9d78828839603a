#include "tnt/core/log.h"

#include <string>
#include <string_view>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "tnt/core/settings.h"

namespace tnt {
namespace {

// Tarantella's level names; spdlog's own are lower-case and say "warning" as "warning".
class LevelNameFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    std::string_view name = "INFO";
    switch (msg.level) {
      case spdlog::level::trace: name = "TRACE"; break;
      case spdlog::level::debug: name = "DEBUG"; break;
      case spdlog::level::info: name = "INFO"; break;
      case spdlog::level::warn: name = "WARNING"; break;
      case spdlog::level::err: name = "ERROR"; break;
      case spdlog::level::critical: name = "CRITICAL"; break;
      default: break;
    }
    dest.append(name.data(), name.data() + name.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<LevelNameFlag>(); }
};

spdlog::level::level_enum level_from_settings() {
  const std::string level = settings::kLogLevel.read();
  if (level == "TRACE") return spdlog::level::trace;
  if (level == "DEBUG") return spdlog::level::debug;
  if (level == "WARNING") return spdlog::level::warn;
  if (level == "ERROR") return spdlog::level::err;
  return spdlog::level::info;
}

}  // namespace

namespace {

// The one sink tnt logs to: stderr, without colours (a log read from a file or a pipe has no
// escape codes in it), so stdout is left to what a tool prints as its result.
std::shared_ptr<spdlog::logger> stderr_logger(const std::string& prefix) {
  auto logger = std::make_shared<spdlog::logger>("tnt", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<LevelNameFlag>('*');
  formatter->set_pattern(prefix + "%* %v");
  logger->set_formatter(std::move(formatter));
  logger->flush_on(spdlog::level::info);
  return logger;
}

}  // namespace

void init_startup_logging() {
  auto logger = stderr_logger("[tnt %H:%M:%S.%e] ");
  logger->set_level(spdlog::level::info);
  spdlog::set_default_logger(std::move(logger));
}

void init_logging(int rank, int size) {
  auto logger = stderr_logger(size > 1 ? "[tnt %H:%M:%S.%e rank " + std::to_string(rank) + "] " : "[tnt %H:%M:%S.%e] ");
  auto level = level_from_settings();
  if (rank != 0 && !settings::kLogOnAllDevices.read() && level < spdlog::level::err) level = spdlog::level::err;
  logger->set_level(level);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace tnt
