#include "tnt/collectives/communicator.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "board_collectives.h"
#include "call_log.h"
#include "choice.h"
#include "operations.h"
#include "reduce.h"
#include "tnt/core/copy.h"
#include "tnt/core/exit.h"
#include "tnt/core/machine.h"
#include "tnt/core/settings.h"
#include "tnt/transport/host_board.h"
#include "tnt/transport/rendezvous.h"
#include "tnt/transport/transport.h"

namespace tnt {
namespace asio = boost::asio;
using detail::CallSignature;
using detail::Operation;
using detail::OperationState;

namespace {

// Note [Poll window]: a thread blocked in a collective polls the event loop for a while before
// it sleeps in epoll. Measured on a 2-core VM (tnt-bench-allreduce, 2 ranks over TCP, 4 / 16 /
// 64 KiB in microseconds, figures of the data-plane issue, November 2026):
//
//   window    quiet            one busy core beside     4 ranks on 2 cores
//   0         77 / 76 / 101    17 / 30 / 51             144 / 166 / 350
//   50 us     9.6 / 12.8 / 28  120 / 123 / 179          250 / 258 / 418
//   500 us    9.4 / 12.5 / 29  9.7 / 12.6 / 29          1186 / 1099 / 1738
//
// A woken thread pays a wake-up (~70 us on a VM), and with a competitor on its core it waits
// behind it besides: so where every rank has a core, a window long enough that small and medium
// collectives finish inside it wins whether the core is busy or not. Where ranks outnumber cores,
// any polling takes the core from the rank that would send the data, so blocked threads do not
// poll there (ranks against host_cores(): the cores tnt-launch found before --bind-to-core gave
// each rank its own); they yield their core a while before they sleep, which gives it to that
// rank at once (Note [Yielding waits] in transport/src/event_loop.cpp). Only a blocked caller polls, never the progress
// thread, so no computation beside an asynchronous collective loses time to it. The window chosen here is an upper
// bound: the event loop shrinks it while polling does not pay, e.g. on a machine loaded by other processes (Note
// [Adaptive poll window] in transport/src/event_loop.cpp). TNT_WAIT_POLL_US overrides the bound.
std::chrono::microseconds poll_window(const JobEnvironment& env) {
  using namespace std::chrono_literals;
  if (settings::is_set(settings::kWaitPollUs.name)) return settings::kWaitPollUs.read();
  const int cores = host_cores();
  if (env.local_size > cores) {
    if (env.rank == 0) {
      spdlog::info(
          "{} ranks on this host share {} cores: a rank blocked in a collective yields its core, never polls "
          "(Note [Poll window]; TNT_WAIT_POLL_US overrides)",
          env.local_size, cores);
    }
    return 0us;
  }
  return std::chrono::microseconds(settings::kWaitPollUs.fallback_us);
}

}  // namespace

class Communicator::Impl final : public detail::CommunicatorCore, public detail::BoardOwner {
 public:
  explicit Impl(CommunicatorOptions options)
      : env_(options.environment ? *options.environment : JobEnvironment::from_env()),
        exit_after_failure_(options.exit_after_failure) {
    const auto poll = options.poll_before_sleep.count() >= 0 ? options.poll_before_sleep : poll_window(env_);
    board_window_.emplace(poll);
    // Note [Two loops]: the data plane's loop runs on demand (Note [Driving] in event_loop.cpp);
    // the control plane's heartbeats must go on while nobody calls a collective, so it has an
    // always-running loop of its own. An embedding code's io_context carries both.
    if (options.io_context) {
      loop_ = std::make_unique<transport::EventLoop>(*options.io_context, poll);
    } else {
      loop_ = std::make_unique<transport::EventLoop>(transport::Progress::on_demand, poll);
      if (env_.size > 1) own_control_loop_ = std::make_unique<transport::EventLoop>(transport::Progress::always);
    }
    control_loop_ = own_control_loop_ ? own_control_loop_.get() : loop_.get();
    verdict_timer_.emplace(loop_->strand());
    segment_bytes_ = options.segment_bytes ? options.segment_bytes : settings::kSegmentKb.read();
    pipeline_depth_ =
        options.pipeline_depth ? options.pipeline_depth : static_cast<int>(settings::kPipelineDepth.read());
    if (pipeline_depth_ < 1 || pipeline_depth_ > 255) throw ConfigError("pipeline depth must be in [1, 255]");
    algorithms_.small_allreduce_bytes = options.small_allreduce_bytes != std::size_t(-1)
                                            ? options.small_allreduce_bytes
                                            : settings::kSmallAllreduceKb.read();
    algorithms_.allreduce = detail::parse_forced(settings::kAllreduceAlgorithm.read());
    algorithms_.allgather = detail::parse_forced(settings::kAllgatherAlgorithm.read());
    topology_ = detail::Topology::build(std::vector<int>(static_cast<std::size_t>(env_.size), 0), env_.rank);
    if (env_.size == 1) return;
    try {
      join_job(options.configuration);
    } catch (...) {
      close_planes();
      throw;
    }
  }

