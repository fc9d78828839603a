#include "tnt/transport/event_loop.h"

#include <atomic>

#include <spdlog/spdlog.h>

#include "tnt/core/error.h"

namespace tnt::transport {
namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// Note [Driving]: which thread runs an io_context decides how many thread wake-ups an operation
// costs, and on a virtual machine a wake-up costs tens of microseconds. With a progress thread
// that always runs the loop, a blocking 4 KiB allreduce paid three of them in a row (the
// progress thread woken by the caller's post, again by the peer's data, then the caller woken
// by the completion): 130-200 us, 2 ranks on loopback. So the data plane's loop is on_demand:
// a caller blocked in wait_until() runs it itself, and the progress thread runs it only while
// asynchronous work is held and no caller runs it.
//
// At most one thread runs an own io_context at any time (driven_): tried before, letting a
// caller run it beside the progress thread had whole runs with 2 ms medians, because Asio
// cannot wake one chosen thread and the caller slept on while the other thread ran the handler
// it waited for.
//
// A caller that runs the loop polls it for poll_before_sleep before it sleeps in epoll: a
// bounded spin by a thread that is blocked anyway, never by the progress thread, so it takes
// no time from computation that runs beside asynchronous collectives. Measured here (2 ranks,
// loopback, 4 KiB allreduce, medians of 3 runs each): caller-driven and sleeping at once
// 60-77 us; polling 20 us no better (the peer's data comes one wake-up of the peer later);
// polling 50 us 18-31 us, OpenMPI's spinning TCP path 25-41 us. With two CPU hogs beside the
// job, 50 us of polling gave 31, 31 and 155 us against 57-100 us without; OpenMPI's unbounded
// spinning gave 29, 8012 (sic) and 40 us. Where ranks outnumber cores, polling takes time from
// the rank that would send the data: 4 ranks on 2 cores, 4 KiB, 418-446 us against 388-397 us
// without (it broke even from 256 KiB on), so such runs want TNT_WAIT_POLL_US=0. The window the
// collectives choose is Note [Poll window] in collectives/src/communicator.cpp.

namespace {
// Bounds how long a deadline can be overshot, and a missed wake-up when another thread runs a
// shared io_context.
constexpr auto kOwnSlice = std::chrono::milliseconds(50);
constexpr auto kSharedSlice = std::chrono::milliseconds(5);
}  // namespace

EventLoop::EventLoop(Progress progress, std::chrono::microseconds poll_before_sleep)
    : own_io_(std::make_unique<asio::io_context>(1)),
      io_(own_io_.get()),
      strand_(asio::make_strand(*io_)),
      work_(asio::make_work_guard(*io_)),
      progress_(progress),
      poll_window_(poll_before_sleep) {
  thread_ = std::thread([this] {
    try {
      if (progress_ == Progress::always)
        io_->run();
      else
        progress_thread_main();
    } catch (const std::exception& error) {
      // Handlers report their errors through the job's error path; reaching here is a bug.
      spdlog::critical("tnt progress thread stopped by an exception: {}", error.what());
      std::terminate();
    }
  });
}

EventLoop::EventLoop(asio::io_context& shared, std::chrono::microseconds poll_before_sleep)
    : io_(&shared),
      strand_(asio::make_strand(shared)),
      work_(asio::make_work_guard(shared)),
      progress_(Progress::always),
      poll_window_(poll_before_sleep) {}

EventLoop::~EventLoop() {
  work_.reset();
  if (thread_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    progress_wanted_.notify_one();
    io_->stop();
    thread_.join();
  }
}

// Note [Lingering work]: a standard send that goes eagerly completes once its data is copied,
// and its caller moves on, to computation or to ending its communicator, while the channel may
// still need the loop to hand the bytes over: an InfiniBand rendezvous waits for the peer's
// read, a full TCP socket or shared-memory ring for room. Nobody waits for that work, so nobody
// ran the loop for it: a rank that sent eagerly and then finished left its peer waiting forever
// in the receive (the fake-fabric test, 1 run in 7). Holding the loop (hold()) would wake the
// progress thread after every eager send, a wake-up per message that a ping-pong pays in full,
// though the caller's next call nearly always runs those completions itself. So such work only
// lingers: the progress thread looks every kLingerCheck and runs the loop when lingering work
// has made no progress since its last look; ending a communicator waits for it outright.
//
// Note [Awaited work]: a nonblocking point-to-point request (isend, irecv) used to hold the loop
// like an asynchronous collective, so the progress thread woke up for every one of them and ran
// the loop while the caller, blocked in wait() a moment later, slept until the progress thread
// woke it: two thread wake-ups per exchange. A halo exchange (isend and irecv, then waitall) is
// exactly that pattern, and its issuer nearly always waits or tests soon, running the loop
// itself. So such requests are only awaited: started on the caller's thread where it may run
// the loop (Note [Running here]), and left to the progress thread only when they have stayed
// pending without progress for kLingerCheck, as lingering work is: a request that a caller
// leaves to progress on its own (an overlapped transfer, a freed request) still completes, at
// most about kLingerCheck late in starting. test() runs what is ready (poll_here), so a loop of
// tests progresses as a wait does. Unlike lingering work, ending a communicator does not wait
// for it: a receive that nothing will match must not keep the job from ending.
//
// Measured 2026-11-28 05:33 UTC with Note [Looking before sleeping] (the two together; load 1.3-2,
// 2 ranks on shared memory, 5 alternating rounds, medians): examples/jacobi2d, us per iteration,
// 256 x 256 held 48.4, awaited 25.0, OpenMPI 25.5; 1024 x 1024 511.6, 460.6, 438.0. Under chrt,
// 3 rounds, tnt-bench-p2p (OSU's osu_bw and osu_bibw: windows of 64 isends), MB/s: bw 4 KiB 4,274
// -> 7,021, 1 MiB 14,018 -> 14,661; bibw 4 KiB 1,924 -> 7,940, 1 MiB 17,769 -> 23,440, 4 MiB
// 18,051 -> 23,123; latency (blocking calls) 8 B 1.19 -> 1.16 us, 4 KiB 1.49 -> 1.38.
constexpr auto kLingerCheck = std::chrono::milliseconds(10);

void EventLoop::progress_thread_main() {
  std::uint64_t unlingered_seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      const auto wanted = [&] { return stopping_ || (holds_ > 0 && !driven_); };
      while (!progress_wanted_.wait_for(lock, kLingerCheck, wanted)) {
        const std::uint64_t unlingered = unlingered_.load();
        const bool stuck = (lingering_.load() > 0 || awaited_.load() > 0) && unlingered == unlingered_seen && !driven_;
        unlingered_seen = unlingered;
        if (stuck) break;
      }
      if (stopping_) return;
      if (driven_.exchange(true)) continue;  // a caller took the loop meanwhile (Note [Taking the loop])
    }
    // Note [Looking before sleeping]: this thread sleeps in epoll, so peers must wake it.
    set_pollers_looked_at(false);
    poll_pollers();
    bool sleepers = false;
    for (;;) {
      io_->run_one();  // returns after one handler: the one that released the last hold, say
      std::lock_guard lock(mutex_);
      if (stopping_ || (holds_ == 0 && lingering_.load() == 0 && awaited_.load() == 0)) {
        set_pollers_looked_at(true);
        driven_ = false;
        sleepers = sleepers_.load() > 0;
        break;
      }
    }
    if (sleepers) changed_.notify_all();  // a caller may be waiting to run the loop itself
  }
}

