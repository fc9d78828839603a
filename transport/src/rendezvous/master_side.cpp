#include "master_side.h"

#include <algorithm>

#include <kj/exception.h>
#include <spdlog/spdlog.h>

#include "framing.h"
#include "tnt/core/error.h"

namespace tnt::transport::detail {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// Unauthenticated connections being handshaken at once; more are closed unread, so a flood of
// garbage connections cannot exhaust the master's descriptors or memory.
constexpr int kMaxPendingAdmissions = 128;

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

MasterSide::MasterSide(EventLoop& loop, const JobEnvironment& env, const RendezvousOptions& options,
                       const AuthContext& auth, TaskCount& tasks)
    : loop_(loop), env_(env), options_(options), auth_(auth), tasks_(tasks) {}

asio::awaitable<Joined> MasterSide::run(DataAddressFor data_address_for) {
  TaskCount::Scope task(tasks_);
  joined_.book.assign(env_.size, PeerAddress{});
  listen();
  const std::string local_ip =
      env_.data_addr.empty() ? acceptor_->local_endpoint().address().to_string() : env_.data_addr;
  joined_.book[0] = PeerAddress{0, local_hostname(), data_address_for(local_ip)};
  spdlog::debug("rendezvous: master listening on {}:{} for {} ranks", env_.master_addr, env_.master_port,
                env_.size - 1);

  asio::steady_timer deadline(loop_.strand(), env_.connect_timeout);
  arm_deadline(deadline);
  co_await accept_all();
  deadline.cancel();
  close_acceptor();
  if (!rendezvous_error_.empty()) {
    const std::string reason = rendezvous_error_;
    for (auto& link : joined_.links) co_await refuse(*link, reason);
    throw JobError(reason);
  }
  answer_with_address_book();
  spdlog::debug("rendezvous: all {} ranks joined", env_.size);
  co_return std::move(joined_);
}

void MasterSide::listen() {
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
    throw ConfigError("the master rank cannot listen on " + env_.master_addr + ":" + std::to_string(env_.master_port) +
                      ": " + ec.message() + " (is the port in use?)");
  }
  acceptor_->listen(asio::socket_base::max_listen_connections);
}

void MasterSide::arm_deadline(asio::steady_timer& deadline) {
  deadline.async_wait([this](const boost::system::error_code& wait_error) {
    if (wait_error || ranks_in_ == env_.size - 1 || !rendezvous_error_.empty()) return;
    std::string missing;
    for (int r = 1; r < env_.size; ++r) {
      if (joined_.book[r].data_address.empty()) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    rendezvous_error_ = "rendezvous timed out after " + seconds(env_.connect_timeout) +
                        " (TNT_CONNECT_TIMEOUT_S): rank(s) " + missing + " never joined";
    if (!last_rejection_.empty()) rendezvous_error_ += "; last rejected connection: " + last_rejection_;
    close_acceptor();
  });
}

asio::awaitable<void> MasterSide::accept_all() {
  while (ranks_in_ < env_.size - 1 && rendezvous_error_.empty()) {
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
}

asio::awaitable<void> MasterSide::admit(std::unique_ptr<ControlLink> link) {
  TaskCount::Scope task(tasks_);
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
    if (identity.kind != ChannelKind::rendezvous) {
      throw JobError("connection from " + link->address + " is not a rendezvous channel");
    }
  } catch (const std::exception& error) {
    reject(deadline.expired() ? "connection from " + link->address + " sent no complete handshake within " +
                                    seconds(env_.handshake_timeout)
                              : std::string(error.what()));
    co_return;
  }
  // Authenticated: from here on the peer holds the job token, so what it gets wrong is the job's
  // problem, and the job fails with a message that says what differs.
  try {
    if (!co_await read_hello(*link, identity.rank)) co_return;
  } catch (const std::exception& error) {
    fail_rendezvous(deadline.expired() ? "authenticated peer " + link->address + " sent no Hello within " +
                                             seconds(env_.handshake_timeout)
                                       : std::string(error.what()));
    co_return;
  }
  if (!rendezvous_error_.empty()) {
    co_await refuse(*link, rendezvous_error_);
    co_return;
  }
  spdlog::debug("rendezvous: {} joined", link->name());
  joined_.links.push_back(std::move(link));
  if (++ranks_in_ == env_.size - 1) close_acceptor();
}

asio::awaitable<bool> MasterSide::read_hello(ControlLink& link, int authenticated_rank) {
  Frame frame = co_await read_frame(link.socket, kMaxControlFrame, "the Hello", link.address);
  std::string refusal;
  try {
    auto reader = frame.reader();
    auto hello = reader.getRoot<wire::Hello>();
    link.rank = static_cast<int>(hello.getRank());
    link.hostname = hello.getHostname();
    refusal = check_hello(hello, authenticated_rank);
    if (refusal.empty()) joined_.book[link.rank] = PeerAddress{link.rank, link.hostname, hello.getDataAddress()};
  } catch (const kj::Exception& error) {
    refusal = "malformed Hello from " + link.address + ": " + error.getDescription().cStr();
  }
  if (refusal.empty()) co_return true;
  co_await refuse(link, refusal);
  fail_rendezvous(refusal);
  co_return false;
}

std::string MasterSide::check_hello(wire::Hello::Reader hello, int authenticated_rank) const {
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
  if (!joined_.book[rank].data_address.empty()) {
    return "duplicate rank: " + who + " joined twice (two processes were given TNT_RANK=" + std::to_string(rank) + ")";
  }
  if (std::string(hello.getJobId().cStr()) != env_.job_id) {
    return who + " belongs to job '" + std::string(hello.getJobId().cStr()) + "'";
  }
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

asio::awaitable<void> MasterSide::refuse(ControlLink& link, const std::string& reason) {
  capnp::MallocMessageBuilder message;
  message.initRoot<wire::RendezvousReply>().setRefusal(reason);
  boost::system::error_code ignored;
  auto bytes = encode_frame(message);
  co_await asio::async_write(link.socket, asio::buffer(bytes), asio::redirect_error(asio::use_awaitable, ignored));
  link.socket.close(ignored);
}

void MasterSide::reject(const std::string& reason) {
  last_rejection_ = reason;
  // A scanner or a flood would fill the log; the first few are what a person needs.
  if (++rejections_ <= 5) {
    spdlog::warn("rendezvous: ignored connection: {}", reason);
  } else if (rejections_ == 6) {
    spdlog::warn("rendezvous: ignoring further bad connections silently");
  }
}

void MasterSide::fail_rendezvous(const std::string& reason) {
  if (rendezvous_error_.empty()) rendezvous_error_ = reason;
  close_acceptor();
}

void MasterSide::close_acceptor() {
  boost::system::error_code ignored;
  if (acceptor_) acceptor_->close(ignored);
}

void MasterSide::answer_with_address_book() {
  capnp::MallocMessageBuilder message;
  auto entries = message.initRoot<wire::RendezvousReply>().initAddressBook(static_cast<unsigned>(env_.size));
  for (int r = 0; r < env_.size; ++r) {
    entries[r].setRank(static_cast<std::uint32_t>(r));
    entries[r].setHostname(joined_.book[r].hostname);
    entries[r].setDataAddress(joined_.book[r].data_address);
  }
  joined_.answer = encode_frame(message);
}

}  // namespace tnt::transport::detail
