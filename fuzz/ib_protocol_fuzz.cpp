// The InfiniBand back end's protocol (transport/src/ib/protocol.cpp) against a hostile peer: one
// Channel, whose queue pair is a fake, receives whatever SENDs and write completions the input
// describes, interleaved with local sends, receives, send completions and deferred tasks.
// The fake checks what a queue pair would: SENDs fit a bounce buffer, the send queue does not
// overflow, RDMA writes read only registered memory; and that completions come once each and
// that a receive never completes with more bytes than its buffer holds.
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "fuzz_support.h"
#include "ib/protocol.h"
#include "tnt/core/error.h"

using namespace tnt::transport;
using namespace tnt::transport::ib;
using tnt::fuzz::violated;

namespace {

ChannelConfig small_config() {
  ChannelConfig c;
  c.recv_slots = 4;
  c.send_slots = 2;
  c.send_queue_depth = 4;
  c.eager_limit = 64;
  c.peer_recv_slots = 4;
  c.peer_eager_limit = 64;
  c.max_write_bytes = 1000;
  return c;
}

class Memory final : public MemoryRegistry {
 public:
  Handle acquire(const void* data, std::size_t bytes) override {
    const Handle handle{next_key_, next_key_ + 1, next_id_++};
    next_key_ += 2;
    live_[handle.id] = {reinterpret_cast<std::uintptr_t>(data), bytes, handle.lkey};
    return handle;
  }
  void release(std::uint64_t id) override {
    if (!live_.erase(id)) violated("release of memory that is not registered");
  }
  bool covers(std::uint32_t lkey, const void* data, std::size_t bytes) const {
    const auto begin = reinterpret_cast<std::uintptr_t>(data);
    for (const auto& [id, region] : live_) {
      if (region.lkey == lkey && region.begin <= begin && begin + bytes <= region.begin + region.bytes) return true;
    }
    return false;
  }

 private:
  struct Region {
    std::uintptr_t begin;
    std::size_t bytes;
    std::uint32_t lkey;
  };
  std::map<std::uint64_t, Region> live_;
  std::uint32_t next_key_ = 100;
  std::uint64_t next_id_ = 1;
};

class FakeWire final : public Wire {
 public:
  explicit FakeWire(const ChannelConfig& config, const Memory& memory)
      : config_(config),
        memory_(memory),
        slot_(slot_bytes(config.eager_limit)),
        recv_(config.recv_slots * slot_),
        send_(config.send_slots * slot_bytes(config.peer_eager_limit)) {}

  std::byte* recv_buffer(std::uint32_t slot) override { return recv_.data() + slot * slot_; }
  std::byte* send_buffer(std::uint32_t slot) override {
    return send_.data() + slot * slot_bytes(config_.peer_eager_limit);
  }
  void post_recv(std::uint32_t slot) override {
    if (slot >= config_.recv_slots) violated("receive buffer out of range");
    posted.push_back(slot);
  }
  void post_send(std::uint32_t slot, std::size_t bytes, std::uint64_t wr_id) override {
    if (slot >= config_.send_slots || bytes > slot_bytes(config_.peer_eager_limit))
      violated("SEND outside a bounce buffer");
    queue(wr_id);
  }
  void post_write(const WriteRequest& request) override {
    if (!memory_.covers(request.lkey, request.local, request.bytes))
      violated("RDMA WRITE from memory outside its registration");
    queue(request.wr_id);
  }

  std::deque<std::uint32_t> posted;         // receive buffers, consumed in order
  std::deque<std::uint64_t> send_requests;  // complete in order

