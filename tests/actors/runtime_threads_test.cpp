// The runtime on real thread pools: ordering, exclusion, placement, failure and shutdown.
// No sleeps: tests wait on futures, the system, or gates they open themselves.
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"
#include "tnt/core/error.h"

namespace tnt::actors::test {
namespace {

using namespace std::chrono_literals;
// Far above the worst case (about 20 s under ThreadSanitizer on 2 busy cores); a hang shows up
// as a failure.
constexpr auto kBound = 120s;

SystemConfig pool_config(const CapturedLog& log, std::size_t threads) {
  SystemConfig config;
  config.name = "threads";
  config.pools = {{"default", threads}};
  config.logger = log.logger;
  return config;
}

struct Seq {
  int sender;
  int index;
};

// Checks that messages from each sender arrive in the order they were sent; stops the system
// once it has them all.
class OrderChecker : public Actor {
 public:
  OrderChecker(ActorSystem* system, int expected, std::atomic<int>* misordered)
      : system_(system), expected_(expected), misordered_(misordered) {
    on<Seq>([this](Seq& s) {
      auto [it, fresh] = next_.try_emplace(s.sender, 0);
      if (it->second != s.index) ++*misordered_;
      it->second = s.index + 1;
      if (++received_ == expected_) system_->stop();
    });
  }

 private:
  ActorSystem* system_;
  int expected_;
  std::atomic<int>* misordered_;
  int received_ = 0;
  std::map<int, int> next_;
};

struct Tick {};

// Sends one Seq per handled Tick, so consecutive sends come from different handler runs
// (possibly different threads).
class TickingSender : public Actor {
 public:
  TickingSender(ActorRef to, int id, int count) : to_(std::move(to)), id_(id), count_(count) {
    on<Tick>([this](Tick&) {
      to_.send(Seq{id_, sent_++});
      if (sent_ < count_) self().send(Tick{});
    });
  }
  void on_start() override { self().send(Tick{}); }

 private:
  ActorRef to_;
  int id_;
  int count_;
  int sent_ = 0;
};

TEST(ActorThreads, MessagesFromOneSenderArriveInOrder) {
  constexpr int kThreadSenders = 3, kActorSenders = 3, kPerSender = 2000;
  CapturedLog log;
  ActorSystem system(pool_config(log, 4));
  std::atomic<int> misordered{0};
  auto checker =
      system.spawn<OrderChecker>("checker", &system, (kThreadSenders + kActorSenders) * kPerSender, &misordered);
  for (int a = 0; a < kActorSenders; ++a) {
    system.spawn<TickingSender>("sender-" + std::to_string(a), checker, 100 + a, kPerSender);
  }
  system.start();
  std::vector<std::thread> senders;
  for (int t = 0; t < kThreadSenders; ++t) {
    senders.emplace_back([&, t] {
      for (int i = 0; i < kPerSender; ++i) checker.send(Seq{t, i});
    });
  }
  for (auto& s : senders) s.join();
  ASSERT_TRUE(system.wait_for(kBound));
  EXPECT_EQ(misordered.load(), 0);
}

// Flags any overlap of its own handlers; its plain counter would also lose updates.
class Exclusive : public Actor {
 public:
  Exclusive(std::atomic<int>* overlaps, std::atomic<bool>* inside) : overlaps_(overlaps), inside_(inside) {
    on<Add>([this](Add& m) {
      if (inside_->exchange(true)) ++*overlaps_;
      for (int i = 0; i < m.n; ++i) count_ = count_ + 1;
      std::this_thread::yield();  // widen the window another thread would need
      inside_->store(false);
    });
    on<Get>([this](Get&) { return count_; });
  }

 private:
  std::atomic<int>* overlaps_;
  std::atomic<bool>* inside_;
  int count_ = 0;
};

TEST(ActorThreads, HandlersOfOneActorNeverOverlapOnAManyThreadPool) {
  constexpr int kSenders = 4, kPerSender = 3000;
  CapturedLog log;
  ActorSystem system(pool_config(log, 4));
  std::atomic<int> overlaps{0};
  std::atomic<bool> inside{false};
  auto actor = system.spawn<Exclusive>("exclusive", &overlaps, &inside);
  system.start();
  std::vector<std::thread> senders;
  for (int t = 0; t < kSenders; ++t) {
    senders.emplace_back([&] {
      for (int i = 0; i < kPerSender; ++i) actor.send(Add{3});
    });
  }
  for (auto& s : senders) s.join();
  auto count = actor.request(Get{});
  ASSERT_EQ(count.wait_for(kBound), std::future_status::ready);
  EXPECT_EQ(count.get(), 3 * kSenders * kPerSender);
  EXPECT_EQ(overlaps.load(), 0);
  system.stop();
  EXPECT_TRUE(system.wait_for(kBound));
}

struct Ping {
  int left;
};

// Plays request/reply with a counter; every reply must come back on its own strand.
class Pinger : public Actor {
 public:
  Pinger(ActorSystem* system, ActorRef counter, std::atomic<int>* off_strand)
      : system_(system), counter_(std::move(counter)), off_strand_(off_strand) {
    on<Ping>([this](Ping& p) { ask(p.left); });
  }

