#pragma once
// Errors of the actor runtime. All derive from ActorError, itself a tnt::Error.
#include <exception>
#include <string>

#include "tnt/core/error.h"

namespace tnt::actors {

class ActorError : public Error {
 public:
  using Error::Error;
};

// A send or request to a system that is not running (not yet started, stopping or stopped).
// Escaping a handler while its own system stops, it ends that handler quietly (see README).
class MailboxClosed : public ActorError {
 public:
  using ActorError::ActorError;
};

// A message type the target actor registered no handler for; thrown at the sender.
class UnhandledMessage : public ActorError {
 public:
  using ActorError::ActorError;
};

// The handler of a request let its Reply go unanswered.
class RequestDropped : public ActorError {
 public:
  using ActorError::ActorError;
};

// What ActorSystem::wait() throws after a failure: where it happened (actor and message, or
// pool) and the original exception, which stopped the whole system.
class ActorFailed : public ActorError {
 public:
  ActorFailed(std::string where, std::exception_ptr cause, const std::string& cause_text)
      : ActorError(where + ": " + cause_text), where_(std::move(where)), cause_(std::move(cause)) {}
  const std::string& where() const noexcept { return where_; }
  const std::exception_ptr& cause() const noexcept { return cause_; }

 private:
  std::string where_;
  std::exception_ptr cause_;
};

}  // namespace tnt::actors
