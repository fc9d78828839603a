#pragma once
// Private to the runtime: the shared state of a system and of each actor's mailbox.
//
// Lock order: SystemState::mutex is the only lock of the runtime; it is held while a sender
// finds the handler, builds the envelope and posts it to a strand (posting never runs a
// handler inline), and never while running a handler or destroying an envelope.
//
// Note [Sends racing destruction]: refs may be used from any thread at any time, e.g. by a
// completion handler on another event loop while the system is being destroyed. A send reads
// the target actor's handler table; the destructor destroys the actors. So the send's lookup
// and post happen under the system's mutex, and the destructor clears every Cell::actor under
// it before destroying an actor: a send then finds either a running system with live actors,
// or no actor and a MailboxClosed. (Before, the lookup ran unlocked after a phase check, and a
// send overlapping the destruction read freed memory: crashes, and hangs in the freed table.)
#include <any>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <typeinfo>
#include <vector>

#include "tnt/actors/actor.h"
#include "tnt/actors/actor_system.h"

namespace spdlog {
class logger;
}

namespace tnt::actors::detail {

enum class Phase { created, running, stopping, stopped };

struct SystemState {
  std::string name;
  std::shared_ptr<spdlog::logger> log;
  std::mutex mutex;
  std::condition_variable changed;
  std::atomic<Phase> phase{Phase::created};  // written under mutex
  std::atomic<bool> discard{false};          // written under mutex; never goes back
  std::exception_ptr error;                  // the first ActorFailed
  std::exception_ptr cause;                  // its cause, to recognise the same error again
  std::size_t live = 0;                      // actors whose on_stop has not finished
  std::size_t live_on_pools = 0;             // of those, the ones on the system's own pools
  std::vector<std::shared_ptr<Cell>> cells;
  std::vector<boost::asio::io_context*> pools;  // stopped once no actor is live
};

class Cell {
 public:
  Cell(std::string n, std::shared_ptr<SystemState> s, Strand st, bool pool)
      : name(std::move(n)), system(std::move(s)), strand(std::move(st)), on_pool(pool) {}

  void start();                      // on the strand
  void deliver(Envelope& envelope);  // on the strand
  void finish();                     // on the strand: on_stop, then count down the live actors
  // The actor's handler for `type`, or null. Under SystemState::mutex while running.
  const std::any* handler(const std::type_info& type) const;

  const std::string name;
  const std::shared_ptr<SystemState> system;
  // Reset when the system is destroyed: a strand must not outlive its io_context, and refs
  // may keep the cell alive. Used under SystemState::mutex while running, or by the actor.
  std::optional<Strand> strand;
  const bool on_pool;
  // Set by spawn; null once the system is destroyed (written under SystemState::mutex, so a
  // sender holding it sees a live actor or none).
  Actor* actor = nullptr;
  // Touched on the strand only.
  bool started = false;
  bool stopped = false;
};

void request_stop(SystemState& system, StopMode mode);
void fail(SystemState& system, const std::string& where, std::exception_ptr cause);

}  // namespace tnt::actors::detail
