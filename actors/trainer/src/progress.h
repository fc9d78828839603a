#pragma once
// Keras-style progress bar for the master rank:
//   Epoch 1/5
//   469/469 [==============================] - 9s 19ms/step - loss: 0.5821 - accuracy: 0.7862
// On a terminal it redraws one line (at most ten times a second); otherwise it prints only the
// finished line of each epoch, so logs stay readable.
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace tnt::trainer {

class ProgressBar {
 public:
  ProgressBar(std::FILE* out, bool enabled);
  void begin_epoch(std::size_t epoch, std::size_t epochs, std::size_t steps, std::size_t first_step);
  void update(std::size_t steps_done, const std::vector<std::pair<std::string, double>>& logs);
  // The epoch's training is over (what follows, e.g. validation, is not counted per step).
  void end_training();
  void finish(const std::vector<std::pair<std::string, double>>& logs);

 private:
  std::string line(std::size_t done, const std::vector<std::pair<std::string, double>>& logs, bool final) const;
  std::FILE* out_;
  bool enabled_, tty_;
  std::size_t steps_ = 0, first_ = 0, done_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_, end_;
  bool ended_ = false;
};

}  // namespace tnt::trainer
