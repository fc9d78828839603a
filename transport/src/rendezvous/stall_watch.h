#pragma once
// The master's watch over every rank's collective progress: stalls and mismatched calls.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tnt/transport/rendezvous.h"

namespace tnt::transport::detail {

// Note [Stall watch]: every rank's heartbeat to the master carries its CollectiveProgress (the
// number of collectives it has issued, its oldest pending call, its last issued and last
// completed call). At each heartbeat the master looks at the latest reports:
//
// - A stall is a call #n that some ranks wait in (it is their oldest pending call) while other
//   ranks have not issued it at all (they issued n calls or fewer). Ranks that all compute
//   between collectives, or all wait in the same call, are no stall: only a rank that others
//   wait for is named. A stall lasts while neither n nor the missing ranks' issue counts change;
//   after TNT_STALL_WARN_S every rank logs a warning naming the missing ranks and hosts, the
//   call they are missing and the last one they completed, again after twice as long, and so
//   on; after TNT_STALL_TIMEOUT_S (if set) the job fails with that message instead.
// - A mismatch is one sequence number that two ranks report with different signatures: they
//   called different collectives (kind, type, operation, root or size) at the same place in the
//   issue order. Collectives put part of the signature in their message tags (Note [Tags]), so
//   such calls do not exchange data: they wait, and the next reports show the mismatch. The job
//   fails at once, naming both ranks and both calls.
//
// Reports are up to a heartbeat old, so the watch only judges what has persisted over reports;
// a rank that has not reported yet is never named.
// "last completed #41 allreduce(...) and last issued #42 barrier(0 bytes)".
std::string last_calls_of(const CollectiveProgress& progress);
// Each of `ranks` (at most 8 shown) with the last call it completed and the last it issued, as
// its latest report in `reports` (indexed by rank) gave them.
std::string last_calls(const std::vector<int>& ranks, const std::vector<std::optional<CollectiveProgress>>& reports,
                       const std::function<std::string(int)>& name);

class StallWatch {
 public:
  using Clock = std::chrono::steady_clock;

  struct Verdict {
    enum class Kind { none, warning, failure } kind = Kind::none;
    int rank = -1;  // the rank to blame (the first missing one, or one side of a mismatch)
    std::string message;
  };

  StallWatch(std::chrono::milliseconds warn_after, std::chrono::milliseconds fail_after);

  // `reports[r]`: rank r's latest report, if any; `name(r)`: e.g. "rank 2 (node7)".
  Verdict check(const std::vector<std::optional<CollectiveProgress>>& reports,
                const std::function<std::string(int)>& name, Clock::time_point now);

 private:
  struct Stall {
    std::uint64_t sequence = 0;
    std::vector<std::uint64_t> missing_issued;  // the missing ranks' issue counts, by rank order
    Clock::time_point since;
    std::chrono::milliseconds next_warning{0};
  };

  std::chrono::milliseconds warn_after_;
  std::chrono::milliseconds fail_after_;  // 0: never
  std::optional<Stall> stall_;
};

}  // namespace tnt::transport::detail
