#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tnt/transport/pair.h"

namespace tnt::transport {

// Note [Shared-memory chunks]: what one rank writes into its ring for the other. Every chunk is
// a ShmChunkHeader followed by `chunk_bytes` of payload. A message travels as kShmData chunks of
// at most a quarter of the ring each, one after the other (the writer never interleaves two
// messages); a message of Note [Single copy] (shm_transport.cpp) travels as one kShmReadMe chunk
// whose payload is a ShmReadMe, and the reader answers it with a kShmReadDone chunk that carries
// only the id. The ring lies in memory that the other process writes: the reader checks every
// header against the ring and the receive before it believes it.
enum ShmChunkKind : std::uint32_t { kShmData = 0, kShmReadMe = 1, kShmReadDone = 2 };

struct ShmChunkHeader {
  std::uint64_t tag;
  std::uint64_t message_bytes;
  std::uint64_t chunk_bytes;
  std::uint32_t kind;
  std::uint32_t context;  // Note [Contexts] in pair.h
  Tag full_tag() const { return Tag{tag, context}; }
};
static_assert(sizeof(ShmChunkHeader) == 32);

// The payload of a kShmReadMe chunk; a kShmReadDone chunk carries only the id.
struct ShmReadMe {
  std::uint64_t address;
  std::uint64_t id;
};

// An authenticated peer can still be buggy: no single message may claim more than this.
inline constexpr std::uint64_t kShmMaxMessageBytes = std::uint64_t{1} << 31;

// The largest chunk a ring of `ring_bytes` carries: the writer cuts messages into chunks of at
// most this, and the reader (ShmInbox) refuses larger ones as a protocol violation.
constexpr std::uint64_t shm_max_chunk(std::uint64_t ring_bytes) { return ring_bytes / 4; }

// The reading side of one shared-memory ring, without the segment, the process or the event
// loop: it parses the chunks the other rank published, matches them to the receives posted here
// and to the reads this side offered (Note [Single copy]), and says what they complete. It reads
// the ring through a plain span and a head position handed in, and keeps its own tail, so that a
// fuzz target can feed it any ring contents and any head (fuzz/shm_chunks_fuzz.cpp). After a
// protocol violation (violation() says which, naming the peer) it takes and completes nothing.
class ShmInbox {
 public:
  struct Receive {
    Tag tag;
    void* data;
    std::size_t capacity;
    CompletionSink* sink;
    std::uint64_t cookie;
  };
  // What a chunk or a posted receive completes.
  struct Event {
    enum Kind : std::uint8_t {
      kReceived,    // the receive (sink, cookie) holds its message of `bytes`
      kReadRemote,  // the receive's `bytes` are still to be read at `remote` into `destination`,
                    // then answered with a kShmReadDone for remote.id (Note [Single copy])
      kSendDone,    // the peer read the send (sink, cookie) that this side offered
    };
    Kind kind;
    CompletionSink* sink;
    std::uint64_t cookie;
    std::size_t bytes = 0;
    void* destination = nullptr;
    ShmReadMe remote{};
  };

  // `ring`: the inbound ring, of a power of two bytes; chunks hold at most a quarter of it.
  ShmInbox(std::string peer_name, std::span<const std::byte> ring);

  // Takes the next chunk that the writer published before `head` (the writer's count of bytes
  // ever written): true when it took one, and then tail() moved past it and `event` says what it
  // completed, if anything. False when no chunk is there, or after a violation.
  bool take(std::uint64_t head, std::optional<Event>& event);
  // The count of bytes ever read: what the reader publishes as its tail.
  std::uint64_t tail() const { return tail_; }
  // A receive posted by the channel's user: a message that came before it completes it at once
  // (the caller reports that later, never inside its user's call); else it waits.
  std::optional<Event> post(const Receive& receive);
  // This side offered a send by Note [Single copy] under `id`: the peer's kShmReadDone for it
  // completes (sink, cookie).
  void await_read_done(std::uint64_t id, CompletionSink* sink, std::uint64_t cookie);
  const std::string& violation() const { return violation_; }

 private:
  // A message that came before its receive: its bytes, or where to read them (Note [Single copy]).
  struct Staged {
    Tag tag;
    std::vector<std::byte> buffer;
    std::size_t bytes;
    std::optional<ShmReadMe> remote;
  };
  // The message whose kShmData chunks are being read: into its receive, or else into `staging`
  // (Note [Staging as chunks come] in shm_inbox.cpp).
  struct Arriving {
    Tag tag;
    std::size_t bytes;
    std::size_t received = 0;
    std::optional<Receive> receive;
    std::vector<std::byte> staging;
    std::byte* destination() { return receive ? static_cast<std::byte*>(receive->data) : staging.data(); }
  };
  struct AwaitingRead {
    std::uint64_t id;
    CompletionSink* sink;
    std::uint64_t cookie;
  };

  void copy_out(std::uint64_t position, void* to, std::size_t bytes) const;
  bool take_control(const ShmChunkHeader& header, std::optional<Event>& event);
  bool begin(const ShmChunkHeader& header);
  std::optional<Event> finish();
  std::optional<Receive> take_posted(Tag tag);
  std::optional<Event> take_staged(std::size_t index, const Receive& receive);
  void fail(const std::string& what);
  void fail_size(Tag tag, std::uint64_t bytes, std::size_t capacity);

  std::string peer_name_;
  const std::byte* ring_;
  std::uint64_t ring_mask_;  // ring bytes - 1
  std::uint64_t max_chunk_;  // shm_max_chunk of the ring
  std::uint64_t tail_ = 0;
  std::optional<Arriving> arriving_;
  std::vector<Receive> posted_;
  std::vector<Staged> staged_;
  std::vector<std::vector<std::byte>> spare_;  // staging buffers kept for reuse
  std::vector<AwaitingRead> awaiting_read_;
  std::string violation_;
};

}  // namespace tnt::transport
