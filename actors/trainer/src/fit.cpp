#include "fit.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "exact_sum.h"
#include "tnt/compute/peaks.h"
#include "tnt/core/error.h"
#include "tnt/core/fail_point.h"
#include "tnt/core/settings.h"
#include "trainer_state.h"

namespace tnt::trainer {

namespace {

// Note [Optimizer-state sharding] in optimizer_shard.h: what it cannot apply to.
void check_sharding(const FitOptions& options, const compute::Optimizer& optimizer, const FitEnvironment& environment) {
  const auto& o = optimizer.options();
  const std::string what = "shard_optimizer ([train] shard_optimizer, --shard-optimizer)";
  if (compute::optimizer_slot_kinds(o).empty()) {
    throw ConfigError(fmt::format("{}: optimizer '{}'{} keeps no state to shard", what, o.kind,
                                  o.kind == "sgd" ? " without momentum" : ""));
  }
  if (o.clipnorm > 0) {
    throw ConfigError(fmt::format(
        "{} with clipnorm ([optimizer] clipnorm, --clipnorm): clipnorm scales each parameter by its own norm, and a "
        "shard may hold part of a parameter; use global_clipnorm, which sharding supports",
        what));
  }
  if (options.gradient_compression != GradientCompression::none) {
    throw ConfigError(fmt::format(
        "{} with gradient_compression bf16 ([distribution] gradient_compression, --gradient-compression): sharded "
        "gradients are reduce-scattered in fp32; bf16 is not implemented for them",
        what));
  }
  if (environment.skip_gradient_allreduce) {
    throw ConfigError(fmt::format("{} with {}: the benchmark switch skips the reduction that sharding needs", what,
                                  settings::kBenchSkipGradientAllreduce.name));
  }
}

// Note [Gradient accumulation] in step_actors.cpp: a full step's share cuts into equal
// micro-steps only where the global batch divides by ranks x N (or the micro-batch by N).
void check_accumulation(const FitOptions& options, int world_size) {
  const std::size_t n = options.accumulation_steps, ranks = static_cast<std::size_t>(world_size);
  if (n == 0) throw ConfigError("accumulation_steps (--accumulate) must be at least 1");
  if (n == 1) return;
  if (options.micro_batch != 0) {
    if (options.micro_batch % n != 0) {
      throw ConfigError(
          fmt::format("--accumulate {}: the micro-batch of {} per rank does not cut into {} micro-steps of equal size",
                      n, options.micro_batch, n));
    }
    return;
  }
  if (options.global_batch % (ranks * n) != 0) {
    throw ConfigError(fmt::format(
        "--accumulate {}: the global batch of {} does not cut into {} rank(s) x {} micro-steps of equal size "
        "(global batch / (ranks x accumulation steps) samples each): give a global batch that {} divides",
        n, options.global_batch, ranks, n, ranks * n));
  }
}

}  // namespace

std::size_t bitwise_shards(const FitOptions& options) {
  if (options.bitwise_shards != 0) return options.bitwise_shards;
  const std::size_t batch = options.global_batch;
  for (std::size_t d = std::min<std::size_t>(12, batch); d < batch; ++d) {
    if (batch % d == 0) return d;
  }
  return batch;
}

namespace {

// Note [Bitwise-reproducible mode] in exact_sum.cpp: what the mode cannot make the same on every
// number of ranks is refused, naming the setting (the model's BatchNorm and sentence pairs are
// looked at in FitRun's constructor).
void check_bitwise(const FitOptions& options, int world_size) {
  if (!options.bitwise) return;
  const auto refuse = [](const std::string& why) {
    throw ConfigError("bitwise-reproducible mode ([train] reproducible = \"bitwise\", --bitwise): " + why);
  };
  if (options.micro_batch != 0) {
    refuse(
        fmt::format("micro_batch (--micro-batch) {} is refused: the global batch would change with the ranks; "
                    "give the global batch (--global-batch)",
                    options.micro_batch));
  }
  const std::size_t v = bitwise_shards(options), ranks = static_cast<std::size_t>(world_size);
  if (v > kExactMaxAddends) {
    refuse(fmt::format("bitwise_shards (--bitwise-shards) {} must be at most {}", v, kExactMaxAddends));
  }
  if (options.accumulation_steps > 1) {
    refuse(fmt::format("accumulation_steps (--accumulate) {} is refused: the {} shards are the micro-steps already",
                       options.accumulation_steps, v));
  }
  if (!options.distribute_dataset) {
    refuse(
        "distribute_dataset = false (--no-distribute-dataset) is refused: each rank's own data depends on the ranks");
  }
  if (options.gradient_compression != GradientCompression::none) {
    refuse("gradient compression bf16 (--gradient-compression bf16) is refused: the gradients are summed exactly");
  }
  if (ranks > v) {
    refuse(fmt::format("{} ranks are more than the {} shards (bitwise_shards, --bitwise-shards) of each global batch",
                       ranks, v));
  }
  if (options.global_batch < v) {
    refuse(
        fmt::format("the global batch of {} is smaller than the {} shards (bitwise_shards, --bitwise-shards) it "
                    "is cut into",
                    options.global_batch, v));
  }
}

// Batches the loader keeps ahead. A batch holds the rank's whole share of a step, N micro-steps
// with accumulation, so `prefetch` batches would hold N times the plain run's samples: ResNet-50
// at global batch 64 with --accumulate 4 kept 4 batches of 38.5 MB where the plain run at 16
// kept 4 of 9.6 MB. With accumulation the queue holds prefetch / N batches (rounded up, at least
// one where there is a worker at all): about the plain run's samples ahead.
std::size_t prefetch_batches(const FitOptions& options) {
  const std::size_t n = std::max<std::size_t>(1, options.accumulation_steps);
  return (options.prefetch + n - 1) / n;
}

data::BatchPlanOptions make_plan_options(std::size_t samples, const FitOptions& options, int rank, int world_size) {
  if (options.epochs == 0) throw ConfigError("epochs must be at least 1");
  check_accumulation(options, world_size);
  check_bitwise(options, world_size);
  data::BatchPlanOptions plan;
  plan.num_samples = samples;
  plan.global_batch = options.global_batch;
  plan.micro_batch = options.micro_batch;
  plan.rank = rank;
  plan.world_size = world_size;
  plan.seed = options.seed;
  plan.shuffle = options.shuffle;
  plan.drop_remainder = options.drop_remainder;
  plan.distribute = options.distribute_dataset;
  if (options.bitwise) plan.shards = bitwise_shards(options);
  return plan;
}

class ImageFeed final : public BatchFeed {
 public:
  ImageFeed(std::shared_ptr<const data::Source> source, const data::LoaderOptions& options)
      : loader_(std::move(source), options) {}
  std::optional<StepBatch> next() override {
    auto batch = loader_.next();
    if (!batch) return std::nullopt;
    return StepBatch(std::move(*batch));
  }
  void recycle(StepBatch batch) override {
    if (auto* b = std::get_if<data::MicroBatch>(&batch)) loader_.recycle(std::move(*b));
  }
  void stop() override { loader_.stop(); }

