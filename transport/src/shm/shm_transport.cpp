#include "shm_transport.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <new>
#include <optional>

#include "../pair_transport.h"
#include "../side_channel.h"
#include "shm_inbox.h"
#include "shm_lane.h"
#include "tnt/core/copy.h"
#include "tnt/core/error.h"
#include "tnt/core/settings.h"

namespace tnt::transport {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// Per direction. Large messages travel in chunks of at most a quarter of the ring, so the
// writer can fill one chunk while the reader empties another.
constexpr std::uint64_t kRingBytes = 4u << 20;
constexpr std::uint64_t kMaxChunk = shm_max_chunk(kRingBytes);

// One ring's shared state. `head` and `tail` count bytes ever written and read; each has one
// writer. Note [Waking a waiting writer]: a writer that finds no room sets `writer_waiting`
// and looks again; a reader that made room looks at the flag after moving `tail`. With both
// sides sequentially consistent, one of them sees the other, so a wake-up is never lost.
//
// Note [Polling readers]: while the reading rank's blocked caller polls its event loop (the
// TNT_WAIT_POLL_US window), it also looks at the ring itself, and `reader_polling` says so: the
// writer then skips the wake-up byte, the system call that would otherwise cost most of a small
// message's time. The reader lowers the flag before it sleeps and then looks once more; the
// writer publishes `head` before it reads the flag; again one of them sees the other.
struct RingControl {
  alignas(64) std::atomic<std::uint64_t> head{0};
  alignas(64) std::atomic<std::uint64_t> tail{0};
  alignas(64) std::atomic<std::uint32_t> writer_waiting{0};
  alignas(64) std::atomic<std::uint32_t> reader_polling{0};
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

// The segment: both rings' and both lanes' controls, then both rings' bytes, then both lanes'
// (Note [Lanes] in shm_lane.h).
constexpr std::size_t kControlBytes = 2 * sizeof(RingControl) + 2 * sizeof(LaneControl);
constexpr std::size_t kLanesAt = kControlBytes + 2 * kRingBytes;
constexpr std::size_t kSegmentBytes = kLanesAt + 2 * kLaneBytes;

// Note [Single copy]: a message of at least TNT_SHM_SINGLE_COPY_KB does not pass the ring: the
// writer publishes where it lies (a kReadMe chunk), the reader copies it straight from the
// writer's memory into its receive buffer with process_vm_readv (one copy instead of two, and
// none through the ring, which is larger than a core's cache), and answers with a kReadDone
// chunk, on which the send completes. A send's buffer is the sender's until it completes, so the
// reader always finds the data as it was sent. Both ranks check at set-up that they may read each
// other (process_vm_readv can be forbidden by ptrace rules or seccomp); else every message takes
// the ring. OpenMPI's vader does the same through CMA. The chunks: Note [Shared-memory chunks] in
// shm_inbox.h.
//
// It is off unless TNT_SHM_SINGLE_COPY_KB is set: on the machine measured, two copies through the
// ring beat one process_vm_readv at every size, because the reader copies each chunk out while
// the writer copies the next one in, and process_vm_readv copied at about 15 GB/s. Measured
// 2026-11-28, 2 ranks, tnt-bench-p2p under chrt -f 10, single copy from 64 KiB against none:
// latency 64 KiB 7.1 -> 4.0 us, 1 MiB 71 -> 43 us, 4 MiB 310 -> 156 us, 64 MiB 10.1 -> 7.3 ms;
// osu_bw 1 MiB 14.7 -> 52.1 GB/s, 64 MiB 5.9 -> 11.1 GB/s; osu_bibw 1 MiB 29.5 -> 47.6 GB/s.
// OSU's osu_alltoall on 4 ranks sharing 2 cores, 3 alternating rounds: about equal at 1 MiB per
// pair, 8 % slower at 4 MiB (the ring needs its writer to be scheduled, a read does not).

// What the creator tells the other rank on the side channel. Fixed size, checked field by field.
struct SegmentOffer {
  std::array<char, 4> magic;
  std::uint32_t version;
  std::int64_t pid;
  std::int32_t fd;
  std::uint32_t padding;
  std::uint64_t bytes;
  std::uint64_t probe_address;  // 8 readable bytes of the creator's, for the single-copy check
};
constexpr std::array<char, 4> kOfferMagic{'T', 'S', 'H', 'M'};
constexpr std::uint32_t kOfferVersion = 3;

// The other rank's answer, once it has mapped the segment.
struct SegmentAnswer {
  std::uint8_t mapped;
  std::uint8_t can_read_creator;  // Note [Single copy]
  std::array<std::uint8_t, 6> padding;
  std::int64_t pid;
  std::uint64_t probe_address;
};

// Whether this process may read `bytes` at `address` in process `pid` (Note [Single copy]).
bool read_peer(std::int64_t pid, std::uint64_t address, void* to, std::size_t bytes) {
  std::size_t done = 0;
  while (done < bytes) {
    iovec local{static_cast<std::byte*>(to) + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(address + done), bytes - done};
    const ssize_t got = ::process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0);
    if (got <= 0) return false;
    done += static_cast<std::size_t>(got);
  }
  return true;
}

bool can_read_peer(std::int64_t pid, std::uint64_t address) {
  std::uint64_t word = 0;
  return read_peer(pid, address, &word, sizeof word);
}

std::string errno_text(int error) { return std::strerror(error); }

// A mapped segment; unmapped when the last pair lets go.
class Mapping {
 public:
  Mapping(int fd, std::size_t bytes) : bytes_(bytes) {
    base_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base_ == MAP_FAILED) throw JobError("mmap of the shared-memory segment failed: " + errno_text(errno));
  }
  ~Mapping() { ::munmap(base_, bytes_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  std::byte* base() const { return static_cast<std::byte*>(base_); }

 private:
  void* base_;
  std::size_t bytes_;
};

// A view of one direction's ring inside the segment.
struct Ring {
  RingControl* control;
  std::byte* data;

  void copy_in(std::uint64_t position, const void* from, std::size_t bytes) const {
    if (bytes == 0) return;
    const std::size_t at = position % kRingBytes;
    const std::size_t first = std::min<std::size_t>(bytes, kRingBytes - at);
    copy_bytes(data + at, from, first);
    copy_bytes(data, static_cast<const std::byte*>(from) + first, bytes - first);
  }
};

Ring ring(const Mapping& mapping, int direction) {
  auto* controls = reinterpret_cast<RingControl*>(mapping.base());
  return Ring{&controls[direction], mapping.base() + kControlBytes + direction * kRingBytes};
}

LaneControl& lane_control(const Mapping& mapping, int direction) {
  return reinterpret_cast<LaneControl*>(mapping.base() + 2 * sizeof(RingControl))[direction];
}

std::span<std::byte> lane_bytes(const Mapping& mapping, int direction) {
  return {mapping.base() + kLanesAt + direction * kLaneBytes, kLaneBytes};
}

// Both ranks touch both lanes at set-up, before either writes a frame: otherwise each rank's
// first lap took a page fault every 64 messages of 8 bytes on each side (tnt-bench-p2p latency
// of the first size measured 0.16 us, of the same size measured after others 0.10; 2026-11-29).
// The rings stay untouched until used: they are 8 MiB a pair.
void touch_lanes(const Mapping& mapping) { std::memset(mapping.base() + kLanesAt, 0, 2 * kLaneBytes); }

// Note [Rings populated at first use]: a ring's pages are then faulted in all at once, each
// side's mapping of it by that side: the writer's before its first chunk, the reader's before
// it takes its first. Left to fault one at a time, the first lap of each ring cost 1,024 page
// faults on each side, about 2.3 us each for the writer here (it allocates the page) and 0.3 us
// for the reader, inside the messages that made them: a fresh process's 32 KiB ping-pong
// measured 5.3 us latency, and 2.2 us once 1,000 warm-up round trips had gone round the ring
// (tnt-bench-p2p latency -m 32768:32768, and with -x 1000, 2026-11-29). madvise with
// MADV_POPULATE_WRITE or _READ (Linux 5.14) faults them in without touching their contents, so
// it may run while the other side already uses the ring; where it fails, the pages fault as
// before.
void populate(std::byte* data, std::size_t bytes, int advice) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t first = reinterpret_cast<std::uintptr_t>(data) & ~(page - 1);
  const std::uintptr_t end = reinterpret_cast<std::uintptr_t>(data) + bytes;
  (void)::madvise(reinterpret_cast<void*>(first), end - first, advice);
}

}  // namespace

