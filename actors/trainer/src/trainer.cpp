#include "tnt/trainer/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <functional>
#include <stdexcept>

#include "fit.h"
#include "fit_parts.h"
#include "tnt/collectives/communicator.h"
#include "tnt/compute/checkpoint.h"
#include "tnt/compute/loss.h"
#include "tnt/compute/model.h"
#include "tnt/compute/runtime.h"
#include "tnt/core/error.h"
#include "tnt/core/fail_point.h"
#include "tnt/core/log.h"
#include "tnt/core/machine.h"
#include "tnt/core/settings.h"
#include "tnt/dataset/batch_plan.h"
#include "tnt/dataset/loader.h"
#include "trainer_io.h"
#include "trainer_state.h"

namespace tnt::trainer {

// --- Session -------------------------------------------------------------------------------------

// Note [Threads follow the cores]: with threads = 0 (the default of tnt-train, SessionOptions
// and tnt.init) a rank runs one compute thread per core of its affinity mask, which is where
// tnt-launch's core blocks (Note [Default binding] in launcher/src/local_ranks.cpp),
// --pin-to-socket, srun's or mpirun's binding and taskset put it. Ranks of one host that were
// not bound apart all have the same mask: their masks together then hold more cores than the
// host has (TNT_HOST_CORES where tnt-launch says, else the CPUs online), and each takes its
// share, the mask's cores divided by the ranks on the host (at least 1). A user on a 48-core node
// who forgets --threads used to get 1/48 of it (issue 26). Measured on this 2-core machine on
// 2026-11-28 03:26-03:30 UTC, while other sessions built on it (load average 4 to 6), with
// bench/trainer/threads_compare.sh (--parts ab --rounds 5, then --parts cd --model-rounds 3),
// samples/s, medians of alternating rounds:
//   main job, 1 rank:  defaults 39,923 (2 threads), --threads 1 26,666, --threads 2 41,330: 0.966
//                      of the best (the same setting as the default: the gap is a 10,101 round)
//   main job, 2 ranks: defaults 43,504 (1 thread each), --threads 1 43,535, --threads 2 4,502
//                      (4 threads on 2 cores): 0.999 of the best
//   1 rank x 2 threads against 2 ranks x 1 thread: LeNet-5 37,389 / 44,690, ResNet-20 574 / 991,
//   Transformer 5,234 / 5,985 sentence pairs/s
// so the default is within 5 % of the best at both rank counts, and the rule is ranks first,
// threads for the cores a rank is left with. More: actors/trainer/README.md, "Threads per rank".
AutomaticThreads automatic_threads(int local_size) {
  AutomaticThreads a;
  a.mask_cores = available_cores();
  a.host_cores = settings::is_set(settings::kHostCores.name)
                     ? host_cores()
                     : std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  a.ranks_here = std::max(1, local_size);
  a.shared = a.ranks_here > 1 && a.mask_cores * a.ranks_here > a.host_cores;
  a.threads = a.shared ? std::max(1, a.mask_cores / a.ranks_here) : a.mask_cores;
  return a;
}

std::string AutomaticThreads::describe() const {
  if (shared) {
    return fmt::format(
        "{} compute thread(s) per rank: {} rank(s) on this host share the {} core(s) of their affinity "
        "mask (--threads overrides)",
        threads, ranks_here, mask_cores);
  }
  return fmt::format(
      "{} compute thread(s) per rank: the core(s) of the rank's affinity mask ({} rank(s) on this host, "
      "{} core(s); --threads overrides)",
      threads, ranks_here, host_cores);
}

Session::Session(SessionOptions options) : threads_(options.threads) {
  if (options.threads < 0) {
    throw ConfigError("threads must be at least 1, or 0 for one per core, got " + std::to_string(options.threads));
  }
  const auto env = JobEnvironment::from_env();
  init_logging(env.rank, env.size);
  if (threads_ == 0) {
    const auto automatic = automatic_threads(env.local_size);
    threads_ = automatic.threads;
    if (env.local_rank == 0) spdlog::info("{}", automatic.describe());  // once per host
  }
  const int cores = host_cores();
  CommunicatorOptions co;
  co.configuration = std::move(options.configuration);
  co.environment = env;
  co.exit_after_failure = options.exit_after_failure;
  // Note [Waits beside compute]: the gradients' allreduce runs while backprop computes (the
  // CommActor waits on the host board: Note [Buckets on the host board] in engine.cpp). Where the
  // compute threads fill every core this rank may use, a waiting thread that polls takes its
  // core from them, so it yields and sleeps instead. Measured on 2026-11-26 with bench_trainer.py
  // (LeNet-5, 2 ranks x 1 thread, batch 64, 5 alternating rounds of each, samples/s): this rule
  // with tnt-launch's default binding (Note [Default binding] in launcher/src/local_ranks.cpp)
  // 25306 / 26327 / 24942 / 20487 / 26154, the old setting (unbound, polling up to 500 us)
  // 21614 / 23239 / 26567 / 22575 / 21060: medians 25.3k and 22.6k. TNT_WAIT_POLL_US overrides.
  if (!settings::is_set(settings::kWaitPollUs.name) &&
      (threads_ >= available_cores() || env.local_size * threads_ >= cores)) {
    co.poll_before_sleep = std::chrono::microseconds(0);
  }
  communicator_ = std::make_unique<Communicator>(std::move(co));
  compute::set_num_threads(threads_);
  if (env.rank == 0 && env.local_size * threads_ > cores) {
    spdlog::warn(
        "{} rank(s) x {} compute thread(s) on this host share {} core(s): the threads take turns, so a "
        "step is slower than with fewer ranks or threads (--threads)",
        env.local_size, threads_, cores);
  } else if (threads_ > available_cores()) {
    spdlog::warn("rank {}: {} compute threads on the {} core(s) it is bound to take turns (--threads)", env.rank,
                 threads_, available_cores());
  }
}

Session::~Session() = default;

GradientCompression parse_gradient_compression(const std::string& text, const std::string& what) {
  if (text == "none") return GradientCompression::none;
  if (text == "bf16") return GradientCompression::bf16;
  throw ConfigError(fmt::format("{} '{}': expected none or bf16", what, text));
}
int Session::rank() const { return communicator_->rank(); }
int Session::size() const { return communicator_->size(); }

bool has_batch_norm(const compute::ModelSpec& spec) {
  std::function<bool(const std::vector<compute::LayerSpec>&)> any = [&](const std::vector<compute::LayerSpec>& layers) {
    for (const auto& l : layers) {
      if (l.type == "batch_norm") return true;
      for (const auto& branch : l.branches)
        if (any(branch)) return true;
    }
    return false;
  };
  return any(spec.layers);
}

namespace {

std::size_t fusion_threshold(std::size_t requested) {
  return requested > 0 ? requested : settings::kFusionThresholdKb.read();
}

// The model's embeddings must hold every token of the data's vocabulary.
void check_vocabulary(const compute::ModelSpec& spec, const data::Vocabulary& vocabulary) {
  if (!spec.is_sequence_to_sequence()) {
    throw ConfigError("model '" + spec.name + "' is not an encoder-decoder: it cannot take sentence pairs");
  }
  for (const auto* side : {&spec.layers, &spec.decoder}) {
    const auto& first = side->front();
    const auto it = first.options.find("vocab");
    const auto* vocab = it == first.options.end() ? nullptr : std::get_if<int64_t>(&it->second);
    if (vocab != nullptr && *vocab < static_cast<int64_t>(vocabulary.size())) {
      throw ConfigError(fmt::format("model '{}' embeds {} tokens, but the data's vocabulary has {}: set vocab = {}",
                                    spec.name, *vocab, vocabulary.size(), vocabulary.size()));
    }
  }
}

// Sources end in </s> and targets start with <s>: one token more than the longest text each.
void check_lengths(const compute::ModelSpec& spec, const data::SequenceSource& pairs) {
  const auto source = static_cast<int64_t>(pairs.max_source_tokens()) + 1;
  const auto target = static_cast<int64_t>(pairs.max_target_tokens()) + 1;
  if (source > spec.input[0] || target > spec.decoder_input[0]) {
    throw ConfigError(fmt::format("{}: sequences of up to {} source and {} target tokens; model '{}' takes {} and {}",
                                  pairs.describe(), source, target, spec.name, spec.input[0], spec.decoder_input[0]));
  }
}

bool output_here(const Session& session) {
  if (session.is_master_rank()) return true;
  return settings::kOutputOnAllDevices.read();
}

}  // namespace

RunControl& Callback::run() const {
  if (!run_) throw LogicError("Callback::run(): a callback reaches its run only while fit runs it");
  return *run_;
}

// --- Trainer -------------------------------------------------------------------------------------

Trainer::Trainer(Session& session, compute::ModelSpec spec)
    : state_(std::make_unique<State>(session, std::move(spec))) {
  state_->model.initialize(0);
}

Trainer::~Trainer() = default;
compute::Model& Trainer::model() { return state_->model; }
Session& Trainer::session() { return state_->session; }

void Trainer::initialize(uint64_t seed) { state_->model.initialize(seed); }

void Trainer::compile(const CompileOptions& options) {
  auto objective = std::make_unique<Objective>(options, compute::element_count(state_->model.output_shape()));
  auto schedule_options = options.schedule;
  if (options.scale_rate_with_ranks) schedule_options.scale *= state_->session.size();
  state_->schedule = std::make_unique<compute::LearningRateSchedule>(schedule_options);
  state_->optimizer = std::make_unique<compute::Optimizer>(options.optimizer, state_->model);
  state_->compile = options;
  state_->objective = std::move(objective);
}

void Trainer::save_checkpoint(const std::string& path) {
  auto& s = *state_;
  if (!s.optimizer) throw LogicError("save_checkpoint: compile() first");
  fail_point("checkpoint_write", s.session.rank());
  // Sharded: every rank sends its part of the optimizer state to the master, which writes the
  // whole state, as an unsharded run would (Note [Optimizer-state sharding]).
  std::optional<compute::OptimizerState> whole;
  if (s.optimizer_shard) whole = s.optimizer_shard->gather_state();
  if (!s.master()) return;
  auto checkpoint = compute::capture(s.model, s.optimizer.get(), compute::CheckpointKind::full);
  if (whole) checkpoint.optimizer_state = std::move(*whole);
  checkpoint.epoch = s.position.epoch;
  checkpoint.step = s.position.step;
  if (s.has_fingerprint) {
    checkpoint.extra.push_back({kFingerprintKey, std::bit_cast<int64_t>(s.fingerprint)});
  }
  checkpoint.extra.push_back({kRateFactorKey, std::bit_cast<int64_t>(s.rate_factor)});
  checkpoint.callback_states = capture_callback_states(s.fitting_callbacks);
  compute::save_checkpoint(path, checkpoint);
  spdlog::info("checkpoint written to {} (epoch {}, step {}, optimizer step {})", path, s.position.epoch,
               s.position.step, s.optimizer->steps());
}

void Trainer::check_data(const data::Source& source, const std::string& role) const {
  const auto& model = state_->model;
  const auto& spec = model.spec();
  const auto shape = source.shape();
  const compute::Shape sample{static_cast<int64_t>(shape.channels), static_cast<int64_t>(shape.height),
                              static_cast<int64_t>(shape.width)};
  const auto dims = [](const compute::Shape& s) { return fmt::format("{}", fmt::join(s, "x")); };
  if (spec.input != sample) {
    throw ConfigError(fmt::format("{} has samples of {} (C x H x W), but model '{}' takes {}: {}{}", role, dims(sample),
                                  spec.name, dims(spec.input), source.describe(),
                                  compute::channels_last_hint(sample, spec.input)));
  }
  const auto outputs = compute::element_count(model.output_shape());
  const bool labels_index_outputs = !state_->objective || state_->objective->labels_index_outputs();
  if (labels_index_outputs && source.num_classes() > outputs) {
    throw ConfigError(fmt::format("{} has {} classes, but model '{}' has {} outputs: {}", role, source.num_classes(),
                                  spec.name, outputs, source.describe()));
  }
}

void Trainer::load_weights(const std::string& path) {
  auto& s = *state_;
  auto checkpoint = load_checkpoint_everywhere(path, s.comm());
  if (checkpoint.kind == compute::CheckpointKind::architecture) {
    throw ConfigError(fmt::format("checkpoint '{}' holds no weights (architecture only)", path));
  }
  try {
    compute::restore_weights(s.model, checkpoint);
  } catch (const ConfigError& e) {
    throw ConfigError(
        fmt::format("weights file '{}' does not fit model '{}': {}", path, s.model.spec().name, e.what()));
  }
  broadcast_model(s.model, s.comm());
}

History Trainer::fit(std::shared_ptr<const data::Source> train, const FitOptions& options) {
  if (!state_->optimizer) throw LogicError("fit: compile() first");
  if (!train) throw ConfigError("fit: no training data");
  if (state_->model.spec().is_sequence_to_sequence()) {
    throw ConfigError("fit: model '" + state_->model.spec().name +
                      "' is an encoder-decoder: train it on sentence pairs");
  }
  return fit_data({std::move(train), nullptr}, options);
}

History Trainer::fit(std::shared_ptr<const data::SequenceSource> train, const FitOptions& options) {
  if (!state_->optimizer) throw LogicError("fit: compile() first");
  if (!train) throw ConfigError("fit: no training data");
  check_vocabulary(state_->model.spec(), train->vocabulary());
  check_lengths(state_->model.spec(), *train);
  if (options.sequence_validation) check_lengths(state_->model.spec(), *options.sequence_validation);
  return fit_data({nullptr, std::move(train)}, options);
}

History Trainer::fit_data(FitData train, const FitOptions& options) {
  auto& s = *state_;
  if (!s.optimizer) throw LogicError("fit: compile() first");
  FitEnvironment environment;
  environment.fusion_threshold_bytes = fusion_threshold(options.fusion_threshold_bytes);
  environment.output = output_here(s.session);
  environment.skip_gradient_allreduce = settings::kBenchSkipGradientAllreduce.read();
  if (environment.skip_gradient_allreduce) {
    spdlog::warn(
        "{} is set: the gradient allreduce is skipped, every rank steps with its own share of the gradient and the "
        "ranks' weights diverge; the trained model is meaningless (benchmarks only)",
        settings::kBenchSkipGradientAllreduce.name);
  }
  if (train.images) agree_on_distribution(s, *train.images, options);
  FitRun run(*this, s, std::move(train), options, environment);
  return run.run();
}

Logs Trainer::evaluate(std::shared_ptr<const data::SequenceSource> source, std::size_t global_batch) {
  auto& s = *state_;
  auto& comm = s.comm();
  fail_point("evaluate", comm.rank());
  if (!source) throw ConfigError("evaluate: no data");
  check_vocabulary(s.model.spec(), source->vocabulary());
  check_lengths(s.model.spec(), *source);
  data::SequenceLoaderOptions lo;
  lo.plan.global_batch = std::max<std::size_t>(global_batch, static_cast<std::size_t>(comm.size()));
  lo.plan.rank = comm.rank();
  lo.plan.world_size = comm.size();
  lo.plan.shuffle = false;
  lo.end_epoch = 1;
  data::SequenceLoader loader(source, lo);
  compute::SequenceSoftmaxCrossEntropy loss;
  compute::Tensor input, target;
  std::array<double, 3> sums{0, 0, 0};
  auto to_tensor = [](const std::vector<int32_t>& ids, std::size_t rows, std::size_t length, compute::Tensor& out) {
    out.resize({static_cast<int64_t>(rows), static_cast<int64_t>(length)});
    for (std::size_t i = 0; i < ids.size(); ++i) out[static_cast<int64_t>(i)] = static_cast<float>(ids[i]);
  };
  s.compute.run([&] {
    while (auto b = loader.next()) {
      if (b->local_count == 0) continue;
      to_tensor(b->source, b->local_count, b->source_length, input);
      to_tensor(b->target_input, b->local_count, b->target_length, target);
      const compute::BatchInfo where{0, static_cast<int64_t>(b->global_offset), b->source_lengths, b->target_lengths};
      const auto r = loss.forward(s.model.forward(input, target, compute::Mode::inference, where), b->target_labels);
      sums[0] += r.sum;
      sums[1] += static_cast<double>(r.correct);
      sums[2] += static_cast<double>(r.count);
    }
  });
  comm.allreduce(std::span<double>(sums), ReduceOp::sum);
  return {{"loss", mean_or_zero(sums[0], sums[2])}, {"accuracy", mean_or_zero(sums[1], sums[2])}, {"count", sums[2]}};
}

std::vector<std::string> Trainer::translate(const std::vector<std::string>& texts, const data::Vocabulary& vocabulary,
                                            compute::DecodeOptions options) {
  auto& s = *state_;
  check_vocabulary(s.model.spec(), vocabulary);
  options.pad = data::Vocabulary::pad;
  options.bos = data::Vocabulary::bos;
  options.eos = data::Vocabulary::eos;
  const int64_t longest = s.model.spec().input[0];
  std::vector<std::vector<int32_t>> sources;
  for (const auto& text : texts) {
    auto ids = vocabulary.encode(text);
    ids.push_back(data::Vocabulary::eos);
    if (static_cast<int64_t>(ids.size()) > longest) {
      throw ConfigError(fmt::format("translate: '{}' is {} tokens with </s>; the model takes at most {}",
                                    quote_cut(text), ids.size(), longest));
    }
    sources.push_back(std::move(ids));
  }
  std::vector<std::vector<int32_t>> decoded;
  s.compute.run([&] { decoded = compute::decode(s.model, sources, options); });
  std::vector<std::string> out;
  for (const auto& ids : decoded) out.push_back(vocabulary.decode(ids));
  return out;
}

Logs Trainer::evaluate(std::shared_ptr<const data::Source> source, std::size_t global_batch,
                       const data::TransformOptions& transform, bool distribute) {
  auto& s = *state_;
  auto& comm = s.comm();
  fail_point("evaluate", comm.rank());
  if (!source) throw ConfigError("evaluate: no data");
  if (global_batch == 0) throw ConfigError("evaluate: the batch must be at least 1");
  check_data(*source, "the data to evaluate");
  data::BatchPlanOptions plan;
  plan.rank = comm.rank();
  plan.world_size = comm.size();
  plan.distribute = distribute;
  // Without distribution each rank walks its own source alone, in batches of `global_batch`.
  if (distribute) {
    plan.global_batch = std::max<std::size_t>(global_batch, static_cast<std::size_t>(comm.size()));
  } else {
    plan.micro_batch = global_batch;
  }
  Objective objective = objective_of(s);
  std::vector<double> sums(objective.figure_count(), 0.0), figures(sums.size());
  run_inference(s, source, plan, transform, [&](const compute::Tensor& output, const data::MicroBatch& batch) {
    objective.forward(output, batch.labels, figures);
    for (std::size_t i = 0; i < sums.size(); ++i) sums[i] += figures[i];
  });
  comm.allreduce(std::span<double>(sums), ReduceOp::sum);
  Logs logs = logs_from_figures(sums, *objective.metric_names());
  logs["count"] = sums[1];
  return logs;
}

}  // namespace tnt::trainer
