#include "joining_side.h"

#include <kj/exception.h>

#include "framing.h"
#include "tnt/core/error.h"
#include "wire.capnp.h"

namespace tnt::transport::detail {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

std::string master_of(const JobEnvironment& env) { return env.master_addr + ":" + std::to_string(env.master_port); }

// One attempt: resolve, connect (2 s at most) and authenticate. Returns the error, or none with
// `socket` ready.
asio::awaitable<boost::system::error_code> try_connect(EventLoop& loop, const JobEnvironment& env,
                                                       const AuthContext& auth, tcp::socket& socket) {
  tcp::resolver resolver(loop.strand());
  boost::system::error_code ec;
  auto endpoints = co_await resolver.async_resolve(env.master_addr, std::to_string(env.master_port),
                                                   asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return ec;
  {
    SocketDeadline attempt_deadline(socket, std::chrono::milliseconds(2000));
    co_await asio::async_connect(socket, endpoints, asio::redirect_error(asio::use_awaitable, ec));
  }
  if (!ec && !socket.is_open()) ec = asio::error::timed_out;
  if (ec) co_return ec;
  // A master that is still starting, or busy with a flood of bad connections, may drop us before
  // answering: that is worth another try. A wrong token is not (it throws).
  SocketDeadline deadline(socket, env.handshake_timeout);
  try {
    co_await authenticate_as_client(socket, auth, ChannelKind::rendezvous, env.rank, 0);
  } catch (const boost::system::system_error& error) {
    co_return deadline.expired() ? asio::error::timed_out : error.code();
  }
  co_return boost::system::error_code{};
}

// Retries with a growing pause until TNT_CONNECT_TIMEOUT_S has passed.
asio::awaitable<tcp::socket> connect_with_retries(EventLoop& loop, const JobEnvironment& env, const AuthContext& auth) {
  const auto give_up = Clock::now() + env.connect_timeout;
  auto backoff = std::chrono::milliseconds(50);
  for (int attempts = 1;; ++attempts) {
    tcp::socket socket(loop.strand());
    const boost::system::error_code ec = co_await try_connect(loop, env, auth, socket);
    if (!ec) {
      boost::system::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      co_return socket;
    }
    if (Clock::now() + backoff >= give_up) {
      throw JobError("cannot reach the master rank at " + master_of(env) + " after " + std::to_string(attempts) +
                     " attempts in " + seconds(env.connect_timeout) + " (TNT_CONNECT_TIMEOUT_S): " + ec.message());
    }
    asio::steady_timer pause(loop.strand(), backoff);
    co_await pause.async_wait(asio::use_awaitable);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

asio::awaitable<void> send_hello(tcp::socket& socket, const JobEnvironment& env, const RendezvousOptions& options,
                                 const std::string& data_address) {
  capnp::MallocMessageBuilder message;
  auto hello = message.initRoot<wire::Hello>();
  hello.setRank(static_cast<std::uint32_t>(env.rank));
  hello.setSize(static_cast<std::uint32_t>(env.size));
  hello.setJobId(env.job_id);
  hello.setProtocolVersion(options.protocol_version);
  hello.setHostname(local_hostname());
  hello.setDataAddress(data_address);
  hello.setTransport(env.transport);
  auto digest = sha256(options.configuration);
  hello.setConfigHash(kj::arrayPtr(digest.data(), digest.size()));
  co_await write_frame(socket, message);
}

// The master answers once every rank has joined, so this waits as long as joining may.
asio::awaitable<std::vector<PeerAddress>> receive_address_book(tcp::socket& socket, const JobEnvironment& env) {
  const std::string master = master_of(env);
  Frame frame;
  {
    SocketDeadline deadline(socket, env.connect_timeout + env.handshake_timeout);
    try {
      frame = co_await read_frame(socket, kMaxControlFrame + 1024 * static_cast<std::size_t>(env.size),
                                  "the master's reply", master);
    } catch (const boost::system::system_error& error) {
      throw JobError(
          "the master at " + master + " gave no address book: " +
          (deadline.expired() ? "no answer within " + seconds(env.connect_timeout) : error.code().message()));
    }
  }
  std::vector<PeerAddress> book;
  try {
    auto reader = frame.reader();
    auto reply = reader.getRoot<wire::RendezvousReply>();
    if (reply.isRefusal()) {
      throw JobError("the master at " + master + " refused to start the job: " + reply.getRefusal().cStr());
    }
    auto entries = reply.getAddressBook();
    if (entries.size() != static_cast<unsigned>(env.size)) {
      throw JobError("the master's address book has the wrong size");
    }
    for (auto entry : entries) {
      book.push_back(PeerAddress{static_cast<int>(entry.getRank()), entry.getHostname(), entry.getDataAddress()});
    }
  } catch (const kj::Exception& error) {
    throw JobError("malformed address book from the master at " + master + ": " + error.getDescription().cStr());
  }
  co_return book;
}

}  // namespace

asio::awaitable<Joined> join_master(EventLoop& loop, const JobEnvironment& env, const RendezvousOptions& options,
                                    const AuthContext& auth, TaskCount& tasks, DataAddressFor data_address_for) {
  TaskCount::Scope task(tasks);
  auto link = std::make_unique<ControlLink>(co_await connect_with_retries(loop, env, auth));
  link->rank = 0;
  link->address = master_of(env);
  const std::string local_ip =
      env.data_addr.empty() ? link->socket.local_endpoint().address().to_string() : env.data_addr;
  co_await send_hello(link->socket, env, options, data_address_for(local_ip));
  Joined joined;
  joined.book = co_await receive_address_book(link->socket, env);
  link->hostname = joined.book[0].hostname;
  joined.links.push_back(std::move(link));
  co_return joined;
}

}  // namespace tnt::transport::detail
