#pragma once
// What every collective shares: its completion state, its tags, and the ring engine that
// allreduce, reduce-scatter, allgather and barrier are built on.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "reduce.h"
#include "tnt/collectives/communicator.h"
#include "tnt/transport/event_loop.h"
#include "tnt/transport/pair.h"
#include "topology.h"

namespace tnt::detail {

struct OperationState {
  OperationState(transport::EventLoop& event_loop, CompletionCallback on_done)
      : loop(event_loop), callback(std::move(on_done)) {}
  void complete(const std::string& failure);
  // Without the mutex: polling waits ask on every spin (Note [Cheap spins] in event_loop.cpp).
  // What complete() wrote before is visible to whoever sees `finished` true.
  bool done() const { return finished.load(std::memory_order_acquire); }

  transport::EventLoop& loop;
  CompletionCallback callback;
  bool held = false;                    // holds the loop (EventLoop::hold) until complete()
  bool awaited = false;                 // EventLoop::expect_waiter() until complete()
  std::uint16_t tag_check = 0;          // Note [Tags]: 12 bits from the call's signature
  std::atomic<bool> completing{false};  // complete() has begun: later calls do nothing
  std::atomic<bool> finished{false};    // and has run the callback: test() and wait() see it done
  std::string error;
  MessageStatus status;         // point-to-point: set before complete()
  bool error_is_local = false;  // a receive's own failure (truncation): TruncationError, not the job's JobError
};

// What operations need from the communicator; everything here is used on the event loop.
class CommunicatorCore {
 public:
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual transport::Pair& left() = 0;   // the job's ring (Note [Node-aware order]): receives come from here
  virtual transport::Pair& right() = 0;  // sends go here
  virtual const Topology& topology() const = 0;
  // A peer connected at start-up: the neighbours in the job's ring, in this host's ring and, when
  // topology().layered(), in this rank's ring across hosts.
  virtual transport::Pair& pair(int peer_rank) = 0;
  virtual std::size_t segment_bytes() const = 0;
  virtual int pipeline_depth() const = 0;
  // The context of this communicator's collectives (Note [Contexts]): the world's is 0.
  virtual std::uint32_t collective_context() const = 0;
  // The point-to-point messages of the collectives built on them (Note [Exchanges]).
  virtual class PointToPoint& collective_messages() = 0;
  // Scratch memory, recycled between operations so that steady-state steps allocate nothing.
  virtual std::vector<std::byte> acquire(std::size_t bytes) = 0;
  virtual void release(std::vector<std::byte> buffer) = 0;
  // Ends the operation (success when `failure` is empty); it is destroyed afterwards.
  virtual void complete(class Operation& op, const std::string& failure = {}) = 0;
  // Fails the whole job (sticky).
  virtual void fail_job(const std::string& reason) = 0;

 protected:
  ~CommunicatorCore() = default;
};

class Operation : public transport::CompletionSink {
 public:
  Operation(CommunicatorCore& core, std::uint64_t sequence, std::shared_ptr<OperationState> state)
      : core_(core), sequence_(sequence), state_(std::move(state)) {}
  virtual ~Operation() = default;
  virtual void start() = 0;
  OperationState& state() { return *state_; }
  std::uint64_t sequence() const { return sequence_; }

 protected:
  // Note [Tags]: a tag is the operation's sequence number (its place in the issue order, the
  // same on every rank; upper 20 bits), a check drawn from what was called (kind, type, operation
  // and root; next 12 bits) and a message index within the operation (lower 32 bits; phases of a
  // hierarchical operation start at multiples of 2^30). Messages of concurrent operations never
  // match each other's receives, and ranks that called different collectives at the same place
  // exchange nothing (but for one pair of calls in 4096): they wait, and the stall watch names
  // both calls (Note [Stall watch]). The size is not in the check, so a size mismatch is still
  // found by the first message that does not fit. Sequence numbers wrap: tags stay unique as long
  // as fewer than 2^20 operations are in flight at once.
  // The communicator's context goes with it (Note [Contexts] in transport/include/tnt/transport/pair.h).
  transport::Tag tag(std::uint64_t index) const {
    return {(sequence_ & 0xfffffu) << 44 | std::uint64_t{state_->tag_check} << 32 | (index & 0xffffffffu),
            core_.collective_context()};
  }
  void finish() { core_.complete(*this); }