  ~Impl() {
    if (!finished_) {
      // A failure the job already reported is not news; one that ended the goodbye itself is.
      const bool failed_before = failed_;
      try {
        finish();
      } catch (const std::exception& error) {
        if (!failed_before) spdlog::warn("orderly shutdown failed: {}", error.what());
      }
    }
    if (env_.size > 1) close_planes();
    transport_.reset();
    verdict_timer_.reset();
  }

  void finish() {
    if (finished_.exchange(true)) throw LogicError("Communicator::finish() called twice");
    loop_->wait_until([this] { return active_ops_.load() == 0; });
    if (env_.size > 1) {
      finishing_ = true;
      if (!failed_) rendezvous_->finish();
    }
    if (failed_) throw JobError(failure_);
  }

  void abort(const std::string& reason) {
    if (finished_ || env_.size == 1) return;
    aborted_ = true;
    // Told first: closing this rank's channels before the master has heard why would make it
    // blame a lost connection instead.
    rendezvous_->abort(reason);
    loop_->call([&] { fail_job("this rank failed: " + reason, /*log=*/false); });
  }

  // Note [One failure, every rank told] in transport/src/rendezvous/control_plane.cpp.
  void start_exit_watch() {
    if (!exit_after_failure_) return;
    std::thread([grace = *exit_after_failure_, rank = env_.rank] {
      std::this_thread::sleep_for(grace);
      spdlog::error("rank {}: the job failed {:.1f} s ago and this process has not ended: exiting with status 1", rank,
                    std::chrono::duration<double>(grace).count());
      exit_now(1);
    }).detach();
  }

  void join_job(const std::string& configuration) {
    transport_ = transport::make_transport(*loop_, env_);
    rendezvous_ =
        std::make_unique<transport::Rendezvous>(*control_loop_, env_, transport::RendezvousOptions{configuration});
    rendezvous_->set_progress_source([this] { return calls_.progress(); });
    calls_.on_change([this] {
      if (rendezvous_) rendezvous_->progress_changed();
    });
    book_ = rendezvous_->join([this](const std::string& local_ip) { return transport_->listen(local_ip); });
    transport_->set_error_handler([this](int peer, const std::string& message) {
      if (finishing_ && active_ops_ == 0) return;  // neighbours close their channels as the job ends
      // Note [Blame]: a neighbour's channel can break because the neighbour is failing over a
      // third rank's death. Ask the master, which sees every rank, and fail with its verdict;
      // only if none comes in time, fail with what was seen here.
      asio::post(control_loop_->strand(), [this, peer, message] { rendezvous_->report_peer_lost(peer, message); });
      verdict_timer_->expires_after(
          std::min<std::chrono::milliseconds>(env_.peer_timeout, std::chrono::milliseconds(2000)));
      verdict_timer_->async_wait([this, message](const boost::system::error_code& ec) {
        if (!ec) fail_job(message);
      });
    });
    rendezvous_->set_failure_handler([this](int, const std::string& reason) {
      // Held, so that the data plane fails at once even if no collective is running.
      loop_->hold();
      asio::post(loop_->strand(), [this, reason] {
        fail_job(reason);
        loop_->release();
      });
    });
    topology_ = detail::Topology::build(transport::hosts_of(book_), env_.rank);
    transport_->connect(book_, ring_peers());
    // Note [Host board]: only where it holds every rank (Note [Choosing an algorithm]).
    if (auto* board = transport_->host_board(); board && static_cast<int>(board->members().size()) == env_.size) {
      board_.emplace(*board, env_.rank, env_.size, *board_window_, *this);
      algorithms_.board_capacity = board->capacity();
      spdlog::debug("host board: {} ranks, allreduces up to {} bytes", env_.size, board->capacity());
    }
    spdlog::debug("communicator ready: rank {} of {}, transport {}, host {} of {} ({} ranks)", env_.rank, env_.size,
                  env_.transport, topology_.host, topology_.hosts, topology_.local.size());
  }

