#pragma once
// This rank's collective calls as the stall watch sees them (Note [Stall watch] in
// transport/src/rendezvous/stall_watch.h): each call's place in the issue order, what was
// called, and which calls are still pending.
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tnt/collectives/types.h"
#include "tnt/transport/rendezvous.h"

namespace tnt::detail {

// What a rank called, as the stall watch compares and names it.
struct CallSignature {
  std::string_view kind;
  std::optional<DataType> type;
  std::optional<ReduceOp> op;
  int root = -1;
  std::size_t bytes = 0;

  std::string describe() const;  // e.g. "allreduce(sum, float32, 4096 bytes)"
  // Of the fields (Note [Call hashes]); `with_size` false gives the part that goes into tags
  // (Note [Tags]).
  std::uint64_t hash(bool with_size) const;
};

// Thread-safe: issued on the user's thread, completed on the data loop's or the user's, read on
// the control loop's.
class CallLog {
 public:
  // Called outside the log's lock after a change, where none was told since progress() last
  // read the log (Note [Telling changes once] in call_log.cpp); the control plane reports soon
  // after.
  void on_change(std::function<void()> changed) { changed_ = std::move(changed); }
  // Gives the call the next sequence number and records it as pending. Calls are described
  // only when progress() asks: describing one took several string allocations, on a path that
  // takes about a microsecond for a small allreduce on the host board.
  std::uint64_t issue(const CallSignature& call) { return issue(call, call.hash(true)); }
  std::uint64_t issue(const CallSignature& call, std::uint64_t signature);  // signature: call.hash(true)
  void completed(std::uint64_t sequence);
  transport::CollectiveProgress progress() const;

 private:
  struct Record {
    std::uint64_t sequence = 0;
    std::uint64_t signature = 0;
    CallSignature call;
    transport::CollectiveCall described() const { return {sequence, signature, call.describe()}; }
  };
  struct Slot {
    Record record;
    bool pending = false;
  };

  // Note [Call log lock] in call_log.cpp
  class SpinLock {
   public:
    void lock() {
      while (held_.exchange(true, std::memory_order_acquire))
        while (held_.load(std::memory_order_relaxed)) std::this_thread::yield();
    }
    void unlock() { held_.store(false, std::memory_order_release); }

   private:
    std::atomic<bool> held_{false};
  };

  mutable SpinLock lock_;
  // Note [Call log ring] in call_log.cpp: the calls from oldest_pending_ to next_sequence_, each
  // in slots_[sequence % size], the size a power of two.
  std::vector<Slot> slots_ = std::vector<Slot>(16);
  std::uint64_t next_sequence_ = 0;
  std::uint64_t oldest_pending_ = 0;  // no call before it is pending; next_sequence_ where none is
  std::optional<Record> last_completed_;
  std::function<void()> changed_;
  mutable std::atomic<bool> change_told_{false};  // Note [Telling changes once]

  Slot& slot(std::uint64_t sequence) { return slots_[sequence & (slots_.size() - 1)]; }
  const Slot& slot(std::uint64_t sequence) const { return slots_[sequence & (slots_.size() - 1)]; }
  void grow();
  void tell_change();
};

}  // namespace tnt::detail
