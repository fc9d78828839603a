#pragma once
// The one thread that touches a model's oneDNN primitives for the Trainer's whole life.
//
// Why: oneDNN (2.6, OpenMP runtime, library scratchpad mode) ties a primitive's scratchpad to
// the thread that created it; executing it later on another thread, after the first has gone,
// crashes (measured: SIGSEGV in Conv2D::forward when evaluating on the main thread after
// training on an actor pool thread). So training (the backprop actor, placed on this thread's
// executor), evaluation and prediction all run here.
#include <exception>
#include <future>
#include <memory>
#include <thread>
#include <type_traits>

#include <spdlog/spdlog.h>

#include "tnt/core/asio.h"

namespace tnt::trainer {

class ComputeThread {
 public:
  ComputeThread() : work_(boost::asio::make_work_guard(io_)), thread_([this] { loop(); }) {}
  ~ComputeThread() {
    work_.reset();
    io_.stop();
    thread_.join();
  }
  ComputeThread(const ComputeThread&) = delete;
  ComputeThread& operator=(const ComputeThread&) = delete;

  boost::asio::any_io_executor executor() { return io_.get_executor(); }

  // Runs f() on the compute thread and returns its result (or rethrows its exception).
  template <class F>
  auto run(F f) -> std::invoke_result_t<F&> {
    using R = std::invoke_result_t<F&>;
    // The task is shared with the posted handler: the compute thread may still be inside it
    // (unlocking the shared state) when get() returns here, so it must not live on this stack.
    auto task = std::make_shared<std::packaged_task<R()>>(std::move(f));
    auto result = task->get_future();
    boost::asio::post(io_, [task] { (*task)(); });
    return result.get();
  }

 private:
  void loop() {
    for (;;) {
      try {
        io_.run();
        return;
      } catch (const std::exception& e) {
        // Actor handlers catch their own exceptions; anything else is a bug worth a line.
        spdlog::error("compute thread: unexpected exception: {}", e.what());
      }
    }
  }

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
};

}  // namespace tnt::trainer