 private:
  data::Loader loader_;
};

// Sequence batches take microseconds to assemble from memory: no worker thread (dataset/README.md).
class SequenceFeed final : public BatchFeed {
 public:
  SequenceFeed(std::shared_ptr<const data::SequenceSource> source, const data::SequenceLoaderOptions& options)
      : loader_(std::move(source), options) {}
  std::optional<StepBatch> next() override {
    auto batch = loader_.next();
    if (!batch) return std::nullopt;
    return StepBatch(std::move(*batch));
  }
  void recycle(StepBatch) override {}

 private:
  data::SequenceLoader loader_;
};

// bf16 pays only where the cores run bf16 dot products faster than fp32 multiply-adds (twice
// as fast on AVX512-BF16 cores of AMD's Zen 4; half as fast on some Intel Xeons): measured here,
// a fraction of a second.
void report_bf16_peaks(int threads) {
  const compute::Peaks peaks = compute::measure_arithmetic_peaks(threads, 0.05);
  const double bf16 = peaks.bf16_gflops.value_or(0.0);
  if (bf16 < 1.2 * peaks.fp32_gflops) {
    spdlog::warn(
        "precision bf16: this CPU's bf16 dot products measured {:.0f} GFLOP/s against {:.0f} for fp32 "
        "multiply-adds ({} thread(s)), so bf16 is unlikely to be faster here than fp32",
        bf16, peaks.fp32_gflops, threads);
  } else {
    spdlog::info("precision bf16: bf16 dot products measured {:.0f} GFLOP/s against {:.0f} for fp32 ({} thread(s))",
                 bf16, peaks.fp32_gflops, threads);
  }
}

}  // namespace

FitRun::FitRun(Trainer& trainer, Trainer::State& state, FitData train, const FitOptions& options,
               FitEnvironment environment)
    : trainer_(trainer),
      s_(state),
      train_(std::move(train)),
      options_(options),
      environment_(environment),
      plan_options_(make_plan_options(train_.size(), options, state.session.rank(), state.session.size())),
      plan_(plan_options_),
      steps_per_epoch_(plan_.steps_per_epoch()),
      timeline_(!options.timeline_path.empty()),
      checkpoints_(options),
      bar_(stdout, environment.output && options.progress_bar) {
  if (steps_per_epoch_ == 0) throw ConfigError("the training data gives no step per epoch");
  if (train_.images) trainer_.check_data(*train_.images, "the training data");
  if (options.validation) trainer_.check_data(*options.validation, "the validation data");
  if (options.resume_path == "auto" && options.checkpoint_path.empty()) {
    throw ConfigError("resume \"auto\" continues from the checkpoint path, and none is set");
  }
  // Bucketing reorders an epoch's samples: a checkpoint resumes only with the same setting.
  s_.fingerprint = plan_.fingerprint() ^ (static_cast<uint64_t>(options.bucket_batches) * 0x9e3779b97f4a7c15ULL);
  s_.has_fingerprint = true;
  s_.model.set_precision(options.precision);
  if (options.precision == compute::Precision::bf16 && environment.output) {
    report_bf16_peaks(s_.session.threads());
  }
  if (options.shard_optimizer) check_sharding(options, *state.optimizer, environment);
  if (options.bitwise && options.shard_optimizer) {
    throw ConfigError(
        "bitwise-reproducible mode (--bitwise) and optimizer-state sharding (--shard-optimizer) do not go together: "
        "the bitwise mode sums every gradient exactly as int64 limbs over all ranks, sharding reduce-scatters "
        "float32 gradients; choose one");
  }
  // Layers may say `sync = true` or `sync = false` themselves (Note [Synchronized BatchNorm]).
  const auto batch_norm = s_.model.batch_norm_layers(options.sync_batch_norm);
  if (options.sync_batch_norm && batch_norm.synchronized == 0) {
    throw ConfigError(fmt::format(
        "sync_batch_norm ([model] sync_batch_norm, --sync-batch-norm): model '{}' has no BatchNorm layer to "
        "synchronize{}",
        s_.model.spec().name, batch_norm.per_replica > 0 ? " (every one says sync = false)" : ""));
  }
  if (options.bitwise && batch_norm.synchronized + batch_norm.per_replica > 0) {
    throw ConfigError(fmt::format(
        "bitwise-reproducible mode ([train] reproducible = \"bitwise\", --bitwise): model '{}' has BatchNorm, whose "
        "statistics (per rank, or synchronized in float64 over ranks) depend on how the batch is split; use a model "
        "without BatchNorm",
        s_.model.spec().name));
  }
  if (options.bitwise && environment.output) {
    const std::size_t shards = bitwise_shards(options), ranks = static_cast<std::size_t>(state.session.size());
    spdlog::info(
        "bitwise-reproducible mode: each global batch of {} in {} shards of {}{} samples, summed exactly; "
        "the first rank of {} computes {} of them",
        options.global_batch, shards, options.global_batch / shards,
        options.global_batch % shards != 0 ? " or one more" : "", ranks, (shards + ranks - 1) / ranks);
  }
  if (options.bitwise && train_.sequences) {
    throw ConfigError(
        "bitwise-reproducible mode ([train] reproducible = \"bitwise\", --bitwise): sentence pairs are refused: "
        "their padding follows each rank's share of the batch");
  }
  // With gradient accumulation BatchNorm sees each micro-step's rows (Note [Gradient accumulation]).
  const std::size_t micro_steps = std::max<std::size_t>(1, options.accumulation_steps);
  const std::size_t batch_norm_rows = (plan_.max_local_batch() + micro_steps - 1) / micro_steps;
  if (batch_norm.per_replica > 0 && batch_norm_rows < 16) {
    spdlog::warn(
        "micro-batch of {} samples per rank{} in a model with BatchNorm: the statistics of {} of its BatchNorm "
        "layers are computed per rank{} and get noisy below 16 samples; use a larger global batch{}",
        batch_norm_rows, micro_steps > 1 ? " and micro-step" : "", batch_norm.per_replica,
        micro_steps > 1 ? " and micro-step" : "",
        state.session.size() > 1 ? ", or synchronized BatchNorm (--sync-batch-norm)" : "");
  }
}

FitRun::~FitRun() {
  if (bound_) s_.model.unbind_gradients();
  s_.model.set_replica_sum({});  // before the communicator it uses goes
}

History FitRun::run() {
  if (options_.stop_on_signals) signals_.emplace(s_.session.rank());
  prepare();
  // The CSV shorthand first: it logs the rate the epoch ended with, before callbacks change it.
  // A resumed run appends to the file it finds.
  if (!options_.csv_path.empty())
    callbacks_.push_back(&csv_.emplace(CsvLoggerOptions{options_.csv_path, ',', resumed_}));
  callbacks_.insert(callbacks_.end(), options_.callbacks.begin(), options_.callbacks.end());
  // Callbacks reach the run from on_train_begin to on_train_end, and not after fit; their
  // states go into the checkpoints written meanwhile. (A local class: it has FitRun's access
  // to Callback.)
  struct Attached {
    const std::vector<Callback*>& callbacks;
    std::vector<NamedCallback>& stateful;
    Attached(const std::vector<Callback*>& c, RunControl* run, std::vector<NamedCallback>& s)
        : callbacks(c), stateful(s) {
      for (auto* cb : callbacks) cb->run_ = run;
      stateful = stateful_callbacks(callbacks);
    }
    ~Attached() {
      for (auto* cb : callbacks) cb->run_ = nullptr;
      stateful.clear();
    }
  } attached(callbacks_, &*control_, s_.fitting_callbacks);
  if (s_.position.epoch >= options_.epochs) {
    spdlog::info("nothing to do: the checkpoint is at epoch {} of {}", s_.position.epoch, options_.epochs);
    return history_;
  }
  feed_ = make_feed();

  EngineContext context = engine_context();

  for (auto* cb : callbacks_) cb->on_train_begin();
  if (resumed_) restore_callback_states(s_.fitting_callbacks, saved_callback_states_, resume_origin_, s_.master());
  train_start_ = epoch_start_ = Clock::now();
  while (!finished()) {
    const std::size_t epoch = s_.position.epoch;
    // A resumed run starts in the middle of an epoch: its figures start there.
    if (s_.position.step == 0 || steps_done_ == 0) begin_epoch();
    agree();  // what callbacks asked for so far, and signals, before the segment's first step
    if (finished()) break;
    const bool epoch_done = run_steps(context, segment_end());
    stop_if_fatal();
    after_steps(epoch, epoch_done);
    if (epoch_done) end_epoch(epoch);
  }
  finish();
  return history_;
}

// Collectives, in the order every rank issues them: whether a checkpoint is there (resume
// "auto"), the checkpoint's bytes, the model, the start time.
void FitRun::prepare() {
  if (s_.optimizer_shard) {
    // Sharded by an earlier fit: whole again before this one resumes or shards anew.
    s_.optimizer_shard->unshard();
    s_.optimizer_shard.reset();
  }
  s_.position = {0, 0};
  const std::string resume = resume_path();
  resumed_ = !resume.empty();
  if (resumed_) {
    const auto checkpoint = load_checkpoint_everywhere(resume, s_.comm());
    s_.position = resume_from(checkpoint, resume, s_.model, *s_.optimizer, s_.fingerprint, steps_per_epoch_);
    s_.rate_factor = saved_rate_factor(checkpoint, resume);
    saved_callback_states_ = checkpoint.callback_states;
    resume_origin_ = resume;
  }
  RunController::Setup setup;
  setup.schedule = s_.schedule.get();
  setup.rank = s_.session.rank();
  setup.size = s_.session.size();
  setup.terminate_on_nan = options_.terminate_on_nan;
  setup.steps_per_epoch = steps_per_epoch_;
  setup.counts_tokens = train_.sequences != nullptr;
  control_.emplace(setup, s_.rate_factor);
  control_->at(s_.position.epoch, s_.optimizer->steps());
  broadcast_model(s_.model, s_.comm());
  if (s_.model.batch_norm_layers(options_.sync_batch_norm).synchronized > 0 && s_.session.size() > 1) {
    // Note [Synchronized BatchNorm] in compute/src/layers_dnnl.cpp. The compute thread sums the
    // statistics while the CommActor issues the gradients' allreduces in an order of its own
    // (Note [Collective order]): a communicator of their own keeps the two from matching each
    // other's calls. Blocking: the layer cannot go on without the sums.
    statistics_comm_ = std::make_unique<Communicator>(s_.comm().dup());
    s_.model.set_replica_sum(
        [comm = statistics_comm_.get()](std::span<double> values) {
          comm->allreduce(values.data(), values.size(), DataType::float64, ReduceOp::sum);
        },
        options_.sync_batch_norm);
  }
  layout_ = make_bucket_layout(s_.model, environment_.fusion_threshold_bytes);
  bind_gradients(s_.model, layout_);
  if (options_.bitwise) {
    exact_buckets_.clear();
    for (const auto& bucket : layout_.buckets)
      exact_buckets_.emplace_back(kExactLimbs * bucket.count + ExactFlags::count);
  }
  bound_ = true;
  spdlog::debug("{} gradient buckets over {} parameters ({} floats)", layout_.buckets.size(),
                s_.model.parameter_count(), layout_.memory.size());
  if (options_.shard_optimizer && s_.session.size() > 1) {
    s_.optimizer_shard = std::make_unique<OptimizerShard>(s_.comm(), layout_, s_.model, *s_.optimizer);
  }
  const auto* shard = s_.optimizer_shard.get();
  spdlog::info(
      "optimizer state: {} bytes on this rank ({})", s_.optimizer->state_bytes(),
      shard ? fmt::format("sharded 1/{}: block {} of each of {} buckets, {} of {} gradient elements", s_.session.size(),
                          s_.session.rank(), layout_.buckets.size(), shard->owned_elements(), layout_.memory.size())
            : std::string(options_.shard_optimizer ? "one rank: nothing to shard" : "not sharded"));
  base_us_ = now_us();
  s_.comm().broadcast(&base_us_, sizeof base_us_, 0);
}

std::string FitRun::resume_path() {
  if (options_.resume_path != "auto") return options_.resume_path;
  const std::string& path = options_.checkpoint_path;
  std::error_code error;
  int64_t found = s_.master() && std::filesystem::exists(path, error) ? 1 : 0;
  s_.comm().broadcast(&found, sizeof found, 0);
  if (found != 0) return path;
  spdlog::info("resume \"auto\": no checkpoint at {}: starting fresh", path);
  return {};
}

std::unique_ptr<BatchFeed> FitRun::make_feed() const {
  if (train_.sequences) {
    data::SequenceLoaderOptions o;
    o.plan = plan_options_;
    o.bucket_batches = options_.bucket_batches;
    o.start = s_.position;
    o.end_epoch = options_.epochs;
    return std::make_unique<SequenceFeed>(train_.sequences, o);
  }
  data::LoaderOptions o;
  o.plan = plan_options_;
  o.transform = options_.transform;
  o.start = s_.position;
  o.end_epoch = options_.epochs;
  o.prefetch = prefetch_batches(options_);
  o.workers = options_.data_workers;
  return std::make_unique<ImageFeed>(train_.images, o);
}

EngineContext FitRun::engine_context() {
  EngineContext context;
  context.model = &s_.model;
  context.objective = s_.objective.get();
  context.optimizer = s_.optimizer.get();
  context.schedule = s_.schedule.get();
  context.communicator = &s_.comm();
  context.feed = feed_.get();
  context.layout = &layout_;
  context.timeline = &timeline_;
  context.overlap = options_.overlap;
  context.accumulation_steps = options_.accumulation_steps;
  context.synchronized_batch_norm = s_.model.has_replica_sum();
  if (options_.bitwise) {
    context.exact_buckets = &exact_buckets_;
    context.bitwise_shards = bitwise_shards(options_);
  }
  context.bf16_gradients = options_.gradient_compression == GradientCompression::bf16;
  context.gradient_bytes = &gradient_bytes_;
  context.skip_gradient_allreduce = environment_.skip_gradient_allreduce;
  context.threads = s_.session.threads();
  context.compute_executor = s_.compute.executor();
  context.on_step_figures = [this](const StepFigures& f) { return on_step(f); };
  context.local_requests = [this] { return control_->local_requests(); };
  context.check_finite = options_.terminate_on_nan;
  context.shard = s_.optimizer_shard.get();
  return context;
}

bool FitRun::finished() const {
  return s_.position.epoch >= options_.epochs ||
         (options_.max_steps > 0 && s_.optimizer->steps() >= options_.max_steps) ||
         control_->stopped().kind != StopKind::none;
}

void FitRun::agree() {
  control_->at(s_.position.epoch, s_.optimizer->steps());
  control_->agree(s_.comm());
  stop_if_fatal();
}

void FitRun::stop_if_fatal() {
  const StopState& stop = control_->stopped();
  switch (stop.kind) {
    case StopKind::none: return;
    case StopKind::non_finite:
      throw NonFiniteError(stop.what +
                           " (TerminateOnNaN; to train on, FitOptions::terminate_on_nan = false, tnt-train "
                           "--allow-nan)");
    case StopKind::signal: preempt();
    case StopKind::requested:
      if (!stop_announced_) spdlog::info("{}", stop.what);
      stop_announced_ = true;
      return;
  }
}

// Note [Preemption] in run_control.h.
void FitRun::preempt() {
  signals_->consume();
  if (s_.position.step > 0 && steps_done_ > 0) bar_.finish(ordered(epoch_sums_.logs()));
  std::string saved = "no checkpoint path is set: nothing was saved";
  if (checkpoints_.enabled()) {
    save();
    saved = fmt::format(
        "the master rank wrote checkpoint {}; run again with resume \"auto\" (tnt-train --resume auto) "
        "to continue",
        checkpoints_.path());
  }
  // Every rank leaves only once the checkpoint is on disk.
  s_.comm().barrier();
  throw Preempted("preempted: " + control_->stopped().what + "; " + saved);
}

void FitRun::begin_epoch() {
  control_->at(s_.position.epoch, s_.optimizer->steps());
  if (s_.position.step == 0) {
    for (auto* cb : callbacks_) cb->on_epoch_begin(s_.position.epoch);
  }
  epoch_sums_ = {};
  epoch_start_ = Clock::now();
  bar_.begin_epoch(s_.position.epoch, options_.epochs, steps_per_epoch_, s_.position.step);
}

std::size_t FitRun::segment_end() const {
  const uint64_t global_step = s_.optimizer->steps();
  std::size_t steps = std::min(steps_per_epoch_ - s_.position.step, checkpoints_.steps_to_next(global_step));
  if (options_.max_steps > 0) steps = std::min<std::size_t>(steps, options_.max_steps - global_step);
  return s_.position.step + steps;
}

bool FitRun::run_steps(EngineContext& context, std::size_t end) {
  const std::size_t epoch = s_.position.epoch, begin = s_.position.step;
  context.rate_factor = control_->factor();
  const SegmentResult result = run_segment(context, epoch, begin, end);
  for (std::size_t k = begin; k < result.end; ++k) samples_ += plan_.global_count(k);
  history_.steps += result.end - begin;
  s_.position.step = result.end;
  if (result.gradient_nan || result.gradient_inf) {
    control_->gradient_not_finite(epoch, result.end, s_.optimizer->steps(), result.gradient_nan);
  }
  if (result.end < steps_per_epoch_) return false;
  s_.position = {epoch + 1, 0};
  return true;
}

void FitRun::after_steps(std::size_t epoch, bool epoch_done) {
  if (checkpoints_.due_after_steps(s_.optimizer->steps(), epoch, epoch_done)) save();
}

void FitRun::end_epoch(std::size_t epoch) {
  Logs logs = epoch_sums_.logs();
  bar_.end_training();
  const bool validate = options_.validation_frequency > 0 && (epoch + 1) % options_.validation_frequency == 0;
  if (validate && train_.sequences && options_.sequence_validation) {
    const auto val = trainer_.evaluate(options_.sequence_validation, options_.validation_batch);
    logs["val_loss"] = val.at("loss");
    logs["val_accuracy"] = val.at("accuracy");
  } else if (validate && train_.images && options_.validation) {
    const auto val = trainer_.evaluate(options_.validation, options_.validation_batch, options_.validation_transform,
                                       options_.distribute_validation_dataset);
    for (const auto& [key, value] : val) {
      if (key != "count") logs["val_" + key] = value;
    }
  }
  bar_.finish(ordered(logs));
  history_.epochs.push_back(logs);
  last_logs_ = logs;
  control_->set_logs(logs);
  fail_point("callback", s_.comm().rank());
  for (auto* cb : callbacks_) cb->on_epoch_end(epoch, logs);
  agree();  // a stop asked for in on_epoch_end ends training before the next epoch begins
  if (checkpoints_.due_after_epoch(epoch)) save();
}

void FitRun::finish() {
  // Stopped mid-epoch (max_steps, or a checkpoint boundary at the very end): close the bar.
  if (s_.position.step > 0 && steps_done_ > 0) bar_.finish(ordered(epoch_sums_.logs()));
  feed_->stop();
  // The run's last state is on disk whenever checkpoints were asked for.
  if (checkpoints_.due_at_end(s_.optimizer->steps())) save();
  history_.seconds = std::chrono::duration<double>(Clock::now() - train_start_).count();
  history_.samples_per_second = history_.seconds > 0 ? static_cast<double>(samples_) / history_.seconds : 0.0;
  if (train_.sequences && history_.seconds > 0) {
    history_.target_tokens_per_second = control_->samples_trained() / history_.seconds;
  }
  for (auto* cb : callbacks_) cb->on_train_end(last_logs_);
  if (environment_.output && history_.steps > 0 && !environment_.skip_gradient_allreduce) {
    spdlog::info("gradient allreduce: {} bytes per optimizer step on each rank ({})", gradient_bytes_ / history_.steps,
                 options_.bitwise                                             ? "exact: 3 int64 limbs per value"
                 : options_.gradient_compression == GradientCompression::bf16 ? "bf16"
                                                                              : "fp32");
  }
  if (timeline_.enabled()) write_timeline(timeline_, s_.comm(), options_.timeline_path, base_us_);
}

StepDecision FitRun::on_step(const StepFigures& f) {
  const StepDecision decision = control_->on_step(f);
  epoch_sums_.add(f);
  if (++steps_done_ == 2) fail_point("step", s_.comm().rank());
  FigureSums step;
  step.add(f);
  const Logs step_logs = step.logs();
  if (environment_.output && options_.print_steps) {
    std::string figures;
    for (const auto& [key, value] : ordered(step_logs)) figures += fmt::format(" {} {:.6g}", key, value);
    fmt::print("epoch {} step {}{}\n", f.epoch + 1, f.step + 1, figures);
    std::fflush(stdout);
  }
  bar_.update(f.step + 1, ordered(epoch_sums_.logs()));
  control_->set_logs(step_logs);
  for (auto* cb : callbacks_) cb->on_batch_end(f.epoch, f.step, step_logs);
  return decision;
}

void FitRun::save() {
  trainer_.save_checkpoint(checkpoints_.path());
  checkpoints_.saved(s_.optimizer->steps());
}

std::vector<std::vector<std::size_t>> planned_global_batches(std::shared_ptr<const data::SequenceSource> train,
                                                             const FitOptions& options) {
  data::SequenceLoaderOptions o;
  o.plan = make_plan_options(train->size(), options, 0, 1);
  o.bucket_batches = options.bucket_batches;
  o.end_epoch = options.epochs;
  data::SequenceLoader loader(std::move(train), o);
  std::vector<std::vector<std::size_t>> batches;
  while (options.max_steps == 0 || batches.size() < options.max_steps) {
    auto batch = loader.next();
    if (!batch) break;
    batches.push_back(std::move(batch->indices));
  }
  return batches;
}

}  // namespace tnt::trainer
