#include "tnt/core/fail_point.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "tnt/core/error.h"
#include "tnt/core/settings.h"

namespace tnt {
namespace {

using Targets = std::vector<std::pair<std::string, int>>;

Targets parse_targets(const std::string& text) {
  Targets targets;
  std::size_t begin = 0;
  while (begin < text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    const auto colon = item.find(':');
    int rank = -1;
    const std::string phase = item.substr(0, colon);
    const bool known = std::find(kFailPhases.begin(), kFailPhases.end(), phase) != kFailPhases.end();
    const char* rank_begin = colon == std::string::npos ? nullptr : item.data() + colon + 1;
    const auto parsed = rank_begin ? std::from_chars(rank_begin, item.data() + item.size(), rank)
                                   : std::from_chars_result{nullptr, std::errc::invalid_argument};
    if (!known || parsed.ec != std::errc() || parsed.ptr != item.data() + item.size() || rank < 0) {
      throw ConfigError(fmt::format("{}: '{}' is not phase:rank with a phase of {}", settings::kTestFailAt.name,
                                    item.substr(0, 100), fmt::join(kFailPhases, ", ")));
    }
    targets.emplace_back(phase, rank);
    begin = end + 1;
  }
  return targets;
}

}  // namespace

void fail_point(std::string_view phase, int rank) {
  static const Targets targets = parse_targets(settings::kTestFailAt.read());
  for (const auto& [target_phase, target_rank] : targets) {
    if (target_phase != phase || target_rank != rank) continue;
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    throw Error(fmt::format("{}: injected failure at {} on rank {} (wall clock {:.3f})", settings::kTestFailAt.name,
                            phase, rank, now));
  }
}

}  // namespace tnt
