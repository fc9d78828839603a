#pragma once
// tnt's data-parallel trainer as a library: wrap a model, compile it with an optimizer, a
// learning-rate schedule, a loss and metrics, then fit / evaluate / predict. The same code runs
// as one process or on every rank of a tnt-launch job; the user never deals with ranks.
//
//   tnt::trainer::Session session;                          // joins the job (size 1 alone)
//   tnt::trainer::Trainer trainer(session, my_model_spec);  // wrap
//   trainer.compile({.optimizer = {.kind = "sgd", .momentum = 0.9},
//                    .schedule = {.base_rate = 0.05}});      // loss + accuracy by default
//   auto history = trainer.fit(train_source, {.global_batch = 64, .epochs = 2});
//   auto test = trainer.evaluate(test_source, 1000);       // same figures on every rank
//
// Threading: a Trainer is used by one thread. fit() runs the actor system of docs/design.md
// ("One training step, as messages") and returns when it has stopped; batch callbacks run on
// the metrics actor's thread, the others on the caller's thread. Every rank must make the same
// calls in the same order (they issue collectives).
//
// Errors: every failure is a tnt::Error: bad options a tnt::ConfigError; a lost rank or any failure inside the actors
// throws (tnt::JobError or tnt::actors::ActorFailed) on every surviving rank.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tnt/compute/checkpoint.h"
#include "tnt/compute/decode.h"
#include "tnt/compute/model.h"
#include "tnt/compute/onnx.h"
#include "tnt/compute/optimizer.h"
#include "tnt/compute/schedule.h"
#include "tnt/compute/spec.h"
#include "tnt/compute/tensor.h"
#include "tnt/core/error.h"
#include "tnt/dataset/sequence.h"
#include "tnt/dataset/source.h"
#include "tnt/dataset/transform.h"

namespace tnt {
class Communicator;
}

namespace tnt::trainer {

// The job this process belongs to (from the TNT_* environment; alone = size 1), its
// communicator and rank-prefixed logging.
struct SessionOptions {
  // Canonical text of the run configuration: ranks whose texts differ are refused at start-up.
  std::string configuration;
  // Compute threads (oneDNN / OpenMP) per rank; 0: one per core this rank may use
  // (automatic_threads).
  int threads = 0;
  // Once the job fails, this process exits (status 1) if it has not ended within this time
  // (CommunicatorOptions::exit_after_failure); unset: it goes on, and its next call throws.
  std::optional<std::chrono::milliseconds> exit_after_failure;
};

// What threads = 0 chooses (Note [Threads follow the cores] in src/trainer.cpp).
struct AutomaticThreads {
  int threads = 1;
  int mask_cores = 1;   // CPUs in this process's affinity mask
  int host_cores = 1;   // TNT_HOST_CORES, else the CPUs online
  int ranks_here = 1;   // ranks on this host
  bool shared = false;  // the host's ranks share one mask: each takes its share
  std::string describe() const;
};
AutomaticThreads automatic_threads(int local_size);

class Session {
 public:
  explicit Session(SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int rank() const;
  int size() const;
  bool is_master_rank() const { return rank() == 0; }
  int threads() const { return threads_; }
  Communicator& communicator() { return *communicator_; }

 private:
  std::unique_ptr<Communicator> communicator_;
  int threads_ = 1;
};

// One micro-batch's share of a metric: the metric's value is the sum of `sum` over every
// micro-batch of the epoch on every rank divided by the sum of `count` (e.g. correct samples and
// samples), so it equals a serial run's (Note [Exact figures over ranks] in src/objective.h).
struct MetricPart {
  double sum = 0.0;
  double count = 0.0;
};

// A user-defined metric. `compute` gets the model's outputs {N, K} (logits: before softmax or
// sigmoid) and the N labels of one micro-batch; it runs on the trainer's compute thread, one call
// at a time, and must not keep references to its arguments.
struct MetricFunction {
  std::string name;  // the key in Logs (and "val_" + name for validation)
  std::function<MetricPart(const compute::Tensor& outputs, std::span<const std::int32_t> labels)> compute;
};

struct CompileOptions {
  compute::OptimizerOptions optimizer;
  compute::ScheduleOptions schedule;
  // Multiply the learning rate by the number of ranks (linear scaling rule).
  bool scale_rate_with_ranks = false;
  // "sparse_categorical_crossentropy" (softmax over K >= 2 outputs, integer labels),
  // "binary_crossentropy" (a sigmoid on each output: one output with labels 0/1, or K outputs
  // against the one-hot label) or "mean_squared_error" / "mse" (one output against the label's
  // value, or K outputs against the one-hot label). The model's outputs are logits in each case.
  // An encoder-decoder model trained on sentence pairs always uses the per-token
  // "sequence_cross_entropy" (padding ignored, the exact mean over the global batch's real target
  // tokens), whichever is named here.
  std::string loss = "sparse_categorical_crossentropy";
  double label_smoothing = 0.0;  // sequence loss only, in [0, 1)
  // "accuracy" (arg-max = label; one output: logit > 0 for binary cross-entropy, the rounded
  // value for mean squared error), "top_k_accuracy" (k = 5, as Keras's
  // sparse_top_k_categorical_accuracy) or "top_<k>_accuracy". Sentence pairs: "accuracy" only.
  std::vector<std::string> metrics = {"accuracy"};
  std::vector<MetricFunction> custom_metrics;  // after `metrics`, in this order
};

// Figures of one epoch or one evaluation, summed over all ranks (equal to a serial run's).
using Logs = std::map<std::string, double>;

// The run being fitted, as a callback sees it (Callback::run()). Its figures are global, the
// same on every rank; what a callback asks of it (stop, a learning rate) is agreed on by every
// rank before it takes effect, so all ranks stop at the same step and train with the same rate
// (Note [Run control] in actors/trainer/src/run_control.h says when each request takes effect).
class RunControl {
 public:
  virtual ~RunControl() = default;

