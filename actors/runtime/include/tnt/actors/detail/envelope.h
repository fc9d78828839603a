#pragma once
// Internal: how messages travel. Not part of the stable API.
#include <any>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <typeinfo>

#include "tnt/actors/message.h"

namespace tnt::actors {
class Actor;
}

namespace tnt::actors::detail {

// One actor's mailbox: name, strand, link to its system. Defined in src/cell.h.
class Cell;

// A queued message, run once on the target's strand (or destroyed unrun on stop).
struct Envelope {
  virtual ~Envelope() = default;
  virtual void deliver() = 0;
  virtual std::string describe() const = 0;
};

template <class Msg>
struct HandlerOf {
  using type = std::function<void(Msg&)>;
};
template <RequestMessage Req>
struct HandlerOf<Req> {
  using type = std::function<void(Req&, Reply<reply_t<Req>>&)>;
};
template <class Msg>
using Handler = typename HandlerOf<Msg>::type;

// Builds the envelope of a message for the handler its target registered for its type.
using EnvelopeFactory = std::function<std::unique_ptr<Envelope>(const std::any& handler)>;

// Implemented in src/ (type_name in actor.cpp, the rest in actor_system.cpp).
std::string type_name(const std::type_info& type);
const std::string& cell_name(const Cell& cell);
bool running(const Cell& cell);
// Queues make(handler) for the cell's actor, or throws MailboxClosed (the system does not run,
// or is gone) or UnhandledMessage; make runs only when the envelope is queued. Finding the
// handler and queuing are one step under the system's lock, so a send racing the system's
// destruction never touches a destroyed actor (Note [Sends racing destruction]).
void enqueue(const std::shared_ptr<Cell>& cell, const std::type_info& type, const EnvelopeFactory& make);
bool try_enqueue(const std::shared_ptr<Cell>& cell, std::unique_ptr<Envelope> envelope);
std::exception_ptr dropped_error(const Cell& target, const std::type_info& request);
// Records that target failed handling `what`, and stops the system (the first failure wins).
void fail_handling(const Cell& target, const std::string& what, std::exception_ptr cause);

template <class Msg>
struct MessageEnvelope final : Envelope {
  MessageEnvelope(const Handler<Msg>& h, Msg&& m) : handler(h), msg(std::move(m)) {}
  void deliver() override { handler(msg); }
  std::string describe() const override { return type_name(typeid(Msg)); }
  const Handler<Msg>& handler;
  Msg msg;
};

template <RequestMessage Req>
struct RequestEnvelope final : Envelope {
  RequestEnvelope(const Handler<Req>& h, Req&& m, Reply<reply_t<Req>>&& r)
      : handler(h), msg(std::move(m)), reply(std::move(r)) {}
  void deliver() override {
    try {
      handler(msg, reply);
    } catch (...) {
      if (reply) reply.fail(std::current_exception());
      throw;
    }
  }
  std::string describe() const override { return type_name(typeid(Req)); }
  const Handler<Req>& handler;
  Req msg;
  Reply<reply_t<Req>> reply;
};

template <RequestMessage Req>
struct FutureSink final : ReplySink<reply_t<Req>> {
  explicit FutureSink(std::shared_ptr<Cell> t) : target(std::move(t)) {}
  void value(reply_t<Req> v) override { promise.set_value(std::move(v)); }
  void error(std::exception_ptr e) override { promise.set_exception(std::move(e)); }
  void dropped() override { promise.set_exception(dropped_error(*target, typeid(Req))); }
  std::shared_ptr<Cell> target;
  std::promise<reply_t<Req>> promise;
};

// Carries a reply back to the requester's strand.
template <RequestMessage Req>
struct CallbackEnvelope final : Envelope {
  CallbackEnvelope(std::function<void(reply_t<Req>&)>&& f, reply_t<Req>&& v)
      : on_reply(std::move(f)), value(std::move(v)) {}
  void deliver() override { on_reply(value); }
  std::string describe() const override { return "the reply to " + type_name(typeid(Req)); }
  std::function<void(reply_t<Req>&)> on_reply;
  reply_t<Req> value;
};

// The requester has no error channel: a failed or dropped request fails the system.
template <RequestMessage Req>
struct CallbackSink final : ReplySink<reply_t<Req>> {
  CallbackSink(std::shared_ptr<Cell> r, std::shared_ptr<Cell> t, std::function<void(reply_t<Req>&)>&& f)
      : requester(std::move(r)), target(std::move(t)), on_reply(std::move(f)) {}
  void value(reply_t<Req> v) override {
    // A requester that is already stopping no longer wants replies.
    try_enqueue(requester, std::make_unique<CallbackEnvelope<Req>>(std::move(on_reply), std::move(v)));
  }
  void error(std::exception_ptr e) override { fail_handling(*target, type_name(typeid(Req)), std::move(e)); }
  void dropped() override {
    if (running(*target)) fail_handling(*target, type_name(typeid(Req)), dropped_error(*target, typeid(Req)));
  }
  std::shared_ptr<Cell> requester;
  std::shared_ptr<Cell> target;
  std::function<void(reply_t<Req>&)> on_reply;
};

}  // namespace tnt::actors::detail