void EventLoop::hold() {
  if (progress_ != Progress::on_demand) return;
  bool start = false;
  {
    std::lock_guard lock(mutex_);
    start = holds_++ == 0 && !driven_;
  }
  if (start) progress_wanted_.notify_one();
}

void EventLoop::release() {
  if (progress_ != Progress::on_demand) return;
  {
    std::lock_guard lock(mutex_);
    --holds_;
    if (holds_ > 0 || !driven_) return;
  }
  // Released from outside the loop: the progress thread may sleep in epoll and must notice.
  if (!running_in_this_thread()) asio::post(*io_, [] {});
}

void EventLoop::linger() {
  if (progress_ == Progress::on_demand) lingering_.fetch_add(1);
}

void EventLoop::unlinger() {
  if (progress_ != Progress::on_demand) return;
  unlingered_.fetch_add(1);
  if (lingering_.fetch_sub(1) == 1) let_progress_thread_see_done();
}

void EventLoop::expect_waiter() {
  if (progress_ == Progress::on_demand) awaited_.fetch_add(1);
}

void EventLoop::waiter_expected_done() {
  if (progress_ != Progress::on_demand) return;
  unlingered_.fetch_add(1);
  if (awaited_.fetch_sub(1) == 1) let_progress_thread_see_done();
}

