#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tnt::transport {

// What a message is matched by: its communicator's context and a tag within it. Note [Contexts]:
// every communicator (the world, each dup and split) has context ids of its own, the same on
// each of its ranks and different from those of every other communicator that any of its ranks
// belongs to, so messages of two communicators between the same two ranks never match each
// other's receives, whatever their tags. Ids are 32 bits, tags 64.
struct Tag {
  std::uint64_t value = 0;
  std::uint32_t context = 0;
  friend bool operator==(const Tag&, const Tag&) = default;
};

// For messages: "77", or "77 in context 3" outside the world's collectives.
inline std::string to_string(const Tag& tag) {
  return tag.context == 0 ? std::to_string(tag.value)
                          : std::to_string(tag.value) + " in context " + std::to_string(tag.context);
}

// Receives the completion of a send or receive posted on a Pair. `cookie` is the value
// given when the operation was posted, so one sink can track many operations without
// allocating a closure per segment.
class CompletionSink {
 public:
  virtual void on_send_complete(std::uint64_t cookie) = 0;
  virtual void on_recv_complete(std::uint64_t cookie, std::size_t bytes) = 0;

 protected:
  ~CompletionSink() = default;
};

// A reliable, ordered, authenticated channel to one peer rank, carrying tagged messages.
//
// Concurrency contract: every call, and every completion, happens on the transport's
// executor (Transport::executor()); no call may be made from another thread. Any number
// of sends and receives may be pending at once.
//
// Matching: a message sent with tag T completes the receive posted with tag T (the same value
// and context) on the other side, whatever the order in which the two sides posted. Tags must be
// unique among the messages in flight between two ranks (collectives build them from an
// operation's sequence number and a message index, point-to-point from a per-peer sequence). A message that arrives
// before its receive is posted is held by the transport until the receive is posted.
//
// Buffers: a send's buffer must stay unchanged, and a receive's buffer untouched, until
// the completion. A receive's buffer must be at least as large as the message.
//
// Errors: a failed channel (peer lost, timeout, protocol violation) completes nothing more;
// the transport reports the error once to its error handler (Transport::set_error_handler).
class Pair {
 public:
  virtual ~Pair() = default;
  virtual void send(Tag tag, const void* data, std::size_t bytes, CompletionSink& sink, std::uint64_t cookie) = 0;
  virtual void recv(Tag tag, void* data, std::size_t capacity, CompletionSink& sink, std::uint64_t cookie) = 0;
  virtual int peer_rank() const = 0;
  // The largest message that point-to-point should send eagerly (copied, without waiting for its
  // receive) over this channel where the user set no limit (TNT_P2P_EAGER_KB); 0: no preference.
  // Both sides of a channel must give the same answer.
  virtual std::size_t preferred_eager_bytes() const { return 0; }
};

}  // namespace tnt::transport
