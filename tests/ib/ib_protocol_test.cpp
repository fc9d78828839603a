// The InfiniBand back end's protocol (transport/src/ib/protocol.h) and registration cache, run
// without a device: two Channels in one process are joined by a fake wire that behaves like a
// reliable connected queue pair (in-order delivery per direction, receive buffers consumed in
// the order they were posted, RDMA writes checked against live registrations, the send buffer
// read when the message is delivered, not when it is posted). Deliveries, completions and
// deferred tasks interleave in a random but seeded order. The fake fails the test on anything a
// real queue pair would reject: a SEND or WRITE WITH IMMEDIATE that finds no receive posted
// (receiver-not-ready), a send queue overflow, a write outside a registered range.
//
// This checks the protocol logic only; the verbs calls of ib_transport.cpp are not exercised.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ib/protocol.h"
#include "ib/registration_cache.h"
#include "tnt/core/error.h"

namespace tnt::transport::ib {
namespace {

// ---- a fake fabric ------------------------------------------------------------------------------

struct Registrations {
  std::map<std::uint32_t, std::pair<std::uintptr_t, std::uintptr_t>> live;
  std::uint32_t next_key = 100;
  int registrations = 0;

  RegistrationCache::Region add(void* start, std::size_t bytes) {
    const std::uint32_t key = next_key++;
    const auto begin = reinterpret_cast<std::uintptr_t>(start);
    live[key] = {begin, begin + bytes};
    ++registrations;
    auto owner = std::shared_ptr<void>(nullptr, [this, key](void*) { live.erase(key); });
    return RegistrationCache::Region{key, key, owner};
  }
  bool covers(std::uint32_t key, const void* data, std::size_t bytes) const {
    auto it = live.find(key);
    const auto begin = reinterpret_cast<std::uintptr_t>(data);
    return it != live.end() && it->second.first <= begin && begin + bytes <= it->second.second;
  }
};

class Fabric;

class FakeWire final : public Wire {
 public:
  FakeWire(Fabric& fabric, int side, const ChannelConfig& config)
      : fabric_(fabric),
        side_(side),
        config_(config),
        slot_(slot_bytes(config.eager_limit)),
        recv_(config.recv_slots * slot_),
        send_(config.send_slots * slot_) {}

  std::byte* recv_buffer(std::uint32_t slot) override { return recv_.data() + slot * slot_; }
  std::byte* send_buffer(std::uint32_t slot) override { return send_.data() + slot * slot_; }
  void post_recv(std::uint32_t slot) override;
  void post_send(std::uint32_t slot, std::size_t bytes, std::uint64_t wr_id) override;
  void post_write(const WriteRequest& request) override;

  std::deque<std::uint32_t> posted;  // the receive queue, consumed in order
  int send_queue_used = 0;
  Fabric& fabric_;
  int side_;
  ChannelConfig config_;
  std::size_t slot_;
  std::vector<std::byte> recv_;
  std::vector<std::byte> send_;
};

struct Endpoint {
  Registrations registrations;
  std::unique_ptr<RegistrationCache> cache;
  std::unique_ptr<FakeWire> wire;
  std::unique_ptr<Channel> channel;
  std::deque<std::function<void()>> completions;  // the completion queue
  std::deque<std::function<void()>> deferred;     // tasks posted to the strand
  std::vector<std::string> failures;
};

class Fabric {
 public:
  Fabric(const ChannelConfig& a, const ChannelConfig& b, std::uint32_t seed, std::size_t cache_bytes = 1 << 20)
      : random_(seed) {
    const ChannelConfig configs[2] = {a, b};
    for (int side = 0; side < 2; ++side) {
      Endpoint& e = ends_[side];
      e.cache = std::make_unique<RegistrationCache>(
          [&e](void* start, std::size_t bytes) { return e.registrations.add(start, bytes); }, cache_bytes, 8);
      ChannelConfig config = configs[side];
      config.peer_recv_slots = configs[1 - side].recv_slots;
      config.peer_eager_limit = configs[1 - side].eager_limit;
      e.wire = std::make_unique<FakeWire>(*this, side, config);
      e.channel = std::make_unique<Channel>(
          1 - side, "rank " + std::to_string(1 - side) + " (fake)", config, *e.wire, *e.cache,
          [&e](std::function<void()> task) { e.deferred.push_back(std::move(task)); },
          [&e](const std::string& message) { e.failures.push_back(message); });
    }
    for (auto& e : ends_) e.channel->post_all_receives();
  }

