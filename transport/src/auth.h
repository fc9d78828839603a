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
#include <span>
#include <string>

#include "tnt/core/asio.h"

namespace tnt::transport {

// data: a channel set up at start-up; data_on_demand: one opened on first use, whose server
// answers with a decision byte (Note [Channels on first use] in side_channel.cpp).
enum class ChannelKind : std::uint32_t { rendezvous = 1, data = 2, data_on_demand = 3 };

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

// The handshake's decisions on the records it reads, without the socket (fuzz/handshake_fuzz.cpp).
inline constexpr std::size_t kPreambleSize = 4 + 4 + 4 + 4 + 32 + 32;  // magic, kind, ranks, job, nonce
inline constexpr std::size_t kChallengeSize = 4 + 4 + 32 + 32;         // magic, status, nonce, proof
enum class ServerStatus : std::uint32_t { ok = 0, other_job = 1, wrong_rank = 2 };
struct PreambleCheck {
  PeerIdentity identity;
  ServerStatus status;
};
// Server side: what a client's preamble asks for and whether this server may answer it. Throws
// tnt::JobError naming `peer` when it is not a tnt handshake.
PreambleCheck check_preamble(std::span<const std::uint8_t, kPreambleSize> preamble, const AuthContext& auth,
                             int my_rank, const std::string& peer);
// Client side: checks the server's challenge to our `preamble`; throws tnt::JobError naming `peer`
// when the server refused us or does not hold the job token.
void check_challenge(std::span<const std::uint8_t, kChallengeSize> challenge,
                     std::span<const std::uint8_t, kPreambleSize> preamble, const AuthContext& auth, int server_rank,
                     const std::string& peer);

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
