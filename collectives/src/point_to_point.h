#pragma once
// Point-to-point messages of one communicator (Note [Point-to-point] in point_to_point.cpp).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "operation.h"
#include "p2p_wire.h"
#include "tnt/collectives/communicator.h"
#include "tnt/core/asio.h"
#include "tnt/transport/event_loop.h"
#include "tnt/transport/pair.h"

namespace tnt::detail {

// What point-to-point needs from its communicator; everything is used on the event loop's strand.
class PeerLinks {
 public:
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The channel to `peer` (never this rank), or null while none is open.
  virtual transport::Pair* channel(int peer) = 0;
  // Starts opening the channel to `peer`: PointToPoint::on_channel follows, or a job failure.
  virtual void open_channel(int peer) = 0;
  virtual std::string peer_name(int peer) const = 0;  // "rank 3 (node07)"
  virtual void fail_job(const std::string& reason) = 0;
  // A message is waiting for a receive (probe() may now find it). Any thread may be told.
  virtual void message_arrived() = 0;
  virtual transport::EventLoop& loop() = 0;
  virtual const JobEnvironment& environment() const = 0;

 protected:
  ~PeerLinks() = default;
};

struct PointToPointLimits {
  std::size_t eager_bytes = 16 * 1024;    // larger messages wait for the receive (TNT_P2P_EAGER_KB)
  bool eager_bytes_given = false;         // set by the user: every channel's limit, whatever it prefers
  std::size_t credit_bytes = 256 * 1024;  // eager bytes one sender may have unreceived (TNT_P2P_CREDIT_KB)
};

class PointToPoint final : public transport::CompletionSink {
 public:
  PointToPoint(PeerLinks& links, std::uint32_t context, PointToPointLimits limits);
  ~PointToPoint();
  PointToPoint(const PointToPoint&) = delete;
  PointToPoint& operator=(const PointToPoint&) = delete;

  // All on the strand. The state completes once the send may reuse its buffer (standard) or
  // once the receive has matched it (synchronous); the receive's, once the data is in `data`.
  void send(std::shared_ptr<OperationState> state, int peer, int tag, const void* data, std::size_t bytes,
            bool synchronous);
  void receive(std::shared_ptr<OperationState> state, int peer, int tag, void* data, std::size_t capacity);
  // The first message that a receive (peer, tag) would match now, without receiving it.
  std::optional<MessageStatus> probe(int peer, int tag);
  // Completes every pending request with `reason`; nothing completes any more afterwards.
  void fail_all(const std::string& reason);
  // A channel to `peer` has opened (this rank or the peer asked for it).
  void on_channel(int peer);

  // Note [Fast lane] in point_to_point.cpp: a message to or from a peer without an
  // OperationState. On the strand, as the loop's runner. send_now sends an eager message (by the
  // peer's lane where its channel has one, else by its Pair) and returns true where it can go at
  // once and in order; else false, having done nothing.
  bool send_now(int peer, int tag, const void* data, std::size_t bytes);
  struct FastReceive {
    enum class Outcome { waiting, done, not_here };
    int source = 0;
    int tag = 0;
    std::byte* data = nullptr;
    std::size_t capacity = 0;
    Outcome outcome = Outcome::waiting;
    MessageStatus status;
    std::string error;                // truncation
    transport::Lane* lane = nullptr;  // where it waits: to be read by its caller (Note [Spinning here])
  };
  // Takes the message for `receive` if it is here; else, where only its lane can bring it and no
  // receive is posted before it, waits for it there (outcome waiting) until end_fast_receive().
  void begin_fast_receive(FastReceive& receive);
  void end_fast_receive() { fast_receive_ = nullptr; }
  // Completed eager sends whose channels still hand their bytes over (Note [Lingering work] in
  // transport/src/event_loop.cpp). Any thread.
  int handing_over() const { return handing_over_.load(); }

 private:
  struct SendOp;
  struct ReceiveOp;
  struct Arrived;  // a message announced, not yet matched to a receive
  struct Peer;