  Endpoint& end(int side) { return ends_[side]; }
  Channel& channel(int side) { return *ends_[side].channel; }

  void violation(const std::string& what) {
    violations.push_back(what);
    ADD_FAILURE() << what;
  }

  // One random step; false when nothing is left to do.
  bool step() {
    std::vector<std::deque<std::function<void()>>*> ready;
    for (auto* queue : {&in_flight_[0], &in_flight_[1], &ends_[0].completions, &ends_[1].completions,
                        &ends_[0].deferred, &ends_[1].deferred}) {
      if (!queue->empty()) ready.push_back(queue);
    }
    if (ready.empty()) return false;
    auto* queue = ready[std::uniform_int_distribution<std::size_t>(0, ready.size() - 1)(random_)];
    auto task = std::move(queue->front());
    queue->pop_front();
    task();
    return true;
  }
  void run() {
    while (step()) {
    }
  }

  std::deque<std::function<void()>> in_flight_[2];  // [from side]
  std::vector<std::string> violations;
  std::mt19937 random_;

 private:
  Endpoint ends_[2];
};

void FakeWire::post_recv(std::uint32_t slot) {
  if (slot >= config_.recv_slots || std::count(posted.begin(), posted.end(), slot)) {
    fabric_.violation("receive buffer " + std::to_string(slot) + " posted twice or out of range");
  }
  posted.push_back(slot);
}

void FakeWire::post_send(std::uint32_t slot, std::size_t bytes, std::uint64_t wr_id) {
  if (++send_queue_used > static_cast<int>(config_.send_queue_depth)) fabric_.violation("send queue overflow");
  if (bytes > slot_) fabric_.violation("SEND larger than a bounce buffer");
  fabric_.in_flight_[side_].push_back([this, slot, bytes, wr_id] {
    Endpoint& peer = fabric_.end(1 - side_);
    if (peer.wire->posted.empty()) {
      fabric_.violation("receiver not ready: SEND from side " + std::to_string(side_) + " found no receive posted");
      return;
    }
    const std::uint32_t target = peer.wire->posted.front();
    peer.wire->posted.pop_front();
    // The HCA reads the send buffer now: a protocol that reused it early would be caught here.
    std::memcpy(peer.wire->recv_buffer(target), send_buffer(slot), bytes);
    peer.completions.push_back([&peer, target, bytes] { peer.channel->on_recv(target, bytes); });
    Endpoint& self = fabric_.end(side_);
    self.completions.push_back([this, &self, wr_id] {
      --send_queue_used;
      self.channel->on_send_done(wr_id);
    });
  });
}

void FakeWire::post_write(const WriteRequest& request) {
  if (++send_queue_used > static_cast<int>(config_.send_queue_depth)) fabric_.violation("send queue overflow");
  fabric_.in_flight_[side_].push_back([this, request] {
    Endpoint& self = fabric_.end(side_);
    Endpoint& peer = fabric_.end(1 - side_);
    if (!self.registrations.covers(request.lkey, request.local, request.bytes)) {
      fabric_.violation("RDMA WRITE from memory outside its registration");
      return;
    }
    if (!peer.registrations.covers(request.rkey, reinterpret_cast<void*>(request.remote), request.bytes)) {
      fabric_.violation("RDMA WRITE to memory outside the peer's registration");
      return;
    }
    std::memcpy(reinterpret_cast<void*>(request.remote), request.local, request.bytes);
    if (request.with_immediate) {
      if (peer.wire->posted.empty()) {
        fabric_.violation("receiver not ready: WRITE WITH IMMEDIATE found no receive posted");
        return;
      }
      const std::uint32_t target = peer.wire->posted.front();
      peer.wire->posted.pop_front();
      peer.completions.push_back(
          [&peer, target, immediate = request.immediate] { peer.channel->on_recv_immediate(target, immediate); });
    }
    self.completions.push_back([this, &self, wr_id = request.wr_id] {
      --send_queue_used;
      self.channel->on_send_done(wr_id);
    });
  });
}

// ---- traffic ------------------------------------------------------------------------------------

struct Message {
  int from;
  Tag tag;
  std::vector<std::byte> payload;
  std::vector<std::byte> destination;  // the receive's buffer (capacity >= payload)
  int sends_completed = 0;
  int recvs_completed = 0;
  std::size_t received_bytes = 0;
};

class Recorder final : public CompletionSink {
 public:
  explicit Recorder(std::vector<Message>& messages, std::function<void()> on_completion = {})
      : messages_(messages), on_completion_(std::move(on_completion)) {}
  void on_send_complete(std::uint64_t cookie) override {
    ++messages_[cookie].sends_completed;
    if (on_completion_) on_completion_();
  }
  void on_recv_complete(std::uint64_t cookie, std::size_t bytes) override {
    ++messages_[cookie].recvs_completed;
    messages_[cookie].received_bytes = bytes;
    if (on_completion_) on_completion_();
  }

