#include "shm_lane.h"

#include <cstring>

#include "tnt/core/copy.h"
#include "tnt/core/error.h"

namespace tnt::transport {

namespace {

std::size_t record_bytes(std::size_t frame_bytes) {
  return (sizeof(LaneRecord) + frame_bytes + kLaneLine - 1) / kLaneLine * kLaneLine;
}

// The stamp is the one word both sides touch at once: the writer stores it last, the reader
// loads it first (acquire: the record's other fields and the frame are then visible).
std::uint64_t load_stamp(const std::byte* record) {
  return __atomic_load_n(reinterpret_cast<const std::uint64_t*>(record), __ATOMIC_ACQUIRE);
}

}  // namespace

namespace {
std::size_t power_of_two(std::size_t bytes) {
  if (bytes == 0 || (bytes & (bytes - 1)) != 0)
    throw LogicError("a shared-memory lane of " + std::to_string(bytes) + " bytes (a power of two is needed)");
  return bytes;
}
}  // namespace

ShmLaneReader::ShmLaneReader(std::string peer_name, std::span<const std::byte> lane)
    : peer_name_(std::move(peer_name)), lane_(lane.first(power_of_two(lane.size()))) {}

ShmLaneWriter::ShmLaneWriter(std::span<std::byte> lane, LaneControl& control)
    : lane_(lane.first(power_of_two(lane.size()))), control_(control) {}

bool ShmLaneReader::peek(std::uint32_t& context, std::span<const std::byte>& frame) {
  while (violation_.empty()) {
    const std::size_t at = tail_ & (lane_.size() - 1);  // a power of two: no division per look
    const std::byte* where = lane_.data() + at;
    if (load_stamp(where) != tail_ + 1) return false;
    LaneRecord record;
    std::memcpy(&record, where, sizeof record);  // read once: the peer could still change it
    if (record.context == kLaneSkip) {
      if (record.frame_bytes != 0) {
        violation_ = "a lane skip record with " + std::to_string(record.frame_bytes) + " bytes from " + peer_name_;
        return false;
      }
      tail_ += lane_.size() - at;
      continue;
    }
    const std::size_t bytes = record_bytes(record.frame_bytes);
    if (record.frame_bytes > kLaneMaxFrame || at + bytes > lane_.size()) {
      violation_ = "a lane frame of " + std::to_string(record.frame_bytes) + " bytes at " + std::to_string(at) +
                   " of its lane from " + peer_name_;
      return false;
    }
    // Note [Owning lines ahead]: the frame's other lines are asked for together, not one by one
    // as the copy reaches them.
    for (std::size_t line = kLaneLine; line < bytes; line += kLaneLine) __builtin_prefetch(where + line, 0, 3);
    context = record.context;
    frame = lane_.subspan(at + sizeof record, record.frame_bytes);
    record_bytes_ = bytes;
    return true;
  }
  return false;
}

void ShmLaneReader::pop() {
  tail_ += record_bytes_;
  record_bytes_ = 0;
}

bool ShmLaneWriter::room_for(std::size_t bytes) {
  if (lane_.size() - (head_ - tail_seen_) >= bytes) return true;
  tail_seen_ = control_.tail.load(std::memory_order_acquire);
  if (lane_.size() - (head_ - tail_seen_) >= bytes) return true;
  // Note [Waking a waiting writer] in shm_transport.cpp
  control_.writer_waiting.store(1);
  tail_seen_ = control_.tail.load();
  if (lane_.size() - (head_ - tail_seen_) < bytes) return false;
  control_.writer_waiting.store(0);
  return true;
}

// Note [Owning lines ahead]: a frame's lines were last read by the other rank, a lap ago, so the
// writer must take each back from the reader's cache before its stores land, and the reader then
// takes each from the writer's. Done one line at a time, as the copies reach them, a frame of more
// than a few lines cost a cross-core trip per line: 512 bytes took twice 256 bytes' time. So the
// writer asks for all of a frame's lines at once (prefetch for writing) before it copies, and
// right after a frame it asks for the lines of a next frame of the same size (a halo exchange
// sends the same size every time), but the first, on which the reader is polling for the stamp;
// the reader asks for all lines of a frame it found before it copies any. A prefetch changes no
// data, so a wrong guess only costs a line's trip. Measured 2026-11-29 (07:40 UTC), tnt-bench-p2p
// latency, 2 ranks under chrt, 5 alternating rounds, medians, us, before / after (OpenMPI's vader
// from compare_osu.sh the same morning): 256 B 0.10 / 0.09 (0.12), 512 B 0.21 / 0.10 (0.18),
// 1 KiB 0.24 / 0.20 (0.18), 2 KiB 0.27 / 0.26 (0.20), 4 KiB 0.33 / 0.30, 8 KiB 0.58 / 0.41,
// 16 KiB 0.94 / 0.84; 8 bytes 0.08-0.09 in both. Bandwidth and bidirectional bandwidth from
// 256 B to 1 MiB alike within the rounds' spread (3 rounds).
bool ShmLaneWriter::write(std::uint32_t context, const void* head, std::size_t head_bytes, const void* data,
                          std::size_t bytes) {
  const std::size_t frame_bytes = head_bytes + bytes;
  const std::size_t record = record_bytes(frame_bytes);
  const std::size_t at = head_ & (lane_.size() - 1);
  const std::size_t skip = at + record > lane_.size() ? lane_.size() - at : 0;
  if (!room_for(skip + record)) return false;
  if (skip) {
    std::byte* where = lane_.data() + at;
    const LaneRecord empty{0, 0, kLaneSkip};
    std::memcpy(where + sizeof empty.stamp, &empty.frame_bytes, sizeof empty - sizeof empty.stamp);
    __atomic_store_n(reinterpret_cast<std::uint64_t*>(where), head_ + 1, __ATOMIC_RELEASE);
    head_ += skip;
  }
  std::byte* where = lane_.data() + (head_ & (lane_.size() - 1));
  // The frame is head + data. Its bytes past the record's first line go first, and the first line
  // (header, the frame's start, the stamp) last, in one burst: the reader polls that line, and a
  // first line written before the rest and stamped after it was taken from the writer in between
  // (tnt-bench-p2p latency 256 bytes to 2 KiB x 1.15-1.35, 2026-11-29).
  const auto copy_frame = [&](std::size_t begin, std::size_t end) {
    const auto* head_bytes_at = static_cast<const std::byte*>(head);
    const auto* data_bytes_at = static_cast<const std::byte*>(data);
    std::byte* to = where + sizeof(LaneRecord) + begin;
    if (begin < head_bytes) {
      const std::size_t from_head = std::min(end, head_bytes) - begin;
      std::memcpy(to, head_bytes_at + begin, from_head);
      to += from_head;
      begin += from_head;
    }
    if (begin >= end) return;
    const std::size_t length = end - begin;
    // copy_bytes is for large copies; a call to it cost an 8-byte message a few percent.
    if (length <= kLaneLine)
      std::memcpy(to, data_bytes_at + (begin - head_bytes), length);
    else
      copy_bytes(to, data_bytes_at + (begin - head_bytes), length);
  };
  constexpr std::size_t kFirstLineFrame = kLaneLine - sizeof(LaneRecord);
  // Note [Owning lines ahead]
  for (std::size_t line = kLaneLine; line < record; line += kLaneLine) __builtin_prefetch(where + line, 1, 3);
  if (frame_bytes > kFirstLineFrame) copy_frame(kFirstLineFrame, frame_bytes);
  const LaneRecord header{0, static_cast<std::uint32_t>(frame_bytes), context};
  std::memcpy(where + sizeof header.stamp, &header.frame_bytes, sizeof header - sizeof header.stamp);
  copy_frame(0, std::min(frame_bytes, kFirstLineFrame));
  // Sequentially consistent: the writer then reads the reader's polling flag (Note [Polling
  // readers] in shm_transport.cpp).
  __atomic_store_n(reinterpret_cast<std::uint64_t*>(where), head_ + 1, __ATOMIC_SEQ_CST);
  head_ += record;
  // Note [Owning lines ahead]: the lines a next frame of this size will take, but its first, which
  // the reader polls.
  for (std::size_t line = kLaneLine; line < record; line += kLaneLine)
    __builtin_prefetch(lane_.data() + ((head_ + line) & (lane_.size() - 1)), 1, 3);
  return true;
}

}  // namespace tnt::transport
