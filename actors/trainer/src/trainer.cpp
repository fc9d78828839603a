#include "tnt/trainer/trainer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "compute_thread.h"
#include "engine.h"
#include "progress.h"
#include "timeline.h"
#include "tnt/collectives/communicator.h"
#include "tnt/compute/checkpoint.h"
#include "tnt/compute/loss.h"
#include "tnt/compute/runtime.h"
#include "tnt/core/error.h"
#include "tnt/core/log.h"
#include "tnt/core/settings.h"
#include "tnt/dataset/batch_plan.h"
#include "tnt/dataset/loader.h"

namespace tnt::trainer {

// --- Session -------------------------------------------------------------------------------------

Session::Session(SessionOptions options) : threads_(options.threads) {
  if (options.threads < 1) {
    throw ConfigError("threads must be at least 1, got " + std::to_string(options.threads));
  }
  const auto env = JobEnvironment::from_env();
  init_logging(env.rank, env.size);
  CommunicatorOptions co;
  co.configuration = std::move(options.configuration);
  co.environment = env;
  communicator_ = std::make_unique<Communicator>(std::move(co));
  compute::set_num_threads(threads_);
}

Session::~Session() = default;
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

// --- Trainer state -------------------------------------------------------------------------------

struct Trainer::State {
  Session& session;
  compute::Model model;
  CompileOptions compile;
  std::unique_ptr<compute::Optimizer> optimizer;
  std::unique_ptr<compute::LearningRateSchedule> schedule;
  // Data position and order, written into checkpoints.
  data::LoaderPosition position;
  uint64_t fingerprint = 0;
  bool has_fingerprint = false;

  ComputeThread compute;  // Note in compute_thread.h: every forward/backward runs here

  State(Session& s, compute::ModelSpec spec) : session(s), model(std::move(spec)) {
    compute.run([threads = s.threads()] { compute::set_num_threads(threads); });
  }
  Communicator& comm() { return session.communicator(); }
  bool master() const { return session.is_master_rank(); }
};

namespace {

constexpr const char* kFingerprintKey = "trainer.data_fingerprint";

std::size_t fusion_threshold(std::size_t requested) {
  return requested > 0 ? requested : settings::kFusionThresholdKb.read();
}

// Root's weights, BatchNorm statistics and pass counter reach every rank.
void broadcast_model(compute::Model& model, Communicator& comm) {
  for (std::size_t i = 0; i < model.parameter_count(); ++i) {
    comm.broadcast(model.weights(i), static_cast<std::size_t>(model.parameter(i).size) * sizeof(float), 0);
  }
  for (std::size_t i = 0; i < model.state_count(); ++i) {
    comm.broadcast(model.state_data(i), static_cast<std::size_t>(model.state(i).size) * sizeof(float), 0);
  }
  uint64_t passes = model.training_passes();
  comm.broadcast(&passes, sizeof passes, 0);
  model.set_training_passes(passes);
}

// The master reads the file and every rank gets its bytes, so ranks on hosts without a shared
// file system resume from the master's checkpoint. A read error on the master fails every rank.
compute::Checkpoint load_checkpoint_everywhere(const std::string& path, Communicator& comm) {
  std::vector<char> bytes;
  std::string error;
  if (comm.is_master_rank()) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      error = fmt::format("cannot open checkpoint '{}': {}", path, std::strerror(errno));
    } else {
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
  }
  int64_t size = error.empty() ? static_cast<int64_t>(bytes.size()) : -1;
  comm.broadcast(&size, sizeof size, 0);
  if (size < 0) {
    throw DataError(comm.is_master_rank() ? error
                                          : fmt::format("the master rank could not read checkpoint '{}'", path));
  }
  bytes.resize(static_cast<std::size_t>(size));
  if (size > 0) comm.broadcast(bytes.data(), bytes.size(), 0);
  if (comm.is_master_rank()) return compute::load_checkpoint(path);
  // Other ranks check and parse the same bytes through a private copy.
  char name[] = "/tmp/tnt-resume-XXXXXX";
  const int fd = mkstemp(name);
  if (fd < 0) throw Error(fmt::format("cannot create a temporary file: {}", std::strerror(errno)));
  const bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  ::close(fd);
  if (!ok) {
    std::filesystem::remove(name);
    throw Error(fmt::format("cannot write temporary file {}", name));
  }
  try {
    auto checkpoint = compute::load_checkpoint(name);
    std::filesystem::remove(name);
    return checkpoint;
  } catch (...) {
    std::filesystem::remove(name);
    throw;
  }
}

std::vector<std::pair<std::string, double>> ordered(const Logs& logs) {
  std::vector<std::pair<std::string, double>> out;
  for (const char* k : {"loss", "accuracy", "val_loss", "val_accuracy"}) {
    if (auto it = logs.find(k); it != logs.end()) out.emplace_back(k, it->second);
  }
  return out;
}

bool output_here(const Session& session) {
  if (session.is_master_rank()) return true;
  return settings::kOutputOnAllDevices.read();
}

}  // namespace

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
  if (options.loss != "sparse_categorical_crossentropy" && options.loss != "softmax_cross_entropy") {
    throw ConfigError(fmt::format("loss '{}' is not supported: use 'sparse_categorical_crossentropy'", options.loss));
  }
  for (const auto& m : options.metrics) {
    if (m != "accuracy") {
      throw ConfigError(fmt::format("metric '{}' is not supported: use 'accuracy'", m));
    }
  }
  auto schedule_options = options.schedule;
  if (options.scale_rate_with_ranks) schedule_options.scale *= state_->session.size();
  state_->schedule = std::make_unique<compute::LearningRateSchedule>(schedule_options);
  state_->optimizer = std::make_unique<compute::Optimizer>(options.optimizer, state_->model);
  state_->compile = options;
}

