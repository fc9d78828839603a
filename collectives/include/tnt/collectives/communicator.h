#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "tnt/collectives/types.h"
#include "tnt/core/asio.h"
#include "tnt/core/error.h"
#include "tnt/transport/environment.h"

namespace tnt {

namespace detail {
struct OperationState;
class Group;
}  // namespace detail

// Point-to-point wildcards, for receives and probes only.
inline constexpr int any_source = -1;
inline constexpr int any_tag = -1;

// What a receive (or probe) found: who sent it, with which tag, and how many bytes it holds
// (for a send: this rank, its tag and its size).
struct MessageStatus {
  int source = -1;
  int tag = -1;
  std::size_t bytes = 0;
};

// What Communicator::recv() throws for a message larger than its buffer, which holds what fitted:
// `status` names the message's source and tag, and the bytes taken (the buffer's size).
class ReceiveTruncated : public TruncationError {
 public:
  ReceiveTruncated(const std::string& what, MessageStatus status) : TruncationError(what), status_(status) {}
  MessageStatus status() const { return status_; }

 private:
  MessageStatus status_;
};

enum class SendMode : std::uint8_t {
  standard,     // completes once the buffer may be reused
  synchronous,  // completes once the matching receive has started (MPI_Ssend)
};

// Handle of an asynchronous operation. Copyable; all copies refer to the same operation.
class Request {
 public:
  Request() = default;
  bool valid() const { return state_ != nullptr || finished_at_issue_; }
  // True once the operation has finished, successfully or not. Never blocks.
  bool test() const;
  // Blocks until the operation finishes; throws tnt::JobError if it failed, tnt::TruncationError
  // for a receive that failed alone because its message did not fit. Bounded: a lost or silent peer fails
  // the job within TNT_PEER_TIMEOUT_S.
  void wait() const;
  // As wait(), but gives up after `timeout` and returns false (the operation goes on).
  bool wait_for(std::chrono::milliseconds timeout) const;
  // Of a finished point-to-point operation (see MessageStatus); empty before it finishes.
  MessageStatus status() const;

  // Over several requests; invalid (empty) ones are skipped. wait_all throws the first failure
  // after all have finished; wait_any returns the index of a finished one (requests.size() if
  // none is valid) and, like test_any, throws if that one failed.
  static void wait_all(std::span<const Request> requests);
  static std::size_t wait_any(std::span<const Request> requests);
  static std::optional<std::size_t> test_any(std::span<const Request> requests);
  static bool test_all(std::span<const Request> requests);
  // The same over requests held elsewhere (the C API's handles); null pointers are skipped, and
  // an index is a pointer's. Nothing is copied: a Request copy costs two atomic reference counts.
  static void wait_all(std::span<const Request* const> requests);
  static std::size_t wait_any(std::span<const Request* const> requests);
  static std::optional<std::size_t> test_any(std::span<const Request* const> requests);
  static bool test_all(std::span<const Request* const> requests);

 private:
  friend class Communicator;
  friend class detail::Group;
  explicit Request(std::shared_ptr<detail::OperationState> state) : state_(std::move(state)) {}
  // An operation that finished, successfully, as it was issued (an eager send on a lane, Note
  // [Fast lane] in point_to_point.cpp): it needs no state, only its status.
  explicit Request(MessageStatus finished) : status_(finished), finished_at_issue_(true) {}
  bool done() const;  // without polling
  // The bodies of wait_all and the others, over either kind of span (Note [Request sets]).
  template <class Requests>
  static void wait_all_in(Requests requests);
  template <class Requests>
  static std::size_t wait_any_in(Requests requests);
  template <class Requests>
  static std::optional<std::size_t> test_any_in(Requests requests);
  template <class Requests>
  static bool test_all_in(Requests requests);

