#pragma once
// The job's control plane once every rank has joined: a star of TCP connections between the
// master and every other rank. Heartbeats both ways find a rank that is gone or silent; a rank
// reports a lost peer (PeerLost) and the master judges whom to blame and tells everyone (Abort);
// Goodbye both ways ends the job in order. Ranks' heartbeats carry their collectives' progress,
// which the master watches (Note [Stall watch]).
#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous_parts.h"
#include "stall_watch.h"
#include "tnt/transport/environment.h"
#include "tnt/transport/rendezvous.h"

namespace tnt::transport::detail {

// Note [Rendezvous phases]: the life of a rendezvous is one enum that only moves forward:
//
//   joining -> running -> finishing -> finished
//   joining, running or finishing -> failed
//   any phase -> stopped (the destructor closes every socket)
//
// `finished` and `failed` are outcomes: neither becomes the other, and only `stopped` follows
// them. Every change happens on the loop's strand; user threads only read the phase (finish()
// waits for an outcome).
enum class Phase { joining, running, finishing, finished, failed, stopped };

// The longest a change in a rank's collective progress waits before it is reported, and so the
// least time between two reports: at most ten small frames a second per rank. Each report wakes
// the control plane's thread twice on its rank (the post, the timer) and once on the master, and
// where every core runs a rank (as in any HPC job) each wake-up takes a core from a rank. At
// 5 ms, jacobi2d's 1024 x 1024 loop on 2 namespace hosts woke the control thread about 500 times
// a second and its rank was preempted 436 times a second; at 100 ms rank 0 had 288 context
// switches in 3,000 iterations instead of 710, and OpenMPI's twin 252 (2026-11-29).
inline constexpr std::chrono::milliseconds kProgressReportDelay{100};

class ControlPlane {
 public:
  ControlPlane(EventLoop& loop, const JobEnvironment& env, TaskCount& tasks);

  // On the strand: joining is over; reads every link and starts the heartbeats.
  void start(Joined joined);
  // On the strand unless said otherwise.
  void set_failure_handler(Rendezvous::FailureHandler handler);
  // Before start().
  void set_progress_source(Rendezvous::ProgressSource source) { progress_source_ = std::move(source); }
  void report_peer_lost(int rank, const std::string& reason);
  // On the strand: this rank failed on its own (Note [One failure, every rank told]): the master
  // fails the job at once; another rank tells the master, which fails it on every rank.
  void abort(const std::string& reason);
  // On the strand: the job fails here, naming this rank (after abort(), if no verdict came).
  void fail_here(const std::string& reason);
  // Any thread: this rank's collective progress changed. The master hears of it within
  // kProgressReportDelay rather than at the next heartbeat, so that a rank stopped between two
  // heartbeats is described as it was when it stopped (Note [Stall watch]).
  void progress_changed();
  // True once no control message waits to be written (the owner waits for this, bounded,
  // before it closes the connections after abort()).
  bool flushed() const { return pending_writes_.load() == 0; }
  // User thread: Goodbye both ways; returns once every rank said it, or throws JobError with
  // the job's failure.
  void finish();
  // On the strand: closes every connection; the owner then waits for its TaskCount.
  void stop();

  Phase phase() const { return phase_.load(); }

 private:
  bool advance(Phase next);
  void schedule_heartbeat();
  void beat();
  void send_progress_report();
  void watch_progress(Clock::time_point now);
  void watch_silence(Clock::time_point now);
  void lost_to_silence(const std::vector<ControlLink*>& timed_out, Clock::time_point now);
  std::chrono::milliseconds silence_worth_naming() const;
  std::vector<ControlLink*> silent_links(Clock::time_point now, std::chrono::milliseconds longer_than) const;
  std::string describe_silent(const std::vector<ControlLink*>& silent, Clock::time_point now) const;
  boost::asio::awaitable<void> read_control(ControlLink& link);
  void on_control_error(ControlLink& link, const std::exception& error);
  void lost(ControlLink& link, const std::string& what);
  void maybe_release_everyone();
  void fail_job(int lost_rank, const std::string& reason);
  void fail_local(int lost_rank, const std::string& reason);
  std::string peer_name(int rank) const;
  void send_goodbye(ControlLink& link);
  void send(ControlLink& link, std::vector<std::uint8_t> bytes);
  void write_next(ControlLink& link);
  void drop_outbox(ControlLink& link);

  EventLoop& loop_;
  const JobEnvironment& env_;
  TaskCount& tasks_;
  std::vector<std::unique_ptr<ControlLink>> links_;
  std::vector<PeerAddress> book_;
  boost::asio::steady_timer heartbeat_timer_;
  boost::asio::steady_timer report_timer_;
  std::atomic<bool> report_scheduled_{false};
  Clock::time_point last_report_sent_{};
  Rendezvous::FailureHandler failure_handler_;
  Rendezvous::ProgressSource progress_source_;
  // The master's: every rank's latest progress report, by rank (Note [Stall watch]).
  std::vector<std::optional<CollectiveProgress>> reports_;
  StallWatch stall_watch_;
  int lost_rank_ = -1;
  std::string failure_reason_;
  std::atomic<Phase> phase_{Phase::joining};
  std::atomic<int> pending_writes_{0};
};

}  // namespace tnt::transport::detail
