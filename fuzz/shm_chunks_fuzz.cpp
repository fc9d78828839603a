// The shared-memory back end's reading side (transport/src/shm/shm_inbox.cpp, Note
// [Shared-memory chunks]) against any ring contents and any head, as the other process could
// leave them, with receives posted and single-copy sends offered in between. The ring has 4 KiB
// (chunks of at most 1 KiB), so that messages wrap and span chunks. The input is a run of steps,
// each a byte choosing it:
//   0  a message: a tag (0-7, context 0-1) and a length of up to 6000, as kShmData chunks of a
//      chosen size (1-1024 bytes), byte i of the payload (tag * 31 + i) mod 251, queued for the
//      writer;
//   1  raw bytes from the input queued as they are (garbage, truncated headers, bad kinds);
//   2  the writer writes whatever queued chunks fit the ring's free room, publishes its head,
//      and the reader takes every chunk up to it;
//   3  a receive is posted: a tag as in 0 and a capacity of up to 6000;
//   4  a kShmReadMe chunk for a message of a tag and a length as in 0 (Note [Single copy]);
//   5  a kShmReadDone chunk: for a send offered with await_read_done, or for any id;
//   6  the head moves without a write, or jumps to any count (head and tail inconsistent).
// Checked: no read or copy past a buffer (ASan); the tail never passes the head; each receive and
// each offered send completes at most once, a receive with no more bytes than it holds; a
// violation names the peer (or the tag and both lengths) and stops the inbox for good; while only
// well-formed chunks came, every completed receive holds its own payload, the only violation is a
// message larger than its receive, and once everything is published every tag has completed as
// many receives as it had both messages and receives.
#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "fuzz_support.h"
#include "shm/shm_inbox.h"

using namespace tnt::transport;
using tnt::fuzz::violated;

