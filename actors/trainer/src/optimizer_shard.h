#pragma once
// Note [Optimizer-state sharding] (issue 26, item 8; --shard-optimizer, FitOptions::
// shard_optimizer; ZeRO stage 1). Rank r of P owns the elements [r N / P, (r + 1) N / P) of the
// flat gradient layout (BucketLayout: N floats, reverse parameter order; Communicator::block
// gives the first N % P ranks one element more), a contiguous run that may cut parameters.
//   - Gradients: each bucket is reduce-scattered the moment it is full (still overlapped with
//     backward), rank s receiving the sum of the bucket's part that s owns (counts per rank: the
//     bucket's intersection with each rank's run, many of them 0); the rest of the bucket keeps
//     this rank's own gradient and is never read. The fold is in rank order (Note [Exchanges] in
//     collectives/src/exchange.cpp): on two ranks bitwise the ring allreduce's sum.
//   - Whole-gradient decisions: after the last bucket, every rank allgathers {its owned square
//     sum, NaN found, infinity found} on a communicator of its own (Note [Collective order]: the
//     CommActor's calls never match these) and folds them in rank order, so every rank takes the
//     same decision: a NaN in one rank's shard ends the segment on every rank at the same step
//     (the NaN guard), and global_clipnorm scales by the whole gradient's norm. clipnorm scales
//     each tensor by its own norm and a shard may cut a tensor: refused.
//   - Update: the optimizer keeps state for, and steps, the owned run only
//     (compute::Optimizer::shard), so its state is 1/P of the unsharded one's; the owned weights
//     are then allgathered(v) into every rank's parameters through the gradient buffer, which is
//     free then (the next backward overwrites it), so the only extra memory is one N/P buffer.
//     The allgather blocks the compute thread before the next forward (not overlapped).
//   - Checkpoints: the whole state is gathered on the master (gatherv), so the file is the
//     unsharded format, and resumes on any rank count, sharded or not (the optimizer loads the
//     whole state and keeps its run). The optimizer stays sharded after fit (the Trainer keeps
//     the shard, so a later save_checkpoint gathers); a later fit makes it whole first
//     (allgatherv): making it whole at the end of every fit would cost every rank the whole
//     state again, more than the unsharded run holds.
// On one rank the shard is everything: the option changes nothing there (and is allowed, so that
// a job may resume a sharded checkpoint on one rank with the same run file).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine.h"
#include "tnt/collectives/communicator.h"
#include "tnt/compute/model.h"
#include "tnt/compute/optimizer.h"

namespace tnt::trainer {

class OptimizerShard {
 public:
  // Collective (a dup of `comm`); shards `optimizer` (whose state is whole) by `layout`.
  OptimizerShard(Communicator& comm, const BucketLayout& layout, compute::Model& model, compute::Optimizer& optimizer);

  // This rank's run of the flat layout.
  std::size_t begin() const { return begin_; }
  std::size_t end() const { return end_; }
  // Bucket k's reduce-scatter: elements per rank, and where this rank's part of the sum lands.
  std::span<const std::size_t> counts(std::size_t bucket) const { return counts_.at(bucket); }
  float* received(std::size_t bucket);
  // Copies bucket k's received part into the flat layout memory (where the optimizer reads it);
  // returns what it holds (for the NaN guard).
  NonFinite keep_received(std::size_t bucket, float* memory, bool check_finite);

  // The whole gradient's decisions from every rank's shard (blocking, on the compute thread).
  struct Whole {
    NonFinite non_finite;
    double square_sum = 0.0;
  };
  Whole agree(NonFinite local, double local_square_sum);
  // Every rank's updated run into every rank's parameters (blocking), through `memory`.
  void allgather_weights(float* memory);

  // The whole optimizer state on the master (the rest get their own part); every rank calls it.
  compute::OptimizerState gather_state();
  // Every rank's optimizer whole again (allgatherv of the state); every rank calls it.
  void unshard();
  // After the fit: the N / P buffer goes (the shard stays, for checkpoints written later).
  void release_buffers();

  // TNT_TEST_NAN_GRADIENT_AT=rank:step: that rank writes a NaN into the first element it owns of
  // the first bucket that holds one, at that optimizer step, before the bucket is reduced.
  void poison(std::size_t step, std::size_t bucket, float* memory) const;

 private:
  // Every slot kind's values over the whole layout, [slot kind][flat element], from the
  // optimizer's state and, for the other ranks' runs, `gathered` (every rank's packed runs).
  compute::OptimizerState whole_state(const std::vector<float>& gathered, std::size_t kinds) const;
  std::vector<float> packed_state(std::size_t& kinds) const;
  // Every rank's packed state (packed_state) in bytes, and where each begins: gatherv's counts.
  struct PackedRuns {
    std::vector<std::size_t> bytes, offsets;
  };
  PackedRuns packed_runs(std::size_t kinds) const;

  std::unique_ptr<Communicator> comm_;
  // The layout's geometry (the fit's BucketLayout may be gone when a checkpoint is written later).
  struct Geometry {
    std::vector<BucketLayout::Bucket> buckets;  // offsets and counts (parameters left empty)
    std::vector<std::size_t> offset_of, size_of;
    std::size_t total = 0;
  } layout_;
  compute::Model& model_;
  compute::Optimizer& optimizer_;
  std::size_t begin_ = 0, end_ = 0;
  std::vector<std::vector<std::size_t>> counts_;      // [bucket][rank]
  std::vector<std::size_t> run_bytes_, run_offsets_;  // every rank's run, in bytes
  std::vector<float> run_;                            // N / P: received gradients, then sent weights
  std::int64_t nan_rank_ = -1;
  std::uint64_t nan_step_ = 0;
};

}  // namespace tnt::trainer
