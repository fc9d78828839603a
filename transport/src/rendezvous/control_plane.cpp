#include "control_plane.h"

#include <algorithm>

#include <kj/exception.h>
#include <spdlog/spdlog.h>

#include "tnt/core/error.h"

#include "framing.h"
#include "wire.capnp.h"

namespace tnt::transport::detail {
namespace asio = boost::asio;

namespace {

std::vector<std::uint8_t> control_frame(const std::function<void(wire::Control::Builder)>& fill) {
  capnp::MallocMessageBuilder message;
  fill(message.initRoot<wire::Control>());
  return encode_frame(message);
}

bool is_outcome(Phase phase) { return phase == Phase::finished || phase == Phase::failed; }

void write_call(wire::Call::Builder out, const CollectiveCall& call) {
  out.setSequence(call.sequence);
  out.setSignature(call.signature);
  out.setDescription(call.description);
}

CollectiveCall read_call(wire::Call::Reader in) {
  return {in.getSequence(), in.getSignature(), in.getDescription().cStr()};
}

std::vector<std::uint8_t> progress_frame(const CollectiveProgress& progress) {
  return control_frame([&](wire::Control::Builder c) {
    auto out = c.initProgress();
    out.setIssued(progress.issued);
    write_call(out.initOldestPending(), progress.oldest_pending);
    write_call(out.initLastIssued(), progress.last_issued);
    write_call(out.initLastCompleted(), progress.last_completed);
  });
}

CollectiveProgress read_progress(wire::Progress::Reader in) {
  return {in.getIssued(), read_call(in.getOldestPending()), read_call(in.getLastIssued()),
          read_call(in.getLastCompleted())};
}

}  // namespace

ControlPlane::ControlPlane(EventLoop& loop, const JobEnvironment& env, TaskCount& tasks)
    : loop_(loop),
      env_(env),
      tasks_(tasks),
      heartbeat_timer_(loop.strand()),
      report_timer_(loop.strand()),
      reports_(env.rank == 0 ? env.size : 0),
      stall_watch_(env.stall_warn, env.stall_timeout) {}

bool ControlPlane::advance(Phase next) {
  const Phase now = phase_.load();
  if (next <= now) return false;
  if (is_outcome(now) && next != Phase::stopped) return false;
  phase_ = next;
  return true;
}

void ControlPlane::start(Joined joined) {
  links_ = std::move(joined.links);
  book_ = std::move(joined.book);
  if (!advance(Phase::running)) return;
  for (auto& link : links_) {
    if (!joined.answer.empty()) send(*link, joined.answer);
    link->last_heard = Clock::now();
    asio::co_spawn(loop_.strand(), read_control(*link), asio::detached);
  }
  schedule_heartbeat();
}

void ControlPlane::set_failure_handler(Rendezvous::FailureHandler handler) {
  failure_handler_ = std::move(handler);
  if (phase_ == Phase::failed) failure_handler_(lost_rank_, failure_reason_);
}

void ControlPlane::report_peer_lost(int rank, const std::string& reason) {
  if (env_.rank == 0) {
    fail_job(rank, "rank 0 lost its connection to " + peer_name(rank) + ": " + reason);
    return;
  }
  // The master judges: its verdict names the rank that really failed, also when what we saw was
  // only a neighbour going down because of it.
  const auto bytes = control_frame([&](wire::Control::Builder c) {
    auto lost = c.initPeerLost();
    lost.setRank(rank);
    lost.setReason(reason);
  });
  for (auto& link : links_) send(*link, bytes);
}

// Note [One failure, every rank told]: a rank that fails on its own (a file only it writes, an
// error in a callback, evaluate or predict on one rank) would leave the others waiting: in a
// collective this rank will never join, or in the goodbye. Instead its failure travels the same
// path as a lost peer's: the rank sends `failed` to the master, the master judges as for
// PeerLost and sends Abort to every rank naming the failed rank and its message, and each rank's
// failure handler fails its pending and later collectives (JobError) at once. What remains is
// that every rank reaches an exit: a rank that waits in a collective or the goodbye is released
// by the Abort; one busy elsewhere (computing, reading data) finds out at its next call, and the
// owner of a communicator that must not outlive the job (tnt-train) says how long it may take
// (CommunicatorOptions::exit_after_failure). The failing rank keeps its channels open until the
// master's verdict comes back (at most a second: Rendezvous::abort), so the master hears why
// before it sees any of them close and never mistakes the failure for a crash.
void ControlPlane::abort(const std::string& reason) {
  if (is_outcome(phase_)) return;
  if (env_.rank == 0) {
    fail_job(0, peer_name(0) + " failed: " + reason);
    return;
  }
  // The master's Abort comes back and fails this rank too; until then this rank keeps its
  // channels open, so that the master hears of the failure before it sees any channel close.
  const auto bytes = control_frame([&](wire::Control::Builder c) { c.setFailed(reason); });
  for (auto& link : links_) send(*link, bytes);
}

void ControlPlane::fail_here(const std::string& reason) { fail_local(env_.rank, reason); }

// Every handler here that reaches `this` counts as a task until it has run, so that the owner's
// wait for none (after stop()) also waits for a timer that had expired, its handler queued,
// before stop() cancelled it: such a handler ran after the plane was destroyed
// (heap-use-after-free under ASan, 1 run in about 12 of mpi_layer.netns_hosts_2x2).
void ControlPlane::progress_changed() {
  if (env_.rank == 0 || !progress_source_ || report_scheduled_.exchange(true)) return;
  auto task = std::make_shared<TaskCount::Scope>(tasks_);
  asio::post(loop_.strand(), [this, task] {
    if (phase_ == Phase::stopped) return;
    report_timer_.expires_at(std::max(Clock::now(), last_report_sent_ + kProgressReportDelay));
    report_timer_.async_wait([this, task](const boost::system::error_code& ec) {
      if (ec || phase_ == Phase::stopped) return;
      send_progress_report();
    });
  });
}

void ControlPlane::send_progress_report() {
  // Cleared before reading: a change made while the report is built schedules the next one.
  report_scheduled_ = false;
  last_report_sent_ = Clock::now();
  const auto report = progress_frame(progress_source_());
  for (auto& link : links_) send(*link, report);
}

void ControlPlane::finish() {
  loop_.call([this] {
    if (!advance(Phase::finishing)) return;
    if (env_.rank != 0) {
      for (auto& link : links_) send_goodbye(*link);
    } else {
      maybe_release_everyone();
    }
  });
  // Bounded: heartbeats keep running, so a silent or lost peer fails the job instead.
  loop_.wait_until([&] { return is_outcome(phase_.load()) || phase_.load() == Phase::stopped; });
  // The master's goodbyes must leave before its sockets close, or ranks would see a lost master.
  const auto flush_deadline = Clock::now() + std::chrono::seconds(5);
  loop_.wait_until([&] { return pending_writes_.load() == 0 || Clock::now() > flush_deadline; });
  // A rank that failed while this one said goodbye failed the job: the goodbye did not happen.
  std::string failure;
  loop_.call([&] {
    if (phase_ == Phase::failed) failure = failure_reason_;
  });
  if (!failure.empty()) throw JobError(failure);
}

void ControlPlane::stop() {
  advance(Phase::stopped);
  heartbeat_timer_.cancel();
  report_timer_.cancel();
  boost::system::error_code ignored;
  for (auto& link : links_) link->socket.close(ignored);
}

// Often enough that a silent peer is found well within TNT_PEER_TIMEOUT_S, and a stall
// reported close to TNT_STALL_WARN_S.
std::chrono::milliseconds heartbeat_interval(const JobEnvironment& env) {
  auto shortest = std::min(env.peer_timeout, env.stall_warn);
  if (env.stall_timeout.count() > 0) shortest = std::min(shortest, env.stall_timeout);
  return std::clamp(shortest / 4, std::chrono::milliseconds(20), std::chrono::milliseconds(1000));
}

void ControlPlane::schedule_heartbeat() {
  heartbeat_timer_.expires_after(heartbeat_interval(env_));
  auto task = std::make_shared<TaskCount::Scope>(tasks_);  // as in progress_changed()
  heartbeat_timer_.async_wait([this, task](const boost::system::error_code& ec) {
    if (ec || phase_ == Phase::stopped) return;
    beat();
    schedule_heartbeat();
  });
}

void ControlPlane::beat() {
  const auto now = Clock::now();
  if (env_.rank != 0 && progress_source_) {
    send_progress_report();
  } else {
    const auto heartbeat = control_frame([](wire::Control::Builder c) { c.setHeartbeat(); });
    for (auto& link : links_) send(*link, heartbeat);
  }
  if (const auto timed_out = silent_links(now, env_.peer_timeout); !timed_out.empty()) {
    lost_to_silence(timed_out, now);
    return;
  }
  watch_silence(now);
  if (env_.rank == 0 && phase_ == Phase::running) watch_progress(now);
}

namespace {
std::chrono::milliseconds silence_of(const ControlLink& link, Clock::time_point now) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - link.last_heard);
}
}  // namespace

