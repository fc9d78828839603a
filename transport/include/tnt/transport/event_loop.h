#pragma once
#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <condition_variable>
#include <mutex>

#include "tnt/transport/asio.h"

namespace tnt::transport {

// The one event loop that drives a rank's transport and collectives: an io_context, a strand
// that serialises all of tnt's handlers on it, and either a progress thread of its own or an
// io_context that the embedding code runs. The progress thread sleeps in epoll when there is
// nothing to do; nothing in tnt spins.
class EventLoop {
 public:
  using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;

  EventLoop();                                          // own io_context + one progress thread
  explicit EventLoop(boost::asio::io_context& shared);  // the embedding code's io_context
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  boost::asio::io_context& context() { return *io_; }
  Strand strand() const { return strand_; }
  bool owns_thread() const { return thread_.joinable(); }
  bool in_loop_thread() const { return std::this_thread::get_id() == thread_id_; }

  // Blocks until `ready` holds. With a shared io_context the caller helps to run it, so this
  // works whether or not another thread also runs that io_context. `ready` is polled after
  // every handler (shared) or each `slice` (own thread, where wake() cuts the slice short).
  // With a deadline, returns false if it passed first.
  bool wait_until(const std::function<bool()>& ready,
                  std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);
  void wake();  // wakes wait_until callers of an own-thread loop

  // Runs `task` on the strand and blocks until it finishes; rethrows what it throws.
  template <class T>
  T run(boost::asio::awaitable<T> task) {
    auto promise = std::make_shared<std::promise<T>>();
    auto future = promise->get_future();
    boost::asio::co_spawn(strand_, std::move(task), [this, promise](std::exception_ptr error, auto... value) {
      if (error) promise->set_exception(error);
      else promise->set_value(std::move(value)...);
      wake();
    });
    wait_until([&] { return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready; });
    return future.get();
  }

 private:
  std::unique_ptr<boost::asio::io_context> own_io_;
  boost::asio::io_context* io_;
  Strand strand_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread thread_;
  std::thread::id thread_id_;
  std::mutex wake_mutex_;
  std::condition_variable wake_cv_;
  std::uint64_t wake_count_ = 0;
};

// void specialisation: co_spawn hands no value.
template <>
inline void EventLoop::run<void>(boost::asio::awaitable<void> task) {
  auto promise = std::make_shared<std::promise<void>>();
  auto future = promise->get_future();
  boost::asio::co_spawn(strand_, std::move(task), [this, promise](std::exception_ptr error) {
    if (error) promise->set_exception(error);
    else promise->set_value();
    wake();
  });
  wait_until([&] { return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready; });
  future.get();
}

}  // namespace tnt::transport
