#include "point_to_point.h"

#include <algorithm>
#include <cstring>
#include <ctime>

#include <spdlog/spdlog.h>

#include "p2p_wire.h"

#include "tnt/core/copy.h"
#include "tnt/core/error.h"

namespace tnt::detail {

// Note [Point-to-point]: MPI's matching, built on Pairs, which match by exact tag only.
//
// Every message from rank s to rank r on a communicator gets the next sequence number of (s, r)
// and travels first as an envelope: a 16-byte header (the user's tag, the size, eager or not)
// sent with the Pair tag (envelope, sequence) in the communicator's point-to-point context. The
// receiver keeps one receive posted for the next envelope from each peer it listens to, so
// envelopes are taken in the order sent: that is MPI's non-overtaking rule, whatever the back
// end. Each envelope is matched against the posted receives in the order they were posted
// (source and tag, or any_source/any_tag), else kept in the unexpected queue, in arrival order,
// which a later receive or a probe searches first.
//
//   - Eager (size <= TNT_P2P_EAGER_KB, 16 KiB; unless that is set, what the channel prefers if
//     more: 64 KiB over TCP, Note [Eager over TCP]): the data follows the header in the same Pair
//     message. The sender copies both into a buffer of its own, so the send completes at once.
//     The receiver copies the data into the receive when it matches.
//   - Rendezvous (larger, every synchronous send, and an eager send without credit): the
//     envelope carries no data. Once a receive matches it, the receiver posts the receive of the
//     data straight into the user's buffer and sends a clear-to-send (Pair tag (cts, sequence),
//     the number of bytes it takes); the sender then sends the data (tag (data, sequence, piece),
//     pieces of at most 1 GiB, so that no Pair message passes the back ends' 2 GiB limit). The
//     data is never staged: on shared memory it is read once, from the sender's buffer, by the
//     receiver (Note [Single copy] in shm_transport.cpp); on InfiniBand it is written into the
//     receive by RDMA.
//   - Truncation: a message larger than its receive fills the receive, and the receive fails
//     naming both sizes; the sender sends only what fits and completes normally (as in MPI).
//
// Bounded memory: a receiver that posts no receive holds at most TNT_P2P_CREDIT_KB (256 KiB) of
// eager data per sender, plus 16 bytes and the transport's per-message bookkeeping for each
// announced rendezvous message. The sender spends credit (size + 64 bytes) on every eager
// message and sends rendezvous when it has none left; the receiver gives the credit back a
// quarter at a time (an empty credit message, tag (credit, n)) as its receives take the data.
namespace {

enum class Wire : std::uint64_t { envelope = 1, clear_to_send = 2, data = 3, credit = 4 };
enum class Event : std::uint64_t {
  envelope_in = 1,
  credit_in = 2,
  eager_out = 3,
  cts_in = 4,
  data_out = 5,
  data_in = 6,
  cts_out = 7,
  credit_out = 8,
  envelope_out = 9,
};

constexpr std::uint64_t kSequenceMask = (std::uint64_t{1} << 40) - 1;
constexpr std::size_t kPieceBytes = std::size_t{1} << 30;
constexpr std::size_t kEagerOverhead = 64;     // what an eager message costs the receiver besides its data
constexpr std::size_t kKeptEagerBytes = 4096;  // Note [Eager slots]
constexpr std::size_t kSpareReceives = 64;     // Note [Spare receives]

transport::Tag wire_tag(Wire kind, std::uint64_t sequence, std::uint32_t context, std::uint64_t piece = 0) {
  return {static_cast<std::uint64_t>(kind) << 60 | (sequence & kSequenceMask) << 20 | (piece & 0xfffffu), context};
}

std::uint64_t cookie(Event event, std::uint64_t id) { return static_cast<std::uint64_t>(event) << 56 | id; }
Event event_of(std::uint64_t cookie) { return static_cast<Event>(cookie >> 56); }
std::uint64_t id_of(std::uint64_t cookie) { return cookie & ((std::uint64_t{1} << 56) - 1); }

std::size_t pieces_of(std::size_t bytes) { return std::max<std::size_t>(1, (bytes + kPieceBytes - 1) / kPieceBytes); }

std::string describe_tag(int tag) { return tag == any_tag ? std::string("any tag") : "tag " + std::to_string(tag); }

// When a receive was posted, for Note [Receives nobody sends to], whose warnings count seconds:
// CLOCK_MONOTONIC_COARSE, on the steady clock's time line but some milliseconds behind it, reads
// in a quarter of the time (steady_clock::now() was 3 % of jacobi2d's small-grid iteration,
// perf, 2026-11-29).
std::chrono::steady_clock::time_point receive_clock() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return std::chrono::steady_clock::time_point(std::chrono::seconds(now.tv_sec) +
                                               std::chrono::nanoseconds(now.tv_nsec));
}

}  // namespace

struct PointToPoint::SendOp {
  std::shared_ptr<OperationState> state;  // null once completed (eager sends complete at once)
  int peer = 0;
  std::uint64_t sequence = 0;
  const std::byte* data = nullptr;
  std::size_t bytes = 0;
  std::vector<std::byte> wire;  // the envelope (eager messages: Note [Eager slots])
  std::uint64_t accepted = 0;   // rendezvous: the bytes the receiver takes (clear-to-send)
  int tag = 0;
  int outstanding = 0;  // Pair operations not yet completed
};