 private:
  void ask(int left) {
    request(counter_, Get{}, [this, left](int) {
      if (!strand().running_in_this_thread()) ++*off_strand_;
      if (left > 0) {
        counter_.send(Add{1});
        ask(left - 1);
      } else {
        system_->stop();
      }
    });
  }
  ActorSystem* system_;
  ActorRef counter_;
  std::atomic<int>* off_strand_;
};

TEST(ActorThreads, ReplyCallbacksRunOnTheRequestersStrand) {
  CapturedLog log;
  ActorSystem system(pool_config(log, 4));
  std::atomic<int> off_strand{0};
  auto counter = system.spawn<Counter>("counter");
  auto pinger = system.spawn<Pinger>("pinger", &system, counter, &off_strand);
  system.start();
  pinger.send(Ping{2000});
  ASSERT_TRUE(system.wait_for(kBound));
  EXPECT_EQ(off_strand.load(), 0);
}

std::string thread_name() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  return name;
}

struct WhereAreYou {
  using reply_type = std::string;
};

class Locator : public Actor {
 public:
  Locator() {
    on<WhereAreYou>([](WhereAreYou&) { return thread_name(); });
  }
};

TEST(ActorThreads, PlacementPutsActorsOnTheirNamedPools) {
  CapturedLog log;
  SystemConfig config;
  config.pools = {{"compute", 1}, {"comm", 2}};
  config.placement = {{"backprop", "compute"}, {"allreduce", "comm"}};
  config.default_pool = "comm";
  config.logger = log.logger;
  ActorSystem system(config);
  auto backprop = system.spawn<Locator>("backprop");
  auto allreduce = system.spawn<Locator>("allreduce");
  auto other = system.spawn<Locator>("other");
  system.start();
  EXPECT_EQ(backprop.request(WhereAreYou{}).get(), "compute-0");
  EXPECT_EQ(allreduce.request(WhereAreYou{}).get().substr(0, 5), "comm-");
  EXPECT_EQ(other.request(WhereAreYou{}).get().substr(0, 5), "comm-");
  system.stop();
  EXPECT_TRUE(system.wait_for(kBound));
}

struct Boom {};

class Thrower : public Actor {
 public:
  Thrower() {
    on<Boom>([](Boom&) { throw std::runtime_error("gradient went missing"); });
  }
};

// Keeps its pool thread busy with messages to itself until the system stops.
class Busy : public Actor {
 public:
  Busy(std::promise<void>* started, std::atomic<bool>* stopped) : started_(started), stopped_(stopped) {
    on<Tick>([this](Tick&) { self().send(Tick{}); });
  }
  void on_start() override {
    self().send(Tick{});
    started_->set_value();
  }
  void on_stop() override { stopped_->store(true); }

