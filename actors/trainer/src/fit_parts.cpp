#include "fit_parts.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <tuple>

#include "tnt/collectives/communicator.h"
#include "tnt/core/error.h"
#include "tnt/core/fail_point.h"
#include "trainer_state.h"

namespace tnt::trainer {

double mean_or_zero(double sum, double count) { return count > 0 ? sum / count : 0.0; }

void FigureSums::add(const StepFigures& figures) {
  if (sums.empty()) {
    sums.assign(figures.sums.size(), 0.0);
    metric_names = figures.metric_names;
  }
  if (figures.sums.size() != sums.size()) throw LogicError("step figures of different lengths in one epoch");
  for (std::size_t i = 0; i < sums.size(); ++i) sums[i] += figures.sums[i];
  if (sums.size() >= 2) count = sums[1];
}

Logs FigureSums::logs() const {
  static const std::vector<std::string> none;
  return logs_from_figures(sums, metric_names ? *metric_names : none);
}

std::vector<std::pair<std::string, double>> ordered(const Logs& logs) {
  // loss, the metrics (accuracy first), val_loss, the validation metrics.
  const auto rank = [](const std::string& k) {
    const bool val = k.starts_with("val_");
    const std::string_view base = val ? std::string_view(k).substr(4) : std::string_view(k);
    return std::tuple(val ? 1 : 0, base == "loss" ? 0 : base == "accuracy" ? 1 : 2, k);
  };
  std::vector<std::pair<std::string, double>> out(logs.begin(), logs.end());
  std::sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return rank(a.first) < rank(b.first); });
  return out;
}

// --- checkpoint policy ---------------------------------------------------------------------------

CheckpointPolicy::CheckpointPolicy(const FitOptions& options)
    : path_(options.checkpoint_path),
      every_epochs_(options.checkpoint_every_epochs),
      every_steps_(options.checkpoint_every_steps) {}

std::size_t CheckpointPolicy::steps_to_next(uint64_t global_step) const {
  if (!enabled() || every_steps_ == 0) return std::numeric_limits<std::size_t>::max();
  return every_steps_ - global_step % every_steps_;
}

bool CheckpointPolicy::due_after_steps(uint64_t global_step, std::size_t epoch, bool epoch_done) const {
  if (!enabled() || every_steps_ == 0 || global_step % every_steps_ != 0) return false;
  return !(epoch_done && due_after_epoch(epoch));  // the epoch's checkpoint follows: write it once
}

bool CheckpointPolicy::due_after_epoch(std::size_t epoch) const {
  return enabled() && every_epochs_ > 0 && (epoch + 1) % every_epochs_ == 0;
}

bool CheckpointPolicy::due_at_end(uint64_t global_step) const { return enabled() && last_saved_ != global_step; }

// --- model and checkpoints across ranks ----------------------------------------------------------

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

compute::Checkpoint load_checkpoint_everywhere(const std::string& path, Communicator& comm) {
  fail_point("checkpoint_read", comm.rank());
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
  return compute::parse_checkpoint(std::as_bytes(std::span(bytes)), path);
}

data::LoaderPosition resume_from(const compute::Checkpoint& checkpoint, const std::string& path, compute::Model& model,
                                 compute::Optimizer& optimizer, uint64_t fingerprint, std::size_t steps_per_epoch) {
  if (checkpoint.kind != compute::CheckpointKind::full) {
    throw ConfigError(fmt::format("checkpoint '{}' is not a full checkpoint: cannot resume training", path));
  }
  compute::restore_weights(model, checkpoint);
  compute::restore_optimizer(optimizer, checkpoint);
  if (const auto* entry = checkpoint.find(kFingerprintKey)) {
    const auto* saved = std::get_if<int64_t>(&entry->value);
    if (!saved || std::bit_cast<uint64_t>(*saved) != fingerprint) {
      throw ConfigError(
          fmt::format("checkpoint '{}' was written with another data order (data set size, batch size, seed "
                      "or shuffling differ): resuming would not continue the same run",
                      path));
    }
  }
  data::LoaderPosition position{checkpoint.epoch, checkpoint.step};
  if (position.step >= steps_per_epoch) position = {position.epoch + 1, 0};
  spdlog::info("resuming from {} at epoch {}, step {} (optimizer step {})", path, position.epoch + 1, position.step,
               optimizer.steps());
  return position;
}

double saved_rate_factor(const compute::Checkpoint& checkpoint, const std::string& path) {
  const auto* entry = checkpoint.find(kRateFactorKey);
  if (!entry) return 1.0;
  const auto* bits = std::get_if<int64_t>(&entry->value);
  const double factor = bits ? std::bit_cast<double>(*bits) : 0.0;
  if (!std::isfinite(factor) || factor <= 0) {
    throw DataError(fmt::format("checkpoint '{}': entry {} is not a learning-rate factor > 0", path, kRateFactorKey));
  }
  return factor;
}

// --- timeline ------------------------------------------------------------------------------------

void write_timeline(const Timeline& timeline, Communicator& comm, const std::string& path, int64_t base_us) {
  const auto size = static_cast<std::size_t>(comm.size());
  std::string mine = timeline.events_json(comm.rank(), base_us);
  uint64_t length = mine.size();
  std::vector<uint64_t> lengths(size);
  comm.allgather(&length, lengths.data(), sizeof length);
  const uint64_t longest = *std::max_element(lengths.begin(), lengths.end());
  mine.resize(longest, ' ');
  std::string all(longest * size, ' ');
  comm.allgather(mine.data(), all.data(), longest);
  if (!comm.is_master_rank()) return;
  std::ofstream file(path, std::ios::trunc);
  file << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  for (std::size_t r = 0; r < size; ++r) {
    if (r) file << ",";
    file << all.substr(r * longest, lengths[r]);
  }
  file << "]}\n";
  if (!file) throw Error(fmt::format("cannot write timeline '{}'", path));
  spdlog::info("timeline written to {}", path);
}

}  // namespace tnt::trainer
