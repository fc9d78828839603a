#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tnt/transport/environment.h"
#include "tnt/transport/event_loop.h"
#include "tnt/transport/transport.h"

namespace tnt::transport {

inline constexpr std::uint32_t kProtocolVersion = 1;

struct RendezvousOptions {
  // Text that describes the run (e.g. the trainer's configuration). Ranks whose texts differ
  // are refused: their SHA-256 digests travel in the Hello and the master compares them.
  std::string configuration;
  std::uint32_t protocol_version = kProtocolVersion;  // only tests change it
};

// The job's bootstrap and control plane. The master rank (0) listens on
// TNT_MASTER_ADDR:TNT_MASTER_PORT; every other rank connects, both sides prove they hold the
// job token (auth.h), the rank sends a Hello, and the master answers with the address book
// or a refusal that says why. The connections stay open afterwards: heartbeats both ways
// detect a rank that is gone or silent, and the master tells every rank when the job fails.
//
// Threading: construct, join() and finish() from one user thread; failure handlers run on
// the event loop's strand.
// One collective call as the stall watch sees it (Note [Stall watch]). `signature` identifies
// what was called (kind, type, operation, root, size): ranks that called the same collective
// report the same value. `description` says it for people, e.g. "allreduce(sum, float32, 4 KiB)".
struct CollectiveCall {
  std::uint64_t sequence = 0;  // its place in the issue order, the same on every rank
  std::uint64_t signature = 0;
  std::string description;  // empty: no such call
  bool known() const { return !description.empty(); }
};

// How far a rank has got with its collectives.
struct CollectiveProgress {
  std::uint64_t issued = 0;       // calls issued so far: call #n is issued once issued > n
  CollectiveCall oldest_pending;  // the oldest issued call that has not completed
  CollectiveCall last_issued;
  CollectiveCall last_completed;  // the completed call with the highest sequence number
};

class Rendezvous {
 public:
  using FailureHandler = std::function<void(int lost_rank, const std::string& reason)>;
  using ProgressSource = std::function<CollectiveProgress()>;

  Rendezvous(EventLoop& loop, const JobEnvironment& env, RendezvousOptions options);
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  // Blocks until every rank has joined and returns the address book (indexed by rank).
  // `data_address_for(local_ip)` gives this rank's data-plane address once the IP address
  // that reaches the master is known. Throws tnt::JobError (refused, timed out, unreachable).
  std::vector<PeerAddress> join(const std::function<std::string(const std::string& local_ip)>& data_address_for);

  // Called once, on the loop's strand, when the job fails (a rank lost or silent, an abort).
  void set_failure_handler(FailureHandler handler);
  // Tells the master that this rank's channel to `rank` failed (call on the loop's strand).
  // The master then fails the job on every rank, naming the rank it holds responsible; the
  // failure handler reports that verdict here too.
  void report_peer_lost(int rank, const std::string& reason);
  // Set before join(): read on the loop's strand at every heartbeat (so it must be thread-safe)
  // and reported to the master, which watches for stalls and mismatched calls. Without one, this
  // rank reports nothing and is never named in a stall.
  void set_progress_source(ProgressSource source);
  // Orderly end: returns once every rank has called finish(); throws tnt::JobError if the job
  // failed first.
  void finish();
  // This rank failed on its own, for `reason`: the job fails on every rank, naming this one
  // (Note [One failure, every rank told] in rendezvous/control_plane.cpp). Returns once the
  // master's verdict has come back (the failure handler then runs with it), or after a second.
  // From a user thread, not the loop's.
  void abort(const std::string& reason);
  // Any thread, cheap: what the progress source reports has changed (see set_progress_source).
  void progress_changed();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tnt::transport