  CommunicatorCore& core_;
  std::uint64_t sequence_;
  std::shared_ptr<OperationState> state_;
};

// Note [Ring schedule]: the buffer is cut into size() chunks. At step s rank r sends chunk
// (first_send_chunk - s) to rank r+1 and receives chunk (first_send_chunk - s - 1) from rank
// r-1; the first `reduce_steps` steps add what arrives into the local chunk (reduce-scatter),
// the next `copy_steps` store it (allgather). The chunk sent at step s+1 is the one received at
// step s, so each chunk is cut into segments and segment k of step s+1 leaves as soon as
// segment k of step s has arrived: transfer and reduction overlap along the ring. At most
// pipeline_depth() receives are posted per operation, in message order, each reduce step's
// into one of pipeline_depth() scratch slots.
//
// A ring is the job's (ring_size 0: every rank, in the order of Note [Node-aware order]) or any
// other ring of ranks (the hierarchical algorithms' rings within and across hosts): then
// ring_size and the two neighbours say which. Chunks are indexed by place in the ring.
// Messages use tag indices from tag_base on, so that consecutive rings of one operation over
// the same pair never match each other's messages.
struct RingLayout {
  int ring_size = 0;
  transport::Pair* left = nullptr;
  transport::Pair* right = nullptr;
  std::uint64_t tag_base = 0;
  std::byte* base = nullptr;
  std::size_t element_size = 1;
  // In elements, one per rank; inline up to kInlineRanks ranks, where a small allreduce spent
  // three of its heap allocations (callgrind, 2 ranks over TCP: the gather allreduce's issue
  // 2,291 -> 1,916 instructions with its reduction's inputs inline too, 2026-11-29).
  static constexpr std::size_t kInlineRanks = 8;
  boost::container::small_vector<std::size_t, kInlineRanks> chunk_offset;
  boost::container::small_vector<std::size_t, kInlineRanks> chunk_count;
  int reduce_steps = 0;
  int copy_steps = 0;
  int first_send_chunk = 0;
  ReduceFn reduce = nullptr;
  // Note [bf16 on the ring] in ring.cpp: the elements are float32 that hold bfloat16 values and
  // their sums, and they travel as bfloat16.
  bool bfloat16_on_wire = false;
};

class RingOperation : public Operation {
 public:
  using Operation::Operation;

 protected:
  void start_ring(RingLayout layout);
  // Called once every message of the ring has been sent and received; it may start another ring.
  virtual void ring_done() { finish(); }
  // The job's ring: its size and this rank's neighbours in it.
  RingLayout job_ring() const;

 private:
  void on_send_complete(std::uint64_t cookie) override;
  void on_recv_complete(std::uint64_t cookie, std::size_t bytes) override;
  void post_send(int step, std::size_t segment);
  void post_receives();
  int chunk_sent_at(int step) const;
  struct Span {
    std::size_t offset;  // elements from base
    std::size_t count;
  };
  Span segment_of(int chunk, std::size_t segment) const;
  void check_done();
  std::size_t wire_element_size() const;
  bfloat16* wire_at(int step, std::size_t offset);

  RingLayout layout_;
  int total_steps_ = 0;
  std::size_t segment_elements_ = 0;
  std::size_t segments_ = 0;
  std::uint64_t total_messages_ = 0;
  std::uint64_t next_receive_ = 0;
  std::uint64_t receives_done_ = 0;
  std::uint64_t sends_done_ = 0;
  std::vector<std::byte> slots_;
  std::vector<int> free_slots_;
  // Note [bf16 on the ring]: what travels, one half for the reduce steps and one for the copy
  // steps, and a received segment widened.
  std::vector<std::byte> wire_;
  std::size_t wire_count_ = 0;
  std::vector<float> widened_;
};

}  // namespace tnt::detail
