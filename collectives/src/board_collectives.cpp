#include "board_collectives.h"

#include <algorithm>
#include <exception>

#include "reduce.h"
#include "tnt/collectives/communicator.h"
#include "tnt/core/copy.h"
#include "tnt/core/error.h"

namespace tnt::detail {

// One collective on the board, one or more rounds: recorded as issued for the stall watch on
// construction, as completed when all its rounds are done (not when one threw).
class BoardCollectives::Call {
 public:
  Call(BoardOwner& owner, const CallSignature& issued)
      : owner_(owner),
        call(issued),
        signature(issued.hash(true)),
        sequence_(owner.issue_board_call(issued, signature)) {}
  ~Call() {
    if (std::uncaught_exceptions() == exceptions_at_start_) owner_.board_call_completed(sequence_);
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

 private:
  BoardOwner& owner_;

 public:
  const CallSignature& call;
  const std::uint64_t signature;

 private:
  const std::uint64_t sequence_;
  const int exceptions_at_start_ = std::uncaught_exceptions();
};

BoardCollectives::BoardCollectives(transport::HostBoard& board, int rank, int size, transport::PollWindow& window,
                                   BoardOwner& owner)
    : board_(board),
      rank_(rank),
      size_(size),
      window_(window),
      owner_(owner),
      abandon_([&owner] { return owner.failed(); }),
      inputs_(static_cast<std::size_t>(size)) {}

transport::HostBoard::Wait BoardCollectives::wait() { return {window_, abandon_}; }

// Every rank decides alike: the board holds all ranks or none, and its capacity is the least any
// rank offers.
void BoardCollectives::allreduce(void* data, std::size_t count, DataType type, ReduceOp op, const CallSignature& call) {
  const std::size_t bytes = count * size_of(type);
  auto* out = static_cast<std::byte*>(data);
  const std::size_t element = size_of(type);
  auto area_of = [&](int r) { return board_.message(r).data; };
  const Call record(owner_, call);
  if (bytes <= kWholeBytes) {
    // Every rank reduces every message: one step.
    round(record, data, bytes, [&](std::byte*) {
      for (int r = 0; r < size_; ++r) inputs_[static_cast<std::size_t>(r)] = area_of(r);
      reduce_in_order(inputs_, out, count, type, op);
    });
    return;
  }
  // Piece by piece, one round each: each rank reduces its own block of every message into the
  // caller's buffer and puts it back in its own area (no other rank reads that block of it in
  // this step); then every rank copies the other blocks out of their owners' areas.
  const std::size_t piece_count = std::max<std::size_t>(1, board_.area_bytes() / element);
  for (std::size_t first = 0; first < count; first += piece_count) {
    const std::size_t in_piece = std::min(piece_count, count - first);
    std::byte* piece = out + first * element;
    round(record, piece, in_piece * element, [&](std::byte* own_area) {
      const auto mine = Communicator::block(in_piece, size_, rank_);
      const std::size_t offset = mine.offset * element;
      for (int r = 0; r < size_; ++r) inputs_[static_cast<std::size_t>(r)] = area_of(r) + offset;
      reduce_in_order(inputs_, piece + offset, mine.count, type, op);
      copy_bytes(own_area + offset, piece + offset, mine.count * element);
      board_.publish_step();
      if (!board_.gather(wait())) throw JobError(owner_.failure());
      for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        const auto theirs = Communicator::block(in_piece, size_, r);
        copy_bytes(piece + theirs.offset * element, area_of(r) + theirs.offset * element, theirs.count * element);
      }
    });
  }
}

void BoardCollectives::barrier(const CallSignature& call) {
  round(Call(owner_, call), nullptr, 0, [](std::byte*) {});
}

// Note [Alltoall on the board]: a rank puts all its blocks up at once, in destination order, and
// takes its own block out of every rank's area: one round, where the exchange (Note [Exchanges])
// sends and receives size - 1 messages through the event loop, each with its envelope, matching
// and completion. choose_algorithm sends an alltoall here only where all of a rank's blocks fit
// one area (Note [Choosing an algorithm] says why not larger ones).
void BoardCollectives::alltoall(const void* send, void* recv, std::size_t bytes_per_rank, const CallSignature& call) {
  auto* to = static_cast<std::byte*>(recv);
  const auto ranks = static_cast<std::size_t>(size_);
  const auto me = static_cast<std::size_t>(rank_);
  if (bytes_per_rank * ranks > board_.area_bytes()) throw LogicError("alltoall: the blocks do not fit the host board");
  round(Call(owner_, call), send, bytes_per_rank * ranks, [&](std::byte*) {
    for (std::size_t r = 0; r < ranks; ++r)
      copy_bytes(to + r * bytes_per_rank, board_.message(static_cast<int>(r)).data + me * bytes_per_rank,
                 bytes_per_rank);
  });
}

// The root's message alone carries the data; the others announce its size and write nothing,
// and copy it out of the root's area.
void BoardCollectives::broadcast(void* data, std::size_t bytes, int root, const CallSignature& call) {
  if (bytes > board_.area_bytes()) throw LogicError("broadcast: the message does not fit the host board");
  const bool rooted_here = root == rank_;
  round(Call(owner_, call), rooted_here ? data : nullptr, bytes, [&](std::byte*) {
    if (!rooted_here) copy_bytes(data, board_.message(root).data, bytes);
  });
}

// One round on the board: this rank's `bytes` from `data` go up (`data` null: announced, not
// written), and `read(own area)` runs once every rank's message of the round is there and
// matches this rank's call.
template <class Read>
void BoardCollectives::round(const Call& record, const void* data, std::size_t bytes, const Read& read) {
  if (owner_.failed()) throw JobError(owner_.failure());
  std::byte* area = board_.post_area(bytes);
  if (data) copy_bytes(area, data, bytes);
  board_.publish(bytes, record.signature);
  if (!board_.gather(wait())) throw JobError(owner_.failure());
  for (int r = 0; r < size_; ++r) {
    const auto message = board_.message(r);
    if (message.signature == record.signature && message.bytes == bytes) continue;
    // Every rank compares every message, so each side of a mismatch fails on its own.
    const std::string reason = "rank " + std::to_string(r) + " called another collective (" +
                               std::to_string(message.bytes) + " bytes) where rank " + std::to_string(rank_) +
                               " called " + record.call.describe() +
                               ": every rank must issue the same collectives in the same order";
    owner_.fail_from_caller(reason);
    throw JobError(reason);
  }
  read(area);
}

}  // namespace tnt::detail