std::vector<ControlLink*> ControlPlane::silent_links(Clock::time_point now,
                                                     std::chrono::milliseconds longer_than) const {
  std::vector<ControlLink*> silent;
  for (const auto& link : links_) {
    if (!link->closed && silence_of(*link, now) > longer_than) silent.push_back(link.get());
  }
  std::sort(silent.begin(), silent.end(), [](const ControlLink* a, const ControlLink* b) { return a->rank < b->rank; });
  return silent;
}

// Note [Silent ranks]: every rank watches its control links, so a stopped master is named by
// the others as a stopped rank is named by the master. A link silent for TNT_STALL_WARN_S is
// warned about (again after twice as long, and so on), with what the silent rank last reported
// of its collectives; at TNT_PEER_TIMEOUT_S the job fails naming every rank silent for a while,
// not only the first to reach the timeout, so ranks stopped together are named together.
std::string ControlPlane::describe_silent(const std::vector<ControlLink*>& silent, Clock::time_point now) const {
  constexpr std::size_t kNamed = 8;  // a job of thousands of ranks still gets a readable line
  std::vector<int> ranks;
  std::string text;
  const std::size_t named = std::min(silent.size(), kNamed);
  for (std::size_t i = 0; i < named; ++i) {
    ranks.push_back(silent[i]->rank);
    if (i > 0) text += i + 1 == named && named == silent.size() ? " and " : ", ";
    text += peer_name(silent[i]->rank) + (env_.rank != 0 ? ", the master," : "") + " for " +
            seconds(silence_of(*silent[i], now));
  }
  if (silent.size() > named) text += " and " + std::to_string(silent.size() - named) + " more";
  text += " (stopped or hung?)";
  if (env_.rank == 0) {
    text += "; " + last_calls(ranks, reports_, [this](int rank) { return peer_name(rank); });
  } else if (progress_source_) {
    text += "; this rank " + last_calls_of(progress_source_());
  }
  return text;
}

