#include "tnt/transport/rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <deque>
#include <map>

#include <kj/exception.h>
#include <spdlog/spdlog.h>

#include "auth.h"
#include "framing.h"
#include "tnt/core/error.h"
#include "wire.capnp.h"

namespace tnt::transport {
namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// Unauthenticated connections being handshaken at once; more are closed unread, so a flood
// of garbage connections cannot exhaust the master's descriptors or memory.
constexpr int kMaxPendingAdmissions = 128;

std::string local_hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

std::string seconds(std::chrono::milliseconds duration) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", static_cast<double>(duration.count()) / 1000.0);
  return text;
}

std::string to_hex(const std::array<std::uint8_t, 32>& digest) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (auto byte : digest) {
    out += digits[byte >> 4];
    out += digits[byte & 15];
  }
  return out;
}

}  // namespace

// One control connection: master <-> rank. Writes are queued so that heartbeats, aborts and
// goodbyes from different coroutines never interleave on the socket.
struct ControlLink {
  explicit ControlLink(tcp::socket s) : socket(std::move(s)) {}
  tcp::socket socket;
  int rank = -1;
  std::string hostname;
  std::string address;
  Clock::time_point last_heard = Clock::now();
  std::deque<std::vector<std::uint8_t>> outbox;
  bool writing = false;
  bool said_goodbye = false;
  bool closed = false;

  std::string name() const { return "rank " + std::to_string(rank) + " (" + hostname + ", " + address + ")"; }
};

class Rendezvous::Impl {
 public:
  Impl(EventLoop& loop, const JobEnvironment& env, RendezvousOptions options)
      : loop_(loop),
        env_(env),
        options_(std::move(options)),
        auth_{env.job_id, env.job_token},
        heartbeat_timer_(loop.strand()) {}

  ~Impl() { shutdown(); }

  std::vector<PeerAddress> join(const std::function<std::string(const std::string&)>& data_address_for) {
    if (env_.rank == 0) return loop_.run(serve(data_address_for));
    return loop_.run(connect_to_master(data_address_for));
  }

  void set_failure_handler(FailureHandler handler) {
    asio::dispatch(loop_.strand(), [this, handler = std::move(handler)]() mutable {
      failure_handler_ = std::move(handler);
      if (failed_) failure_handler_(lost_rank_, failure_reason_);
    });
  }

  void report_peer_lost(int rank, const std::string& reason) {
    if (env_.rank == 0) {
      fail_job(rank, "rank 0 lost its connection to " + peer_name(rank) + ": " + reason);
      return;
    }
    capnp::MallocMessageBuilder message;
    auto lost = message.initRoot<wire::Control>().initPeerLost();
    lost.setRank(rank);
    lost.setReason(reason);
    // The master judges: its verdict names the rank that really failed, also when what we saw
    // was only a neighbour going down because of it.
    for (auto& link : links_) send(*link, encode_frame(message));
  }

  void finish() {
    loop_.call([this] {
      finishing_ = true;
      if (env_.rank != 0) {
        send_control([](wire::Control::Builder c) { c.setGoodbye(); });
      } else {
        maybe_release_everyone();
      }
    });
    // Bounded: heartbeats keep running, so a silent or lost peer fails the job instead.
    loop_.wait_until([&] { return finished_.load() || failed_flag_.load(); });
    // The master's goodbyes must leave before its sockets close, or ranks would see a lost master.
    const auto flush_deadline = Clock::now() + std::chrono::seconds(5);
    loop_.wait_until([&] { return pending_writes_.load() == 0 || Clock::now() > flush_deadline; });
  }

 private:
  // ---- master side -------------------------------------------------------------------------