class ShmTransport;

class ShmPair final : public Pair, public Lane, private Poller {
 public:
  // `creator`: this rank made the segment and writes ring 0; the other rank writes ring 1.
  // `single_copy_bytes`: messages from this size on go by Note [Single copy]; 0 never.
  ShmPair(ShmTransport& owner, int peer, std::string peer_name, std::unique_ptr<Mapping> mapping, bool creator,
          tcp::socket side, std::int64_t peer_pid, std::size_t single_copy_bytes)
      : owner_(owner),
        peer_(peer),
        peer_name_(std::move(peer_name)),
        mapping_(std::move(mapping)),
        out_(ring(*mapping_, creator ? 0 : 1)),
        in_(ring(*mapping_, creator ? 1 : 0)),
        inbox_(peer_name_, std::span<const std::byte>(in_.data, kRingBytes)),
        lane_out_(lane_bytes(*mapping_, creator ? 0 : 1), lane_control(*mapping_, creator ? 0 : 1)),
        lane_in_(peer_name_, lane_bytes(*mapping_, creator ? 1 : 0)),
        lane_in_control_(lane_control(*mapping_, creator ? 1 : 0)),
        side_(std::move(side)),
        peer_pid_(peer_pid),
        single_copy_bytes_(single_copy_bytes) {}