 private:
  std::vector<Message>& messages_;
  std::function<void()> on_completion_;
};

std::vector<std::byte> pattern(std::size_t bytes, std::uint64_t seed) {
  std::vector<std::byte> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<std::byte>((i * 131 + seed * 7919 + (i >> 8)) & 0xff);
  return data;
}

struct TrafficCase {
  const char* name;
  ChannelConfig config;
  std::size_t cache_bytes;
};

void PrintTo(const TrafficCase& traffic, std::ostream* out) { *out << traffic.name; }

ChannelConfig tight() {
  ChannelConfig c;
  c.recv_slots = 4;
  c.send_slots = 2;
  c.send_queue_depth = 4;
  c.eager_limit = 64;
  c.max_write_bytes = 1000;  // splits every large message into several writes
  return c;
}

ChannelConfig roomy() {
  ChannelConfig c;
  c.recv_slots = 32;
  c.send_slots = 32;
  c.send_queue_depth = 96;
  c.eager_limit = 4096;
  c.max_write_bytes = 50000;
  return c;
}

class ProtocolTraffic : public ::testing::TestWithParam<std::tuple<TrafficCase, std::uint32_t>> {};

// Messages of every size class flow both ways; sends and receives are posted in random order
// and at random times, some from inside completion callbacks (as the ring does), so that
// messages meet posted receives, arrive unexpected, and cross their RTS/CTS in every order.
TEST_P(ProtocolTraffic, EveryMessageArrivesIntactAndOnce) {
  const auto& [traffic, seed] = GetParam();
  const ChannelConfig config = traffic.config;
  Fabric fabric(config, config, seed, traffic.cache_bytes);
  std::mt19937 random(seed * 7 + 1);
  const std::size_t eager = config.eager_limit;
  const std::vector<std::size_t> sizes = {
      0,         1, eager - 1, eager, eager + 1, 2 * eager + 3, config.max_write_bytes, 3 * config.max_write_bytes + 17,
      20 * eager};
  std::vector<Message> messages;
  for (int i = 0; i < 240; ++i) {
    Message m;
    m.from = static_cast<int>(random() % 2);
    // Unique, not dense; three messages share each value, told apart by their contexts alone.
    m.tag = Tag{1000 + static_cast<std::uint64_t>(i / 3) * 7, static_cast<std::uint32_t>(i % 3)};
    const std::size_t bytes = random() % 3 == 0 ? random() % (5 * eager + 2) : sizes[random() % sizes.size()];
    m.payload = pattern(bytes, static_cast<std::uint64_t>(i));
    m.destination.assign(bytes + (random() % 4 == 0 ? random() % 100 : 0), std::byte{0xEE});
    messages.push_back(std::move(m));
  }
  // Two streams of operations (post the send of message i, post the receive of message i), each
  // shuffled, drawn from at random between fabric steps and from completion callbacks.
  std::vector<std::pair<bool, std::size_t>> operations;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    operations.emplace_back(true, i);
    operations.emplace_back(false, i);
  }
  std::shuffle(operations.begin(), operations.end(), random);
  std::size_t next = 0;
  std::unique_ptr<Recorder> recorder;
  auto post_one = [&] {
    if (next >= operations.size()) return;
    const auto [is_send, index] = operations[next++];
    Message& m = messages[index];
    if (is_send)
      fabric.channel(m.from).send(m.tag, m.payload.data(), m.payload.size(), *recorder, index);
    else
      fabric.channel(1 - m.from).recv(m.tag, m.destination.data(), m.destination.size(), *recorder, index);
  };
  recorder = std::make_unique<Recorder>(messages, [&] {
    if (random() % 3 == 0) post_one();  // from inside a completion, as the ring posts its next step
  });
  while (next < operations.size()) {
    if (random() % 2 == 0)
      post_one();
    else
      fabric.step();
  }
  fabric.run();

