#include "tnt/collectives/communicator.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <numeric>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "board_collectives.h"
#include "call_log.h"
#include "choice.h"
#include "exchange.h"
#include "group.h"
#include "operations.h"
#include "point_to_point.h"
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

// Note [World and groups]: a process's job is one world, Communicator::Impl: the environment, the
// two event loops, the transport, the rendezvous (control plane) and the job's one failure. Each
// communicator of it (the world's own, each dup and split) is a detail::Group: its ranks (world
// ranks, in the group's rank order), its context id (Note [Contexts] in transport's pair.h: its
// ring collectives use 4 * id, its point-to-point 4 * id + 1, the collectives built on
// point-to-point 4 * id + 2), its topology and rings, the record of
// its calls and the operations in flight. Operations see only their group (CommunicatorCore),
// in the group's ranks. A failure is the world's: it fails every group's operations.
class Communicator::Impl final {
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
    settings_.segment_bytes = options.segment_bytes ? options.segment_bytes : settings::kSegmentKb.read();
    settings_.pipeline_depth =
        options.pipeline_depth ? options.pipeline_depth : static_cast<int>(settings::kPipelineDepth.read());
    if (settings_.pipeline_depth < 1 || settings_.pipeline_depth > 255)
      throw ConfigError("pipeline depth must be in [1, 255]");
    settings_.algorithms.small_allreduce_bytes = options.small_allreduce_bytes != std::size_t(-1)
                                                     ? options.small_allreduce_bytes
                                                     : settings::kSmallAllreduceKb.read();
    settings_.algorithms.allreduce = detail::parse_forced(settings::kAllreduceAlgorithm.read());
    settings_.algorithms.allgather = detail::parse_forced(settings::kAllgatherAlgorithm.read());
    settings_.p2p.eager_bytes = settings::kP2pEagerKb.read();
    settings_.p2p.eager_bytes_given = settings::is_set(settings::kP2pEagerKb.name);
    settings_.p2p.credit_bytes = settings::kP2pCreditKb.read();
    std::vector<int> everyone(static_cast<std::size_t>(env_.size));
    std::iota(everyone.begin(), everyone.end(), 0);
    if (env_.size == 1) {
      world_group_ = std::make_shared<detail::Group>(*this, everyone, 0);
      return;
    }
    try {
      join_job(options.configuration, everyone);
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
    world_group_.reset();
    transport_.reset();
    retired_engines_.clear();  // no channel is left to complete into them
    verdict_timer_.reset();
  }

