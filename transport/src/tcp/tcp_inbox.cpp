#include "tcp_inbox.h"

#include <algorithm>
#include <cstring>

#include "tnt/core/copy.h"

namespace tnt::transport {

// Note [Buffered reads]: the TCP back end read each message with two reads, its 24-byte header
// and then its payload, each a system call and, where the data was not there yet, a round
// through the reactor. It now reads whatever the socket holds into an inbox of kInboxBytes and
// takes every whole message out of it, so a message of a few KiB, or a run of them, costs one
// read. A payload with more than kDirectBytes still to come once the inbox is empty is read
// straight into its destination (the receive, or the staging buffer of a message that came
// before its receive), filling it whole (Note [Whole transfers] in tcp_transport.cpp), so large
// messages are copied once, as before; the inbox is kept small so that the part of a payload
// that comes with its header, copied twice, stays small; after a message larger than the inbox
// only the next header is read, expecting another large one. Measured 2026-11-28, 2 ranks with
// TNT_SHM=0 on loopback, tnt-bench-p2p latency under chrt -f 10, 3 alternating rounds, medians:
// 8 bytes 6.50 -> 5.40 us, 4 KiB 6.95 -> 6.05, 8 KiB 9.95 -> 6.76, 16 KiB and 64 KiB unchanged
// (8.8, 23.4-23.6); an 8 KiB inbox gave 7.57 at 8 KiB. OpenMPI's tcp btl in the same half
// hour (bench/p2p/compare_osu.sh --tcp --realtime): 4.46 us at 8 bytes, 5.35 at 4 KiB.
namespace {
constexpr std::size_t kInboxBytes = 16 * 1024;
constexpr std::size_t kDirectBytes = 4 * 1024;
}  // namespace

TcpInbox::TcpInbox(std::string peer_name) : peer_name_(std::move(peer_name)), inbox_(kInboxBytes) {}

void TcpInbox::Current::make_room(std::size_t more) {
  if (receive || staging.size() - done >= more) return;
  const std::size_t want = std::max(done + more, 2 * staging.size());
  staging.resize(std::min<std::size_t>(want, header.bytes));
}

std::span<std::byte> TcpInbox::read_target(bool& whole) {
  reading_directly_ = current_ && begin_ == end_ && current_->header.bytes - current_->done > kDirectBytes;
  if (reading_directly_) {
    whole = true;
    current_->make_room(kInboxBytes);
    const std::size_t room = current_->receive ? current_->header.bytes : current_->staging.size();
    return {current_->destination() + current_->done, room - current_->done};
  }
  whole = false;
  // next() leaves less than a header unread, or nothing while a payload is being read: moving it
  // to the front is cheap, and the inbox then has room for a whole header at least.
  if (begin_ > 0) {
    std::memmove(inbox_.data(), inbox_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  // After a message too large for the inbox, expect another: read only up to its header, so that
  // its payload goes straight to its destination instead of through the inbox.
  if (!current_ && last_was_large_) return {inbox_.data() + end_, sizeof(TcpHeader) - end_};
  return {inbox_.data() + end_, inbox_.size() - end_};
}

void TcpInbox::on_read(std::size_t bytes) {
  if (reading_directly_) {
    current_->done += bytes;
  } else {
    end_ += bytes;
  }
}

std::optional<TcpInbox::Completion> TcpInbox::next() {
  while (violation_.empty()) {
    if (!current_) {
      if (end_ - begin_ < sizeof(TcpHeader)) return std::nullopt;
      TcpHeader header;
      std::memcpy(&header, inbox_.data() + begin_, sizeof header);
      begin_ += sizeof header;
      if (!start(header)) return std::nullopt;
      last_was_large_ = header.bytes > inbox_.size() - sizeof header;
    }
    Current& message = *current_;
    const std::size_t take = std::min(end_ - begin_, message.header.bytes - message.done);
    if (take) {
      message.make_room(take);
      copy_bytes(message.destination() + message.done, inbox_.data() + begin_, take);
      begin_ += take;
      message.done += take;
    }
    if (message.done < message.header.bytes) return std::nullopt;
    if (auto completed = finish()) return completed;
  }
  return std::nullopt;
}

bool TcpInbox::start(const TcpHeader& header) {
  if (header.bytes > kTcpMaxMessageBytes) {
    violation_ =
        "protocol violation: " + peer_name_ + " announced a message of " + std::to_string(header.bytes) + " bytes";
    return false;
  }
  const Tag tag = header.full_tag();
  auto posted = std::find_if(posted_.begin(), posted_.end(), [&](const Receive& r) { return r.tag == tag; });
  if (posted != posted_.end()) {
    const Receive receive = *posted;
    *posted = posted_.back();
    posted_.pop_back();
    if (header.bytes > receive.capacity) {
      fail_size(tag, header.bytes, receive.capacity);
      return false;
    }
    current_ = Current{header, receive, {}, 0};
    return true;
  }
  // Unexpected: the peer is ahead of us (e.g. it started a collective we have not issued yet).
  current_ = Current{header, std::nullopt, {}, 0};
  if (!spare_.empty()) {
    current_->staging = std::move(spare_.back());
    spare_.pop_back();
    current_->staging.resize(std::min<std::size_t>(current_->staging.size(), header.bytes));
  }
  return true;
}

std::optional<TcpInbox::Completion> TcpInbox::finish() {
  Current message = std::move(*current_);
  current_.reset();
  if (message.receive) return Completion{message.receive->sink, message.receive->cookie, message.header.bytes};
  const Tag tag = message.header.full_tag();
  staged_.push_back(Staged{tag, std::move(message.staging), message.header.bytes});
  // Its receive may have been posted while the payload was arriving.
  auto posted = std::find_if(posted_.begin(), posted_.end(), [&](const Receive& r) { return r.tag == tag; });
  if (posted == posted_.end()) return std::nullopt;
  const Receive receive = *posted;
  *posted = posted_.back();
  posted_.pop_back();
  return take_staged(staged_.size() - 1, receive);
}

std::optional<TcpInbox::Completion> TcpInbox::post(const Receive& receive) {
  for (std::size_t i = 0; i < staged_.size(); ++i) {
    if (staged_[i].tag == receive.tag) return take_staged(i, receive);
  }
  posted_.push_back(receive);
  return std::nullopt;
}

std::optional<TcpInbox::Completion> TcpInbox::take_staged(std::size_t index, const Receive& receive) {
  Staged staged = std::move(staged_[index]);
  staged_[index] = std::move(staged_.back());
  staged_.pop_back();
  if (staged.bytes > receive.capacity) {
    fail_size(receive.tag, staged.bytes, receive.capacity);
    return std::nullopt;
  }
  if (staged.bytes) copy_bytes(receive.data, staged.buffer.data(), staged.bytes);  // empty: data() may be null
  spare_.push_back(std::move(staged.buffer));
  return Completion{receive.sink, receive.cookie, staged.bytes};
}

void TcpInbox::fail_size(Tag tag, std::uint64_t bytes, std::size_t capacity) {
  violation_ = "protocol violation: message with tag " + to_string(tag) + " has " + std::to_string(bytes) +
               " bytes but the matching receive holds " + std::to_string(capacity) +
               " (do all ranks call the same collectives with the same counts, in the same order?)";
}

}  // namespace tnt::transport