  int peer_rank() const override { return peer_; }

  void send(Tag tag, const void* data, std::size_t bytes, CompletionSink& sink, std::uint64_t cookie) override {
    if (failed_) return;
    queue_.push_back(Outgoing{tag, static_cast<const std::byte*>(data), bytes, &sink, cookie});
    if (queue_.size() == 1) write_some();
  }

  void recv(Tag tag, void* data, std::size_t capacity, CompletionSink& sink, std::uint64_t cookie) override;
  Lane* lane() override { return this; }

  // Lane (Note [Lanes] in shm_lane.h)
  std::size_t max_frame_bytes() const override { return kLaneMaxFrame; }
  bool write(std::uint32_t context, const void* head, std::size_t head_bytes, const void* data,
             std::size_t bytes) override;
  void set_sink(std::uint32_t context, LaneSink* sink) override;
  bool read() override { return read_lane(); }

  void start();
  void close();

 private:
  struct Outgoing {
    Tag tag;
    const std::byte* data;
    std::size_t bytes;
    CompletionSink* sink;
    std::uint64_t cookie;
    std::size_t sent = 0;
    bool started = false;
  };

  // Poller
  void set_polling(bool polling) override { in_.control->reader_polling.store(polling ? 1 : 0); }
  bool poll() override {
    if (failed_) return false;
    const bool read = read_lane() | read_some();
    const bool writing = !queue_.empty() || !acks_.empty();
    if (writing) write_some();
    if (lane_writer_blocked_) offer_lane_room();
    return read || writing;
  }

  void write_some();
  bool write_control(const ShmChunkHeader& header, const void* payload);
  void schedule_completions();
  void complete_sends();
  bool read_remote(const ShmInbox::Event& event);
  bool room_for(std::uint64_t head, std::size_t need);
  bool read_some();  // true when it took a chunk
  bool read_lane();  // true when it took a frame
  void offer_lane_room();
  LaneSink* sink_of(std::uint32_t context) const;
  void deliver(const ShmInbox::Event& event);
  void watch();
  void notify();
  void fail(const std::string& what);

  ShmTransport& owner_;
  int peer_;
  std::string peer_name_;
  std::unique_ptr<Mapping> mapping_;
  Ring out_;
  Ring in_;
  ShmInbox inbox_;  // reads in_
  ShmLaneWriter lane_out_;
  ShmLaneReader lane_in_;
  LaneControl& lane_in_control_;
  std::vector<std::pair<std::uint32_t, LaneSink*>> lane_sinks_;  // by context
  // Frames of contexts with no sink yet (a communicator this side has not made yet), in order.
  std::deque<std::pair<std::uint32_t, std::vector<std::byte>>> held_frames_;
  bool lane_writer_blocked_ = false;
  tcp::socket side_;
  std::array<char, 64> wake_bytes_{};
  bool failed_ = false;
  bool closing_ = false;
  bool out_populated_ = false, in_populated_ = false;  // Note [Rings populated at first use]