  void finish() {
    if (finished_.exchange(true)) throw LogicError("Communicator::finish() called twice");
    // Eager sends completed with their bytes still on the way (Note [Lingering work] in
    // event_loop.cpp): the peers may wait for them, and the channels close after this.
    loop_->wait_until([this] { return active_ops_.load() == 0 && (loop_->lingering() == 0 || failed_.load()); });
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

  // After abort() this rank has said why it failed; the master's verdict only repeats it.
  void fail_job(const std::string& reason) { fail_job(reason, !aborted_); }

  // On the strand.
  void fail_job(const std::string& reason, bool log) {
    if (!failure_.empty()) return;
    failure_ = reason;
    failed_ = true;
    verdict_timer_->cancel();
    if (log) spdlog::error("{}", reason);
    start_exit_watch();
    // No channel may complete anything into an operation that is about to be destroyed.
    if (transport_) transport_->close();
    for (detail::Group* group : groups_) group->fail_operations(reason);
    loop_->wake();
  }

  // ---- For the groups ----------------------------------------------------------------------------
  struct Settings {
    std::size_t segment_bytes = 0;
    int pipeline_depth = 0;
    detail::AlgorithmSettings algorithms;
    detail::PointToPointLimits p2p;
  };
  const Settings& settings() const { return settings_; }
  const JobEnvironment& environment() const { return env_; }
  transport::EventLoop& loop() { return *loop_; }
  transport::Transport* transport() { return transport_.get(); }
  const std::vector<transport::PeerAddress>& book() const { return book_; }
  transport::PollWindow& board_window() { return *board_window_; }
  std::shared_ptr<detail::Group> world_group() const { return world_group_; }
  bool failed() const { return failed_.load(); }
  bool finished() const { return finished_.load(); }
  const std::string& failure() const { return failure_; }  // on the strand, or once failed()
  std::atomic<int>& active_operations() { return active_ops_; }
  // On the strand.
  void add_group(detail::Group& group) { groups_.push_back(&group); }
  void remove_group(detail::Group& group) { std::erase(groups_, &group); }
  // Note [Retired engines]: a destroyed group's point-to-point engine, already failed, is kept
  // until the channels close. On the strand.
  void retire(std::unique_ptr<detail::PointToPoint> engine) { retired_engines_.push_back(std::move(engine)); }
  // Note [World and groups]: the next context id this process can offer a new group; communicator
  // creation takes the largest offer of its members, so the id is new in every member process.
  std::uint32_t next_context() const { return next_context_; }
  void used_context(std::uint32_t id) { next_context_ = std::max(next_context_, id + 1); }
  std::mutex& creation_mutex() { return creation_mutex_; }

 private:
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

  void join_job(const std::string& configuration, const std::vector<int>& everyone) {
    transport_ = transport::make_transport(*loop_, env_);
    rendezvous_ =
        std::make_unique<transport::Rendezvous>(*control_loop_, env_, transport::RendezvousOptions{configuration});
    // The stall watch follows the world's collectives (Note [Stall watch]); its source is set
    // before join() starts the heartbeats that read it, and the world's group comes after.
    rendezvous_->set_progress_source([this] {
      const detail::CallLog* calls = world_calls_.load();
      return calls ? calls->progress() : transport::CollectiveProgress{};
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
    transport_->set_channel_handler([this](int peer) {
      for (detail::Group* group : groups_) group->on_channel(peer);
    });
    world_group_ = std::make_shared<detail::Group>(*this, everyone, 0);
    // Any thread that issues or completes a world collective calls this: close_planes() stops
    // the calls under the mutex before the rendezvous goes.
    world_group_->calls().on_change([this] {
      std::lock_guard lock(progress_mutex_);
      if (rendezvous_ && !planes_closing_) rendezvous_->progress_changed();
    });
    world_calls_ = &world_group_->calls();
    transport_->connect(book_, world_group_->ring_peers_in_world());
    // Note [Host board]: only where it holds every rank (Note [Choosing an algorithm]).
    if (auto* board = transport_->host_board(); board && static_cast<int>(board->members().size()) == env_.size) {
      world_group_->use_board(*board);
      spdlog::debug("host board: {} ranks, allreduces up to {} bytes", env_.size, board->capacity());
    }
    const auto& topology = world_group_->topology();
    spdlog::debug("communicator ready: rank {} of {}, transport {}, host {} of {} ({} ranks)", env_.rank, env_.size,
                  env_.transport, topology.host, topology.hosts, topology.local.size());
  }

  // The two planes post work to each other (Note [Two loops]); this stops them in an order in
  // which nothing posted can outlive what it refers to.
  void close_planes() {
    if (transport_) transport_->close();  // reports no more errors, so posts no more to the control loop
    control_loop_->call([] {});           // fence: what it posted before has run
    {
      std::lock_guard lock(progress_mutex_);
      planes_closing_ = true;  // no more progress reports into the rendezvous
    }
    rendezvous_.reset();  // posts no more failures to the data loop
    loop_->call([] {});
  }

  JobEnvironment env_;
  std::unique_ptr<transport::EventLoop> own_control_loop_;
  std::unique_ptr<transport::EventLoop> loop_;  // the data plane's
  transport::EventLoop* control_loop_ = nullptr;
  std::unique_ptr<transport::Transport> transport_;
  std::mutex progress_mutex_;    // the world's call log reports into the rendezvous under it
  bool planes_closing_ = false;  // close_planes() began: no more reports
  std::unique_ptr<transport::Rendezvous> rendezvous_;
  std::vector<transport::PeerAddress> book_;
  std::optional<boost::asio::steady_timer> verdict_timer_;
  Settings settings_;
  std::optional<transport::PollWindow> board_window_;
  std::shared_ptr<detail::Group> world_group_;
  std::atomic<const detail::CallLog*> world_calls_{nullptr};  // the stall watch's source, once the group exists

  std::atomic<int> active_ops_{0};  // of every group
  std::atomic<bool> finishing_{false};
  std::atomic<bool> failed_{false};
  std::atomic<bool> finished_{false};  // finish() was called: no more collectives
  std::atomic<bool> aborted_{false};
  std::optional<std::chrono::milliseconds> exit_after_failure_;

  std::vector<std::unique_ptr<detail::PointToPoint>> retired_engines_;
  std::mutex creation_mutex_;       // one communicator created at a time in this process
  std::uint32_t next_context_ = 1;  // under creation_mutex_

  // Touched only on the event loop's strand.
  std::vector<detail::Group*> groups_;
  std::string failure_;
};

namespace detail {

Group::Group(Communicator::Impl& world, std::vector<int> members, std::uint32_t id)
    : world_(world), members_(std::move(members)), id_(id) {
  const int me = world_.environment().rank;
  index_ = static_cast<int>(std::find(members_.begin(), members_.end(), me) - members_.begin());
  // Hosts as the world sees them, renumbered from 0 in the order of the group's lowest ranks.
  std::vector<int> host_of(members_.size(), 0);
  if (!world_.book().empty()) {
    const std::vector<int> world_hosts = transport::hosts_of(world_.book());
    std::vector<int> renumbered(world_hosts.size(), -1);
    int next = 0;
    for (std::size_t r = 0; r < members_.size(); ++r) {
      int& host = renumbered[static_cast<std::size_t>(world_hosts[static_cast<std::size_t>(members_[r])])];
      if (host < 0) host = next++;
      host_of[r] = host;
    }
  }
  topology_ = Topology::build(host_of, index_);
  algorithms_ = world_.settings().algorithms;
  const int size = static_cast<int>(members_.size());
  const int place = topology_.position[static_cast<std::size_t>(index_)];
  left_ = topology_.order[static_cast<std::size_t>((place + size - 1) % size)];
  right_ = topology_.order[static_cast<std::size_t>((place + 1) % size)];
  world_.loop().call([this] { world_.add_group(*this); });
}

// Note [Retired engines]: a group's point-to-point engines have Pair operations posted with
// themselves as the sink that may complete after the group is gone: an eager envelope or a
// credit return still being written (the user's send completed when it was copied), the receive
// posted for each peer's next envelope, a credit receive the peer answers late. Pairs cannot
// cancel them, so a destroyed group's engines are failed (they then ignore every completion and
// touch no group) and kept by the world until its channels close, with their envelope inboxes
// (16 bytes plus the channel's eager limit each: one per open channel, up to 64 spares) per communicator
// freed. Destroying them at once crashed the next completion: MPI_Comm_free across two hosts,
// mpi_layer.netns_hosts_2x2.
Group::~Group() {
  // Its eager sends' bytes are handed over first (Note [Lingering work] in event_loop.cpp):
  // freeing a communicator does not take back what was sent on it.
  world_.loop().wait_until([this] {
    const auto handed_over = [](const std::unique_ptr<PointToPoint>& engine) {
      return !engine || engine->handing_over() == 0;
    };
    return active_ == 0 && ((handed_over(p2p_) && handed_over(exchanges_)) || world_.failed());
  });
  world_.loop().call([this] {
    for (auto* engine : {&p2p_, &exchanges_}) {
      if (!*engine) continue;
      (*engine)->fail_all("the communicator was destroyed while this point-to-point operation was pending");
      world_.retire(std::move(*engine));
    }
    world_.remove_group(*this);
  });
}

// The neighbours in every ring an algorithm may use: the group's (Note [Node-aware order]), the
// host's and, with hosts of equal size, the one across hosts (Note [Hierarchical allreduce]); as
// world ranks.
std::vector<int> Group::ring_peers_in_world() const {
  std::vector<int> peers;
  auto add_neighbours = [&](const std::vector<int>& ring, int place) {
    const auto size = static_cast<int>(ring.size());
    for (int step : {size - 1, 1}) {
      const int peer = members_[static_cast<std::size_t>(ring[static_cast<std::size_t>((place + step) % size)])];
      if (peer != world_.environment().rank && std::find(peers.begin(), peers.end(), peer) == peers.end())
        peers.push_back(peer);
    }
  };
  add_neighbours(topology_.order, topology_.position[static_cast<std::size_t>(index_)]);
  add_neighbours(topology_.local, topology_.local_index);
  if (topology_.uniform()) add_neighbours(topology_.cross, topology_.host);
  return peers;
}

void Group::open_rings() {
  std::atomic<int>& waiting = channels_waiting_;
  world_.loop().call([this] {
    if (world_.failed()) return;
    for (int peer : ring_peers_in_world()) {
      if (world_.transport()->is_open(peer)) continue;
      channels_needed_.push_back(peer);
      world_.transport()->open(peer);
    }
    channels_waiting_ = static_cast<int>(channels_needed_.size());
  });
  world_.loop().wait_until([&] { return waiting.load() == 0 || world_.failed(); });
  if (world_.failed()) throw JobError(world_.failure());
}

void Group::on_channel(int world_rank) {
  if (std::erase(channels_needed_, world_rank)) --channels_waiting_;
  const auto local = std::find(members_.begin(), members_.end(), world_rank);
  if (local == members_.end()) return;
  for (auto* engine : {p2p_.get(), exchanges_.get()}) {
    if (engine) engine->on_channel(static_cast<int>(local - members_.begin()));
  }
}

void Group::use_board(transport::HostBoard& board) {
  board_.emplace(board, index_, size(), world_.board_window(), *this);
  algorithms_.board_capacity = board.capacity();
  algorithms_.board_area_bytes = board.area_bytes();
}

Algorithm Group::choose(Collective what, std::size_t bytes, bool blocking) {
  const auto chosen = choose_algorithm(what, bytes, blocking, topology_, size(), algorithms_);
  if (chosen == Algorithm::hierarchical && !told_hierarchical_.exchange(true)) {
    // Once per communicator, for the curious and for the tests that must reach these paths.
    spdlog::debug("hierarchical collectives: {} hosts x {} ranks, local rank {} of host {}", topology_.hosts,
                  topology_.local.size(), topology_.local_index, topology_.host);
  }
  return chosen;
}

std::shared_ptr<OperationState> Group::new_state(Waiter waiter, CompletionCallback done, const char* what) {
  auto state = std::make_shared<OperationState>(world_.loop(), std::move(done));
  state->held = waiter == Waiter::unknown;
  state->awaited = waiter == Waiter::issuer_soon;
  if (world_.finished()) throw LogicError(std::string(what) + " was issued after Communicator::finish()");
  if (state->held) world_.loop().hold();
  if (state->awaited) world_.loop().expect_waiter();
  return state;
}

std::optional<MessageStatus> Group::probe_now(int peer, int tag) {
  std::optional<MessageStatus> found;
  std::string failure;
  world_.loop().call([&] {
    failure = world_.failure();
    if (failure.empty()) found = point_to_point().probe(peer, tag);
  });
  if (!failure.empty()) throw JobError(failure);
  return found;
}

MessageStatus Group::probe(int peer, int tag) {
  while (true) {
    const std::uint64_t seen = arrivals_.load();
    if (auto found = probe_now(peer, tag)) return *found;
    world_.loop().wait_until([&] { return arrivals_.load() != seen || world_.failed(); });
  }
}

PointToPoint& Group::point_to_point() {
  if (!p2p_) p2p_ = std::make_unique<PointToPoint>(*this, 4 * id_ + 1, world_.settings().p2p);
  return *p2p_;
}

PointToPoint& Group::collective_messages() {
  if (!exchanges_) exchanges_ = std::make_unique<PointToPoint>(*this, 4 * id_ + 2, world_.settings().p2p);
  return *exchanges_;
}

void Group::fail_operations(const std::string& reason) {
  while (!ops_.empty()) complete(*ops_.front(), reason);
  if (p2p_) p2p_->fail_all(reason);
  if (exchanges_) exchanges_->fail_all(reason);
}

// ---- CommunicatorCore --------------------------------------------------------------------------
transport::Pair& Group::left() { return pair(left_); }
transport::Pair& Group::right() { return pair(right_); }
transport::Pair& Group::pair(int peer) { return world_.transport()->pair(members_[static_cast<std::size_t>(peer)]); }
std::size_t Group::segment_bytes() const { return world_.settings().segment_bytes; }
int Group::pipeline_depth() const { return world_.settings().pipeline_depth; }

std::vector<std::byte> Group::acquire(std::size_t bytes) {
  auto fits = std::find_if(scratch_.begin(), scratch_.end(), [&](const auto& b) { return b.capacity() >= bytes; });
  std::vector<std::byte> buffer;
  if (fits != scratch_.end()) {
    buffer = std::move(*fits);
    scratch_.erase(fits);
  }
  buffer.resize(bytes);
  return buffer;
}

void Group::release(std::vector<std::byte> buffer) {
  if (scratch_.size() < 8) scratch_.push_back(std::move(buffer));
}

// Note [Finished operations]: a finished operation may still be on the call stack (it completes
// itself), so it is destroyed later: when the next operation of its communicator starts (on the
// strand, outside every other handler), or with the communicator. Destroyed by a handler posted
// for it, through a shared_ptr made for the post, a barrier over TCP cost two more allocations
// and a trip through the io_context: 900 of its 8,900 instructions (callgrind of osu_barrier,
// TNT_SHM=0, 2 ranks, 2026-11-29).
void Group::complete(Operation& op, const std::string& failure) {
  auto owned = std::find_if(ops_.begin(), ops_.end(), [&](const auto& p) { return p.get() == &op; });
  if (owned == ops_.end()) return;
  finished_ops_.push_back(std::move(*owned));
  ops_.erase(owned);
  calls_.completed(op.sequence());
  op.state().complete(failure);
  --active_;
  --world_.active_operations();
  world_.loop().wake();
}

void Group::fail_job(const std::string& reason) { world_.fail_job(reason); }

// ---- PeerLinks ---------------------------------------------------------------------------------
transport::Pair* Group::channel(int peer) {
  auto* transport = world_.transport();
  const int world_rank = members_[static_cast<std::size_t>(peer)];
  return transport && transport->is_open(world_rank) ? &transport->pair(world_rank) : nullptr;
}
void Group::open_channel(int peer) {
  if (auto* transport = world_.transport()) transport->open(members_[static_cast<std::size_t>(peer)]);
}
std::string Group::peer_name(int peer) const {
  const int world_rank = members_[static_cast<std::size_t>(peer)];
  const auto& book = world_.book();
  std::string name = "rank " + std::to_string(peer);
  if (world_rank != peer) name += " (world rank " + std::to_string(world_rank) + ")";
  if (world_rank < static_cast<int>(book.size()))
    name += " (" + book[static_cast<std::size_t>(world_rank)].hostname + ")";
  return name;
}
transport::EventLoop& Group::loop() { return world_.loop(); }
const JobEnvironment& Group::environment() const { return world_.environment(); }
void Group::message_arrived() {
  ++arrivals_;
  world_.loop().wake();
}

// ---- BoardOwner --------------------------------------------------------------------------------
std::uint64_t Group::issue_board_call(const CallSignature& call, std::uint64_t signature) {
  if (world_.finished()) throw LogicError("a collective was issued after Communicator::finish()");
  if (world_.failed()) throw JobError(world_.failure());
  // No issue_mutex_: a board call reaches no event loop, and the log numbers calls under its own
  // lock.
  return calls_.issue(call, signature);
}
void Group::board_call_completed(std::uint64_t sequence) { calls_.completed(sequence); }
bool Group::failed() const { return world_.failed(); }
std::string Group::failure() const { return world_.failure(); }
void Group::fail_from_caller(const std::string& reason) {
  world_.loop().call([&] { world_.fail_job(reason); });
}

}  // namespace detail

namespace detail {

template <class Op, class... Args>
Request Group::issue(Waiter waiter, CompletionCallback done, const CallSignature& call, Args... args) {
  auto state = new_state(waiter, std::move(done), "a collective");
  state->tag_check = static_cast<std::uint16_t>(call.hash(false) >> 52);
  std::lock_guard lock(issue_mutex_);
  const std::uint64_t sequence = calls_.issue(call);
  ++active_;
  ++world_.active_operations();
  auto start = [this, sequence, state, args...] {
    finished_ops_.clear();  // Note [Finished operations]
    if (!world_.failure().empty()) {
      --active_;
      --world_.active_operations();
      calls_.completed(sequence);
      state->complete(world_.failure());
      return;
    }
    auto op = std::make_unique<Op>(*this, sequence, state, args...);
    Operation& started = *op;
    ops_.push_back(std::move(op));
    started.start();
  };
  // Note [Running here] in event_loop.cpp: a blocking collective starts on its caller's thread,
  // which is about to run the loop anyway, where it may and no earlier start is still queued
  // (operations still reach the loop in the order of their sequence numbers). Posted, the start
  // cost the scheduler's mutex and an epoll_wait before anything moved.
  if (waiter == Waiter::caller && starts_queued_.load() == 0 && world_.loop().run_here(start)) return Request(state);
  starts_queued_.fetch_add(1);
  asio::post(world_.loop().strand(), [this, start = std::move(start)] {
    starts_queued_.fetch_sub(1);
    start();
  });
  return Request(state);
}

template <class Start>
Request Group::issue_p2p(Waiter waiter, Start start, bool start_here) {
  std::shared_ptr<OperationState> state = new_state(waiter, {}, "a point-to-point operation");
  const auto run = [this](const Start& begin, const std::shared_ptr<OperationState>& begun) {
    if (!world_.failure().empty()) {
      begun->complete(world_.failure());
      return;
    }
    try {
      begin(point_to_point(), begun);
    } catch (const std::exception& error) {
      world_.fail_job(error.what());
      begun->complete(world_.failure());
    }
  };
  // Note [Running here] in event_loop.cpp; only when none of this communicator's earlier starts
  // is still queued, so that a thread's messages leave in the order it issued them. Run here,
  // the start borrows the state, which then moves into the Request: each copy of a shared_ptr is
  // an atomic increment and its end a decrement, four of them per irecv before (callgrind and
  // the 128-byte exchange of Note [Request sets], 2026-11-29).
  if (start_here && p2p_queued_.load() == 0 && world_.loop().run_here([&] { run(start, state); }))
    return Request(std::move(state));
  p2p_queued_.fetch_add(1);
  asio::post(world_.loop().strand(), [this, run, start = std::move(start), state] {
    p2p_queued_.fetch_sub(1);
    run(start, state);
  });
  return Request(std::move(state));
}

bool Group::send_now(const void* data, std::size_t bytes, int peer, int tag) {
  // Behind a start still queued it would overtake that one's message.
  if (p2p_queued_.load() != 0) return false;
  bool sent = false;
  world_.loop().run_here([&] { sent = world_.failure().empty() && point_to_point().send_now(peer, tag, data, bytes); });
  return sent;
}

std::optional<MessageStatus> Group::receive_now(void* data, std::size_t capacity, int peer, int tag) {
  if (p2p_queued_.load() != 0) return std::nullopt;
  using Outcome = PointToPoint::FastReceive::Outcome;
  struct Waiting {
    Group& group;
    PointToPoint::FastReceive receive;
    bool begun = false;
  } waiting{*this, {}};
  waiting.receive.source = peer;
  waiting.receive.tag = tag;
  waiting.receive.data = static_cast<std::byte*>(data);
  waiting.receive.capacity = capacity;
  // One pointer captured: the look fits std::function's own storage (a larger capture allocated
  // on every receive).
  Waiting* const w = &waiting;
  const auto look = [w] {
    if (!w->begun) {
      w->begun = true;
      if (!w->group.world_.failure().empty()) return true;
      w->group.point_to_point().begin_fast_receive(w->receive);
    } else {
      w->receive.lane->read();
    }
    return w->receive.outcome != Outcome::waiting || w->group.world_.failed();
  };
  const auto finish = [w] {
    if (w->begun && w->receive.outcome == Outcome::waiting) w->group.p2p_->end_fast_receive();
  };
  const PointToPoint::FastReceive& receive = waiting.receive;
  if (!world_.loop().spin_here(look, finish) || receive.outcome != Outcome::done) return std::nullopt;
  if (!receive.error.empty()) throw ReceiveTruncated(receive.error, receive.status);
  return receive.status;
}

}  // namespace detail

// ---- Request -----------------------------------------------------------------------------------

bool Request::done() const { return finished_at_issue_ || (state_ && state_->done()); }

bool Request::test() const {
  if (done()) return true;
  if (!state_) return false;
  state_->loop.poll_here();  // Note [Awaited work] in transport/src/event_loop.cpp
  return state_->done();
}

namespace {
// Only once done(): the error is then written and never changes (OperationState::complete).
void throw_failure(const OperationState& state) {
  if (state.error.empty()) return;
  if (state.error_is_local) throw TruncationError(state.error);
  throw JobError(state.error);
}
}  // namespace

void Request::wait() const {
  if (!valid()) throw Error("wait() on an empty tnt::Request");
  if (finished_at_issue_) return;
  state_->loop.wait_until([this] { return state_->done(); });
  throw_failure(*state_);
}

bool Request::wait_for(std::chrono::milliseconds timeout) const {
  if (!valid()) throw Error("wait_for() on an empty tnt::Request");
  if (finished_at_issue_) return true;
  if (!state_->loop.wait_until([this] { return state_->done(); }, std::chrono::steady_clock::now() + timeout))
    return false;
  throw_failure(*state_);
  return true;
}

MessageStatus Request::status() const {
  if (finished_at_issue_) return status_;
  if (!state_) return {};
  return state_->done() ? state_->status : MessageStatus{};
}

// Note [Request sets]: wait_all and its kin take a span of requests (C++ callers keep them in an
// array) or of pointers to them (the C API's handles, each a request of its own). Both go
// through one body each, which reaches the i-th request by `request_at`, null where it is skipped.
// The C API once copied its handles' requests into an array to make a span: 16 Requests made and
// destroyed and two reference counts per request, 315 of the 1,600 instructions of jacobi2d's
// 16 x 16 halo exchange (callgrind, 2026-11-29).
namespace {
const Request* request_at(std::span<const Request> requests, std::size_t i) { return &requests[i]; }
const Request* request_at(std::span<const Request* const> requests, std::size_t i) { return requests[i]; }
}  // namespace

template <class Requests>
void Request::wait_all_in(Requests requests) {
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const Request* request = request_at(requests, i);
    if (request != nullptr && request->state_)
      request->state_->loop.wait_until([request] { return request->state_->done(); });
  }
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const Request* request = request_at(requests, i);
    if (request != nullptr && request->state_) throw_failure(*request->state_);
  }
}

template <class Requests>
std::optional<std::size_t> Request::test_any_in(Requests requests) {
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const Request* request = request_at(requests, i);
    if (request != nullptr && request->test()) return i;
  }
  return std::nullopt;
}

