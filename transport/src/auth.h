#pragma once
// Mutual authentication of a new connection (rendezvous and data plane alike).
//
// Note [Handshake]: the client opens with a fixed-size preamble (magic, channel kind, its
// rank, the rank it wants, SHA-256 of the job id, a fresh nonce). The server answers with
// its own fresh nonce and HMAC-SHA256(token, "server" | preamble | server nonce), proving it
// holds the job token; the client checks that and answers HMAC-SHA256(token, "client" |
// preamble | server nonce | server proof). Both proofs cover both nonces, the job id and
// the ranks, so a recorded handshake cannot be replayed and the token never crosses the
// network. Nothing but these fixed-size records is read before both proofs have checked.
#include <array>
#include <chrono>
#include <cstdint>
#include <string>

#include "tnt/core/asio.h"

namespace tnt::transport {

enum class ChannelKind : std::uint32_t { rendezvous = 1, data = 2 };

struct AuthContext {
  std::string job_id;
  std::string job_token;
};

struct PeerIdentity {
  ChannelKind kind;
  int rank;
};

// Client side: proves and checks the token. Throws tnt::JobError with a clear message
// (the server does not hold the token, refused ours, or timed out).
boost::asio::awaitable<void> authenticate_as_client(boost::asio::ip::tcp::socket& socket, const AuthContext& auth,
                                                    ChannelKind kind, int my_rank, int server_rank);

// Server side: returns the authenticated identity of the client. Throws tnt::JobError when
// the client is not part of this job (bad magic, other job, bad proof). `my_rank` must match
// the rank the client asked for.
boost::asio::awaitable<PeerIdentity> authenticate_as_server(boost::asio::ip::tcp::socket& socket,
                                                            const AuthContext& auth, int my_rank);

// Closes `socket` when `timeout` passes before cancel() is called: bounds every network wait
// of a coroutine without racing operations against timers.
class SocketDeadline {
 public:
  SocketDeadline(boost::asio::ip::tcp::socket& socket, std::chrono::milliseconds timeout);
  ~SocketDeadline();
  bool expired() const { return *expired_; }

 private:
  boost::asio::steady_timer timer_;
  std::shared_ptr<bool> expired_;
};

std::array<std::uint8_t, 32> sha256(const std::string& data);
std::string describe(const boost::asio::ip::tcp::socket& socket);  // "10.0.0.2:4711" or "?"

}  // namespace tnt::transport