 private:
  std::promise<void>* started_;
  std::atomic<bool>* stopped_;
};

TEST(ActorThreads, ExceptionInAHandlerStopsTheWholeSystemAndWaitReportsIt) {
  CapturedLog log;
  SystemConfig config = pool_config(log, 2);
  config.pools["other"] = 1;
  config.placement = {{"busy", "other"}};
  ActorSystem system(config);
  std::atomic<bool> busy_stopped{false};
  std::promise<void> busy_started;
  auto thrower = system.spawn<Thrower>("thrower");
  system.spawn<Busy>("busy", &busy_started, &busy_stopped);
  system.start();
  // on_stop runs only for actors whose on_start ran: make sure this one's did.
  ASSERT_EQ(busy_started.get_future().wait_for(kBound), std::future_status::ready);
  thrower.send(Boom{});
  const auto begin = std::chrono::steady_clock::now();
  try {
    ASSERT_TRUE(system.wait_for(kBound)) << "the failure must stop the system";
    FAIL() << "wait must throw";
  } catch (const ActorFailed& e) {
    EXPECT_EQ(e.where(), "actor 'thrower' handling tnt::actors::test::(anonymous namespace)::Boom");
    EXPECT_NE(std::string(e.what()).find("gradient went missing"), std::string::npos);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - begin, kBound);
  EXPECT_TRUE(busy_stopped.load()) << "the other actor was stopped too";
  EXPECT_NE(log.str().find("[error] actor system 'threads': actor 'thrower' handling "
                           "tnt::actors::test::(anonymous namespace)::Boom failed: gradient went missing"),
            std::string::npos)
      << log.str();
  EXPECT_THROW(thrower.send(Boom{}), MailboxClosed);
}

// Throws from an asynchronous handler bound to its strand, outside any message.
class AsyncThrower : public Actor {
 public:
  void on_start() override {
    boost::asio::post(strand(), [] { throw std::runtime_error("timer handler failed"); });
  }
};

TEST(ActorThreads, ExceptionInAnAsynchronousHandlerStopsTheSystem) {
  CapturedLog log;
  ActorSystem system(pool_config(log, 2));
  system.spawn<AsyncThrower>("async");
  system.start();
  try {
    ASSERT_TRUE(system.wait_for(kBound));
    FAIL() << "wait must throw";
  } catch (const ActorFailed& e) {
    EXPECT_EQ(e.where(), "an asynchronous handler on pool 'default'");
    EXPECT_NE(std::string(e.what()).find("timer handler failed"), std::string::npos);
  }
}

// Its first message blocks on a gate, so that the test can queue messages behind it.
class Gated : public Actor {
 public:
  Gated(std::promise<void>* entered, std::shared_future<void> gate, std::atomic<int>* handled,
        std::atomic<int>* handled_at_stop)
      : entered_(entered), gate_(std::move(gate)), handled_(handled), handled_at_stop_(handled_at_stop) {
    on<Add>([this](Add&) {
      if (handled_->load() == 0) {
        entered_->set_value();
        gate_.wait();
      }
      ++*handled_;
    });
  }
  void on_stop() override { handled_at_stop_->store(handled_->load()); }

 private:
  std::promise<void>* entered_;
  std::shared_future<void> gate_;
  std::atomic<int>* handled_;
  std::atomic<int>* handled_at_stop_;
};

class StopWithPendingMessages : public ::testing::TestWithParam<StopMode> {};

TEST_P(StopWithPendingMessages, DrainHandlesAllDiscardOnlyTheRunningOne) {
  constexpr int kMessages = 100;
  CapturedLog log;
  ActorSystem system(pool_config(log, 3));
  std::promise<void> entered, gate;
  std::atomic<int> handled{0}, handled_at_stop{-1};
  auto gated = system.spawn<Gated>("gated", &entered, gate.get_future().share(), &handled, &handled_at_stop);
  system.start();
  for (int i = 0; i < kMessages; ++i) gated.send(Add{1});
  ASSERT_EQ(entered.get_future().wait_for(kBound), std::future_status::ready);
  system.stop(GetParam());
  EXPECT_THROW(gated.send(Add{1}), MailboxClosed);
  gate.set_value();
  ASSERT_TRUE(system.wait_for(kBound));
  const int expected = GetParam() == StopMode::drain ? kMessages : 1;
  EXPECT_EQ(handled.load(), expected);
  EXPECT_EQ(handled_at_stop.load(), expected) << "on_stop runs after the last handled message";
}

INSTANTIATE_TEST_SUITE_P(Modes, StopWithPendingMessages, ::testing::Values(StopMode::drain, StopMode::discard),
                         [](const auto& param) { return param.param == StopMode::drain ? "drain" : "discard"; });

// Leaves a one-hour timer pending and never cancels it.
class Sleeper : public Actor {
 public:
  Sleeper() : timer_(strand()) {}
  void on_start() override {
    timer_.expires_after(1h);
    timer_.async_wait([](const boost::system::error_code&) {});
  }