template <class Requests>
bool Request::test_all_in(Requests requests) {
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const Request* request = request_at(requests, i);
    if (request != nullptr && request->valid() && !request->test()) return false;
  }
  return true;
}

template <class Requests>
std::size_t Request::wait_any_in(Requests requests) {
  const auto valid_at = [&](std::size_t i) {
    const Request* request = request_at(requests, i);
    return request != nullptr && request->valid();
  };
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (valid_at(i) && request_at(requests, i)->finished_at_issue_) return i;
  }
  std::size_t first = 0;
  while (first < requests.size() && !valid_at(first)) ++first;
  if (first == requests.size()) return requests.size();
  std::optional<std::size_t> done;
  // Requests of one world share its loop, which the wait drives; requests of several worlds are
  // each driven in turn.
  transport::EventLoop& loop = request_at(requests, first)->state_->loop;
  bool one_loop = true;
  for (std::size_t i = first; i < requests.size(); ++i) {
    if (valid_at(i) && &request_at(requests, i)->state_->loop != &loop) one_loop = false;
  }
  while (!done) {
    if (one_loop) {
      // done(), not test(): this runs while the wait holds the loop's mutex.
      loop.wait_until([&] {
        for (std::size_t i = 0; i < requests.size() && !done; ++i) {
          if (valid_at(i) && request_at(requests, i)->done()) done = i;
        }
        return done.has_value();
      });
    } else {
      for (std::size_t i = 0; i < requests.size(); ++i) {
        const Request* request = request_at(requests, i);
        if (valid_at(i) && !request->test()) request->wait_for(std::chrono::milliseconds(1));
      }
      done = test_any_in(requests);
    }
  }
  return *done;
}

