// EarlyStopping and ReduceLROnPlateau: decisions on a monitored figure of the epoch's logs.
// The logs are summed over ranks (the same on every rank), so every rank decides alike.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "tnt/compute/model.h"
#include "tnt/core/error.h"
#include "tnt/trainer/callbacks.h"

namespace tnt::trainer {

MonitorMode parse_monitor_mode(const std::string& text) {
  if (text == "auto") return MonitorMode::automatic;
  if (text == "min") return MonitorMode::min;
  if (text == "max") return MonitorMode::max;
  throw ConfigError(fmt::format("mode '{}': expected auto, min or max", text));
}

namespace {

bool maximizes(MonitorMode mode, const std::string& monitor) {
  if (mode == MonitorMode::automatic) return monitor.find("acc") != std::string::npos;
  return mode == MonitorMode::max;
}

// The monitored figure of `logs`, or nothing (warned once, naming what there is).
std::optional<double> monitored(const std::string& who, const std::string& monitor, const Logs& logs, bool& warned) {
  const auto it = logs.find(monitor);
  if (it != logs.end()) return it->second;
  if (!warned) {
    std::string keys;
    for (const auto& [k, v] : logs) keys += (keys.empty() ? "" : ", ") + k;
    spdlog::warn("{}: '{}' is not in the epoch's logs (there: {}); the epoch is skipped", who, monitor, keys);
  }
  warned = true;
  return std::nullopt;
}

// A count the state holds (a negative one is refused: the state was not written by this callback).
std::size_t count_in(const CallbackState& state, const std::string& key) {
  const std::int64_t n = state.integer(key);
  if (n < 0) {
    throw DataError(fmt::format("the state of callback '{}': '{}' is {}, not a count", state.callback_name(), key, n));
  }
  return static_cast<std::size_t>(n);
}

}  // namespace

// --- EarlyStopping -------------------------------------------------------------------------------

EarlyStopping::EarlyStopping(EarlyStoppingOptions options, Trainer& trainer)
    : options_(std::move(options)), trainer_(trainer) {
  if (options_.monitor.empty()) throw ConfigError("EarlyStopping: monitor must name a figure (e.g. val_loss)");
  options_.min_delta = std::abs(options_.min_delta);
  maximize_ = maximizes(options_.mode, options_.monitor);
}

bool EarlyStopping::improves(double current, double reference) const {
  return maximize_ ? current - options_.min_delta > reference : current + options_.min_delta < reference;
}

void EarlyStopping::on_train_begin() {
  wait_ = 0;
  stopped_epoch_.reset();
  best_epoch_.reset();
  best_weights_.clear();
  best_ = maximize_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
}

void EarlyStopping::on_epoch_end(std::size_t epoch, const Logs& logs) {
  const auto current = monitored("EarlyStopping", options_.monitor, logs, warned_);
  if (!current || epoch < options_.start_from_epoch) return;
  compute::Model& model = trainer_.model();
  ++wait_;
  if (improves(*current, best_)) {
    best_ = *current;
    best_epoch_ = epoch;
    if (options_.restore_best_weights) {
      // Every rank holds the same weights after the epoch: each keeps its own copy.
      best_weights_.clear();
      for (std::size_t i = 0; i < model.parameter_count(); ++i) {
        const float* w = model.weights(i);
        best_weights_.emplace_back(w, w + model.parameter(i).size);
      }
      for (std::size_t i = 0; i < model.state_count(); ++i) {
        const float* w = model.state_data(i);
        best_weights_.emplace_back(w, w + model.state(i).size);
      }
    }
    // Keras: an improvement that does not beat the baseline does not reset the wait.
    if (!options_.baseline || improves(*current, *options_.baseline)) {
      wait_ = 0;
      return;
    }
  }
  if (wait_ < options_.patience || epoch == 0) return;
  stopped_epoch_ = epoch;
  std::string restored;
  if (options_.restore_best_weights && !best_weights_.empty()) {
    for (std::size_t i = 0; i < model.parameter_count(); ++i) {
      std::copy(best_weights_[i].begin(), best_weights_[i].end(), model.weights(i));
    }
    for (std::size_t i = 0; i < model.state_count(); ++i) {
      const auto& saved = best_weights_[model.parameter_count() + i];
      std::copy(saved.begin(), saved.end(), model.state_data(i));
    }
    restored = fmt::format("; the weights of epoch {} are restored", *best_epoch_ + 1);
  }
  run().stop_training(fmt::format("EarlyStopping: {} has not improved for {} epoch(s) (best {:.6g} at epoch {}){}",
                                  options_.monitor, wait_, best_, best_epoch_ ? *best_epoch_ + 1 : 0, restored));
}

void EarlyStopping::save_state(CallbackState& state) const {
  state.set_integer("wait", static_cast<std::int64_t>(wait_));
  state.set_real("best", best_);
  if (best_epoch_) state.set_integer("best_epoch", static_cast<std::int64_t>(*best_epoch_));
  if (!best_weights_.empty()) {
    state.set_integer("best_weights", static_cast<std::int64_t>(best_weights_.size()));
    for (std::size_t i = 0; i < best_weights_.size(); ++i) {
      state.set_floats(fmt::format("best_weights.{}", i), best_weights_[i]);
    }
  }
}

void EarlyStopping::load_state(const CallbackState& state) {
  wait_ = count_in(state, "wait");
  best_ = state.real("best");
  best_epoch_.reset();
  if (state.contains("best_epoch")) best_epoch_ = count_in(state, "best_epoch");
  best_weights_.clear();
  if (!options_.restore_best_weights || !best_epoch_) return;
  if (!state.contains("best_weights")) {
    spdlog::warn(
        "EarlyStopping: the checkpoint holds no weights of the best epoch ({}; written without "
        "restore_best_weights): unless a better epoch comes, none are restored when it stops",
        *best_epoch_ + 1);
    return;
  }
  const compute::Model& model = trainer_.model();
  const std::size_t arrays = count_in(state, "best_weights");
  if (arrays != model.parameter_count() + model.state_count()) {
    throw DataError(fmt::format("EarlyStopping kept {} arrays of best weights, model '{}' has {} (and statistics)",
                                arrays, model.spec().name, model.parameter_count() + model.state_count()));
  }
  for (std::size_t i = 0; i < arrays; ++i) {
    auto values = state.floats(fmt::format("best_weights.{}", i));
    const auto expected = static_cast<std::size_t>(
        i < model.parameter_count() ? model.parameter(i).size : model.state(i - model.parameter_count()).size);
    if (values.size() != expected) {
      throw DataError(fmt::format("EarlyStopping's best weights {} hold {} values, the model's array has {}", i,
                                  values.size(), expected));
    }
    best_weights_.push_back(std::move(values));
  }
}

// --- ReduceLROnPlateau ---------------------------------------------------------------------------

ReduceLROnPlateau::ReduceLROnPlateau(ReduceLROnPlateauOptions options) : options_(std::move(options)) {
  if (!(options_.factor > 0.0 && options_.factor < 1.0)) {
    throw ConfigError(fmt::format("ReduceLROnPlateau: factor must be in (0, 1), got {}", options_.factor));
  }
  if (!(options_.min_lr >= 0.0)) throw ConfigError("ReduceLROnPlateau: min_lr must be at least 0");
  if (options_.monitor.empty()) throw ConfigError("ReduceLROnPlateau: monitor must name a figure (e.g. val_loss)");
  options_.min_delta = std::abs(options_.min_delta);
  maximize_ = maximizes(options_.mode, options_.monitor);
}

void ReduceLROnPlateau::on_train_begin() {
  wait_ = cooldown_left_ = 0;
  best_ = maximize_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
}

void ReduceLROnPlateau::on_epoch_end(std::size_t epoch, const Logs& logs) {
  const auto current = monitored("ReduceLROnPlateau", options_.monitor, logs, warned_);
  if (!current) return;
  if (cooldown_left_ > 0) {
    --cooldown_left_;
    wait_ = 0;
  }
  const bool better = maximize_ ? *current > best_ + options_.min_delta : *current < best_ - options_.min_delta;
  if (better) {
    best_ = *current;
    wait_ = 0;
    return;
  }
  if (cooldown_left_ > 0 || ++wait_ < options_.patience) return;
  RunControl& r = run();
  const double rate = r.learning_rate(), old_factor = r.learning_rate_factor();
  if (rate > options_.min_lr) {
    // The factor scales the schedule's rate; min_lr bounds the rate of the next step.
    const double new_rate = std::max(rate * options_.factor, options_.min_lr);
    r.set_learning_rate_factor(old_factor * new_rate / rate);
    ++reductions_;
    spdlog::info(
        "ReduceLROnPlateau: {} has not improved for {} epoch(s): learning rate {:.6g} -> {:.6g} after epoch {}",
        options_.monitor, wait_, rate, new_rate, epoch + 1);
    cooldown_left_ = options_.cooldown;
    wait_ = 0;
  }
}

void ReduceLROnPlateau::save_state(CallbackState& state) const {
  state.set_integer("wait", static_cast<std::int64_t>(wait_));
  state.set_integer("cooldown_left", static_cast<std::int64_t>(cooldown_left_));
  state.set_real("best", best_);
  state.set_integer("reductions", static_cast<std::int64_t>(reductions_));
}

void ReduceLROnPlateau::load_state(const CallbackState& state) {
  wait_ = count_in(state, "wait");
  cooldown_left_ = count_in(state, "cooldown_left");
  best_ = state.real("best");
  reductions_ = count_in(state, "reductions");
}

}  // namespace tnt::trainer