  asio::awaitable<std::vector<PeerAddress>> serve(std::function<std::string(const std::string&)> data_address_for) {
    Task task(*this);
    book_.assign(env_.size, PeerAddress{});
    tcp::resolver resolver(loop_.strand());
    boost::system::error_code ec;
    auto endpoints = resolver.resolve(env_.master_addr, std::to_string(env_.master_port), ec);
    if (ec || endpoints.empty()) {
      throw ConfigError("cannot resolve TNT_MASTER_ADDR='" + env_.master_addr + "': " + ec.message());
    }
    const tcp::endpoint endpoint = *endpoints.begin();
    acceptor_.emplace(loop_.strand());
    acceptor_->open(endpoint.protocol());
    acceptor_->set_option(tcp::acceptor::reuse_address(true));
    acceptor_->bind(endpoint, ec);
    if (ec) {
      throw ConfigError("the master rank cannot listen on " + env_.master_addr + ":" +
                        std::to_string(env_.master_port) + ": " + ec.message() + " (is the port in use?)");
    }
    acceptor_->listen(asio::socket_base::max_listen_connections);
    const std::string local_ip = env_.data_addr.empty() ? endpoint.address().to_string() : env_.data_addr;
    book_[0] = PeerAddress{0, local_hostname(), data_address_for(local_ip)};
    spdlog::debug("rendezvous: master listening on {}:{} for {} ranks", env_.master_addr, env_.master_port,
                  env_.size - 1);

    asio::steady_timer deadline(loop_.strand(), env_.connect_timeout);
    deadline.async_wait([this](const boost::system::error_code& wait_error) {
      if (wait_error || joined_ == env_.size - 1 || !rendezvous_error_.empty()) return;
      std::string missing;
      for (int r = 1; r < env_.size; ++r) {
        if (book_[r].data_address.empty()) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      rendezvous_error_ = "rendezvous timed out after " + seconds(env_.connect_timeout) +
                          " (TNT_CONNECT_TIMEOUT_S): rank(s) " + missing + " never joined";
      if (!last_rejection_.empty()) rendezvous_error_ += "; last rejected connection: " + last_rejection_;
      close_acceptor();
    });

    while (joined_ < env_.size - 1 && rendezvous_error_.empty()) {
      tcp::socket socket(loop_.strand());
      boost::system::error_code accept_error;
      co_await acceptor_->async_accept(socket, asio::redirect_error(asio::use_awaitable, accept_error));
      if (accept_error) {
        if (accept_error == asio::error::operation_aborted || !acceptor_->is_open()) break;
        // Out of descriptors, say: pause instead of spinning on an accept that fails at once.
        spdlog::warn("rendezvous: accept failed: {}", accept_error.message());
        asio::steady_timer pause(loop_.strand(), std::chrono::milliseconds(100));
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, accept_error));
        continue;
      }
      if (pending_admissions_ >= kMaxPendingAdmissions) continue;  // the socket closes unread
      asio::co_spawn(loop_.strand(), admit(std::make_unique<ControlLink>(std::move(socket))), asio::detached);
    }
    deadline.cancel();
    close_acceptor();
    if (!rendezvous_error_.empty()) {
      std::string reason = rendezvous_error_;
      for (auto& link : links_) co_await refuse(*link, reason);
      throw JobError(reason);
    }

