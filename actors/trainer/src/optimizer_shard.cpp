#include "optimizer_shard.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "tnt/core/error.h"
#include "tnt/core/settings.h"

namespace tnt::trainer {

namespace {

// "rank:step" of TNT_TEST_NAN_GRADIENT_AT, or {-1, 0} when unset.
std::pair<std::int64_t, std::uint64_t> parse_nan_target(const std::string& text) {
  if (text.empty()) return {-1, 0};
  const auto colon = text.find(':');
  try {
    if (colon == std::string::npos) throw std::invalid_argument(text);
    return {std::stoll(text.substr(0, colon)), std::stoull(text.substr(colon + 1))};
  } catch (const std::exception&) {
    throw ConfigError(fmt::format("{}: '{}' is not rank:step", settings::kTestNanGradientAt.name, text));
  }
}

}  // namespace

OptimizerShard::OptimizerShard(Communicator& comm, const BucketLayout& layout, compute::Model& model,
                               compute::Optimizer& optimizer)
    : comm_(std::make_unique<Communicator>(comm.dup())), model_(model), optimizer_(optimizer) {
  for (const auto& bucket : layout.buckets) layout_.buckets.push_back({bucket.offset, bucket.count, {}});
  layout_.offset_of = layout.offset_of;
  layout_.size_of = layout.size_of;
  layout_.total = layout.memory.size();
  const std::size_t n = layout.memory.size();
  const int ranks = comm_->size();
  for (int r = 0; r < ranks; ++r) {
    const auto block = Communicator::block(n, ranks, r);
    run_bytes_.push_back(block.count * sizeof(float));
    run_offsets_.push_back(block.offset * sizeof(float));
    if (r == comm_->rank()) {
      begin_ = block.offset;
      end_ = block.offset + block.count;
    }
  }
  for (const auto& bucket : layout.buckets) {
    std::vector<std::size_t> counts;
    for (int r = 0; r < ranks; ++r) {
      const std::size_t lo = run_offsets_[r] / sizeof(float), hi = lo + run_bytes_[r] / sizeof(float);
      const std::size_t a = std::max(lo, bucket.offset), b = std::min(hi, bucket.offset + bucket.count);
      counts.push_back(b > a ? b - a : 0);
    }
    counts_.push_back(std::move(counts));
  }
  std::vector<compute::ElementRange> owned;
  for (std::size_t i = 0; i < model.parameter_count(); ++i) {
    const auto off = static_cast<int64_t>(layout.offset_of[i]), size = static_cast<int64_t>(layout.size_of[i]);
    const int64_t a = std::max<int64_t>(static_cast<int64_t>(begin_), off);
    const int64_t b = std::min<int64_t>(static_cast<int64_t>(end_), off + size);
    owned.push_back(b > a ? compute::ElementRange{a - off, b - off} : compute::ElementRange{0, 0});
  }
  optimizer.shard(owned);
  run_.assign(end_ - begin_, 0.0f);
  std::tie(nan_rank_, nan_step_) = parse_nan_target(settings::kTestNanGradientAt.read());
}

float* OptimizerShard::received(std::size_t bucket) {
  const auto& b = layout_.buckets.at(bucket);
  return run_.data() + (std::max(begin_, b.offset) - begin_);
}

NonFinite OptimizerShard::keep_received(std::size_t bucket, float* memory, bool check_finite) {
  const auto& b = layout_.buckets.at(bucket);
  const std::size_t at = std::max(begin_, b.offset), count = counts_[bucket][static_cast<std::size_t>(comm_->rank())];
  std::copy_n(run_.data() + (at - begin_), count, memory + at);
  return check_finite ? find_non_finite(memory + at, count) : NonFinite{};
}

OptimizerShard::Whole OptimizerShard::agree(NonFinite local, double local_square_sum) {
  const std::array<double, 3> mine{local_square_sum, local.nan ? 1.0 : 0.0, local.inf ? 1.0 : 0.0};
  std::vector<double> all(3 * static_cast<std::size_t>(comm_->size()));
  comm_->allgather(mine.data(), all.data(), sizeof mine);
  Whole whole;
  // In rank order on every rank: the same sum everywhere.
  for (std::size_t r = 0; r < all.size(); r += 3) {
    whole.square_sum += all[r];
    whole.non_finite.nan = whole.non_finite.nan || all[r + 1] != 0.0;
    whole.non_finite.inf = whole.non_finite.inf || all[r + 2] != 0.0;
  }
  return whole;
}

void OptimizerShard::allgather_weights(float* memory) {
  const auto& owned = optimizer_.owned();
  for (std::size_t i = 0; i < owned.size(); ++i) {
    if (owned[i].size() == 0) continue;
    const float* w = model_.weights(i) + owned[i].begin;
    std::copy_n(w, owned[i].size(), run_.data() + (layout_.offset_of[i] + owned[i].begin - begin_));
  }
  comm_->allgatherv(run_.data(), run_.size() * sizeof(float), memory, run_bytes_, run_offsets_);
  for (std::size_t i = 0; i < owned.size(); ++i) {
    const float* flat = memory + layout_.offset_of[i];
    float* w = model_.weights(i);
    // This rank's own run is already in place.
    std::copy(flat, flat + owned[i].begin, w);
    std::copy(flat + owned[i].end, flat + layout_.size_of[i], w + owned[i].end);
  }
}

// Every slot kind's owned values, one run after the other, in flat-layout order.
std::vector<float> OptimizerShard::packed_state(std::size_t& kinds) const {
  const auto state = optimizer_.state();
  const std::size_t params = model_.parameter_count(), run = end_ - begin_;
  kinds = params == 0 ? 0 : state.slots.size() / params;
  const auto& owned = optimizer_.owned();
  std::vector<float> packed(kinds * run);
  for (std::size_t k = 0; k < kinds; ++k) {
    for (std::size_t i = 0; i < params; ++i) {
      const auto& values = state.slots[k * params + i].values;
      std::copy(values.begin(), values.end(),
                packed.begin() + static_cast<std::ptrdiff_t>(k * run + layout_.offset_of[i] + owned[i].begin - begin_));
    }
  }
  return packed;
}

compute::OptimizerState OptimizerShard::whole_state(const std::vector<float>& gathered, std::size_t kinds) const {
  auto state = optimizer_.state();
  const std::size_t params = model_.parameter_count();
  for (std::size_t k = 0; k < kinds; ++k) {
    for (std::size_t i = 0; i < params; ++i) {
      auto& values = state.slots[k * params + i].values;
      values.resize(layout_.size_of[i]);
      for (std::size_t j = 0; j < layout_.size_of[i]; ++j) {
        // Flat element p lies in rank r's run; that rank's block holds its kinds' runs in turn.
        const std::size_t p = layout_.offset_of[i] + j;
        std::size_t r = 0;
        while ((run_offsets_[r] + run_bytes_[r]) / sizeof(float) <= p) ++r;
        const std::size_t lo = run_offsets_[r] / sizeof(float), count = run_bytes_[r] / sizeof(float);
        values[j] = gathered[kinds * lo + k * count + (p - lo)];
      }
    }
  }
  return state;
}

OptimizerShard::PackedRuns OptimizerShard::packed_runs(std::size_t kinds) const {
  PackedRuns runs;
  for (std::size_t r = 0; r < run_bytes_.size(); ++r) {
    runs.bytes.push_back(kinds * run_bytes_[r]);
    runs.offsets.push_back(kinds * run_offsets_[r]);
  }
  return runs;
}

compute::OptimizerState OptimizerShard::gather_state() {
  std::size_t kinds = 0;
  const auto packed = packed_state(kinds);
  const auto [bytes, offsets] = packed_runs(kinds);
  const bool master = comm_->rank() == 0;
  std::vector<float> gathered(master ? kinds * layout_.total : 0);
  comm_->gatherv(packed.data(), packed.size() * sizeof(float), gathered.data(), bytes, offsets, 0);
  return master ? whole_state(gathered, kinds) : optimizer_.state();
}

void OptimizerShard::unshard() {
  std::size_t kinds = 0;
  const auto packed = packed_state(kinds);
  const auto [bytes, offsets] = packed_runs(kinds);
  std::vector<float> gathered(kinds * layout_.total);
  comm_->allgatherv(packed.data(), packed.size() * sizeof(float), gathered.data(), bytes, offsets);
  optimizer_.unshard(whole_state(gathered, kinds));
}

void OptimizerShard::release_buffers() { std::vector<float>().swap(run_); }

void OptimizerShard::poison(std::size_t step, std::size_t bucket, float* memory) const {
  if (nan_rank_ != comm_->rank() || step != nan_step_) return;
  const auto& b = layout_.buckets.at(bucket);
  const std::size_t at = std::max(begin_, b.offset);
  // Only the first bucket that holds an owned element.
  if (at >= std::min(end_, b.offset + b.count) || (bucket > 0 && begin_ < b.offset)) return;
  spdlog::warn("{}: a NaN into the gradient element {} (this rank's shard) at step {}",
               settings::kTestNanGradientAt.name, at, step);
  memory[at] = std::numeric_limits<float>::quiet_NaN();
}

}  // namespace tnt::trainer