  std::shared_ptr<detail::OperationState> state_;
  MessageStatus status_;
  bool finished_at_issue_ = false;
};

// Called once on tnt's event loop when an asynchronous collective finishes: `error` is empty
// on success, else it says why the job failed. Keep it short; it may issue new collectives
// but must not block on one.
using CompletionCallback = std::function<void(const std::string& error)>;

struct CommunicatorOptions {
  // Describes the run; ranks whose configurations differ are refused at start-up.
  std::string configuration;
  // The job; default: read from the TNT_* environment (a lone process is a job of size 1).
  std::optional<JobEnvironment> environment;
  // Share the embedding code's event loop instead of starting progress threads. Then some
  // thread must run it, or the blocking calls below drive it themselves.
  boost::asio::io_context* io_context = nullptr;
  // Largest ring pipeline segment (env TNT_SEGMENT_KB, default 512 KiB; chunks are cut into at
  // least 4 segments of at least 128 KiB below it) and how many segments may be in flight per
  // operation (TNT_PIPELINE_DEPTH, default 4). Small segments test the many-segment paths.
  std::size_t segment_bytes = 0;
  int pipeline_depth = 0;
  // Allreduces up to this size gather every rank's buffer and reduce locally, in rank order:
  // fewer steps than the ring (env TNT_SMALL_ALLREDUCE_KB, default 16 KiB).
  std::size_t small_allreduce_bytes = std::size_t(-1);
  // A thread blocked in a collective polls the network this long before it sleeps (env
  // TNT_WAIT_POLL_US; unset: 500 us, or 0 where this host's ranks outnumber its cores; 0 sleeps
  // at once). Only blocked callers poll, never the progress thread that runs asynchronous
  // collectives beside computation.
  std::chrono::microseconds poll_before_sleep{-1};
  // Once the job has failed (on any rank, for any reason), this process exits with status 1 if
  // it has not ended by itself within this time: a rank busy outside tnt's calls (computing,
  // reading data) then cannot outlive the job it belongs to. Unset (the default): the process
  // goes on, and its next tnt call throws the failure. tnt-train sets it (Note [One failure,
  // every rank told] in transport/src/rendezvous/control_plane.cpp).
  std::optional<std::chrono::milliseconds> exit_after_failure;
};

// A job's ranks and the collectives among them (Tarantella's rank API plus MPI-like
// collectives). Every rank must issue the same collectives, with the same counts, types and
// roots, in the same order; they are matched by issue order. Any number may be in flight.
//
// Threading: calls may come from any thread, one at a time (the issue order is the order of
// the calls). Completions run on tnt's event loop: on its progress thread, or on a thread that
// is blocked in a tnt call and runs the loop meanwhile (the embedding code's, with its own
// io_context). A completion callback must therefore not take a lock that such a caller holds.
//
// Errors: the first failure (a lost or silent peer, a refused rank, mismatched calls) is
// sticky: it fails every pending operation and every later call with a tnt::JobError that
// names the rank and host.
//
// One world per process: every Communicator built from the environment (options without an
// environment or an io_context) in one process is the same world, joined by the first and left
// by the last to go; they share one issue order, and finish() or abort() on one ends it for all.
// The first one's options hold for all; a later one with another configuration is refused.
class Communicator {
 public:
  explicit Communicator(CommunicatorOptions options = {});
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  // Waits for pending operations, then says goodbye to the other ranks unless finish() or
  // abort() was called; a failure in the goodbye is logged (call finish() to have it thrown).
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  int master_rank() const { return 0; }
  bool is_master_rank() const { return rank() == master_rank(); }
  const JobEnvironment& environment() const;

  // Orderly end: waits for pending operations, says goodbye and returns once every rank has
  // said it; throws tnt::JobError if the job failed before or meanwhile. No collective may be
  // issued afterwards.
  void finish();
  // This rank cannot go on (`reason` says why, e.g. a file it alone writes): the job fails on
  // every rank within moments, each naming this rank and `reason`, and every pending or later
  // collective here and there throws tnt::JobError. Returns once the other ranks are told (or
  // after a second); the communicator is failed afterwards. Not from a completion callback.
  void abort(const std::string& reason);