void Request::wait_all(std::span<const Request> requests) { wait_all_in(requests); }
void Request::wait_all(std::span<const Request* const> requests) { wait_all_in(requests); }
std::size_t Request::wait_any(std::span<const Request> requests) { return wait_any_in(requests); }
std::size_t Request::wait_any(std::span<const Request* const> requests) { return wait_any_in(requests); }
std::optional<std::size_t> Request::test_any(std::span<const Request> requests) { return test_any_in(requests); }
std::optional<std::size_t> Request::test_any(std::span<const Request* const> requests) { return test_any_in(requests); }
bool Request::test_all(std::span<const Request> requests) { return test_all_in(requests); }
bool Request::test_all(std::span<const Request* const> requests) { return test_all_in(requests); }

// ---- Communicator ------------------------------------------------------------------------------

namespace {
// Note [One world per process]: a process joins its job once (the master binds
// TNT_MASTER_PORT once); every Communicator built from the environment shares that join.
std::mutex world_mutex;
std::weak_ptr<Communicator::Impl> joined_world;
std::string world_configuration;
}  // namespace

Communicator::Communicator(CommunicatorOptions options) {
  if (options.environment || options.io_context) {
    impl_ = std::make_shared<Impl>(std::move(options));
  } else {
    std::lock_guard lock(world_mutex);
    if (auto shared = joined_world.lock()) {
      if (options.configuration != world_configuration) {
        throw ConfigError(
            "this process's world was joined with another configuration: every Communicator built from the "
            "environment in one process is that world, with the first one's configuration");
      }
      impl_ = std::move(shared);
    } else {
      world_configuration = options.configuration;
      impl_ = std::make_shared<Impl>(std::move(options));
      joined_world = impl_;
    }
  }
  group_ = impl_->world_group();
}