void EventLoop::let_progress_thread_see_done() {
  // The progress thread may run the loop for that work, asleep in epoll: let it see it is done.
  // It does not while this thread runs the loop (an eager send's completion, nearly always).
  if (running_in_this_thread()) return;
  std::lock_guard lock(mutex_);
  if (driven_ && holds_ == 0) asio::post(*io_, [] {});
}

void EventLoop::poll_here() {
  if (!take_for_running_here()) return;
  Handback handback{*this};
  running_here_ = this;  // Note [The runner needs no wake-up]
  poll_pollers();
  io_->poll();
}

// Note [The runner needs no wake-up]: wake() posts an empty handler so that a thread asleep in
// epoll on this loop looks again. The thread that runs the loop in wait_until() or poll_here()
// checks what it waits for after every poll, and nobody else runs the loop meanwhile, so what
// it completes itself (in its pollers' completions, Note [Completions of a poll]) needs no such
// post: it marks itself as running here, as run_here() does. Each post had cost the scheduler's
// mutex and, at the next poll of the loop, an epoll_wait.
void EventLoop::wake() {
  // Note [Sleepers]
  wake_count_.fetch_add(1);
  if (sleepers_.load() > 0) {
    std::lock_guard lock(mutex_);
    changed_.notify_all();
  }
  // A caller that runs the loop sleeps in epoll, not on the condition variable. On a shared
  // io_context that may be another thread than this one, even inside a handler.
  if (!own_io_ || (progress_ == Progress::on_demand && !running_in_this_thread())) asio::post(*io_, [] {});
}

bool EventLoop::wait_until(const std::function<bool()>& ready, std::optional<Clock::time_point> deadline) {
  if (ready()) return true;  // also from inside a handler, e.g. a close() that already happened
  if (running_in_this_thread() || strand_.running_in_this_thread()) {
    throw Error(
        "a blocking tnt call was made from inside tnt's event loop (from a completion callback?): "
        "it would wait forever; use the asynchronous form there");
  }
  auto expired = [&] { return deadline && Clock::now() >= *deadline; };
  if (!own_io_) {
    // The embedding code may not run its io_context at all: the caller helps.
    drive_until(ready, deadline);
    return ready();
  }
  // Note [Taking the loop]: the mutex only once this caller may have to sleep.
  std::unique_lock lock(mutex_, std::defer_lock);
  for (;;) {
    // Note [Sleepers]: the count is read before `ready` is asked, so that a change made after the
    // question bumps it past `seen`.
    const auto seen = wake_count_.load();
    if (ready()) return true;
    if (expired()) return false;
    if (progress_ == Progress::on_demand && !driven_.load() && !driven_.exchange(true)) {
      if (lock.owns_lock()) lock.unlock();
      Handback handback{*this};
      running_here_ = this;  // Note [The runner needs no wake-up]
      drive_until(ready, deadline);
      continue;
    }
    if (!lock.owns_lock()) {
      lock.lock();  // and look again under it before sleeping
      continue;
    }
    sleepers_.fetch_add(1);  // under the mutex, before the predicate's first look
    changed_.wait_for(lock, kOwnSlice,
                      [&] { return wake_count_.load() != seen || (progress_ == Progress::on_demand && !driven_); });
    sleepers_.fetch_sub(1);
  }
}

