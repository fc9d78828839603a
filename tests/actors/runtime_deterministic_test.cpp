// Actors tested without threads: every actor runs on an io_context the test thread runs, so a
// test injects messages, runs the context until it is idle, and checks what came out.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_support.h"
#include "tnt/core/error.h"

namespace tnt::actors::test {
namespace {

using namespace std::chrono_literals;

class DeterministicTest : public ::testing::Test {
 protected:
  CapturedLog log;
  boost::asio::io_context io;
  ActorSystem system{config_on_test_thread(log)};
  void SetUp() override { system.add_executor("test", io.get_executor()); }
  // Runs every handler that is ready, on this thread; returns when nothing is left to do.
  void run_until_idle() {
    io.restart();
    io.run();
  }
};

TEST_F(DeterministicTest, RequestGetsTheReplyAfterEarlierMessages) {
  auto counter = system.spawn<Counter>("counter");
  system.start();
  counter.send(Add{2});
  counter.send(Add{3});
  auto sum = counter.request(Get{});
  EXPECT_EQ(sum.wait_for(0s), std::future_status::timeout) << "nothing runs until the io_context does";
  run_until_idle();
  ASSERT_EQ(sum.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(sum.get(), 5);
}

struct Note {
  std::string text;
};

// Records its lifecycle and messages, to check their order.
class Recorder : public Actor {
 public:
  explicit Recorder(std::vector<std::string>* events) : events_(events) {
    on<Note>([this](Note& n) { events_->push_back(n.text); });
    on<Get>([this](Get&) { return static_cast<int>(events_->size()); });
  }
  void on_start() override { events_->push_back("start"); }
  void on_stop() override { events_->push_back("stop"); }

 private:
  std::vector<std::string>* events_;
};

TEST_F(DeterministicTest, StopDrainHandlesPendingMessagesThenRunsOnStop) {
  std::vector<std::string> events;
  auto recorder = system.spawn<Recorder>("recorder", &events);
  system.start();
  for (const char* t : {"a", "b", "c"}) recorder.send(Note{t});
  system.stop(StopMode::drain);
  EXPECT_FALSE(system.stopped()) << "stop() only asks; the actor must still drain";
  EXPECT_THROW(recorder.send(Note{"late"}), MailboxClosed);
  run_until_idle();
  EXPECT_EQ(events, (std::vector<std::string>{"start", "a", "b", "c", "stop"}));
  EXPECT_TRUE(system.stopped());
  EXPECT_TRUE(system.wait_for(0ms));
  EXPECT_EQ(system.error(), nullptr);
}

TEST_F(DeterministicTest, StopDiscardDropsPendingMessagesAndFailsPendingRequests) {
  std::vector<std::string> events;
  auto recorder = system.spawn<Recorder>("recorder", &events);
  system.start();
  run_until_idle();
  for (const char* t : {"a", "b", "c"}) recorder.send(Note{t});
  auto count = recorder.request(Get{});
  system.stop(StopMode::discard);
  run_until_idle();
  EXPECT_EQ(events, (std::vector<std::string>{"start", "stop"}));
  ASSERT_EQ(count.wait_for(0s), std::future_status::ready);
  try {
    count.get();
    FAIL() << "a discarded request has no value";
  } catch (const MailboxClosed& e) {
    EXPECT_NE(std::string(e.what()).find("stopped before actor 'recorder' answered"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(system.wait_for(0ms));
}

TEST_F(DeterministicTest, SendOutsideTheRunningPhaseIsAClearError) {
  auto counter = system.spawn<Counter>("counter");
  try {
    counter.send(Add{1});
    FAIL() << "send before start must throw";
  } catch (const MailboxClosed& e) {
    EXPECT_STREQ(e.what(),
                 "actor system 'test-system' is not started: cannot deliver "
                 "tnt::actors::test::Add to actor 'counter'");
  }
  system.start();
  system.stop();
  run_until_idle();
  try {
    counter.request(Get{});
    FAIL() << "request after stop must throw";
  } catch (const MailboxClosed& e) {
    EXPECT_STREQ(e.what(),
                 "actor system 'test-system' has stopped: cannot deliver "
                 "tnt::actors::test::Get to actor 'counter'");
  }
}

TEST_F(DeterministicTest, RefOutlivingTheSystemStillGivesAClearError) {
  ActorRef kept;
  {
    ActorSystem other(config_on_test_thread(log, "short-lived"));
    other.add_executor("test", io.get_executor());
    kept = other.spawn<Counter>("counter");
    other.start();
  }
  EXPECT_THROW(kept.send(Add{1}), MailboxClosed);
  run_until_idle();  // the destroyed system's queued start marker must be harmless
}

struct Unknown {};

TEST_F(DeterministicTest, MessageWithoutHandlerIsRejectedAtTheSender) {
  auto counter = system.spawn<Counter>("counter");
  system.start();
  try {
    counter.send(Unknown{});
    FAIL();
  } catch (const UnhandledMessage& e) {
    EXPECT_NE(std::string(e.what()).find("'counter'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tnt::actors::test::(anonymous namespace)::Unknown"), std::string::npos)
        << e.what();
  }
}

struct Forward {
  int n;
};

// Forwards to another actor; remembers whether the handler got past the send.
class Forwarder : public Actor {
 public:
  Forwarder(ActorRef to, bool* after_send) : to_(std::move(to)), after_send_(after_send) {
    on<Forward>([this](Forward& f) {
      to_.send(Add{f.n});
      *after_send_ = true;
    });
  }

 private:
  ActorRef to_;
  bool* after_send_;
};

TEST_F(DeterministicTest, SendsFromHandlersDuringDrainEndThoseHandlersQuietly) {
  bool after_send = false;
  auto counter = system.spawn<Counter>("counter");
  auto forwarder = system.spawn<Forwarder>("forwarder", counter, &after_send);
  system.start();
  forwarder.send(Forward{1});
  system.stop(StopMode::drain);
  run_until_idle();
  EXPECT_FALSE(after_send) << "the send must have thrown MailboxClosed";
  EXPECT_TRUE(system.wait_for(0ms)) << "an orderly stop is not a failure";
  EXPECT_EQ(system.error(), nullptr);
  EXPECT_NE(log.str().find("is stopping: cannot deliver"), std::string::npos) << log.str();
}

TEST_F(DeterministicTest, ActorSendingToAnotherStoppedSystemFailsItsOwnSystem) {
  ActorSystem other(config_on_test_thread(log, "other"));
  other.add_executor("test", io.get_executor());
  auto remote = other.spawn<Counter>("remote");
  other.start();
  other.stop();
  run_until_idle();
  ASSERT_TRUE(other.stopped());

  bool after_send = false;
  auto forwarder = system.spawn<Forwarder>("forwarder", remote, &after_send);
  system.start();
  forwarder.send(Forward{1});
  run_until_idle();
  EXPECT_FALSE(after_send);
  ASSERT_TRUE(system.stopped());
  try {
    system.wait_for(0ms);
    FAIL() << "wait must report the failure";
  } catch (const ActorFailed& e) {
    EXPECT_EQ(e.where(), "actor 'forwarder' handling tnt::actors::test::(anonymous namespace)::Forward");
    EXPECT_THROW(std::rethrow_exception(e.cause()), MailboxClosed);
    EXPECT_NE(std::string(e.what()).find("actor system 'other' has stopped"), std::string::npos) << e.what();
  }
}

struct Boom {};

class Fragile : public Actor {
 public:
  explicit Fragile(int* handled) : handled_(handled) {
    on<Boom>([](Boom&) { throw std::runtime_error("boom"); });
    on<Add>([this](Add&) { ++*handled_; });
  }

 private:
  int* handled_;
};

TEST_F(DeterministicTest, ExceptionStopsTheSystemAndDiscardsTheRest) {
  int handled = 0;
  std::vector<std::string> events;
  auto fragile = system.spawn<Fragile>("fragile", &handled);
  system.spawn<Recorder>("bystander", &events);
  system.start();
  fragile.send(Add{1});
  fragile.send(Boom{});
  fragile.send(Add{1});
  run_until_idle();  // io.run() itself must not throw: the runtime catches
  EXPECT_EQ(handled, 1) << "messages after the failure are discarded";
  EXPECT_EQ(events, (std::vector<std::string>{"start", "stop"})) << "every actor is stopped";
  EXPECT_TRUE(system.stopped());
  EXPECT_THROW(system.wait_for(0ms), ActorFailed);
  EXPECT_NE(log.str().find("actor 'fragile' handling tnt::actors::test::(anonymous namespace)::Boom "
                           "failed: boom; stopping the system"),
            std::string::npos)
      << log.str();
}

struct Hold {
  using reply_type = int;
};
struct Release {
  int value;
};
struct Ignore {
  using reply_type = int;
};
struct Explode {
  using reply_type = int;
};

// Answers Hold later, when Release arrives; drops Ignore; fails Explode.
class Deferrer : public Actor {
 public:
  Deferrer() {
    on<Hold>([this](Hold&, Reply<int> reply) { held_.emplace_back(std::move(reply)); });
    on<Release>([this](Release& r) {
      for (auto& reply : held_) reply(r.value);
      held_.clear();
    });
    on<Ignore>([](Ignore&, Reply<int>) {});
    on<Explode>([](Explode&) -> int { throw std::invalid_argument("cannot answer"); });
  }

 private:
  std::vector<Reply<int>> held_;
};

TEST_F(DeterministicTest, ReplyCanBeGivenLater) {
  auto deferrer = system.spawn<Deferrer>("deferrer");
  system.start();
  auto answer = deferrer.request(Hold{});
  run_until_idle();
  EXPECT_EQ(answer.wait_for(0s), std::future_status::timeout);
  deferrer.send(Release{42});
  run_until_idle();
  EXPECT_EQ(answer.get(), 42);
}

TEST_F(DeterministicTest, DroppedReplyReachesTheFutureAsRequestDropped) {
  auto deferrer = system.spawn<Deferrer>("deferrer");
  system.start();
  auto answer = deferrer.request(Ignore{});
  run_until_idle();
  EXPECT_THROW(answer.get(), RequestDropped);
}

TEST_F(DeterministicTest, RequestHandlerExceptionReachesTheFutureAndStopsTheSystem) {
  auto deferrer = system.spawn<Deferrer>("deferrer");
  system.start();
  auto answer = deferrer.request(Explode{});
  run_until_idle();
  EXPECT_THROW(answer.get(), std::invalid_argument);
  EXPECT_TRUE(system.stopped());
  EXPECT_THROW(system.wait_for(0ms), ActorFailed);
}

// Asks the counter for its sum and records the answer.
class Asker : public Actor {
 public:
  Asker(ActorRef counter, std::vector<int>* answers) : counter_(std::move(counter)), answers_(answers) {
    on<Note>([this](Note&) { request(counter_, Get{}, [this](int sum) { answers_->push_back(sum); }); });
  }

 private:
  ActorRef counter_;
  std::vector<int>* answers_;
};

TEST_F(DeterministicTest, ReplyCallbackComesBackAsAMessage) {
  std::vector<int> answers;
  auto counter = system.spawn<Counter>("counter");
  auto asker = system.spawn<Asker>("asker", counter, &answers);
  system.start();
  counter.send(Add{7});
  asker.send(Note{});
  run_until_idle();
  EXPECT_EQ(answers, std::vector<int>{7});
}

TEST_F(DeterministicTest, CallbackRequestToAFailingHandlerFailsTheSystem) {
  class ExplodeAsker : public Actor {
   public:
    explicit ExplodeAsker(ActorRef to) : to_(std::move(to)) {
      on<Note>([this](Note&) { request(to_, Explode{}, [](int) { ADD_FAILURE() << "no reply expected"; }); });
    }
    ActorRef to_;
  };
  auto deferrer = system.spawn<Deferrer>("deferrer");
  auto asker = system.spawn<ExplodeAsker>("asker", deferrer);
  system.start();
  asker.send(Note{});
  run_until_idle();
  try {
    system.wait_for(0ms);
    FAIL();
  } catch (const ActorFailed& e) {
    EXPECT_EQ(e.where(), "actor 'deferrer' handling tnt::actors::test::(anonymous namespace)::Explode");
  }
  EXPECT_EQ(log.str().find("failed as well"), std::string::npos) << "one cause, reported once";
}

TEST_F(DeterministicTest, SetupMistakesAreClearErrors) {
  EXPECT_THROW(system.spawn<Counter>(""), tnt::ConfigError);
  system.spawn<Counter>("counter");
  EXPECT_THROW(system.spawn<Counter>("counter"), tnt::ConfigError);
  EXPECT_THROW(system.add_executor("test", io.get_executor()), tnt::ConfigError);

  class Late : public Actor {
   public:
    void on_start() override {
      on<Add>([](Add&) {});
    }
  };
  system.spawn<Late>("late");
  system.start();
  EXPECT_THROW(system.spawn<Counter>("after-start"), tnt::LogicError);
  EXPECT_THROW(system.start(), tnt::LogicError);
  run_until_idle();  // Late's on_start registers a handler outside its constructor: a failure
  ASSERT_TRUE(system.stopped());
  try {
    system.wait_for(0ms);
    FAIL();
  } catch (const ActorFailed& e) {
    EXPECT_EQ(e.where(), "actor 'late' in on_start");
    EXPECT_THROW(std::rethrow_exception(e.cause()), tnt::LogicError);
  }
}

TEST(ActorSetup, ActorsExistOnlyThroughSpawn) {
  class Loose : public Actor {};
  EXPECT_THROW(Loose{}, tnt::LogicError);
}

TEST(ActorSetup, PlacementMustNameAPoolOrExecutor) {
  CapturedLog log;
  SystemConfig config;
  config.logger = log.logger;
  config.placement = {{"worker", "gpu"}};
  ActorSystem system(config);
  try {
    system.spawn<Counter>("worker");
    FAIL();
  } catch (const tnt::ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "actor system 'actors': actor 'worker' is placed on 'gpu', which is neither a pool "
                 "nor an executor of this system");
  }
  config.pools = {{"compute", 0}};
  EXPECT_THROW(ActorSystem{config}, tnt::ConfigError);
}

TEST(ActorSetup, StopBeforeStartNeedsNoThreads) {
  CapturedLog log;
  SystemConfig config;
  config.name = "never";
  config.logger = log.logger;
  ActorSystem system(config);
  system.spawn<Counter>("counter");
  system.stop();
  EXPECT_TRUE(system.wait_for(0ms));
  EXPECT_THROW(system.start(), tnt::LogicError);
}

}  // namespace
}  // namespace tnt::actors::test
