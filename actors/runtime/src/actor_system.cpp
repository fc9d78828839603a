#include "tnt/actors/actor_system.h"
#include "tnt/core/error.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <stdexcept>
#include <thread>

#include "cell.h"

namespace tnt::actors {

namespace detail {
namespace {

// The system whose pool runs this thread, so wait() can refuse to deadlock.
thread_local const SystemState* pool_system = nullptr;

std::string describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}

bool is_mailbox_closed(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const MailboxClosed&) {
    return true;
  } catch (...) {
    return false;
  }
}

std::string closed_text(const Cell& cell, const std::string& what) {
  const char* state = "has stopped";
  switch (cell.system->phase.load()) {
    case Phase::created: state = "is not started"; break;
    case Phase::stopping: state = "is stopping"; break;
    default: break;
  }
  return "actor system '" + cell.system->name + "' " + state + ": cannot deliver " + what + " to actor '" + cell.name +
         "'";
}

// Called with the mutex held, once no actor is live.
void mark_stopped(SystemState& system) {
  system.phase = Phase::stopped;
  for (auto* io : system.pools) io->stop();  // abandons what actors left behind: never a hang
  system.changed.notify_all();
}

}  // namespace

void Cell::start() {
  if (system->discard || actor == nullptr) return;
  started = true;
  try {
    actor->on_start();
  } catch (...) {
    fail(*system, "actor '" + name + "' in on_start", std::current_exception());
  }
}

void Cell::deliver(Envelope& envelope) {
  // Dropped messages are destroyed by the caller; a dropped request answers its requester.
  if (stopped || actor == nullptr || system->discard) return;
  try {
    envelope.deliver();
  } catch (...) {
    fail(*system, "actor '" + name + "' handling " + envelope.describe(), std::current_exception());
  }
}

void Cell::finish() {
  if (stopped || actor == nullptr) return;  // no actor: a late marker of a destroyed system
  if (started) {
    try {
      actor->on_stop();
    } catch (...) {
      fail(*system, "actor '" + name + "' in on_stop", std::current_exception());
    }
  }
  stopped = true;
  std::lock_guard lock(system->mutex);
  --system->live;
  if (on_pool) --system->live_on_pools;
  if (system->live == 0) mark_stopped(*system);
  system->changed.notify_all();
}

void request_stop(SystemState& system, StopMode mode) {
  std::lock_guard lock(system.mutex);
  if (mode == StopMode::discard) system.discard = true;
  if (system.phase == Phase::created) {
    mark_stopped(system);
    return;
  }
  if (system.phase != Phase::running) return;  // already stopping: at most a switch to discard
  system.phase = Phase::stopping;
  if (system.live == 0) {
    mark_stopped(system);
    return;
  }
  // Mailboxes are closed from here on, so on each strand this runs after every message that
  // was accepted: that is what makes drain complete.
  for (const auto& cell : system.cells) boost::asio::post(*cell->strand, [cell] { cell->finish(); });
}

void fail(SystemState& system, const std::string& where, std::exception_ptr cause) {
  const std::string text = describe(cause);
  if (system.phase != Phase::running && is_mailbox_closed(cause)) {
    // A send refused because this system is stopping: a consequence of the stop, not a cause.
    system.log->debug("actor system '{}': {}: {}", system.name, where, text);
    return;
  }
  bool first = false;
  {
    std::lock_guard lock(system.mutex);
    if (system.cause == cause) return;  // the same error, reported by the reply and the handler
    if (!system.error) {
      first = true;
      system.error = std::make_exception_ptr(ActorFailed(where, cause, text));
      system.cause = cause;
    }
  }
  if (first) {
    system.log->error("actor system '{}': {} failed: {}; stopping the system", system.name, where, text);
  } else {
    system.log->warn("actor system '{}': {} failed as well: {}", system.name, where, text);
  }
  request_stop(system, StopMode::discard);
}

const std::string& cell_name(const Cell& cell) { return cell.name; }
bool running(const Cell& cell) { return cell.system->phase == Phase::running; }

const std::any* Cell::handler(const std::type_info& type) const {
  auto it = actor->handlers_.find(type);
  return it == actor->handlers_.end() ? nullptr : &it->second;
}

namespace {
// Posts the envelope if the system runs; otherwise leaves it with the caller.
bool post_if_running(const std::shared_ptr<Cell>& cell, std::unique_ptr<Envelope>& envelope) {
  std::lock_guard lock(cell->system->mutex);
  if (cell->system->phase != Phase::running) return false;
  boost::asio::post(*cell->strand, [cell, e = std::move(envelope)] { cell->deliver(*e); });
  return true;
}
}  // namespace

