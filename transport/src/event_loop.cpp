#include "tnt/transport/event_loop.h"

#include <spdlog/spdlog.h>

#include "tnt/transport/error.h"

namespace tnt::transport {

EventLoop::EventLoop()
    : own_io_(std::make_unique<boost::asio::io_context>(1)),
      io_(own_io_.get()),
      strand_(boost::asio::make_strand(*io_)),
      work_(boost::asio::make_work_guard(*io_)) {
  thread_ = std::thread([this] {
    try {
      io_->run();
    } catch (const std::exception& error) {
      // Handlers report their errors through the job's error path; reaching here is a bug.
      spdlog::critical("tnt progress thread stopped by an exception: {}", error.what());
      std::terminate();
    }
  });
  thread_id_ = thread_.get_id();
}

EventLoop::EventLoop(boost::asio::io_context& shared)
    : io_(&shared), strand_(boost::asio::make_strand(shared)), work_(boost::asio::make_work_guard(shared)) {}

EventLoop::~EventLoop() {
  work_.reset();
  if (thread_.joinable()) {
    io_->stop();
    thread_.join();
  }
}

void EventLoop::wake() {
  {
    std::lock_guard lock(wake_mutex_);
    ++wake_count_;
  }
  wake_cv_.notify_all();
}

bool EventLoop::wait_until(const std::function<bool()>& ready, std::optional<std::chrono::steady_clock::time_point> deadline) {
  auto expired = [&] { return deadline && std::chrono::steady_clock::now() >= *deadline; };
  if (in_loop_thread()) {
    throw Error("a blocking tnt call was made from tnt's own progress thread (from a completion callback?): "
                "it would wait forever; use the asynchronous form there");
  }
  if (owns_thread()) {
    std::unique_lock lock(wake_mutex_);
    while (!ready()) {
      if (expired()) return false;
      // The slice only guards against a lost wake-up; wake() normally ends the wait at once.
      auto seen = wake_count_;
      wake_cv_.wait_for(lock, std::chrono::milliseconds(50), [&] { return wake_count_ != seen; });
    }
    return true;
  }
  while (!ready()) {
    if (expired()) return false;
    io_->run_one_for(std::chrono::milliseconds(50));
  }
  return true;
}

}  // namespace tnt::transport