// A live peer is heard at every heartbeat: one silent for two of them is named beside one that
// is due to be warned about, so that ranks stopped moments apart appear in one message.
std::chrono::milliseconds ControlPlane::silence_worth_naming() const {
  return std::min(env_.stall_warn, 2 * heartbeat_interval(env_));
}

void ControlPlane::watch_silence(Clock::time_point now) {
  const auto to_warn = silent_links(now, silence_worth_naming());
  const bool due = std::any_of(to_warn.begin(), to_warn.end(), [&](const ControlLink* link) {
    const auto silence = silence_of(*link, now);
    return silence > env_.stall_warn && silence >= 2 * link->silence_warned;
  });
  if (!due) return;
  for (auto* link : to_warn) link->silence_warned = silence_of(*link, now);
  const auto message =
      "silence: nothing heard from " + describe_silent(to_warn, now) +
      "; the job fails once a rank has been silent for TNT_PEER_TIMEOUT_S=" + seconds(env_.peer_timeout);
  spdlog::warn("{}", message);
  if (env_.rank != 0) return;
  const auto notice = control_frame([&](wire::Control::Builder c) { c.setStallWarning(message); });
  for (auto& link : links_) {
    if (std::find(to_warn.begin(), to_warn.end(), link.get()) == to_warn.end()) send(*link, notice);
  }
}