  // The epoch (0-based) being trained, and the optimizer steps taken so far in all.
  virtual std::size_t epoch() const = 0;
  virtual std::uint64_t optimizer_steps() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The figures last handed to a callback hook: a step's in on_batch_end, the epoch's (with
  // val_loss and val_accuracy after validation) in on_epoch_end. Summed over all ranks.
  virtual Logs logs() const = 0;

  // Ends training at the next step boundary every rank agrees on (from on_batch_end of step k:
  // after step k+1; from on_epoch_begin or on_epoch_end: before the next step). fit then returns
  // normally, with the epochs finished so far. Any thread may call it.
  virtual void stop_training(const std::string& reason = "") = 0;
  virtual bool stop_requested() const = 0;

  // The rate of the next optimizer step: the schedule's rate times the factor.
  virtual double learning_rate() const = 0;
  // A factor on top of the schedule (warm-up and decay go on under it), 1 to begin with, kept
  // in checkpoints so that a resumed run goes on with it. The master rank's value is the one
  // every rank takes; it must be finite and > 0 (else tnt::ConfigError).
  virtual double learning_rate_factor() const = 0;
  virtual void set_learning_rate_factor(double factor) = 0;
  // Sets the factor so that the next optimizer step's rate is `rate`.
  virtual void set_learning_rate(double rate) = 0;
  // Whether the compiled schedule gives every step the same rate (no warm-up, no decay):
  // LearningRateScheduler refuses to fight one that does not.
  virtual bool schedule_is_constant() const { return true; }
  // Samples trained in this fit so far, summed over all ranks (throughput figures); with
  // sentence pairs, target tokens (the loss's own count: Note [Exact token mean]).
  virtual double samples_trained() const { return 0.0; }
  // What samples_trained() counts, for the names of throughput figures: "samples" or
  // "target_tokens".
  virtual const char* sample_unit() const { return "samples"; }
};

// What a callback keeps in checkpoints (Callback::save_state): named integers, reals, bytes and
// float arrays, in the order they were set (setting a key again replaces its value). A getter
// asked for a key that is not there, or that holds another kind of value, throws
// tnt::DataError naming the callback and the key.
class CallbackState {
 public:
  explicit CallbackState(std::string callback_name, std::vector<compute::CheckpointEntry> entries = {});