struct PointToPoint::ReceiveOp {
  std::shared_ptr<OperationState> state;
  int source = any_source;
  int tag = any_tag;
  std::byte* data = nullptr;
  std::size_t capacity = 0;
  std::string error;                                // set at matching (truncation), reported at the end
  std::chrono::steady_clock::time_point posted_at;  // by the coarse clock (receive_clock())
  bool warned = false;
  std::uint64_t accepted = 0;  // the clear-to-send's payload
  int outstanding = 0;
};

// A message whose envelope has come (or a send to this rank itself) and no receive matched yet.
struct PointToPoint::Arrived {
  int source = 0;
  int tag = 0;
  std::size_t bytes = 0;
  bool rendezvous = false;
  std::uint64_t sequence = 0;
  std::vector<std::byte> eager;    // the envelope's buffer: the data from sizeof(Envelope) on
  std::uint64_t self_send_id = 0;  // a large send to this rank: its SendOp, read at matching
};

struct PointToPoint::Peer final : transport::LaneSink {
  Peer(PointToPoint& owner, int peer_rank) : engine(owner), rank(peer_rank) {}
  void on_lane_frame(const std::byte* frame, std::size_t bytes) override { engine.on_lane_frame(*this, frame, bytes); }
  void on_lane_room() override { engine.on_lane_room(*this); }

  PointToPoint& engine;
  int rank = 0;
  transport::Pair* pair = nullptr;
  transport::Lane* lane = nullptr;                  // Note [Fast lane]: every envelope to and from it goes here
  std::deque<std::vector<std::byte>> lane_waiting;  // frames that found the lane full, in order
  std::size_t eager_bytes = 0;  // the largest eager message, both ways (Pair::preferred_eager_bytes)
  std::uint64_t next_send_sequence = 0;
  std::uint64_t next_receive_sequence = 0;
  std::vector<std::byte> inbox;  // the posted envelope receive's buffer
  std::size_t credit = 0;        // eager bytes this rank may still send it
  bool hears_credit = false;     // a credit receive is posted
  std::uint64_t next_credit_in = 0;
  std::size_t owed = 0;  // what its eager messages received here cost, not yet given back
  std::uint64_t next_credit_out = 0;
};

PointToPoint::PointToPoint(PeerLinks& links, std::uint32_t context, PointToPointLimits limits)
    : links_(links),
      context_(context),
      limits_(limits),
      peers_(static_cast<std::size_t>(links.size())),
      receive_watch_(links.loop().strand()) {
  static_assert(sizeof(Envelope) == 16);
  for (int rank = 0; rank < links_.size(); ++rank) {
    if (rank != links_.rank() && links_.channel(rank)) peer(rank);
  }
}

PointToPoint::~PointToPoint() = default;

PointToPoint::Peer& PointToPoint::peer(int rank) {
  auto& slot = peers_[static_cast<std::size_t>(rank)];
  if (!slot) {
    auto created = std::make_unique<Peer>(*this, rank);
    created->pair = links_.channel(rank);
    if (!created->pair) throw LogicError("point-to-point: no channel to rank " + std::to_string(rank));
    created->lane = created->pair->lane();
    created->credit = limits_.credit_bytes;
    created->eager_bytes = limits_.eager_bytes_given
                               ? limits_.eager_bytes
                               : std::max(limits_.eager_bytes, created->pair->preferred_eager_bytes());
    if (created->lane) {
      created->eager_bytes = std::min(created->eager_bytes, created->lane->max_frame_bytes() - sizeof(Envelope));
    } else {
      created->inbox.resize(sizeof(Envelope) + created->eager_bytes);
    }
    slot = std::move(created);
    // The lane hands over what came before this engine was made, so the peer must be in place.
    if (slot->lane)
      slot->lane->set_sink(context_, slot.get());
    else
      listen(*slot);
  }
  return *slot;
}

PointToPoint::Peer* PointToPoint::reachable(int rank) {
  if (Peer* open = peers_[static_cast<std::size_t>(rank)].get()) return open;
  if (links_.channel(rank)) return &peer(rank);
  links_.open_channel(rank);
  return nullptr;
}

void PointToPoint::on_channel(int rank) {
  if (!failure_.empty()) return;
  peer(rank);
  auto waiting = waiting_for_channel_.find(rank);
  if (waiting == waiting_for_channel_.end()) return;
  auto sends = std::move(waiting->second);
  waiting_for_channel_.erase(waiting);
  for (auto& send : sends) send();
}

void PointToPoint::listen(Peer& from) {
  from.pair->recv(wire_tag(Wire::envelope, from.next_receive_sequence, context_), from.inbox.data(), from.inbox.size(),
                  *this, cookie(Event::envelope_in, static_cast<std::uint64_t>(from.rank)));
}

// ---- Sending ------------------------------------------------------------------------------------

