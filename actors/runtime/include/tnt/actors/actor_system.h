#pragma once
// The actor system: named executors, the actors placed on them, start, stop and failure.
//
// Lifecycle: construct (pools are created, not started) -> add_executor / spawn ->
// start() -> running -> stop() or a failure -> stopping -> stopped -> wait() returns.
// - The actor graph is fixed at start: add_executor, spawn and start from one thread, before
//   any message. Every actor's on_start runs before any message reaches it.
// - stop(drain): no new message is accepted; every message accepted before is handled, then
//   each actor's on_stop runs. stop(discard): the same, but queued messages are dropped.
// - An exception escaping any handler (or any asynchronous handler run by a pool) is logged,
//   recorded as the system's error, and stops the system with discard; wait() throws it as
//   ActorFailed. Only the first failure is kept; later ones are logged.
// - stop() may be called from any thread, handlers included; wait() from any thread that is
//   not one of the system's pool threads.
#include <chrono>
#include <cstddef>
#include <exception>
#include <map>
#include <memory>
#include <string>

#include "tnt/actors/actor.h"
#include "tnt/core/asio.h"

namespace spdlog {
class logger;
}

namespace tnt::actors {

enum class StopMode { drain, discard };

struct SystemConfig {
  std::string name = "actors";
  // Thread pools the system owns and runs: pool name -> number of threads (>= 1).
  std::map<std::string, std::size_t> pools = {{"default", 1}};
  // Where each actor runs: actor name -> pool or executor name. Others go to default_pool.
  std::map<std::string, std::string> placement;
  std::string default_pool = "default";
  // Null: spdlog's default logger.
  std::shared_ptr<spdlog::logger> logger;
};

class ActorSystem {
 public:
  explicit ActorSystem(SystemConfig config = {});
  ActorSystem(const ActorSystem&) = delete;
  ActorSystem& operator=(const ActorSystem&) = delete;
  // Stops with discard if still running, waits for the pools' actors, joins the threads.
  ~ActorSystem();

  // An executor the caller runs, usable in placement like a pool: e.g. an io_context run on a
  // test's own thread, to test actors deterministically. It must outlive the system, and be
  // run until stopped() for the on_stop of its actors to run.
  void add_executor(const std::string& name, boost::asio::any_io_executor executor);

  // Constructs A(args...) as actor `name` (unique) on the executor placement names.
  template <std::derived_from<Actor> A, class... Args>
  ActorRef spawn(const std::string& name, Args&&... args);

  void start();                                      // starts the pools; on_start of each actor
  void stop(StopMode mode = StopMode::drain);        // asks to stop; returns at once
  void wait();                                       // until stopped; throws ActorFailed on failure
  bool wait_for(std::chrono::milliseconds timeout);  // as wait(); false if still running
  void run() {
    start();
    wait();
  }

  bool stopped() const;
  std::exception_ptr error() const;  // the ActorFailed, or null
  const std::string& name() const;

 private:
  std::shared_ptr<detail::Cell> make_cell(const std::string& name);
  ActorRef adopt(std::unique_ptr<Actor> actor);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

namespace detail {
// Lets Actor's constructor find the cell spawn made for it.
struct ConstructionScope {
  explicit ConstructionScope(std::shared_ptr<Cell> cell);
  ~ConstructionScope();
};
}  // namespace detail

template <std::derived_from<Actor> A, class... Args>
ActorRef ActorSystem::spawn(const std::string& name, Args&&... args) {
  detail::ConstructionScope scope(make_cell(name));
  return adopt(std::make_unique<A>(std::forward<Args>(args)...));
}

}  // namespace tnt::actors
