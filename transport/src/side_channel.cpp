#include "side_channel.h"

#include <algorithm>
#include <charconv>
#include <set>

#include <spdlog/spdlog.h>

#include "tnt/core/error.h"

namespace tnt::transport {
namespace asio = boost::asio;
using asio::ip::tcp;

std::string peer_name(const std::vector<PeerAddress>& book, int rank) {
  const auto& entry = book[rank];
  return "rank " + std::to_string(rank) + " (" + entry.hostname + ", " + entry.data_address + ")";
}

asio::ip::address parse_data_ip(const std::string& local_ip) {
  boost::system::error_code ec;
  auto address = asio::ip::make_address(local_ip, ec);
  if (ec) throw ConfigError("data-plane address '" + local_ip + "' is not an IP address (TNT_DATA_ADDR?)");
  return address;
}

std::string listen_side_channel(tcp::acceptor& acceptor, const asio::ip::address& address, const std::string& what) {
  tcp::endpoint endpoint(address, 0);
  boost::system::error_code ec;
  acceptor.open(endpoint.protocol());
  acceptor.bind(endpoint, ec);
  if (ec) throw JobError("cannot listen for " + what + " on " + address.to_string() + ": " + ec.message());
  acceptor.listen(asio::socket_base::max_listen_connections);
  const std::string port = std::to_string(acceptor.local_endpoint().port());
  return address.is_v6() ? "[" + address.to_string() + "]:" + port : address.to_string() + ":" + port;
}

tcp::endpoint parse_data_address(const std::string& address) {
  auto bad = [&](const std::string& why) {
    return JobError("bad data address '" + address + "' in the address book: " + why);
  };
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) throw bad("expected ip:port or [ip6]:port");
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  boost::system::error_code ec;
  const auto ip = asio::ip::make_address(host, ec);
  if (ec) throw bad("'" + host + "' is not an IP address");
  const std::string port_text = address.substr(colon + 1);
  unsigned port = 0;
  const auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (error != std::errc{} || end != port_text.data() + port_text.size() || port == 0 || port > 65535) {
    throw bad("port '" + port_text + "' is not a number in 1..65535");
  }
  return tcp::endpoint(ip, static_cast<std::uint16_t>(port));
}