  // In-place allreduce of `count` elements. bfloat16 is added in float32 and travels as
  // bfloat16, so partial sums are rounded on the way (on more than two ranks; Note [bf16 on the
  // ring] in collectives/src/ring.cpp). avg of integers divides the sum by size() rounding toward
  // zero.
  Request allreduce_async(void* data, std::size_t count, DataType type, ReduceOp op, CompletionCallback done = {});
  void allreduce(void* data, std::size_t count, DataType type, ReduceOp op);
  // Whether a blocking allreduce of `bytes` goes through the host board (every rank on one host:
  // Note [Host board] in transport/src/shm/host_board.cpp), which needs no event loop. There a
  // thread that may wait, such as a communication thread, gets its result sooner by blocking
  // than by allreduce_async.
  bool host_board_serves(std::size_t bytes) const;
  template <class T>
  void allreduce(std::span<T> data, ReduceOp op) {
    allreduce(data.data(), data.size(), data_type_of<std::remove_const_t<T>>(), op);
  }

  // Root's `bytes` bytes reach every rank's `data`.
  Request broadcast_async(void* data, std::size_t bytes, int root, CompletionCallback done = {});
  void broadcast(void* data, std::size_t bytes, int root);

  // Every rank contributes `bytes_per_rank` bytes; `recv` (size() * bytes_per_rank bytes)
  // gets them in rank order. `send` may alias recv's own block.
  Request allgather_async(const void* send, void* recv, std::size_t bytes_per_rank, CompletionCallback done = {});
  void allgather(const void* send, void* recv, std::size_t bytes_per_rank);

  // In place: afterwards this rank's block of `data` (see block()) holds the reduction of
  // that block over all ranks; the other blocks hold partial sums.
  Request reduce_scatter_async(void* data, std::size_t count, DataType type, ReduceOp op, CompletionCallback done = {});
  void reduce_scatter(void* data, std::size_t count, DataType type, ReduceOp op);
  struct Block {
    std::size_t offset;
    std::size_t count;
  };
  // Rank r's block of `count` elements: the first count % size ranks hold one element more.
  static Block block(std::size_t count, int size, int r);

  Request barrier_async(CompletionCallback done = {});
  void barrier();

  // ---- The rest of MPI's collectives (Note [Exchanges] in collectives/src/exchange.cpp) -------
  // Blocks are bytes, in rank order. The *v forms take per-rank byte counts and byte offsets into
  // the buffer they describe (size() each); ranks must agree (what r sends s is what s receives
  // from r). The reductions are the fold of the ranks' inputs in rank order, bitwise the same on
  // every rank and for every algorithm.
  Request alltoall_async(const void* send, void* recv, std::size_t bytes_per_rank, CompletionCallback done = {});
  void alltoall(const void* send, void* recv, std::size_t bytes_per_rank);
  Request alltoallv_async(const void* send, std::span<const std::size_t> send_bytes,
                          std::span<const std::size_t> send_offsets, void* recv,
                          std::span<const std::size_t> recv_bytes, std::span<const std::size_t> recv_offsets,
                          CompletionCallback done = {});
  void alltoallv(const void* send, std::span<const std::size_t> send_bytes, std::span<const std::size_t> send_offsets,
                 void* recv, std::span<const std::size_t> recv_bytes, std::span<const std::size_t> recv_offsets);
  // Every rank's `send_bytes` bytes into every rank's `recv`, at recv_offsets[r] (recv_bytes[r]
  // must be rank r's send_bytes). `send` may be this rank's own block of `recv` (in place).
  Request allgatherv_async(const void* send, std::size_t send_bytes, void* recv,
                           std::span<const std::size_t> recv_bytes, std::span<const std::size_t> recv_offsets,
                           CompletionCallback done = {});
  void allgatherv(const void* send, std::size_t send_bytes, void* recv, std::span<const std::size_t> recv_bytes,
                  std::span<const std::size_t> recv_offsets);
  // To `root`'s `recv` (size() blocks); `send` may be root's own block of `recv` (in place).
  Request gather_async(const void* send, void* recv, std::size_t bytes_per_rank, int root,
                       CompletionCallback done = {});
  void gather(const void* send, void* recv, std::size_t bytes_per_rank, int root);
  Request gatherv_async(const void* send, std::size_t send_bytes, void* recv, std::span<const std::size_t> recv_bytes,
                        std::span<const std::size_t> recv_offsets, int root, CompletionCallback done = {});
  void gatherv(const void* send, std::size_t send_bytes, void* recv, std::span<const std::size_t> recv_bytes,
               std::span<const std::size_t> recv_offsets, int root);
  // From `root`'s `send` (size() blocks); only root's `send` and counts are read.
  Request scatter_async(const void* send, void* recv, std::size_t bytes_per_rank, int root,
                        CompletionCallback done = {});
  void scatter(const void* send, void* recv, std::size_t bytes_per_rank, int root);
  Request scatterv_async(const void* send, std::span<const std::size_t> send_bytes,
                         std::span<const std::size_t> send_offsets, void* recv, std::size_t recv_bytes, int root,
                         CompletionCallback done = {});
  void scatterv(const void* send, std::span<const std::size_t> send_bytes, std::span<const std::size_t> send_offsets,
                void* recv, std::size_t recv_bytes, int root);
  // The fold of every rank's `send` into root's `recv`; at root `send` may be `recv` (in place).
  Request reduce_async(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op, int root,
                       CompletionCallback done = {});
  void reduce(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op, int root);
  // Rank r's `recv`: the fold of ranks 0..r (scan) or 0..r-1 (exscan, whose rank 0 `recv` is
  // left as it is). `send` may be `recv`. avg has no meaning here and is refused.
  Request scan_async(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op,
                     CompletionCallback done = {});
  void scan(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op);
  Request exscan_async(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op,
                       CompletionCallback done = {});
  void exscan(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op);
  // Rank r's `recv` (counts[r] elements): the fold of block r of every rank's `send`, whose
  // blocks are counts[0], counts[1], ... elements long.
  Request reduce_scatter_async(const void* send, void* recv, std::span<const std::size_t> counts, DataType type,
                               ReduceOp op, CompletionCallback done = {});
  void reduce_scatter(const void* send, void* recv, std::span<const std::size_t> counts, DataType type, ReduceOp op);