    capnp::MallocMessageBuilder message;
    auto entries = message.initRoot<wire::RendezvousReply>().initAddressBook(static_cast<unsigned>(env_.size));
    for (int r = 0; r < env_.size; ++r) {
      entries[r].setRank(static_cast<std::uint32_t>(r));
      entries[r].setHostname(book_[r].hostname);
      entries[r].setDataAddress(book_[r].data_address);
    }
    auto bytes = encode_frame(message);
    for (auto& link : links_) send(*link, bytes);
    start_control_plane();
    spdlog::debug("rendezvous: all {} ranks joined", env_.size);
    co_return book_;
  }

  asio::awaitable<void> admit(std::unique_ptr<ControlLink> link) {
    Task task(*this);
    ++pending_admissions_;
    struct Done {
      int& count;
      ~Done() { --count; }
    } done{pending_admissions_};
    link->address = describe(link->socket);
    SocketDeadline deadline(link->socket, env_.handshake_timeout);
    PeerIdentity identity{};
    try {
      identity = co_await authenticate_as_server(link->socket, auth_, 0);
      if (identity.kind != ChannelKind::rendezvous)
        throw JobError("connection from " + link->address + " is not a rendezvous channel");
    } catch (const std::exception& error) {
      reject(deadline.expired() ? "connection from " + link->address + " sent no complete handshake within " +
                                      seconds(env_.handshake_timeout)
                                : std::string(error.what()));
      co_return;
    }
    // Authenticated: from here on the peer holds the job token, so what it gets wrong is the
    // job's problem, and the job fails with a message that says what differs.
    try {
      Frame frame = co_await read_frame(link->socket, kMaxControlFrame, "the Hello", link->address);
      std::string refusal;
      try {
        auto reader = frame.reader();
        auto hello = reader.getRoot<wire::Hello>();
        link->rank = static_cast<int>(hello.getRank());
        link->hostname = hello.getHostname();
        refusal = check_hello(hello, identity.rank);
        if (refusal.empty()) {
          book_[link->rank] = PeerAddress{link->rank, link->hostname, hello.getDataAddress()};
        }
      } catch (const kj::Exception& error) {
        refusal = "malformed Hello from " + link->address + ": " + error.getDescription().cStr();
      }
      if (!refusal.empty()) {
        co_await refuse(*link, refusal);
        fail_rendezvous(refusal);
        co_return;
      }
    } catch (const std::exception& error) {
      std::string reason = deadline.expired() ? "authenticated peer " + link->address + " sent no Hello within " +
                                                    seconds(env_.handshake_timeout)
                                              : std::string(error.what());
      fail_rendezvous(reason);
      co_return;
    }
    if (!rendezvous_error_.empty()) {
      co_await refuse(*link, rendezvous_error_);
      co_return;
    }
    spdlog::debug("rendezvous: {} joined", link->name());
    links_.push_back(std::move(link));
    if (++joined_ == env_.size - 1) close_acceptor();
  }

  std::string check_hello(wire::Hello::Reader hello, int authenticated_rank) {
    const auto rank = static_cast<long long>(hello.getRank());
    const std::string who = "rank " + std::to_string(rank) + " (" + std::string(hello.getHostname().cStr()) + ")";
    if (hello.getProtocolVersion() != options_.protocol_version) {
      return who + " speaks tnt protocol version " + std::to_string(hello.getProtocolVersion()) +
             " but the master speaks " + std::to_string(options_.protocol_version) +
             ": use the same tnt build on every host";
    }
    if (rank != authenticated_rank) return who + " authenticated as rank " + std::to_string(authenticated_rank);
    if (hello.getSize() != static_cast<std::uint32_t>(env_.size)) {
      return who + " was started with TNT_SIZE=" + std::to_string(hello.getSize()) + " but the master with " +
             std::to_string(env_.size);
    }
    if (rank < 1 || rank >= env_.size) return who + " is outside the job's ranks 1.." + std::to_string(env_.size - 1);
    if (!book_[rank].data_address.empty())
      return "duplicate rank: " + who + " joined twice (two processes were given TNT_RANK=" + std::to_string(rank) +
             ")";
    if (std::string(hello.getJobId().cStr()) != env_.job_id)
      return who + " belongs to job '" + std::string(hello.getJobId().cStr()) + "'";
    if (std::string(hello.getTransport().cStr()) != env_.transport) {
      return who + " uses transport " + std::string(hello.getTransport().cStr()) + " but the master uses " +
             env_.transport;
    }
    const auto expected = sha256(options_.configuration);
    auto hash = hello.getConfigHash();
    if (hash.size() != expected.size() || !std::equal(expected.begin(), expected.end(), hash.begin())) {
      std::array<std::uint8_t, 32> theirs{};
      std::copy_n(hash.begin(), std::min<std::size_t>(hash.size(), 32), theirs.begin());
      return who + " has a different run configuration (hash " + to_hex(theirs).substr(0, 12) + " vs master's " +
             to_hex(expected).substr(0, 12) + "): every rank must run with the same settings";
    }
    if (hello.getDataAddress().size() == 0) return who + " sent no data-plane address";
    return {};
  }

  asio::awaitable<void> refuse(ControlLink& link, const std::string& reason) {
    capnp::MallocMessageBuilder message;
    message.initRoot<wire::RendezvousReply>().setRefusal(reason);
    boost::system::error_code ignored;
    auto bytes = encode_frame(message);
    co_await asio::async_write(link.socket, asio::buffer(bytes), asio::redirect_error(asio::use_awaitable, ignored));
    link.socket.close(ignored);
  }

  void reject(const std::string& reason) {
    last_rejection_ = reason;
    // A scanner or a flood would fill the log; the first few are what a person needs.
    if (++rejections_ <= 5)
      spdlog::warn("rendezvous: ignored connection: {}", reason);
    else if (rejections_ == 6)
      spdlog::warn("rendezvous: ignoring further bad connections silently");
  }

  void fail_rendezvous(const std::string& reason) {
    if (rendezvous_error_.empty()) rendezvous_error_ = reason;
    close_acceptor();
  }

  void close_acceptor() {
    boost::system::error_code ignored;
    if (acceptor_) acceptor_->close(ignored);
  }

  // ---- rank side ---------------------------------------------------------------------------

  asio::awaitable<std::vector<PeerAddress>> connect_to_master(
      std::function<std::string(const std::string&)> data_address_for) {
    Task task(*this);
    const std::string master = env_.master_addr + ":" + std::to_string(env_.master_port);
    const auto give_up = Clock::now() + env_.connect_timeout;
    auto backoff = std::chrono::milliseconds(50);
    int attempts = 0;
    std::string last_error;
    auto link = std::make_unique<ControlLink>(tcp::socket(loop_.strand()));
    link->rank = 0;
    link->address = master;
    while (true) {
      ++attempts;
      tcp::resolver resolver(loop_.strand());
      boost::system::error_code ec;
      auto endpoints = co_await resolver.async_resolve(env_.master_addr, std::to_string(env_.master_port),
                                                       asio::redirect_error(asio::use_awaitable, ec));
      if (!ec) {
        tcp::socket socket(loop_.strand());
        {
          SocketDeadline attempt_deadline(socket, std::chrono::milliseconds(2000));
          co_await asio::async_connect(socket, endpoints, asio::redirect_error(asio::use_awaitable, ec));
        }
        if (!ec && !socket.is_open()) ec = asio::error::timed_out;
        if (!ec) {
          // A master that is still starting, or busy with a flood of bad connections, may drop
          // us before answering: that is worth another try. A wrong token is not.
          SocketDeadline deadline(socket, env_.handshake_timeout);
          try {
            co_await authenticate_as_client(socket, auth_, ChannelKind::rendezvous, env_.rank, 0);
            link->socket = std::move(socket);
            break;
          } catch (const boost::system::system_error& error) {
            ec = deadline.expired() ? asio::error::timed_out : error.code();
          }
        }
      }
      last_error = ec.message();
      if (Clock::now() + backoff >= give_up) {
        throw JobError("cannot reach the master rank at " + master + " after " + std::to_string(attempts) +
                       " attempts in " + seconds(env_.connect_timeout) + " (TNT_CONNECT_TIMEOUT_S): " + last_error);
      }
      asio::steady_timer pause(loop_.strand(), backoff);
      co_await pause.async_wait(asio::use_awaitable);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    }
    boost::system::error_code ignored;
    link->socket.set_option(tcp::no_delay(true), ignored);
    const std::string local_ip =
        env_.data_addr.empty() ? link->socket.local_endpoint().address().to_string() : env_.data_addr;

    {
      capnp::MallocMessageBuilder message;
      auto hello = message.initRoot<wire::Hello>();
      hello.setRank(static_cast<std::uint32_t>(env_.rank));
      hello.setSize(static_cast<std::uint32_t>(env_.size));
      hello.setJobId(env_.job_id);
      hello.setProtocolVersion(options_.protocol_version);
      hello.setHostname(local_hostname());
      hello.setDataAddress(data_address_for(local_ip));
      hello.setTransport(env_.transport);
      auto digest = sha256(options_.configuration);
      hello.setConfigHash(kj::arrayPtr(digest.data(), digest.size()));
      co_await write_frame(link->socket, message);
    }

    // The master answers once every rank has joined, so this waits as long as joining may.
    Frame frame;
    {
      SocketDeadline deadline(link->socket, env_.connect_timeout + env_.handshake_timeout);
      try {
        frame = co_await read_frame(link->socket, kMaxControlFrame + 1024 * static_cast<std::size_t>(env_.size),
                                    "the master's reply", master);
      } catch (const boost::system::system_error& error) {
        throw JobError(
            "the master at " + master + " gave no address book: " +
            (deadline.expired() ? "no answer within " + seconds(env_.connect_timeout) : error.code().message()));
      }
    }
    std::vector<PeerAddress> book;
    try {
      auto reader = frame.reader();
      auto reply = reader.getRoot<wire::RendezvousReply>();
      if (reply.isRefusal())
        throw JobError("the master at " + master + " refused to start the job: " + reply.getRefusal().cStr());
      auto entries = reply.getAddressBook();
      if (entries.size() != static_cast<unsigned>(env_.size))
        throw JobError("the master's address book has the wrong size");
      for (auto entry : entries) {
        book.push_back(PeerAddress{static_cast<int>(entry.getRank()), entry.getHostname(), entry.getDataAddress()});
      }
    } catch (const kj::Exception& error) {
      throw JobError("malformed address book from the master at " + master + ": " + error.getDescription().cStr());
    }
    link->hostname = book[0].hostname;
    book_ = book;
    links_.push_back(std::move(link));
    start_control_plane();
    co_return book;
  }

  // ---- control plane (both sides) ----------------------------------------------------------

  std::chrono::milliseconds heartbeat_interval() const {
    return std::clamp(env_.peer_timeout / 4, std::chrono::milliseconds(20), std::chrono::milliseconds(1000));
  }

  void start_control_plane() {
    for (auto& link : links_) {
      link->last_heard = Clock::now();
      asio::co_spawn(loop_.strand(), read_control(*link), asio::detached);
    }
    schedule_heartbeat();
  }

  void schedule_heartbeat() {
    heartbeat_timer_.expires_after(heartbeat_interval());
    heartbeat_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || stopping_) return;
      const auto now = Clock::now();
      for (auto& link : links_) {
        if (link->closed) continue;
        if (now - link->last_heard > env_.peer_timeout) {
          lost(*link, "has been silent for " +
                          seconds(std::chrono::duration_cast<std::chrono::milliseconds>(now - link->last_heard)) +
                          " (stopped or hung? TNT_PEER_TIMEOUT_S=" + seconds(env_.peer_timeout) + ")");
          continue;
        }
        send_control(*link, [](wire::Control::Builder c) { c.setHeartbeat(); });
      }
      schedule_heartbeat();
    });
  }

  asio::awaitable<void> read_control(ControlLink& link) {
    Task task(*this);
    try {
      while (!stopping_) {
        Frame frame = co_await read_frame(link.socket, kMaxControlFrame, "a control message", link.name());
        link.last_heard = Clock::now();
        auto reader = frame.reader();
        auto control = reader.getRoot<wire::Control>();
        switch (control.which()) {
          case wire::Control::HEARTBEAT: break;
          case wire::Control::PEER_LOST:
            if (env_.rank == 0) {
              const int lost_rank = control.getPeerLost().getRank();
              fail_job(lost_rank, link.name() + " lost its connection to " + peer_name(lost_rank) + ": " +
                                      control.getPeerLost().getReason().cStr());
            }
            break;
          case wire::Control::ABORT:
            fail_local(control.getAbort().getLostRank(), control.getAbort().getReason());
            break;
          case wire::Control::GOODBYE:
            link.said_goodbye = true;
            if (env_.rank == 0)
              maybe_release_everyone();
            else
              mark_finished();
            break;
        }
      }
    } catch (const std::exception& error) {
      if (stopping_ || link.closed) co_return;
      if (link.said_goodbye && (env_.rank == 0 || finished_)) {
        link.closed = true;
        co_return;
      }
      const auto* system_error = dynamic_cast<const boost::system::system_error*>(&error);
      lost(link, system_error && system_error->code() == asio::error::eof
                     ? "closed its connection unexpectedly (process killed or crashed?)"
                     : std::string("failed: ") + error.what());
    }
  }

  void lost(ControlLink& link, const std::string& what) {
    link.closed = true;
    boost::system::error_code ignored;
    link.socket.close(ignored);
    if (env_.rank == 0)
      fail_job(link.rank, peer_name(link.rank) + " " + what);
    else
      fail_local(0, "the master " + peer_name(0) + " " + what);
  }

  void maybe_release_everyone() {
    if (!finishing_ || failed_) return;
    for (auto& link : links_) {
      if (!link->said_goodbye) return;
    }
    for (auto& link : links_) send_control(*link, [](wire::Control::Builder c) { c.setGoodbye(); });
    mark_finished();
  }

  void mark_finished() {
    finished_ = true;
    loop_.wake();
  }

  void fail_job(int lost_rank, const std::string& reason) {
    if (failed_) return;
    capnp::MallocMessageBuilder message;
    auto abort = message.initRoot<wire::Control>().initAbort();
    abort.setLostRank(lost_rank);
    abort.setReason(reason);
    auto bytes = encode_frame(message);
    for (auto& link : links_) {
      if (!link->closed) send(*link, bytes);
    }
    fail_local(lost_rank, reason);
  }

  void fail_local(int lost_rank, const std::string& reason) {
    if (failed_) return;
    failed_ = true;
    failed_flag_ = true;
    lost_rank_ = lost_rank;
    failure_reason_ = reason;
    if (failure_handler_) failure_handler_(lost_rank, reason);
    loop_.wake();
  }

  std::string peer_name(int rank) const {
    if (rank >= 0 && rank < static_cast<int>(book_.size()) && !book_[rank].hostname.empty()) {
      return "rank " + std::to_string(rank) + " (" + book_[rank].hostname + ")";
    }
    return "rank " + std::to_string(rank);
  }

  template <class Fill>
  void send_control(ControlLink& link, Fill fill) {
    capnp::MallocMessageBuilder message;
    fill(message.initRoot<wire::Control>());
    send(link, encode_frame(message));
  }
  template <class Fill>
  void send_control(Fill fill) {
    for (auto& link : links_) send_control(*link, fill);
  }

  void send(ControlLink& link, std::vector<std::uint8_t> bytes) {
    if (link.closed) return;
    link.outbox.push_back(std::move(bytes));
    ++pending_writes_;
    if (!link.writing) write_next(link);
  }

  void write_next(ControlLink& link) {
    if (link.outbox.empty() || link.closed) {
      pending_writes_ -= static_cast<int>(link.outbox.size());
      link.outbox.clear();
      link.writing = false;
      return;
    }
    link.writing = true;
    ++active_tasks_;
    asio::async_write(link.socket, asio::buffer(link.outbox.front()),
                      [this, &link](const boost::system::error_code& ec, std::size_t) {
                        --active_tasks_;
                        link.outbox.pop_front();
                        --pending_writes_;
                        if (ec) {
                          pending_writes_ -= static_cast<int>(link.outbox.size());
                          link.outbox.clear();
                          link.writing = false;
                          loop_.wake();
                          return;  // the read side reports the loss
                        }
                        loop_.wake();
                        write_next(link);
                      });
  }

  void shutdown() {
    loop_.call([this] {
      stopping_ = true;
      heartbeat_timer_.cancel();
      close_acceptor();
      boost::system::error_code ignored;
      for (auto& link : links_) link->socket.close(ignored);
    });
    loop_.wait_until([&] { return active_tasks_.load() == 0; });
  }

  // Counts coroutines and writes that still refer to this object; the destructor waits for 0.
  struct Task {
    explicit Task(Impl& owner) : impl(owner) { ++owner.active_tasks_; }
    ~Task() {
      --impl.active_tasks_;
      impl.loop_.wake();
    }
    Impl& impl;
  };

  EventLoop& loop_;
  JobEnvironment env_;
  RendezvousOptions options_;
  AuthContext auth_;
  std::vector<PeerAddress> book_;
  std::vector<std::unique_ptr<ControlLink>> links_;
  std::optional<tcp::acceptor> acceptor_;
  asio::steady_timer heartbeat_timer_;
  FailureHandler failure_handler_;

  int joined_ = 0;
  int pending_admissions_ = 0;
  int rejections_ = 0;
  std::string rendezvous_error_;
  std::string last_rejection_;

  bool stopping_ = false;
  bool finishing_ = false;
  bool failed_ = false;
  int lost_rank_ = -1;
  std::string failure_reason_;
  std::atomic<bool> finished_{false};
  std::atomic<bool> failed_flag_{false};
  std::atomic<int> active_tasks_{0};
  std::atomic<int> pending_writes_{0};
};

Rendezvous::Rendezvous(EventLoop& loop, const JobEnvironment& env, RendezvousOptions options)
    : impl_(std::make_unique<Impl>(loop, env, std::move(options))) {}
Rendezvous::~Rendezvous() = default;

std::vector<PeerAddress> Rendezvous::join(const std::function<std::string(const std::string&)>& data_address_for) {
  return impl_->join(data_address_for);
}
void Rendezvous::set_failure_handler(FailureHandler handler) { impl_->set_failure_handler(std::move(handler)); }
void Rendezvous::report_peer_lost(int rank, const std::string& reason) { impl_->report_peer_lost(rank, reason); }
void Rendezvous::finish() { impl_->finish(); }

}  // namespace tnt::transport
