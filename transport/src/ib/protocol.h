#pragma once
// The InfiniBand back end's message protocol, kept apart from the verbs calls so that it can be
// tested without a device (tests/ib/ib_protocol_test.cpp drives two Channels over a fake wire).
//
// Note [IB protocol]: every message posted on a Pair is either
//   - eager (payload <= the eager limit): copied into a registered send bounce buffer and SENT
//     into one of the receive bounce buffers the peer keeps posted; the receiver copies it into
//     the posted receive's buffer, or into a staging buffer when no receive with that tag is
//     posted yet (as the TCP back end stages unexpected messages); or
//   - rendezvous (larger): the sender registers its buffer and SENDs an RTS (tag, size, its
//     handle). When a receive with that tag is posted (before or after the RTS came) the receiver
//     registers the destination and answers with a CTS (address, rkey, its handle). The sender
//     then RDMA WRITEs the payload straight into the destination, the last write WITH IMMEDIATE
//     carrying the receiver's handle, whose receive completion tells the receiver that the data
//     is there (RC delivers the writes in order). Nothing large is ever staged.
// Flow control: every SEND and WRITE WITH IMMEDIATE consumes one receive buffer of the peer, so
// the sender holds one credit per receive buffer the peer has posted. The receiver reposts a
// buffer as soon as it has handled it and returns the credits in the header of its next SEND,
// or in a CREDIT message once a quarter of them were used by other messages, or once the peer
// may be down to its last credit. Messages other than CREDIT leave that last credit alone, so a
// CREDIT can always go out and the two sides cannot both wait for credits (ib_protocol_test.cpp
// fails on any SEND that would meet no posted buffer, and on any message that never arrives).
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tnt/transport/pair.h"

namespace tnt::transport::ib {

// Registered memory for user buffers (implemented by RegistrationCache). acquire() throws
// tnt::Error when the memory cannot be registered.
class MemoryRegistry {
 public:
  struct Handle {
    std::uint32_t lkey = 0;
    std::uint32_t rkey = 0;
    std::uint64_t id = 0;
  };
  virtual Handle acquire(const void* data, std::size_t bytes) = 0;
  virtual void release(std::uint64_t id) = 0;

 protected:
  ~MemoryRegistry() = default;
};

// One RDMA WRITE, optionally WITH IMMEDIATE (then it consumes a receive buffer of the peer).
struct WriteRequest {
  const std::byte* local = nullptr;
  std::size_t bytes = 0;
  std::uint32_t lkey = 0;
  std::uint64_t remote = 0;
  std::uint32_t rkey = 0;
  bool with_immediate = false;
  std::uint32_t immediate = 0;
  std::uint64_t wr_id = 0;
};

// What the protocol needs from a reliable connected queue pair. Every posted send-side work
// request is signaled and completes, in order, through Channel::on_send_done(wr_id). The post
// calls throw tnt::JobError when the queue pair refuses a work request.
class Wire {
 public:
  virtual std::byte* recv_buffer(std::uint32_t slot) = 0;  // receive bounce buffer `slot`
  virtual std::byte* send_buffer(std::uint32_t slot) = 0;  // send bounce buffer `slot`
  virtual void post_recv(std::uint32_t slot) = 0;
  virtual void post_send(std::uint32_t slot, std::size_t bytes, std::uint64_t wr_id) = 0;
  virtual void post_write(const WriteRequest& request) = 0;

 protected:
  ~Wire() = default;
};

struct ChannelConfig {
  std::uint32_t recv_slots = 32;        // receive bounce buffers kept posted (credits we give)
  std::uint32_t send_slots = 32;        // send bounce buffers
  std::uint32_t send_queue_depth = 96;  // send work requests outstanding at most
  std::size_t eager_limit = 16 * 1024;  // largest eager payload this side receives
  std::uint32_t peer_recv_slots = 32;   // the peer's recv_slots: our initial credits
  std::size_t peer_eager_limit = 16 * 1024;
  std::size_t max_write_bytes = std::size_t{1} << 30;  // RDMA writes are split at this size
};

struct WireHeader;  // protocol.cpp
std::size_t header_bytes();
// Size of one bounce buffer for a given eager limit.
std::size_t slot_bytes(std::size_t eager_limit);

// The protocol state of one peer. Implements Pair; every call and every on_* event happens on
// the transport's strand. `defer` runs a function later on that strand (never inside the current
// call); `on_failure` is called once, with a message naming the peer, when the channel fails.
class Channel final : public Pair {
 public:
  using Defer = std::function<void(std::function<void()>)>;
  using FailureHandler = std::function<void(const std::string&)>;

  Channel(int peer_rank, std::string peer_name, const ChannelConfig& config, Wire& wire, MemoryRegistry& memory,
          Defer defer, FailureHandler on_failure);
  ~Channel() override;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Pair
  void send(Tag tag, const void* data, std::size_t bytes, CompletionSink& sink, std::uint64_t cookie) override;
  void recv(Tag tag, void* data, std::size_t capacity, CompletionSink& sink, std::uint64_t cookie) override;
  int peer_rank() const override { return peer_; }