Communicator::Communicator(std::shared_ptr<Impl> world, std::shared_ptr<detail::Group> group)
    : impl_(std::move(world)), group_(std::move(group)) {}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;
Communicator::~Communicator() = default;

int Communicator::rank() const { return group_->rank(); }
int Communicator::size() const { return group_->size(); }
const JobEnvironment& Communicator::environment() const { return impl_->environment(); }
void Communicator::finish() { impl_->finish(); }
void Communicator::abort(const std::string& reason) { impl_->abort(reason); }

// Note [World and groups]: one allgather over this communicator of each rank's color, key and the
// next context id its process can offer; the new group takes the largest offer.
std::optional<Communicator> Communicator::split(int color, int key) const {
  std::lock_guard creating(impl_->creation_mutex());
  struct Offer {
    std::int32_t color;
    std::int32_t key;
    std::uint32_t next_context;
    std::uint32_t reserved;
  };
  const Offer mine{color, key, impl_->next_context(), 0};
  std::vector<Offer> offers(static_cast<std::size_t>(size()));
  // Gathering changes nothing that this communicator is.
  const_cast<Communicator&>(*this).allgather(&mine, offers.data(), sizeof mine);
  std::uint32_t id = 0;
  for (const Offer& offer : offers) id = std::max(id, offer.next_context);
  if (id >= (std::uint32_t{1} << 31)) throw JobError("split: this job has used up its 2^31 communicator ids");
  impl_->used_context(id);
  if (color < 0) return std::nullopt;
  std::vector<int> ranks;
  for (int r = 0; r < size(); ++r) {
    if (offers[static_cast<std::size_t>(r)].color == color) ranks.push_back(r);
  }
  std::stable_sort(ranks.begin(), ranks.end(), [&](int a, int b) {
    return offers[static_cast<std::size_t>(a)].key < offers[static_cast<std::size_t>(b)].key;
  });
  std::vector<int> members;
  for (int r : ranks) members.push_back(group_->world_rank(r));
  auto group = std::make_shared<detail::Group>(*impl_, std::move(members), id);
  group->open_rings();
  return Communicator(impl_, std::move(group));
}

Communicator Communicator::dup() const { return std::move(*split(0, rank())); }

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
  switch (group_->choose(detail::Collective::allreduce, count * size_of(type), /*blocking=*/false)) {
    case detail::Algorithm::hierarchical:
      return group_->issue<detail::HierarchicalAllreduceOperation>(detail::Group::Waiter::unknown, std::move(done),
                                                                   call, data, count, type, op);
    case detail::Algorithm::gather:
      return group_->issue<detail::AllreduceOperation>(detail::Group::Waiter::unknown, std::move(done), call, data,
                                                       count, type, op, /*gather=*/true);
    default:
      return group_->issue<detail::AllreduceOperation>(detail::Group::Waiter::unknown, std::move(done), call, data,
                                                       count, type, op, /*gather=*/false);
  }
}

bool Communicator::host_board_serves(std::size_t bytes) const {
  return group_->choose(detail::Collective::allreduce, bytes, /*blocking=*/true) == detail::Algorithm::board;
}

void Communicator::allreduce(void* data, std::size_t count, DataType type, ReduceOp op) {
  check_data(data, count, "allreduce");
  const auto call = reduction_call("allreduce", count, type, op);
  switch (group_->choose(detail::Collective::allreduce, count * size_of(type), /*blocking=*/true)) {
    case detail::Algorithm::board: group_->board().allreduce(data, count, type, op, call); return;
    case detail::Algorithm::hierarchical:
      group_
          ->issue<detail::HierarchicalAllreduceOperation>(detail::Group::Waiter::caller, {}, call, data, count, type,
                                                          op)
          .wait();
      return;
    case detail::Algorithm::gather:
      group_->issue<detail::AllreduceOperation>(detail::Group::Waiter::caller, {}, call, data, count, type, op, true)
          .wait();
      return;
    default:
      group_->issue<detail::AllreduceOperation>(detail::Group::Waiter::caller, {}, call, data, count, type, op, false)
          .wait();
      return;
  }
}

namespace {
void check_root(int root, int size) {
  if (root < 0 || root >= size) {
    throw ConfigError("broadcast: root " + std::to_string(root) + " is not a rank of this communicator (size " +
                      std::to_string(size) + ")");
  }
}
}  // namespace

Request Communicator::broadcast_async(void* data, std::size_t bytes, int root, CompletionCallback done) {
  check_data(data, bytes, "broadcast");
  check_root(root, size());
  return group_->issue<detail::BroadcastOperation>(detail::Group::Waiter::unknown, std::move(done),
                                                   {"broadcast", {}, {}, root, bytes}, data, bytes, root);
}

void Communicator::broadcast(void* data, std::size_t bytes, int root) {
  check_data(data, bytes, "broadcast");
  check_root(root, size());
  if (group_->choose(detail::Collective::broadcast, bytes, /*blocking=*/true) == detail::Algorithm::board) {
    group_->board().broadcast(data, bytes, root, {"broadcast", {}, {}, root, bytes});
    return;
  }
  group_
      ->issue<detail::BroadcastOperation>(detail::Group::Waiter::caller, {}, {"broadcast", {}, {}, root, bytes}, data,
                                          bytes, root)
      .wait();
}