namespace {

constexpr std::size_t kRingBytes = 4096;
constexpr std::size_t kMaxChunk = tnt::transport::shm_max_chunk(kRingBytes);
constexpr std::size_t kMaxMessage = 6000;
const std::string kPeer = "rank 1 (fuzz)";

struct Posted {
  std::vector<std::byte> buffer;
  Tag tag;
  bool completed = false;
};

// A message offered by kShmReadMe: what lies at its "address" in the sender's memory.
struct Offer {
  Tag tag;
  std::size_t bytes;
};

struct Sink final : CompletionSink {
  void on_send_complete(std::uint64_t) override {}
  void on_recv_complete(std::uint64_t, std::size_t) override {}
} sink;

// Tag has no order of its own.
std::pair<std::uint64_t, std::uint32_t> key(Tag tag) { return {tag.value, tag.context}; }

std::byte payload_byte(Tag tag, std::size_t i) { return static_cast<std::byte>((tag.value * 31 + i) % 251); }

std::vector<std::byte> chunk(const ShmChunkHeader& header, const void* payload) {
  std::vector<std::byte> bytes(sizeof header + header.chunk_bytes);
  std::memcpy(bytes.data(), &header, sizeof header);
  if (header.chunk_bytes) std::memcpy(bytes.data() + sizeof header, payload, header.chunk_bytes);
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  std::vector<std::byte> ring(kRingBytes);
  ShmInbox inbox(kPeer, ring);
  std::uint64_t head = 0;
  std::deque<std::vector<std::byte>> queued;                // whole chunks (or garbage) not yet written
  std::map<std::uint64_t, std::unique_ptr<Posted>> posted;  // by cookie
  std::uint64_t next_cookie = 0;
  std::map<std::uint64_t, Offer> offers;               // by address
  std::map<std::uint64_t, bool> sends;                 // cookie: completed
  std::map<std::uint64_t, std::uint64_t> awaited_ids;  // id: cookie, not yet completed
  std::uint64_t next_send = 0;
  std::map<std::pair<std::uint64_t, std::uint32_t>, std::size_t> messages, receives;  // per tag, for the final count
  bool well_formed = true;

  const auto tag = [&] {
    return Tag{input.ConsumeIntegralInRange<std::uint64_t>(0, 7), input.ConsumeIntegralInRange<std::uint32_t>(0, 1)};
  };
  const auto completed_receive = [&](const ShmInbox::Event& done) -> Posted& {
    auto found = posted.find(done.cookie);
    if (found == posted.end() || done.sink != &sink) violated("a completion for no posted receive");
    Posted& receive = *found->second;
    if (receive.completed) violated("a receive completed twice");
    receive.completed = true;
    if (done.bytes > receive.buffer.size()) violated("a receive completed with more bytes than it holds");
    return receive;
  };
  const auto handle = [&](const ShmInbox::Event& done) {
    switch (done.kind) {
      case ShmInbox::Event::kReceived: {
        Posted& receive = completed_receive(done);
        if (!well_formed) return;
        for (std::size_t i = 0; i < done.bytes; ++i)
          if (receive.buffer[i] != payload_byte(receive.tag, i)) violated("a receive holds another message's bytes");
        return;
      }
      case ShmInbox::Event::kReadRemote: {
        Posted& receive = completed_receive(done);
        if (done.destination != receive.buffer.data()) violated("a remote read aimed elsewhere than its receive");
        auto offer = offers.find(done.remote.address);
        if (offer == offers.end()) {
          if (well_formed) violated("a remote read of an address never offered");
          return;
        }
        if (!well_formed) return;
        if (offer->second.tag != receive.tag || offer->second.bytes != done.bytes)
          violated("a remote read of another message");
        // What process_vm_readv would copy.
        for (std::size_t i = 0; i < done.bytes; ++i) receive.buffer[i] = payload_byte(offer->second.tag, i);
        return;
      }
      case ShmInbox::Event::kSendDone: {
        auto send = sends.find(done.cookie);
        if (send == sends.end() || done.sink != &sink) violated("a send completion for no offered send");
        if (send->second) violated("a send completed twice");
        send->second = true;
        return;
      }
    }
  };
  const auto drain = [&] {
    std::optional<ShmInbox::Event> event;
    std::uint64_t before = inbox.tail();
    while (inbox.take(head, event)) {
      if (inbox.tail() - before < sizeof(ShmChunkHeader) || inbox.tail() - before > head - before)
        violated("a chunk moved the tail by less than a header, or past the head");
      before = inbox.tail();
      if (event) handle(*event);
    }
    if (event) violated("an event from a chunk not taken");
    if (inbox.violation().empty() && inbox.tail() != head) violated("the reader stopped before the head, silently");
  };
  const auto write_queued = [&] {
    const std::uint64_t used = head - inbox.tail();
    if (used > kRingBytes) return;  // the head is off already; the reader fails on it
    std::uint64_t room = kRingBytes - used;
    while (!queued.empty() && queued.front().size() <= room) {
      for (std::size_t i = 0; i < queued.front().size(); ++i) ring[(head + i) % kRingBytes] = queued.front()[i];
      head += queued.front().size();
      room -= queued.front().size();
      queued.pop_front();
    }
  };

  while (input.remaining_bytes() && inbox.violation().empty()) {
    switch (input.ConsumeIntegralInRange<int>(0, 6)) {
      case 0: {
        const Tag message_tag = tag();
        const std::size_t bytes = input.ConsumeIntegralInRange<std::size_t>(0, kMaxMessage);
        const std::size_t cut = input.ConsumeIntegralInRange<std::size_t>(1, kMaxChunk);
        std::vector<std::byte> payload(bytes);
        for (std::size_t i = 0; i < bytes; ++i) payload[i] = payload_byte(message_tag, i);
        std::size_t sent = 0;
        do {
          const std::size_t piece = std::min(cut, bytes - sent);
          queued.push_back(chunk(ShmChunkHeader{message_tag.value, bytes, piece, kShmData, message_tag.context},
                                 payload.data() + sent));
          sent += piece;
        } while (sent < bytes);
        ++messages[key(message_tag)];
        break;
      }
      case 1: {
        well_formed = false;
        const auto raw = input.ConsumeBytes<std::uint8_t>(input.ConsumeIntegralInRange<std::size_t>(0, 64));
        queued.emplace_back(reinterpret_cast<const std::byte*>(raw.data()),
                            reinterpret_cast<const std::byte*>(raw.data()) + raw.size());
        break;
      }
      case 2:
        write_queued();
        drain();
        break;
      case 3: {
        auto receive = std::make_unique<Posted>();
        receive->tag = tag();
        receive->buffer.resize(input.ConsumeIntegralInRange<std::size_t>(0, kMaxMessage));
        const std::uint64_t cookie = next_cookie++;
        const ShmInbox::Receive request{receive->tag, receive->buffer.data(), receive->buffer.size(), &sink, cookie};
        ++receives[key(receive->tag)];
        posted[cookie] = std::move(receive);
        if (auto done = inbox.post(request)) handle(*done);
        break;
      }
      case 4: {
        const Tag message_tag = tag();
        const std::size_t bytes = input.ConsumeIntegralInRange<std::size_t>(0, kMaxMessage);
        const ShmReadMe where{0x1000 + offers.size(), offers.size()};
        offers[where.address] = Offer{message_tag, bytes};
        queued.push_back(
            chunk(ShmChunkHeader{message_tag.value, bytes, sizeof where, kShmReadMe, message_tag.context}, &where));
        ++messages[key(message_tag)];
        break;
      }
      case 5: {
        std::uint64_t id = 0;
        if (input.ConsumeBool()) {
          id = next_send++;
          const std::uint64_t cookie = next_cookie++;
          sends[cookie] = false;
          awaited_ids[id] = cookie;
          inbox.await_read_done(id, &sink, cookie);
        } else {
          id = input.ConsumeIntegral<std::uint64_t>();
        }
        if (awaited_ids.erase(id) == 0) well_formed = false;  // never offered, or answered already
        queued.push_back(chunk(ShmChunkHeader{0, 0, sizeof id, kShmReadDone, 0}, &id));
        break;
      }
      case 6:
        well_formed = false;
        head = input.ConsumeBool() ? head + input.ConsumeIntegralInRange<std::uint64_t>(0, 2 * kRingBytes)
                                   : input.ConsumeIntegral<std::uint64_t>();
        drain();
        break;
    }
  }

  if (!inbox.violation().empty()) {
    const std::string& why = inbox.violation();
    const bool names_size = why.starts_with("protocol violation: message with tag ");
    if (why.find(kPeer) == std::string::npos && !names_size) violated("a violation that names no peer: " + why);
    if (well_formed && !names_size) violated("a violation from well-formed chunks: " + why);
    // Stopped for good: nothing more may be taken or complete.
    std::optional<ShmInbox::Event> event;
    head = inbox.tail() + sizeof(ShmChunkHeader);
    if (inbox.take(head, event) || event) violated("a chunk taken after a protocol violation");
    std::vector<std::byte> buffer(kMaxMessage);
    for (std::uint64_t t = 0; t < 8; ++t)
      if (inbox.post(ShmInbox::Receive{Tag{t, 0}, buffer.data(), buffer.size(), &sink, next_cookie++}))
        violated("a receive completed after a protocol violation");
    return 0;
  }
  if (!well_formed) return 0;
  // Everything still queued reaches the reader (each write leaves room for the next once read).
  while (!queued.empty() && inbox.violation().empty()) {
    write_queued();
    drain();
  }
  if (!inbox.violation().empty()) return 0;  // a message larger than its receive
  std::map<std::pair<std::uint64_t, std::uint32_t>, std::size_t> done;
  for (const auto& [cookie, receive] : posted)
    if (receive->completed) ++done[key(receive->tag)];
  for (const auto& [t, count] : receives)
    if (done[t] != std::min(count, messages[t])) violated("a message and its receive, both there, never met");
  for (const auto& [cookie, completed] : sends)
    if (!completed) violated("an offered send whose kShmReadDone came never completed");
  return 0;
}