// Note [Sleepers]: a completion wakes the callers asleep on changed_ (wait_until while another
// thread runs the loop), and nearly always there are none: the completing thread is the blocked
// caller itself, running the loop. Locking the mutex and broadcasting on every completion was
// two of the 30 mutex operations of an 8-byte ping-pong's round trip (callgrind, 2026-11-28). So
// sleepers are counted: a sleeper reads wake_count_ before it asks whether its wait is over,
// counts itself under the mutex and only then looks at wake_count_ again (or at driven_); a waker
// changes what the sleeper waits for, bumps wake_count_ (or clears driven_ under the mutex) and
// only then looks at the count, all sequentially consistent. Either the sleeper sees the change
// and does not sleep, or the waker sees the sleeper and notifies under the mutex, which the
// sleeper holds until it sleeps. Read after the question instead, the count could already include
// a change that the question missed, and the sleeper slept a whole slice (50 ms).

// Note [Taking the loop]: whoever runs a loop of its own takes it by setting driven_ and gives it
// back by clearing it (Note [Driving]). Both used to happen under the loop's mutex, and an
// 8-byte ping-pong took and gave back the loop three times per message: six of its nine mutex
// operations per round trip (callgrind, 2026-11-28). Now a caller takes it by an exchange and
// gives it back with a store; the mutex is taken only where someone may sleep until the loop is
// free: the progress thread (held work, holds_) and callers asleep in wait_until (sleepers_).
// Each of those raises its count (under the mutex) and then looks at driven_; the one giving the
// loop back clears driven_ and then looks at the counts, all sequentially consistent, so one
// side always sees the other. Where the giver sees a sleeper it takes the mutex before it
// notifies: the sleeper holds the mutex from its look until it sleeps, so the notification
// cannot fall between the two. Measured 2026-11-28 (about 22:15 UTC), tnt-bench-p2p latency
// under chrt, 15 rounds alternating with the mutex, medians of each round's ratio: 8 bytes
// 0.35 us x 0.94, 1 KiB x 0.92, 4 KiB x 0.97.
EventLoop::Handback::~Handback() {
  running_here_ = nullptr;
  loop.driven_.store(false);
  // To the progress thread if work is held, and to any other caller waiting to run the loop.
  const bool held = loop.holds_.load() > 0;
  const bool sleepers = loop.sleepers_.load() > 0;  // Note [Sleepers]
  if (!held && !sleepers) return;
  { const std::lock_guard lock(loop.mutex_); }
  if (held) loop.progress_wanted_.notify_one();
  if (sleepers) loop.changed_.notify_all();
}

// Note [Running here]: a point-to-point call used to post its start to the strand and then run
// the loop to execute it, so an 8-byte blocking send paid the post, the scheduler's mutex and an
// epoll call before anything moved. Where the caller may run the loop anyway (on_demand, nobody
// running it), it runs the start itself, at once: strand-confined state is then touched by the
// loop's one runner, as by any handler. Where another thread runs the loop (the progress thread
// for asynchronous work, another caller), the start is posted as before. The collectives use it
// for blocking sends that go eagerly (Communicator::send says why only those) and for the start
// of every blocking collective (Group::issue). Measured
// 2026-11-27, 2 ranks on shared memory, tnt-bench-p2p latency under chrt -f 10 (the machine was
// loaded by builds), 3 alternating rounds, medians: 8 bytes 1.84 -> 1.45 us, 4 KiB 3.08 -> 2.54,
// 16 KiB 5.80 -> 5.35, 64 KiB 9.92 -> 10.10 (not started here); OpenMPI's vader 0.35 us at 8 bytes
// and 2.43 at 4 KiB in the same half hour.
[[gnu::tls_model("initial-exec")]] thread_local const EventLoop* EventLoop::running_here_ = nullptr;

bool EventLoop::take_for_running_here() {
  if (!own_io_ || progress_ != Progress::on_demand || running_here_) return false;
  // Note [Taking the loop]; a loop that is stopping is left to its destructor. Whoever runs a
  // handler of this loop holds driven_, so a thread that takes it is inside none: Asio's own
  // check (running_in_this_thread(), a __tls_get_addr call) is not needed.
  if (stopping_.load() || driven_.load() || driven_.exchange(true)) return false;
  return true;
}

