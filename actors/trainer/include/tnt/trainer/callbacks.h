#pragma once
// Keras's built-in callbacks, with Keras's names and meaning, for Trainer::fit
// (FitOptions::callbacks). Each decides only from figures every rank holds identically (the
// epoch's logs are summed over ranks), so every rank takes the same decision at the same epoch
// and no rank is left waiting in a collective (Note [Run control] in
// actors/trainer/src/run_control.h). Files are written by the master rank alone.
//
//   tnt::trainer::EarlyStopping stop({.monitor = "val_loss", .patience = 2, .restore_best_weights = true}, trainer);
//   tnt::trainer::ReduceLROnPlateau plateau({.factor = 0.5, .patience = 1});
//   fit_options.callbacks = {&stop, &plateau};
//
// Keras's History is what fit returns (History::epochs); its ProgbarLogger is
// FitOptions::progress_bar; its TerminateOnNaN is FitOptions::terminate_on_nan (on by default,
// and it ends the run with NonFiniteError).
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tnt/trainer/trainer.h"

namespace tnt::trainer {

// How a monitored figure improves. auto: "max" when the name holds "acc" (accuracy,
// top_5_accuracy), else "min" (as Keras).
enum class MonitorMode { automatic, min, max };
MonitorMode parse_monitor_mode(const std::string& text);  // "auto" | "min" | "max"

struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  double min_delta = 0.0;    // a change smaller than this is no improvement
  std::size_t patience = 0;  // epochs without improvement before training stops
  MonitorMode mode = MonitorMode::automatic;
  std::optional<double> baseline{};  // the figure must beat this as well
  // When it stops, the weights (and BatchNorm statistics) of the best epoch are put back.
  bool restore_best_weights = false;
  std::size_t start_from_epoch = 0;  // epochs before counting starts
};

// Stops training after `patience` epochs without improvement of `monitor`. Its state in
// checkpoints (Note [Callback state] in trainer.h): the wait, the best figure and its epoch,
// and with restore_best_weights the best epoch's weights and BatchNorm statistics (as large
// again as the model's), so that a resumed run stops at the same epoch and restores the same
// weights as a run straight through.
class EarlyStopping : public Callback {
 public:
  // `trainer`: whose weights restore_best_weights keeps and restores.
  EarlyStopping(EarlyStoppingOptions options, Trainer& trainer);
  void on_train_begin() override;
  void on_epoch_end(std::size_t epoch, const Logs& logs) override;
  std::string state_name() const override { return "EarlyStopping"; }
  void save_state(CallbackState& state) const override;
  void load_state(const CallbackState& state) override;
  // The epoch (0-based) training stopped after, if it stopped; the best epoch and its figure.
  std::optional<std::size_t> stopped_epoch() const { return stopped_epoch_; }
  std::optional<std::size_t> best_epoch() const { return best_epoch_; }
  double best() const { return best_; }

 private:
  bool improves(double current, double reference) const;
  EarlyStoppingOptions options_;
  Trainer& trainer_;
  bool maximize_ = false;
  double best_ = 0.0;
  std::size_t wait_ = 0;
  std::optional<std::size_t> stopped_epoch_, best_epoch_;
  std::vector<std::vector<float>> best_weights_;  // parameters, then BatchNorm statistics
  bool warned_ = false;
};

struct ReduceLROnPlateauOptions {
  std::string monitor = "val_loss";
  double factor = 0.1;  // in (0, 1): the learning rate's multiplier
  std::size_t patience = 10;
  MonitorMode mode = MonitorMode::automatic;
  double min_delta = 1e-4;
  std::size_t cooldown = 0;  // epochs after a reduction before waiting starts again
  double min_lr = 0.0;       // the rate never goes below this
};

