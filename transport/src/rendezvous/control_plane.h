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
  // User thread: Goodbye both ways; returns once every rank said it, or the job failed.
  void finish();
  // On the strand: closes every connection; the owner then waits for its TaskCount.
  void stop();

  Phase phase() const { return phase_.load(); }

 private:
  bool advance(Phase next);
  void schedule_heartbeat();
  void beat();
  void watch_progress(Clock::time_point now);
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
