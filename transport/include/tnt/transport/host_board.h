#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tnt/transport/event_loop.h"

namespace tnt::transport {

// Every rank of one host posts one message per round to a board in shared memory that all of the
// host's ranks read in place (Note [Host board] in transport/src/shm/host_board.cpp). It serves
// collectives whose ranks all share a host: a small allreduce is one round, with no event loop, no
// socket and no system call on the way while the ranks keep up with each other.
//
// Rounds: every member takes part in every round, in the same order; a rank calls post_area(),
// writes its message there, publish(), gather(), and reads message() of every member. A round may
// have more steps: after a gather(), a rank may change its own area (never the part another rank
// reads in that step), publish_step() and gather() again. What a rank reads stays valid until
// it begins its next round.
// Threading: one thread at a time per rank.
class HostBoard {
 public:
  // How a rank waits for the others: it polls for what `window` allows, then sleeps in slices
  // of a few milliseconds, after each of which `abandon` may end the wait (the job failed).
  struct Wait {
    PollWindow& window;
    const std::function<bool()>& abandon;
  };
  struct Message {
    const std::byte* data;
    std::size_t bytes;
    std::uint64_t signature;
  };

  virtual ~HostBoard() = default;
  // The host's ranks on the board, in rank order, and this rank's place among them.
  virtual const std::vector<int>& members() const = 0;
  virtual int place() const = 0;
  // The largest collective the board serves: the least any member offers, so all ranks agree.
  virtual std::size_t capacity() const = 0;
  // Bytes a message may hold (at most capacity()); larger collectives take several rounds.
  virtual std::size_t area_bytes() const = 0;
  // Begins a round: where this rank writes its message of `bytes` (at most area_bytes(); every
  // member posts the same size in a round). Never waits: the rounds use two areas in turn (Note
  // [Host board]).
  virtual std::byte* post_area(std::size_t bytes) = 0;
  // Makes the message written to post_area() visible, with a signature of the call it belongs to.
  virtual void publish(std::size_t bytes, std::uint64_t signature) = 0;
  // Another step of the round: what this rank changed in its area since the last gather().
  virtual void publish_step() = 0;
  // Waits until every member has published as many steps as this rank; false if abandoned.
  virtual bool gather(const Wait& wait) = 0;
  // Member `member_place`'s message of this round.
  virtual Message message(int member_place) const = 0;
};

// This rank's board segment, made before the address book exists, and what the other ranks of
// its host need to open it ("pid:fd"). `capacity` 0: no board.
class BoardOffer {
 public:
  BoardOffer(int rank, std::size_t capacity);
  ~BoardOffer();
  BoardOffer(const BoardOffer&) = delete;
  BoardOffer& operator=(const BoardOffer&) = delete;
  std::string address() const;
  // The board of `members` (this host's ranks, in rank order, this rank among them), whose
  // segments are at `addresses` (one per member, this rank's own included). Throws JobError
  // when a member's segment cannot be opened or is not a board.
  std::unique_ptr<HostBoard> join(const std::vector<int>& members, const std::vector<std::string>& addresses);

  struct Segment;  // one member's mapped segment (host_board.cpp)

 private:
  int rank_;
  int fd_ = -1;
  std::shared_ptr<Segment> own_;
};

}  // namespace tnt::transport