// Note [Completions without a hop]: a socket made on the strand delivers its completions
// through the strand, and the thread running the loop is not inside the strand when the reactor
// completes a read (Note [Running here] marks it as the runner, which Asio does not know). So
// every TCP message's read went from the reactor to the strand's queue, behind the reactor's
// own turn in the scheduler: the waiting caller's next poll_one() ran an empty epoll_wait first,
// and only its poll after that delivered the message (strace of a 256-byte ping-pong with
// TNT_SHM=0: epoll_wait, recvfrom, epoll_wait returning nothing, sendmsg). Where the loop is its
// own, one thread at a time runs it (Note [Driving]), which serialises its handlers as the
// strand does, so the TCP back end's data sockets live on the io_context's executor: their
// completions run at once, inside the poll that read the data, and Asio tracks no work for them
// (it copied the strand into a type-erased executor, an allocation, for every read and write).
// An embedding code's io_context may be run by several threads: there the strand stays.
boost::asio::any_io_executor EventLoop::completion_executor() const {
  if (own_io_) return io_->get_executor();
  return strand_;
}

void EventLoop::add_poller(Poller& poller) {
  pollers_.push_back(&poller);
  poller.set_polling(own_io_ && progress_ == Progress::on_demand && pollers_looked_at_);
}

// Note [Looking before sleeping]: a poller's flag (Poller::set_polling) tells its peers whether
// a wake-up through a descriptor is needed. It is up only while whoever runs the loop next will
// look at the pollers before it sleeps in epoll. That holds while a blocked caller polls, and
// also while nobody runs the loop at all (the rank computes): every runner that may sleep (a
// blocked caller in drive_until, the progress thread taking over) lowers the flags, looks once
// more and only then sleeps, and raises them again when it stops running the loop. Before, the
// flags were down whenever no caller polled, so a peer's every message to a rank busy computing
// cost a wake-up byte that nobody was asleep to need: a send() system call on the writer and a
// read on the reader. In a halo exchange (isend, irecv, waitall, compute) that was most
// messages. Pollers are strand-confined: only the loop's one runner calls this.
void EventLoop::set_pollers_looked_at(bool looked_at) {
  if (!own_io_ || progress_ != Progress::on_demand || pollers_looked_at_ == looked_at) return;
  pollers_looked_at_ = looked_at;
  for (Poller* poller : pollers_) poller->set_polling(looked_at);
}

void EventLoop::remove_poller(Poller& poller) { std::erase(pollers_, &poller); }