Request Communicator::allgather_async(const void* send, void* recv, std::size_t bytes_per_rank,
                                      CompletionCallback done) {
  check_data(send, bytes_per_rank, "allgather");
  check_data(recv, bytes_per_rank, "allgather");
  const CallSignature call{"allgather", std::nullopt, std::nullopt, -1, bytes_per_rank};
  if (group_->choose(detail::Collective::allgather, bytes_per_rank, false) == detail::Algorithm::hierarchical) {
    return group_->issue<detail::HierarchicalAllgatherOperation>(detail::Group::Waiter::unknown, std::move(done), call,
                                                                 send, recv, bytes_per_rank);
  }
  return group_->issue<detail::AllgatherOperation>(detail::Group::Waiter::unknown, std::move(done), call, send, recv,
                                                   bytes_per_rank);
}

void Communicator::allgather(const void* send, void* recv, std::size_t bytes_per_rank) {
  check_data(send, bytes_per_rank, "allgather");
  check_data(recv, bytes_per_rank, "allgather");
  const CallSignature call{"allgather", std::nullopt, std::nullopt, -1, bytes_per_rank};
  if (group_->choose(detail::Collective::allgather, bytes_per_rank, true) == detail::Algorithm::hierarchical) {
    group_
        ->issue<detail::HierarchicalAllgatherOperation>(detail::Group::Waiter::caller, {}, call, send, recv,
                                                        bytes_per_rank)
        .wait();
    return;
  }
  group_->issue<detail::AllgatherOperation>(detail::Group::Waiter::caller, {}, call, send, recv, bytes_per_rank).wait();
}

Request Communicator::reduce_scatter_async(void* data, std::size_t count, DataType type, ReduceOp op,
                                           CompletionCallback done) {
  check_data(data, count, "reduce_scatter");
  return group_->issue<detail::ReduceScatterOperation>(detail::Group::Waiter::unknown, std::move(done),
                                                       reduction_call("reduce_scatter", count, type, op), data, count,
                                                       type, op);
}

void Communicator::reduce_scatter(void* data, std::size_t count, DataType type, ReduceOp op) {
  check_data(data, count, "reduce_scatter");
  group_
      ->issue<detail::ReduceScatterOperation>(detail::Group::Waiter::caller, {},
                                              reduction_call("reduce_scatter", count, type, op), data, count, type, op)
      .wait();
}

Request Communicator::barrier_async(CompletionCallback done) {
  return group_->issue<detail::BarrierOperation>(detail::Group::Waiter::unknown, std::move(done),
                                                 {"barrier", std::nullopt, std::nullopt, -1, 0});
}

void Communicator::barrier() {
  if (group_->choose(detail::Collective::barrier, 0, /*blocking=*/true) == detail::Algorithm::board) {
    group_->board().barrier({"barrier", std::nullopt, std::nullopt, -1, 0});
    return;
  }
  group_
      ->issue<detail::BarrierOperation>(detail::Group::Waiter::caller, {},
                                        {"barrier", std::nullopt, std::nullopt, -1, 0})
      .wait();
}

// ---- The rest of MPI's collectives (Note [Exchanges]) --------------------------------------------

namespace {

// Note [Exchanges]: alltoall posts every transfer at once up to this block size, and above it at
// most kAlltoallPeersPerRound peers per round.
constexpr std::size_t kAlltoallAllAtOnceBytes = 64 * 1024;
constexpr int kAlltoallPeersPerRound = 8;

// Note [Blocking exchanges]: the blocking forms of the exchanges are their asynchronous forms,
// waited for at once. Issued as asynchronous, an operation holds the loop, which wakes the
// progress thread to run it, and the caller that then waits finds the loop taken and sleeps until
// that thread lets go (Note [Driving] in event_loop.cpp). Measured 2026-11-28, 4 ranks on 2 cores,
// OSU's osu_alltoall through the MPI layer, 1 KiB / 64 KiB / 1 MiB per pair, medians of 3
// alternating rounds: 88 / 214 / 2154 us issued as asynchronous, 42 / 111 / 2003 us issued for
// the waiting caller (no change at 2 ranks). So a blocking form marks its thread while it issues.
thread_local bool issuing_blocking = false;

detail::Group::Waiter exchange_waiter() {
  return issuing_blocking ? detail::Group::Waiter::caller : detail::Group::Waiter::unknown;
}

template <class Issue>
void issue_and_wait(const Issue& issue) {
  issuing_blocking = true;
  Request request;
  try {
    request = issue();
  } catch (...) {
    issuing_blocking = false;
    throw;
  }
  issuing_blocking = false;
  request.wait();
}

detail::Layout layout_of(const char* call, const char* what, std::span<const std::size_t> bytes,
                         std::span<const std::size_t> offsets, int size) {
  if (static_cast<int>(bytes.size()) != size || static_cast<int>(offsets.size()) != size) {
    throw ConfigError(std::string(call) + ": " + what + " counts and offsets need one entry per rank (" +
                      std::to_string(size) + "), got " + std::to_string(bytes.size()) + " and " +
                      std::to_string(offsets.size()));
  }
  return {{bytes.begin(), bytes.end()}, {offsets.begin(), offsets.end()}};
}

detail::Layout uniform_layout(std::size_t bytes_per_rank, int size) {
  detail::Layout layout;
  for (int r = 0; r < size; ++r) {
    layout.bytes.push_back(bytes_per_rank);
    layout.offsets.push_back(static_cast<std::size_t>(r) * bytes_per_rank);
  }
  return layout;
}

void check_root_of(const char* call, int root, int size) {
  if (root < 0 || root >= size) {
    throw ConfigError(std::string(call) + ": root " + std::to_string(root) + " is not a rank of this communicator (" +
                      std::to_string(size) + " ranks)");
  }
}

void check_scan(const char* call, DataType type, ReduceOp op) {
  reduction_call(call, 0, type, op);  // refuses what the pair cannot reduce
  if (op == ReduceOp::avg) throw ConfigError(std::string(call) + ": avg has no meaning for a prefix; use sum");
}

}  // namespace

Request Communicator::alltoall_async(const void* send, void* recv, std::size_t bytes_per_rank,
                                     CompletionCallback done) {
  const auto layout = uniform_layout(bytes_per_rank, size());
  return alltoallv_async(send, layout.bytes, layout.offsets, recv, layout.bytes, layout.offsets, std::move(done));
}

void Communicator::alltoall(const void* send, void* recv, std::size_t bytes_per_rank) {
  const auto ranks = static_cast<std::size_t>(size());
  const std::size_t all_blocks = bytes_per_rank <= SIZE_MAX / ranks ? bytes_per_rank * ranks : SIZE_MAX;
  if (group_->choose(detail::Collective::alltoall, all_blocks, /*blocking=*/true) == detail::Algorithm::board) {
    check_data(send, bytes_per_rank, "alltoall");
    check_data(recv, bytes_per_rank, "alltoall");
    group_->board().alltoall(send, recv, bytes_per_rank, {"alltoall", std::nullopt, std::nullopt, -1, 0});
    return;
  }
  issue_and_wait([&] { return alltoall_async(send, recv, bytes_per_rank); });
}

