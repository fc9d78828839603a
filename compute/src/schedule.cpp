#include "tnt/compute/schedule.h"
#include "tnt/core/error.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tnt::compute {

LearningRateSchedule::LearningRateSchedule(ScheduleOptions options) : options_(std::move(options)) {
  const auto& o = options_;
  auto fail = [&](const std::string& what) { throw ConfigError("learning-rate schedule '" + o.kind + "': " + what); };
  if (o.warmup_steps < 0) {
    fail("warmup_steps must be >= 0");
  }
  if (!(o.scale > 0.0)) {
    fail("scale must be > 0");
  }
  if (o.kind == "constant") {
    if (!(o.base_rate >= 0.0)) {
      fail("base_rate must be >= 0");
    }
  } else if (o.kind == "piecewise") {
    if (o.values.size() != o.boundaries.size() + 1) {
      fail("needs exactly one more value than boundaries (" + std::to_string(o.values.size()) + " values, " +
           std::to_string(o.boundaries.size()) + " boundaries)");
    }
    for (size_t i = 1; i < o.boundaries.size(); ++i) {
      if (o.boundaries[i] <= o.boundaries[i - 1]) {
        fail("boundaries must increase");
      }
    }
  } else if (o.kind == "exponential") {
    if (o.decay_steps < 1 || !(o.decay_rate > 0.0)) {
      fail("decay_steps must be >= 1 and decay_rate > 0");
    }
  } else if (o.kind == "inverse_sqrt") {
    if (o.warmup_steps < 1) fail("needs warmup_steps >= 1: the rate peaks there");
  } else {
    fail("unknown kind (constant, piecewise, exponential, inverse_sqrt)");
  }
}

double LearningRateSchedule::rate(uint64_t step) const {
  const auto& o = options_;
  double r = o.base_rate;
  if (o.kind == "piecewise") {
    size_t i = 0;
    while (i < o.boundaries.size() && static_cast<int64_t>(step) >= o.boundaries[i]) {
      ++i;
    }
    r = o.values[i];
  } else if (o.kind == "exponential") {
    double e = static_cast<double>(step) / static_cast<double>(o.decay_steps);
    r = o.base_rate * std::pow(o.decay_rate, o.staircase ? std::floor(e) : e);
  } else if (o.kind == "inverse_sqrt") {
    // The Transformer paper's rate, peaking at base_rate after the warm-up (below).
    const double warmup = static_cast<double>(o.warmup_steps);
    r = o.base_rate * std::sqrt(warmup / std::max(static_cast<double>(step + 1), warmup));
  }
  if (static_cast<int64_t>(step) < o.warmup_steps) {
    r *= static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  }
  return r * o.scale;
}

}  // namespace tnt::compute
