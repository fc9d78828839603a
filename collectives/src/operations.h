#pragma once
#include "operation.h"

namespace tnt::detail {

// What allreduce and reduce-scatter share: an in-place reduction of `count` elements along the
// ring, bfloat16 carried in float32.
class ReductionOperation : public RingOperation {
 public:
  ReductionOperation(CommunicatorCore& core, std::uint64_t sequence, std::shared_ptr<OperationState> state, void* data,
                     std::size_t count, DataType type, ReduceOp op)
      : RingOperation(core, sequence, std::move(state)), data_(data), count_(count), type_(type), op_(op) {}

 protected:
  // The reduce-scatter part of a ring over the data: bfloat16 is widened into work_ first, so
  // that partial sums travel and add up in float32.
  RingLayout reduction_layout();
  // Once `count` elements from `offset` are fully reduced: averages them, and narrows them back
  // into the data when they were carried wider; then gives work_ back.
  void finish_block(std::size_t offset, std::size_t count);

  void* data_;
  std::size_t count_;
  DataType type_;
  ReduceOp op_;
  std::vector<std::byte> work_;  // float32 copy of a bfloat16 buffer, or the gathered buffers
};

class AllreduceOperation final : public ReductionOperation {
 public:
  // `gather`: gather every rank's buffer and reduce in rank order (Note [Choosing an algorithm]).
  AllreduceOperation(CommunicatorCore& core, std::uint64_t sequence, std::shared_ptr<OperationState> state, void* data,
                     std::size_t count, DataType type, ReduceOp op, bool gather)
      : ReductionOperation(core, sequence, std::move(state), data, count, type, op), gather_(gather) {}
  void start() override;

 private:
  void ring_done() override;
  const bool gather_;
  bool small_ = false;
};

// Note [Hierarchical allreduce] in hierarchical.cpp.
class HierarchicalAllreduceOperation final : public ReductionOperation {
 public:
  using ReductionOperation::ReductionOperation;
  void start() override;

 private:
  void ring_done() override;
  void start_phase();
  RingLayout ring_over(const std::vector<int>& ranks, int place) const;

  std::byte* carried_ = nullptr;  // the data, or its float32 copy
  int phase_ = 0;
};

class ReduceScatterOperation final : public ReductionOperation {
 public:
  using ReductionOperation::ReductionOperation;
  void start() override;

 private:
  void ring_done() override;
};

class AllgatherOperation : public RingOperation {
 public:
  AllgatherOperation(CommunicatorCore& core, std::uint64_t sequence, std::shared_ptr<OperationState> state,
                     const void* send, void* recv, std::size_t bytes_per_rank)
      : RingOperation(core, sequence, std::move(state)), send_(send), recv_(recv), bytes_per_rank_(bytes_per_rank) {}
  void start() override;

 protected:
  const void* send_;
  void* recv_;
  std::size_t bytes_per_rank_;
  bool is_barrier_ = false;
};

// Note [Hierarchical allgather] in hierarchical.cpp.
class HierarchicalAllgatherOperation final : public RingOperation {
 public:
  HierarchicalAllgatherOperation(CommunicatorCore& core, std::uint64_t sequence, std::shared_ptr<OperationState> state,
                                 const void* send, void* recv, std::size_t bytes_per_rank)
      : RingOperation(core, sequence, std::move(state)), send_(send), recv_(recv), bytes_per_rank_(bytes_per_rank) {}
  void start() override;

 private:
  void ring_done() override;
  std::byte* staged(int local_index, int host);

  const void* send_;
  void* recv_;
  std::size_t bytes_per_rank_;
  std::vector<std::byte> staging_;
  int phase_ = 0;
};

class BarrierOperation final : public AllgatherOperation {
 public:
  BarrierOperation(CommunicatorCore& core, std::uint64_t sequence, std::shared_ptr<OperationState> state);

 private:
  std::vector<std::byte> tokens_;
};

class BroadcastOperation final : public Operation {
 public:
  BroadcastOperation(CommunicatorCore& core, std::uint64_t sequence, std::shared_ptr<OperationState> state, void* data,
                     std::size_t bytes, int root)
      : Operation(core, sequence, std::move(state)), data_(data), bytes_(bytes), root_(root) {}
  void start() override;

 private:
  void on_send_complete(std::uint64_t cookie) override;
  void on_recv_complete(std::uint64_t cookie, std::size_t bytes) override;
  void send_segment(std::uint64_t k);
  void post_receives();
  void check_done();

  void* data_;
  std::size_t bytes_;
  int root_;
  int distance_ = 0;  // hops from the root along the ring
  bool forwards_ = false;
  std::size_t segment_bytes_ = 0;
  std::uint64_t segments_ = 0;
  std::uint64_t next_receive_ = 0;
  std::uint64_t receives_done_ = 0;
  std::uint64_t sends_done_ = 0;
};

}  // namespace tnt::detail
