#include "timeline.h"

#include <fmt/format.h>

namespace tnt::trainer {

void Timeline::add(const std::string& name, const char* category, Track track, int64_t begin_us, int64_t end_us,
                   int64_t step, MicroStep micro) {
  if (!enabled_) return;
  std::lock_guard lock(mutex_);
  spans_.push_back({name, category, track, begin_us, end_us, step, micro});
}

std::string Timeline::events_json(int rank, int64_t base_us) const {
  static const char* track_names[] = {"compute", "bucketer", "comm", "metrics"};
  std::lock_guard lock(mutex_);
  std::string out;
  for (int t = 0; t < 4; ++t) {
    out += fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"{}"}}}},)", rank, t,
                       track_names[t]);
  }
  out += fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"args":{{"name":"rank {}"}}}})", rank, rank);
  for (const Span& s : spans_) {
    const std::string micro =
        s.micro.index < 0 ? "" : fmt::format(R"(,"micro_step":{},"samples":{})", s.micro.index, s.micro.samples);
    out +=
        fmt::format(R"(,{{"name":"{}","cat":"{}","ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"step":{}{}}}}})",
                    s.name, s.category, rank, static_cast<int>(s.track), s.begin - base_us,
                    std::max<int64_t>(0, s.end - s.begin), s.step, micro);
  }
  return out;
}

}  // namespace tnt::trainer