void ControlPlane::lost_to_silence(const std::vector<ControlLink*>& timed_out, Clock::time_point now) {
  const auto named = silent_links(now, silence_worth_naming());
  const auto message = describe_silent(named.empty() ? timed_out : named, now) +
                       " (TNT_PEER_TIMEOUT_S=" + seconds(env_.peer_timeout) + ")";
  for (auto* link : timed_out) {
    link->closed = true;
    boost::system::error_code ignored;
    link->socket.close(ignored);
  }
  if (env_.rank == 0) {
    fail_job(timed_out.front()->rank, "silent: " + message);
  } else {
    fail_local(0, "the master is silent: " + message);
  }
}

void ControlPlane::watch_progress(Clock::time_point now) {
  if (progress_source_) reports_[0] = progress_source_();
  auto verdict = stall_watch_.check(
      reports_, [this](int rank) { return peer_name(rank); }, now);
  switch (verdict.kind) {
    case StallWatch::Verdict::Kind::none: break;
    case StallWatch::Verdict::Kind::warning: {
      spdlog::warn("{}", verdict.message);
      const auto notice = control_frame([&](wire::Control::Builder c) { c.setStallWarning(verdict.message); });
      for (auto& link : links_) send(*link, notice);
      break;
    }
    case StallWatch::Verdict::Kind::failure: fail_job(verdict.rank, verdict.message); break;
  }
}

asio::awaitable<void> ControlPlane::read_control(ControlLink& link) {
  TaskCount::Scope task(tasks_);
  try {
    while (phase_ != Phase::stopped) {
      Frame frame = co_await read_frame(link.socket, kMaxControlFrame, "a control message", link.name());
      link.last_heard = Clock::now();
      link.silence_warned = std::chrono::milliseconds(0);
      auto reader = frame.reader();
      auto control = reader.getRoot<wire::Control>();
      switch (control.which()) {
        case wire::Control::HEARTBEAT: break;
        case wire::Control::PROGRESS:
          if (env_.rank == 0 && link.rank > 0 && link.rank < env_.size) {
            reports_[link.rank] = read_progress(control.getProgress());
          }
          break;
        case wire::Control::STALL_WARNING: spdlog::warn("{}", control.getStallWarning().cStr()); break;
        case wire::Control::PEER_LOST:
          if (env_.rank == 0) {
            const int lost_rank = control.getPeerLost().getRank();
            fail_job(lost_rank, link.name() + " lost its connection to " + peer_name(lost_rank) + ": " +
                                    control.getPeerLost().getReason().cStr());
          }
          break;
        case wire::Control::FAILED:
          if (env_.rank == 0) {
            fail_job(link.rank, peer_name(link.rank) + " failed: " + control.getFailed().cStr());
          }
          break;
        case wire::Control::ABORT: fail_local(control.getAbort().getLostRank(), control.getAbort().getReason()); break;
        case wire::Control::GOODBYE:
          link.said_goodbye = true;
          if (env_.rank == 0) {
            maybe_release_everyone();
          } else if (advance(Phase::finished)) {
            loop_.wake();
          }
          break;
      }
    }
  } catch (const kj::Exception& error) {
    // A frame that is no Control message: the peer is broken, and is blamed for it now rather
    // than for the silence that would follow if this link were no longer read.
    on_control_error(link,
                     JobError(link.name() + " sent a malformed control message: " + error.getDescription().cStr()));
  } catch (const std::exception& error) {
    on_control_error(link, error);
  }
}

