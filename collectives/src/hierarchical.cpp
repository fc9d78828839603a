// Collectives in layers: within each host, then across hosts (Note [Hierarchical allreduce]).
#include <cstring>

#include "operations.h"
#include "tnt/core/copy.h"

namespace tnt::detail {
namespace {

// Tag indices of each ring of an operation start here (Note [Tags]; RingLayout::tag_base).
constexpr std::uint64_t kRingTagSpan = std::uint64_t{1} << 30;

}  // namespace

RingLayout HierarchicalAllreduceOperation::ring_over(const std::vector<int>& ranks, int place) const {
  RingLayout layout;
  const int size = static_cast<int>(ranks.size());
  layout.ring_size = size;
  if (size > 1) {
    layout.left = &core_.pair(ranks[static_cast<std::size_t>((place + size - 1) % size)]);
    layout.right = &core_.pair(ranks[static_cast<std::size_t>((place + 1) % size)]);
  }
  layout.tag_base = static_cast<std::uint64_t>(phase_) * kRingTagSpan;
  layout.base = carried_;
  layout.element_size = size_of(accumulation_type(type_));
  layout.reduce = reducer_for(type_, op_);
  layout.bfloat16_on_wire = accumulation_type(type_) != type_;  // Note [bf16 on the ring] in ring.cpp
  return layout;
}

// Note [Hierarchical allreduce]: with H hosts of L ranks each (Topology::layered), three rings:
//   0. within the host, a reduce-scatter: local rank i ends with the host's sum of shard i
//      (block i of L of the buffer);
//   1. across hosts, an allreduce of shard i among the H ranks of local index i, one per host:
//      every local rank carries its own share of the inter-host traffic, over its own links,
//      so all of a host's streams are busy at once (a flat ring crosses between two hosts on
//      one stream that carries the whole buffer);
//   2. within the host, an allgather of the L shards.
// 2(L-1) + 2(H-1) steps against the flat ring's 2(HL-1); each of the L streams leaving a host
// carries 2(H-1)/(HL) of the buffer, where the flat ring's one stream carries 2(HL-1)/(HL).
// Every element is reduced once, by one rank, and then copied, so all ranks hold bitwise the
// same result (the order of the sum is host by host, not rank order).
void HierarchicalAllreduceOperation::start() {
  if (count_ == 0 || core_.size() == 1) {
    finish();
    return;
  }
  carried_ = reduction_layout().base;  // widens bfloat16 into work_
  phase_ = 0;
  start_phase();
}

void HierarchicalAllreduceOperation::start_phase() {
  const Topology& t = core_.topology();
  const auto locals = static_cast<int>(t.local.size());
  if (phase_ == 1) {
    const auto shard = Communicator::block(count_, locals, t.local_index);
    RingLayout layout = ring_over(t.cross, t.host);
    for (int h = 0; h < t.hosts; ++h) {
      const auto part = Communicator::block(shard.count, t.hosts, h);
      layout.chunk_offset.push_back(shard.offset + part.offset);
      layout.chunk_count.push_back(part.count);
    }
    layout.reduce_steps = t.hosts - 1;
    layout.copy_steps = t.hosts - 1;
    layout.first_send_chunk = t.host;
    start_ring(std::move(layout));
    return;
  }
  RingLayout layout = ring_over(t.local, t.local_index);
  for (int i = 0; i < locals; ++i) {
    const auto shard = Communicator::block(count_, locals, i);
    layout.chunk_offset.push_back(shard.offset);
    layout.chunk_count.push_back(shard.count);
  }
  if (phase_ == 0) {
    layout.reduce_steps = locals - 1;
    // So that the shard left fully reduced here is shard local_index (as in reduce-scatter).
    layout.first_send_chunk = (t.local_index + locals - 1) % locals;
  } else {
    layout.copy_steps = locals - 1;
    layout.first_send_chunk = t.local_index;
  }
  start_ring(std::move(layout));
}

void HierarchicalAllreduceOperation::ring_done() {
  if (phase_ < 2) {
    ++phase_;
    start_phase();
    return;
  }
  finish_block(0, count_);
  finish();
}

// ---- allgather -----------------------------------------------------------------------------

// Note [Hierarchical allgather]: with H hosts of L ranks each, the blocks are staged by local
// index: region i holds, host by host, the blocks of the ranks with local index i. Then
//   0. across hosts, the H ranks of local index i allgather region i (each carries its own
//      block, on its own links: all of a host's streams busy at once);
//   1. within the host, the L ranks allgather the L regions;
// and the staging is unpacked into rank order. (H-1) + (L-1) steps against the flat ring's
// HL-1, and each stream leaving a host carries H-1 blocks, where the flat ring's one stream
// carries HL-1; the price is a copy of the result through the staging buffer.
std::byte* HierarchicalAllgatherOperation::staged(int local_index, int host) {
  const auto hosts = static_cast<std::size_t>(core_.topology().hosts);
  return staging_.data() +
         (static_cast<std::size_t>(local_index) * hosts + static_cast<std::size_t>(host)) * bytes_per_rank_;
}

void HierarchicalAllgatherOperation::start() {
  const Topology& t = core_.topology();
  auto* own = static_cast<std::byte*>(recv_) + bytes_per_rank_ * static_cast<std::size_t>(core_.rank());
  if (send_ != own && bytes_per_rank_) std::memmove(own, send_, bytes_per_rank_);
  if (bytes_per_rank_ == 0 || core_.size() == 1) {
    finish();
    return;
  }
  staging_ = core_.acquire(bytes_per_rank_ * static_cast<std::size_t>(core_.size()));
  copy_bytes(staged(t.local_index, t.host), own, bytes_per_rank_);
  RingLayout layout;
  layout.ring_size = t.hosts;
  if (t.hosts > 1) {
    layout.left = &core_.pair(t.cross[static_cast<std::size_t>((t.host + t.hosts - 1) % t.hosts)]);
    layout.right = &core_.pair(t.cross[static_cast<std::size_t>((t.host + 1) % t.hosts)]);
  }
  layout.base = staged(t.local_index, 0);
  layout.chunk_count.assign(static_cast<std::size_t>(t.hosts), bytes_per_rank_);
  for (int h = 0; h < t.hosts; ++h) layout.chunk_offset.push_back(static_cast<std::size_t>(h) * bytes_per_rank_);
  layout.copy_steps = t.hosts - 1;
  layout.first_send_chunk = t.host;
  start_ring(std::move(layout));
}

void HierarchicalAllgatherOperation::ring_done() {
  const Topology& t = core_.topology();
  const auto locals = static_cast<int>(t.local.size());
  if (phase_ == 0) {
    phase_ = 1;
    RingLayout layout;
    layout.ring_size = locals;
    if (locals > 1) {
      layout.left = &core_.pair(t.local[static_cast<std::size_t>((t.local_index + locals - 1) % locals)]);
      layout.right = &core_.pair(t.local[static_cast<std::size_t>((t.local_index + 1) % locals)]);
    }
    layout.tag_base = kRingTagSpan;
    layout.base = staging_.data();
    const std::size_t region = static_cast<std::size_t>(t.hosts) * bytes_per_rank_;
    layout.chunk_count.assign(static_cast<std::size_t>(locals), region);
    for (int i = 0; i < locals; ++i) layout.chunk_offset.push_back(static_cast<std::size_t>(i) * region);
    layout.copy_steps = locals - 1;
    layout.first_send_chunk = t.local_index;
    start_ring(std::move(layout));
    return;
  }
  // Host h's ranks are order[h*L .. h*L+L-1] (Note [Node-aware order], hosts of equal size).
  for (int h = 0; h < t.hosts; ++h) {
    for (int i = 0; i < locals; ++i) {
      const auto rank = static_cast<std::size_t>(t.order[static_cast<std::size_t>(h * locals + i)]);
      copy_bytes(static_cast<std::byte*>(recv_) + rank * bytes_per_rank_, staged(i, h), bytes_per_rank_);
    }
  }
  core_.release(std::move(staging_));
  finish();
}

}  // namespace tnt::detail
