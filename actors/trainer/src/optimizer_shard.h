#pragma once
// Note [Optimizer-state sharding] (issue 26, item 8; --shard-optimizer, FitOptions::
// shard_optimizer; ZeRO stage 1). Rank r of P owns block r of every gradient bucket
// (Communicator::block: the bucket's first count % P ranks one element more): a run of each
// bucket, so each parameter's owned elements are one run too (a parameter lies in one bucket).
//   - Gradients: each bucket is reduce-scattered in place the moment it is full (still
//     overlapped with backward): the ring's first half, or, where the host board serves the
//     bucket, the board's allreduce (the plain mode's sum, bitwise). No receive buffer is
//     needed; the other blocks hold partial sums and are never read. On more than two ranks the
//     ring's reduce-scatter adds each block in another order than the ring allreduce does, so
//     a sharded run agrees with the plain one to rounding there, not bitwise.
//   - Whole-gradient decisions: after the last bucket, every rank allgathers {its owned square
//     sum, NaN found, infinity found} on a communicator of its own (Note [Collective order]: the
//     CommActor's calls never match these) and folds them in rank order, so every rank takes the
//     same decision: a NaN in one rank's shard ends the segment on every rank at the same step
//     (the NaN guard), and global_clipnorm scales by the whole gradient's norm. clipnorm scales
//     each tensor by its own norm and a shard may cut a tensor: refused.
//   - Update: the optimizer keeps state for, and steps, the owned runs only
//     (compute::Optimizer::shard), so its state is 1/P of the unsharded one's; each rank then
//     writes its updated runs into their blocks of the gradient memory, which is free then (the
//     next backward overwrites it), and every bucket is allgathered there in place, then copied
//     into the parameters: no buffer beside the gradient memory. The allgathers block the compute
//     thread before the next forward (not overlapped).
//   - Checkpoints: the whole state is gathered on the master (gatherv of each rank's runs, packed
//     in flat order), so the file is the unsharded format, and resumes on any rank count, sharded
//     or not (the optimizer loads the whole state and keeps its runs). The optimizer stays
//     sharded after fit (the Trainer keeps the shard, so a later save_checkpoint gathers); a
//     later fit makes it whole first (allgatherv): making it whole at the end of every fit would
//     cost every rank the whole state again, more than the unsharded run holds.
// Measured (actors/trainer/README.md, "Optimizer-state sharding"): the state's half shows in the
// peak resident memory; an earlier version owned one contiguous run of the flat layout, reduced
// by an exchange (a receive buffer of N/P and the fold's per-rank blocks in flight) and saved a
// quarter of what it should have.
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

  // Elements of the flat layout this rank owns (its optimizer state's share).
  std::size_t owned_elements() const { return owned_elements_[rank_]; }
  // Bucket k's reduced block (after its reduce-scatter): what it holds, for the NaN guard.
  NonFinite check_reduced(std::size_t bucket, const float* memory, bool check_finite) const;

  // The whole gradient's decisions from every rank's shard (blocking, on the compute thread).
  struct Whole {
    NonFinite non_finite;
    double square_sum = 0.0;
  };
  Whole agree(NonFinite local, double local_square_sum);
  // Every rank's updated runs into every rank's parameters (blocking), through `memory`.
  void allgather_weights(float* memory);

  // The whole optimizer state on the master (the rest get their own part); every rank calls it.
  compute::OptimizerState gather_state();
  // Every rank's optimizer whole again (allgatherv of the state); every rank calls it.
  void unshard();
  // TNT_TEST_NAN_GRADIENT_AT=rank:step: that rank writes a NaN into the first element it owns of
  // the first bucket that holds one, at that optimizer step, before the bucket is reduced.
  void poison(std::size_t step, std::size_t bucket, float* memory) const;

 private:
  // Rank r's block of bucket k: where it begins in the flat layout, and its elements.
  struct Run {
    std::size_t offset = 0, count = 0;
  };
  Run block(std::size_t bucket, int rank) const;
  // Every slot kind's values over the whole layout, [slot kind][flat element], from every
  // rank's packed runs (packed_state, one rank after the other in `gathered`).
  compute::OptimizerState whole_state(const std::vector<float>& gathered, std::size_t kinds) const;
  // This rank's owned values: for each slot kind in turn, its runs in flat order.
  std::vector<float> packed_state(std::size_t& kinds) const;
  // Every rank's packed state in bytes, and where each begins: gatherv's counts.
  struct PackedRuns {
    std::vector<std::size_t> bytes, offsets;
  };
  PackedRuns packed_runs(std::size_t kinds) const;

  std::unique_ptr<Communicator> comm_;
  int rank_ = 0, ranks_ = 1;
  // The layout's geometry (the fit's BucketLayout may be gone when a checkpoint is written later).
  struct Geometry {
    std::vector<BucketLayout::Bucket> buckets;  // offsets and counts (parameters left empty)
    std::vector<std::size_t> bucket_of, offset_of, size_of;
    std::size_t total = 0;
  } layout_;
  compute::Model& model_;
  compute::Optimizer& optimizer_;
  std::vector<std::size_t> owned_elements_;  // [rank]
  // [bucket][rank]: elements of rank's blocks in the buckets before (where bucket's block lies
  // in that rank's packed run).
  std::vector<std::vector<std::size_t>> packed_before_;
  // [bucket][rank], in bytes from the bucket's start: the allgatherv of its blocks.
  std::vector<std::vector<std::size_t>> block_bytes_, block_offsets_;
  std::size_t first_owned_bucket_ = 0;  // the first bucket where this rank owns an element
  std::int64_t nan_rank_ = -1;
  std::uint64_t nan_step_ = 0;
};

}  // namespace tnt::trainer