  EXPECT_TRUE(fabric.violations.empty());
  for (int side = 0; side < 2; ++side) {
    EXPECT_TRUE(fabric.end(side).failures.empty()) << fabric.end(side).failures.front();
    EXPECT_FALSE(fabric.channel(side).failed());
    EXPECT_EQ(fabric.channel(side).staged_messages(), 0u);
    EXPECT_EQ(fabric.end(side).wire->send_queue_used, 0);
  }
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    ASSERT_EQ(m.sends_completed, 1) << "message " << i << " of " << m.payload.size() << " bytes";
    ASSERT_EQ(m.recvs_completed, 1) << "message " << i << " of " << m.payload.size() << " bytes";
    ASSERT_EQ(m.received_bytes, m.payload.size()) << "message " << i;
    ASSERT_TRUE(std::equal(m.payload.begin(), m.payload.end(), m.destination.begin()))
        << "message " << i << " corrupted";
    // Bytes past the message stay untouched.
    ASSERT_TRUE(std::all_of(m.destination.begin() + static_cast<std::ptrdiff_t>(m.payload.size()), m.destination.end(),
                            [](std::byte b) { return b == std::byte{0xEE}; }))
        << "message " << i << " wrote past its end";
  }
  // Every registration taken for a rendezvous was given back.
  for (int side = 0; side < 2; ++side) EXPECT_EQ(fabric.end(side).cache->in_use(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Seeds, ProtocolTraffic,
                         ::testing::Combine(::testing::Values(TrafficCase{"tight", tight(), 1 << 20},
                                                              TrafficCase{"roomy", roomy(), 1 << 20},
                                                              TrafficCase{"tight_nocache", tight(), 0}),
                                            ::testing::Values(1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u)),
                         [](const auto& test_info) {
                           return std::string(std::get<0>(test_info.param).name) + "_seed" +
                                  std::to_string(std::get<1>(test_info.param));
                         });

// A one-way flood: the receiver never sends anything of its own, so every credit must come back
// in CREDIT messages. With four buffers and a thousand messages a lost credit shows as a stall.
TEST(Protocol, OneWayFloodReturnsCreditsWithoutTraffic) {
  Fabric fabric(tight(), tight(), 42);
  std::vector<Message> messages(1000);
  Recorder recorder(messages);
  for (std::size_t i = 0; i < messages.size(); ++i) {
    messages[i].payload = pattern(i % 3 == 0 ? 200 : 10, i);  // eager and rendezvous
    messages[i].destination.resize(messages[i].payload.size());
    fabric.channel(1).recv(Tag{i}, messages[i].destination.data(), messages[i].destination.size(), recorder, i);
  }
  for (std::size_t i = 0; i < messages.size(); ++i) {
    fabric.channel(0).send(Tag{i}, messages[i].payload.data(), messages[i].payload.size(), recorder, i);
  }
  fabric.run();
  EXPECT_TRUE(fabric.violations.empty());
  for (std::size_t i = 0; i < messages.size(); ++i) {
    ASSERT_EQ(messages[i].recvs_completed, 1) << "message " << i << " never arrived (credits lost?)";
    ASSERT_EQ(messages[i].sends_completed, 1) << "message " << i;
    ASSERT_EQ(messages[i].payload, messages[i].destination);
  }
}

// ---- errors -------------------------------------------------------------------------------------

struct MismatchCase {
  const char* name;
  std::size_t bytes;
  bool receive_first;
};

class ProtocolMismatch : public ::testing::TestWithParam<MismatchCase> {};

TEST_P(ProtocolMismatch, MessageLargerThanReceiveFailsClearly) {
  const auto [name, bytes, receive_first] = GetParam();
  Fabric fabric(tight(), tight(), 9);
  std::vector<Message> messages(1);
  Recorder recorder(messages);
  auto payload = pattern(bytes, 1);
  std::vector<std::byte> small(10);
  if (receive_first) fabric.channel(1).recv(Tag{77}, small.data(), small.size(), recorder, 0);
  fabric.channel(0).send(Tag{77}, payload.data(), payload.size(), recorder, 0);
  fabric.run();
  if (!receive_first) {
    fabric.channel(1).recv(Tag{77}, small.data(), small.size(), recorder, 0);
    fabric.run();
  }
  ASSERT_EQ(fabric.end(1).failures.size(), 1u);
  EXPECT_NE(fabric.end(1).failures[0].find("message with tag 77 from rank 0 (fake) has " + std::to_string(bytes) +
                                           " bytes but the matching receive holds 10"),
            std::string::npos)
      << fabric.end(1).failures[0];
  EXPECT_EQ(messages[0].recvs_completed, 0);
  EXPECT_TRUE(fabric.violations.empty());
}

INSTANTIATE_TEST_SUITE_P(Paths, ProtocolMismatch,
                         ::testing::Values(MismatchCase{"eager_posted", 50, true},
                                           MismatchCase{"eager_staged", 50, false},
                                           MismatchCase{"rendezvous_posted", 5000, true},
                                           MismatchCase{"rendezvous_staged", 5000, false}),
                         [](const auto& test_info) { return std::string(test_info.param.name); });

TEST(Protocol, GarbageFromThePeerIsAProtocolViolation) {
  Fabric fabric(tight(), tight(), 3);
  // A message of an unknown kind, as a buggy peer might send, lands in receive buffer 0.
  std::memset(fabric.end(1).wire->recv_buffer(0), 0x5A, header_bytes());
  fabric.end(1).wire->recv_buffer(0)[4] = std::byte{0};  // no credits returned, so the kind is what is wrong
  for (int i = 5; i < 8; ++i) fabric.end(1).wire->recv_buffer(0)[i] = std::byte{0};
  fabric.channel(1).on_recv(0, header_bytes());
  ASSERT_EQ(fabric.end(1).failures.size(), 1u);
  EXPECT_NE(fabric.end(1).failures[0].find("protocol violation: rank 0 (fake) sent a message of unknown kind 90"),
            std::string::npos)
      << fabric.end(1).failures[0];
}

TEST(Protocol, ShortMessageIsAProtocolViolation) {
  Fabric fabric(tight(), tight(), 3);
  fabric.channel(1).on_recv(0, 3);
  ASSERT_EQ(fabric.end(1).failures.size(), 1u);
  EXPECT_NE(fabric.end(1).failures[0].find("sent a message of 3 bytes"), std::string::npos)
      << fabric.end(1).failures[0];
}

TEST(Protocol, UnknownRendezvousHandleIsAProtocolViolation) {
  Fabric fabric(tight(), tight(), 3);
  fabric.channel(1).on_recv_immediate(0, 12345);
  ASSERT_EQ(fabric.end(1).failures.size(), 1u);
  EXPECT_NE(fabric.end(1).failures[0].find("unknown rendezvous 12345"), std::string::npos) << fabric.end(1).failures[0];
}

TEST(Protocol, NothingCompletesAfterClose) {
  Fabric fabric(tight(), tight(), 5);
  std::vector<Message> messages(2);
  Recorder recorder(messages);
  auto small = pattern(10, 1);
  auto large = pattern(5000, 2);
  std::vector<std::byte> a(10), b(5000);
  fabric.channel(1).recv(Tag{1}, a.data(), a.size(), recorder, 0);
  fabric.channel(0).send(Tag{1}, small.data(), small.size(), recorder, 0);
  fabric.channel(0).send(Tag{2}, large.data(), large.size(), recorder, 1);
  fabric.channel(1).recv(Tag{2}, b.data(), b.size(), recorder, 1);
  fabric.channel(0).close();
  fabric.channel(1).close();
  fabric.run();
  for (const auto& m : messages) {
    EXPECT_EQ(m.sends_completed + m.recvs_completed, 0);
  }
  EXPECT_TRUE(fabric.end(0).failures.empty());
  EXPECT_TRUE(fabric.end(1).failures.empty());
}

TEST(Protocol, FailureIsReportedOnceAndStopsCompletions) {
  Fabric fabric(tight(), tight(), 5);
  std::vector<Message> messages(1);
  Recorder recorder(messages);
  auto data = pattern(10, 1);
  std::vector<std::byte> target(10);
  fabric.channel(1).recv(Tag{5}, target.data(), target.size(), recorder, 0);
  fabric.channel(1).fail("link lost");
  fabric.channel(1).fail("second error");
  fabric.channel(0).send(Tag{5}, data.data(), data.size(), recorder, 0);
  fabric.run();
  ASSERT_EQ(fabric.end(1).failures.size(), 1u);
  EXPECT_EQ(fabric.end(1).failures[0], "link lost");
  EXPECT_EQ(messages[0].recvs_completed, 0);
}

// ---- registration cache -------------------------------------------------------------------------

TEST(RegistrationCache, ReusesCoveringRegistrations) {
  Registrations fake;
  RegistrationCache cache([&](void* start, std::size_t bytes) { return fake.add(start, bytes); }, 1 << 20);
  std::vector<std::byte> buffer(64 * 1024);
  auto first = cache.acquire(buffer.data(), buffer.size());
  EXPECT_TRUE(fake.covers(first.rkey, buffer.data(), buffer.size()));
  auto inside = cache.acquire(buffer.data() + 100, 1000);  // lies inside the first
  EXPECT_EQ(inside.rkey, first.rkey);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(fake.registrations, 1);
  cache.release(first.id);
  cache.release(inside.id);
  EXPECT_EQ(cache.in_use(), 0u);
  auto again = cache.acquire(buffer.data(), buffer.size());  // cached although released
  EXPECT_EQ(again.rkey, first.rkey);
  EXPECT_EQ(fake.registrations, 1);
  cache.release(again.id);
}

TEST(RegistrationCache, EvictsLeastRecentlyUsedButNeverWhatIsInUse) {
  Registrations fake;
  const std::size_t page = 4096;
  RegistrationCache cache([&](void* start, std::size_t bytes) { return fake.add(start, bytes); }, 3 * page, 64);
  std::vector<std::byte> memory(16 * page);
  auto at = [&](int i) {
    return memory.data() +
           (reinterpret_cast<std::uintptr_t>(memory.data()) % page
                ? page - reinterpret_cast<std::uintptr_t>(memory.data()) % page
                : 0) +
           static_cast<std::size_t>(i) * 2 * page;
  };
  auto a = cache.acquire(at(0), 10);
  auto b = cache.acquire(at(1), 10);
  cache.release(a.id);
  cache.release(b.id);
  auto held = cache.acquire(at(2), 10);  // in use throughout
  auto c = cache.acquire(at(3), 10);     // over 3 pages: evicts a, the least recently used
  EXPECT_FALSE(fake.live.count(a.rkey));
  EXPECT_TRUE(fake.live.count(b.rkey));
  cache.release(c.id);
  auto d = cache.acquire(at(4), 10);  // evicts b, now the least recently used; `held` stays
  EXPECT_FALSE(fake.live.count(b.rkey));
  EXPECT_TRUE(fake.live.count(held.rkey));
  cache.release(held.id);
  cache.release(d.id);
  EXPECT_LE(fake.live.size(), 3u);
}

TEST(RegistrationCache, DisabledCacheDeregistersOnRelease) {
  Registrations fake;
  RegistrationCache cache([&](void* start, std::size_t bytes) { return fake.add(start, bytes); }, 0);
  std::vector<std::byte> buffer(10000);
  auto first = cache.acquire(buffer.data(), buffer.size());
  auto second = cache.acquire(buffer.data(), buffer.size());
  EXPECT_NE(first.rkey, second.rkey);  // no reuse
  cache.release(first.id);
  EXPECT_FALSE(fake.live.count(first.rkey));
  EXPECT_TRUE(fake.live.count(second.rkey));
  cache.release(second.id);
  EXPECT_TRUE(fake.live.empty());
  EXPECT_THROW(cache.release(second.id), Error);
}

}  // namespace
}  // namespace tnt::transport::ib