void PointToPoint::send(std::shared_ptr<OperationState> state, int peer_rank, int tag, const void* data,
                        std::size_t bytes, bool synchronous) {
  if (!failure_.empty()) {
    state->complete(failure_);
    return;
  }
  if (peer_rank == links_.rank()) {
    send_to_self(std::move(state), tag, data, bytes, synchronous);
    return;
  }
  // Note [Channels on first use] in transport/src/side_channel.cpp; later sends wait behind
  // earlier ones, so that sequence numbers follow the issue order.
  Peer* reached = waiting_for_channel_.count(peer_rank) ? nullptr : reachable(peer_rank);
  if (!reached) {
    waiting_for_channel_[peer_rank].push_back([=, this] { send(state, peer_rank, tag, data, bytes, synchronous); });
    return;
  }
  Peer& to = *reached;
  const bool eager = !synchronous && goes_eagerly(to, bytes);
  if (eager && to.lane) {
    post_on_lane(to, Envelope{tag, 0, {}, bytes}, data, bytes);
    ++to.next_send_sequence;
    spend_credit(to, bytes);
    state->status = MessageStatus{links_.rank(), tag, bytes};
    state->complete({});
    return;
  }
  if (eager) {
    send_eager_by_pair(to, tag, data, bytes);
    state->status = MessageStatus{links_.rank(), tag, bytes};
    state->complete({});  // the data is copied: the caller's buffer is free
    return;
  }
  const std::uint64_t id = next_id_++;
  auto op = std::make_unique<SendOp>();
  op->peer = peer_rank;
  op->sequence = to.next_send_sequence++;
  op->data = static_cast<const std::byte*>(data);
  op->bytes = bytes;
  op->tag = tag;
  const Envelope envelope{tag, 1, {}, bytes};
  op->wire.resize(sizeof envelope);
  std::memcpy(op->wire.data(), &envelope, sizeof envelope);
  SendOp& sending = *op;
  sends_[id] = std::move(op);
  sending.state = std::move(state);
  sending.outstanding = to.lane ? 1 : 2;  // the envelope (unless on the lane), the clear-to-send
  to.pair->recv(wire_tag(Wire::clear_to_send, sending.sequence, context_), &sending.accepted, sizeof sending.accepted,
                *this, cookie(Event::cts_in, id));
  if (to.lane) {
    post_on_lane(to, envelope, nullptr, 0);
    return;
  }
  to.pair->send(wire_tag(Wire::envelope, sending.sequence, context_), sending.wire.data(), sending.wire.size(), *this,
                cookie(Event::envelope_out, id));
}

// An eager message to a peer without a lane: copied with its envelope into an eager slot (Note
// [Eager slots]), so that the send is complete at once, and handed to the channel.
void PointToPoint::send_eager_by_pair(Peer& to, int tag, const void* data, std::size_t bytes) {
  const std::uint32_t slot = take_eager_slot();
  std::vector<std::byte>& wire = eager_wires_[slot];
  const Envelope envelope{tag, 0, {}, bytes};
  wire.resize(sizeof envelope + bytes);
  std::memcpy(wire.data(), &envelope, sizeof envelope);
  if (bytes) copy_bytes(wire.data() + sizeof envelope, data, bytes);
  spend_credit(to, bytes);
  handing_over_.fetch_add(1);  // Note [Lingering work] in event_loop.cpp
  links_.loop().linger();
  to.pair->send(wire_tag(Wire::envelope, to.next_send_sequence++, context_), wire.data(), wire.size(), *this,
                cookie(Event::eager_out, slot));
}

// Within the channel's eager limit and the credit left to it; else by rendezvous.
bool PointToPoint::goes_eagerly(const Peer& to, std::size_t bytes) {
  return bytes <= to.eager_bytes && to.credit >= bytes + kEagerOverhead;
}

void PointToPoint::spend_credit(Peer& to, std::size_t bytes) {
  to.credit -= bytes + kEagerOverhead;
  if (to.hears_credit || to.lane) return;  // a lane brings credit as frames
  to.hears_credit = true;
  to.pair->recv(wire_tag(Wire::credit, to.next_credit_in, context_), nullptr, 0, *this,
                cookie(Event::credit_in, static_cast<std::uint64_t>(to.rank)));
}

// ---- The lane -----------------------------------------------------------------------------------

