#pragma once
// Learning-rate schedules, a pure function of the optimizer step.
#include <cstdint>
#include <string>
#include <vector>

namespace tnt::compute {

struct ScheduleOptions {
  // "constant", "piecewise" (constant between boundaries), "exponential", "inverse_sqrt"
  std::string kind = "constant";
  double base_rate = 0.01;
  // Linear warm-up from base/warmup_steps to the scheduled rate over the first
  // warmup_steps steps (all kinds).
  int64_t warmup_steps = 0;
  // piecewise: rate = values[i] for boundaries[i-1] <= step < boundaries[i]
  // (values has one more entry than boundaries; base_rate is unused).
  std::vector<int64_t> boundaries;
  std::vector<double> values;
  // exponential: base_rate * decay_rate ^ (step / decay_steps), floored when staircase.
  double decay_rate = 0.96;
  int64_t decay_steps = 1000;
  bool staircase = false;
  // inverse_sqrt (Vaswani et al.): base_rate * sqrt(warmup_steps / (step + 1)) after the
  // warm-up, so the rate peaks at base_rate at step warmup_steps - 1; needs warmup_steps >= 1.
  // Linear scaling rule: every rate is multiplied by this; a data-parallel
  // trainer passes its number of ranks when the rule is switched on.
  double scale = 1.0;
};

class LearningRateSchedule {
 public:
  explicit LearningRateSchedule(ScheduleOptions options);  // throws on inconsistent options
  double rate(uint64_t step) const;
  const ScheduleOptions& options() const { return options_; }

 private:
  ScheduleOptions options_;
};

}  // namespace tnt::compute
