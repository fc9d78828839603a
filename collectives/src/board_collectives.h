#pragma once
// The blocking allreduce, barrier, alltoall and broadcast on the host board (Note [Host board] in
// transport/src/shm/host_board.cpp): every rank of the job on one host, no channel, no event
// loop. Used by the calling thread only (collectives are called one at a time).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "call_log.h"
#include "tnt/collectives/types.h"
#include "tnt/transport/event_loop.h"
#include "tnt/transport/host_board.h"

namespace tnt::detail {

// What the board's calls need from their communicator.
class BoardOwner {
 public:
  // Gives a call its sequence number (Note [Stall watch]), or throws where no collective may be
  // issued now (the job failed, the communicator finished).
  virtual std::uint64_t issue_board_call(const CallSignature& call, std::uint64_t signature) = 0;
  virtual void board_call_completed(std::uint64_t sequence) = 0;
  // The job's failure, once it failed ("" before): a wait on the board gives up on it.
  virtual bool failed() const = 0;
  virtual std::string failure() const = 0;
  // Fails the job for every rank (ranks called different collectives).
  virtual void fail_from_caller(const std::string& reason) = 0;

 protected:
  ~BoardOwner() = default;
};

class BoardCollectives {
 public:
  BoardCollectives(transport::HostBoard& board, int rank, int size, transport::PollWindow& window, BoardOwner& owner);

  // In place, over every rank; the caller has checked that the board serves this size
  // (choose_algorithm). Every rank computes bitwise the same result, reduced in rank order.
  void allreduce(void* data, std::size_t count, DataType type, ReduceOp op, const CallSignature& call);
  void barrier(const CallSignature& call);
  // Block r of `send` (bytes_per_rank each) goes to rank r, block r of `recv` comes from it
  // (Note [Alltoall on the board]).
  void alltoall(const void* send, void* recv, std::size_t bytes_per_rank, const CallSignature& call);
  // `bytes` of the root's `data` into every rank's `data`, in one round.
  void broadcast(void* data, std::size_t bytes, int root, const CallSignature& call);

 private:
  class Call;
  transport::HostBoard::Wait wait();
  template <class Read>
  void round(const Call& record, const void* data, std::size_t bytes, const Read& read);

  // Up to this size every rank reduces every message; above, each its own block (one step more).
  static constexpr std::size_t kWholeBytes = 8 << 10;

  transport::HostBoard& board_;
  const int rank_;
  const int size_;
  transport::PollWindow& window_;
  BoardOwner& owner_;
  const std::function<bool()> abandon_;
  std::vector<const std::byte*> inputs_;
};

}  // namespace tnt::detail