  std::deque<Outgoing> queue_;
  // Sends whose data is in the ring, completed by one posted complete_sends() at a time; the two
  // lists swap there, so that completing allocates nothing once they have grown.
  std::vector<Outgoing> completed_, completing_;
  bool completion_posted_ = false;

  // Note [Single copy]
  const std::int64_t peer_pid_;
  const std::size_t single_copy_bytes_;
  std::uint64_t next_read_id_ = 0;
  std::vector<std::uint64_t> acks_;  // kShmReadDone chunks to write
};

class ShmTransport final : public PairTransport<ShmPair> {
 public:
  ShmTransport(EventLoop& loop, const JobEnvironment& env)
      : PairTransport(loop, env), single_copy_bytes_(settings::kShmSingleCopyKb.read()) {}
  ~ShmTransport() override {
    close();
    wait_for_handlers();
  }

  std::string listen(const std::string& local_ip) override {
    return listen_side_channel(acceptor_, parse_data_ip(local_ip), "shared-memory set-up connections");
  }

 private:
  std::string plane() const override { return "shared-memory data plane"; }
  asio::awaitable<void> establish(int peer, tcp::socket& socket) override { return set_up(peer, socket); }
  void start(int peer) override { pairs_[peer]->start(); }

  // What the two ranks of a pair agreed on at set-up.
  struct Segment {
    std::unique_ptr<Mapping> mapping;
    std::int64_t peer_pid = 0;
    bool single_copy = false;  // each may read the other's memory (Note [Single copy])
  };

  // Note [Shared-memory channel]: the lower rank makes the segment, the higher one maps it.
  asio::awaitable<void> set_up(int peer, tcp::socket& socket) {
    const bool creator = peer > env_.rank;
    Segment segment;
    {
      SocketDeadline deadline(socket, env_.handshake_timeout);
      if (creator) {
        segment = co_await offer_segment(socket);
      } else {
        segment = co_await take_segment(socket);
      }
    }
    pairs_[peer] =
        std::make_unique<ShmPair>(*this, peer, peer_name(book_, peer), std::move(segment.mapping), creator,
                                  std::move(socket), segment.peer_pid, segment.single_copy ? single_copy_bytes_ : 0);
  }

  asio::awaitable<Segment> offer_segment(tcp::socket& socket) {
    const int fd = ::memfd_create("tnt-shm", MFD_CLOEXEC);
    if (fd < 0) throw JobError("memfd_create failed: " + errno_text(errno) + " (TNT_SHM=0 uses the network instead)");
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    if (::ftruncate(fd, kSegmentBytes) != 0) throw JobError("ftruncate of a memfd failed: " + errno_text(errno));
    auto mapping = std::make_unique<Mapping>(fd, kSegmentBytes);
    for (int direction = 0; direction < 2; ++direction) {
      new (ring(*mapping, direction).control) RingControl();
      new (&lane_control(*mapping, direction)) LaneControl();
    }
    touch_lanes(*mapping);
    SegmentOffer offer{
        kOfferMagic, kOfferVersion, ::getpid(), fd, 0, kSegmentBytes, reinterpret_cast<std::uint64_t>(mapping->base())};
    co_await asio::async_write(socket, asio::buffer(&offer, sizeof offer), asio::use_awaitable);
    // The peer holds its own mapping once it answers; only then may our descriptor go.
    SegmentAnswer answer{};
    co_await asio::async_read(socket, asio::buffer(&answer, sizeof answer), asio::use_awaitable);
    if (answer.mapped != 1) throw JobError("the peer could not map the shared-memory segment");
    const std::uint8_t single_copy =
        answer.can_read_creator == 1 && single_copy_bytes_ > 0 && can_read_peer(answer.pid, answer.probe_address);
    co_await asio::async_write(socket, asio::buffer(&single_copy, 1), asio::use_awaitable);
    co_return Segment{std::move(mapping), answer.pid, single_copy == 1};
  }

