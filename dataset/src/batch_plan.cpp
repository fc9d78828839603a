#include "tnt/dataset/batch_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "random.h"
#include "tnt/dataset/error.h"

namespace tnt::data {

std::vector<std::size_t> epoch_permutation(std::size_t n, std::uint64_t seed, std::uint64_t epoch) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  // Own Fisher-Yates and bounded draw: std::shuffle's result differs between standard libraries.
  detail::Rng rng(detail::mix(seed, epoch, 0x7065726dULL));
  for (std::size_t i = n; i > 1; --i) {
    const std::size_t j = rng.below(i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

BatchPlan::BatchPlan(const BatchPlanOptions& options) : options_(options) {
  const auto& o = options_;
  if (o.world_size < 1) {
    throw DataError(fmt::format("batch plan: world size {} must be >= 1", o.world_size));
  }
  if (o.rank < 0 || o.rank >= o.world_size) {
    throw DataError(fmt::format("batch plan: rank {} is not in [0, {})", o.rank, o.world_size));
  }
  const auto w = static_cast<std::size_t>(o.world_size);
  if (o.global_batch == 0 && o.micro_batch == 0) {
    throw DataError("batch plan: give a global batch size or a micro-batch size (both are 0)");
  }
  if (o.global_batch != 0 && o.micro_batch != 0 && o.global_batch != o.micro_batch * w) {
    throw DataError(
        fmt::format("batch plan: micro-batch size {} is inconsistent with global batch size {} on {} rank(s): "
                    "{} x {} = {}",
                    o.micro_batch, o.global_batch, w, o.micro_batch, w, o.micro_batch * w));
  }
  if (o.distribute) {
    global_batch_ = o.global_batch != 0 ? o.global_batch : o.micro_batch * w;
    if (global_batch_ < w) {
      throw DataError(
          fmt::format("batch plan: global batch size {} is smaller than the number of ranks {}: every rank "
                      "needs at least one sample of a full batch",
                      global_batch_, w));
    }
    stride_ = global_batch_;
    if (o.shards != 0 && o.shards < w) {
      throw DataError(
          fmt::format("batch plan: {} shards cannot be split over {} ranks: every rank needs a shard", o.shards, w));
    }
    if (o.shards != 0 && global_batch_ < o.shards) {
      throw DataError(fmt::format(
          "batch plan: global batch size {} is smaller than the {} shards it is cut into: every shard needs a sample",
          global_batch_, o.shards));
    }
  } else {
    if (o.shards != 0) {
      throw DataError("batch plan: shards split the global batch over the ranks: they need distribution");
    }
    // Each rank walks its own shard; a global batch size must split evenly into the ranks.
    if (o.micro_batch == 0 && o.global_batch % w != 0) {
      throw DataError(
          fmt::format("batch plan: without distribution the global batch size {} must be a multiple of the "
                      "{} rank(s), or give the micro-batch size",
                      o.global_batch, w));
    }
    stride_ = o.micro_batch != 0 ? o.micro_batch : o.global_batch / w;
    global_batch_ = stride_ * w;
  }
  const std::size_t n = o.num_samples;
  steps_ = o.drop_remainder ? n / stride_ : (n + stride_ - 1) / stride_;
}

std::size_t BatchPlan::max_local_batch() const {
  if (!options_.distribute) return stride_;
  const auto w = static_cast<std::size_t>(options_.world_size);
  if (options_.shards != 0) {
    const std::size_t v = options_.shards;
    return ((v + w - 1) / w) * ((global_batch_ + v - 1) / v);
  }
  return (global_batch_ + w - 1) / w;
}

std::size_t BatchPlan::span(std::size_t step) const {
  return std::min(stride_, options_.num_samples - span_begin(step));
}

std::size_t BatchPlan::first_shard(std::size_t rank) const {
  const auto w = static_cast<std::size_t>(options_.world_size);
  const std::size_t v = options_.shards;
  return rank * (v / w) + std::min(rank, v % w);
}

void BatchPlan::check_step(std::size_t step) const {
  if (step >= steps_) {
    throw DataError(fmt::format("batch plan: step {} is out of range: an epoch has {} steps", step, steps_));
  }
}

std::size_t BatchPlan::span_begin(std::size_t step) const { return step * stride_; }

std::vector<std::size_t> BatchPlan::order(std::size_t epoch) const {
  if (!options_.shuffle) {
    std::vector<std::size_t> identity(options_.num_samples);
    std::iota(identity.begin(), identity.end(), std::size_t{0});
    return identity;
  }
  return epoch_permutation(options_.num_samples, options_.seed, epoch);
}

std::size_t BatchPlan::global_count(std::size_t step) const {
  check_step(step);
  const std::size_t span = std::min(stride_, options_.num_samples - span_begin(step));
  return options_.distribute ? span : span * static_cast<std::size_t>(options_.world_size);
}

std::size_t BatchPlan::local_count(std::size_t step) const {
  check_step(step);
  const std::size_t n = span(step);
  if (!options_.distribute) return n;
  const auto w = static_cast<std::size_t>(options_.world_size);
  const auto r = static_cast<std::size_t>(options_.rank);
  if (options_.shards != 0) {
    const std::size_t v = options_.shards;
    return first_shard(r + 1) * n / v - first_shard(r) * n / v;
  }
  return n / w + (r < n % w ? 1 : 0);
}

std::size_t BatchPlan::local_offset(std::size_t step) const {
  check_step(step);
  const auto r = static_cast<std::size_t>(options_.rank);
  const std::size_t n = span(step);
  if (!options_.distribute) return r * n;
  if (options_.shards != 0) return first_shard(r) * n / options_.shards;
  const auto w = static_cast<std::size_t>(options_.world_size);
  return r * (n / w) + std::min(r, n % w);
}

std::uint64_t BatchPlan::fingerprint() const {
  const auto& o = options_;
  std::uint64_t h = detail::mix(0x746e742d64617461ULL, o.num_samples, stride_);
  h = detail::mix(h, o.seed, (o.shuffle ? 1u : 0u) | (o.drop_remainder ? 2u : 0u) | (o.distribute ? 4u : 0u));
  return h;
}

StepShare BatchPlan::share(std::size_t epoch, std::size_t step, const std::vector<std::size_t>& order) const {
  check_step(step);
  if (order.size() != options_.num_samples) {
    throw DataError(
        fmt::format("batch plan: an order of {} indices for {} samples", order.size(), options_.num_samples));
  }
  StepShare share;
  share.epoch = epoch;
  share.step = step;
  share.global_count = global_count(step);
  share.global_offset = local_offset(step);
  const std::size_t count = local_count(step);
  // Without distribution this rank's samples start at the span; with it, at its offset in it.
  const std::size_t first = span_begin(step) + (options_.distribute ? share.global_offset : 0);
  share.indices.assign(order.begin() + static_cast<std::ptrdiff_t>(first),
                       order.begin() + static_cast<std::ptrdiff_t>(first + count));
  return share;
}

StepShare BatchPlan::share(std::size_t epoch, std::size_t step) const { return share(epoch, step, order(epoch)); }

std::vector<std::size_t> BatchPlan::global_indices(std::size_t epoch, std::size_t step) const {
  check_step(step);
  const auto o = order(epoch);
  const std::size_t first = span_begin(step);
  const std::size_t span = std::min(stride_, options_.num_samples - first);
  return {o.begin() + static_cast<std::ptrdiff_t>(first), o.begin() + static_cast<std::ptrdiff_t>(first + span)};
}

}  // namespace tnt::data
