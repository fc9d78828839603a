#pragma once
// The authenticated TCP connections that the data-plane back ends set up between ranks: the
// TCP back end carries its data on them, the InfiniBand back end exchanges queue-pair details
// on them and then watches them for a lost peer.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "auth.h"
#include "tnt/transport/transport.h"

namespace tnt::transport {

// Binds `acceptor` to `address` (any free port) and returns what peers connect to,
// "ip:port" or "[ip6]:port". `what` names the listener in errors.
std::string listen_side_channel(boost::asio::ip::tcp::acceptor& acceptor, const boost::asio::ip::address& address,
                                const std::string& what);
// TNT_DATA_ADDR or the address that reaches the master, as an IP address (ConfigError if not).
boost::asio::ip::address parse_data_ip(const std::string& local_ip);

// A peer's data address from the address book ("ip:port" or "[ip6]:port"), as an endpoint.
boost::asio::ip::tcp::endpoint parse_data_address(const std::string& address);

// Note [Who connects]: of two ranks that need a channel, the higher one connects and the
// lower one accepts, so each pair of ranks has exactly one connection. Both sides authenticate
// (auth.h); connections that fail to, or come from ranks not expected, are ignored with a
// warning. Then `establish(peer, socket)` runs on the authenticated socket; what it throws is
// the job's error. The whole set-up is bounded by env.connect_timeout.
struct SideChannelSetup {
  const JobEnvironment& env;
  const AuthContext& auth;
  const std::vector<PeerAddress>& book;
  std::string plane;  // "data plane", "InfiniBand data plane": for messages
  std::function<boost::asio::awaitable<void>(int peer, boost::asio::ip::tcp::socket& socket)> establish;
  // Note [Channels on first use]: whether to take the channel `peer` asks for now, and what to do
  // once such a channel is made or has failed. Without them, such requests are ignored.
  std::function<bool(int peer)> accept_on_demand;
  std::function<void(int peer)> opened;
  std::function<void(int peer, const std::string& error)> failed;
};
// `setup` must outlive every channel opened on demand through it.
boost::asio::awaitable<void> connect_side_channels(boost::asio::ip::tcp::acceptor& acceptor, SideChannelSetup& setup,
                                                   std::vector<int> peers);
// Note [Channels on first use]: asks `peer` for a channel; true once it is made, false when the
// peer declined because a channel it opened itself is to be used. Throws what the set-up throws.
boost::asio::awaitable<bool> open_side_channel(SideChannelSetup& setup, int peer);
// The one-byte answer to a channel request (Note [Channels on first use]): true to take the
// channel, false to decline; JobError naming `peer` for anything else.
bool channel_request_taken(std::uint8_t answer, const std::string& peer);
// Answers channel requests until `acceptor` is closed.
boost::asio::awaitable<void> serve_side_channels(boost::asio::ip::tcp::acceptor& acceptor, SideChannelSetup& setup);

std::string peer_name(const std::vector<PeerAddress>& book, int rank);  // "rank 3 (node7, 10.0.0.7:4711)"

}  // namespace tnt::transport
