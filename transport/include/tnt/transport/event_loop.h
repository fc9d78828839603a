#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "tnt/core/asio.h"

namespace tnt::transport {

// Who runs an EventLoop of its own (see Note [Driving] in event_loop.cpp).
enum class Progress {
  // Its progress thread runs it all the time; blocked callers sleep until woken. For work that
  // must go on while nobody waits, like heartbeats.
  always,
  // A thread blocked in wait_until() runs it itself; the progress thread runs it only while
  // work is held (hold()) and no caller is running it. For the data plane: a blocking
  // collective then costs no hand-off between threads.
  on_demand,
};

// Something a polling caller checks besides the loop's descriptors: a peer's write into shared
// memory raises no event. Both calls come from the thread that runs the loop, between handlers,
// so they are ordered with the strand's handlers.
class Poller {
 public:
  // true when a blocked caller starts polling; false before it sleeps in epoll, after which it
  // polls once more: a peer that saw the flag down must then wake it through a descriptor.
  virtual void set_polling(bool polling) = 0;
  // True when it moved anything (took or wrote data): its completions may wait on the loop.
  virtual bool poll() = 0;

 protected:
  ~Poller() = default;
};

// After its poll window, a blocked caller yields its core this long before it sleeps (Note
// [Yielding waits] in event_loop.cpp).
inline constexpr std::chrono::microseconds kYieldWindow{100};

// How long the next blocked caller polls before it sleeps (Note [Adaptive poll window] in
// event_loop.cpp); at most the bound it was made with. Any thread may use it.
class PollWindow {
 public:
  explicit PollWindow(std::chrono::microseconds most) : most_(most.count()), now_(most.count()) {}
  std::chrono::microseconds next();
  // `found_data`: the data came while polling.
  void report(std::chrono::microseconds used, bool found_data);

 private:
  const std::int64_t most_;
  std::atomic<std::int64_t> now_;  // microseconds; 0: closed
  std::atomic<std::uint32_t> closed_waits_{0};
};

// An event loop that drives a rank's transport and collectives: an io_context, a strand that
// serialises all of tnt's handlers on it, and either a progress thread of its own or an
// io_context that the embedding code runs. Nothing spins for long: a blocked caller that runs
// the loop polls for at most poll_before_sleep (less where polling has not paid lately: Note
// [Adaptive poll window] in event_loop.cpp), then sleeps in epoll.
class EventLoop {
 public:
  using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;

  explicit EventLoop(Progress progress = Progress::always,
                     std::chrono::microseconds poll_before_sleep = std::chrono::microseconds(0));
  // The embedding code's io_context; blocked callers help to run it.
  explicit EventLoop(boost::asio::io_context& shared,
                     std::chrono::microseconds poll_before_sleep = std::chrono::microseconds(0));
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  boost::asio::io_context& context() { return *io_; }
  Strand strand() const { return strand_; }
  // Where a channel's socket completions run (Note [Completions without a hop] in
  // event_loop.cpp): the io_context itself where one thread at a time runs it (a loop of its
  // own), else the strand.
  boost::asio::any_io_executor completion_executor() const;
  // True inside a handler of this loop, whichever thread runs it, and inside run_here().
  bool running_in_this_thread() const { return running_here_ == this || io_->get_executor().running_in_this_thread(); }

  // Runs `task` at once on this thread, as if it were a handler on the strand, where this thread
  // may be the loop's one runner now (on_demand, a loop of its own, nobody running it, this
  // thread not inside it); returns false, having run nothing, otherwise. Note [Running here] in
  // event_loop.cpp. The caller keeps the order of its own tasks: it runs one here only when no
  // task it posted before is still queued.
  template <class Task>
  bool run_here(Task&& task) {
    if (!take_for_running_here()) return false;
    Handback handback{*this};
    running_here_ = this;
    CollectedCompletions completions{*this};  // Note [Completions of a poll] in event_loop.cpp
    task();
    completions.run();
    return true;
  }

  // Where this thread may be the loop's runner now (as for run_here()): calls `look` as the
  // runner until it returns true, polling the loop between calls, for at most the poll window
  // (once only where the window is closed); then `finish`, also as the runner (also where `look`
  // or the loop throws), and returns true.
  // Returns false, having called nothing, where this thread may not run the loop. Note [Spinning
  // here] in event_loop.cpp.
  template <class Look, class Finish>
  bool spin_here(Look&& look, Finish&& finish) {
    if (!take_for_running_here()) return false;
    Handback handback{*this};
    running_here_ = this;
    try {
      spin_until(look);
    } catch (...) {
      finish();  // what `look` lent out is taken back, whatever threw
      throw;
    }
    finish();
    return true;
  }
  // Blocks until `ready` holds. The caller runs the loop itself where it may (on_demand while
  // nobody else runs it, or a shared io_context), else sleeps until wake(). With a deadline,
  // returns false if it passed first.
  bool wait_until(const std::function<bool()>& ready,
                  std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);
  void wake();  // wakes wait_until callers after something they wait for changed