// Note [Adaptive poll window]: no fixed window is right everywhere (Note [Poll window] in
// collectives/src/communicator.cpp has the figures). Polling pays when the peer runs at the same
// time on another core: its data comes within microseconds, and a sleep would cost a wake-up.
// It costs when the peer is not running (ranks outnumber cores, or the machine is loaded by
// others): the poller then takes the core from the very processes it waits for. Measured on
// 2026-11-23 on this project's 2-core machine with seven other sessions compiling (load 13),
// 2 ranks, 4 / 16 / 64 KiB: a fixed 500 us window 1757-3833 / 3941-4601 / 7401-8520 us,
// 50 us 199-219 / 191-199 / 178-183 us, no polling 78-81 / 110-122 / 124 us.
// A first adaptive window that grew whenever the data came while polling, however late, gave
// 20-2273 / 22-3306 / 145-610 us there. A second rule grew it only when the data came within
// 50 us (about one wake-up here) and halved it after any other wait: 179-198 / 166-210 /
// 101-144 us under that load, but it starved medium sizes on a lightly loaded machine, whose
// ring steps take longer than 50 us by bandwidth alone. Measured 2026-11-23, 2 ranks, load
// about 1, 3 alternating rounds, medians, 64 KiB / 256 KiB / 1 MiB: that rule 237 / 228 / 394 us,
// a fixed 500 us window 18 / 41 / 168 us, the rule below 29 / 87 / 172 us; OpenMPI's shared
// memory in the same minutes 19-36 / 49-111 / 152-400 us.
//
// So polling is judged only by whether it found the data: the window doubles (up to
// poll_before_sleep) after a wait whose data came while polling, and halves after a window that
// expired with nothing; below 4 us it closes, and then every 16th wait probes for 100 us, which
// reopens it (at an eighth of the bound) if the data came. Where polling never finds anything
// (the peer is descheduled for long) it stops; under heavy outside load, where data comes late
// but within the window, it still costs time: there TNT_WAIT_POLL_US=0 is right.
//
// Note [Yielding waits]: after its poll window (or at once, where the window is closed or ranks
// outnumber cores), a blocked caller yields its core for kYieldWindow, looking for its data
// between yields, before it sleeps. A yield costs nothing where no other thread wants the core,
// and where one does (the rank that must send the data, sharing this core; the rank's own compute
// threads) it runs at once, without the wake-up a sleep would cost the data's arrival. Measured on
// 2026-11-23 (23:55-00:05 UTC) on the 2-core machine, float32 allreduce, time in us:
//   4 ranks (2 per core), 4 / 16 / 64 KiB through the host board (Note [Host board]): sleeping
//   at once 92-98 / 102-106 / 128-134, yielding 50 us 14-16 / 23-36 / 56-86, 200 us 15 / 21-27 /
//   56-87, 1000 us 20-32 / 34 / 97;
//   2 ranks unbound with a busy loop pinned to one core, compare_mpi.sh --busy-core, 4 / 16 /
//   64 KiB on the board: sleeping 21.5 / 24.4 / 40.9, yielding 100 us 5.6 / 10.0 / 19.9 (OpenMPI's
//   shared memory 4.8-4.9 / 17.6-18.6 / 37.5-37.9 in the same runs). Both ranks then often share
//   the free core (the scheduler places a sleeping waker's partner beside it), and a yield hands
//   the core to the partner where a sleep needed a wake-up;
//   4 ranks through the event loop's ring, 256 KiB / 1 MiB: sleeping at once 848 / 2231,
//   yielding 100 us 643 / 1383.
namespace {
constexpr std::chrono::microseconds kProbe{100};
// Note [Cheap spins]: a polling caller used to run io_context::poll() on every spin, and that is
// an epoll_wait system call and the scheduler's mutex each time: most of an 8-byte ping-pong's
// time went there (perf, 2026-11-28: epoll_wait and its kernel side about 30 %, the mutex 18 %),
// and data that came during the call waited for it to end. Where the blocked caller polls
// shared-memory channels, it asks the loop every kSpinsPerLoopPoll spins only, for descriptors
// (sockets, wake-up bytes, timers) and work posted from elsewhere: what the pollers complete runs
// without the loop (Note [Completions of a poll]). A loop without pollers asks on every spin.
// The first ask comes after kSpinsPerLoopPoll spins, not on the first: asked on the first, every
// blocking call of a ping-pong still made one epoll_wait (strace: 10,154 for 10,000 round trips;
// 198 after). Measured 2026-11-28 (about 21:25 UTC), tnt-bench-p2p latency under chrt, 5 alternating
// rounds, medians, together with starting rendezvous sends on the caller's thread
// (Communicator::send): 8 bytes 0.50 -> 0.34 us, 1 KiB 0.49 -> 0.37, 4 KiB 0.67 -> 0.72,
// 64 KiB 4.00 -> 3.23, 1 MiB 44.0 -> 42.9; bandwidth and bidirectional bandwidth within 2 %.
constexpr unsigned kSpinsPerLoopPoll = 16;
constexpr unsigned kSpinsPerClock = 64;  // Note [Spinning here]
// Note [One handler a look]: where the loop has no pollers (TCP, verbs), a waiting caller runs at
// most one ready handler between looks at what it waits for (io_context::poll_one, not poll) and
// asks the loop again on its next spin. poll() ran on after the handler that completed the wait:
// it asked epoll once more (an empty epoll_wait) and ran whatever that handler had queued, before
// the caller saw its data. Over TCP that was an empty epoll_wait between every message's arrival
// and the reply (strace of a ping-pong: epoll_wait, recvfrom, recvfrom EAGAIN, epoll_wait,
// sendmsg). With pollers the loop is asked every kSpinsPerLoopPoll spins, with poll(): poll_one
// there made the 8-byte shared-memory latency 6 % slower (2026-11-28, 9 alternating rounds).
}  // namespace

