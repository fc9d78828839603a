#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tnt/transport/pair.h"

namespace tnt::transport {

// The TCP back end's data-plane framing: every message is this header followed by `bytes` of
// payload.
struct TcpHeader {
  std::uint64_t tag;
  std::uint32_t context;  // Note [Contexts] in pair.h
  std::uint32_t reserved;
  std::uint64_t bytes;
  Tag full_tag() const { return Tag{tag, context}; }
};
static_assert(sizeof(TcpHeader) == 24);

// An authenticated peer can still be buggy: no single message may claim more than this.
inline constexpr std::uint64_t kTcpMaxMessageBytes = std::uint64_t{1} << 31;

// Note [Buffered reads] in tcp_inbox.cpp: the receiving side of one TCP channel, without the
// socket: what to read next, and what the bytes read complete. Pure, so that a fuzz target can
// feed it any byte stream in any cuts (fuzz/tcp_frames_fuzz.cpp).
class TcpInbox {
 public:
  struct Receive {
    Tag tag;
    void* data;
    std::size_t capacity;
    CompletionSink* sink;
    std::uint64_t cookie;
  };
  struct Completion {
    CompletionSink* sink;
    std::uint64_t cookie;
    std::size_t bytes;
  };

  explicit TcpInbox(std::string peer_name);

  // Where the next read from the socket goes. `whole`: a payload read straight into its
  // destination, which the read should fill; otherwise the inbox, which takes what comes.
  std::span<std::byte> read_target(bool& whole);
  // `bytes` arrived in the last read_target().
  void on_read(std::size_t bytes);
  // The next receive that the bytes read complete, in the order the messages came; nullopt when
  // more must be read, or after a protocol violation (violation() says which).
  std::optional<Completion> next();
  // A receive posted by the channel's user: a message that came before it, whole, completes it
  // at once (the caller reports that later, never inside its user's call); else it waits.
  std::optional<Completion> post(const Receive& receive);
  const std::string& violation() const { return violation_; }

 private:
  // A message that came whole before its receive.
  struct Staged {
    Tag tag;
    std::vector<std::byte> buffer;
    std::size_t bytes;
  };
  // The message whose payload is being read: into its receive, or else into `staging`, which
  // grows as the payload comes (a buggy peer's header alone allocates nothing large).
  struct Current {
    TcpHeader header;
    std::optional<Receive> receive;
    std::vector<std::byte> staging;
    std::size_t done = 0;
    std::byte* destination() { return receive ? static_cast<std::byte*>(receive->data) : staging.data(); }
    // Room for at least `more` bytes of payload after `done`, at most the whole payload.
    void make_room(std::size_t more);
  };

  bool start(const TcpHeader& header);
  std::optional<Completion> finish();
  std::optional<Completion> take_staged(std::size_t index, const Receive& receive);
  void fail_size(Tag tag, std::uint64_t bytes, std::size_t capacity);

  std::string peer_name_;
  std::vector<std::byte> inbox_;
  std::size_t begin_ = 0;  // inbox_[begin_, end_) is read and not yet taken
  std::size_t end_ = 0;
  std::optional<Current> current_;
  bool reading_directly_ = false;  // the last read_target() was current_'s payload
  bool last_was_large_ = false;    // the last message's payload did not fit the inbox
  std::vector<Receive> posted_;
  std::vector<Staged> staged_;
  std::vector<std::vector<std::byte>> spare_;  // staging buffers kept for reuse
  std::string violation_;
};

}  // namespace tnt::transport