  void set_integer(const std::string& key, std::int64_t value);
  void set_real(const std::string& key, double value);
  void set_bytes(const std::string& key, std::vector<std::uint8_t> bytes);
  void set_floats(const std::string& key, std::span<const float> values);

  bool contains(const std::string& key) const;
  std::int64_t integer(const std::string& key) const;
  double real(const std::string& key) const;
  const std::vector<std::uint8_t>& bytes(const std::string& key) const;
  std::vector<float> floats(const std::string& key) const;

  const std::string& callback_name() const { return name_; }
  const std::vector<compute::CheckpointEntry>& entries() const { return entries_; }

 private:
  const compute::CheckpointEntry& entry(const std::string& key, const char* kind) const;
  void set(const std::string& key, decltype(compute::CheckpointEntry::value) value);
  std::string name_;
  std::vector<compute::CheckpointEntry> entries_;
};

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin() {}
  virtual void on_epoch_begin(std::size_t /*epoch*/) {}
  // Runs on the metrics actor's thread; `logs` has the step's loss and accuracy.
  virtual void on_batch_end(std::size_t /*epoch*/, std::size_t /*step*/, const Logs& /*logs*/) {}
  virtual void on_epoch_end(std::size_t /*epoch*/, const Logs& /*logs*/) {}
  virtual void on_train_end(const Logs& /*logs*/) {}

  // Note [Callback state]: a callback whose decisions depend on earlier epochs (a patience
  // count, a best value) keeps that state in the run's checkpoints, so that a resumed run
  // decides exactly as the run straight through would have. It names its state (empty: it
  // keeps none); fit calls save_state on the master rank whenever a full checkpoint is written
  // during the run (FitOptions::checkpoint_path, ModelCheckpoint, preemption), and, when fit
  // resumes, load_state on every rank after on_train_begin (which starts the state afresh)
  // and before the first step, with what the master's callback saved. Two callbacks of one
  // run with the same name are told apart by their order: the second is stored as "NAME#2".
  // A resumed run warns about a saved state that no callback of the run takes (it is
  // dropped) and about a callback whose state the checkpoint does not hold (it starts
  // afresh: a checkpoint written before it was added, or by an older tnt). load_state may
  // throw (tnt::DataError for a state it cannot use): fit then fails naming the callback.
  virtual std::string state_name() const { return {}; }
  virtual void save_state(CallbackState& /*state*/) const {}
  virtual void load_state(const CallbackState& /*state*/) {}

  // The run being fitted, from on_train_begin to on_train_end; tnt::LogicError outside fit.
  RunControl& run() const;

