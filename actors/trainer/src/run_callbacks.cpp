#include "run_callbacks.h"

#include <fmt/format.h>

#include <cmath>
#include <sstream>

#include "run_config.h"
#include "tnt/core/error.h"
#include "tnt/trainer/callbacks.h"

namespace tnt::trainer {

const std::vector<std::string>& callback_sections() {
  static const std::vector<std::string> names{
      "early_stopping", "reduce_lr_on_plateau", "model_checkpoint",       "tensorboard",
      "remote_monitor", "csv_logger",           "learning_rate_scheduler"};
  return names;
}

void enable_callback(RunCallbacks& c, const std::string& section) {
  if (section == "early_stopping") c.early_stopping.enabled = true;
  if (section == "reduce_lr_on_plateau") c.reduce_lr_on_plateau.enabled = true;
  if (section == "model_checkpoint") c.model_checkpoint.enabled = true;
  if (section == "tensorboard") c.tensorboard.enabled = true;
  if (section == "remote_monitor") c.remote_monitor.enabled = true;
  if (section == "csv_logger") c.csv_logger.enabled = true;
  if (section == "learning_rate_scheduler") c.learning_rate_scheduler.enabled = true;
}

namespace {

std::optional<double> unless_nan(double x) { return std::isnan(x) ? std::nullopt : std::optional<double>(x); }

MonitorMode mode_of(const std::string& section, const std::string& mode) {
  try {
    return parse_monitor_mode(mode);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("[callbacks.{}]: {}", section, e.what()));
  }
}

}  // namespace

void validate_callbacks(const RunConfig& config) {
  const RunCallbacks& c = config.callbacks;
  if (c.model_checkpoint.enabled && !config.checkpoint_path.empty()) {
    throw ConfigError(
        "[checkpoint] path (--checkpoint) is a shorthand for [callbacks.model_checkpoint]: give one of them, not both");
  }
  if (c.csv_logger.enabled && !config.csv.empty()) {
    throw ConfigError("[output] csv (--csv) is a shorthand for [callbacks.csv_logger]: give one of them, not both");
  }
  if (c.model_checkpoint.enabled && c.model_checkpoint.filepath.empty()) {
    throw ConfigError("[callbacks.model_checkpoint] needs filepath (e.g. \"ckpt-{epoch:02d}.tnt\")");
  }
  if (c.csv_logger.enabled && c.csv_logger.filename.empty()) throw ConfigError("[callbacks.csv_logger] needs filename");
  if (c.csv_logger.separator.size() != 1) {
    throw ConfigError(
        fmt::format("[callbacks.csv_logger]: separator must be one character, got '{}'", c.csv_logger.separator));
  }
  if (c.tensorboard.enabled && c.tensorboard.log_dir.empty())
    throw ConfigError("[callbacks.tensorboard]: log_dir is empty");
  if (c.learning_rate_scheduler.enabled) {
    const auto& s = config.schedule;
    if (s.kind != "constant" || s.warmup_steps != 0) {
      throw ConfigError(fmt::format(
          "[callbacks.learning_rate_scheduler] sets the learning rate itself and cannot be combined with [schedule] "
          "kind '{}'{}: use kind \"constant\" without warm-up",
          s.kind, s.warmup_steps ? fmt::format(" with warmup_steps {}", s.warmup_steps) : ""));
    }
    (void)LearningRateScheduler::from_rates(c.learning_rate_scheduler.rates);
  }
  mode_of("early_stopping", c.early_stopping.mode);
  mode_of("reduce_lr_on_plateau", c.reduce_lr_on_plateau.mode);
  mode_of("model_checkpoint", c.model_checkpoint.mode);
  if (c.reduce_lr_on_plateau.enabled)
    (void)ReduceLROnPlateau({.factor = c.reduce_lr_on_plateau.factor, .min_lr = c.reduce_lr_on_plateau.min_lr});
  if (c.remote_monitor.enabled)
    (void)RemoteMonitor(
        {c.remote_monitor.url, c.remote_monitor.field, c.remote_monitor.send_as_json, c.remote_monitor.timeout});
}

std::string callbacks_canonical_text(const RunCallbacks& c) {
  // What changes weights, the rate or the step training stops at; files and URLs may differ.
  std::ostringstream s;
  const auto& e = c.early_stopping;
  if (e.enabled) {
    s << ";early_stopping=" << e.monitor << ',' << e.mode << ',' << e.min_delta << ',' << e.baseline << ','
      << e.patience << ',' << e.start_from_epoch << ',' << e.restore_best_weights;
  }
  const auto& r = c.reduce_lr_on_plateau;
  if (r.enabled) {
    s << ";reduce_lr_on_plateau=" << r.monitor << ',' << r.mode << ',' << r.factor << ',' << r.min_delta << ','
      << r.min_lr << ',' << r.patience << ',' << r.cooldown;
  }
  if (c.learning_rate_scheduler.enabled) {
    s << ";learning_rate_scheduler=";
    for (double rate : c.learning_rate_scheduler.rates) s << rate << ',';
  }
  return s.str();
}

std::vector<std::unique_ptr<Callback>> make_run_callbacks(const RunConfig& config, Trainer& trainer) {
  const RunCallbacks& c = config.callbacks;
  std::vector<std::unique_ptr<Callback>> out;
  if (const auto& o = c.learning_rate_scheduler; o.enabled) {
    out.push_back(std::make_unique<LearningRateScheduler>(LearningRateScheduler::from_rates(o.rates)));
  }
  if (const auto& o = c.csv_logger; o.enabled) {
    out.push_back(std::make_unique<CSVLogger>(CsvLoggerOptions{o.filename, o.separator.at(0), o.append}));
  }
  if (const auto& o = c.tensorboard; o.enabled) {
    out.push_back(std::make_unique<TensorBoard>(TensorBoardOptions{o.log_dir, o.update_freq}));
  }
  if (const auto& o = c.remote_monitor; o.enabled) {
    out.push_back(std::make_unique<RemoteMonitor>(RemoteMonitorOptions{o.url, o.field, o.send_as_json, o.timeout}));
  }
  if (const auto& o = c.model_checkpoint; o.enabled) {
    ModelCheckpointOptions m;
    m.filepath = o.filepath;
    m.monitor = o.monitor;
    m.save_best_only = o.save_best_only;
    m.save_weights_only = o.save_weights_only;
    m.mode = mode_of("model_checkpoint", o.mode);
    m.every_epochs = o.every_epochs;
    m.initial_value_threshold = unless_nan(o.initial_value_threshold);
    out.push_back(std::make_unique<ModelCheckpoint>(m, trainer));
  }
  if (const auto& o = c.reduce_lr_on_plateau; o.enabled) {
    out.push_back(std::make_unique<ReduceLROnPlateau>(ReduceLROnPlateauOptions{
        o.monitor, o.factor, o.patience, mode_of("reduce_lr_on_plateau", o.mode), o.min_delta, o.cooldown, o.min_lr}));
  }
  // Last: restore_best_weights puts the best weights back after the others saw the epoch's.
  if (const auto& o = c.early_stopping; o.enabled) {
    out.push_back(std::make_unique<EarlyStopping>(
        EarlyStoppingOptions{o.monitor, o.min_delta, o.patience, mode_of("early_stopping", o.mode),
                             unless_nan(o.baseline), o.restore_best_weights, o.start_from_epoch},
        trainer));
  }
  return out;
}

}  // namespace tnt::trainer
