#pragma once
// One communicator of a world: its ranks, context, rings, calls and operations (Note [World and
// groups] in communicator.cpp).
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "board_collectives.h"
#include "call_log.h"
#include "choice.h"
#include "operation.h"
#include "point_to_point.h"
#include "tnt/collectives/communicator.h"
#include "tnt/transport/host_board.h"
#include "topology.h"

namespace tnt::detail {

class Group final : public CommunicatorCore, public BoardOwner, public PeerLinks {
 public:
  // `members`: the world ranks of the group, by group rank (this process's among them); `id`: its
  // context id, new in every member process (the world's is 0).
  Group(Communicator::Impl& world, std::vector<int> members, std::uint32_t id);
  // Waits for the group's collectives; fails its pending point-to-point operations.
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  // The group's rings as world ranks: connected at start-up for the world, opened by open_rings()
  // (blocking, bounded by the connect timeout) for a group made later.
  std::vector<int> ring_peers_in_world() const;
  void open_rings();
  void use_board(transport::HostBoard& board);  // the world's group, where the board holds every rank
  bool has_board() const { return board_.has_value(); }
  BoardCollectives& board() { return *board_; }
  CallLog& calls() { return calls_; }
  int world_rank(int rank) const { return members_[static_cast<std::size_t>(rank)]; }
  std::uint32_t id() const { return id_; }
  Communicator::Impl& world() { return world_; }

  Algorithm choose(Collective what, std::size_t bytes, bool blocking);

  // Who waits for an operation: its caller, at once (a blocking call runs the data loop
  // itself); most likely its issuer, soon, in a wait or test of its request (a nonblocking
  // point-to-point call: Note [Awaited work] in event_loop.cpp); or possibly nobody (then the
  // progress thread must run the loop until it ends).
  enum class Waiter { caller, issuer_soon, unknown };
  template <class Op, class... Args>
  Request issue(Waiter waiter, CompletionCallback done, const CallSignature& call, Args... args);
  // A point-to-point operation: `start(engine, state)` runs on the strand, or at once on the
  // calling thread where `start_here` and the loop is free (Note [Running here] in event_loop.cpp).
  template <class Start>
  Request issue_p2p(Waiter waiter, Start start, bool start_here = false);
  // Note [Fast lane] in point_to_point.cpp: a blocking send or receive done at once on the caller's
  // thread, without an operation; false or nullopt where it has to become one (nothing done).
  bool send_now(const void* data, std::size_t bytes, int peer, int tag);
  std::optional<MessageStatus> receive_now(void* data, std::size_t capacity, int peer, int tag);
  std::optional<MessageStatus> probe_now(int peer, int tag);
  MessageStatus probe(int peer, int tag);

  // On the strand: the world failed; every operation of this group fails with `reason`.
  void fail_operations(const std::string& reason);
  // On the strand: a channel to `world_rank` has opened.
  void on_channel(int world_rank);

  // ---- CommunicatorCore ----
  int rank() const override { return index_; }
  int size() const override { return static_cast<int>(members_.size()); }
  transport::Pair& left() override;
  transport::Pair& right() override;
  const Topology& topology() const override { return topology_; }
  transport::Pair& pair(int peer) override;
  std::size_t segment_bytes() const override;
  int pipeline_depth() const override;
  // Note [Contexts]: communicator c's ring collectives use context 4c, its point-to-point 4c + 1,
  // the collectives built on point-to-point 4c + 2 (Note [Exchanges]).
  std::uint32_t collective_context() const override { return 4 * id_; }
  PointToPoint& collective_messages() override;
  std::vector<std::byte> acquire(std::size_t bytes) override;
  void release(std::vector<std::byte> buffer) override;
  void complete(Operation& op, const std::string& failure) override;
  void fail_job(const std::string& reason) override;

  // ---- PeerLinks ----
  transport::Pair* channel(int peer) override;
  void open_channel(int peer) override;
  std::string peer_name(int peer) const override;
  void message_arrived() override;
  transport::EventLoop& loop() override;
  const JobEnvironment& environment() const override;

  // ---- BoardOwner ----
  std::uint64_t issue_board_call(const CallSignature& call, std::uint64_t signature) override;
  void board_call_completed(std::uint64_t sequence) override;
  bool failed() const override;
  std::string failure() const override;
  void fail_from_caller(const std::string& reason) override;

 private:
  std::shared_ptr<OperationState> new_state(Waiter waiter, CompletionCallback done, const char* what);
  PointToPoint& point_to_point();

  Communicator::Impl& world_;
  const std::vector<int> members_;
  const std::uint32_t id_;
  int index_ = 0;  // this rank's place in members_
  Topology topology_;
  int left_ = 0;  // the group's ring (Note [Node-aware order]), as group ranks
  int right_ = 0;
  AlgorithmSettings algorithms_;
  std::atomic<bool> told_hierarchical_{false};
  std::optional<BoardCollectives> board_;

  std::mutex issue_mutex_;  // operations reach the data loop in the order of their sequence numbers
  CallLog calls_;
  std::atomic<int> active_{0};
  std::atomic<std::uint64_t> arrivals_{0};  // point-to-point messages announced so far (for probe)
  std::atomic<int> p2p_queued_{0};          // point-to-point starts posted to the strand, not yet run
  std::atomic<int> starts_queued_{0};       // collective starts posted to the strand, not yet run
  std::atomic<int> channels_waiting_{0};    // open_rings(): channels not open yet

  // Touched only on the event loop's strand.
  std::vector<int> channels_needed_;
  std::unique_ptr<PointToPoint> p2p_;                     // made on first use
  std::unique_ptr<PointToPoint> exchanges_;               // made on first use
  std::vector<std::unique_ptr<Operation>> ops_;           // running
  std::vector<std::unique_ptr<Operation>> finished_ops_;  // Note [Finished operations] in communicator.cpp
  std::vector<std::vector<std::byte>> scratch_;
};

}  // namespace tnt::detail