  void on_lane_frame(Peer& from, const std::byte* frame, std::size_t bytes);
  void on_lane_room(Peer& to);
  void post_on_lane(Peer& to, const Envelope& envelope, const void* data, std::size_t bytes);
  static bool goes_eagerly(const Peer& to, std::size_t bytes);
  void send_eager_by_pair(Peer& to, int tag, const void* data, std::size_t bytes);
  void spend_credit(Peer& to, std::size_t bytes);
  bool take_fast(Peer& from, const Arrived& arrived, const std::byte* payload);
  // A receive (source, tag), wildcards included, takes `arrived`: MPI's matching rule.
  static bool matches(int source, int tag, const Arrived& arrived);
  // The message whose envelope just came from `from`, with the next sequence number from it.
  Arrived arrival(Peer& from, const Envelope& envelope);

  void on_send_complete(std::uint64_t cookie) override;
  void on_recv_complete(std::uint64_t cookie, std::size_t bytes) override;

  Peer& peer(int rank);       // one whose channel is open
  Peer* reachable(int rank);  // null while its channel opens
  void listen(Peer& from);
  void on_envelope(Peer& from, std::size_t bytes);
  std::vector<std::byte> spare_inbox(std::size_t bytes);
  std::unique_ptr<ReceiveOp> take_posted(const Arrived& arrived);
  void deliver(Arrived arrived);
  std::string take_eager(ReceiveOp& receive, const Arrived& arrived, const std::byte* payload);
  std::string truncation(std::size_t capacity, const Arrived& arrived) const;
  void match(std::unique_ptr<ReceiveOp> receive, Arrived arrived);
  void on_clear_to_send(std::uint64_t send_id, std::size_t received);
  void send_data(std::uint64_t id, SendOp& send);
  std::size_t credit_quantum() const;
  void on_credit(Peer& from);
  void repay(Peer& to, std::size_t bytes);
  void finish_send(std::uint64_t id, const std::string& error = {});
  void finish_receive(std::uint64_t id, const std::string& error = {});
  // `error` must not be the receive's own (it goes to the spares first).
  void complete_receive(std::unique_ptr<ReceiveOp> receive, const std::string& error);
  std::unique_ptr<ReceiveOp> new_receive();
  void send_to_self(std::shared_ptr<OperationState> state, int tag, const void* data, std::size_t bytes,
                    bool synchronous);
  void watch_receives();
  void check_receives();
  std::uint32_t take_eager_slot();  // Note [Eager slots] in point_to_point.cpp
  void release_eager_slot(std::uint32_t slot);
  void handed_over();

  PeerLinks& links_;
  const std::uint32_t context_;
  const PointToPointLimits limits_;
  std::vector<std::unique_ptr<Peer>> peers_;  // by rank; null until its channel is open
  std::unordered_map<std::uint64_t, std::unique_ptr<SendOp>> sends_;
  std::unordered_map<std::uint64_t, std::unique_ptr<ReceiveOp>> transfers_;  // receives matched, data arriving
  std::deque<std::unique_ptr<ReceiveOp>> posted_;                            // receives not yet matched, in order
  std::vector<std::unique_ptr<ReceiveOp>> spare_receives_;                   // Note [Spare receives]
  std::deque<Arrived> unexpected_;                                           // in arrival order
  std::vector<std::vector<std::byte>> spare_inboxes_;
  // Note [Eager slots]: eager messages' envelopes and data, while their channels hand them over.
  std::vector<std::vector<std::byte>> eager_wires_;
  std::vector<std::uint32_t> free_eager_slots_;
  // Sends waiting for their peer's channel to open, in the order issued.
  std::unordered_map<int, std::deque<std::function<void()>>> waiting_for_channel_;
  std::uint64_t next_id_ = 1;
  std::atomic<int> handing_over_{0};
  FastReceive* fast_receive_ = nullptr;  // Note [Fast lane]: the caller's receive that waits
  std::string failure_;
  // Note [Receives nobody sends to]: armed while receives wait unmatched.
  boost::asio::steady_timer receive_watch_;
  bool watching_ = false;
};

}  // namespace tnt::detail