 private:
  boost::asio::steady_timer timer_;
};

TEST(ActorThreads, StopDoesNotHangOnWorkActorsLeftBehind) {
  CapturedLog log;
  ActorSystem system(pool_config(log, 2));
  auto counter = system.spawn<Counter>("counter");
  system.spawn<Sleeper>("sleeper");
  system.start();
  EXPECT_EQ(counter.request(Get{}).get(), 0);  // both actors have started
  system.stop();
  EXPECT_TRUE(system.wait_for(kBound));
}

TEST(ActorThreads, DestroyingARunningSystemStopsAndJoins) {
  CapturedLog log;
  std::atomic<bool> busy_stopped{false};
  std::promise<void> busy_started;
  {
    ActorSystem system(pool_config(log, 2));
    system.spawn<Busy>("busy", &busy_started, &busy_stopped);
    system.spawn<Sleeper>("sleeper");
    system.start();
    ASSERT_EQ(busy_started.get_future().wait_for(kBound), std::future_status::ready);
  }
  EXPECT_TRUE(busy_stopped.load());
}

struct WaitOnYourself {
  using reply_type = std::string;
};

class SelfWaiter : public Actor {
 public:
  explicit SelfWaiter(ActorSystem* system) {
    on<WaitOnYourself>([system](WaitOnYourself&) -> std::string {
      try {
        system->wait();
        return "returned";
      } catch (const tnt::LogicError& e) {
        return e.what();
      }
    });
  }
};

TEST(ActorThreads, WaitFromAnActorThreadIsRefusedNotADeadlock) {
  CapturedLog log;
  ActorSystem system(pool_config(log, 1));
  auto waiter = system.spawn<SelfWaiter>("waiter", &system);
  system.start();
  auto answer = waiter.request(WaitOnYourself{});
  ASSERT_EQ(answer.wait_for(kBound), std::future_status::ready);
  EXPECT_EQ(answer.get(), "actor system 'threads': wait() on one of its own threads would deadlock");
  system.stop();
  EXPECT_TRUE(system.wait_for(kBound));
}

}  // namespace
}  // namespace tnt::actors::test

namespace tnt::actors::test {
namespace {

// Runs body on a thread of its own; a body still running after kBound is a hang, reported as
// a failure (the thread cannot be joined then, so the process ends).
template <class F>
void within_bound(F body) {
  std::promise<void> done;
  auto finished = done.get_future();
  std::thread runner([&done, &body] {
    body();
    done.set_value();
  });
  if (finished.wait_for(kBound) != std::future_status::ready) {
    ADD_FAILURE() << "hung for " << kBound.count() << " s";
    std::fflush(nullptr);
    std::_Exit(1);
  }
  runner.join();
}

// The trainer's situation: refs held by completion handlers of another event loop (tnt's
// Communicator), which sends from there and destroys the handlers whenever it is done with
// them, while the system is being destroyed or long after.
TEST(ActorThreads, RefsOnAnotherEventLoopMaySendAndDieWhileTheSystemGoes) {
  CapturedLog log;
  boost::asio::io_context loop;
  auto guard = boost::asio::make_work_guard(loop);
  std::thread loop_thread([&loop] { loop.run(); });
  std::atomic<int> accepted{0}, refused{0};
  within_bound([&] {
    for (int round = 0; round < 200; ++round) {
      std::vector<ActorRef> late;  // released on the loop thread after the system is gone
      {
        ActorSystem system(pool_config(log, 1));
        ActorRef counter = system.spawn<Counter>("counter");
        system.start();
        const int before = accepted.load();
        // Sends until refused, so that sends overlap the system's stop and destruction.
        boost::asio::post(loop, [counter, &accepted, &refused] {
          for (;;) {
            try {
              counter.send(Add{1});
              ++accepted;
            } catch (const MailboxClosed&) {
              ++refused;
              return;
            }
          }
        });
        while (accepted.load() == before) std::this_thread::yield();  // it sends now
        late.push_back(counter);
        if (round % 2 == 0) system.stop();
      }
      boost::asio::post(loop, [kept = std::move(late)]() mutable { kept.clear(); });
    }
    std::promise<void> drained;
    boost::asio::post(loop, [&drained] { drained.set_value(); });
    drained.get_future().wait();
  });
  guard.reset();
  loop_thread.join();
  // Every sender ended on a clear MailboxClosed (nothing else escaped, nothing hung).
  EXPECT_EQ(refused.load(), 200);
  EXPECT_GT(accepted.load(), 200);
}

TEST(ActorThreads, RefsMayOutliveASystemWithPools) {
  CapturedLog log;
  ActorRef kept;
  {
    ActorSystem system(pool_config(log, 2));
    kept = system.spawn<Counter>("counter");
    system.start();
    EXPECT_EQ(kept.request(Get{}).get(), 0);
  }
  EXPECT_THROW(kept.send(Add{1}), MailboxClosed);
  kept = ActorRef();  // the last owner of the actor's mailbox goes after its pool
}

}  // namespace
}  // namespace tnt::actors::test