void Trainer::save_checkpoint(const std::string& path) {
  auto& s = *state_;
  if (!s.optimizer) throw LogicError("save_checkpoint: compile() first");
  if (!s.master()) return;
  auto checkpoint = compute::capture(s.model, s.optimizer.get(), compute::CheckpointKind::full);
  checkpoint.epoch = s.position.epoch;
  checkpoint.step = s.position.step;
  if (s.has_fingerprint) {
    checkpoint.extra.push_back({kFingerprintKey, std::bit_cast<int64_t>(s.fingerprint)});
  }
  compute::save_checkpoint(path, checkpoint);
  spdlog::info("checkpoint written to {} (epoch {}, step {}, optimizer step {})", path, s.position.epoch,
               s.position.step, s.optimizer->steps());
}

void Trainer::load_weights(const std::string& path) {
  auto& s = *state_;
  auto checkpoint = load_checkpoint_everywhere(path, s.comm());
  if (checkpoint.kind == compute::CheckpointKind::architecture) {
    throw ConfigError(fmt::format("checkpoint '{}' holds no weights (architecture only)", path));
  }
  compute::restore_weights(s.model, checkpoint);
  broadcast_model(s.model, s.comm());
}

History Trainer::fit(std::shared_ptr<const data::Source> train, const FitOptions& options) {
  auto& s = *state_;
  if (!s.optimizer) throw LogicError("fit: compile() first");
  if (!train) throw ConfigError("fit: no training data");
  auto& comm = s.comm();
  const int rank = comm.rank(), size = comm.size();
  const bool out = output_here(s.session);
  if (options.epochs == 0) throw ConfigError("epochs must be at least 1");

  data::BatchPlanOptions plan_options;
  plan_options.num_samples = train->size();
  plan_options.global_batch = options.global_batch;
  plan_options.micro_batch = options.micro_batch;
  plan_options.rank = rank;
  plan_options.world_size = size;
  plan_options.seed = options.seed;
  plan_options.shuffle = options.shuffle;
  plan_options.drop_remainder = options.drop_remainder;
  const data::BatchPlan plan(plan_options);
  const std::size_t steps_per_epoch = plan.steps_per_epoch();
  if (steps_per_epoch == 0) throw ConfigError("the training data gives no step per epoch");
  s.fingerprint = plan.fingerprint();
  s.has_fingerprint = true;
  if (has_batch_norm(s.model.spec()) && plan.max_local_batch() < 16) {
    spdlog::warn(
        "micro-batch of {} samples per rank in a model with BatchNorm: BatchNorm statistics "
        "are computed per rank and get noisy below 16 samples; use a larger global batch",
        plan.max_local_batch());
  }

  // Resume: weights, optimizer state and data position from the master's checkpoint.
  s.position = {0, 0};
  if (!options.resume_path.empty()) {
    auto checkpoint = load_checkpoint_everywhere(options.resume_path, comm);
    if (checkpoint.kind != compute::CheckpointKind::full) {
      throw ConfigError(
          fmt::format("checkpoint '{}' is not a full checkpoint: cannot resume training", options.resume_path));
    }
    compute::restore_weights(s.model, checkpoint);
    compute::restore_optimizer(*s.optimizer, checkpoint);
    if (const auto* entry = checkpoint.find(kFingerprintKey)) {
      const auto* saved = std::get_if<int64_t>(&entry->value);
      if (!saved || std::bit_cast<uint64_t>(*saved) != s.fingerprint) {
        throw ConfigError(
            fmt::format("checkpoint '{}' was written with another data order (data set size, batch size, seed "
                        "or shuffling differ): resuming would not continue the same run",
                        options.resume_path));
      }
    }
    s.position = {checkpoint.epoch, checkpoint.step};
    if (s.position.step >= steps_per_epoch) s.position = {s.position.epoch + 1, 0};
    spdlog::info("resuming from {} at epoch {}, step {} (optimizer step {})", options.resume_path, s.position.epoch + 1,
                 s.position.step, s.optimizer->steps());
  }
  broadcast_model(s.model, comm);

  BucketLayout layout = make_bucket_layout(s.model, fusion_threshold(options.fusion_threshold_bytes));
  bind_gradients(s.model, layout);
  struct Unbind {
    compute::Model& m;
    ~Unbind() { m.unbind_gradients(); }
  } unbind{s.model};
  spdlog::debug("{} gradient buckets over {} parameters ({} floats)", layout.buckets.size(), s.model.parameter_count(),
                layout.memory.size());

  Timeline timeline(!options.timeline_path.empty());
  int64_t base_us = now_us();
  comm.broadcast(&base_us, sizeof base_us, 0);

  History history;
  if (s.position.epoch >= options.epochs) {
    spdlog::info("nothing to do: the checkpoint is at epoch {} of {}", s.position.epoch, options.epochs);
    return history;
  }

  data::LoaderOptions loader_options;
  loader_options.plan = plan_options;
  loader_options.transform = options.transform;
  loader_options.start = s.position;
  loader_options.end_epoch = options.epochs;
  loader_options.prefetch = options.prefetch;
  data::Loader loader(train, loader_options);

  std::FILE* csv = nullptr;
  if (s.master() && !options.csv_path.empty()) {
    const bool fresh = !std::filesystem::exists(options.csv_path) || options.resume_path.empty();
    csv = std::fopen(options.csv_path.c_str(), fresh ? "w" : "a");
    if (!csv) throw Error(fmt::format("cannot open CSV file '{}': {}", options.csv_path, std::strerror(errno)));
    if (fresh)
      fmt::print(csv, "epoch,loss,accuracy,val_loss,val_accuracy,learning_rate,train_seconds,samples_per_second\n");
  }
  struct CloseFile {
    std::FILE*& f;
    ~CloseFile() {
      if (f) std::fclose(f);
    }
  } close_csv{csv};

  ProgressBar bar(stdout, out && options.progress_bar);
  // Epoch sums, written by the metrics actor during a segment and read here between segments.
  double epoch_loss = 0, epoch_correct = 0, epoch_count = 0;
  std::size_t steps_done = 0;
  EngineContext context;
  context.model = &s.model;
  context.optimizer = s.optimizer.get();
  context.schedule = s.schedule.get();
  context.communicator = &comm;
  context.loader = &loader;
  context.layout = &layout;
  context.timeline = &timeline;
  context.overlap = options.overlap;
  context.threads = s.session.threads();
  context.compute_executor = s.compute.executor();
  context.on_step_figures = [&](const StepFigures& f) {
    epoch_loss += f.loss_sum;
    epoch_correct += f.correct;
    epoch_count += f.count;
    ++steps_done;
    Logs step_logs{{"loss", f.count > 0 ? f.loss_sum / f.count : 0.0},
                   {"accuracy", f.count > 0 ? f.correct / f.count : 0.0}};
    if (out && options.print_steps) {
      fmt::print("epoch {} step {} loss {:.6g} accuracy {:.6g}\n", f.epoch + 1, f.step + 1, step_logs["loss"],
                 step_logs["accuracy"]);
      std::fflush(stdout);
    }
    bar.update(f.step + 1, ordered({{"loss", epoch_count > 0 ? epoch_loss / epoch_count : 0.0},
                                    {"accuracy", epoch_count > 0 ? epoch_correct / epoch_count : 0.0}}));
    for (auto* cb : options.callbacks) cb->on_batch_end(f.epoch, f.step, step_logs);
  };

  for (auto* cb : options.callbacks) cb->on_train_begin();
  const auto train_start = std::chrono::steady_clock::now();
  auto epoch_start = train_start;
  std::size_t samples = 0;
  uint64_t last_saved_step = ~uint64_t{0};
  auto save = [&] {
    if (options.checkpoint_path.empty()) return;
    save_checkpoint(options.checkpoint_path);
    last_saved_step = s.optimizer->steps();
  };
  auto step_limit_reached = [&] { return options.max_steps > 0 && s.optimizer->steps() >= options.max_steps; };
  Logs last_logs;

  while (s.position.epoch < options.epochs && !step_limit_reached()) {
    const std::size_t epoch = s.position.epoch;
    if (s.position.step == 0 || steps_done == 0) {
      if (s.position.step == 0) {
        for (auto* cb : options.callbacks) cb->on_epoch_begin(epoch);
      }
      epoch_loss = epoch_correct = epoch_count = 0;
      epoch_start = std::chrono::steady_clock::now();
      bar.begin_epoch(epoch, options.epochs, steps_per_epoch, s.position.step);
    }
    std::size_t end = steps_per_epoch;
    const uint64_t global_step = s.optimizer->steps();
    if (options.checkpoint_every_steps > 0) {
      end = std::min<std::size_t>(
          end, s.position.step + options.checkpoint_every_steps - global_step % options.checkpoint_every_steps);
    }
    if (options.max_steps > 0) {
      end = std::min<std::size_t>(end, s.position.step + (options.max_steps - global_step));
    }
    for (std::size_t k = s.position.step; k < end; ++k) samples += plan.global_count(k);
    run_segment(context, epoch, s.position.step, end);
    history.steps += end - s.position.step;
    s.position.step = end;
    const bool epoch_done = end == steps_per_epoch;
    if (epoch_done) s.position = {epoch + 1, 0};

    if (options.checkpoint_every_steps > 0 && s.optimizer->steps() % options.checkpoint_every_steps == 0 &&
        !(epoch_done && options.checkpoint_every_epochs > 0 && (epoch + 1) % options.checkpoint_every_epochs == 0)) {
      save();
    }
    if (!epoch_done) continue;

    Logs logs{{"loss", epoch_count > 0 ? epoch_loss / epoch_count : 0.0},
              {"accuracy", epoch_count > 0 ? epoch_correct / epoch_count : 0.0}};
    // Training time only: validation below is not part of the epoch's throughput.
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
    bar.end_training();
    if (options.validation && options.validation_frequency > 0 && (epoch + 1) % options.validation_frequency == 0) {
      const auto val = evaluate(options.validation, options.validation_batch, options.validation_transform);
      logs["val_loss"] = val.at("loss");
      logs["val_accuracy"] = val.at("accuracy");
    }
    bar.finish(ordered(logs));
    const double rate = s.schedule->rate(s.optimizer->steps());
    const double epoch_samples = epoch_count;
    if (csv) {
      auto field = [&](const char* k) {
        auto it = logs.find(k);
        return it == logs.end() ? std::string() : fmt::format("{:.6f}", it->second);
      };
      fmt::print(csv, "{},{},{},{},{},{:.6g},{:.3f},{:.1f}\n", epoch + 1, field("loss"), field("accuracy"),
                 field("val_loss"), field("val_accuracy"), rate, seconds, seconds > 0 ? epoch_samples / seconds : 0.0);
      std::fflush(csv);
    }
    history.epochs.push_back(logs);
    last_logs = logs;
    for (auto* cb : options.callbacks) cb->on_epoch_end(epoch, logs);
    if (options.checkpoint_every_epochs > 0 && (epoch + 1) % options.checkpoint_every_epochs == 0) save();
  }
  if (s.position.step > 0 && steps_done > 0) {
    // Stopped mid-epoch (max_steps, or a checkpoint boundary at the very end): close the bar.
    bar.finish(ordered({{"loss", epoch_count > 0 ? epoch_loss / epoch_count : 0.0},
                        {"accuracy", epoch_count > 0 ? epoch_correct / epoch_count : 0.0}}));
  }
  loader.stop();
  // The run's last state is on disk whenever checkpoints were asked for.
  if (!options.checkpoint_path.empty() && last_saved_step != s.optimizer->steps()) save();

  history.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - train_start).count();
  history.samples_per_second = history.seconds > 0 ? static_cast<double>(samples) / history.seconds : 0.0;
  for (auto* cb : options.callbacks) cb->on_train_end(last_logs);

  if (timeline.enabled()) {
    // Every rank's events reach the master, which writes one file (one process per rank).
    std::string mine = timeline.events_json(rank, base_us);
    uint64_t length = mine.size();
    std::vector<uint64_t> lengths(static_cast<std::size_t>(size));
    comm.allgather(&length, lengths.data(), sizeof length);
    const uint64_t longest = *std::max_element(lengths.begin(), lengths.end());
    mine.resize(longest, ' ');
    std::string all(longest * static_cast<std::size_t>(size), ' ');
    comm.allgather(mine.data(), all.data(), longest);
    if (s.master()) {
      std::ofstream file(options.timeline_path, std::ios::trunc);
      file << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
      for (int r = 0; r < size; ++r) {
        if (r) file << ",";
        file << all.substr(static_cast<std::size_t>(r) * longest, lengths[static_cast<std::size_t>(r)]);
      }
      file << "]}\n";
      if (!file) throw Error(fmt::format("cannot write timeline '{}'", options.timeline_path));
      spdlog::info("timeline written to {}", options.timeline_path);
    }
  }
  return history;
}