  // The neighbours in every ring an algorithm may use: the job's (Note [Node-aware order]), the
  // host's and, with hosts of equal size, the one across hosts (Note [Hierarchical allreduce]).
  std::vector<int> ring_peers() {
    std::vector<int> peers;
    auto add_neighbours = [&](const std::vector<int>& ring, int place) {
      const auto size = static_cast<int>(ring.size());
      for (int step : {size - 1, 1}) {
        const int peer = ring[static_cast<std::size_t>((place + step) % size)];
        if (peer != env_.rank && std::find(peers.begin(), peers.end(), peer) == peers.end()) peers.push_back(peer);
      }
    };
    const int place = topology_.position[static_cast<std::size_t>(env_.rank)];
    left_rank_ = topology_.order[static_cast<std::size_t>((place + env_.size - 1) % env_.size)];
    right_rank_ = topology_.order[static_cast<std::size_t>((place + 1) % env_.size)];
    add_neighbours(topology_.order, place);
    add_neighbours(topology_.local, topology_.local_index);
    if (topology_.uniform()) add_neighbours(topology_.cross, topology_.host);
    return peers;
  }

  // Note [Choosing an algorithm] in choice.cpp.
  detail::Algorithm choose(detail::Collective what, std::size_t bytes, bool blocking) {
    const auto chosen = detail::choose_algorithm(what, bytes, blocking, topology_, env_.size, algorithms_);
    if (chosen == detail::Algorithm::hierarchical && !told_hierarchical_.exchange(true)) announce_hierarchy();
    return chosen;
  }
  // Once per communicator, for the curious and for the tests that must reach these paths.
  void announce_hierarchy() const {
    spdlog::debug("hierarchical collectives: {} hosts x {} ranks, local rank {} of host {}", topology_.hosts,
                  topology_.local.size(), topology_.local_index, topology_.host);
  }

  // The two planes post work to each other (Note [Two loops]); this stops them in an order in
  // which nothing posted can outlive what it refers to.
  void close_planes() {
    if (transport_) transport_->close();  // reports no more errors, so posts no more to the control loop
    control_loop_->call([] {});           // fence: what it posted before has run
    rendezvous_.reset();                  // posts no more failures to the data loop
    loop_->call([] {});
  }

  // Who waits for an operation: its caller, at once (a blocking call runs the data loop
  // itself), or possibly nobody (then the progress thread must run the loop until it ends).
  enum class Waiter { caller, unknown };

  template <class Op, class... Args>
  Request issue(Waiter waiter, CompletionCallback done, const CallSignature& call, Args... args) {
    auto state = std::make_shared<OperationState>(*loop_, std::move(done));
    state->held = waiter == Waiter::unknown;
    state->tag_check = static_cast<std::uint16_t>(call.hash(false) >> 52);
    if (finished_) throw LogicError("a collective was issued after Communicator::finish()");
    if (state->held) loop_->hold();
    std::lock_guard lock(issue_mutex_);
    const std::uint64_t sequence = calls_.issue(call);
    ++active_ops_;
    asio::post(loop_->strand(), [this, sequence, state, args...] {
      if (!failure_.empty()) {
        --active_ops_;
        calls_.completed(sequence);
        state->complete(failure_);
        return;
      }
      auto op = std::make_unique<Op>(*this, sequence, state, args...);
      Operation& started = *op;
      ops_.push_back(std::move(op));
      started.start();
    });
    return Request(state);
  }

  // ---- CommunicatorCore ----------------------------------------------------------------------
  int rank() const override { return env_.rank; }
  int size() const override { return env_.size; }
  transport::Pair& left() override { return transport_->pair(left_rank_); }
  transport::Pair& right() override { return transport_->pair(right_rank_); }
  std::size_t segment_bytes() const override { return segment_bytes_; }
  int pipeline_depth() const override { return pipeline_depth_; }
  std::uint32_t collective_context() const override { return 0; }
  const detail::Topology& topology() const override { return topology_; }
  transport::Pair& pair(int peer_rank) override { return transport_->pair(peer_rank); }

