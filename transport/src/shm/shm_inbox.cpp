#include "shm_inbox.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

#include "tnt/core/copy.h"

namespace tnt::transport {

// Note [Staging as chunks come]: a message that comes before its receive (the peer is ahead of
// us, e.g. it started a collective we have not issued yet) is staged in a buffer that grows as
// its chunks come, doubling, to at most the message's length, so that a buggy header alone
// allocates nothing large (as on TCP, Note [Buffered reads] in tcp_inbox.cpp). A message of one
// chunk (at most 1 MiB) takes one allocation of its length, as it did when the header's length
// was allocated at once, and a staging buffer kept from an earlier message is reused as it is.
// Only a longer message that finds no spare buffer large enough (where Note [Single copy] is off;
// else such messages come as kShmReadMe) copies what it holds at each doubling: in all, less than
// its length once more.

ShmInbox::ShmInbox(std::string peer_name, std::span<const std::byte> ring)
    : peer_name_(std::move(peer_name)),
      ring_(ring.data()),
      ring_mask_(ring.size() - 1),
      max_chunk_(shm_max_chunk(ring.size())) {
  if (!std::has_single_bit(ring.size()) || ring.size() < 4 * sizeof(ShmChunkHeader)) {
    throw std::logic_error("ShmInbox: the ring's length must be a power of two of at least 128 bytes");
  }
}

void ShmInbox::copy_out(std::uint64_t position, void* to, std::size_t bytes) const {
  if (bytes == 0) return;
  const std::size_t at = position & ring_mask_;
  const std::size_t first = std::min<std::size_t>(bytes, ring_mask_ + 1 - at);
  copy_bytes(to, ring_ + at, first);
  copy_bytes(static_cast<std::byte*>(to) + first, ring_, bytes - first);
}

bool ShmInbox::take(std::uint64_t head, std::optional<Event>& event) {
  event.reset();
  if (!violation_.empty()) return false;
  const std::uint64_t available = head - tail_;
  if (available == 0) return false;
  if (available > ring_mask_ + 1) {
    // A head behind the tail wraps around to a huge count as well.
    fail("protocol violation: " + peer_name_ + " published a ring head " + std::to_string(head) +
         " that is not within the ring's " + std::to_string(ring_mask_ + 1) + " bytes after its tail " +
         std::to_string(tail_));
    return false;
  }
  ShmChunkHeader header{};
  if (available < sizeof header) {
    fail("protocol violation: " + peer_name_ + " published a partial chunk header");
    return false;
  }
  // The header is checked in this copy: the peer may change the ring under us.
  copy_out(tail_, &header, sizeof header);
  if (header.chunk_bytes > max_chunk_ || header.message_bytes > kShmMaxMessageBytes ||
      available < sizeof header + header.chunk_bytes) {
    fail("protocol violation: " + peer_name_ + " published a malformed chunk");
    return false;
  }
  if (header.kind != kShmData) return take_control(header, event);
  if (!arriving_ && !begin(header)) return false;
  Arriving& message = *arriving_;
  if (header.full_tag() != message.tag || header.message_bytes != message.bytes ||
      message.received + header.chunk_bytes > message.bytes) {
    fail("protocol violation: " + peer_name_ + " interleaved two messages");
    return false;
  }
  const std::size_t needed = message.received + header.chunk_bytes;
  if (!message.receive && message.staging.size() < needed) {
    message.staging.resize(std::min(std::max(needed, 2 * message.staging.size()), message.bytes));
  }
  copy_out(tail_ + sizeof header, message.destination() + message.received, header.chunk_bytes);
  message.received = needed;
  tail_ += sizeof header + header.chunk_bytes;
  if (message.received == message.bytes) event = finish();
  return true;
}

// A kShmReadMe or kShmReadDone chunk (Note [Single copy]).
bool ShmInbox::take_control(const ShmChunkHeader& header, std::optional<Event>& event) {
  ShmReadMe where{};
  const std::size_t payload = header.kind == kShmReadMe ? sizeof where : sizeof where.id;
  if (arriving_ || (header.kind != kShmReadMe && header.kind != kShmReadDone) || header.chunk_bytes != payload) {
    fail("protocol violation: " + peer_name_ + " published a malformed control chunk");
    return false;
  }
  copy_out(tail_ + sizeof header, header.kind == kShmReadMe ? static_cast<void*>(&where) : &where.id, payload);
  tail_ += sizeof header + payload;
  if (header.kind == kShmReadDone) {
    auto sent = std::find_if(awaiting_read_.begin(), awaiting_read_.end(),
                             [&](const AwaitingRead& a) { return a.id == where.id; });
    if (sent == awaiting_read_.end()) {
      fail("protocol violation: " + peer_name_ + " reported reading a message that was never offered");
      return false;
    }
    event = Event{Event::kSendDone, sent->sink, sent->cookie};
    awaiting_read_.erase(sent);
    return true;
  }
  const Tag tag = header.full_tag();
  const auto receive = take_posted(tag);
  if (!receive) {  // the peer is ahead of us: read it once the receive is posted
    staged_.push_back(Staged{tag, {}, header.message_bytes, where});
    return true;
  }
  if (header.message_bytes > receive->capacity) {
    fail_size(tag, header.message_bytes, receive->capacity);
    return false;
  }
  event = Event{Event::kReadRemote, receive->sink, receive->cookie, header.message_bytes, receive->data, where};
  return true;
}

bool ShmInbox::begin(const ShmChunkHeader& header) {
  const Tag tag = header.full_tag();
  Arriving message{tag, header.message_bytes, 0, take_posted(tag), {}};
  if (message.receive) {
    if (header.message_bytes > message.receive->capacity) {
      fail_size(tag, header.message_bytes, message.receive->capacity);
      return false;
    }
  } else if (!spare_.empty()) {  // Note [Staging as chunks come]
    message.staging = std::move(spare_.back());
    spare_.pop_back();
  }
  arriving_ = std::move(message);
  return true;
}

std::optional<ShmInbox::Event> ShmInbox::finish() {
  Arriving message = std::move(*arriving_);
  arriving_.reset();
  if (message.receive) return Event{Event::kReceived, message.receive->sink, message.receive->cookie, message.bytes};
  staged_.push_back(Staged{message.tag, std::move(message.staging), message.bytes, std::nullopt});
  // Its receive may have been posted while the chunks were arriving.
  const auto receive = take_posted(message.tag);
  if (!receive) return std::nullopt;
  return take_staged(staged_.size() - 1, *receive);
}

std::optional<ShmInbox::Event> ShmInbox::post(const Receive& receive) {
  if (!violation_.empty()) return std::nullopt;
  for (std::size_t i = 0; i < staged_.size(); ++i) {
    if (staged_[i].tag == receive.tag) return take_staged(i, receive);
  }
  posted_.push_back(receive);
  return std::nullopt;
}

void ShmInbox::await_read_done(std::uint64_t id, CompletionSink* sink, std::uint64_t cookie) {
  awaiting_read_.push_back(AwaitingRead{id, sink, cookie});
}

std::optional<ShmInbox::Receive> ShmInbox::take_posted(Tag tag) {
  auto posted = std::find_if(posted_.begin(), posted_.end(), [&](const Receive& r) { return r.tag == tag; });
  if (posted == posted_.end()) return std::nullopt;
  const Receive receive = *posted;
  *posted = posted_.back();
  posted_.pop_back();
  return receive;
}

std::optional<ShmInbox::Event> ShmInbox::take_staged(std::size_t index, const Receive& receive) {
  Staged staged = std::move(staged_[index]);
  staged_[index] = std::move(staged_.back());
  staged_.pop_back();
  if (staged.bytes > receive.capacity) {
    fail_size(receive.tag, staged.bytes, receive.capacity);
    return std::nullopt;
  }
  if (staged.remote) {
    return Event{Event::kReadRemote, receive.sink, receive.cookie, staged.bytes, receive.data, *staged.remote};
  }
  if (staged.bytes) copy_bytes(receive.data, staged.buffer.data(), staged.bytes);  // empty: data() may be null
  spare_.push_back(std::move(staged.buffer));
  return Event{Event::kReceived, receive.sink, receive.cookie, staged.bytes};
}

void ShmInbox::fail(const std::string& what) {
  if (violation_.empty()) violation_ = what;
}

void ShmInbox::fail_size(Tag tag, std::uint64_t bytes, std::size_t capacity) {
  fail("protocol violation: message with tag " + to_string(tag) + " has " + std::to_string(bytes) +
       " bytes but the matching receive holds " + std::to_string(capacity) +
       " (do all ranks call the same collectives with the same counts, in the same order?)");
}

}  // namespace tnt::transport