 private:
  void queue(std::uint64_t wr_id) {
    if (send_requests.size() >= config_.send_queue_depth) violated("send queue overflow");
    send_requests.push_back(wr_id);
  }
  ChannelConfig config_;
  const Memory& memory_;
  std::size_t slot_;
  std::vector<std::byte> recv_;
  std::vector<std::byte> send_;
};

// Local operations' buffers and how often each completed.
class Operations final : public CompletionSink {
 public:
  struct Op {
    std::vector<std::byte> buffer;
    bool is_recv;
    int completions = 0;
  };
  std::uint64_t add(std::size_t bytes, bool is_recv) {
    ops_.push_back(std::make_unique<Op>(Op{std::vector<std::byte>(bytes, std::byte{0x5a}), is_recv}));
    return ops_.size() - 1;
  }
  Op& op(std::uint64_t cookie) { return *ops_[cookie]; }
  void on_send_complete(std::uint64_t cookie) override { complete(cookie, false); }
  void on_recv_complete(std::uint64_t cookie, std::size_t bytes) override {
    complete(cookie, true);
    if (bytes > ops_[cookie]->buffer.size()) violated("a receive completed with more bytes than its buffer");
  }

 private:
  void complete(std::uint64_t cookie, bool is_recv) {
    if (cookie >= ops_.size() || ops_[cookie]->is_recv != is_recv) violated("completion of an unknown operation");
    if (++ops_[cookie]->completions > 1) violated("an operation completed twice");
  }
  std::vector<std::unique_ptr<Op>> ops_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  const ChannelConfig config = small_config();
  Memory memory;
  FakeWire wire(config, memory);
  Operations operations;
  std::deque<std::function<void()>> deferred;
  bool failed = false;
  Channel channel(
      1, "rank 1 (fuzz)", config, wire, memory,
      [&](std::function<void()> task) { deferred.push_back(std::move(task)); },
      [&](const std::string&) { failed = true; });
  channel.post_all_receives();
  const std::size_t slot = slot_bytes(config.eager_limit);
  for (int steps = 0; steps < 64 && input.remaining_bytes() > 0; ++steps) {
    switch (input.ConsumeIntegralInRange(0, 5)) {
      case 0: {  // the peer SENDs into the next posted receive buffer
        if (wire.posted.empty()) break;
        const std::uint32_t target = wire.posted.front();
        wire.posted.pop_front();
        const auto bytes = input.ConsumeBytes<std::uint8_t>(input.ConsumeIntegralInRange<std::size_t>(0, slot));
        if (!bytes.empty()) std::memcpy(wire.recv_buffer(target), bytes.data(), bytes.size());
        channel.on_recv(target, bytes.size());
        break;
      }
      case 1: {  // the peer's WRITE WITH IMMEDIATE completes
        if (wire.posted.empty()) break;
        const std::uint32_t target = wire.posted.front();
        wire.posted.pop_front();
        channel.on_recv_immediate(target, input.ConsumeIntegral<std::uint32_t>());
        break;
      }
      case 2: {  // a local receive
        const auto tag = input.ConsumeIntegralInRange<std::uint64_t>(0, 3);
        const auto cookie = operations.add(input.ConsumeIntegralInRange<std::size_t>(0, 3000), true);
        auto& op = operations.op(cookie);
        channel.recv(tnt::transport::Tag{tag}, op.buffer.data(), op.buffer.size(), operations, cookie);
        break;
      }
      case 3: {  // a local send
        const auto tag = input.ConsumeIntegralInRange<std::uint64_t>(0, 3);
        const auto cookie = operations.add(input.ConsumeIntegralInRange<std::size_t>(0, 3000), false);
        auto& op = operations.op(cookie);
        channel.send(tnt::transport::Tag{tag}, op.buffer.data(), op.buffer.size(), operations, cookie);
        break;
      }
      case 4:  // the oldest send-side work request completes
        if (!wire.send_requests.empty()) {
          const auto wr_id = wire.send_requests.front();
          wire.send_requests.pop_front();
          channel.on_send_done(wr_id);
        }
        break;
      case 5:  // the strand runs what was deferred
        while (!deferred.empty()) {
          auto task = std::move(deferred.front());
          deferred.pop_front();
          task();
        }
        break;
    }
  }
  (void)failed;
  channel.close();
  return 0;
}