void enqueue(const std::shared_ptr<Cell>& cell, const std::type_info& type, const EnvelopeFactory& make) {
  bool handled = true;
  {
    std::lock_guard lock(cell->system->mutex);  // Note [Sends racing destruction]
    if (cell->system->phase == Phase::running && cell->actor != nullptr) {
      const std::any* handler = cell->handler(type);
      if (handler) {
        boost::asio::post(*cell->strand, [cell, e = make(*handler)] { cell->deliver(*e); });
        return;
      }
      handled = false;
    }
  }
  if (!handled) {
    throw UnhandledMessage("actor '" + cell->name + "' of system '" + cell->system->name + "' has no handler for " +
                           type_name(type));
  }
  throw MailboxClosed(closed_text(*cell, type_name(type)));
}

bool try_enqueue(const std::shared_ptr<Cell>& cell, std::unique_ptr<Envelope> envelope) {
  if (post_if_running(cell, envelope)) return true;
  cell->system->log->debug("{}", closed_text(*cell, envelope->describe()));
  return false;
}

std::exception_ptr dropped_error(const Cell& target, const std::type_info& request) {
  if (running(target)) {
    return std::make_exception_ptr(
        RequestDropped("actor '" + target.name + "' dropped request " + type_name(request) + " without replying"));
  }
  return std::make_exception_ptr(MailboxClosed("actor system '" + target.system->name + "' stopped before actor '" +
                                               target.name + "' answered " + type_name(request)));
}

void fail_handling(const Cell& target, const std::string& what, std::exception_ptr cause) {
  fail(*target.system, "actor '" + target.name + "' handling " + what, std::move(cause));
}

}  // namespace detail

namespace {
struct Pool {
  Pool(std::string n, std::size_t t) : name(std::move(n)), threads(t) {}
  std::string name;
  std::size_t threads;
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard{io.get_executor()};
  std::vector<std::thread> workers;
};

void run_pool(std::shared_ptr<detail::SystemState> system, Pool& pool, std::size_t index) {
  // Thread names (at most 15 characters) make top -H and debuggers readable.
  std::string thread_name = pool.name.substr(0, 11) + "-" + std::to_string(index);
  pthread_setname_np(pthread_self(), thread_name.substr(0, 15).c_str());
  detail::pool_system = system.get();
  for (;;) {
    try {
      pool.io.run();
      return;
    } catch (...) {
      // An asynchronous handler an actor bound to its strand threw: no message to blame.
      detail::fail(*system, "an asynchronous handler on pool '" + pool.name + "'", std::current_exception());
    }
  }
}
}  // namespace

struct ActorSystem::Impl {
  SystemConfig config;
  std::shared_ptr<detail::SystemState> state = std::make_shared<detail::SystemState>();
  std::map<std::string, std::unique_ptr<Pool>> pools;
  std::map<std::string, boost::asio::any_io_executor> external;
  std::vector<std::unique_ptr<Actor>> actors;  // declared after pools: destroyed before them
  std::mutex join_mutex;

  void join() {
    std::lock_guard lock(join_mutex);
    for (auto& [name, pool] : pools) {
      for (auto& worker : pool->workers) {
        if (worker.joinable()) worker.join();
      }
    }
  }
};

ActorSystem::ActorSystem(SystemConfig config) : impl_(std::make_unique<Impl>()) {
  auto& state = *impl_->state;
  state.name = config.name;
  state.log = config.logger ? config.logger : spdlog::default_logger();
  for (const auto& [name, threads] : config.pools) {
    if (name.empty()) throw ConfigError("actor system '" + config.name + "': a pool has an empty name");
    if (threads == 0) {
      throw ConfigError("actor system '" + config.name + "': pool '" + name + "' needs at least 1 thread");
    }
    auto pool = std::make_unique<Pool>(name, threads);
    state.pools.push_back(&pool->io);
    impl_->pools.emplace(name, std::move(pool));
  }
  impl_->config = std::move(config);
}