  std::vector<std::byte> acquire(std::size_t bytes) override {
    auto fits = std::find_if(scratch_.begin(), scratch_.end(), [&](const auto& b) { return b.capacity() >= bytes; });
    std::vector<std::byte> buffer;
    if (fits != scratch_.end()) {
      buffer = std::move(*fits);
      scratch_.erase(fits);
    }
    buffer.resize(bytes);
    return buffer;
  }

  void release(std::vector<std::byte> buffer) override {
    if (scratch_.size() < 8) scratch_.push_back(std::move(buffer));
  }

  void complete(Operation& op, const std::string& failure) override {
    auto owned = std::find_if(ops_.begin(), ops_.end(), [&](const auto& p) { return p.get() == &op; });
    if (owned == ops_.end()) return;
    // The operation may still be on the call stack: destroy it after this handler returns.
    asio::post(loop_->strand(), [doomed = std::shared_ptr<Operation>(std::move(*owned))] {});
    ops_.erase(owned);
    calls_.completed(op.sequence());
    op.state().complete(failure);
    --active_ops_;
    loop_->wake();
  }

  // After abort() this rank has said why it failed; the master's verdict only repeats it.
  void fail_job(const std::string& reason) override { fail_job(reason, !aborted_); }

  void fail_job(const std::string& reason, bool log) {
    if (!failure_.empty()) return;
    failure_ = reason;
    failed_ = true;
    verdict_timer_->cancel();
    if (log) spdlog::error("{}", reason);
    start_exit_watch();
    // No channel may complete anything into an operation that is about to be destroyed.
    if (transport_) transport_->close();
    while (!ops_.empty()) complete(*ops_.front(), reason);
  }

  // ---- BoardOwner --------------------------------------------------------------------------------
  std::uint64_t issue_board_call(const CallSignature& call) override {
    if (finished_) throw LogicError("a collective was issued after Communicator::finish()");
    if (failed_) throw JobError(failure_);
    std::lock_guard lock(issue_mutex_);
    return calls_.issue(call);
  }
  void board_call_completed(std::uint64_t sequence) override { calls_.completed(sequence); }
  bool failed() const override { return failed_.load(); }
  std::string failure() const override { return failure_; }
  void fail_from_caller(const std::string& reason) override {
    loop_->call([&] { fail_job(reason); });
  }

  detail::BoardCollectives& board() { return *board_; }
  const JobEnvironment& environment() const { return env_; }

 private:
  JobEnvironment env_;
  std::unique_ptr<transport::EventLoop> own_control_loop_;
  std::unique_ptr<transport::EventLoop> loop_;  // the data plane's
  transport::EventLoop* control_loop_ = nullptr;
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<transport::Rendezvous> rendezvous_;
  std::vector<transport::PeerAddress> book_;
  std::optional<boost::asio::steady_timer> verdict_timer_;
  int left_rank_ = 0;
  int right_rank_ = 0;
  std::size_t segment_bytes_ = 0;
  int pipeline_depth_ = 0;
  detail::AlgorithmSettings algorithms_;
  detail::Topology topology_;  // fixed once the job is joined

  std::mutex issue_mutex_;  // operations reach the data loop in the order of their sequence numbers
  detail::CallLog calls_;
  std::atomic<int> active_ops_{0};
  std::atomic<bool> finishing_{false};
  std::atomic<bool> failed_{false};
  std::atomic<bool> finished_{false};  // finish() was called: no more collectives
  std::atomic<bool> aborted_{false};
  std::optional<std::chrono::milliseconds> exit_after_failure_;
  std::atomic<bool> told_hierarchical_{false};

  std::optional<transport::PollWindow> board_window_;
  std::optional<detail::BoardCollectives> board_;  // where the host board holds every rank