void ControlPlane::on_control_error(ControlLink& link, const std::exception& error) {
  if (phase_ == Phase::stopped || link.closed) return;
  if (link.said_goodbye && (env_.rank == 0 || phase_ == Phase::finished)) {
    link.closed = true;
    return;
  }
  const auto* system_error = dynamic_cast<const boost::system::system_error*>(&error);
  lost(link, system_error && system_error->code() == asio::error::eof
                 ? "closed its connection unexpectedly (process killed or crashed?)"
                 : std::string("failed: ") + error.what());
}

void ControlPlane::lost(ControlLink& link, const std::string& what) {
  link.closed = true;
  boost::system::error_code ignored;
  link.socket.close(ignored);
  if (env_.rank == 0) {
    fail_job(link.rank, peer_name(link.rank) + " " + what);
  } else {
    fail_local(0, "the master " + peer_name(0) + " " + what);
  }
}

void ControlPlane::maybe_release_everyone() {
  if (phase_ != Phase::finishing) return;
  for (auto& link : links_) {
    if (!link->said_goodbye) return;
  }
  for (auto& link : links_) send_goodbye(*link);
  advance(Phase::finished);
  loop_.wake();
}

void ControlPlane::fail_job(int lost_rank, const std::string& reason) {
  if (is_outcome(phase_)) return;
  const auto bytes = control_frame([&](wire::Control::Builder c) {
    auto abort = c.initAbort();
    abort.setLostRank(lost_rank);
    abort.setReason(reason);
  });
  for (auto& link : links_) send(*link, bytes);
  fail_local(lost_rank, reason);
}

void ControlPlane::fail_local(int lost_rank, const std::string& reason) {
  if (!advance(Phase::failed)) return;
  lost_rank_ = lost_rank;
  failure_reason_ = reason;
  if (failure_handler_) failure_handler_(lost_rank, reason);
  loop_.wake();
}

std::string ControlPlane::peer_name(int rank) const {
  if (rank >= 0 && rank < static_cast<int>(book_.size()) && !book_[rank].hostname.empty()) {
    return "rank " + std::to_string(rank) + " (" + book_[rank].hostname + ")";
  }
  return "rank " + std::to_string(rank);
}

void ControlPlane::send_goodbye(ControlLink& link) {
  send(link, control_frame([](wire::Control::Builder c) { c.setGoodbye(); }));
}

void ControlPlane::send(ControlLink& link, std::vector<std::uint8_t> bytes) {
  if (link.closed) return;
  link.outbox.push_back(std::move(bytes));
  ++pending_writes_;
  if (!link.writing) write_next(link);
}

void ControlPlane::drop_outbox(ControlLink& link) {
  pending_writes_ -= static_cast<int>(link.outbox.size());
  link.outbox.clear();
  link.writing = false;
}

void ControlPlane::write_next(ControlLink& link) {
  if (link.outbox.empty() || link.closed) {
    drop_outbox(link);
    return;
  }
  link.writing = true;
  auto task = std::make_shared<TaskCount::Scope>(tasks_);
  asio::async_write(link.socket, asio::buffer(link.outbox.front()),
                    [this, &link, task](const boost::system::error_code& ec, std::size_t) {
                      link.outbox.pop_front();
                      --pending_writes_;
                      if (ec) {
                        drop_outbox(link);  // the read side reports the loss
                      } else {
                        write_next(link);
                      }
                      loop_.wake();
                    });
}

}  // namespace tnt::transport::detail
