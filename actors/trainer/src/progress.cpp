#include "progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include "tnt/core/settings.h"

namespace tnt::trainer {

ProgressBar::ProgressBar(std::FILE* out, bool enabled)
    : out_(out),
      enabled_(enabled),
      // Under tnt-launch stdout is a pipe; the launcher says when its own is a terminal and then
      // forwards the redraws as they come (launcher/README.md, "The live progress bar").
      tty_(enabled && (isatty(fileno(out)) == 1 || (out == stdout && settings::kStdoutIsTty.read()))) {}

void ProgressBar::begin_epoch(std::size_t epoch, std::size_t epochs, std::size_t steps, std::size_t first_step) {
  if (!enabled_) return;
  steps_ = steps;
  first_ = first_step;
  done_ = first_step;
  start_ = last_draw_ = std::chrono::steady_clock::now();
  ended_ = false;
  fmt::print(out_, "Epoch {}/{}\n", epoch + 1, epochs);
  std::fflush(out_);
}

std::string ProgressBar::line(std::size_t done, const std::vector<std::pair<std::string, double>>& logs,
                              bool final) const {
  const int width = 30;
  const std::size_t digits = std::to_string(steps_).size();
  std::string bar(width, '.');
  const auto filled = steps_ ? static_cast<int>(width * done / steps_) : width;
  for (int i = 0; i < filled; ++i) bar[i] = '=';
  if (filled > 0 && filled < width) bar[filled - 1] = '>';
  const auto until = final && ended_ ? end_ : std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(until - start_).count();
  const std::size_t ran = done > first_ ? done - first_ : 0;
  const double per_step = ran ? elapsed / static_cast<double>(ran) : 0.0;
  std::string s = fmt::format("{:>{}}/{} [{}] - ", done, digits, steps_, bar);
  if (final) {
    s += fmt::format("{:.0f}s {:.0f}ms/step", elapsed, per_step * 1e3);
  } else {
    s += fmt::format("ETA: {:.0f}s", per_step * static_cast<double>(steps_ - done));
  }
  for (const auto& [name, value] : logs) s += fmt::format(" - {}: {:.4f}", name, value);
  return s;
}

void ProgressBar::update(std::size_t steps_done, const std::vector<std::pair<std::string, double>>& logs) {
  if (!enabled_) return;
  done_ = steps_done;
  if (!tty_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100) && steps_done != steps_) return;
  last_draw_ = now;
  fmt::print(out_, "\r{}\x1b[K", line(steps_done, logs, false));
  std::fflush(out_);
}

void ProgressBar::end_training() {
  end_ = std::chrono::steady_clock::now();
  ended_ = true;
}

void ProgressBar::finish(const std::vector<std::pair<std::string, double>>& logs) {
  if (!enabled_) return;
  fmt::print(out_, "{}{}\n", tty_ ? "\r" : "", line(done_, logs, true));
  std::fflush(out_);
}

}  // namespace tnt::trainer