// Note [Fast lane]: where a peer's channel has a lane (shared memory, Note [Lanes] in
// transport/src/shm/shm_lane.h), every envelope to it, eager data included, is a frame on the
// lane instead of a Pair message: the lane keeps them in order, which is all the non-overtaking
// rule needs, and the receiver hears them in its pollers without an envelope receive posted per
// peer. Clear-to-send and rendezvous data still go by the Pair, matched by sequence; credit comes
// back as a frame (kCreditEnvelope), so that a caller that reads only its lane sees it at once (by
// the Pair, the sender ran out of credit between two polls of its pairs, and its 256-byte to
// 2-KiB messages went by rendezvous: ping-pong x 1.15-1.35).
//
// Over the lane a blocking call needs no engine state of its own. Communicator::send writes its
// frame from the caller's thread (send_now) where the message is eager, has credit and nothing to
// that peer waits before it; Communicator::recv from one peer (begin_fast_receive) takes a message
// that is already here, or, where no receive is posted before it, lends its buffer to the engine
// while its caller polls the loop for the poll window (EventLoop::spin_here): the frame that
// matches is copied straight from the lane into it. Only when that fails do they become
// operations, as before. Measured 2026-11-29 (about 01:20 UTC), 2 ranks on shared memory,
// tnt-bench-p2p latency under chrt, 7 alternating rounds, medians of per-round ratios against the
// library before: 8 bytes 0.32 -> 0.14 us, 1 KiB 0.34 -> 0.22, 4 KiB 0.90 -> 0.46, 16 KiB
// 1.77 -> 1.00; 64 KiB (rendezvous) x 1.06. With Note [Spinning here], credit on the lane and
// the lanes' masks (shm_lane.cpp), 8 bytes 0.08 us against OpenMPI vader's 0.10
// (bench/p2p/compare_osu.sh --realtime, 5 rounds, 01:45 UTC).
//
// A send to a peer without a lane (TCP, verbs) takes the same shortcut where it is eager: its
// message is copied into an eager slot and handed to the Pair (send_eager_by_pair), as send()
// does, without an OperationState. callgrind, jacobi2d's 2 KiB halo over TCP (2026-11-29):
// tnt_isend 1,830 -> 1,290 instructions. jacobi2d across 2 namespace hosts did not measurably
// change with it (13 alternating rounds, 1.002): the kernel's TCP path is most of an exchange.
void PointToPoint::post_on_lane(Peer& to, const Envelope& envelope, const void* data, std::size_t bytes) {
  if (to.lane_waiting.empty() && to.lane->write(context_, &envelope, sizeof envelope, data, bytes)) return;
  std::vector<std::byte> frame(sizeof envelope + bytes);
  std::memcpy(frame.data(), &envelope, sizeof envelope);
  if (bytes) copy_bytes(frame.data() + sizeof envelope, data, bytes);
  to.lane_waiting.push_back(std::move(frame));
  // Note [Lingering work] in event_loop.cpp. Not counted as handing over: ending the communicator
  // does not wait for these, which can take a reader's poll (a peer waiting in a host-board
  // collective does not poll its channels); the engine, retired, still writes them.
  links_.loop().linger();
}

void PointToPoint::on_lane_room(Peer& to) {
  // Also once failed: a retired engine still writes what its sends left here (a failed channel
  // drops them).
  while (!to.lane_waiting.empty()) {
    const std::vector<std::byte>& frame = to.lane_waiting.front();
    if (!to.lane->write(context_, frame.data(), sizeof(Envelope), frame.data() + sizeof(Envelope),
                        frame.size() - sizeof(Envelope)))
      return;
    to.lane_waiting.pop_front();
    links_.loop().unlinger();
  }
}

bool PointToPoint::send_now(int peer_rank, int tag, const void* data, std::size_t bytes) {
  if (!failure_.empty() || !waiting_for_channel_.empty()) return false;
  Peer* open = peers_[static_cast<std::size_t>(peer_rank)].get();
  if (!open) return false;
  Peer& to = *open;
  if (!goes_eagerly(to, bytes)) return false;
  if (!to.lane) {
    send_eager_by_pair(to, tag, data, bytes);
    return true;
  }
  if (!to.lane_waiting.empty()) return false;
  const Envelope envelope{tag, 0, {}, bytes};
  if (!to.lane->write(context_, &envelope, sizeof envelope, data, bytes)) return false;
  ++to.next_send_sequence;
  spend_credit(to, bytes);
  return true;
}

void PointToPoint::begin_fast_receive(FastReceive& receive) {
  using Outcome = FastReceive::Outcome;
  receive.outcome = Outcome::not_here;
  if (!failure_.empty() || !posted_.empty() || fast_receive_) return;
  if (receive.source < 0 || receive.source == links_.rank()) return;
  const Peer* from = peers_[static_cast<std::size_t>(receive.source)].get();
  if (!from || !from->lane) return;
  const auto found = unexpected_.empty() ? unexpected_.end()
                                         : std::find_if(unexpected_.begin(), unexpected_.end(), [&](const Arrived& a) {
                                             return matches(receive.source, receive.tag, a);
                                           });
  if (found == unexpected_.end()) {
    receive.outcome = Outcome::waiting;
    receive.lane = from->lane;
    fast_receive_ = &receive;
    return;
  }
  if (found->rendezvous) return;
  fast_receive_ = &receive;
  take_fast(*peers_[static_cast<std::size_t>(receive.source)], *found, found->eager.data() + sizeof(Envelope));
  if (spare_inboxes_.size() < 64) spare_inboxes_.push_back(std::move(found->eager));
  unexpected_.erase(found);
}

// The waiting fast receive takes `arrived` where it matches; false where it does not, or where it
// cannot (a rendezvous message: it then waits no longer, so that nothing later overtakes it).
bool PointToPoint::take_fast(Peer& from, const Arrived& arrived, const std::byte* payload) {
  FastReceive& receive = *fast_receive_;
  if (!matches(receive.source, receive.tag, arrived)) return false;
  fast_receive_ = nullptr;
  if (arrived.rendezvous) {
    receive.outcome = FastReceive::Outcome::not_here;
    return false;
  }
  // take_eager() for a receive without an OperationState, leaner: through it (copy_bytes for 8
  // bytes, the truncation's string always made, the peer looked up again) the 8-byte ping-pong was
  // x 1.12 (2026-11-29, 9 alternating rounds).
  const std::size_t taken = std::min(arrived.bytes, receive.capacity);
  if (taken) std::memcpy(receive.data, payload, taken);
  receive.status = MessageStatus{arrived.source, arrived.tag, taken};
  if (arrived.bytes > receive.capacity) receive.error = truncation(receive.capacity, arrived);
  repay(from, arrived.bytes + kEagerOverhead);
  receive.outcome = FastReceive::Outcome::done;
  return true;
}