std::chrono::microseconds PollWindow::next() {
  const std::int64_t now = now_.load(std::memory_order_relaxed);
  if (now > 0 || most_ == 0) return std::chrono::microseconds(now);
  const std::int64_t probe = std::min<std::int64_t>(most_, kProbe.count());
  return std::chrono::microseconds(closed_waits_.fetch_add(1, std::memory_order_relaxed) % 16 == 15 ? probe : 0);
}

void PollWindow::report(std::chrono::microseconds used, bool found_data) {
  if (used.count() == 0) return;
  const std::int64_t now = now_.load(std::memory_order_relaxed);
  std::int64_t next = found_data ? std::min(most_, std::max<std::int64_t>(now * 2, most_ / 8)) : now / 2;
  if (next < 4) next = 0;
  now_.store(next, std::memory_order_relaxed);
}

// Note [Completions of a poll]: a poller (a shared-memory channel) completes what it moved
// later, never inside its own call. Posted to the io_context, each such completion cost the
// scheduler's mutex, and the polling caller then ran io_context::poll() to reach it: an
// epoll_wait system call, two where handlers were queued, after every poll that moved anything.
// A 1 KiB alltoall on 2 ranks made about 5 of them per call (2026-11-28). So completions that
// arise while the pollers are polled are kept here and run, in order, once every poller has
// returned: still outside the poller's call, by the same thread, before it looks at what it
// waits for. What they complete in turn (a receive posted again that finds its message staged)
// joins the list. Polling waits then ask the io_context only every kSpinsPerLoopPoll spins
// (Note [Cheap spins]), for descriptors, timers and work posted from elsewhere.
//
// A task run by run_here() collects its completions the same way: an eager send started there
// (Note [Running here]) wrote its message into the ring, and its completion went through the
// strand's queue to the next io_context::poll(), 600 instructions and the scheduler's mutex per
// message (callgrind of an 8-byte shared-memory ping-pong, 2026-11-28).
void EventLoop::post_completion(std::function<void()> completion) {
  if (collecting_completions_) {
    completions_of_poll_.push_back(std::move(completion));
    return;
  }
  // On the strand: with an embedding code's io_context, other threads may run the loop at the
  // same time as the caller that helps (wait_until), and a completion touches strand state.
  asio::post(strand_, std::move(completion));
}

EventLoop::CollectedCompletions::CollectedCompletions(EventLoop& event_loop)
    : loop(event_loop), outermost(!event_loop.collecting_completions_) {
  loop.collecting_completions_ = true;
}

void EventLoop::CollectedCompletions::run() {
  if (!outermost) return;
  while (next < loop.completions_of_poll_.size()) {
    auto completion = std::move(loop.completions_of_poll_[next++]);  // the list may grow meanwhile
    completion();
  }
}

// Where a task, a poller or a completion threw, what is left goes to the loop, as handlers
// queued behind a throwing one stay queued.
EventLoop::CollectedCompletions::~CollectedCompletions() {
  if (!outermost) return;
  for (; next < loop.completions_of_poll_.size(); ++next)
    asio::post(loop.strand_, std::move(loop.completions_of_poll_[next]));
  loop.completions_of_poll_.clear();
  loop.collecting_completions_ = false;
}

bool EventLoop::poll_pollers() {
  if (!own_io_ || progress_ != Progress::on_demand) return false;
  CollectedCompletions completions{*this};
  bool moved = false;
  for (std::size_t i = 0; i < pollers_.size(); ++i) moved = pollers_[i]->poll() || moved;
  completions.run();
  return moved;
}

