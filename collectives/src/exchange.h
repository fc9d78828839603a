#pragma once
// The collectives built on point-to-point messages (Note [Exchanges] in exchange.cpp): alltoall(v),
// allgatherv, gather(v), scatter(v), reduce to a root, scan, exscan and reduce-scatter with
// per-rank counts.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "operation.h"

namespace tnt::detail {

// Rounds of sends and receives, each round posted at once; the next starts when all of its
// transfers are done. Subclasses say what each round moves and do their local work between rounds.
class ExchangeOperation : public Operation {
 public:
  using Operation::Operation;
  void start() override { advance(); }

 protected:
  struct Transfer {
    bool send;
    int peer;
    std::byte* data;
    std::size_t bytes;
  };
  // Does the local work due before round `round` and fills its transfers; false once the
  // operation is complete. A round without transfers is skipped.
  virtual bool next_round(int round, std::vector<Transfer>& transfers) = 0;
  virtual const char* name() const = 0;

 private:
  void advance();
  void on_transfer(const std::string& error);
  void on_send_complete(std::uint64_t) override {}
  void on_recv_complete(std::uint64_t, std::size_t) override {}

  int round_ = 0;
  std::size_t pending_ = 0;
};

// Per-peer byte counts and offsets of the *v collectives, copied from the caller.
struct Layout {
  std::vector<std::size_t> bytes;
  std::vector<std::size_t> offsets;
};

// Note [Exchanges]: step k sends to rank + k and receives from rank - k; each round posts the
// next `peers_per_round` steps at once.
class AlltoallvOperation final : public ExchangeOperation {
 public:
  AlltoallvOperation(CommunicatorCore& core, std::uint64_t sequence, std::shared_ptr<OperationState> state,
                     const void* send, Layout sends, void* recv, Layout receives, int peers_per_round)
      : ExchangeOperation(core, sequence, std::move(state)),
        send_(static_cast<const std::byte*>(send)),
        sends_(std::move(sends)),
        recv_(static_cast<std::byte*>(recv)),
        receives_(std::move(receives)),
        peers_per_round_(peers_per_round) {}

 private:
  bool next_round(int round, std::vector<Transfer>& transfers) override;
  const char* name() const override { return "alltoall"; }
  void add_exchange(int to, int from, std::vector<Transfer>& transfers) const;
  const std::byte* send_;
  Layout sends_;
  std::byte* recv_;
  Layout receives_;
  int peers_per_round_;
};

// gather(v) (`to_root`) and scatter(v): the root's side is a layout over every rank, the others'
// one block.
class RootedOperation final : public ExchangeOperation {
 public:
  RootedOperation(CommunicatorCore& core, std::uint64_t sequence, std::shared_ptr<OperationState> state, bool to_root,
                  const void* mine, std::size_t my_bytes, void* all, Layout layout, int root)
      : ExchangeOperation(core, sequence, std::move(state)),
        to_root_(to_root),
        mine_(static_cast<std::byte*>(const_cast<void*>(mine))),
        my_bytes_(my_bytes),
        all_(static_cast<std::byte*>(all)),
        layout_(std::move(layout)),
        root_(root) {}

 private:
  bool next_round(int round, std::vector<Transfer>& transfers) override;
  const char* name() const override { return to_root_ ? "gather" : "scatter"; }
  bool to_root_;
  std::byte* mine_;
  std::size_t my_bytes_;
  std::byte* all_;
  Layout layout_;
  int root_;
};

class AllgathervOperation final : public ExchangeOperation {
 public:
  AllgathervOperation(CommunicatorCore& core, std::uint64_t sequence, std::shared_ptr<OperationState> state,
                      const void* send, std::size_t send_bytes, void* recv, Layout receives)
      : ExchangeOperation(core, sequence, std::move(state)),
        send_(static_cast<const std::byte*>(send)),
        send_bytes_(send_bytes),
        recv_(static_cast<std::byte*>(recv)),
        receives_(std::move(receives)) {}

 private:
  bool next_round(int round, std::vector<Transfer>& transfers) override;
  const char* name() const override { return "allgatherv"; }
  const std::byte* send_;
  std::size_t send_bytes_;
  std::byte* recv_;
  Layout receives_;
};

// reduce to a root, and reduce-scatter with per-rank counts: every result is the fold of the
// ranks' inputs in rank order (reduce_in_order), so that it does not depend on who computes it.
class FoldOperation final : public ExchangeOperation {
 public:
  // reduce: `counts` empty, the result (`count` elements) at `root`; reduce-scatter: rank r's
  // result is counts[r] elements, from offset counts[0] + ... + counts[r-1] of every input.
  FoldOperation(CommunicatorCore& core, std::uint64_t sequence, std::shared_ptr<OperationState> state, const void* send,
                void* recv, std::size_t count, std::vector<std::size_t> counts, DataType type, ReduceOp op, int root)
      : ExchangeOperation(core, sequence, std::move(state)),
        send_(static_cast<const std::byte*>(send)),
        recv_(static_cast<std::byte*>(recv)),
        count_(count),
        counts_(std::move(counts)),
        type_(type),
        op_(op),
        root_(root) {}

 private:
  bool next_round(int round, std::vector<Transfer>& transfers) override;
  const char* name() const override { return counts_.empty() ? "reduce" : "reduce_scatter"; }
  std::size_t offset_of(int rank) const;  // reduce-scatter: in elements
  const std::byte* send_;
  std::byte* recv_;
  std::size_t count_;
  std::vector<std::size_t> counts_;
  DataType type_;
  ReduceOp op_;
  int root_;
  std::vector<std::byte> received_;  // the other ranks' blocks, by rank
};

// scan (inclusive) and exscan: a chain in rank order, rank r folding what r - 1 sends it.
class ScanOperation final : public ExchangeOperation {
 public:
  ScanOperation(CommunicatorCore& core, std::uint64_t sequence, std::shared_ptr<OperationState> state, const void* send,
                void* recv, std::size_t count, DataType type, ReduceOp op, bool exclusive)
      : ExchangeOperation(core, sequence, std::move(state)),
        send_(static_cast<const std::byte*>(send)),
        recv_(static_cast<std::byte*>(recv)),
        count_(count),
        type_(type),
        op_(op),
        exclusive_(exclusive) {}

 private:
  bool next_round(int round, std::vector<Transfer>& transfers) override;
  const char* name() const override { return exclusive_ ? "exscan" : "scan"; }
  const std::byte* send_;
  std::byte* recv_;
  std::size_t count_;
  DataType type_;
  ReduceOp op_;
  bool exclusive_;
  std::vector<std::byte> prefix_;  // what the previous rank sent
  std::vector<std::byte> carry_;   // what this rank sends on
};

}  // namespace tnt::detail