// Multiplies the learning-rate factor (RunControl, on top of the schedule) by `factor` after
// `patience` epochs without improvement of `monitor`. Every rank reduces at the same epoch.
// Its state in checkpoints: the wait, the cooldown left, the best figure and the reductions so
// far (the factor itself is the run's, saved with it).
class ReduceLROnPlateau : public Callback {
 public:
  explicit ReduceLROnPlateau(ReduceLROnPlateauOptions options);
  void on_train_begin() override;
  void on_epoch_end(std::size_t epoch, const Logs& logs) override;
  std::string state_name() const override { return "ReduceLROnPlateau"; }
  void save_state(CallbackState& state) const override;
  void load_state(const CallbackState& state) override;
  // Since the run began (a resumed run counts those before the checkpoint).
  std::size_t reductions() const { return reductions_; }

 private:
  ReduceLROnPlateauOptions options_;
  bool maximize_ = false;
  double best_ = 0.0;
  std::size_t wait_ = 0, cooldown_left_ = 0, reductions_ = 0;
  bool warned_ = false;
};

struct ModelCheckpointOptions {
  // Formatted with the epoch (1-based, as Keras) and every figure of the epoch's logs, in
  // Python's (and fmt's) syntax: "ckpt-{epoch:02d}-{val_loss:.3f}.tnt".
  std::string filepath{};
  std::string monitor = "val_loss";
  bool save_best_only = false;     // only when `monitor` improved on the best so far
  bool save_weights_only = false;  // weights and BatchNorm statistics (no optimizer state)
  MonitorMode mode = MonitorMode::automatic;
  // Every this many epochs (Keras's save_freq="epoch" is 1; its save_freq in batches is not
  // offered: [checkpoint] every_steps / FitOptions::checkpoint_every_steps saves between steps).
  std::size_t every_epochs = 1;
  std::optional<double> initial_value_threshold{};  // save_best_only: the figure must beat this
};

// Saves the model at the end of epochs (master rank writes; every rank calls, as
// Trainer::save_checkpoint asks). Its state in checkpoints: the best figure (save_best_only).
// A full checkpoint it writes holds the other callbacks' states as they are when it writes:
// those after it in FitOptions::callbacks have not seen the epoch's end yet, and a factor asked
// for at that epoch is not agreed yet; resuming from FitOptions::checkpoint_path, written after
// every callback has seen the epoch, continues exactly.
class ModelCheckpoint : public Callback {
 public:
  ModelCheckpoint(ModelCheckpointOptions options, Trainer& trainer);  // checks filepath's fields
  void on_train_begin() override;
  void on_epoch_end(std::size_t epoch, const Logs& logs) override;
  std::string state_name() const override { return "ModelCheckpoint"; }
  void save_state(CallbackState& state) const override;
  void load_state(const CallbackState& state) override;
  const std::vector<std::string>& saved() const { return saved_; }  // paths, in order

 private:
  ModelCheckpointOptions options_;
  Trainer& trainer_;
  bool maximize_ = false;
  std::optional<double> best_;
  std::vector<std::string> saved_;
  bool warned_ = false;
};

// The path ModelCheckpoint writes for `epoch` (0-based) and `logs`; ConfigError naming the
// filepath when a field is unknown or badly formatted.
std::string format_checkpoint_path(const std::string& filepath, std::size_t epoch, const Logs& logs);

// Sets the learning rate at the start of every epoch to schedule(epoch, current rate), as
// Keras's LearningRateScheduler. It replaces the rate: refused (ConfigError) when the
// compiled schedule is not constant (warm-up, decay or steps would fight it).
class LearningRateScheduler : public Callback {
 public:
  using Function = std::function<double(std::size_t epoch, double rate)>;
  explicit LearningRateScheduler(Function schedule);
  // The run file's form: epoch e trains at rates[e]; after the list, its last rate.
  static LearningRateScheduler from_rates(std::vector<double> rates);
  void on_train_begin() override;
  void on_epoch_begin(std::size_t epoch) override;

 private:
  Function schedule_;
};

struct CsvLoggerOptions {
  std::string filename{};
  char separator = ',';
  bool append = false;  // append to an existing file (its header is kept)
};