void PointToPoint::on_lane_frame(Peer& from, const std::byte* frame, std::size_t bytes) {
  if (!failure_.empty()) return;  // a retired engine (Note [Retired engines] in communicator.cpp)
  Envelope envelope{};
  if (!read_eager_envelope(frame, bytes, envelope)) {
    if (const std::string violation = read_envelope(frame, bytes, envelope); !violation.empty()) {
      links_.fail_job("protocol violation: " + violation + " from " + links_.peer_name(from.rank));
      return;
    }
  }
  if (envelope.rendezvous == kCreditEnvelope) {
    on_credit(from);
    return;
  }
  Arrived arrived = arrival(from, envelope);
  const std::byte* payload = frame + sizeof(Envelope);
  // The fast receive is older than any receive posted while it waits (none was before it).
  if (fast_receive_ && take_fast(from, arrived, payload)) return;
  if (std::unique_ptr<ReceiveOp> receive = take_posted(arrived)) {
    if (arrived.rendezvous) {
      match(std::move(receive), std::move(arrived));
      return;
    }
    const std::string error = take_eager(*receive, arrived, payload);
    complete_receive(std::move(receive), error);
    return;
  }
  if (!arrived.rendezvous) {
    arrived.eager = spare_inbox(bytes);
    std::memcpy(arrived.eager.data(), frame, bytes);
  }
  unexpected_.push_back(std::move(arrived));
  links_.message_arrived();
}

void PointToPoint::send_to_self(std::shared_ptr<OperationState> state, int tag, const void* data, std::size_t bytes,
                                bool synchronous) {
  Arrived arrived;
  arrived.source = links_.rank();
  arrived.tag = tag;
  arrived.bytes = bytes;
  if (!synchronous && bytes <= limits_.eager_bytes) {
    arrived.eager.resize(sizeof(Envelope) + bytes);
    if (bytes) copy_bytes(arrived.eager.data() + sizeof(Envelope), data, bytes);
    state->status = MessageStatus{links_.rank(), tag, bytes};
    state->complete({});
  } else {
    // Read by the receive that matches it; the send completes then.
    const std::uint64_t id = next_id_++;
    auto op = std::make_unique<SendOp>();
    op->state = std::move(state);
    op->peer = links_.rank();
    op->data = static_cast<const std::byte*>(data);
    op->bytes = bytes;
    op->tag = tag;
    sends_[id] = std::move(op);
    arrived.rendezvous = true;
    arrived.self_send_id = id;
  }
  deliver(std::move(arrived));
}

void PointToPoint::on_clear_to_send(std::uint64_t id, std::size_t received) {
  auto found = sends_.find(id);
  if (found == sends_.end()) return;
  SendOp& send = *found->second;
  if (const std::string violation = check_clear_to_send(received, send.accepted, send.bytes); !violation.empty()) {
    links_.fail_job("protocol violation: " + violation + " from " + links_.peer_name(send.peer));
    return;
  }
  send_data(id, send);
  // The data's sends are counted; this event itself is done.
  if (--send.outstanding == 0) finish_send(id);
}

void PointToPoint::send_data(std::uint64_t id, SendOp& send) {
  Peer& to = peer(send.peer);
  const auto accepted = static_cast<std::size_t>(send.accepted);
  const std::size_t pieces = pieces_of(accepted);
  send.outstanding += static_cast<int>(pieces);
  for (std::size_t piece = 0; piece < pieces; ++piece) {
    const std::size_t offset = piece * kPieceBytes;
    const std::size_t length = std::min(kPieceBytes, accepted - std::min(offset, accepted));
    to.pair->send(wire_tag(Wire::data, send.sequence, context_, piece), send.data + offset, length, *this,
                  cookie(Event::data_out, id));
  }
}

void PointToPoint::finish_send(std::uint64_t id, const std::string& error) {
  auto found = sends_.find(id);
  if (found == sends_.end()) return;
  std::unique_ptr<SendOp> send = std::move(found->second);
  sends_.erase(found);
  if (send->state) {
    send->state->status = MessageStatus{links_.rank(), send->tag, send->bytes};
    send->state->complete(error);
  }
}

// ---- Receiving ----------------------------------------------------------------------------------

void PointToPoint::receive(std::shared_ptr<OperationState> state, int source, int tag, void* data,
                           std::size_t capacity) {
  if (!failure_.empty()) {
    state->complete(failure_);
    return;
  }
  std::unique_ptr<ReceiveOp> op = new_receive();
  op->state = std::move(state);
  op->source = source;
  op->tag = tag;
  op->data = static_cast<std::byte*>(data);
  op->capacity = capacity;
  auto found =
      std::find_if(unexpected_.begin(), unexpected_.end(), [&](const Arrived& a) { return matches(source, tag, a); });
  if (found == unexpected_.end()) {
    op->posted_at = receive_clock();
    posted_.push_back(std::move(op));
    watch_receives();
    return;
  }
  Arrived arrived = std::move(*found);
  unexpected_.erase(found);
  match(std::move(op), std::move(arrived));
}