 private:
  friend class FitRun;
  RunControl* run_ = nullptr;
};

// fit stopped on every rank at the same step because the loss or the reduced gradient of that
// step was not finite (FitOptions::terminate_on_nan). The message names the step.
class NonFiniteError : public Error {
 public:
  using Error::Error;
};

// fit stopped on every rank at the same step because a rank received SIGTERM or SIGUSR1
// (FitOptions::stop_on_signals), after the master rank wrote the checkpoint. tnt-train exits
// with kPreemptedExitStatus, so that a job script can tell "rerun with --resume auto" from a
// failure.
inline constexpr int kPreemptedExitStatus = 3;
class Preempted : public Error {
 public:
  using Error::Error;
  ExitStatus exit_status() const noexcept override { return static_cast<ExitStatus>(kPreemptedExitStatus); }
};

enum class GradientCompression { none, bf16 };
// "none" or "bf16"; anything else is a ConfigError naming `what` (e.g. the option).
GradientCompression parse_gradient_compression(const std::string& text, const std::string& what);

struct FitOptions {
  // Give one: the global batch (split across ranks at sample level) or each rank's micro-batch.
  std::size_t global_batch = 0;
  std::size_t micro_batch = 0;
  std::size_t epochs = 1;
  std::size_t max_steps = 0;  // stop after this many optimizer steps in all (0 = no limit)
  std::uint64_t seed = 0;     // data order (weights: Trainer::initialize)
  bool shuffle = true;
  bool drop_remainder = false;
  data::TransformOptions transform;  // training augmentation / normalisation
  std::size_t prefetch = 2;
  // Threads that read (decode) each training batch's samples at once (data::LoaderOptions::
  // workers): more than 1 helps sources that decode, such as the image folder.
  std::size_t data_workers = 1;
  // Gradient accumulation: each rank runs its share of every step as this many micro-steps of
  // global batch / (ranks x N) samples, summing their gradients, and the optimizer steps once;
  // the gradients are allreduced only in the last micro-step, overlapped with its backward. The
  // global batch and the results stay the plain run's (up to rounding), BatchNorm aside: it
  // normalises each micro-step with its own statistics (Note [Gradient accumulation] in
  // src/step_actors.cpp). Full batches must divide (ConfigError otherwise).
  std::size_t accumulation_steps = 1;
  // Synchronized BatchNorm: in training, every BatchNorm layer normalises with the mean and
  // variance of the global batch (every rank's samples of the step, or of the micro-step with
  // accumulation), with the matching backward, at the cost of one small allreduce per BatchNorm
  // layer forward and one backward; the running statistics are then the same on every rank.
  // false: each rank's own samples (Note [Synchronized BatchNorm] in compute/src/layers_dnnl.cpp).
  // A model without BatchNorm is refused (ConfigError); on one rank it changes nothing.
  bool sync_batch_norm = false;
  // Bitwise-reproducible mode: the final weights are bitwise the same on 1 to bitwise_shards
  // ranks, for the same seed, global batch and threads per rank (the compute threads must be
  // the same number on every run compared: oneDNN's sums depend on them). Each global batch is
  // cut into bitwise_shards shards, fixed in the batch; each rank computes whole shards, one
  // micro-step each, and their gradients are summed in exact fixed point over shards and ranks
  // and rounded once (Note [Bitwise-reproducible mode] in src/exact_sum.cpp). Refused
  // (ConfigError, naming why) with BatchNorm, accumulation_steps > 1, micro_batch, without
  // distribute_dataset, bf16 gradient compression, sentence pairs, more ranks than shards or a
  // global batch smaller than bitwise_shards.
  // bitwise_shards 0 (automatic): the smallest divisor of the global batch from 12 on, so that
  // every shard of a full batch has the same size (a change of shape between passes rebuilds
  // the model's oneDNN primitives: shards of 21 and 22 samples took 1.9x the plain step time,
  // shards of 16 1.1x; LeNet-5, global batch 256, 2 ranks). Also refused where the learning rate
  // scales with the ranks (CompileOptions::scale_rate_with_ranks) by tnt-train; the API leaves
  // that to the caller.
  bool bitwise = false;
  std::size_t bitwise_shards = 0;
  // Optimizer-state sharding (ZeRO stage 1): gradients are reduce-scattered (per bucket,
  // overlapped with backward), each rank updates its 1/ranks of the flat parameters with state
  // for that part only, and the weights are allgathered; NaN guard and global_clipnorm still see
  // the whole gradient, checkpoints hold the whole state (gathered on the master) and resume on
  // any rank count, sharded or not. Refused (ConfigError) for optimizers without state, with
  // clipnorm and with bf16 gradient compression; on one rank it changes nothing (Note
  // [Optimizer-state sharding] in src/optimizer_shard.h).
  bool shard_optimizer = false;

  // Distribution switches, as Tarantella's (Note [Distribution switches] in src/trainer_io.cpp).
  // false: `train` is this rank's own data, each rank passing its own source (all of the same
  // size); every step takes a micro-batch from each rank's source, and the global batch is
  // micro-batch x ranks. Give micro_batch, or a global_batch that the ranks divide.
  bool distribute_dataset = true;
  // false: `validation` is this rank's own data; each rank evaluates all of it and the figures
  // are summed over ranks (exact, as with distribution).
  bool distribute_validation_dataset = true;

  // Validation every `validation_frequency` epochs on `validation` (null: none).
  std::shared_ptr<const data::Source> validation;
  std::size_t validation_frequency = 1;
  std::size_t validation_batch = 1000;
  data::TransformOptions validation_transform;  // normalisation only
  // Sentence pairs (fit on a SequenceSource): validation data, and length bucketing
  // (data::SequenceLoaderOptions::bucket_batches; 0 = off).
  std::shared_ptr<const data::SequenceSource> sequence_validation;
  std::size_t bucket_batches = 0;

