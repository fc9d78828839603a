#pragma once
// Note [Lanes]: a shared-memory channel's path for small frames (pair.h's Lane).
//
// Point-to-point's 8-byte message went through the ring (shm_transport.cpp) as a tagged Pair
// message: the envelope copied into a buffer of the engine's, into the ring, out of it into the
// envelope receive posted for it, and into the user's receive; a completion for the send and one
// for the receive, each through the loop. Most of a message's 0.3 us were that bookkeeping
// (callgrind, 2026-11-28), against 0.1 us for OpenMPI's vader, whose small messages go through a
// "fast box": the sender writes the message, with a header whose last word says it is there,
// straight into memory the receiver polls.
//
// A lane is that: one per direction of a pair, a byte ring of kLaneBytes in which each frame
// takes whole 64-byte lines, starting with a LaneRecord. The writer fills the record and the
// frame, then stores the record's `stamp`, which is the record's position in bytes ever written
// plus one: a reader at position p waits for stamp p + 1 and needs no head counter (one cache
// line moves per small message, not two), and a record left from an earlier lap never passes for
// a new one. A frame never wraps: where it would not fit before the end, a skip record fills the
// rest of the lap. The reader publishes `tail` (bytes ever read) after every frame; a writer that
// finds no room raises `writer_waiting` and looks again (Note [Waking a waiting writer] in
// shm_transport.cpp, the same handshake as the ring's). Frames carry their communicator's context:
// the pair hands each to the sink of its context, and holds those of a context with no sink yet.
//
// The lane lies in memory the other process writes: the reader checks every record against the
// lane before it believes it (fuzz/shm_lane_fuzz.cpp feeds it any contents).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace tnt::transport {

// Per direction. With 128 KiB, osu_bibw's window of 64 4-KiB messages did not fit, and the frames
// that waited for room made 4 KiB bidirectional bandwidth x 0.68 of the ring's; 256 and 512 KiB
// measured alike there (1 KiB to 64 KiB bw and bibw within 3 %, tnt-bench-p2p, 5 alternating
// rounds, 2026-11-29). 512 KiB made the first ten thousand 8-byte messages slower (0.12 us
// against 0.10 with 256 KiB and 64 KiB, an MPI ping-pong of 10,000 iterations; osu_latency 0.13
// against 0.10): two lanes of it do not stay in a 1 MiB L2.
inline constexpr std::size_t kLaneBytes = 256 * 1024;
inline constexpr std::size_t kLaneLine = 64;

struct LaneRecord {
  std::uint64_t stamp;        // position + 1, stored last (Note [Lanes])
  std::uint32_t frame_bytes;  // the frame after this header
  std::uint32_t context;      // kLaneSkip: the rest of the lap is empty
};
static_assert(sizeof(LaneRecord) == 16);
inline constexpr std::uint32_t kLaneSkip = 0xffffffffu;

// The largest frame: a record of a quarter of the lane, so that a writer always finds room once
// the reader has caught up.
inline constexpr std::size_t kLaneMaxFrame = kLaneBytes / 4 - sizeof(LaneRecord);

// The lane's shared state besides its bytes; the reader writes `tail`, the writer
// `writer_waiting` (and the reader clears it).
struct LaneControl {
  alignas(64) std::atomic<std::uint64_t> tail{0};
  alignas(64) std::atomic<std::uint32_t> writer_waiting{0};
};

// The reading side, over the lane's bytes only, so that a fuzz target can feed it anything.
class ShmLaneReader {
 public:
  // `lane`: kLaneBytes (any power of two).
  ShmLaneReader(std::string peer_name, std::span<const std::byte> lane);
  // The next frame, once its record is published: true, with the frame's context and bytes (in
  // the lane, valid until pop()). False while none is there, and after a protocol violation
  // (violation() names it), after which it takes nothing more.
  bool peek(std::uint32_t& context, std::span<const std::byte>& frame);
  void pop();                                   // after a peek() that returned true
  std::uint64_t tail() const { return tail_; }  // bytes ever read
  const std::string& violation() const { return violation_; }

 private:
  std::string peer_name_;
  std::span<const std::byte> lane_;
  std::uint64_t tail_ = 0;
  std::size_t record_bytes_ = 0;  // of the frame peek() found
  std::string violation_;
};

// The writing side.
class ShmLaneWriter {
 public:
  // `lane`: a power of two bytes, as the reader's.
  ShmLaneWriter(std::span<std::byte> lane, LaneControl& control);
  // Writes the frame head + data (at most kLaneMaxFrame bytes in all) for `context`; false when
  // the lane has no room now (writer_waiting is then raised).
  bool write(std::uint32_t context, const void* head, std::size_t head_bytes, const void* data, std::size_t bytes);
  // Whether the reader has read anything since the last write() that found no room.
  bool reader_moved() const { return control_.tail.load(std::memory_order_acquire) != tail_seen_; }

 private:
  bool room_for(std::size_t bytes);

  std::span<std::byte> lane_;
  LaneControl& control_;
  std::uint64_t head_ = 0;       // bytes ever written
  std::uint64_t tail_seen_ = 0;  // the reader's tail when last read
};

}  // namespace tnt::transport
