#pragma once
// tnt-train's callbacks: the run file's [callbacks.*] sections (keys in run_keys(), Note [Run
// keys]) and the callbacks they make (tnt/trainer/callbacks.h).
#include <cstddef>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "tnt/trainer/trainer.h"

namespace tnt::trainer {

// A section switches its callback on by being there (also through --set); `enabled = false`
// switches it off again.
struct RunCallbacks {
  static constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  struct {
    bool enabled = false;
    std::string monitor = "val_loss", mode = "auto";
    double min_delta = 0.0, baseline = kNone;  // nan: no baseline
    std::size_t patience = 0, start_from_epoch = 0;
    bool restore_best_weights = false;
  } early_stopping;
  struct {
    bool enabled = false;
    std::string monitor = "val_loss", mode = "auto";
    double factor = 0.1, min_delta = 1e-4, min_lr = 0.0;
    std::size_t patience = 10, cooldown = 0;
  } reduce_lr_on_plateau;
  struct {
    bool enabled = false;
    std::string filepath, monitor = "val_loss", mode = "auto";
    bool save_best_only = false, save_weights_only = false;
    std::size_t every_epochs = 1;            // Keras's save_freq="epoch" (a number of batches is not offered)
    double initial_value_threshold = kNone;  // nan: none
  } model_checkpoint;
  struct {
    bool enabled = false;
    std::string log_dir = "logs";
    std::size_t update_freq = 0;  // 0: per epoch only
  } tensorboard;
  struct {
    bool enabled = false;
    std::string url = "http://localhost:9000/publish/epoch/end/", field = "data";
    bool send_as_json = false;
    double timeout = 5.0;  // seconds
  } remote_monitor;
  struct {
    bool enabled = false;
    std::string filename, separator = ",";
    bool append = false;
  } csv_logger;
  struct {
    bool enabled = false;
    std::vector<double> rates;  // epoch e trains at rates[e] (the last one after the list)
  } learning_rate_scheduler;
};

// The sections under [callbacks] that switch a callback on by being there.
const std::vector<std::string>& callback_sections();
// Sets `enabled` of `section` (one of callback_sections()).
void enable_callback(RunCallbacks& callbacks, const std::string& section);

struct RunConfig;
// Throws ConfigError for inconsistent callback settings (both forms of a shorthand, a
// LearningRateScheduler with a schedule that changes the rate, bad modes).
void validate_callbacks(const RunConfig& config);
// What must agree across ranks (their decisions must be every rank's).
std::string callbacks_canonical_text(const RunCallbacks& callbacks);
// The callbacks the run asks for, in a fixed order; `trainer` outlives them.
std::vector<std::unique_ptr<Callback>> make_run_callbacks(const RunConfig& config, Trainer& trainer);

}  // namespace tnt::trainer