  // on_demand: work that nobody may be waiting for (an asynchronous collective, a failure to
  // handle) is pending; the progress thread runs the loop until every hold is released. Both
  // may be called from any thread. A no-op for the other kinds of loop.
  void hold();
  void release();
  // on_demand: work that nobody waits for and that as a rule finishes unaided, but may need the
  // loop to run once more (an eager send whose bytes are still being handed to a channel after
  // the send completed). The progress thread runs the loop for it only once it has stayed
  // pending without progress (Note [Lingering work] in event_loop.cpp). Any thread; a no-op
  // for the other kinds of loop.
  void linger();
  void unlinger();
  int lingering() const { return lingering_.load(); }
  // on_demand: work whose issuer will most likely wait for it or test it soon (a nonblocking
  // point-to-point request). The progress thread runs the loop for it only once it has stayed
  // pending without progress, as for lingering work, but ending a communicator does not wait
  // for it (Note [Awaited work] in event_loop.cpp). Any thread; a no-op for the other kinds of
  // loop.
  void expect_waiter();
  void waiter_expected_done();

  // Runs what is ready on the loop now, on this thread, where it may be the loop's runner
  // (as run_here()); returns at once otherwise. For test()-style calls, which must make
  // progress where nobody else runs the loop.
  void poll_here();

  // On the strand. Pollers are used only where the blocked caller is the one thread that runs
  // the loop (on_demand with a loop of its own); elsewhere they are never polled.
  void add_poller(Poller& poller);
  void remove_poller(Poller& poller);
  // On the strand: runs `completion` later, never inside its caller. Inside a poller's poll() or
  // a run_here() task, and what those complete, it runs before the loop's runner stops polling
  // its pollers or returns from run_here(), without passing through the io_context (Note
  // [Completions of a poll] in event_loop.cpp); elsewhere it is posted to the strand.
  void post_completion(std::function<void()> completion);

  // Runs `task` on the strand and blocks until it finishes; rethrows what it throws.
  template <class T>
  T run(boost::asio::awaitable<T> task) {
    auto promise = std::make_shared<std::promise<T>>();
    auto future = promise->get_future();
    boost::asio::co_spawn(strand_, std::move(task), [this, promise](std::exception_ptr error, auto... value) {
      if (error)
        promise->set_exception(error);
      else
        promise->set_value(std::move(value)...);
      wake();
    });
    wait_until([&] { return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready; });
    return future.get();
  }

  // Runs `task` on the strand and blocks until it has run: also a fence after every handler
  // posted to the strand before.
  void call(const std::function<void()>& task);

 private:
  // Gives up running the loop (driven_) when a caller that ran it is done.
  struct Handback {
    EventLoop& loop;
    ~Handback();
  };
  // While one lives, post_completion() keeps completions for its run(), on this thread, in order
  // (Note [Completions of a poll] in event_loop.cpp); an inner one leaves them to the outermost.
  struct CollectedCompletions {
    explicit CollectedCompletions(EventLoop& event_loop);
    ~CollectedCompletions();
    void run();
    EventLoop& loop;
    const bool outermost;
    std::size_t next = 0;
  };

  bool take_for_running_here();
  void spin_until(const std::function<bool()>& look);
  void set_pollers_looked_at(bool looked_at);
  bool poll_pollers();  // true when any poller moved anything
  void let_progress_thread_see_done();
  void progress_thread_main();
  void drive_until(const std::function<bool()>& ready, std::optional<std::chrono::steady_clock::time_point> deadline);

  std::unique_ptr<boost::asio::io_context> own_io_;
  boost::asio::io_context* io_;
  Strand strand_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  const Progress progress_;
  PollWindow poll_window_;
  std::thread thread_;

  std::mutex mutex_;
  std::condition_variable changed_;          // for callers in wait_until()
  std::condition_variable progress_wanted_;  // for the on_demand progress thread
  std::atomic<std::uint64_t> wake_count_{0};
  std::atomic<int> sleepers_{0};  // callers asleep on changed_ (Note [Sleepers] in event_loop.cpp)
  // on_demand: some thread runs the loop now; taken by exchange, without the mutex, and given
  // back by Handback (Note [Taking the loop] in event_loop.cpp).
  std::atomic<bool> driven_{false};
  std::atomic<int> holds_{0};  // changed under the mutex, read without it by Handback
  std::atomic<int> lingering_{0};
  std::atomic<int> awaited_{0};               // expect_waiter() not yet done
  std::atomic<std::uint64_t> unlingered_{0};  // lingering or awaited work done so far: progress made
  std::atomic<bool> stopping_{false};
  std::vector<Poller*> pollers_;                            // strand-confined
  bool collecting_completions_ = false;                     // strand-confined: a CollectedCompletions lives
  std::vector<std::function<void()>> completions_of_poll_;  // strand-confined: kept by post_completion()
  bool pollers_looked_at_ = true;  // strand-confined: Note [Looking before sleeping] in event_loop.cpp
  // run_here() runs a task of this loop. Initial-exec: read several times a message, and the
  // default model for a shared library makes each read a call to __tls_get_addr (8-byte
  // shared-memory ping-pong x 0.95, 15 alternating rounds, 2026-11-28).
  [[gnu::tls_model("initial-exec")]] static thread_local const EventLoop* running_here_;
};

// void specialisation: co_spawn hands no value.
template <>
inline void EventLoop::run<void>(boost::asio::awaitable<void> task) {
  auto promise = std::make_shared<std::promise<void>>();
  auto future = promise->get_future();
  boost::asio::co_spawn(strand_, std::move(task), [this, promise](std::exception_ptr error) {
    if (error)
      promise->set_exception(error);
    else
      promise->set_value();
    wake();
  });
  wait_until([&] { return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready; });
  future.get();
}

}  // namespace tnt::transport
