#include "stall_watch.h"

#include <fmt/format.h>

#include <map>

#include "rendezvous_parts.h"

namespace tnt::transport::detail {
namespace {

using Reports = std::vector<std::optional<CollectiveProgress>>;
using Name = std::function<std::string(int)>;

std::string call_text(const CollectiveCall& call) {
  return call.known() ? fmt::format("#{} {}", call.sequence, call.description) : std::string("none");
}

// "rank 0 (a), rank 1 (a), ... and 5 more": a job of thousands of ranks gets a readable line.
std::string name_list(const std::vector<int>& ranks, const Name& name) {
  constexpr std::size_t kShown = 8;
  std::string text;
  for (std::size_t i = 0; i < ranks.size() && i < kShown; ++i) text += (i ? ", " : "") + name(ranks[i]);
  if (ranks.size() > kShown) text += fmt::format(" and {} more", ranks.size() - kShown);
  return text;
}

}  // namespace

std::string last_calls_of(const CollectiveProgress& progress) {
  return fmt::format("last completed {} and last issued {}", call_text(progress.last_completed),
                     call_text(progress.last_issued));
}

// "rank 2 (a) last completed #41 ... and last issued #41 ...; rank 3 (b) ...": each rank's own
// calls, as its latest report gave them.
std::string last_calls(const std::vector<int>& ranks, const Reports& reports, const Name& name) {
  constexpr std::size_t kShown = 8;
  std::string text;
  for (std::size_t i = 0; i < ranks.size() && i < kShown; ++i) {
    const auto& report = reports[static_cast<std::size_t>(ranks[i])];
    text += (i ? "; " : "") + name(ranks[i]) + " " +
            (report ? last_calls_of(*report) : std::string("has not reported any call"));
  }
  if (ranks.size() > kShown) text += fmt::format("; and {} more", ranks.size() - kShown);
  return text;
}

namespace {

// Two ranks that report one sequence number with different signatures, if any.
std::optional<StallWatch::Verdict> find_mismatch(const Reports& reports, const Name& name) {
  struct Seen {
    int rank;
    const CollectiveCall* call;
  };
  std::map<std::uint64_t, Seen> first_seen;
  for (int rank = 0; rank < static_cast<int>(reports.size()); ++rank) {
    if (!reports[rank]) continue;
    for (const CollectiveCall* call :
         {&reports[rank]->oldest_pending, &reports[rank]->last_issued, &reports[rank]->last_completed}) {
      if (!call->known()) continue;
      const auto [seen, inserted] = first_seen.try_emplace(call->sequence, Seen{rank, call});
      if (inserted || seen->second.call->signature == call->signature) continue;
      return StallWatch::Verdict{
          StallWatch::Verdict::Kind::failure, rank,
          fmt::format("ranks called different collectives as call #{}: {} called {}, {} called {} (every rank must "
                      "issue the same collectives in the same order)",
                      call->sequence, name(seen->second.rank), seen->second.call->description, name(rank),
                      call->description)};
    }
  }
  return std::nullopt;
}

}  // namespace

StallWatch::StallWatch(std::chrono::milliseconds warn_after, std::chrono::milliseconds fail_after)
    : warn_after_(warn_after), fail_after_(fail_after) {}

StallWatch::Verdict StallWatch::check(const Reports& reports, const Name& name, Clock::time_point now) {
  if (auto mismatch = find_mismatch(reports, name)) return *mismatch;

  // The oldest call that anyone waits in, and who has not issued it.
  std::optional<std::uint64_t> oldest;
  for (const auto& report : reports) {
    if (report && report->oldest_pending.known()) {
      oldest = std::min(oldest.value_or(report->oldest_pending.sequence), report->oldest_pending.sequence);
    }
  }
  std::vector<int> missing, waiting;
  std::vector<std::uint64_t> missing_issued;
  const CollectiveCall* awaited = nullptr;
  for (int rank = 0; oldest && rank < static_cast<int>(reports.size()); ++rank) {
    if (!reports[rank]) continue;
    if (reports[rank]->issued <= *oldest) {
      missing.push_back(rank);
      missing_issued.push_back(reports[rank]->issued);
    } else if (reports[rank]->oldest_pending.known() && reports[rank]->oldest_pending.sequence == *oldest) {
      waiting.push_back(rank);
      awaited = &reports[rank]->oldest_pending;
    }
  }
  if (missing.empty() || !awaited) {
    stall_.reset();
    return {};
  }
  if (!stall_ || stall_->sequence != *oldest || stall_->missing_issued != missing_issued) {
    stall_ = Stall{*oldest, missing_issued, now, warn_after_};
  }
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - stall_->since);
  const bool fail = fail_after_.count() > 0 && waited >= fail_after_;
  if (!fail && waited < stall_->next_warning) return {};
  stall_->next_warning *= 2;

  auto message =
      fmt::format("stall: {} {} not joined collective {} for {}, while {} {} in it; {}", name_list(missing, name),
                  missing.size() == 1 ? "has" : "have", call_text(*awaited), seconds(waited), name_list(waiting, name),
                  waiting.size() == 1 ? "waits" : "wait", last_calls(missing, reports, name));
  if (fail) {
    message += fmt::format(" (TNT_STALL_TIMEOUT_S={})", seconds(fail_after_));
  } else {
    message += fail_after_.count() > 0
                   ? fmt::format(" (the job fails after TNT_STALL_TIMEOUT_S={})", seconds(fail_after_))
                   : std::string(" (set TNT_STALL_TIMEOUT_S to fail the job instead)");
  }
  return {fail ? Verdict::Kind::failure : Verdict::Kind::warning, missing.front(), std::move(message)};
}

}  // namespace tnt::transport::detail
