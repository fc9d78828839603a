#include "call_log.h"

#include <algorithm>
#include <cstring>

namespace tnt::detail {

std::string CallSignature::describe() const {
  std::string text = std::string(kind) + "(";
  if (op) text += std::string(name_of(*op)) + ", ";
  if (type) text += std::string(name_of(*type)) + ", ";
  if (root >= 0) text += "root " + std::to_string(root) + ", ";
  return text + std::to_string(bytes) + (kind == "allgather" ? " bytes per rank)" : " bytes)");
}

// Note [Call hashes]: FNV-1a's step, a word at a time, then MurmurHash3's finalizer, so that the
// top bits (Note [Tags] takes 12 of them) depend on every field. It used to run a byte at a time
// (over 100 dependent multiplications), twice for every call on the host board (the call's
// signature, then CallLog::issue). Measured 2026-11-28 (15:15 UTC, a noisy hour), OSU's
// osu_allreduce through the MPI layer, 2 ranks, 3 alternating rounds: 4 bytes 0.63-0.71 ->
// 0.56-0.65 us, 8 bytes 0.59-0.67 -> 0.55-0.60.
std::uint64_t CallSignature::hash(bool with_size) const {
  std::uint64_t h = 14695981039346656037ull;
  auto mix = [&](std::uint64_t value) { h = (h ^ value) * 1099511628211ull; };
  for (std::size_t at = 0; at < kind.size(); at += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, kind.data() + at, std::min<std::size_t>(8, kind.size() - at));
    mix(word);
  }
  mix(type ? static_cast<std::uint64_t>(*type) + 1 : 0);
  mix(op ? static_cast<std::uint64_t>(*op) + 1 : 0);
  mix(static_cast<std::uint64_t>(root + 1));
  if (with_size) mix(bytes);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}

// Note [Call log ring]: every collective, the host board's included, issues a call here and
// completes it. The log was a deque of pending calls with copies of the last issued and
// completed: about 400 instructions for each blocking call on the host board, the deque's erase
// and its chunk allocations most of them, and 45 % of an 8-byte allreduce's instructions through
// the MPI layer (callgrind of OSU's osu_allreduce, 2026-11-28). The calls between the oldest
// pending one and the next to be issued now sit in a ring indexed by sequence number: issuing
// writes a slot, completing marks one and moves the oldest pending past those that completed.
// Calls complete in any order (nonblocking ones), so the ring grows, doubling, when the oldest
// pending call would be overwritten; it never shrinks. Measured 2026-11-28 (about 21:11 UTC),
// osu_allreduce through the MPI layer, 2 ranks, 9 alternating rounds, medians: 8 bytes 0.21 ->
// 0.20 us (the board's rounds, not the log, take most of the time).
std::uint64_t CallLog::issue(const CallSignature& call, std::uint64_t signature) {
  std::uint64_t sequence = 0;
  {
    std::lock_guard lock(lock_);
    if (next_sequence_ - oldest_pending_ == slots_.size()) grow();
    sequence = next_sequence_++;
    Slot& issued = slot(sequence);
    issued.record = Record{sequence, signature, call};
    issued.pending = true;
  }
  tell_change();
  return sequence;
}

void CallLog::grow() {
  std::vector<Slot> larger(slots_.size() * 2);
  for (std::uint64_t sequence = oldest_pending_; sequence < next_sequence_; ++sequence)
    larger[sequence & (larger.size() - 1)] = slot(sequence);
  slots_ = std::move(larger);
}

void CallLog::completed(std::uint64_t sequence) {
  {
    std::lock_guard lock(lock_);
    if (sequence < oldest_pending_ || sequence >= next_sequence_ || !slot(sequence).pending) return;
    Slot& done = slot(sequence);
    done.pending = false;
    if (!last_completed_ || sequence > last_completed_->sequence) last_completed_ = done.record;
    while (oldest_pending_ < next_sequence_ && !slot(oldest_pending_).pending) ++oldest_pending_;
  }
  tell_change();
}

// Note [Telling changes once]: every collective on the host board issues and completes a call,
// and each change used to call on_change's function, which takes the communicator's progress
// mutex to reach the control plane; that only schedules a report, which reads progress() once
// it is sent. So a change is told only where none was since progress() last read the log:
// progress() lowers the flag before it takes the log's lock, and a change raises it after
// releasing it, both sequentially consistent, so a change that a report missed is always
// told again. The control plane clears its own flag before it calls progress() (ControlPlane::
// send_progress_report), so a change told while a report is on its way schedules the next one.
void CallLog::tell_change() {
  if (!changed_ || change_told_.load(std::memory_order_relaxed) || change_told_.exchange(true)) return;
  changed_();
}

// Note [Call log lock]: the log is written by the caller of every collective (twice for each
// call on the host board) and by the event loop's thread, and read by the control plane's a few
// times a second. A std::mutex there cost about 60 instructions and two atomic read-modify-writes
// a call; this lock costs one exchange and a store. Nothing slow runs under it: progress() copies
// the records it reports and describes them (string allocations) after letting go, and the ring
// grows under it only when more calls are pending than ever before. Where it is taken, the other
// side holds it for a few dozen instructions, so the waiter yields rather than sleeps.
// Measured 2026-11-28 (about 21:50 UTC), osu_allreduce through the MPI layer, 2 ranks, 9
// alternating rounds, medians, 4-16 bytes: std::mutex 0.18 us, this lock 0.17, no log at all
// 0.16.
transport::CollectiveProgress CallLog::progress() const {
  change_told_.store(false);  // Note [Telling changes once]
  std::optional<Record> oldest_pending, last_issued, last_completed;
  transport::CollectiveProgress now;
  {
    std::lock_guard lock(lock_);
    now.issued = next_sequence_;
    if (oldest_pending_ < next_sequence_) oldest_pending = slot(oldest_pending_).record;
    // The last issued call keeps its slot until a later one is issued: only the oldest pending
    // call moves, and never past next_sequence_.
    if (next_sequence_ > 0) last_issued = slot(next_sequence_ - 1).record;
    last_completed = last_completed_;
  }
  if (oldest_pending) now.oldest_pending = oldest_pending->described();
  if (last_issued) now.last_issued = last_issued->described();
  if (last_completed) now.last_completed = last_completed->described();
  return now;
}

}  // namespace tnt::detail