  asio::awaitable<Segment> take_segment(tcp::socket& socket) {
    SegmentOffer offer{};
    co_await asio::async_read(socket, asio::buffer(&offer, sizeof offer), asio::use_awaitable);
    if (offer.magic != kOfferMagic || offer.version != kOfferVersion || offer.bytes != kSegmentBytes) {
      throw JobError("malformed shared-memory offer (different tnt builds on one host?)");
    }
    const std::string path = "/proc/" + std::to_string(offer.pid) + "/fd/" + std::to_string(offer.fd);
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      throw JobError("cannot open the shared-memory segment " + path + ": " + errno_text(errno) +
                     " (TNT_SHM=0 uses the network instead)");
    }
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat status {};
    if (::fstat(fd, &status) != 0 || static_cast<std::uint64_t>(status.st_size) != kSegmentBytes) {
      throw JobError("the shared-memory segment " + path + " has the wrong size");
    }
    auto mapping = std::make_unique<Mapping>(fd, kSegmentBytes);
    touch_lanes(*mapping);  // nobody writes frames before the answer
    SegmentAnswer answer{};
    answer.mapped = 1;
    answer.can_read_creator = single_copy_bytes_ > 0 && can_read_peer(offer.pid, offer.probe_address);
    answer.pid = ::getpid();
    answer.probe_address = reinterpret_cast<std::uint64_t>(mapping->base());
    co_await asio::async_write(socket, asio::buffer(&answer, sizeof answer), asio::use_awaitable);
    std::uint8_t single_copy = 0;
    co_await asio::async_read(socket, asio::buffer(&single_copy, 1), asio::use_awaitable);
    co_return Segment{std::move(mapping), offer.pid, single_copy == 1};
  }

  const std::size_t single_copy_bytes_;
};

void ShmPair::recv(Tag tag, void* data, std::size_t capacity, CompletionSink& sink, std::uint64_t cookie) {
  if (failed_) return;
  const auto event = inbox_.post(ShmInbox::Receive{tag, data, capacity, &sink, cookie});
  if (!event) {
    if (!inbox_.violation().empty()) fail(inbox_.violation());
    return;
  }
  if (event->kind == ShmInbox::Event::kReadRemote) {
    if (!read_remote(*event)) return;
    write_some();  // the kShmReadDone
  }
  const std::size_t bytes = event->bytes;
  // Its message came before it. Complete later, never inside the caller's own call (it may hold
  // state mid-update).
  owner_.begin_io();
  owner_.loop().post_completion([this, &sink, cookie, bytes] {  // Note [Completions of a poll]
    owner_.end_io();
    if (!failed_) sink.on_recv_complete(cookie, bytes);
  });
}

bool ShmPair::write(std::uint32_t context, const void* head, std::size_t head_bytes, const void* data,
                    std::size_t bytes) {
  if (failed_) return true;  // as a send on a failed channel: never completes, never retried
  if (!lane_out_.write(context, head, head_bytes, data, bytes)) {
    lane_writer_blocked_ = true;
    return false;
  }
  if (out_.control->reader_polling.load() == 0) notify();  // Note [Polling readers]
  return true;
}

LaneSink* ShmPair::sink_of(std::uint32_t context) const {
  for (const auto& [sink_context, sink] : lane_sinks_)
    if (sink_context == context) return sink;
  return nullptr;
}

void ShmPair::set_sink(std::uint32_t context, LaneSink* sink) {
  std::erase_if(lane_sinks_, [&](const auto& entry) { return entry.first == context; });
  if (!sink) return;
  lane_sinks_.emplace_back(context, sink);
  for (auto held = held_frames_.begin(); held != held_frames_.end() && !failed_;) {
    if (held->first != context) {
      ++held;
      continue;
    }
    const std::vector<std::byte> frame = std::move(held->second);
    held = held_frames_.erase(held);
    sink->on_lane_frame(frame.data(), frame.size());
  }
}

bool ShmPair::read_lane() {
  bool took = false;
  std::uint32_t context = 0;
  std::span<const std::byte> frame;
  while (!failed_ && lane_in_.peek(context, frame)) {
    took = true;
    if (LaneSink* sink = sink_of(context)) {
      sink->on_lane_frame(frame.data(), frame.size());
    } else {
      held_frames_.emplace_back(context, std::vector<std::byte>(frame.begin(), frame.end()));
    }
    lane_in_.pop();
  }
  if (!lane_in_.violation().empty()) fail(lane_in_.violation());
  if (!took || failed_) return took;
  lane_in_control_.tail.store(lane_in_.tail());  // Note [Waking a waiting writer]
  if (lane_in_control_.writer_waiting.load() != 0 && lane_in_control_.writer_waiting.exchange(0) != 0) notify();
  return true;
}

