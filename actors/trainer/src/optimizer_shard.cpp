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
  rank_ = comm_->rank();
  ranks_ = comm_->size();
  for (const auto& bucket : layout.buckets) layout_.buckets.push_back({bucket.offset, bucket.count, {}});
  layout_.bucket_of = layout.bucket_of;
  layout_.offset_of = layout.offset_of;
  layout_.size_of = layout.size_of;
  layout_.total = layout.memory.size();
  const auto ranks = static_cast<std::size_t>(ranks_);
  owned_elements_.assign(ranks, 0);
  first_owned_bucket_ = layout_.buckets.size();
  for (std::size_t k = 0; k < layout_.buckets.size(); ++k) {
    packed_before_.push_back(owned_elements_);
    std::vector<std::size_t> bytes, offsets;
    for (int r = 0; r < ranks_; ++r) {
      const Run run = block(k, r);
      owned_elements_[static_cast<std::size_t>(r)] += run.count;
      bytes.push_back(run.count * sizeof(float));
      offsets.push_back((run.offset - layout_.buckets[k].offset) * sizeof(float));
      if (r == rank_ && run.count > 0 && first_owned_bucket_ == layout_.buckets.size()) first_owned_bucket_ = k;
    }
    block_bytes_.push_back(std::move(bytes));
    block_offsets_.push_back(std::move(offsets));
  }
  std::vector<compute::ElementRange> owned;
  for (std::size_t i = 0; i < model.parameter_count(); ++i) {
    const Run run = block(layout_.bucket_of[i], rank_);
    const auto off = static_cast<int64_t>(layout_.offset_of[i]), size = static_cast<int64_t>(layout_.size_of[i]);
    const int64_t a = std::max<int64_t>(static_cast<int64_t>(run.offset), off);
    const int64_t b = std::min<int64_t>(static_cast<int64_t>(run.offset + run.count), off + size);
    owned.push_back(b > a ? compute::ElementRange{a - off, b - off} : compute::ElementRange{0, 0});
  }
  optimizer.shard(owned);
  std::tie(nan_rank_, nan_step_) = parse_nan_target(settings::kTestNanGradientAt.read());
}

OptimizerShard::Run OptimizerShard::block(std::size_t bucket, int rank) const {
  const auto& b = layout_.buckets.at(bucket);
  const auto block = Communicator::block(b.count, ranks_, rank);
  return {b.offset + block.offset, block.count};
}

NonFinite OptimizerShard::check_reduced(std::size_t bucket, const float* memory, bool check_finite) const {
  const Run run = block(bucket, rank_);
  return check_finite ? find_non_finite(memory + run.offset, run.count) : NonFinite{};
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
    std::copy_n(model_.weights(i) + owned[i].begin, owned[i].size(), memory + layout_.offset_of[i] + owned[i].begin);
  }
  // Every bucket at once (each in place: this rank's block is already where it belongs).
  std::vector<Request> requests;
  requests.reserve(layout_.buckets.size());
  for (std::size_t k = 0; k < layout_.buckets.size(); ++k) {
    const Run mine = block(k, rank_);
    requests.push_back(comm_->allgatherv_async(memory + mine.offset, mine.count * sizeof(float),
                                               memory + layout_.buckets[k].offset, block_bytes_[k], block_offsets_[k]));
  }
  Request::wait_all(requests);
  for (std::size_t i = 0; i < owned.size(); ++i) {
    const float* flat = memory + layout_.offset_of[i];
    float* w = model_.weights(i);
    // This rank's own run is already in place.
    std::copy(flat, flat + owned[i].begin, w);
    std::copy(flat + owned[i].end, flat + layout_.size_of[i], w + owned[i].end);
  }
}

std::vector<float> OptimizerShard::packed_state(std::size_t& kinds) const {
  const auto state = optimizer_.state();
  const std::size_t params = model_.parameter_count(), mine = owned_elements();
  kinds = params == 0 ? 0 : state.slots.size() / params;
  const auto& owned = optimizer_.owned();
  std::vector<float> packed(kinds * mine);
  for (std::size_t k = 0; k < kinds; ++k) {
    for (std::size_t i = 0; i < params; ++i) {
      const auto& values = state.slots[k * params + i].values;
      if (values.empty()) continue;  // none of this parameter's elements is this rank's
      const std::size_t bucket = layout_.bucket_of[i];
      const std::size_t at = k * mine + packed_before_[bucket][static_cast<std::size_t>(rank_)] +
                             (layout_.offset_of[i] + owned[i].begin - block(bucket, rank_).offset);
      std::copy(values.begin(), values.end(), packed.begin() + static_cast<std::ptrdiff_t>(at));
    }
  }
  return packed;
}

compute::OptimizerState OptimizerShard::whole_state(const std::vector<float>& gathered, std::size_t kinds) const {
  auto state = optimizer_.state();
  const std::size_t params = model_.parameter_count();
  // Where each rank's packed runs begin in `gathered`.
  std::vector<std::size_t> rank_begin(static_cast<std::size_t>(ranks_), 0);
  for (std::size_t r = 1; r < rank_begin.size(); ++r)
    rank_begin[r] = rank_begin[r - 1] + kinds * owned_elements_[r - 1];
  for (std::size_t k = 0; k < kinds; ++k) {
    for (std::size_t i = 0; i < params; ++i) {
      auto& values = state.slots[k * params + i].values;
      values.resize(layout_.size_of[i]);
      const std::size_t bucket = layout_.bucket_of[i], begin = layout_.offset_of[i], end = begin + layout_.size_of[i];
      // The parameter's elements lie in consecutive ranks' blocks of its bucket.
      for (int r = 0; r < ranks_; ++r) {
        const auto u = static_cast<std::size_t>(r);
        const Run run = block(bucket, r);
        const std::size_t lo = std::max(begin, run.offset), hi = std::min(end, run.offset + run.count);
        if (lo >= hi) continue;
        const std::size_t from = rank_begin[u] + k * owned_elements_[u] + packed_before_[bucket][u] + (lo - run.offset);
        std::copy_n(gathered.begin() + static_cast<std::ptrdiff_t>(from), hi - lo,
                    values.begin() + static_cast<std::ptrdiff_t>(lo - begin));
      }
    }
  }
  return state;
}

OptimizerShard::PackedRuns OptimizerShard::packed_runs(std::size_t kinds) const {
  PackedRuns runs;
  std::size_t offset = 0;
  for (const std::size_t elements : owned_elements_) {
    runs.bytes.push_back(kinds * elements * sizeof(float));
    runs.offsets.push_back(offset);
    offset += runs.bytes.back();
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

void OptimizerShard::poison(std::size_t step, std::size_t bucket, float* memory) const {
  if (nan_rank_ != rank_ || step != nan_step_ || bucket != first_owned_bucket_) return;
  const std::size_t at = block(bucket, rank_).offset;
  spdlog::warn("{}: a NaN into the gradient element {} (this rank's shard) at step {}",
               settings::kTestNanGradientAt.name, at, step);
  memory[at] = std::numeric_limits<float>::quiet_NaN();
}

}  // namespace tnt::trainer
