#include <algorithm>
#include <cstring>
#include <limits>

#include "operation.h"
#include "reduce.h"

namespace tnt::detail {
namespace {
constexpr std::size_t kSegmentsPerChunk = 4;
constexpr std::size_t kSmallestSegment = 128 * 1024;
}  // namespace

// The callback runs before the operation counts as finished: whoever sees test() or wait()
// return also sees what the callback did. (Marked finished first, a caller's wait() returned
// while the progress thread was still about to run the callback: the collectives matrix's
// check_async found "completion callback ran 0 times" in 2 of 4 runs of the collectives and
// trainer labels together, none in 60 runs of that test alone, 2026-11-26.)
void OperationState::complete(const std::string& failure) {
  // The first call wins; the error and the callback are its alone. A mutex here was two of a
  // ping-pong's mutex operations per round trip.
  if (completing.exchange(true)) return;
  error = failure;
  CompletionCallback to_call = std::move(callback);
  struct Finish {
    OperationState& state;
    ~Finish() {
      // A release store: whoever sees done() sees the error, the status and the callback's work
      // without taking the mutex (throw_failure, Request::status).
      state.finished.store(true, std::memory_order_release);
      state.loop.wake();
      if (state.held) state.loop.release();
      if (state.awaited) state.loop.waiter_expected_done();
    }
  } finish{*this};
  if (to_call) to_call(failure);
}

RingLayout RingOperation::job_ring() const {
  RingLayout layout;
  layout.ring_size = core_.size();
  if (layout.ring_size > 1) {
    layout.left = &core_.left();
    layout.right = &core_.right();
  }
  return layout;
}

void RingOperation::start_ring(RingLayout layout) {
  layout_ = std::move(layout);
  if (layout_.ring_size == 0) {
    const RingLayout job = job_ring();
    layout_.ring_size = job.ring_size;
    layout_.left = job.left;
    layout_.right = job.right;
  }
  const int ranks = layout_.ring_size;
  total_steps_ = layout_.reduce_steps + layout_.copy_steps;
  next_receive_ = receives_done_ = sends_done_ = 0;
  free_slots_.clear();
  if (ranks == 1 || total_steps_ == 0) {
    ring_done();
    return;
  }
  const std::size_t largest = *std::max_element(layout_.chunk_count.begin(), layout_.chunk_count.end());
  // Note [Segment size]: a chunk of one segment cannot overlap anything: step s+1 waits for all of
  // step s. So chunks are cut into at least kSegmentsPerChunk segments, down to kSmallestSegment
  // (64 KiB measured no better). Measured here (2 ranks, loopback, medians of 4 interleaved
  // runs): 1 MiB allreduces went from 0.81 to 1.21 GB/s. From 4 MiB on the chunks hold four
  // 512 KiB segments anyway, and 128 KiB ones measured worse there (0.98 against 1.14 GB/s).
  const std::size_t chunk_bytes = largest * layout_.element_size;
  const std::size_t segment_bytes =
      std::min(core_.segment_bytes(), std::max(kSmallestSegment, chunk_bytes / kSegmentsPerChunk));
  segment_elements_ = std::max<std::size_t>(1, segment_bytes / layout_.element_size);
  segments_ = std::max<std::size_t>(1, (largest + segment_elements_ - 1) / segment_elements_);
  total_messages_ = static_cast<std::uint64_t>(total_steps_) * segments_;
  // Each ring of an operation has 2^30 tag indices (RingLayout::tag_base).
  if (total_messages_ >= (std::uint64_t{1} << 30)) {
    core_.complete(*this, "collective too large for its segment size: raise TNT_SEGMENT_KB");
    return;
  }
  const int depth = core_.pipeline_depth();
  if (layout_.reduce_steps > 0) {
    slots_ = core_.acquire(static_cast<std::size_t>(depth) * segment_elements_ * wire_element_size());
    for (int slot = depth - 1; slot >= 0; --slot) free_slots_.push_back(slot);
  }
  if (layout_.bfloat16_on_wire) {
    wire_count_ = 0;
    for (int chunk = 0; chunk < ranks; ++chunk)
      wire_count_ = std::max(wire_count_, layout_.chunk_offset[chunk] + layout_.chunk_count[chunk]);
    wire_ = core_.acquire(2 * wire_count_ * sizeof(bfloat16));
    widened_.resize(segment_elements_);
  }
  for (std::size_t k = 0; k < segments_; ++k) post_send(0, k);
  post_receives();
}

int RingOperation::chunk_sent_at(int step) const {
  const int ranks = layout_.ring_size;
  return ((layout_.first_send_chunk - step) % ranks + ranks) % ranks;
}

RingOperation::Span RingOperation::segment_of(int chunk, std::size_t segment) const {
  const std::size_t count = layout_.chunk_count[chunk];
  const std::size_t begin = std::min(count, segment * segment_elements_);
  const std::size_t end = std::min(count, begin + segment_elements_);
  return {layout_.chunk_offset[chunk] + begin, end - begin};
}

// Note [bf16 on the ring]: a bfloat16 allreduce or reduce-scatter adds in float32, and its rings
// (flat and hierarchical) carry bfloat16: each segment is rounded from the float32 buffer just
// before it is sent and widened back when it comes, half the bytes of float32 partial sums. One
// who asks for a bfloat16 collective asks for its bytes: carried in float32, a ring of more than
// two sent the data's size twice over, and a caller's bf16 gradients saved nothing on the wire.
// On a ring of two nothing is lost: the reduce step sends a rank's own values, bfloat16 already,
// and the copy step the sum that both round at the end anyway, so the result is bitwise the
// float32-carried one. On more ranks each partial sum is rounded to bfloat16 as it travels
// (NCCL's bf16 rings do the same): at most ranks - 1 roundings of 2^-9 relative each, and every
// rank still holds the same result, since each block is summed by one rank and then copied. The
// host board, with no wire, sums in float32 and rounds once. Measured 2026-11-28 with
// --gradient-compression bf16 (bench/cluster/compression_bench.py, 3 alternating rounds, links at
// 0.5 Gbit/s): the main job on 2 namespace hosts x 1 rank, 499,086 -> 251,809 bytes sent per
// step, 15,444 -> 31,098 samples/s; ResNet-20 on 3 hosts, 4,559,041 -> 2,377,263 bytes per step
// (float32 partial sums had sent 4,553,633).
std::size_t RingOperation::wire_element_size() const {
  return layout_.bfloat16_on_wire ? sizeof(bfloat16) : layout_.element_size;
}

// Where step `step` keeps the bfloat16 form of the element at `offset`: the reduce steps and the
// copy steps each have their own half, so that a segment being sent in one is never overwritten
// by the other.
bfloat16* RingOperation::wire_at(int step, std::size_t offset) {
  const std::size_t half = step < layout_.reduce_steps ? 0 : wire_count_;
  return reinterpret_cast<bfloat16*>(wire_.data()) + half + offset;
}

void RingOperation::post_send(int step, std::size_t segment) {
  const Span span = segment_of(chunk_sent_at(step), segment);
  const std::uint64_t index = static_cast<std::uint64_t>(step) * segments_ + segment;
  const std::byte* data = layout_.base + span.offset * layout_.element_size;
  if (layout_.bfloat16_on_wire) {
    bfloat16* wire = wire_at(step, span.offset);
    narrow(reinterpret_cast<const float*>(data), wire, span.count);
    data = reinterpret_cast<const std::byte*>(wire);
  }
  layout_.right->send(tag(layout_.tag_base + index), data, span.count * wire_element_size(), *this, index);
}

void RingOperation::post_receives() {
  const auto depth = static_cast<std::uint64_t>(core_.pipeline_depth());
  while (next_receive_ < total_messages_ && next_receive_ - receives_done_ < depth) {
    const std::uint64_t index = next_receive_;
    const int step = static_cast<int>(index / segments_);
    const Span span = segment_of(chunk_sent_at(step + 1), index % segments_);
    std::byte* destination = layout_.base + span.offset * layout_.element_size;
    std::uint64_t slot = 0;
    if (step < layout_.reduce_steps) {
      slot = static_cast<std::uint64_t>(free_slots_.back());
      free_slots_.pop_back();
      destination = slots_.data() + slot * segment_elements_ * wire_element_size();
    } else if (layout_.bfloat16_on_wire) {
      destination = reinterpret_cast<std::byte*>(wire_at(step, span.offset));
    }
    // The cookie carries the message index and the slot (pipeline depth < 256).
    layout_.left->recv(tag(layout_.tag_base + index), destination, span.count * wire_element_size(), *this,
                       index << 8 | slot);
    ++next_receive_;
  }
}

void RingOperation::on_recv_complete(std::uint64_t cookie, std::size_t bytes) {
  const std::uint64_t index = cookie >> 8;
  const int slot = static_cast<int>(cookie & 0xff);
  const int step = static_cast<int>(index / segments_);
  const std::size_t segment = index % segments_;
  const Span span = segment_of(chunk_sent_at(step + 1), segment);
  if (bytes != span.count * wire_element_size()) {
    core_.fail_job("rank " + std::to_string(layout_.left->peer_rank()) + " sent " + std::to_string(bytes) +
                   " bytes where " + std::to_string(span.count * wire_element_size()) +
                   " were expected: the ranks called collectives with different counts or types");
    return;
  }
  std::byte* here = layout_.base + span.offset * layout_.element_size;
  if (step < layout_.reduce_steps) {
    const std::byte* received =
        slots_.data() + static_cast<std::size_t>(slot) * segment_elements_ * wire_element_size();
    if (layout_.bfloat16_on_wire) {
      widen(reinterpret_cast<const bfloat16*>(received), widened_.data(), span.count);
      received = reinterpret_cast<const std::byte*>(widened_.data());
    }
    layout_.reduce(here, received, span.count);
    free_slots_.push_back(slot);
  } else if (layout_.bfloat16_on_wire) {
    widen(wire_at(step, span.offset), reinterpret_cast<float*>(here), span.count);
  }
  ++receives_done_;
  if (step + 1 < total_steps_) post_send(step + 1, segment);
  post_receives();
  check_done();
}

void RingOperation::on_send_complete(std::uint64_t) {
  ++sends_done_;
  check_done();
}

void RingOperation::check_done() {
  if (receives_done_ < total_messages_ || sends_done_ < total_messages_) return;
  if (!slots_.empty()) core_.release(std::move(slots_));
  if (!wire_.empty()) core_.release(std::move(wire_));
  ring_done();
}

}  // namespace tnt::detail
