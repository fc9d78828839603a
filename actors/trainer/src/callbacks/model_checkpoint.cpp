// ModelCheckpoint and LearningRateScheduler.
#include <fmt/args.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>

#include "tnt/compute/checkpoint.h"
#include "tnt/core/error.h"
#include "tnt/trainer/callbacks.h"

namespace tnt::trainer {

// --- ModelCheckpoint -----------------------------------------------------------------------------

std::string format_checkpoint_path(const std::string& filepath, std::size_t epoch, const Logs& logs) {
  // Python's format fields ({epoch:02d}, {val_loss:.2f}) are fmt's: the same names and specs.
  fmt::dynamic_format_arg_store<fmt::format_context> args;
  args.push_back(fmt::arg("epoch", epoch + 1));
  for (const auto& [key, value] : logs) args.push_back(fmt::arg(key.c_str(), value));
  try {
    return fmt::vformat(filepath, args);
  } catch (const fmt::format_error& e) {
    std::string keys = "epoch";
    for (const auto& [key, value] : logs) keys += ", " + key;
    throw ConfigError(fmt::format("ModelCheckpoint: filepath '{}' cannot be formatted ({}); its fields may be: {}",
                                  filepath, e.what(), keys));
  }
}

ModelCheckpoint::ModelCheckpoint(ModelCheckpointOptions options, Trainer& trainer)
    : options_(std::move(options)), trainer_(trainer) {
  if (options_.filepath.empty()) throw ConfigError("ModelCheckpoint: filepath is empty");
  if (options_.every_epochs == 0) throw ConfigError("ModelCheckpoint: every_epochs must be at least 1");
  if (options_.save_best_only && options_.monitor.empty()) {
    throw ConfigError("ModelCheckpoint: save_best_only needs monitor (e.g. val_loss)");
  }
  maximize_ = options_.mode == MonitorMode::automatic ? options_.monitor.find("acc") != std::string::npos
                                                      : options_.mode == MonitorMode::max;
}

void ModelCheckpoint::on_train_begin() {
  best_ = options_.initial_value_threshold;
  saved_.clear();
}

void ModelCheckpoint::on_epoch_end(std::size_t epoch, const Logs& logs) {
  if ((epoch + 1) % options_.every_epochs != 0) return;
  if (options_.save_best_only) {
    const auto it = logs.find(options_.monitor);
    if (it == logs.end()) {
      if (!warned_) spdlog::warn("ModelCheckpoint: '{}' is not in the epoch's logs: nothing saved", options_.monitor);
      warned_ = true;
      return;
    }
    const double current = it->second;
    const bool better = !std::isnan(current) && (!best_ || (maximize_ ? current > *best_ : current < *best_));
    if (!better) {
      spdlog::info("ModelCheckpoint: epoch {}: {} = {:.6g} did not improve on {:.6g}", epoch + 1, options_.monitor,
                   current, best_.value_or(current));
      return;
    }
    best_ = current;
  }
  const std::string path = format_checkpoint_path(options_.filepath, epoch, logs);
  // Every rank takes the same decision; the master alone writes.
  if (trainer_.session().is_master_rank()) {
    const auto parent = std::filesystem::path(path).parent_path();
    std::error_code error;
    if (!parent.empty()) std::filesystem::create_directories(parent, error);
    if (options_.save_weights_only) {
      compute::save_checkpoint(path, compute::capture(trainer_.model(), nullptr, compute::CheckpointKind::weights));
      spdlog::info("ModelCheckpoint: weights of epoch {} written to {}", epoch + 1, path);
    }
  }
  if (!options_.save_weights_only) trainer_.save_checkpoint(path);
  saved_.push_back(path);
}

void ModelCheckpoint::save_state(CallbackState& state) const {
  if (best_) state.set_real("best", *best_);
}

void ModelCheckpoint::load_state(const CallbackState& state) {
  best_.reset();
  if (state.contains("best")) best_ = state.real("best");
}

// --- LearningRateScheduler -----------------------------------------------------------------------

LearningRateScheduler::LearningRateScheduler(Function schedule) : schedule_(std::move(schedule)) {
  if (!schedule_) throw ConfigError("LearningRateScheduler: no schedule function");
}

LearningRateScheduler LearningRateScheduler::from_rates(std::vector<double> rates) {
  if (rates.empty()) throw ConfigError("learning_rate_scheduler: rates is empty (one rate per epoch)");
  for (double r : rates) {
    if (!std::isfinite(r) || r <= 0) {
      throw ConfigError(fmt::format("learning_rate_scheduler: every rate must be finite and > 0, got {}", r));
    }
  }
  return LearningRateScheduler(
      [rates = std::move(rates)](std::size_t epoch, double) { return rates[std::min(epoch, rates.size() - 1)]; });
}

void LearningRateScheduler::on_train_begin() {
  if (!run().schedule_is_constant()) {
    throw ConfigError(
        "LearningRateScheduler sets the learning rate itself: it cannot be combined with a schedule that "
        "changes the rate ([schedule] with warm-up, decay or boundaries); use a constant schedule");
  }
}

void LearningRateScheduler::on_epoch_begin(std::size_t epoch) {
  RunControl& r = run();
  const double rate = schedule_(epoch, r.learning_rate());
  if (!std::isfinite(rate) || rate <= 0) {
    throw ConfigError(fmt::format("LearningRateScheduler: the schedule gave {} for epoch {}", rate, epoch + 1));
  }
  r.set_learning_rate(rate);
}

}  // namespace tnt::trainer