void ShmPair::offer_lane_room() {
  if (failed_ || !lane_out_.reader_moved()) return;
  lane_writer_blocked_ = false;
  // A sink may find the lane full again and block it anew; each tries once.
  const auto sinks = lane_sinks_;
  for (const auto& [context, sink] : sinks) {
    if (!failed_) sink->on_lane_room();
  }
}

bool ShmPair::room_for(std::uint64_t head, std::size_t need) {
  if (kRingBytes - (head - out_.control->tail.load(std::memory_order_acquire)) >= need) return true;
  // Note [Waking a waiting writer]
  out_.control->writer_waiting.store(1);
  if (kRingBytes - (head - out_.control->tail.load()) < need) return false;
  out_.control->writer_waiting.store(0);
  return true;
}

bool ShmPair::write_control(const ShmChunkHeader& header, const void* payload) {
  const std::uint64_t head = out_.control->head.load(std::memory_order_relaxed);
  if (!room_for(head, sizeof header + header.chunk_bytes)) return false;  // the reader wakes us
  out_.copy_in(head, &header, sizeof header);
  out_.copy_in(head + sizeof header, payload, header.chunk_bytes);
  out_.control->head.store(head + sizeof header + header.chunk_bytes);  // Note [Polling readers]
  return true;
}

void ShmPair::write_some() {
  if (!out_populated_) {
    populate(out_.data, kRingBytes, MADV_POPULATE_WRITE);  // Note [Rings populated at first use]
    out_populated_ = true;
  }
  bool wrote = false;
  bool done = false;
  std::size_t acked = 0;
  for (; acked < acks_.size() && !failed_; ++acked) {
    if (!write_control(ShmChunkHeader{0, 0, sizeof(std::uint64_t), kShmReadDone, 0}, &acks_[acked])) break;
    wrote = true;
  }
  acks_.erase(acks_.begin(), acks_.begin() + static_cast<std::ptrdiff_t>(acked));
  while (!queue_.empty() && !failed_) {
    Outgoing& message = queue_.front();
    if (single_copy_bytes_ > 0 && message.bytes >= single_copy_bytes_) {
      // Note [Single copy]: completes on the reader's kShmReadDone.
      const ShmReadMe where{reinterpret_cast<std::uint64_t>(message.data), next_read_id_};
      if (!write_control(
              ShmChunkHeader{message.tag.value, message.bytes, sizeof where, kShmReadMe, message.tag.context}, &where))
        break;
      ++next_read_id_;
      wrote = true;
      inbox_.await_read_done(where.id, message.sink, message.cookie);
      queue_.pop_front();
      continue;
    }
    const std::size_t chunk = std::min<std::size_t>(message.bytes - message.sent, kMaxChunk);
    const std::uint64_t head = out_.control->head.load(std::memory_order_relaxed);
    if (!room_for(head, sizeof(ShmChunkHeader) + chunk)) break;  // the reader wakes us
    const ShmChunkHeader header{message.tag.value, message.bytes, chunk, kShmData, message.tag.context};
    out_.copy_in(head, &header, sizeof header);
    out_.copy_in(head + sizeof header, message.data + message.sent, chunk);
    out_.control->head.store(head + sizeof header + chunk);  // Note [Polling readers]
    wrote = true;
    message.sent += chunk;
    message.started = true;
    if (message.sent == message.bytes) {
      completed_.push_back(message);
      queue_.pop_front();
      done = true;
    }
  }
  if (wrote && out_.control->reader_polling.load() == 0) notify();
  if (done) schedule_completions();
}

void ShmPair::schedule_completions() {
  if (completion_posted_) return;
  // The caller's buffer is free (its data is in the ring, or the reader has read it). Completed
  // later, never inside send() or a sink's own call.
  completion_posted_ = true;
  owner_.begin_io();
  owner_.loop().post_completion([this] { complete_sends(); });  // Note [Completions of a poll]
}

void ShmPair::complete_sends() {
  owner_.end_io();
  completion_posted_ = false;
  completing_.clear();
  std::swap(completing_, completed_);  // a sink that sends again adds to completed_, not to this list
  for (const Outgoing& message : completing_) {
    if (failed_) return;
    message.sink->on_send_complete(message.cookie);
  }
}