Logs Trainer::evaluate(std::shared_ptr<const data::Source> source, std::size_t global_batch,
                       const data::TransformOptions& transform) {
  auto& s = *state_;
  auto& comm = s.comm();
  if (!source) throw ConfigError("evaluate: no data");
  data::LoaderOptions lo;
  lo.plan.num_samples = source->size();
  lo.plan.global_batch = std::max<std::size_t>(global_batch, static_cast<std::size_t>(comm.size()));
  lo.plan.rank = comm.rank();
  lo.plan.world_size = comm.size();
  lo.plan.shuffle = false;
  lo.transform = transform;
  lo.end_epoch = 1;
  lo.prefetch = 0;
  data::Loader loader(source, lo);
  compute::SoftmaxCrossEntropy loss;
  compute::Tensor input;
  std::array<double, 3> sums{0, 0, 0};
  s.compute.run([&] {
    while (auto batch = loader.next()) {
      if (batch->local_count == 0) continue;
      const auto& sh = batch->shape;
      input.resize({static_cast<int64_t>(batch->local_count), static_cast<int64_t>(sh.channels),
                    static_cast<int64_t>(sh.height), static_cast<int64_t>(sh.width)});
      std::memcpy(input.data(), batch->data.data(), batch->data.size() * sizeof(float));
      const auto r = loss.forward(s.model.forward(input, compute::Mode::inference), batch->labels);
      sums[0] += r.sum;
      sums[1] += static_cast<double>(r.correct);
      sums[2] += static_cast<double>(r.count);
    }
  });
  comm.allreduce(std::span<double>(sums), ReduceOp::sum);
  return {{"loss", sums[2] > 0 ? sums[0] / sums[2] : 0.0},
          {"accuracy", sums[2] > 0 ? sums[1] / sums[2] : 0.0},
          {"count", sums[2]}};
}

