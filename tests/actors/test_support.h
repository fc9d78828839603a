#pragma once
// Shared by the runtime tests: a system whose log is captured, and small message types.
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>

#include "tnt/actors/actor_system.h"

namespace tnt::actors::test {

struct CapturedLog {
  std::ostringstream text;
  std::shared_ptr<spdlog::logger> logger;
  CapturedLog() {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text);
    logger = std::make_shared<spdlog::logger>("actors-test", sink);
    logger->set_level(spdlog::level::debug);
  }
  std::string str() const { return text.str(); }
};

// A config whose actors all run on the caller's executor "test" unless placed elsewhere.
inline SystemConfig config_on_test_thread(const CapturedLog& log, std::string name = "test-system") {
  SystemConfig config;
  config.name = std::move(name);
  config.pools.clear();
  config.default_pool = "test";
  config.logger = log.logger;
  return config;
}

struct Add {
  int n;
};
struct Get {
  using reply_type = int;
};

// The smallest stateful actor: a sum.
class Counter : public Actor {
 public:
  Counter() {
    on<Add>([this](Add& m) { sum_ += m.n; });
    on<Get>([this](Get&) { return sum_; });
  }

 private:
  int sum_ = 0;
};

}  // namespace tnt::actors::test
