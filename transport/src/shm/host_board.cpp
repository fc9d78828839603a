#include "tnt/transport/host_board.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstddef>
#include <cstring>
#include <new>
#include <optional>

#include "tnt/core/error.h"

namespace tnt::transport {

// Note [Host board]: where every rank of a job shares one host, a blocking allreduce needs no
// channel at all. Each rank owns a segment (memfd_create, opened by the others through
// /proc/<pid>/fd/<fd> as in Note [Shared-memory channel]) with two message areas, used in turn by
// successive rounds, that every other rank of the host maps and reads in place. A round starts
// alike for every size: copy the buffer into this round's area, publish a step, wait until every
// rank has published as many steps (gather). Up to 8 KiB every rank then reduces all areas in rank
// order straight into its buffer. Above, each rank reduces only its own block of all areas into
// its buffer and copies the result back into that block of its own area (in that step no other
// rank reads that block of it), publishes a second step, gathers, and copies the other blocks out
// of their owners' areas: N times less reduction work and reading per rank, for one step more.
// Either way every rank ends with bitwise the same result. No system call on the way while the
// ranks keep up with each other. The collectives (collectives/src/communicator.cpp) use it up to
// TNT_HOST_ALLREDUCE_KB (1 GiB), larger allreduces in pieces of at most kLargestArea (1 MiB), one
// round each.
//
// Two areas, so that a round never waits for the others to finish reading: a rank writes an area
// again two rounds later, after it has gathered every member's first step of the round between,
// which each member published only after it had read everything of the round before. Each area
// carries its own size and signature for the same reason. (With one area and a "read up to"
// counter per member, every round began by waiting for the slowest reader. Measured 2026-11-26,
// tnt-bench-allreduce, one area against two, medians of 7 alternating rounds, in us: 2 ranks,
// 4 KiB 1.83 -> 1.04, 16 KiB 4.11 -> 3.38, 256 KiB 49.9 -> 43.0, 64 KiB and 1 MiB unchanged;
// 4 ranks on 2 cores, 4 KiB 15.5 -> 8.7, 16 KiB 17.5 -> 14.1, but 64 KiB 34.0 -> 36.8.)
//
// Pieces, so that what the ranks exchange stays in the caches: each rank reads its buffer from
// memory once and writes the result once, where a whole 16 MiB message went through memory
// three times more. Before pieces, the board lost to the ring's single copy (Note [Single copy])
// from 1 MiB on with 2 ranks and from 4 MiB on with 4, and stopped there. Measured 2026-11-26,
// tnt-bench-allreduce, float32 sum, medians of 3 alternating runs, time in us:
//   piece           1 MiB   4 MiB   16 MiB   64 MiB
//   2 ranks  64K      174     737     3562    13449
//           256K      138     560     2217     9268
//           512K       93     326     2085     9290
//             1M       76     313     2107     8988
//             4M       91     558     3654    13541
//   ring (no board)   131     650     4220    15935
//   4 ranks 256K      234    1105     4917    20156
//             1M      269    1289     5129    19899
//   ring, board to 4M 262    1123    12481    50641
// With 1 MiB pieces the board beats the ring at every size from 4 KiB to 256 MiB with 2 ranks
// (256 MiB: 33 against 57 ms). These figures hold only with copy_bytes(): with glibc's memcpy the
// board's copies ran at a twentieth of their speed whenever the caller's buffer lay 16 bytes after
// a page start (Note [Copies at any distance]).
//
// Waiting: a rank polls its condition for what the poll window allows (Note [Adaptive poll
// window]; 0 where ranks outnumber cores), then sleeps on a futex in its own segment, its
// doorbell. Before it sleeps it raises `sleeping` and looks once more; a rank that changed what
// others wait for (published a step) looks at each member's `sleeping` afterwards
// and rings its doorbell if raised. All of these are sequentially consistent, so one side always
// sees the other and no wake-up is lost. Sleeps last at most kSleepSlice, after which the caller
// may abandon the wait: a failed job (a dead rank, a stall) reaches the waiting rank through the
// control plane within one slice.
namespace {

constexpr std::array<char, 8> kMagic{'T', 'N', 'T', 'B', 'O', 'A', 'R', 'D'};
constexpr std::uint32_t kVersion = 3;
// Ranks per host the board serves; a host with more ranks goes without (collectives fall back).
constexpr std::size_t kMaxMembers = 512;
constexpr auto kSleepSlice = std::chrono::milliseconds(10);
// Larger allreduces go in pieces of at most this (Note [Host board]).
constexpr std::size_t kLargestArea = std::size_t{1} << 20;

std::size_t area_bytes(std::size_t capacity) { return std::min(capacity, kLargestArea); }

// Note [Small messages in the control line]: a message of up to kSmallBytes travels in the
// control line beside `published`, not in its area. Other ranks spin on that line, so a round of
// an 8-byte allreduce used to move two cache lines from writer to reader one after the other:
// the writer's store to `published` first waited for the area's line (still shared with the
// readers after their last read of it), and a reader that saw the step then missed on the area.
// Measured 2026-11-28 (about 21:14 UTC), OSU's osu_allreduce through the MPI layer, 2 ranks, 9
// alternating rounds, medians, in us: 4 and 8 bytes 0.21-0.22 -> 0.18-0.19, 16 bytes 0.21 ->
// 0.18; 32 and 64 bytes (in their areas still) 0.21-0.24 -> 0.20-0.22.
constexpr std::size_t kSmallBytes = 16;

struct Control {
  std::array<char, 8> magic;
  std::uint32_t version;
  std::int32_t owner_rank;
  std::uint64_t capacity;
  // One cache line: what a member waits for, and what it reads next (Note [Small messages in the
  // control line]). By area: the size and signature of its message, and the small ones' data;
  // all written before `published`.
  alignas(64) std::atomic<std::uint64_t> published{0};  // steps published (a round has one or more)
  std::array<std::uint64_t, 2> signature{};
  std::array<std::uint32_t, 2> bytes{};  // at most area_bytes(), 1 MiB
  alignas(16) std::array<std::array<std::byte, kSmallBytes>, 2> small{};
  alignas(64) std::atomic<std::uint32_t> sleeping{0};
  std::atomic<std::uint32_t> doorbell{0};  // the futex word
};
static_assert(offsetof(Control, small) + sizeof(Control::small) - offsetof(Control, published) == 64,
              "the control line holds what a member waits for and the small messages");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<std::uint32_t>::is_always_lock_free);

constexpr std::size_t kAreaOffset = (sizeof(Control) + 4095) / 4096 * 4096;

std::string errno_text() { return std::strerror(errno); }

void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t seen, std::chrono::nanoseconds timeout) {
  const timespec slice{static_cast<time_t>(timeout.count() / 1'000'000'000),
                       static_cast<long>(timeout.count() % 1'000'000'000)};
  // Shared, not FUTEX_PRIVATE: the waker is another process.
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT, seen, &slice, nullptr, 0);
}

void futex_wake(std::atomic<std::uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Note [Board spins]: a waiting rank looks at the clock every kSpinsPerClockLook spins, and
// spins without the pause instruction. Reading the clock (a vDSO call) and pausing on every spin
// put a few dozen nanoseconds between a step's arrival and the waiter's next look, on a round
// of about 170 ns. Measured 2026-11-28 (about 21:55 UTC), osu_allreduce through the MPI layer,
// 2 ranks, 9 alternating rounds, medians, 4-16 bytes, in us: clock and pause every spin
// 0.18, the clock every 64 spins 0.17-0.18, and with a pause on every spin 0.18-0.19. Where
// two hardware threads share a core, the spin takes issue slots from the other for the poll
// window at most (Note [Adaptive poll window]).
constexpr unsigned kSpinsPerClockLook = 64;

}  // namespace

// One member's mapped segment.
struct BoardOffer::Segment {
  Segment(int fd, std::size_t size) : bytes(size) {
    base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) throw JobError("mmap of a host board segment failed: " + errno_text());
  }
  ~Segment() { ::munmap(base, bytes); }
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  Control& control() const { return *static_cast<Control*>(base); }
  std::byte* area(std::size_t which) const {
    return static_cast<std::byte*>(base) + kAreaOffset + which * area_bytes(control().capacity);
  }
  // Where a message of `bytes` in area `which` lies (Note [Small messages in the control line]).
  std::byte* message_data(std::size_t which, std::size_t message_bytes) const {
    return message_bytes <= kSmallBytes ? control().small[which].data() : area(which);
  }

  void* base;
  std::size_t bytes;
};

namespace {

class SharedBoard final : public HostBoard {
 public:
  using Segment = BoardOffer::Segment;

  SharedBoard(std::vector<int> members, int place, std::vector<std::shared_ptr<Segment>> segments)
      : members_(std::move(members)), place_(place), segments_(std::move(segments)) {
    capacity_ = segments_[0]->control().capacity;
    for (const auto& segment : segments_) capacity_ = std::min<std::size_t>(capacity_, segment->control().capacity);
  }

  const std::vector<int>& members() const override { return members_; }
  int place() const override { return place_; }
  std::size_t capacity() const override { return capacity_; }
  std::size_t area_bytes() const override { return tnt::transport::area_bytes(capacity_); }

  std::byte* post_area(std::size_t bytes) override {
    area_ = static_cast<std::size_t>(++rounds_ % 2);
    return own().message_data(area_, bytes);
  }

  void publish(std::size_t bytes, std::uint64_t signature) override {
    Control& control = own().control();
    control.signature[area_] = signature;
    control.bytes[area_] = static_cast<std::uint32_t>(bytes);
    publish_step();
  }

  void publish_step() override {
    own().control().published.store(++steps_);
    ring_sleepers();
  }

  bool gather(const Wait& wait) override {
    const std::uint64_t step = steps_;
    return wait_for(
        [&] {
          for (const auto& segment : segments_) {
            if (segment->control().published.load() < step) return false;
          }
          return true;
        },
        wait);
  }

  Message message(int member_place) const override {
    const Segment& segment = *segments_.at(static_cast<std::size_t>(member_place));
    const Control& control = segment.control();
    const std::size_t bytes = control.bytes[area_];
    return {segment.message_data(area_, bytes), bytes, control.signature[area_]};
  }

 private:
  Segment& own() const { return *segments_[static_cast<std::size_t>(place_)]; }

  template <class Ready>
  bool wait_for(const Ready& ready, const Wait& wait) {
    using Clock = std::chrono::steady_clock;
    if (ready()) return true;
    if (const auto window = wait.window.next(); window.count() > 0) {
      std::optional<Clock::time_point> stop;  // the clock read first after kSpinsPerClockLook spins
      bool came = false;
      // Note [Board spins]
      for (unsigned spin = 1; !(came = ready()); ++spin) {
        if (spin % kSpinsPerClockLook != 0) continue;
        const auto now = Clock::now();
        if (!stop) stop = now + window;
        if (now >= *stop) break;
      }
      wait.window.report(window, came);
      if (came) return true;
    }
    // Note [Yielding waits]
    for (const auto stop = Clock::now() + kYieldWindow; Clock::now() < stop;) {
      if (ready()) return true;
      ::sched_yield();
    }
    Control& control = own().control();
    for (;;) {
      const std::uint32_t bell = control.doorbell.load();
      control.sleeping.store(1);
      if (ready()) {
        control.sleeping.store(0);
        return true;
      }
      futex_wait(control.doorbell, bell, kSleepSlice);
      control.sleeping.store(0);
      if (ready()) return true;
      if (wait.abandon()) return false;
    }
  }

  void ring_sleepers() {
    for (std::size_t p = 0; p < segments_.size(); ++p) {
      if (static_cast<int>(p) == place_) continue;
      Control& other = segments_[p]->control();
      if (other.sleeping.load() == 0) continue;
      other.doorbell.fetch_add(1);
      futex_wake(other.doorbell);
    }
  }

  std::vector<int> members_;
  int place_;
  std::vector<std::shared_ptr<Segment>> segments_;  // by place
  std::size_t capacity_ = 0;
  // Rounds begun and steps published by this rank; every member takes part in the same rounds
  // and publishes the same steps, in the same order.
  std::uint64_t rounds_ = 0;
  std::uint64_t steps_ = 0;
  std::size_t area_ = 0;  // this round's area of every member
};

}  // namespace

BoardOffer::BoardOffer(int rank, std::size_t capacity) : rank_(rank) {
  if (capacity == 0) return;
  fd_ = ::memfd_create("tnt-board", MFD_CLOEXEC);
  if (fd_ < 0) throw JobError("memfd_create failed: " + errno_text() + " (TNT_HOST_ALLREDUCE_KB=0 goes without)");
  const std::size_t bytes = kAreaOffset + 2 * area_bytes(capacity);
  if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
    ::close(fd_);
    throw JobError("ftruncate of a memfd failed: " + errno_text());
  }
  try {
    own_ = std::make_shared<Segment>(fd_, bytes);
  } catch (...) {
    ::close(fd_);
    throw;
  }
  auto* control = new (own_->base) Control();
  control->magic = kMagic;
  control->version = kVersion;
  control->owner_rank = rank;
  control->capacity = capacity;
}