std::optional<MessageStatus> PointToPoint::probe(int source, int tag) {
  for (const Arrived& a : unexpected_) {
    if (matches(source, tag, a)) return MessageStatus{a.source, a.tag, a.bytes};
  }
  return std::nullopt;
}

void PointToPoint::on_envelope(Peer& from, std::size_t bytes) {
  Envelope envelope{};
  std::string violation = read_envelope(from.inbox.data(), bytes, envelope);
  if (violation.empty() && envelope.rendezvous == kCreditEnvelope) violation = "a credit envelope outside a lane";
  if (!violation.empty()) {
    links_.fail_job("protocol violation: " + violation + " from " + links_.peer_name(from.rank));
    return;
  }
  Arrived arrived = arrival(from, envelope);
  const bool rendezvous = arrived.rendezvous;
  std::unique_ptr<ReceiveOp> receive = take_posted(arrived);
  if (!rendezvous && !receive) {
    // Kept with the inbox it came in; the next envelope gets another.
    arrived.eager = std::move(from.inbox);
    from.inbox = spare_inbox(sizeof(Envelope) + from.eager_bytes);
  }
  if (receive && !rendezvous) {
    // Out of the inbox before the next envelope may land in it.
    const std::string error = take_eager(*receive, arrived, from.inbox.data() + sizeof(Envelope));
    listen(from);
    complete_receive(std::move(receive), error);
    return;
  }
  listen(from);
  if (receive) {
    match(std::move(receive), std::move(arrived));
    return;
  }
  unexpected_.push_back(std::move(arrived));
  links_.message_arrived();
}

std::vector<std::byte> PointToPoint::spare_inbox(std::size_t bytes) {
  auto spare = std::find_if(spare_inboxes_.begin(), spare_inboxes_.end(),
                            [&](const std::vector<std::byte>& inbox) { return inbox.size() == bytes; });
  if (spare == spare_inboxes_.end()) return std::vector<std::byte>(bytes);
  std::vector<std::byte> inbox = std::move(*spare);
  *spare = std::move(spare_inboxes_.back());
  spare_inboxes_.pop_back();
  return inbox;
}

std::unique_ptr<PointToPoint::ReceiveOp> PointToPoint::take_posted(const Arrived& arrived) {
  auto found = std::find_if(posted_.begin(), posted_.end(),
                            [&](const std::unique_ptr<ReceiveOp>& r) { return matches(r->source, r->tag, arrived); });
  if (found == posted_.end()) return nullptr;
  std::unique_ptr<ReceiveOp> receive = std::move(*found);
  if (found == posted_.begin())
    posted_.pop_front();  // the common case, at a fraction of erase()'s cost
  else
    posted_.erase(found);
  return receive;
}

void PointToPoint::deliver(Arrived arrived) {
  if (auto receive = take_posted(arrived)) {
    match(std::move(receive), std::move(arrived));
    return;
  }
  unexpected_.push_back(std::move(arrived));
  links_.message_arrived();
}

std::string PointToPoint::take_eager(ReceiveOp& receive, const Arrived& arrived, const std::byte* payload) {
  const std::size_t taken = std::min(arrived.bytes, receive.capacity);
  receive.state->status = MessageStatus{arrived.source, arrived.tag, taken};
  if (taken) copy_bytes(receive.data, payload, taken);
  if (arrived.source != links_.rank()) repay(peer(arrived.source), arrived.bytes + kEagerOverhead);
  return arrived.bytes <= receive.capacity ? std::string() : truncation(receive.capacity, arrived);
}

bool PointToPoint::matches(int source, int tag, const Arrived& arrived) {
  return (source == any_source || arrived.source == source) && (tag == any_tag || arrived.tag == tag);
}

PointToPoint::Arrived PointToPoint::arrival(Peer& from, const Envelope& envelope) {
  Arrived arrived;
  arrived.source = from.rank;
  arrived.tag = envelope.tag;
  arrived.bytes = static_cast<std::size_t>(envelope.bytes);
  arrived.rendezvous = envelope.rendezvous != 0;
  arrived.sequence = from.next_receive_sequence++;
  return arrived;
}

std::string PointToPoint::truncation(std::size_t capacity, const Arrived& arrived) const {
  if (arrived.bytes <= capacity) return {};
  return "message truncated: " + std::to_string(arrived.bytes) + " bytes from rank " + std::to_string(arrived.source) +
         " (" + describe_tag(arrived.tag) + ") do not fit a receive of " + std::to_string(capacity) + " bytes";
}