compute::Tensor Trainer::predict(std::shared_ptr<const data::Source> source, std::size_t batch,
                                 const data::TransformOptions& transform) {
  auto& s = *state_;
  if (!source) throw ConfigError("predict: no data");
  if (batch == 0) throw ConfigError("predict: batch must be at least 1");
  data::LoaderOptions lo;
  lo.plan.num_samples = source->size();
  lo.plan.global_batch = batch;
  lo.plan.shuffle = false;
  lo.transform = transform;
  lo.end_epoch = 1;
  lo.prefetch = 0;
  data::Loader loader(source, lo);
  const auto classes = compute::element_count(s.model.output_shape());
  compute::Tensor result(compute::Shape{static_cast<int64_t>(source->size()), classes});
  compute::SoftmaxCrossEntropy softmax;
  compute::Tensor input;
  std::size_t row = 0;
  s.compute.run([&] {
    while (auto b = loader.next()) {
      const auto& sh = b->shape;
      input.resize({static_cast<int64_t>(b->local_count), static_cast<int64_t>(sh.channels),
                    static_cast<int64_t>(sh.height), static_cast<int64_t>(sh.width)});
      std::memcpy(input.data(), b->data.data(), b->data.size() * sizeof(float));
      softmax.forward(s.model.forward(input, compute::Mode::inference), b->labels);
      const auto& p = softmax.probabilities();
      std::memcpy(result.data() + row * static_cast<std::size_t>(classes), p.data(),
                  static_cast<std::size_t>(p.size()) * sizeof(float));
      row += b->local_count;
    }
  });
  return result;
}

}  // namespace tnt::trainer