// Note [Spinning here]: a blocking point-to-point receive whose message comes by a lane (Note
// [Fast lane] in collectives/src/point_to_point.cpp) waits as the loop's runner, so that what it
// waits for may be looked at, and taken, in the engine's own state, with nothing posted: its
// look runs where wait_until()'s predicate may not (another thread may be running the loop
// there). Its look reads what it waits on itself (a lane: Lane::read()); the pollers and the
// io_context run every kSpinsPerLoopPoll spins (polling every pair on every spin, as drive_until()
// does, made an 8-byte ping-pong 0.12 us against 0.10: tnt-bench-p2p, 9 alternating rounds,
// 2026-11-29), the clock every kSpinsPerClock, and it never sleeps: after the poll window the
// caller waits the usual way.
void EventLoop::spin_until(const std::function<bool()>& look) {
  set_pollers_looked_at(true);  // Note [Looking before sleeping]
  if (look()) return;
  const auto window = poll_window_.next();
  if (window.count() == 0) return;
  const auto stop = Clock::now() + window;
  bool came = false;
  for (unsigned spin = 1;; ++spin) {
    if (spin % kSpinsPerLoopPoll == 0) {
      poll_pollers();
      io_->poll();
    }
    if ((came = look())) break;
    if (spin % kSpinsPerClock == 0 && Clock::now() >= stop) break;
  }
  poll_window_.report(window, came);
}

void EventLoop::drive_until(const std::function<bool()>& ready, std::optional<Clock::time_point> deadline) {
  // Only here is this thread the loop's one runner, so pollers may touch strand state.
  const auto poll_all = [&] { return poll_pollers(); };
  const auto until = [&](Clock::time_point stop) { return deadline ? std::min(stop, *deadline) : stop; };
  set_pollers_looked_at(true);  // Note [Looking before sleeping]
  bool came = ready();
  if (const auto window = poll_window_.next(); window.count() > 0 && !came) {
    // Note [Cheap spins]
    const bool spin_on_pollers = own_io_ && progress_ == Progress::on_demand && !pollers_.empty();
    // Spinning on pollers, the clock only every kSpinsPerClock spins, as in spin_until(), and not
    // before the first of them: most such waits end sooner. Read on every spin and once to start,
    // it was 10 % of jacobi2d's small-grid iteration (perf, 2026-11-29). A spin that asks the
    // io_context costs a system call, next to which the clock is nothing, and 64 of them would
    // overrun a short window many times over.
    const unsigned spins_per_clock = spin_on_pollers ? kSpinsPerClock : 1;
    std::optional<Clock::time_point> stop_polling;
    for (unsigned spin = 1; !(came = ready()); ++spin) {
      if (spin % spins_per_clock == 0) {
        const auto now = Clock::now();
        if (!stop_polling) stop_polling = until(now + window);
        if (now >= *stop_polling) break;
      }
      poll_all();
      if (!spin_on_pollers)
        io_->poll_one();  // Note [One handler a look]
      else if (spin % kSpinsPerLoopPoll == 0)
        io_->poll();  // Note [Completions of a poll]
    }
    poll_window_.report(window, came);
  }
  if (came) return;
  // Note [Yielding waits]
  for (const auto stop = until(Clock::now() + kYieldWindow); !came && Clock::now() < stop;) {
    std::this_thread::yield();
    poll_all();
    io_->poll();
    came = ready();
  }
  if (came) return;
  set_pollers_looked_at(false);
  poll_all();  // what a peer wrote while it still saw us polling
  const auto slice = own_io_ ? std::chrono::duration_cast<Clock::duration>(kOwnSlice)
                             : std::chrono::duration_cast<Clock::duration>(kSharedSlice);
  while (!ready()) {
    auto wait = slice;
    if (deadline) {
      const auto left = *deadline - Clock::now();
      if (left <= Clock::duration::zero()) break;
      wait = std::min(wait, left);
    }
    io_->run_one_for(wait);
  }
  set_pollers_looked_at(true);  // whoever runs the loop next looks before it sleeps
}

void EventLoop::call(const std::function<void()>& task) {
  // Inside a handler of a loop of its own, this thread is the loop's one runner (Note
  // [Completions without a hop]); on a shared io_context only the strand says so.
  if (strand_.running_in_this_thread() || (own_io_ && running_in_this_thread())) {
    task();
    return;
  }
  std::atomic<bool> done{false};
  std::exception_ptr error;
  asio::dispatch(strand_, [&] {
    try {
      task();
    } catch (...) {
      error = std::current_exception();
    }
    done = true;
    wake();
  });
  wait_until([&] { return done.load(); });
  if (error) std::rethrow_exception(error);
}

}  // namespace tnt::transport
