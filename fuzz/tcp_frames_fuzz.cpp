// The TCP back end's receiving side (transport/src/tcp/tcp_inbox.cpp, Note [Buffered reads])
// against any byte stream, cut anywhere, with receives posted between the cuts, as a socket and
// the channel's user would. The input is a run of steps, each a byte choosing it:
//   0  a frame: a header (tag 0-7, context 0-1, a size of up to 40000) and its payload, whose
//      byte i is (tag * 31 + i) mod 251, appended to what the "socket" holds;
//   1  raw bytes from the input appended as they are (garbage, truncated headers);
//   2  the socket delivers: the next cut's size, taken in reads of at most what read_target()
//      offers, as the reactor would;
//   3  a receive is posted: a tag and context as in 0 and a capacity of up to 40000.
// Checked: no read or copy past a buffer (ASan); each receive completes at most once and with no
// more bytes than it holds; while only frames came, every completed receive holds its frame's
// payload; a protocol violation stops the inbox for good.
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "fuzz_support.h"
#include "tcp/tcp_inbox.h"

using namespace tnt::transport;
using tnt::fuzz::violated;

namespace {

struct Posted {
  std::vector<std::byte> buffer;
  Tag tag;
  bool completed = false;
};

struct Sink final : CompletionSink {
  void on_send_complete(std::uint64_t) override {}
  void on_recv_complete(std::uint64_t, std::size_t) override {}
} sink;

std::byte payload_byte(Tag tag, std::size_t i) { return static_cast<std::byte>((tag.value * 31 + i) % 251); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  TcpInbox inbox("rank 1 (fuzz)");
  std::deque<std::byte> socket;
  std::map<std::uint64_t, std::unique_ptr<Posted>> posted;  // by cookie
  std::uint64_t next_cookie = 0;
  bool only_frames = true;

  const auto completed = [&](const TcpInbox::Completion& done) {
    auto found = posted.find(done.cookie);
    if (found == posted.end() || done.sink != &sink) violated("a completion for no posted receive");
    Posted& receive = *found->second;
    if (receive.completed) violated("a receive completed twice");
    receive.completed = true;
    if (done.bytes > receive.buffer.size()) violated("a receive completed with more bytes than it holds");
    if (!only_frames) return;
    for (std::size_t i = 0; i < done.bytes; ++i)
      if (receive.buffer[i] != payload_byte(receive.tag, i)) violated("a receive holds another message's bytes");
  };
  const auto drain = [&] {
    while (auto done = inbox.next()) completed(*done);
  };
  const auto tag = [&] {
    return Tag{input.ConsumeIntegralInRange<std::uint64_t>(0, 7), input.ConsumeIntegralInRange<std::uint32_t>(0, 1)};
  };

  while (input.remaining_bytes() && inbox.violation().empty()) {
    switch (input.ConsumeIntegralInRange<int>(0, 3)) {
      case 0: {
        const Tag frame_tag = tag();
        const TcpHeader header{frame_tag.value, frame_tag.context, 0,
                               input.ConsumeIntegralInRange<std::uint64_t>(0, 40000)};
        const auto* raw = reinterpret_cast<const std::byte*>(&header);
        socket.insert(socket.end(), raw, raw + sizeof header);
        for (std::size_t i = 0; i < header.bytes; ++i) socket.push_back(payload_byte(frame_tag, i));
        break;
      }
      case 1: {
        only_frames = false;
        for (std::uint8_t byte : input.ConsumeBytes<std::uint8_t>(input.ConsumeIntegralInRange<std::size_t>(0, 64)))
          socket.push_back(static_cast<std::byte>(byte));
        break;
      }
      case 2: {
        std::size_t cut = std::min(socket.size(), input.ConsumeIntegralInRange<std::size_t>(0, 70000));
        while (cut && inbox.violation().empty()) {
          bool whole = false;
          const std::span<std::byte> target = inbox.read_target(whole);
          if (target.empty()) violated("read_target() offered no room");
          const std::size_t bytes = std::min(cut, target.size());
          for (std::size_t i = 0; i < bytes; ++i) {
            target[i] = socket.front();
            socket.pop_front();
          }
          cut -= bytes;
          inbox.on_read(bytes);
          drain();
        }
        break;
      }
      case 3: {
        auto receive = std::make_unique<Posted>();
        receive->tag = tag();
        receive->buffer.resize(input.ConsumeIntegralInRange<std::size_t>(0, 40000));
        const std::uint64_t cookie = next_cookie++;
        const TcpInbox::Receive request{receive->tag, receive->buffer.data(), receive->buffer.size(), &sink, cookie};
        posted[cookie] = std::move(receive);
        if (auto done = inbox.post(request)) completed(*done);
        break;
      }
    }
  }
  if (!inbox.violation().empty()) {
    // Stopped for good: nothing more may complete.
    if (inbox.next()) violated("a receive completed after a protocol violation");
  }
  return 0;
}