  // ---- Point-to-point (Note [Point-to-point] in collectives/src/point_to_point.cpp) -----------
  // MPI's semantics: a receive matches the first message, in the order sent, from `peer` (or
  // any_source) with `tag` (or any_tag); messages from one sender with one tag are received in
  // the order sent. Tags are >= 0. Any size; a receive's `capacity` may exceed the message
  // (status().bytes says what came); a larger message fails the receive, which keeps what fits.
  // A peer is a rank of this communicator, this rank included.
  Request isend(const void* data, std::size_t bytes, int peer, int tag, SendMode mode = SendMode::standard);
  Request irecv(void* data, std::size_t capacity, int peer, int tag);
  void send(const void* data, std::size_t bytes, int peer, int tag, SendMode mode = SendMode::standard);
  // Throws ReceiveTruncated for a message larger than `capacity`.
  MessageStatus recv(void* data, std::size_t capacity, int peer, int tag);
  // Both at once, so that two ranks may exchange without deadlock.
  MessageStatus sendrecv(const void* send_data, std::size_t send_bytes, int dest, int send_tag, void* recv_data,
                         std::size_t capacity, int source, int recv_tag);
  // The message a receive (peer, tag) would match next, without receiving it: probe() waits for
  // one, iprobe() does not.
  MessageStatus probe(int peer, int tag);
  std::optional<MessageStatus> iprobe(int peer, int tag);

  // ---- Communicators of communicators (Note [World and groups] in collectives/src/communicator.cpp)
  // Collective over this communicator. split(): the ranks that give the same color form a new
  // communicator, ranked by key (ties by their rank here); a negative color gives none. dup(): all
  // ranks, in this order. Each new communicator has a context of its own: its collectives and
  // messages never match another's, whatever their tags. It shares this one's channels (and
  // opens those its rings need), its job and its failure; finish() and abort() on any of them end
  // the whole job. Create communicators from one thread at a time, in the same order on every
  // rank, as MPI asks. The stall watch follows only the world's own collectives.
  Communicator dup() const;
  std::optional<Communicator> split(int color, int key) const;

  class Impl;

 private:
  Communicator(std::shared_ptr<Impl> world, std::shared_ptr<detail::Group> group);
  std::shared_ptr<Impl> impl_;            // the world, shared by every Communicator of the process's world
  std::shared_ptr<detail::Group> group_;  // this communicator's ranks, context and calls
};

}  // namespace tnt