  // Fusion threshold in bytes (0: TNT_FUSION_THRESHOLD_KB, else 32 KiB). Buckets are laid out
  // once, in reverse parameter order, each at least this large (the last may be smaller).
  std::size_t fusion_threshold_bytes = 0;
  // false: start the allreduces only after backward has finished (for measurements).
  bool overlap = true;
  // bf16: gradient buckets go over the wire as bfloat16, added in float32, half the bytes; the
  // weights, optimizer state and update stay float32 (Note [bf16 gradients on the wire] in
  // src/step_actors.cpp). fit logs the bytes of gradients each rank sent per step.
  GradientCompression gradient_compression = GradientCompression::none;
  // Note [Mixed precision] (tnt/compute/runtime.h): bf16 runs the convolutions and Dense layers
  // on bf16 dot products and keeps weights, optimizer state and gradients in fp32. Refused
  // (ConfigError) where the CPU has no native bf16; the master warns where the measured bf16
  // peak is not well above the fp32 one.
  compute::Precision precision = compute::Precision::fp32;

  // Checkpoints, written by the master rank only (atomic).
  std::string checkpoint_path;
  std::size_t checkpoint_every_epochs = 0;
  std::size_t checkpoint_every_steps = 0;
  // Continue from this checkpoint: weights, optimizer state, data position, learning-rate
  // factor, the callbacks' states (Note [Callback state]). "auto": from checkpoint_path when the master rank finds a
  // file there, else start fresh (a file there that is not a valid checkpoint is an error, never ignored).
  std::string resume_path;

  // TerminateOnNaN, on by default (Keras's is opt-in): a loss or reduced gradient that is NaN
  // or infinite stops training on every rank at that step, and fit throws NonFiniteError
  // naming it. A non-finite gradient is never applied. false: train on whatever comes.
  bool terminate_on_nan = true;
  // Preemption: SIGTERM or SIGUSR1 to any rank stops every rank at one step boundary; the
  // master writes checkpoint_path (if set) and every rank throws Preempted. fit installs its
  // handlers for its own duration and restores the previous ones after (Note [Preemption] in
  // actors/trainer/src/run_control.h). tnt-train sets it.
  bool stop_on_signals = false;

