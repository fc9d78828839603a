#include "protocol.h"

#include <algorithm>
#include <cstring>

#include "tnt/core/error.h"

namespace tnt::transport::ib {

enum class MessageKind : std::uint8_t { eager = 1, rts = 2, cts = 3, credit = 4 };

// Sits at the start of every SEND. Both ends run the same build on the same architecture (the
// rendezvous checks the protocol version), so it travels in host byte order like the TCP header.
struct WireHeader {
  MessageKind kind;
  std::uint8_t reserved[3];
  std::uint32_t credits;      // receive buffers the sender has reposted since its last message
  std::uint64_t tag;          // eager, rts
  std::uint64_t bytes;        // eager, rts: payload size
  std::uint64_t address;      // cts: where to write
  std::uint32_t rkey;         // cts
  std::uint32_t send_handle;  // rts, cts: the sender's rendezvous handle
  std::uint32_t recv_handle;  // cts: the receiver's rendezvous handle, comes back as the immediate
  std::uint32_t context;      // eager, rts: the tag's context (Note [Contexts] in pair.h)
  Tag full_tag() const { return Tag{tag, context}; }
};
static_assert(sizeof(WireHeader) == 48);

std::size_t header_bytes() { return sizeof(WireHeader); }
std::size_t slot_bytes(std::size_t eager_limit) { return sizeof(WireHeader) + eager_limit; }

namespace {

// Send-side work request ids: kind in the high half, a slot or handle in the low half.
enum class WorkKind : std::uint64_t { send_slot = 1, write_part = 2, write_last = 3 };
std::uint64_t work_id(WorkKind kind, std::uint32_t value) { return static_cast<std::uint64_t>(kind) << 32 | value; }

}  // namespace

Channel::Channel(int peer_rank, std::string peer_name, const ChannelConfig& config, Wire& wire, MemoryRegistry& memory,
                 Defer defer, FailureHandler on_failure)
    : peer_(peer_rank),
      peer_name_(std::move(peer_name)),
      config_(config),
      send_eager_limit_(std::min(config.eager_limit, config.peer_eager_limit)),
      wire_(wire),
      memory_(memory),
      defer_(std::move(defer)),
      on_failure_(std::move(on_failure)),
      credits_(config.peer_recv_slots) {
  if (config_.recv_slots < 4 || config_.peer_recv_slots < 4 || config_.send_slots < 1 || config_.send_queue_depth < 2) {
    throw ConfigError("InfiniBand channel to " + peer_name_ + ": needs at least 4 receive buffers on each side");
  }
  send_slot_use_.resize(config_.send_slots);
  for (std::uint32_t slot = config_.send_slots; slot-- > 0;) free_send_slots_.push_back(slot);
}

Channel::~Channel() {
  // Registrations of operations that never finished (the job failed or ended).
  for (auto& send : rendezvous_sends_) {
    if (send.active) memory_.release(send.memory.id);
  }
  for (auto& receive : rendezvous_recvs_) {
    if (receive.active) memory_.release(receive.memory.id);
  }
}

template <class Table>
std::uint32_t Channel::allocate(Table& table, std::vector<std::uint32_t>& free_list) {
  if (!free_list.empty()) {
    const std::uint32_t handle = free_list.back();
    free_list.pop_back();
    return handle;
  }
  table.emplace_back();
  return static_cast<std::uint32_t>(table.size() - 1);
}

void Channel::post_all_receives() {
  for (std::uint32_t slot = 0; slot < config_.recv_slots; ++slot) wire_.post_recv(slot);
}

// ---- sending ------------------------------------------------------------------------------------

void Channel::send(Tag tag, const void* data, std::size_t bytes, CompletionSink& sink, std::uint64_t cookie) {
  if (failed_) return;
  const auto* source = static_cast<const std::byte*>(data);
  try {
    if (bytes <= send_eager_limit_) {
      queue_.push_back(Item{ItemKind::eager, tag, source, bytes, &sink, cookie});
    } else {
      const std::uint32_t handle = allocate(rendezvous_sends_, free_send_handles_);
      RendezvousSend& entry = rendezvous_sends_[handle];
      entry = RendezvousSend{true, false, tag, source, bytes, &sink, cookie, memory_.acquire(source, bytes)};
      Item item{ItemKind::rts, tag};
      item.bytes = bytes;
      item.handle = handle;
      queue_.push_back(item);
    }
    flush();
  } catch (const std::exception& error) {
    fail("sending to " + peer_name_ + " failed: " + error.what());
  }
}

void Channel::flush() {
  while (!queue_.empty() && !failed_) {
    if (!post_item(queue_.front())) break;
    queue_.pop_front();
  }
  maybe_return_credits();
}

bool Channel::post_item(Item& item) {
  // The last credit is kept for a CREDIT message (Note [IB protocol]).
  if (credits_ < 2 || send_queue_used_ >= config_.send_queue_depth) return false;
  if (item.kind == ItemKind::write) {
    // All parts but the last are plain writes that need no credit, only send-queue room.
    while (item.bytes - item.written > config_.max_write_bytes) {
      if (send_queue_used_ + 1 >= config_.send_queue_depth) return false;  // leave room for the last
      WriteRequest part{item.data + item.written,
                        config_.max_write_bytes,
                        rendezvous_sends_[item.handle].memory.lkey,
                        item.address + item.written,
                        item.rkey,
                        false,
                        0,
                        work_id(WorkKind::write_part, item.handle)};
      wire_.post_write(part);
      ++send_queue_used_;
      item.written += config_.max_write_bytes;
    }
    WriteRequest last{item.data + item.written,
                      item.bytes - item.written,
                      rendezvous_sends_[item.handle].memory.lkey,
                      item.address + item.written,
                      item.rkey,
                      true,
                      item.peer_handle,
                      work_id(WorkKind::write_last, item.handle)};
    wire_.post_write(last);
    ++send_queue_used_;
    --credits_;
    return true;
  }
  if (free_send_slots_.empty()) return false;
  const std::uint32_t slot = free_send_slots_.back();
  free_send_slots_.pop_back();
  WireHeader header{};
  std::size_t payload = 0;
  switch (item.kind) {
    case ItemKind::eager:
      header.kind = MessageKind::eager;
      header.tag = item.tag.value;
      header.context = item.tag.context;
      header.bytes = item.bytes;
      payload = item.bytes;
      if (payload) std::memcpy(wire_.send_buffer(slot) + sizeof(WireHeader), item.data, payload);
      send_slot_use_[slot] = SendSlotUse{item.sink, item.cookie};
      break;
    case ItemKind::rts:
      header.kind = MessageKind::rts;
      header.tag = item.tag.value;
      header.context = item.tag.context;
      header.bytes = item.bytes;
      header.send_handle = item.handle;
      break;
    case ItemKind::cts:
      header.kind = MessageKind::cts;
      header.address = item.address;
      header.rkey = item.rkey;
      header.send_handle = item.handle;
      header.recv_handle = item.peer_handle;
      break;
    case ItemKind::write: break;  // handled above
  }
  post_control(slot, header, payload);
  return true;
}

void Channel::post_control(std::uint32_t slot, const WireHeader& header, std::size_t payload_bytes) {
  WireHeader stamped = header;
  stamped.credits = credits_owed_;  // every SEND returns what we owe
  credits_owed_ = 0;
  owed_for_messages_ = 0;
  std::memcpy(wire_.send_buffer(slot), &stamped, sizeof(WireHeader));
  --credits_;
  ++send_queue_used_;
  wire_.post_send(slot, sizeof(WireHeader) + payload_bytes, work_id(WorkKind::send_slot, slot));
}

void Channel::maybe_return_credits() {
  if (failed_ || credits_owed_ == 0) return;
  // Due when a quarter of our buffers were used by real messages, or when the peer may be down
  // to the credit it keeps for CREDIT messages. Buffers used by CREDIT messages alone do not
  // make a CREDIT due otherwise: two idle sides would pass CREDITs back and forth for ever.
  const bool due = owed_for_messages_ >= std::max<std::uint32_t>(1, config_.recv_slots / 4) ||
                   credits_owed_ + 2 > config_.recv_slots;
  if (!due) return;
  if (credits_ < 1 || free_send_slots_.empty() || send_queue_used_ >= config_.send_queue_depth)
    return;  // retried on the next completion
  const std::uint32_t slot = free_send_slots_.back();
  free_send_slots_.pop_back();
  send_slot_use_[slot] = SendSlotUse{};
  WireHeader header{};
  header.kind = MessageKind::credit;
  post_control(slot, header, 0);
}

void Channel::on_send_done(std::uint64_t wr_id) {
  if (failed_) return;
  --send_queue_used_;
  const auto kind = static_cast<WorkKind>(wr_id >> 32);
  const auto value = static_cast<std::uint32_t>(wr_id);
  CompletionSink* sink = nullptr;
  std::uint64_t cookie = 0;
  try {
    if (kind == WorkKind::send_slot && value < config_.send_slots) {
      sink = send_slot_use_[value].sink;
      cookie = send_slot_use_[value].cookie;
      send_slot_use_[value] = SendSlotUse{};
      free_send_slots_.push_back(value);
    } else if (kind == WorkKind::write_last && value < rendezvous_sends_.size() && rendezvous_sends_[value].active) {
      RendezvousSend& entry = rendezvous_sends_[value];
      sink = entry.sink;
      cookie = entry.cookie;
      memory_.release(entry.memory.id);
      entry = RendezvousSend{};
      free_send_handles_.push_back(value);
    } else if (kind != WorkKind::write_part) {
      fail("internal error: unknown send completion " + std::to_string(wr_id) + " on the channel to " + peer_name_);
      return;
    }
    flush();
  } catch (const std::exception& error) {
    fail("sending to " + peer_name_ + " failed: " + error.what());
    return;
  }
  // Last: the sink may post more work on this channel.
  if (sink && !failed_) sink->on_send_complete(cookie);
}

// ---- receiving ----------------------------------------------------------------------------------

void Channel::recv(Tag tag, void* data, std::size_t capacity, CompletionSink& sink, std::uint64_t cookie) {
  if (failed_) return;
  auto* destination = static_cast<std::byte*>(data);
  // A message that came before its receive was posted waits in a staging buffer.
  auto staged = std::find_if(staged_.begin(), staged_.end(), [&](const StagedEager& s) { return s.tag == tag; });
  if (staged != staged_.end()) {
    StagedEager message = std::move(*staged);
    *staged = std::move(staged_.back());
    staged_.pop_back();
    if (message.bytes > capacity) {
      fail_size(tag, message.bytes, capacity);
      return;
    }
    if (message.bytes) std::memcpy(destination, message.payload.data(), message.bytes);
    spare_.push_back(std::move(message.payload));
    // Complete later, never inside the caller's own call (it may hold state mid-update).
    defer_([this, &sink, cookie, bytes = message.bytes] {
      if (!failed_) sink.on_recv_complete(cookie, bytes);
    });
    return;
  }
  auto rts = std::find_if(staged_rts_.begin(), staged_rts_.end(), [&](const StagedRts& s) { return s.tag == tag; });
  if (rts != staged_rts_.end()) {
    const StagedRts request = *rts;
    *rts = staged_rts_.back();
    staged_rts_.pop_back();
    start_rendezvous_recv(tag, destination, capacity, request.bytes, request.send_handle, sink, cookie);
    return;
  }
  posted_.push_back(PostedRecv{tag, destination, capacity, &sink, cookie});
}

void Channel::start_rendezvous_recv(Tag tag, std::byte* data, std::size_t capacity, std::size_t bytes,
                                    std::uint32_t send_handle, CompletionSink& sink, std::uint64_t cookie) {
  if (bytes > capacity) {
    fail_size(tag, bytes, capacity);
    return;
  }
  try {
    const std::uint32_t handle = allocate(rendezvous_recvs_, free_recv_handles_);
    rendezvous_recvs_[handle] = RendezvousRecv{true, bytes, &sink, cookie, memory_.acquire(data, bytes)};
    Item item{ItemKind::cts};
    item.handle = send_handle;
    item.address = reinterpret_cast<std::uint64_t>(data);
    item.rkey = rendezvous_recvs_[handle].memory.rkey;
    item.peer_handle = handle;
    queue_.push_back(item);
    flush();
  } catch (const std::exception& error) {
    fail("receiving from " + peer_name_ + " failed: " + error.what());
  }
}

void Channel::repost(std::uint32_t slot, bool for_message) {
  wire_.post_recv(slot);
  ++credits_owed_;
  if (for_message) ++owed_for_messages_;
}

void Channel::on_recv(std::uint32_t slot, std::size_t bytes) {
  if (failed_) return;
  if (slot >= config_.recv_slots || bytes < sizeof(WireHeader)) {
    fail("protocol violation: " + peer_name_ + " sent a message of " + std::to_string(bytes) + " bytes into buffer " +
         std::to_string(slot));
    return;
  }
  WireHeader header;
  std::memcpy(&header, wire_.recv_buffer(slot), sizeof(WireHeader));
  if (header.credits > config_.peer_recv_slots - credits_) {
    fail("protocol violation: " + peer_name_ + " returned " + std::to_string(header.credits) + " credits but only " +
         std::to_string(config_.peer_recv_slots - credits_) + " were outstanding");
    return;
  }
  credits_ += header.credits;
  Completion completed;  // a receive completed by this message
  try {
    bool handled = false;
    switch (header.kind) {
      case MessageKind::eager: handled = on_eager(slot, header, bytes, completed); break;
      case MessageKind::rts: handled = on_rts(slot, header); break;
      case MessageKind::cts: handled = on_cts(slot, header); break;
      case MessageKind::credit:
        repost(slot, false);
        handled = true;
        break;
      default:
        fail("protocol violation: " + peer_name_ + " sent a message of unknown kind " +
             std::to_string(static_cast<int>(header.kind)));
    }
    if (!handled) return;
    flush();
  } catch (const std::exception& error) {
    fail("receiving from " + peer_name_ + " failed: " + error.what());
    return;
  }
  if (completed.sink && !failed_) completed.sink->on_recv_complete(completed.cookie, completed.bytes);
}

std::optional<Channel::PostedRecv> Channel::take_posted(Tag tag) {
  auto posted = std::find_if(posted_.begin(), posted_.end(), [&](const PostedRecv& r) { return r.tag == tag; });
  if (posted == posted_.end()) return std::nullopt;
  const PostedRecv target = *posted;
  *posted = posted_.back();
  posted_.pop_back();
  return target;
}

bool Channel::on_eager(std::uint32_t slot, const WireHeader& header, std::size_t bytes, Completion& completed) {
  if (header.bytes != bytes - sizeof(WireHeader) || header.bytes > config_.eager_limit) {
    fail("protocol violation: " + peer_name_ + " sent an eager message of " + std::to_string(bytes) +
         " bytes announcing " + std::to_string(header.bytes));
    return false;
  }
  const std::byte* payload = wire_.recv_buffer(slot) + sizeof(WireHeader);
  if (const auto target = take_posted(header.full_tag())) {
    if (header.bytes > target->capacity) {
      fail_size(header.full_tag(), header.bytes, target->capacity);
      return false;
    }
    if (header.bytes) std::memcpy(target->data, payload, header.bytes);
    completed = Completion{target->sink, target->cookie, header.bytes};
  } else {
    // Unexpected: the peer is ahead of us (e.g. it started a collective we have not issued yet).
    std::vector<std::byte> copy;
    if (!spare_.empty()) {
      copy = std::move(spare_.back());
      spare_.pop_back();
    }
    if (copy.size() < header.bytes) copy.resize(header.bytes);
    if (header.bytes) std::memcpy(copy.data(), payload, header.bytes);
    staged_.push_back(StagedEager{header.full_tag(), std::move(copy), header.bytes});
  }
  repost(slot, true);
  return true;
}

bool Channel::on_rts(std::uint32_t slot, const WireHeader& header) {
  if (header.bytes <= std::min(config_.eager_limit, config_.peer_eager_limit)) {
    fail("protocol violation: " + peer_name_ + " asked for a rendezvous of only " + std::to_string(header.bytes) +
         " bytes");
    return false;
  }
  repost(slot, true);
  if (const auto target = take_posted(header.full_tag())) {
    start_rendezvous_recv(header.full_tag(), target->data, target->capacity, header.bytes, header.send_handle,
                          *target->sink, target->cookie);
  } else {
    staged_rts_.push_back(StagedRts{header.full_tag(), header.bytes, header.send_handle});
  }
  return true;
}

bool Channel::on_cts(std::uint32_t slot, const WireHeader& header) {
  const std::uint32_t handle = header.send_handle;
  if (handle >= rendezvous_sends_.size() || !rendezvous_sends_[handle].active || rendezvous_sends_[handle].cts_seen) {
    fail("protocol violation: " + peer_name_ + " sent a clear-to-send for unknown rendezvous " +
         std::to_string(handle));
    return false;
  }
  RendezvousSend& entry = rendezvous_sends_[handle];
  entry.cts_seen = true;
  Item item{ItemKind::write, entry.tag, entry.data, entry.bytes};
  item.handle = handle;
  item.address = header.address;
  item.rkey = header.rkey;
  item.peer_handle = header.recv_handle;
  queue_.push_back(item);
  repost(slot, true);
  return true;
}

void Channel::on_recv_immediate(std::uint32_t slot, std::uint32_t immediate) {
  if (failed_) return;
  if (slot >= config_.recv_slots || immediate >= rendezvous_recvs_.size() || !rendezvous_recvs_[immediate].active) {
    fail("protocol violation: " + peer_name_ + " completed a write for unknown rendezvous " +
         std::to_string(immediate));
    return;
  }
  RendezvousRecv done = rendezvous_recvs_[immediate];
  rendezvous_recvs_[immediate] = RendezvousRecv{};
  free_recv_handles_.push_back(immediate);
  try {
    memory_.release(done.memory.id);
    repost(slot, true);
    flush();
  } catch (const std::exception& error) {
    fail("receiving from " + peer_name_ + " failed: " + error.what());
    return;
  }
  if (!failed_) done.sink->on_recv_complete(done.cookie, done.bytes);
}

// ---- failure ------------------------------------------------------------------------------------

void Channel::fail_size(Tag tag, std::size_t bytes, std::size_t capacity) {
  fail("protocol violation: message with tag " + to_string(tag) + " from " + peer_name_ + " has " +
       std::to_string(bytes) + " bytes but the matching receive holds " + std::to_string(capacity) +
       " (do all ranks call the same collectives with the same counts, in the same order?)");
}

void Channel::fail(const std::string& what) {
  if (failed_) return;
  failed_ = true;
  if (closed_) return;
  if (on_failure_) on_failure_(what);
}

void Channel::close() {
  closed_ = true;
  failed_ = true;
}

}  // namespace tnt::transport::ib
