#pragma once
// Actors, references to them, and replies.
//
// Concurrency contract:
// - An actor's message handlers, on_start, on_stop and reply callbacks run on the actor's
//   strand: never two at once, whatever the thread pool does. Handlers run in the order the
//   messages were sent by any one sender (thread or actor).
// - ActorRef::send and ActorRef::request may be called from any thread, at any time; they
//   throw MailboxClosed unless the system is running.
// - Handlers are registered with on<Msg>() in the actor's constructor only.
// - Never block a handler on a future from request(): its reply may need the same thread.
#include <any>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <unordered_map>

#include "tnt/actors/detail/envelope.h"
#include "tnt/actors/errors.h"
#include "tnt/core/asio.h"

namespace tnt::actors {

class ActorSystem;
using Strand = boost::asio::strand<boost::asio::any_io_executor>;

// A handle to an actor; cheap to copy, safe to keep after the system is gone (sends then
// throw MailboxClosed).
class ActorRef {
 public:
  ActorRef() = default;
  const std::string& name() const;
  explicit operator bool() const { return cell_ != nullptr; }

  // Queues msg for the actor. Throws MailboxClosed, or UnhandledMessage if it has no handler.
  template <class Msg>
  void send(Msg msg) const;

  // Queues a request; the future gets the reply, the handler's exception, RequestDropped, or
  // MailboxClosed if the system stopped before answering.
  template <RequestMessage Req>
  std::future<reply_t<Req>> request(Req req) const;

 private:
  friend class Actor;
  friend class ActorSystem;
  explicit ActorRef(std::shared_ptr<detail::Cell> cell) : cell_(std::move(cell)) {}

  std::shared_ptr<detail::Cell> cell_;
};

// Base class of every actor: its state is the derived class's members, its behaviour the
// handlers its constructor registers. Create actors with ActorSystem::spawn only.
class Actor {
 public:
  Actor();
  Actor(const Actor&) = delete;
  Actor& operator=(const Actor&) = delete;
  virtual ~Actor() = default;

  const std::string& name() const;
  ActorRef self() const { return ActorRef(cell_); }
  // Bind Asio operations (timers, sockets) to it so that their completion handlers never run
  // concurrently with the actor's message handlers. Valid from the constructor on.
  const Strand& strand() const;

 protected:
  // Registers the handler for Msg: void(Msg&) for a plain message; for a request, either
  // reply_t<Msg>(Msg&) or void(Msg&, Reply<reply_t<Msg>>) to answer later.
  template <class Msg, class F>
  void on(F handler);

  // Runs on the strand once the system starts, before any message.
  virtual void on_start() {}
  // Runs on the strand once the system stops, after the last message handled (drain) or
  // with the rest dropped (discard); exactly once for every actor whose on_start ran.
  virtual void on_stop() {}

  // Requests from another actor; on_reply runs later on this actor's strand. If the request
  // fails, the system fails; if the system stops first, on_reply never runs.
  template <RequestMessage Req, class F>
  void request(const ActorRef& to, Req req, F on_reply);

 private:
  friend class ActorRef;
  friend class ActorSystem;
  friend class detail::Cell;
  void check_constructing(const std::type_info& type) const;

  std::shared_ptr<detail::Cell> cell_;
  std::unordered_map<std::type_index, std::any> handlers_;  // fixed once spawn returns
};

// --- implementation ---------------------------------------------------------------------

inline const std::string& ActorRef::name() const { return detail::cell_name(*cell_); }

namespace detail {
template <class Msg>
const Handler<Msg>& handler_of(const std::any& handler) {
  return *std::any_cast<Handler<Msg>>(&handler);
}
}  // namespace detail

template <class Msg>
void ActorRef::send(Msg msg) const {
  static_assert(!RequestMessage<Msg>, "a message with a reply_type is sent with request()");
  detail::enqueue(cell_, typeid(Msg), [&msg](const std::any& handler) -> std::unique_ptr<detail::Envelope> {
    return std::make_unique<detail::MessageEnvelope<Msg>>(detail::handler_of<Msg>(handler), std::move(msg));
  });
}

template <RequestMessage Req>
std::future<reply_t<Req>> ActorRef::request(Req req) const {
  std::future<reply_t<Req>> future;
  // The reply's sink exists only once the request is queued: a refused request answers nobody.
  detail::enqueue(cell_, typeid(Req), [&](const std::any& handler) -> std::unique_ptr<detail::Envelope> {
    auto sink = std::make_unique<detail::FutureSink<Req>>(cell_);
    future = sink->promise.get_future();
    return std::make_unique<detail::RequestEnvelope<Req>>(detail::handler_of<Req>(handler), std::move(req),
                                                          Reply<reply_t<Req>>(std::move(sink)));
  });
  return future;
}

template <class Msg, class F>
void Actor::on(F handler) {
  check_constructing(typeid(Msg));
  if constexpr (RequestMessage<Msg>) {
    using R = reply_t<Msg>;
    if constexpr (std::is_invocable_v<F&, Msg&, Reply<R>>) {
      handlers_[typeid(Msg)] =
          detail::Handler<Msg>([f = std::move(handler)](Msg& m, Reply<R>& r) mutable { f(m, std::move(r)); });
    } else {
      static_assert(std::is_convertible_v<std::invoke_result_t<F&, Msg&>, R>,
                    "a request handler returns reply_type or takes a Reply<reply_type>");
      handlers_[typeid(Msg)] = detail::Handler<Msg>([f = std::move(handler)](Msg& m, Reply<R>& r) mutable { r(f(m)); });
    }
  } else {
    static_assert(std::is_invocable_v<F&, Msg&>, "a message handler is void(Msg&)");
    handlers_[typeid(Msg)] = detail::Handler<Msg>(std::move(handler));
  }
}

template <RequestMessage Req, class F>
void Actor::request(const ActorRef& to, Req req, F on_reply) {
  using R = reply_t<Req>;
  detail::enqueue(to.cell_, typeid(Req), [&](const std::any& handler) -> std::unique_ptr<detail::Envelope> {
    auto sink =
        std::make_unique<detail::CallbackSink<Req>>(cell_, to.cell_, std::function<void(R&)>(std::move(on_reply)));
    return std::make_unique<detail::RequestEnvelope<Req>>(detail::handler_of<Req>(handler), std::move(req),
                                                          Reply<R>(std::move(sink)));
  });
}

}  // namespace tnt::actors
