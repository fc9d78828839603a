// The collectives, each a small Operation on top of the ring engine (ring.cpp).
#include "operations.h"

#include <cstring>

#include "tnt/core/copy.h"

namespace tnt::detail {
namespace {

// Chunk p of the job's ring is the block of the rank at place p (Note [Node-aware order]).
RingLayout blocks_of(std::byte* base, std::size_t count, std::size_t element_size, const Topology& topology) {
  RingLayout layout;
  layout.base = base;
  layout.element_size = element_size;
  const int ranks = static_cast<int>(topology.order.size());
  layout.chunk_offset.reserve(topology.order.size());
  layout.chunk_count.reserve(topology.order.size());
  for (int r : topology.order) {
    const auto block = Communicator::block(count, ranks, r);
    layout.chunk_offset.push_back(block.offset);
    layout.chunk_count.push_back(block.count);
  }
  return layout;
}

int previous(int place, int ranks) { return (place + ranks - 1) % ranks; }

int place_of(const CommunicatorCore& core) { return core.topology().position[static_cast<std::size_t>(core.rank())]; }

}  // namespace

// ---- what allreduce and reduce-scatter share --------------------------------------------------

RingLayout ReductionOperation::reduction_layout() {
  const DataType carried = accumulation_type(type_);
  std::byte* base = static_cast<std::byte*>(data_);
  if (carried != type_) {
    work_ = core_.acquire(count_ * size_of(carried));
    widen(static_cast<const bfloat16*>(data_), reinterpret_cast<float*>(work_.data()), count_);
    base = work_.data();
  }
  RingLayout layout = blocks_of(base, count_, size_of(carried), core_.topology());
  layout.reduce_steps = core_.size() - 1;
  layout.reduce = reducer_for(type_, op_);
  layout.bfloat16_on_wire = carried != type_;  // Note [bf16 on the ring] in ring.cpp
  return layout;
}

void ReductionOperation::finish_block(std::size_t offset, std::size_t count) {
  const int ranks = core_.size();
  const DataType carried = accumulation_type(type_);
  if (carried != type_) {
    auto* sum = reinterpret_cast<float*>(work_.data()) + offset;
    if (op_ == ReduceOp::avg) divide(sum, count, carried, ranks);
    narrow(sum, static_cast<bfloat16*>(data_) + offset, count);
  } else if (op_ == ReduceOp::avg) {
    divide(static_cast<std::byte*>(data_) + offset * size_of(type_), count, type_, ranks);
  }
  if (!work_.empty()) core_.release(std::move(work_));
}

// ---- allreduce -----------------------------------------------------------------------------

void AllreduceOperation::start() {
  const int ranks = core_.size();
  if (count_ == 0 || ranks == 1) {
    finish();
    return;
  }
  const std::size_t bytes = count_ * size_of(type_);
  if (gather_) {
    // Gather every rank's whole buffer, then reduce in rank order: ranks-1 steps instead of
    // 2(ranks-1), and every rank computes bitwise the same result.
    small_ = true;
    work_ = core_.acquire(bytes * static_cast<std::size_t>(ranks));
    copy_bytes(work_.data() + bytes * static_cast<std::size_t>(core_.rank()), data_, bytes);
    RingLayout layout;
    layout.base = work_.data();
    layout.element_size = bytes;
    layout.chunk_count.assign(ranks, 1);
    for (int r : core_.topology().order) layout.chunk_offset.push_back(static_cast<std::size_t>(r));
    layout.copy_steps = ranks - 1;
    layout.first_send_chunk = place_of(core_);
    start_ring(std::move(layout));
    return;
  }
  RingLayout layout = reduction_layout();
  layout.copy_steps = ranks - 1;
  layout.first_send_chunk = place_of(core_);
  start_ring(std::move(layout));
}

void AllreduceOperation::ring_done() {
  if (!small_) {
    finish_block(0, count_);
    finish();
    return;
  }
  // work_ holds every rank's buffer, in rank order.
  const auto ranks = static_cast<std::size_t>(core_.size());
  const std::size_t bytes = count_ * size_of(type_);
  boost::container::small_vector<const std::byte*, RingLayout::kInlineRanks> inputs(ranks);
  for (std::size_t r = 0; r < ranks; ++r) inputs[r] = work_.data() + bytes * r;
  reduce_in_order({inputs.data(), inputs.size()}, data_, count_, type_, op_);
  core_.release(std::move(work_));
  finish();
}

// ---- reduce-scatter ------------------------------------------------------------------------

void ReduceScatterOperation::start() {
  const int ranks = core_.size();
  if (count_ == 0 || ranks == 1) {
    finish();
    return;
  }
  RingLayout layout = reduction_layout();
  // Chosen so that the chunk left fully reduced after ranks-1 steps is this rank's own block.
  layout.first_send_chunk = previous(place_of(core_), ranks);
  start_ring(std::move(layout));
}

void ReduceScatterOperation::ring_done() {
  const auto mine = Communicator::block(count_, core_.size(), core_.rank());
  finish_block(mine.offset, mine.count);
  finish();
}

// ---- allgather and barrier -----------------------------------------------------------------

void AllgatherOperation::start() {
  const int ranks = core_.size();
  auto* own = static_cast<std::byte*>(recv_) + bytes_per_rank_ * static_cast<std::size_t>(core_.rank());
  if (send_ != own && bytes_per_rank_) std::memmove(own, send_, bytes_per_rank_);
  if (bytes_per_rank_ == 0 && !is_barrier_) {
    finish();
    return;
  }
  RingLayout layout =
      blocks_of(static_cast<std::byte*>(recv_), bytes_per_rank_ * static_cast<std::size_t>(ranks), 1, core_.topology());
  layout.copy_steps = ranks - 1;
  layout.first_send_chunk = place_of(core_);
  start_ring(std::move(layout));
}

BarrierOperation::BarrierOperation(CommunicatorCore& core, std::uint64_t sequence,
                                   std::shared_ptr<OperationState> state)
    : AllgatherOperation(core, sequence, std::move(state), nullptr, nullptr, 1),
      // Every rank's byte reaches every other rank only after that rank entered the barrier.
      tokens_(static_cast<std::size_t>(core.size())) {
  send_ = tokens_.data();
  recv_ = tokens_.data();
  is_barrier_ = true;
}

// ---- broadcast -----------------------------------------------------------------------------

// Note [Broadcast]: a pipelined chain along the job's ring from the root: every rank but the last
// forwards each segment to its right neighbour as soon as it has arrived. The ring's node-aware
// order (Note [Node-aware order]) makes the chain enter each host once (the root's host twice
// when the root is not its host's first rank): as few crossings as a tree of hosts would make,
// and each host link carries the data once, so no separate hierarchical broadcast is needed.
void BroadcastOperation::start() {
  const int ranks = core_.size();
  if (bytes_ == 0 || ranks == 1) {
    finish();
    return;
  }
  const auto& position = core_.topology().position;
  distance_ =
      (position[static_cast<std::size_t>(core_.rank())] - position[static_cast<std::size_t>(root_)] + ranks) % ranks;
  segment_bytes_ = std::max<std::size_t>(1, core_.segment_bytes());
  segments_ = (bytes_ + segment_bytes_ - 1) / segment_bytes_;
  forwards_ = distance_ < ranks - 1;
  if (distance_ == 0) {
    for (std::uint64_t k = 0; k < segments_; ++k) send_segment(k);
    return;
  }
  post_receives();
}

void BroadcastOperation::send_segment(std::uint64_t k) {
  const std::size_t begin = k * segment_bytes_;
  core_.right().send(tag(k), static_cast<std::byte*>(data_) + begin, std::min(segment_bytes_, bytes_ - begin), *this,
                     k);
}

void BroadcastOperation::post_receives() {
  const auto depth = static_cast<std::uint64_t>(core_.pipeline_depth());
  while (next_receive_ < segments_ && next_receive_ - receives_done_ < depth) {
    const std::size_t begin = next_receive_ * segment_bytes_;
    core_.left().recv(tag(next_receive_), static_cast<std::byte*>(data_) + begin,
                      std::min(segment_bytes_, bytes_ - begin), *this, next_receive_);
    ++next_receive_;
  }
}

void BroadcastOperation::on_recv_complete(std::uint64_t k, std::size_t bytes) {
  const std::size_t begin = k * segment_bytes_;
  if (bytes != std::min(segment_bytes_, bytes_ - begin)) {
    core_.fail_job("broadcast: a segment of " + std::to_string(bytes) + " bytes arrived where " +
                   std::to_string(std::min(segment_bytes_, bytes_ - begin)) +
                   " were expected: the ranks called broadcast with different sizes");
    return;
  }
  ++receives_done_;
  if (forwards_) send_segment(k);
  post_receives();
  check_done();
}

void BroadcastOperation::on_send_complete(std::uint64_t) {
  ++sends_done_;
  check_done();
}

void BroadcastOperation::check_done() {
  const bool received_all = distance_ == 0 || receives_done_ == segments_;
  const bool sent_all = !forwards_ || sends_done_ == segments_;
  if (received_all && sent_all) finish();
}

}  // namespace tnt::detail