ActorSystem::~ActorSystem() {
  auto& state = *impl_->state;
  detail::request_stop(state, StopMode::discard);
  {
    std::unique_lock lock(state.mutex);
    // Actors on executors the caller runs cannot be waited for: nobody may be running them.
    state.changed.wait(lock, [&] { return state.phase == detail::Phase::stopped || state.live_on_pools == 0; });
    if (state.phase != detail::Phase::stopped) {
      state.phase = detail::Phase::stopped;
      for (auto* io : state.pools) io->stop();
    }
  }
  impl_->join();
  std::vector<std::shared_ptr<detail::Cell>> cells;
  {
    std::lock_guard lock(state.mutex);
    cells.swap(state.cells);                               // cells point back at the state: break the cycle
    state.pools.clear();                                   // destroyed with impl_
    for (const auto& cell : cells) cell->actor = nullptr;  // Note [Sends racing destruction]
  }
  while (!impl_->actors.empty()) impl_->actors.pop_back();  // in reverse order of spawn
  std::lock_guard lock(state.mutex);                        // phase is stopped: no sender touches a strand now
  for (const auto& cell : cells) cell->strand.reset();
}

void ActorSystem::add_executor(const std::string& name, boost::asio::any_io_executor executor) {
  if (impl_->pools.contains(name) || impl_->external.contains(name)) {
    throw ConfigError("actor system '" + impl_->config.name + "': executor name '" + name + "' is already taken");
  }
  impl_->external.emplace(name, std::move(executor));
}

std::shared_ptr<detail::Cell> ActorSystem::make_cell(const std::string& name) {
  auto& state = *impl_->state;
  const std::string prefix = "actor system '" + state.name + "': ";
  if (state.phase != detail::Phase::created) throw LogicError(prefix + "spawn('" + name + "') after start");
  if (name.empty()) throw ConfigError(prefix + "an actor needs a name");
  for (const auto& cell : state.cells) {
    if (cell->name == name) throw ConfigError(prefix + "actor name '" + name + "' is already taken");
  }
  auto placed = impl_->config.placement.find(name);
  const std::string& where = placed != impl_->config.placement.end() ? placed->second : impl_->config.default_pool;
  auto make_strand = [](boost::asio::any_io_executor ex) { return boost::asio::make_strand(std::move(ex)); };
  if (auto pool = impl_->pools.find(where); pool != impl_->pools.end()) {
    return std::make_shared<detail::Cell>(name, impl_->state, make_strand(pool->second->io.get_executor()), true);
  }
  if (auto ex = impl_->external.find(where); ex != impl_->external.end()) {
    return std::make_shared<detail::Cell>(name, impl_->state, make_strand(ex->second), false);
  }
  throw ConfigError(prefix + "actor '" + name + "' is placed on '" + where +
                    "', which is neither a pool nor an executor of this system");
}

ActorRef ActorSystem::adopt(std::unique_ptr<Actor> actor) {
  auto cell = actor->cell_;
  cell->actor = actor.get();
  {
    std::lock_guard lock(impl_->state->mutex);
    impl_->state->cells.push_back(cell);
    ++impl_->state->live;
    if (cell->on_pool) ++impl_->state->live_on_pools;
  }
  impl_->actors.push_back(std::move(actor));
  return ActorRef(std::move(cell));
}

void ActorSystem::start() {
  auto& state = *impl_->state;
  {
    std::lock_guard lock(state.mutex);
    if (state.phase != detail::Phase::created) {
      throw LogicError("actor system '" + state.name + "' can be started only once");
    }
    state.phase = detail::Phase::running;
    for (const auto& cell : state.cells) boost::asio::post(*cell->strand, [cell] { cell->start(); });
  }
  for (auto& [name, pool] : impl_->pools) {
    for (std::size_t i = 0; i < pool->threads; ++i) {
      pool->workers.emplace_back(run_pool, impl_->state, std::ref(*pool), i);
    }
  }
  state.log->debug("actor system '{}': started {} actors", state.name, impl_->actors.size());
}

void ActorSystem::stop(StopMode mode) { detail::request_stop(*impl_->state, mode); }

bool ActorSystem::wait_for(std::chrono::milliseconds timeout) {
  auto& state = *impl_->state;
  if (detail::pool_system == &state) {
    throw LogicError("actor system '" + state.name + "': wait() on one of its own threads would deadlock");
  }
  std::exception_ptr error;
  {
    std::unique_lock lock(state.mutex);
    if (!state.changed.wait_for(lock, timeout, [&] { return state.phase == detail::Phase::stopped; })) return false;
    error = state.error;
  }
  impl_->join();
  if (error) std::rethrow_exception(error);
  return true;
}

void ActorSystem::wait() {
  while (!wait_for(std::chrono::hours(1))) {
  }
}

bool ActorSystem::stopped() const { return impl_->state->phase == detail::Phase::stopped; }

std::exception_ptr ActorSystem::error() const {
  std::lock_guard lock(impl_->state->mutex);
  return impl_->state->error;
}

const std::string& ActorSystem::name() const { return impl_->state->name; }

}  // namespace tnt::actors
