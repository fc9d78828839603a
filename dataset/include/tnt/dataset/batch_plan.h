#pragma once
// Which samples every rank takes at every step, as Tarantella specifies.
//
// Each epoch has a permutation of [0, num_samples) drawn from (seed, epoch) alone, so it is the
// same on every rank and on every run. Global batch `step` is positions [step*B, step*B + B) of
// that permutation (the last one may be partial, or dropped with drop_remainder). Rank r of W
// takes a contiguous share of it; with n samples in the batch the first n mod W ranks take
// floor(n/W)+1 and the others floor(n/W), so a rank may get 0 samples of a small last batch:
// it must still take part in the step (its gradient weight, local/global, is then 0).
//
// With distribute = false the source is taken to be this rank's own shard: every rank walks its
// own source with micro-batches of `micro_batch` samples, and global_count is local count × W
// (exact only if all shards have the same size; the caller checks that across ranks).
//
// BatchPlan is immutable and cheap to copy; all its calls are const and thread-safe.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tnt::data {

struct BatchPlanOptions {
  std::size_t num_samples = 0;
  // Give one of the two (or both, then global_batch == micro_batch * world_size is required).
  // Given micro_batch only, global_batch = micro_batch * world_size.
  std::size_t global_batch = 0;
  std::size_t micro_batch = 0;
  int rank = 0;
  int world_size = 1;
  std::uint64_t seed = 0;
  bool shuffle = true;  // false: the identity order (validation and test data)
  bool drop_remainder = false;
  bool distribute = true;
  // Not 0: the ranks split each global batch of n samples by whole shards instead of samples.
  // Shard s is positions [s*n/shards, (s+1)*n/shards) of the batch, whatever the ranks; rank r
  // takes a contiguous block of floor(shards/W) shards, one more for the first shards mod W
  // ranks (the trainer's bitwise-reproducible mode). Needs distribute, shards >= W and a
  // global batch of at least `shards` samples.
  std::size_t shards = 0;
};

struct StepShare {
  std::size_t epoch = 0;
  std::size_t step = 0;
  std::vector<std::size_t> indices;  // this rank's source indices, in batch order
  std::size_t global_offset = 0;     // position of indices[0] within the global batch
  std::size_t global_count = 0;      // samples in the whole step, over all ranks
  std::size_t local_count() const { return indices.size(); }
};

class BatchPlan {
 public:
  explicit BatchPlan(const BatchPlanOptions& options);  // throws DataError on bad options

  const BatchPlanOptions& options() const { return options_; }
  std::size_t global_batch() const { return global_batch_; }
  // Nominal local batch: ceil(B / W) when distributing, micro_batch otherwise.
  std::size_t max_local_batch() const;
  std::size_t steps_per_epoch() const { return steps_; }

  // The epoch's order of sample indices (identity when shuffle is off).
  std::vector<std::size_t> order(std::size_t epoch) const;
  // Global count of a step and this rank's [offset, offset + count) within it.
  std::size_t global_count(std::size_t step) const;
  std::size_t local_count(std::size_t step) const;
  std::size_t local_offset(std::size_t step) const;

  // This rank's share of (epoch, step); `order` must be order(epoch) (pass it to avoid
  // recomputing the permutation at every step).
  StepShare share(std::size_t epoch, std::size_t step, const std::vector<std::size_t>& order) const;
  StepShare share(std::size_t epoch, std::size_t step) const;
  // Identifies the data order: equal fingerprints give the same samples at every (epoch, step)
  // of the global batch. Rank and world size are left out on purpose: with distribution the
  // order does not depend on them, so a run may resume on another number of ranks. Store it in
  // checkpoints next to the LoaderPosition and compare on resume.
  std::uint64_t fingerprint() const;
  // All indices of the global batch (every rank's shares, in rank order); without distribution
  // only this rank's own samples are known, and those are returned.
  std::vector<std::size_t> global_indices(std::size_t epoch, std::size_t step) const;

 private:
  void check_step(std::size_t step) const;
  std::size_t span_begin(std::size_t step) const;  // first permutation position of `step`
  std::size_t span(std::size_t step) const;        // samples of `step` on this rank's source
  // With shards: the first of rank r's shards (r = W: the number of shards).
  std::size_t first_shard(std::size_t rank) const;

  BatchPlanOptions options_;
  std::size_t global_batch_ = 0;
  std::size_t stride_ = 0;  // permutation positions per step on this rank's source
  std::size_t steps_ = 0;
};

// A permutation of [0, n) from (seed, epoch), the same with every compiler and standard library.
std::vector<std::size_t> epoch_permutation(std::size_t n, std::uint64_t seed, std::uint64_t epoch);

}  // namespace tnt::data