bool ShmPair::read_some() {
  bool freed = false;
  std::optional<ShmInbox::Event> event;
  // The head is read for this only until the ring is populated: read_some runs on every poll.
  if (!in_populated_ && in_.control->head.load(std::memory_order_acquire) != inbox_.tail()) {
    populate(in_.data, kRingBytes, MADV_POPULATE_READ);  // Note [Rings populated at first use]
    in_populated_ = true;
  }
  while (!failed_ && inbox_.take(in_.control->head.load(std::memory_order_acquire), event)) {
    in_.control->tail.store(inbox_.tail());  // Note [Waking a waiting writer]; before any sink runs
    freed = true;
    if (event) deliver(*event);
  }
  if (!inbox_.violation().empty()) {
    fail(inbox_.violation());
    return freed;
  }
  if (freed && in_.control->writer_waiting.load() != 0 && in_.control->writer_waiting.exchange(0) != 0) notify();
  return freed;
}

void ShmPair::deliver(const ShmInbox::Event& event) {
  switch (event.kind) {
    case ShmInbox::Event::kReceived: event.sink->on_recv_complete(event.cookie, event.bytes); return;
    case ShmInbox::Event::kReadRemote:
      if (read_remote(event)) event.sink->on_recv_complete(event.cookie, event.bytes);
      return;
    case ShmInbox::Event::kSendDone:
      completed_.push_back(Outgoing{Tag{}, nullptr, 0, event.sink, event.cookie});
      schedule_completions();
      return;
  }
}

// Copies a kShmReadMe message into its receive and queues its kShmReadDone (Note [Single copy]);
// false (and failed) if it cannot.
bool ShmPair::read_remote(const ShmInbox::Event& event) {
  if (!read_peer(peer_pid_, event.remote.address, event.destination, event.bytes)) {
    fail("reading " + std::to_string(event.bytes) + " bytes from " + peer_name_ +
         " with process_vm_readv failed: " + errno_text(errno) + " (TNT_SHM_SINGLE_COPY_KB=0 avoids it)");
    return false;
  }
  acks_.push_back(event.remote.id);
  return true;
}

void ShmPair::watch() {
  owner_.begin_io();
  side_.async_read_some(asio::buffer(wake_bytes_), [this](const boost::system::error_code& ec, std::size_t) {
    owner_.end_io();
    if (ec) {
      fail(ec == asio::error::eof ? peer_name_ + " closed its channel (process ended or killed?)"
                                  : "the channel to " + peer_name_ + " failed: " + ec.message());
      return;
    }
    read_lane();
    read_some();
    if (!failed_) write_some();
    if (lane_writer_blocked_) offer_lane_room();
    if (!failed_) watch();
  });
}

void ShmPair::notify() {
  // Sent at once, without a completion handler: the byte must leave even when this rank stops
  // running its event loop right after (a finished collective), or the peer would wait for data
  // that is already in the ring. A full socket buffer (EAGAIN) holds unread wake-ups already,
  // so the peer wakes anyway; any other error is the watch's to report.
  static const char kWake = 1;
  ::send(side_.native_handle(), &kWake, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void ShmPair::start() {
  owner_.loop().add_poller(*this);
  watch();
  read_lane();
  read_some();  // whatever came before we watched
  if (!acks_.empty()) write_some();
}

void ShmPair::close() {
  owner_.loop().remove_poller(*this);
  closing_ = true;
  // Nothing may complete any more: the operations whose receives are still posted here may be
  // gone with their buffers (a failed job completes them before the transport is destroyed), and
  // a wake-up read before the close can still run read_some(). Under ASan a kReadMe read so
  // (Note [Single copy]) wrote into a freed buffer.
  failed_ = true;
  lane_sinks_.clear();
  boost::system::error_code ignored;
  side_.shutdown(tcp::socket::shutdown_both, ignored);
  side_.close(ignored);
}

void ShmPair::fail(const std::string& what) {
  if (failed_) return;
  failed_ = true;
  if (closing_ || owner_.closed()) return;
  owner_.report(peer_, what);
}

std::unique_ptr<Transport> make_shm_transport(EventLoop& loop, const JobEnvironment& env) {
  return std::make_unique<ShmTransport>(loop, env);
}

}  // namespace tnt::transport