  // Touched only on the event loop's strand.
  std::list<std::unique_ptr<Operation>> ops_;
  std::vector<std::vector<std::byte>> scratch_;
  std::string failure_;
};

// ---- Request -----------------------------------------------------------------------------------

bool Request::test() const { return state_ && state_->done(); }

void Request::wait() const {
  if (!state_) throw Error("wait() on an empty tnt::Request");
  state_->loop.wait_until([this] { return state_->done(); });
  std::lock_guard lock(state_->mutex);
  if (!state_->error.empty()) throw JobError(state_->error);
}

bool Request::wait_for(std::chrono::milliseconds timeout) const {
  if (!state_) throw Error("wait_for() on an empty tnt::Request");
  if (!state_->loop.wait_until([this] { return state_->done(); }, std::chrono::steady_clock::now() + timeout))
    return false;
  std::lock_guard lock(state_->mutex);
  if (!state_->error.empty()) throw JobError(state_->error);
  return true;
}

// ---- Communicator ------------------------------------------------------------------------------

namespace {
// Note [One world per process]: a process joins its job once (the master binds
// TNT_MASTER_PORT once); every Communicator built from the environment shares that join.
std::mutex world_mutex;
std::weak_ptr<Communicator::Impl> world;
std::string world_configuration;
}  // namespace

Communicator::Communicator(CommunicatorOptions options) {
  if (options.environment || options.io_context) {
    impl_ = std::make_shared<Impl>(std::move(options));
    return;
  }
  std::lock_guard lock(world_mutex);
  if (auto shared = world.lock()) {
    if (options.configuration != world_configuration) {
      throw ConfigError(
          "this process's world was joined with another configuration: every Communicator built from the "
          "environment in one process is that world, with the first one's configuration");
    }
    impl_ = std::move(shared);
    return;
  }
  world_configuration = options.configuration;
  impl_ = std::make_shared<Impl>(std::move(options));
  world = impl_;
}
Communicator::~Communicator() = default;

int Communicator::rank() const { return impl_->rank(); }
int Communicator::size() const { return impl_->size(); }
const JobEnvironment& Communicator::environment() const { return impl_->environment(); }
void Communicator::finish() { impl_->finish(); }
void Communicator::abort(const std::string& reason) { impl_->abort(reason); }

Communicator::Block Communicator::block(std::size_t count, int size, int r) {
  const auto ranks = static_cast<std::size_t>(size);
  const auto index = static_cast<std::size_t>(r);
  const std::size_t base = count / ranks;
  const std::size_t extra = count % ranks;
  return {index * base + std::min(index, extra), base + (index < extra ? 1 : 0)};
}

namespace {
void check_data(const void* data, std::size_t count, const char* what) {
  if (!data && count) throw Error(std::string(what) + ": null buffer with a non-zero count");
}
CallSignature reduction_call(std::string_view kind, std::size_t count, DataType type, ReduceOp op) {
  if (!supports(type, op)) {
    const bool known = static_cast<int>(type) < kDataTypes && static_cast<int>(op) < kReduceOps;
    throw ConfigError(
        std::string(kind) + ": " +
        (known ? "the operation " + std::string(name_of(op)) + " does not apply to " + std::string(name_of(type)) +
                     " (logical and bitwise operations take integers, min_loc and max_loc value-index pairs, and "
                     "char is never reduced)"
               : "unknown data type " + std::to_string(static_cast<int>(type)) + " or operation " +
                     std::to_string(static_cast<int>(op))));
  }
  return {kind, type, op, -1, count * size_of(type)};
}
}  // namespace

Request Communicator::allreduce_async(void* data, std::size_t count, DataType type, ReduceOp op,
                                      CompletionCallback done) {
  check_data(data, count, "allreduce");
  const auto call = reduction_call("allreduce", count, type, op);
  switch (impl_->choose(detail::Collective::allreduce, count * size_of(type), /*blocking=*/false)) {
    case detail::Algorithm::hierarchical:
      return impl_->issue<detail::HierarchicalAllreduceOperation>(Impl::Waiter::unknown, std::move(done), call, data,
                                                                  count, type, op);
    case detail::Algorithm::gather:
      return impl_->issue<detail::AllreduceOperation>(Impl::Waiter::unknown, std::move(done), call, data, count, type,
                                                      op, /*gather=*/true);
    default:
      return impl_->issue<detail::AllreduceOperation>(Impl::Waiter::unknown, std::move(done), call, data, count, type,
                                                      op, /*gather=*/false);
  }
}

bool Communicator::host_board_serves(std::size_t bytes) const {
  return impl_->choose(detail::Collective::allreduce, bytes, /*blocking=*/true) == detail::Algorithm::board;
}

void Communicator::allreduce(void* data, std::size_t count, DataType type, ReduceOp op) {
  check_data(data, count, "allreduce");
  const auto call = reduction_call("allreduce", count, type, op);
  switch (impl_->choose(detail::Collective::allreduce, count * size_of(type), /*blocking=*/true)) {
    case detail::Algorithm::board: impl_->board().allreduce(data, count, type, op, call); return;
    case detail::Algorithm::hierarchical:
      impl_->issue<detail::HierarchicalAllreduceOperation>(Impl::Waiter::caller, {}, call, data, count, type, op)
          .wait();
      return;
    case detail::Algorithm::gather:
      impl_->issue<detail::AllreduceOperation>(Impl::Waiter::caller, {}, call, data, count, type, op, true).wait();
      return;
    default:
      impl_->issue<detail::AllreduceOperation>(Impl::Waiter::caller, {}, call, data, count, type, op, false).wait();
      return;
  }
}

namespace {
void check_root(int root, int size) {
  if (root < 0 || root >= size) {
    throw Error("broadcast: root " + std::to_string(root) + " is not a rank of this job (size " + std::to_string(size) +
                ")");
  }
}
}  // namespace

Request Communicator::broadcast_async(void* data, std::size_t bytes, int root, CompletionCallback done) {
  check_data(data, bytes, "broadcast");
  check_root(root, size());
  return impl_->issue<detail::BroadcastOperation>(Impl::Waiter::unknown, std::move(done),
                                                  {"broadcast", {}, {}, root, bytes}, data, bytes, root);
}

void Communicator::broadcast(void* data, std::size_t bytes, int root) {
  check_data(data, bytes, "broadcast");
  check_root(root, size());
  impl_
      ->issue<detail::BroadcastOperation>(Impl::Waiter::caller, {}, {"broadcast", {}, {}, root, bytes}, data, bytes,
                                          root)
      .wait();
}

Request Communicator::allgather_async(const void* send, void* recv, std::size_t bytes_per_rank,
                                      CompletionCallback done) {
  check_data(send, bytes_per_rank, "allgather");
  check_data(recv, bytes_per_rank, "allgather");
  const CallSignature call{"allgather", std::nullopt, std::nullopt, -1, bytes_per_rank};
  if (impl_->choose(detail::Collective::allgather, bytes_per_rank, false) == detail::Algorithm::hierarchical) {
    return impl_->issue<detail::HierarchicalAllgatherOperation>(Impl::Waiter::unknown, std::move(done), call, send,
                                                                recv, bytes_per_rank);
  }
  return impl_->issue<detail::AllgatherOperation>(Impl::Waiter::unknown, std::move(done), call, send, recv,
                                                  bytes_per_rank);
}

void Communicator::allgather(const void* send, void* recv, std::size_t bytes_per_rank) {
  check_data(send, bytes_per_rank, "allgather");
  check_data(recv, bytes_per_rank, "allgather");
  const CallSignature call{"allgather", std::nullopt, std::nullopt, -1, bytes_per_rank};
  if (impl_->choose(detail::Collective::allgather, bytes_per_rank, true) == detail::Algorithm::hierarchical) {
    impl_->issue<detail::HierarchicalAllgatherOperation>(Impl::Waiter::caller, {}, call, send, recv, bytes_per_rank)
        .wait();
    return;
  }
  impl_->issue<detail::AllgatherOperation>(Impl::Waiter::caller, {}, call, send, recv, bytes_per_rank).wait();
}

Request Communicator::reduce_scatter_async(void* data, std::size_t count, DataType type, ReduceOp op,
                                           CompletionCallback done) {
  check_data(data, count, "reduce_scatter");
  return impl_->issue<detail::ReduceScatterOperation>(
      Impl::Waiter::unknown, std::move(done), reduction_call("reduce_scatter", count, type, op), data, count, type, op);
}

void Communicator::reduce_scatter(void* data, std::size_t count, DataType type, ReduceOp op) {
  check_data(data, count, "reduce_scatter");
  impl_
      ->issue<detail::ReduceScatterOperation>(Impl::Waiter::caller, {},
                                              reduction_call("reduce_scatter", count, type, op), data, count, type, op)
      .wait();
}

Request Communicator::barrier_async(CompletionCallback done) {
  return impl_->issue<detail::BarrierOperation>(Impl::Waiter::unknown, std::move(done),
                                                {"barrier", std::nullopt, std::nullopt, -1, 0});
}

void Communicator::barrier() {
  if (impl_->choose(detail::Collective::barrier, 0, /*blocking=*/true) == detail::Algorithm::board) {
    impl_->board().barrier({"barrier", std::nullopt, std::nullopt, -1, 0});
    return;
  }
  impl_->issue<detail::BarrierOperation>(Impl::Waiter::caller, {}, {"barrier", std::nullopt, std::nullopt, -1, 0})
      .wait();
}

}  // namespace tnt