void PointToPoint::match(std::unique_ptr<ReceiveOp> receive, Arrived arrived) {
  if (!arrived.rendezvous) {
    const std::string error = take_eager(*receive, arrived, arrived.eager.data() + sizeof(Envelope));
    // A send to this rank itself carries a buffer of its own size: only inboxes are kept.
    if (arrived.source != links_.rank() && spare_inboxes_.size() < 64)
      spare_inboxes_.push_back(std::move(arrived.eager));
    complete_receive(std::move(receive), error);
    return;
  }
  const std::size_t taken = std::min(arrived.bytes, receive->capacity);
  receive->error = truncation(receive->capacity, arrived);
  receive->state->status = MessageStatus{arrived.source, arrived.tag, taken};
  if (arrived.self_send_id) {
    auto send = sends_.find(arrived.self_send_id);
    if (taken) copy_bytes(receive->data, send->second->data, taken);
    finish_send(arrived.self_send_id);
    const std::string error = receive->error;
    complete_receive(std::move(receive), error);
    return;
  }
  const std::uint64_t id = next_id_++;
  ReceiveOp& transfer = *receive;
  transfers_[id] = std::move(receive);
  transfer.accepted = taken;
  const std::size_t pieces = pieces_of(taken);
  transfer.outstanding = static_cast<int>(pieces) + 1;
  Peer& from = peer(arrived.source);
  for (std::size_t piece = 0; piece < pieces; ++piece) {
    const std::size_t offset = piece * kPieceBytes;
    const std::size_t length = std::min(kPieceBytes, taken - std::min(offset, taken));
    from.pair->recv(wire_tag(Wire::data, arrived.sequence, context_, piece), transfer.data + offset, length, *this,
                    cookie(Event::data_in, id));
  }
  from.pair->send(wire_tag(Wire::clear_to_send, arrived.sequence, context_), &transfer.accepted,
                  sizeof transfer.accepted, *this, cookie(Event::cts_out, id));
}

void PointToPoint::finish_receive(std::uint64_t id, const std::string& error) {
  auto found = transfers_.find(id);
  if (found == transfers_.end()) return;
  std::unique_ptr<ReceiveOp> receive = std::move(found->second);
  transfers_.erase(found);
  const std::string failure = error.empty() ? receive->error : error;
  complete_receive(std::move(receive), failure);
}

// Note [Spare receives]: a finished ReceiveOp is kept for the next receive (a posted receive
// allocated its op and a list node and freed both again: a third of irecv's instructions in
// jacobi2d's small-grid loop, callgrind, 2026-11-29). It goes back before its state completes,
// since what completes may post the next receive.
void PointToPoint::complete_receive(std::unique_ptr<ReceiveOp> receive, const std::string& error) {
  const std::shared_ptr<OperationState> state = std::move(receive->state);
  if (spare_receives_.size() < kSpareReceives) {
    // What receive() does not set again.
    receive->error.clear();
    receive->warned = false;
    receive->accepted = 0;
    receive->outstanding = 0;
    spare_receives_.push_back(std::move(receive));
  }
  state->error_is_local = !error.empty();
  state->complete(error);
}

std::unique_ptr<PointToPoint::ReceiveOp> PointToPoint::new_receive() {
  if (spare_receives_.empty()) return std::make_unique<ReceiveOp>();
  std::unique_ptr<ReceiveOp> spare = std::move(spare_receives_.back());
  spare_receives_.pop_back();
  return spare;
}

// ---- Receives nobody sends to ------------------------------------------------------------------

// Note [Receives nobody sends to]: the stall watch of point-to-point. A receive that has waited
// TNT_STALL_WARN_S with nothing matching it is named in a warning, with the messages that do wait
// here unreceived (a wrong tag or source shows there); the peer is alive, or the job would have
// failed naming it. With TNT_STALL_TIMEOUT_S such a receive fails this rank's job after that
// long: its caller gets the JobError, and the other ranks learn of it as this rank ends or aborts.
void PointToPoint::watch_receives() {
  if (watching_ || posted_.empty()) return;
  watching_ = true;
  receive_watch_.expires_after(std::chrono::milliseconds(500));
  receive_watch_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: this engine may be gone
    watching_ = false;
    if (!failure_.empty()) return;
    check_receives();
    watch_receives();
  });
}

void PointToPoint::check_receives() {
  const auto& env = links_.environment();
  const auto now = std::chrono::steady_clock::now();
  for (auto& receive : posted_) {
    const auto waited = now - receive->posted_at;
    const bool over_timeout = env.stall_timeout.count() > 0 && waited >= env.stall_timeout;
    if (!over_timeout && (receive->warned || waited < env.stall_warn)) continue;
    std::string waiting;
    std::size_t shown = 0;
    for (const Arrived& a : unexpected_) {
      if (shown++ == 4) {
        waiting += ", ...";
        break;
      }
      waiting += (shown > 1 ? ", " : "") + std::string("from rank ") + std::to_string(a.source) + " with " +
                 describe_tag(a.tag) + " (" + std::to_string(a.bytes) + " bytes)";
    }
    const std::string what =
        "rank " + std::to_string(links_.rank()) + " has waited " +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(waited).count()) + " s in a receive from " +
        (receive->source == any_source ? std::string("any rank") : links_.peer_name(receive->source)) + " with " +
        describe_tag(receive->tag) + " and no rank has sent a message it matches; waiting here unreceived: " +
        (waiting.empty() ? std::string("none") : waiting) + " (Note [Receives nobody sends to])";
    if (over_timeout) {
      links_.fail_job("point-to-point stall: " + what + "; TNT_STALL_TIMEOUT_S ends the job");
      return;
    }
    receive->warned = true;
    spdlog::warn("{}", what);
  }
}

// ---- Credit -------------------------------------------------------------------------------------

std::size_t PointToPoint::credit_quantum() const { return std::max<std::size_t>(1, limits_.credit_bytes / 4); }

void PointToPoint::repay(Peer& to, std::size_t bytes) {
  to.owed += bytes;
  while (to.owed >= credit_quantum()) {
    to.owed -= credit_quantum();
    if (to.lane) {
      post_on_lane(to, Envelope{0, kCreditEnvelope, {}, 0}, nullptr, 0);
      continue;
    }
    to.pair->send(wire_tag(Wire::credit, to.next_credit_out++, context_), nullptr, 0, *this,
                  cookie(Event::credit_out, static_cast<std::uint64_t>(to.rank)));
  }
}