  std::string csv_path;              // per-epoch metrics (master)
  std::string timeline_path;         // Chrome-trace JSON of every rank's spans (master writes)
  bool progress_bar = true;          // Keras-style, master only
  bool print_steps = false;          // one line per step with its loss and accuracy (master)
  std::vector<Callback*> callbacks;  // not owned
};

struct History {
  std::vector<Logs> epochs;  // one entry per epoch finished in this call
  std::size_t steps = 0;     // optimizer steps taken in this call
  double seconds = 0.0;
  double samples_per_second = 0.0;
  double target_tokens_per_second = 0.0;  // sentence pairs: the target tokens trained (</s> included)
};

// The source indices of every global batch that Trainer::fit(train, options) trains, by step:
// the split across ranks is at sample level, so these are the same on any number of ranks (with
// global_batch given; micro_batch alone makes the global batch depend on the ranks, and this is
// then one rank's). For other frameworks to train on the same batches (tnt-train --export-pairs).
std::vector<std::vector<std::size_t>> planned_global_batches(std::shared_ptr<const data::SequenceSource> train,
                                                             const FitOptions& options);

struct FitData;  // fit.h

class Trainer {
 public:
  Trainer(Session& session, compute::ModelSpec spec);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Seeded initial weights (rank 0's are broadcast at the start of fit anyway).
  void initialize(std::uint64_t seed);
  void compile(const CompileOptions& options);

  History fit(std::shared_ptr<const data::Source> train, const FitOptions& options);
  // An encoder-decoder on sentence pairs: each global batch is split at sample level, and the
  // loss is the exact mean over the batch's real target tokens on any number of ranks. Logs'
  // "loss" and "accuracy" are per target token (teacher forcing).
  History fit(std::shared_ptr<const data::SequenceSource> train, const FitOptions& options);
  // The loss and the compiled metrics over all of `source` (and "count", the samples), each rank
  // taking its share of every batch. distribute = false: `source` is this rank's own data, each
  // rank evaluates all of it in batches of `global_batch`, and the figures are summed over ranks.
  Logs evaluate(std::shared_ptr<const data::Source> source, std::size_t global_batch,
                const data::TransformOptions& transform = {}, bool distribute = true);
  // Token loss and accuracy (teacher forcing) over all of `source`, each rank taking its share.
  Logs evaluate(std::shared_ptr<const data::SequenceSource> source, std::size_t global_batch);
  // Translations of `texts` by an encoder-decoder model (greedy, or beam search with
  // options.beam > 1), on this rank alone. Texts longer than the model's source are refused.
  std::vector<std::string> translate(const std::vector<std::string>& texts, const data::Vocabulary& vocabulary,
                                     compute::DecodeOptions options = {});
  // Class probabilities {N, K} for all of `source` (softmax, or sigmoid for binary
  // cross-entropy; the outputs themselves for mean squared error), in the order of `source`.
  // Every rank must call it with the same source: rank r computes the r-th contiguous share of
  // the samples, in forward passes of `batch` samples, and the shares are gathered (Note
  // [Distributed predict] in src/trainer_io.cpp). The master rank gets all N rows; the others get
  // {0, K} unless `on` is every_rank.
  enum class PredictionsOn { master, every_rank };
  compute::Tensor predict(std::shared_ptr<const data::Source> source, std::size_t batch,
                          const data::TransformOptions& transform = {}, PredictionsOn on = PredictionsOn::master);

  // Tarantella's save_weights / save_architecture: the master rank writes (atomically) a
  // weights-only checkpoint (architecture, weights, BatchNorm statistics: no optimizer) or an
  // architecture-only one. Every rank must call them. load_weights below reads either a
  // weights-only or a full checkpoint; load_architecture reads the ModelSpec of any kind.
  void save_weights(const std::string& path);
  void save_architecture(const std::string& path);
  // The master rank writes the model's inference graph with its current weights and BatchNorm
  // statistics as ONNX (compute::export_onnx, as `tnt-ckpt export-onnx`: opset 13, symbolic batch,
  // compute/README.md "Models from PyTorch and Keras"). `output` as tnt-ckpt's --output; without
  // it, what predict() gives for the compiled loss (softmax for sparse categorical cross-entropy,
  // sigmoid for binary cross-entropy, the outputs themselves for mean squared error). Every rank
  // must call it. A model ONNX export does not cover (sequence layers) or a file the master cannot
  // write is a tnt::ConfigError on every rank (compute::export_onnx's error on the master).
  void export_onnx(const std::string& path, std::optional<compute::OnnxOutput> output = {});

  // Writes a full checkpoint (every rank must call it; the master writes). With the optimizer
  // state sharded (FitOptions::shard_optimizer) every rank sends the master its part first.
  void save_checkpoint(const std::string& path);
  // Throws tnt::ConfigError when the samples of `source` do not have the model's input shape
  // (C×H×W) or its classes exceed the model's outputs; `role` names it ("test split"). fit,
  // evaluate and predict check their data with it before any step.
  void check_data(const data::Source& source, const std::string& role) const;

  // Loads weights and BatchNorm statistics from any checkpoint with weights, as read by the
  // master rank, on every rank (every rank must call it). The optimizer state is left alone:
  // to continue training use FitOptions::resume_path. A file whose weights do not fit this
  // model (other layers or shapes), or that holds no weights, is a tnt::ConfigError naming it.
  void load_weights(const std::string& path);

  compute::Model& model();
  Session& session();

  struct State;

 private:
  History fit_data(FitData train, const FitOptions& options);

  std::unique_ptr<State> state_;
};

// The model description of any checkpoint (full, weights-only or architecture-only), read by
// this process alone: build a Trainer from it (Tarantella's models.model_from_config).
compute::ModelSpec load_architecture(const std::string& path);

// True when the spec has a BatchNorm layer (inside residual branches too).
bool has_batch_norm(const compute::ModelSpec& spec);

}  // namespace tnt::trainer
