#pragma once
// Spans for a Chrome-trace (Perfetto) timeline: one process per rank, one track per actor.
// add() may be called from any thread (a mutex; a handful of spans per step).
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace tnt::trainer {

// Microseconds on the system clock: ranks on one host share it; across hosts it is as good as
// their clock synchronisation.
inline int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A micro-step's part of a step (Note [Gradient accumulation]): which one it is and how many
// samples it took, so that a timeline shows how a step was cut; its forward and backward spans
// carry it. (At namespace scope: a nested class's member initialisers cannot serve as a default
// argument of its enclosing class's members.)
struct TimelineMicroStep {
  int64_t index = -1;  // -1: the span is not a micro-step's
  int64_t samples = 0;
};

class Timeline {
 public:
  enum Track { compute = 0, bucketer = 1, comm = 2, metrics = 3 };
  explicit Timeline(bool enabled) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }
  using MicroStep = TimelineMicroStep;
  void add(const std::string& name, const char* category, Track track, int64_t begin_us, int64_t end_us, int64_t step,
           MicroStep micro = {});
  // This rank's events as comma-separated JSON objects (no brackets), times relative to base_us.
  std::string events_json(int rank, int64_t base_us) const;

 private:
  struct Span {
    std::string name;
    const char* category;
    Track track;
    int64_t begin, end, step;
    MicroStep micro;
  };
  bool enabled_;
  mutable std::mutex mutex_;
  std::vector<Span> spans_;
};

}  // namespace tnt::trainer
