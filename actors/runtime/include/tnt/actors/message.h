#pragma once
// Messages and replies. A message is any movable type. A request is a message with a nested
// `using reply_type = R;`: its handler answers it with one R, through a Reply<R>.
#include <exception>
#include <memory>
#include <stdexcept>
#include <type_traits>

#include "tnt/core/error.h"

namespace tnt::actors {

template <class Msg>
concept RequestMessage = requires {
  typename Msg::reply_type;
};

template <RequestMessage Req>
using reply_t = typename Req::reply_type;

namespace detail {
// Where a reply goes: a std::promise, or a callback on the requester's strand.
template <class R>
struct ReplySink {
  virtual ~ReplySink() = default;
  virtual void value(R value) = 0;
  virtual void error(std::exception_ptr error) = 0;
  virtual void dropped() = 0;  // the Reply died unanswered
};
}  // namespace detail

// The right to answer one request, exactly once; movable so a handler can answer later (e.g.
// when an asynchronous operation completes). Destroyed unanswered, it reports RequestDropped
// to the requester (or nothing, when the system is stopping).
template <class R>
class Reply {
  static_assert(std::is_move_constructible_v<R> && !std::is_void_v<R>, "reply_type is a movable, non-void type");

 public:
  explicit Reply(std::unique_ptr<detail::ReplySink<R>> sink) : sink_(std::move(sink)) {}
  Reply(Reply&&) noexcept = default;
  Reply& operator=(Reply&&) = delete;  // would silently drop the request held before
  ~Reply() {
    if (sink_) sink_->dropped();
  }

  void operator()(R value) { take()->value(std::move(value)); }
  void fail(std::exception_ptr error) { take()->error(std::move(error)); }
  // True while the request is still unanswered.
  explicit operator bool() const { return sink_ != nullptr; }

 private:
  std::unique_ptr<detail::ReplySink<R>> take() {
    if (!sink_) throw LogicError("tnt::actors::Reply: request already answered");
    return std::move(sink_);
  }
  std::unique_ptr<detail::ReplySink<R>> sink_;
};

}  // namespace tnt::actors