namespace {

// Note [Side channels without Nagle]: a side channel carries small messages one at a time: the
// handshake, and for shared memory one wake-up byte per published chunk. With Nagle's algorithm
// a second small write waits for the ACK of the first, and where traffic runs one way only (the
// peer polls the ring and sends nothing back) Linux delays that ACK by up to 40 ms: a 16 KiB
// allreduce over shared memory then took 22 ms instead of 20 us in some runs (2026-11-23).
void without_nagle(tcp::socket& socket) {
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
}

// Connects `socket` to `peer`'s data listener and proves this rank's identity, asking for `kind`.
asio::awaitable<void> dial(tcp::socket& socket, SideChannelSetup& setup, int peer, ChannelKind kind) {
  co_await socket.async_connect(parse_data_address(setup.book[peer].data_address), asio::use_awaitable);
  without_nagle(socket);
  co_await authenticate_as_client(socket, setup.auth, kind, setup.env.rank, peer);
}

asio::awaitable<void> connect_to(SideChannelSetup& setup, int peer) {
  tcp::socket socket(co_await asio::this_coro::executor);
  SocketDeadline deadline(socket, setup.env.connect_timeout);
  co_await dial(socket, setup, peer, ChannelKind::data);
  co_await setup.establish(peer, socket);
}

// Note [Channels on first use]: a channel that connect() did not open opens when a rank first
// needs it: the rank that needs it connects to the other's data listener, which stays open for
// the job's life, and asks for kind data_on_demand. The other answers with one byte, 1 to take
// the channel or 0 to decline, then both run the back end's set-up as at start-up. Two ranks
// may ask each other at once: each then keeps the channel that the higher rank asked for, so
// the lower one declines nothing of the higher one's and the higher one declines the lower
// one's (it has a request of its own in flight, or already the channel). A rank declines any
// request for a channel it has or is accepting.
asio::awaitable<void> answer_on_demand(SideChannelSetup& setup, tcp::socket socket, int peer) {
  const std::uint8_t take = setup.accept_on_demand(peer) ? 1 : 0;
  co_await asio::async_write(socket, asio::buffer(&take, 1), asio::use_awaitable);
  if (!take) co_return;
  {
    SocketDeadline deadline(socket, setup.env.connect_timeout);
    co_await setup.establish(peer, socket);
  }
  setup.opened(peer);
}

void spawn_answer(SideChannelSetup& setup, tcp::socket socket, int peer) {
  if (peer < 0 || peer >= static_cast<int>(setup.book.size()) || peer == setup.env.rank) {
    spdlog::warn("{}: ignored a channel request from rank {}, which is not a peer", setup.plane, peer);
    return;
  }
  auto executor = socket.get_executor();
  asio::co_spawn(executor, answer_on_demand(setup, std::move(socket), peer),
                 [&setup, peer](std::exception_ptr failure) {
                   if (!failure) return;
                   try {
                     std::rethrow_exception(failure);
                   } catch (const std::exception& e) {
                     setup.failed(peer, std::string("cannot open a channel (") + setup.plane + ") that " +
                                            peer_name(setup.book, peer) + " asked for: " + e.what());
                   }
                 });
}

asio::awaitable<void> accept_from(tcp::acceptor& acceptor, SideChannelSetup& setup, std::set<int> expected,
                                  std::string& error) {
  while (!expected.empty() && error.empty()) {
    tcp::socket socket(co_await asio::this_coro::executor);
    boost::system::error_code ec;
    co_await acceptor.async_accept(socket, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;  // closed by the deadline; `error` says why
    without_nagle(socket);
    const std::string from = describe(socket);
    PeerIdentity identity{};
    {
      SocketDeadline deadline(socket, setup.env.handshake_timeout);
      try {
        identity = co_await authenticate_as_server(socket, setup.auth, setup.env.rank);
      } catch (const std::exception& e) {
        spdlog::warn("{}: ignored connection from {}: {}", setup.plane, from, e.what());
        continue;
      }
    }
    if (identity.kind == ChannelKind::data_on_demand && setup.accept_on_demand) {
      spawn_answer(setup, std::move(socket), identity.rank);  // a rank already past its start-up
      continue;
    }
    if (identity.kind != ChannelKind::data || !expected.count(identity.rank)) {
      spdlog::warn("{}: ignored connection from {} (rank {} was not expected)", setup.plane, from, identity.rank);
      continue;
    }
    // An authenticated peer that fails to set up its channel is an error of the job.
    try {
      co_await setup.establish(identity.rank, socket);
    } catch (const std::exception& e) {
      if (error.empty())
        error = "cannot connect to " + peer_name(setup.book, identity.rank) + " (" + setup.plane + "): " + e.what();
      co_return;
    }
    expected.erase(identity.rank);
  }
}

}  // namespace

asio::awaitable<void> connect_side_channels(tcp::acceptor& acceptor, SideChannelSetup& setup, std::vector<int> peers) {
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());  // with 2 ranks, left == right
  peers.erase(std::remove(peers.begin(), peers.end(), setup.env.rank), peers.end());
  std::set<int> to_accept;
  int to_connect = 0;
  for (int peer : peers) {
    if (peer < setup.env.rank)
      ++to_connect;
    else
      to_accept.insert(peer);
  }
  auto executor = co_await asio::this_coro::executor;
  std::string error;
  int pending = to_connect + static_cast<int>(to_accept.empty() ? 0 : 1);
  // Cancelled when the last connection is up: an event to wait on, not a poll.
  asio::steady_timer all_done(executor, asio::steady_timer::time_point::max());
  auto finished = [&] {
    if (--pending == 0) all_done.cancel();
  };
  asio::steady_timer deadline(executor, setup.env.connect_timeout);
  deadline.async_wait([&](const boost::system::error_code& ec) {
    if (ec) return;
    if (error.empty()) {
      error = "timed out after " + std::to_string(setup.env.connect_timeout.count() / 1000) + " s connecting the " +
              setup.plane;
    }
    boost::system::error_code ignored;
    acceptor.close(ignored);
  });
  for (int peer : peers) {
    if (peer > setup.env.rank) continue;
    asio::co_spawn(executor, connect_to(setup, peer), [&, peer](std::exception_ptr failure) {
      if (failure && error.empty()) {
        try {
          std::rethrow_exception(failure);
        } catch (const std::exception& e) {
          error = "cannot connect to " + peer_name(setup.book, peer) + " (" + setup.plane + "): " + e.what();
        }
      }
      finished();
    });
  }
  if (!to_accept.empty()) {
    asio::co_spawn(executor, accept_from(acceptor, setup, to_accept, error), [&](std::exception_ptr) { finished(); });
  }
  if (pending > 0) {
    boost::system::error_code cancelled;
    co_await all_done.async_wait(asio::redirect_error(asio::use_awaitable, cancelled));
  }
  deadline.cancel();
  if (!error.empty()) throw JobError(error);
}

asio::awaitable<bool> open_side_channel(SideChannelSetup& setup, int peer) {
  tcp::socket socket(co_await asio::this_coro::executor);
  SocketDeadline deadline(socket, setup.env.connect_timeout);
  co_await dial(socket, setup, peer, ChannelKind::data_on_demand);
  std::uint8_t take = 0;
  co_await asio::async_read(socket, asio::buffer(&take, 1), asio::use_awaitable);
  if (!channel_request_taken(take, peer_name(setup.book, peer))) co_return false;
  co_await setup.establish(peer, socket);
  co_return true;
}

bool channel_request_taken(std::uint8_t answer, const std::string& peer) {
  if (answer > 1)
    throw JobError("protocol violation: answer " + std::to_string(answer) + " to a channel request from " + peer +
                   " (0 declines, 1 takes)");
  return answer == 1;
}

asio::awaitable<void> serve_side_channels(tcp::acceptor& acceptor, SideChannelSetup& setup) {
  while (acceptor.is_open()) {
    tcp::socket socket(co_await asio::this_coro::executor);
    boost::system::error_code ec;
    co_await acceptor.async_accept(socket, asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) continue;  // e.g. the client gave up before we took it
    without_nagle(socket);
    const std::string from = describe(socket);
    PeerIdentity identity{};
    try {
      SocketDeadline deadline(socket, setup.env.handshake_timeout);
      identity = co_await authenticate_as_server(socket, setup.auth, setup.env.rank);
    } catch (const std::exception& e) {
      spdlog::warn("{}: ignored connection from {}: {}", setup.plane, from, e.what());
      continue;
    }
    if (identity.kind != ChannelKind::data_on_demand) {
      spdlog::warn("{}: ignored connection from {} (rank {} asked for a start-up channel after start-up)", setup.plane,
                   from, identity.rank);
      continue;
    }
    spawn_answer(setup, std::move(socket), identity.rank);
  }
}

}  // namespace tnt::transport
