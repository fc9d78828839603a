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

// Receives what comes along one context of a Lane (below), on the transport's executor.
class LaneSink {
 public:
  // The next frame from the channel's peer, in the order sent; valid only during the call. Bytes
  // the peer wrote: the sink checks them before it believes them.
  virtual void on_lane_frame(const std::byte* frame, std::size_t bytes) = 0;
  // A write() that found the lane full may be tried again.
  virtual void on_lane_room() = 0;

 protected:
  ~LaneSink() = default;
};

// Note [Lanes] (transport/src/shm/shm_lane.h): small frames to one peer, written by the caller
// straight into memory the peer reads, in order per context, with no completion to wait for and
// no tag to match. Point-to-point sends its envelopes (and eager data) this way where the channel
// has a lane. Same concurrency contract as the Pair's.
class Lane {
 public:
  // The largest frame write() takes.
  virtual std::size_t max_frame_bytes() const = 0;
  // Writes the frame `head` + `data` for `context`: true once it is in the lane (the buffers are
  // free again), false when the lane is full now (the sinks' on_lane_room() follows).
  virtual bool write(std::uint32_t context, const void* head, std::size_t head_bytes, const void* data,
                     std::size_t bytes) = 0;
  // Frames of `context` go to `sink`, those that came before it included; null: held again.
  virtual void set_sink(std::uint32_t context, LaneSink* sink) = 0;
  // Hands what came to the sinks now (the loop's pollers do it too); true if anything came. For a
  // caller that waits for this lane alone (Note [Spinning here] in event_loop.cpp).
  virtual bool read() = 0;

 protected:
  ~Lane() = default;
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
  // Its lane (Note [Lanes]), or null where the back end has none.
  virtual Lane* lane() { return nullptr; }
};

}  // namespace tnt::transport