Request Communicator::alltoallv_async(const void* send, std::span<const std::size_t> send_bytes,
                                      std::span<const std::size_t> send_offsets, void* recv,
                                      std::span<const std::size_t> recv_bytes,
                                      std::span<const std::size_t> recv_offsets, CompletionCallback done) {
  auto sends = layout_of("alltoallv", "send", send_bytes, send_offsets, size());
  auto receives = layout_of("alltoallv", "receive", recv_bytes, recv_offsets, size());
  const auto me = static_cast<std::size_t>(rank());
  if (sends.bytes[me] != receives.bytes[me]) {
    throw ConfigError("alltoallv: this rank sends itself " + std::to_string(sends.bytes[me]) + " bytes but receives " +
                      std::to_string(receives.bytes[me]));
  }
  const std::size_t largest = std::max(*std::max_element(sends.bytes.begin(), sends.bytes.end()),
                                       *std::max_element(receives.bytes.begin(), receives.bytes.end()));
  return group_->issue<detail::AlltoallvOperation>(
      exchange_waiter(), std::move(done), {"alltoall", std::nullopt, std::nullopt, -1, 0}, send, std::move(sends), recv,
      std::move(receives), largest > kAlltoallAllAtOnceBytes ? kAlltoallPeersPerRound : std::max(1, size() - 1));
}

void Communicator::alltoallv(const void* send, std::span<const std::size_t> send_bytes,
                             std::span<const std::size_t> send_offsets, void* recv,
                             std::span<const std::size_t> recv_bytes, std::span<const std::size_t> recv_offsets) {
  issue_and_wait([&] { return alltoallv_async(send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets); });
}

Request Communicator::allgatherv_async(const void* send, std::size_t send_bytes, void* recv,
                                       std::span<const std::size_t> recv_bytes,
                                       std::span<const std::size_t> recv_offsets, CompletionCallback done) {
  auto receives = layout_of("allgatherv", "receive", recv_bytes, recv_offsets, size());
  if (receives.bytes[static_cast<std::size_t>(rank())] != send_bytes) {
    throw ConfigError("allgatherv: this rank sends " + std::to_string(send_bytes) +
                      " bytes but its own receive count is " +
                      std::to_string(receives.bytes[static_cast<std::size_t>(rank())]));
  }
  return group_->issue<detail::AllgathervOperation>(exchange_waiter(), std::move(done),
                                                    {"allgatherv", std::nullopt, std::nullopt, -1, 0}, send, send_bytes,
                                                    recv, std::move(receives));
}

void Communicator::allgatherv(const void* send, std::size_t send_bytes, void* recv,
                              std::span<const std::size_t> recv_bytes, std::span<const std::size_t> recv_offsets) {
  issue_and_wait([&] { return allgatherv_async(send, send_bytes, recv, recv_bytes, recv_offsets); });
}

Request Communicator::gather_async(const void* send, void* recv, std::size_t bytes_per_rank, int root,
                                   CompletionCallback done) {
  check_root_of("gather", root, size());
  return group_->issue<detail::RootedOperation>(
      exchange_waiter(), std::move(done), {"gather", std::nullopt, std::nullopt, root, bytes_per_rank}, true, send,
      bytes_per_rank, recv, uniform_layout(bytes_per_rank, size()), root);
}

void Communicator::gather(const void* send, void* recv, std::size_t bytes_per_rank, int root) {
  issue_and_wait([&] { return gather_async(send, recv, bytes_per_rank, root); });
}

Request Communicator::gatherv_async(const void* send, std::size_t send_bytes, void* recv,
                                    std::span<const std::size_t> recv_bytes, std::span<const std::size_t> recv_offsets,
                                    int root, CompletionCallback done) {
  check_root_of("gatherv", root, size());
  detail::Layout layout;
  if (rank() == root) layout = layout_of("gatherv", "receive", recv_bytes, recv_offsets, size());
  return group_->issue<detail::RootedOperation>(exchange_waiter(), std::move(done),
                                                {"gatherv", std::nullopt, std::nullopt, root, 0}, true, send,
                                                send_bytes, recv, std::move(layout), root);
}

void Communicator::gatherv(const void* send, std::size_t send_bytes, void* recv,
                           std::span<const std::size_t> recv_bytes, std::span<const std::size_t> recv_offsets,
                           int root) {
  issue_and_wait([&] { return gatherv_async(send, send_bytes, recv, recv_bytes, recv_offsets, root); });
}

Request Communicator::scatter_async(const void* send, void* recv, std::size_t bytes_per_rank, int root,
                                    CompletionCallback done) {
  check_root_of("scatter", root, size());
  return group_->issue<detail::RootedOperation>(
      exchange_waiter(), std::move(done), {"scatter", std::nullopt, std::nullopt, root, bytes_per_rank}, false, recv,
      bytes_per_rank, const_cast<void*>(send), uniform_layout(bytes_per_rank, size()), root);
}

void Communicator::scatter(const void* send, void* recv, std::size_t bytes_per_rank, int root) {
  issue_and_wait([&] { return scatter_async(send, recv, bytes_per_rank, root); });
}

Request Communicator::scatterv_async(const void* send, std::span<const std::size_t> send_bytes,
                                     std::span<const std::size_t> send_offsets, void* recv, std::size_t recv_bytes,
                                     int root, CompletionCallback done) {
  check_root_of("scatterv", root, size());
  detail::Layout layout;
  if (rank() == root) layout = layout_of("scatterv", "send", send_bytes, send_offsets, size());
  return group_->issue<detail::RootedOperation>(exchange_waiter(), std::move(done),
                                                {"scatterv", std::nullopt, std::nullopt, root, 0}, false, recv,
                                                recv_bytes, const_cast<void*>(send), std::move(layout), root);
}

void Communicator::scatterv(const void* send, std::span<const std::size_t> send_bytes,
                            std::span<const std::size_t> send_offsets, void* recv, std::size_t recv_bytes, int root) {
  issue_and_wait([&] { return scatterv_async(send, send_bytes, send_offsets, recv, recv_bytes, root); });
}

Request Communicator::reduce_async(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op,
                                   int root, CompletionCallback done) {
  check_root_of("reduce", root, size());
  auto call = reduction_call("reduce", count, type, op);
  call.root = root;
  return group_->issue<detail::FoldOperation>(exchange_waiter(), std::move(done), call, send, recv, count,
                                              std::vector<std::size_t>{}, type, op, root);
}

void Communicator::reduce(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op, int root) {
  issue_and_wait([&] { return reduce_async(send, recv, count, type, op, root); });
}

Request Communicator::scan_async(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op,
                                 CompletionCallback done) {
  check_scan("scan", type, op);
  return group_->issue<detail::ScanOperation>(
      exchange_waiter(), std::move(done), reduction_call("scan", count, type, op), send, recv, count, type, op, false);
}

void Communicator::scan(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op) {
  issue_and_wait([&] { return scan_async(send, recv, count, type, op); });
}

Request Communicator::exscan_async(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op,
                                   CompletionCallback done) {
  check_scan("exscan", type, op);
  return group_->issue<detail::ScanOperation>(
      exchange_waiter(), std::move(done), reduction_call("exscan", count, type, op), send, recv, count, type, op, true);
}