// One line per epoch (master rank): epoch (1-based), every figure of the epoch's logs (loss,
// the metrics, the validation figures, in the progress bar's order), the learning rate, the
// epoch's training seconds (validation excluded) and samples per second (over all ranks).
class CSVLogger : public Callback {
 public:
  explicit CSVLogger(CsvLoggerOptions options);
  ~CSVLogger() override;
  CSVLogger(const CSVLogger&) = delete;
  CSVLogger& operator=(const CSVLogger&) = delete;
  void on_train_begin() override;
  void on_epoch_begin(std::size_t epoch) override;
  void on_batch_end(std::size_t epoch, std::size_t step, const Logs& logs) override;
  void on_epoch_end(std::size_t epoch, const Logs& logs) override;
  void on_train_end(const Logs& logs) override;

 private:
  CsvLoggerOptions options_;
  std::FILE* file_ = nullptr;
  std::vector<std::string> columns_, ignored_;
  std::chrono::steady_clock::time_point epoch_start_;
  std::atomic<int64_t> train_ns_{0};  // written on the metrics actor's thread
  double samples_at_start_ = 0.0;
  std::atomic<double> samples_at_last_batch_{0.0};
};

struct RemoteMonitorOptions {
  std::string url = "http://localhost:9000/publish/epoch/end/";  // http://HOST[:PORT]/PATH
  // As Keras: send_as_json false posts a form whose field `field` holds the JSON; true posts
  // the JSON itself (application/json).
  std::string field = "data";
  bool send_as_json = false;
  double timeout_seconds = 5.0;  // connect, send and receive together
};

// POSTs each epoch's logs (and "epoch") as JSON to an HTTP URL (master rank). A failed post
// is a warning, never a failed run.
class RemoteMonitor : public Callback {
 public:
  explicit RemoteMonitor(RemoteMonitorOptions options);  // ConfigError on a URL it cannot use
  void on_epoch_end(std::size_t epoch, const Logs& logs) override;
  std::size_t posted() const { return posted_; }  // successful posts (status 2xx)

 private:
  RemoteMonitorOptions options_;
  std::string host_, port_, target_;
  std::size_t posted_ = 0;
};

// The JSON object RemoteMonitor sends: {"epoch": E, "loss": ..., ...} (E 0-based, as Keras).
std::string logs_json(std::size_t epoch, const Logs& logs);

struct TensorBoardOptions {
  std::string log_dir = "logs";
  // 0: per epoch only; N: also every N optimizer steps (Keras's update_freq=N; "epoch" is 0).
  std::size_t update_freq = 0;
};

// Event files that TensorBoard reads (LOG_DIR/train and LOG_DIR/validation): scalars for the
// loss, every metric, the learning rate and samples per second, per epoch ("epoch_loss", ...)
// and, with update_freq, every N steps ("batch_loss", ...). Written by the master rank, or by
// every rank in LOG_DIR/rank-N/... with TNT_TENSORBOARD_ON_ALL_DEVICES=true.
class TensorBoard : public Callback {
 public:
  explicit TensorBoard(TensorBoardOptions options);
  ~TensorBoard() override;
  void on_train_begin() override;
  void on_epoch_begin(std::size_t epoch) override;
  void on_batch_end(std::size_t epoch, std::size_t step, const Logs& logs) override;
  void on_epoch_end(std::size_t epoch, const Logs& logs) override;
  void on_train_end(const Logs& logs) override;

  class EventWriter;

 private:
  TensorBoardOptions options_;
  std::unique_ptr<EventWriter> train_, validation_;
  std::chrono::steady_clock::time_point epoch_start_, last_update_;
  double samples_at_epoch_start_ = 0.0, samples_at_last_update_ = 0.0;
  std::atomic<int64_t> train_ns_{0};
  std::atomic<double> samples_at_last_batch_{0.0};
};

}  // namespace tnt::trainer