BoardOffer::~BoardOffer() {
  if (fd_ >= 0) ::close(fd_);
}

std::string BoardOffer::address() const {
  return own_ ? std::to_string(::getpid()) + ":" + std::to_string(fd_) : std::string();
}

std::unique_ptr<HostBoard> BoardOffer::join(const std::vector<int>& members,
                                            const std::vector<std::string>& addresses) {
  if (!own_ || members.size() < 2 || members.size() > kMaxMembers) return nullptr;
  const auto mine = std::find(members.begin(), members.end(), rank_);
  if (mine == members.end()) return nullptr;
  std::vector<std::shared_ptr<Segment>> segments;
  for (std::size_t p = 0; p < members.size(); ++p) {
    if (members[p] == rank_) {
      segments.push_back(own_);
      continue;
    }
    const std::string& address = addresses.at(p);
    const auto colon = address.find(':');
    long pid = 0;
    int fd = -1;
    if (colon == std::string::npos || std::from_chars(address.data(), address.data() + colon, pid).ec != std::errc() ||
        std::from_chars(address.data() + colon + 1, address.data() + address.size(), fd).ec != std::errc()) {
      throw JobError("rank " + std::to_string(members[p]) + " published a malformed host board address '" + address +
                     "'");
    }
    const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
    const int opened = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (opened < 0) {
      throw JobError("cannot open rank " + std::to_string(members[p]) + "'s host board " + path + ": " + errno_text() +
                     " (TNT_HOST_ALLREDUCE_KB=0 goes without)");
    }
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{opened};
    struct stat status {};
    if (::fstat(opened, &status) != 0 || static_cast<std::size_t>(status.st_size) <= kAreaOffset) {
      throw JobError("rank " + std::to_string(members[p]) + "'s host board " + path + " is too small");
    }
    auto segment = std::make_shared<Segment>(opened, static_cast<std::size_t>(status.st_size));
    const Control& control = segment->control();
    if (control.magic != kMagic || control.version != kVersion || control.owner_rank != members[p] ||
        kAreaOffset + 2 * area_bytes(control.capacity) != segment->bytes) {
      throw JobError("rank " + std::to_string(members[p]) + "'s host board " + path +
                     " is not what it published (different tnt builds on one host?)");
    }
    segments.push_back(std::move(segment));
  }
  return std::make_unique<SharedBoard>(members, static_cast<int>(mine - members.begin()), std::move(segments));
}

}  // namespace tnt::transport