void Communicator::exscan(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op) {
  issue_and_wait([&] { return exscan_async(send, recv, count, type, op); });
}

Request Communicator::reduce_scatter_async(const void* send, void* recv, std::span<const std::size_t> counts,
                                           DataType type, ReduceOp op, CompletionCallback done) {
  if (static_cast<int>(counts.size()) != size()) {
    throw ConfigError("reduce_scatter: counts need one entry per rank (" + std::to_string(size()) + "), got " +
                      std::to_string(counts.size()));
  }
  std::size_t total = 0;
  for (std::size_t c : counts) total += c;
  return group_->issue<detail::FoldOperation>(exchange_waiter(), std::move(done),
                                              reduction_call("reduce_scatter", total, type, op), send, recv, 0,
                                              std::vector<std::size_t>(counts.begin(), counts.end()), type, op, -1);
}

void Communicator::reduce_scatter(const void* send, void* recv, std::span<const std::size_t> counts, DataType type,
                                  ReduceOp op) {
  issue_and_wait([&] { return reduce_scatter_async(send, recv, counts, type, op); });
}

// ---- Point-to-point ----------------------------------------------------------------------------

namespace {
void check_peer(const char* call, int peer, int size, bool wildcard) {
  if (wildcard && peer == any_source) return;
  if (peer < 0 || peer >= size) {
    throw ConfigError(std::string(call) + ": peer " + std::to_string(peer) + " is not a rank of this communicator (" +
                      std::to_string(size) + (size == 1 ? " rank" : " ranks") + ")" +
                      (wildcard ? "" : "; any_source is for receives only"));
  }
}
void check_tag(const char* call, int tag, bool wildcard) {
  if (wildcard && tag == any_tag) return;
  if (tag < 0) {
    throw ConfigError(std::string(call) + ": tag " + std::to_string(tag) +
                      " is negative (tags are >= 0; any_tag is for receives and probes only)");
  }
}
}  // namespace

Request Communicator::isend(const void* data, std::size_t bytes, int peer, int tag, SendMode mode) {
  check_peer("isend", peer, size(), false);
  check_tag("isend", tag, false);
  check_data(data, bytes, "isend");
  // Note [Fast lane]: an eager message that can go out at once (by its lane or its Pair) is sent as
  // it is issued.
  if (mode == SendMode::standard && group_->send_now(data, bytes, peer, tag))
    return Request(MessageStatus{rank(), tag, bytes});
  return group_->issue_p2p(
      detail::Group::Waiter::issuer_soon,
      [=](detail::PointToPoint& p2p, const std::shared_ptr<detail::OperationState>& state) {
        p2p.send(state, peer, tag, data, bytes, mode == SendMode::synchronous);
      },
      /*start_here=*/true);
}

Request Communicator::irecv(void* data, std::size_t capacity, int peer, int tag) {
  check_peer("irecv", peer, size(), true);
  check_tag("irecv", tag, true);
  check_data(data, capacity, "irecv");
  return group_->issue_p2p(
      detail::Group::Waiter::issuer_soon,
      [=](detail::PointToPoint& p2p, const std::shared_ptr<detail::OperationState>& state) {
        p2p.receive(state, peer, tag, data, capacity);
      },
      /*start_here=*/true);
}

void Communicator::send(const void* data, std::size_t bytes, int peer, int tag, SendMode mode) {
  check_peer("send", peer, size(), false);
  check_tag("send", tag, false);
  check_data(data, bytes, "send");
  // A blocking send starts on this thread, eager or not (Note [Running here]). A rendezvous
  // started here made 64 KiB ping-pongs slower on 2026-11-27 (10.0 -> 12.3 us); posted, it now
  // waited for the waiting caller's first run of the loop, which Note [Cheap spins] puts after
  // kSpinsPerLoopPoll spins. Measured 2026-11-28 (about 21:25 UTC), tnt-bench-p2p latency under chrt,
  // 5 alternating rounds, medians, posted against started here (both with that Note's change):
  // 32 KiB 3.31 -> 2.06 us, 64 KiB 4.47 -> 3.23, 256 KiB 11.3 -> 10.2; 8 bytes to 16 KiB and
  // 1 to 4 MiB within 2 %.
  const bool start_here = mode == SendMode::standard;
  if (start_here && group_->send_now(data, bytes, peer, tag)) return;  // Note [Fast lane]
  group_
      ->issue_p2p(
          detail::Group::Waiter::caller,
          [=](detail::PointToPoint& p2p, const std::shared_ptr<detail::OperationState>& state) {
            p2p.send(state, peer, tag, data, bytes, mode == SendMode::synchronous);
          },
          start_here)
      .wait();
}

MessageStatus Communicator::recv(void* data, std::size_t capacity, int peer, int tag) {
  check_peer("recv", peer, size(), true);
  check_tag("recv", tag, true);
  check_data(data, capacity, "recv");
  // Started here since 2026-11-28: with Note [Cheap spins] in event_loop.cpp a posted start
  // cost the waiting caller an extra run of the loop. Both together, tnt-bench-p2p latency under
  // chrt, 3 alternating rounds: 8 bytes 1.12 -> 0.93 us, 4 KiB 1.22 -> 1.11, 64 KiB 8.05 -> 7.70.
  if (auto status = group_->receive_now(data, capacity, peer, tag)) return *status;  // Note [Fast lane]
  const Request request = group_->issue_p2p(
      detail::Group::Waiter::caller,
      [=](detail::PointToPoint& p2p, const std::shared_ptr<detail::OperationState>& state) {
        p2p.receive(state, peer, tag, data, capacity);
      },
      /*start_here=*/true);
  try {
    request.wait();
  } catch (const TruncationError& e) {
    throw ReceiveTruncated(e.what(), request.status());
  }
  return request.status();
}

MessageStatus Communicator::sendrecv(const void* send_data, std::size_t send_bytes, int dest, int send_tag,
                                     void* recv_data, std::size_t capacity, int source, int recv_tag) {
  check_peer("sendrecv", dest, size(), false);
  check_tag("sendrecv", send_tag, false);
  check_peer("sendrecv", source, size(), true);
  check_tag("sendrecv", recv_tag, true);
  check_data(send_data, send_bytes, "sendrecv");
  check_data(recv_data, capacity, "sendrecv");
  const Request requests[] = {
      group_->issue_p2p(detail::Group::Waiter::caller,
                        [=](detail::PointToPoint& p2p, const std::shared_ptr<detail::OperationState>& state) {
                          p2p.receive(state, source, recv_tag, recv_data, capacity);
                        }),
      group_->issue_p2p(detail::Group::Waiter::caller,
                        [=](detail::PointToPoint& p2p, const std::shared_ptr<detail::OperationState>& state) {
                          p2p.send(state, dest, send_tag, send_data, send_bytes, false);
                        })};
  Request::wait_all(requests);
  return requests[0].status();
}

MessageStatus Communicator::probe(int peer, int tag) {
  check_peer("probe", peer, size(), true);
  check_tag("probe", tag, true);
  return group_->probe(peer, tag);
}

std::optional<MessageStatus> Communicator::iprobe(int peer, int tag) {
  check_peer("iprobe", peer, size(), true);
  check_tag("iprobe", tag, true);
  return group_->probe_now(peer, tag);
}

}  // namespace tnt