  // Posts every receive buffer; call once, before the peer may send.
  void post_all_receives();
  // Completions from the queue pair.
  void on_recv(std::uint32_t slot, std::size_t bytes);
  void on_recv_immediate(std::uint32_t slot, std::uint32_t immediate);
  void on_send_done(std::uint64_t wr_id);

  void fail(const std::string& what);  // reports once (unless closed) and completes nothing more
  void close();                        // ends quietly: nothing more completes or is reported
  bool failed() const { return failed_; }
  const std::string& peer_name() const { return peer_name_; }

  // For tests and logs.
  std::size_t staged_messages() const { return staged_.size() + staged_rts_.size(); }
  std::uint32_t credits() const { return credits_; }

 private:
  enum class ItemKind : std::uint8_t { eager, rts, cts, write };
  struct Item {  // an outgoing message waiting for credits, a bounce buffer or send-queue room
    ItemKind kind;
    Tag tag{};
    const std::byte* data = nullptr;
    std::size_t bytes = 0;
    CompletionSink* sink = nullptr;
    std::uint64_t cookie = 0;
    std::uint32_t handle = 0;   // rts, write: our send handle; cts: the peer's send handle
    std::uint64_t address = 0;  // cts: our destination; write: the peer's destination
    std::uint32_t rkey = 0;
    std::uint32_t peer_handle = 0;  // cts: our receive handle; write: the peer's
    std::size_t written = 0;        // write: bytes already posted
  };
  struct PostedRecv {
    Tag tag;
    std::byte* data;
    std::size_t capacity;
    CompletionSink* sink;
    std::uint64_t cookie;
  };
  struct StagedEager {
    Tag tag;
    std::vector<std::byte> payload;
    std::size_t bytes;
  };
  struct StagedRts {
    Tag tag;
    std::size_t bytes;
    std::uint32_t send_handle;
  };
  struct RendezvousSend {
    bool active = false;
    bool cts_seen = false;
    Tag tag{};
    const std::byte* data = nullptr;
    std::size_t bytes = 0;
    CompletionSink* sink = nullptr;
    std::uint64_t cookie = 0;
    MemoryRegistry::Handle memory;
  };
  struct RendezvousRecv {
    bool active = false;
    std::size_t bytes = 0;
    CompletionSink* sink = nullptr;
    std::uint64_t cookie = 0;
    MemoryRegistry::Handle memory;
  };
  struct SendSlotUse {  // what a send bounce buffer's completion completes (eager only)
    CompletionSink* sink = nullptr;
    std::uint64_t cookie = 0;
  };

  // A receive that a message completes, called after the message is fully handled.
  struct Completion {
    CompletionSink* sink = nullptr;
    std::uint64_t cookie = 0;
    std::size_t bytes = 0;
  };
  // The kinds of message on_recv() dispatches to; each returns false after failing the channel.
  bool on_eager(std::uint32_t slot, const WireHeader& header, std::size_t bytes, Completion& completed);
  bool on_rts(std::uint32_t slot, const WireHeader& header);
  bool on_cts(std::uint32_t slot, const WireHeader& header);
  std::optional<PostedRecv> take_posted(Tag tag);  // removes the receive posted for `tag`

  void flush();
  bool post_item(Item& item);  // false: no room yet
  void post_control(std::uint32_t slot, const WireHeader& header, std::size_t payload_bytes);
  void maybe_return_credits();
  void start_rendezvous_recv(Tag tag, std::byte* data, std::size_t capacity, std::size_t bytes,
                             std::uint32_t send_handle, CompletionSink& sink, std::uint64_t cookie);
  void repost(std::uint32_t slot, bool for_message);
  void fail_size(Tag tag, std::size_t bytes, std::size_t capacity);
  template <class Table>
  static std::uint32_t allocate(Table& table, std::vector<std::uint32_t>& free_list);

  int peer_;
  std::string peer_name_;
  ChannelConfig config_;
  std::size_t send_eager_limit_;
  Wire& wire_;
  MemoryRegistry& memory_;
  Defer defer_;
  FailureHandler on_failure_;
  bool failed_ = false;
  bool closed_ = false;

  // Sending.
  std::deque<Item> queue_;
  std::vector<std::uint32_t> free_send_slots_;
  std::vector<SendSlotUse> send_slot_use_;
  std::uint32_t send_queue_used_ = 0;
  std::uint32_t credits_ = 0;            // receive buffers of the peer we may still consume
  std::uint32_t credits_owed_ = 0;       // our reposted buffers the peer has not heard of yet
  std::uint32_t owed_for_messages_ = 0;  // of those, the ones used by messages other than CREDIT
  std::vector<RendezvousSend> rendezvous_sends_;
  std::vector<std::uint32_t> free_send_handles_;

  // Receiving.
  std::vector<PostedRecv> posted_;
  std::vector<StagedEager> staged_;
  std::vector<StagedRts> staged_rts_;
  std::vector<std::vector<std::byte>> spare_;  // staging buffers kept for reuse
  std::vector<RendezvousRecv> rendezvous_recvs_;
  std::vector<std::uint32_t> free_recv_handles_;
};

}  // namespace tnt::transport::ib