void PointToPoint::on_credit(Peer& from) {
  std::string violation;
  from.credit = return_credit(from.credit, credit_quantum(), limits_.credit_bytes, violation);
  if (!violation.empty()) {
    links_.fail_job("protocol violation: " + violation + " by " + links_.peer_name(from.rank));
    return;
  }
  if (from.lane) return;  // no receive to post again
  ++from.next_credit_in;
  from.pair->recv(wire_tag(Wire::credit, from.next_credit_in, context_), nullptr, 0, *this,
                  cookie(Event::credit_in, static_cast<std::uint64_t>(from.rank)));
}

// ---- Completions --------------------------------------------------------------------------------

void PointToPoint::on_send_complete(std::uint64_t done) {
  if (!failure_.empty()) return;
  const std::uint64_t id = id_of(done);
  switch (event_of(done)) {
    case Event::eager_out:
      handed_over();
      release_eager_slot(static_cast<std::uint32_t>(id));
      return;
    case Event::envelope_out: {
      auto found = sends_.find(id);
      if (found != sends_.end() && --found->second->outstanding == 0) finish_send(id);
      return;
    }
    case Event::data_out: {
      auto found = sends_.find(id);
      if (found == sends_.end()) return;
      if (--found->second->outstanding == 0) finish_send(id);
      return;
    }
    case Event::cts_out: {
      auto found = transfers_.find(id);
      if (found != transfers_.end() && --found->second->outstanding == 0) finish_receive(id);
      return;
    }
    default: return;
  }
}

void PointToPoint::on_recv_complete(std::uint64_t done, std::size_t bytes) {
  if (!failure_.empty()) return;
  const std::uint64_t id = id_of(done);
  switch (event_of(done)) {
    case Event::envelope_in: {
      if (id < peers_.size() && peers_[id]) on_envelope(*peers_[id], bytes);
      return;
    }
    case Event::credit_in: {
      if (id < peers_.size() && peers_[id]) on_credit(*peers_[id]);
      return;
    }
    case Event::cts_in: on_clear_to_send(id, bytes); return;
    case Event::data_in: {
      auto found = transfers_.find(id);
      if (found == transfers_.end()) return;
      if (--found->second->outstanding == 0) finish_receive(id);
      return;
    }
    default: return;
  }
}

// Note [Eager slots]: an eager message is copied, with its envelope, into a buffer of this
// engine's, and the send completes at once; the buffer is the channel's until it has handed the
// bytes over. Such buffers are slots, reused once their channel is done with them, so an eager
// send allocates nothing once the engine has as many slots as it ever had messages on the way.
// Before, each one allocated its SendOp, its buffer and a hash-map node, and freed them again
// (callgrind of an 8-byte ping-pong, 2026-11-28). Buffers larger than kKeptEagerBytes are given
// back rather than kept: slots are as many as the most eager messages ever in flight at once.
std::uint32_t PointToPoint::take_eager_slot() {
  if (free_eager_slots_.empty()) {
    eager_wires_.emplace_back();  // moves the other buffers' vectors, never their bytes
    return static_cast<std::uint32_t>(eager_wires_.size() - 1);
  }
  const std::uint32_t slot = free_eager_slots_.back();
  free_eager_slots_.pop_back();
  return slot;
}

void PointToPoint::release_eager_slot(std::uint32_t slot) {
  if (slot >= eager_wires_.size()) return;
  if (eager_wires_[slot].capacity() > kKeptEagerBytes) std::vector<std::byte>().swap(eager_wires_[slot]);
  free_eager_slots_.push_back(slot);
}

void PointToPoint::handed_over() {
  handing_over_.fetch_sub(1);
  links_.loop().unlinger();
}

void PointToPoint::fail_all(const std::string& reason) {
  if (!failure_.empty()) return;
  failure_ = reason;
  receive_watch_.cancel();
  // Completions are ignored from now on: nobody may wait for these any longer.
  while (handing_over_.load() > 0) handed_over();
  // The sends and matched receives themselves stay until the engine goes: a channel may still
  // read an eager message's wire buffer or write a clear-to-send into its send (Note [Retired
  // engines] in communicator.cpp). Freed here, a TCP write sent freed memory to the peer, which
  // failed on "a point-to-point envelope of unknown kind" (Split over TCP, once sends completed
  // on the calling thread, Note [Running here]).
  std::vector<std::shared_ptr<OperationState>> failing;
  for (auto& [id, send] : sends_)
    if (send->state) failing.push_back(std::move(send->state));
  for (auto& [id, receive] : transfers_)
    if (receive->state) failing.push_back(std::move(receive->state));
  for (auto& receive : posted_) failing.push_back(std::move(receive->state));
  posted_.clear();
  unexpected_.clear();
  for (auto& state : failing) state->complete(reason);
  // Each waiting send completes with the failure when it runs.
  auto waiting = std::move(waiting_for_channel_);
  waiting_for_channel_.clear();
  for (auto& [rank, queued] : waiting)
    for (auto& send : queued) send();
}

}  // namespace tnt::detail
