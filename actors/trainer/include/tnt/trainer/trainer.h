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
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tnt/compute/decode.h"
#include "tnt/compute/model.h"
#include "tnt/compute/optimizer.h"
#include "tnt/compute/schedule.h"
#include "tnt/compute/spec.h"
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
  // Compute threads (oneDNN / OpenMP) per rank.
  int threads = 1;
};

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

struct CompileOptions {
  compute::OptimizerOptions optimizer;
  compute::ScheduleOptions schedule;
  // Multiply the learning rate by the number of ranks (linear scaling rule).
  bool scale_rate_with_ranks = false;
  // "sparse_categorical_crossentropy" for a label per sample; an encoder-decoder model trained on
  // sentence pairs always uses the per-token "sequence_cross_entropy" (padding ignored, the
  // exact mean over the global batch's real target tokens), whichever is named here.
  std::string loss = "sparse_categorical_crossentropy";
  double label_smoothing = 0.0;                     // sequence loss only, in [0, 1)
  std::vector<std::string> metrics = {"accuracy"};  // "accuracy" or none
};

// Figures of one epoch or one evaluation, summed over all ranks (equal to a serial run's).
using Logs = std::map<std::string, double>;

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin() {}
  virtual void on_epoch_begin(std::size_t /*epoch*/) {}
  // Runs on the metrics actor's thread; `logs` has the step's loss and accuracy.
  virtual void on_batch_end(std::size_t /*epoch*/, std::size_t /*step*/, const Logs& /*logs*/) {}
  virtual void on_epoch_end(std::size_t /*epoch*/, const Logs& /*logs*/) {}
  virtual void on_train_end(const Logs& /*logs*/) {}
};

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

  // Checkpoints, written by the master rank only (atomic).
  std::string checkpoint_path;
  std::size_t checkpoint_every_epochs = 0;
  std::size_t checkpoint_every_steps = 0;
  // Continue from this checkpoint: weights, optimizer state, data position.
  std::string resume_path;

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
};

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
  // Loss and accuracy over all of `source`, each rank taking its share of every batch.
  Logs evaluate(std::shared_ptr<const data::Source> source, std::size_t global_batch,
                const data::TransformOptions& transform = {});
  // Token loss and accuracy (teacher forcing) over all of `source`, each rank taking its share.
  Logs evaluate(std::shared_ptr<const data::SequenceSource> source, std::size_t global_batch);
  // Translations of `texts` by an encoder-decoder model (greedy, or beam search with
  // options.beam > 1), on this rank alone. Texts longer than the model's source are refused.
  std::vector<std::string> translate(const std::vector<std::string>& texts, const data::Vocabulary& vocabulary,
                                     compute::DecodeOptions options = {});
  // Class probabilities {N, K} for all of `source`, computed on this rank alone.
  compute::Tensor predict(std::shared_ptr<const data::Source> source, std::size_t batch,
                          const data::TransformOptions& transform = {});

  // Writes a full checkpoint (every rank must call it; the master writes).
  void save_checkpoint(const std::string& path);
  // Loads weights and BatchNorm statistics from any checkpoint with weights, as read by the
  // master rank, on every rank (every rank must call it). The optimizer state is left alone:
  // to continue training use FitOptions::resume_path.
  void load_weights(const std::string& path);

  compute::Model& model();
  Session& session();

  struct State;

 private:
  History fit_data(FitData train, const FitOptions& options);

  std::unique_ptr<State> state_;
};

// True when the spec has a BatchNorm layer (inside residual branches too).
bool has_batch_norm(const compute::ModelSpec& spec);

}  // namespace tnt::trainer
