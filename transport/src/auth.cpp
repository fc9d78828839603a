#include "auth.h"

#include <cstring>
#include <span>
#include <vector>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "tnt/core/error.h"

namespace tnt::transport {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr std::array<std::uint8_t, 4> kMagic = {'T', 'N', 'T', 1};  // last byte: handshake version
using Digest = std::array<std::uint8_t, 32>;

// Fixed-size records of Note [Handshake], little-endian.
struct Preamble {
  std::uint32_t kind;
  std::uint32_t client_rank;
  std::uint32_t server_rank;
  Digest job_digest;
  Digest client_nonce;
};

enum class Verdict : std::uint32_t { accepted = 0, bad_proof = 1 };

void put_u32(std::uint8_t* out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<std::uint8_t>(value >> (8 * i));
}
std::uint32_t get_u32(const std::uint8_t* in) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= std::uint32_t{in[i]} << (8 * i);
  return value;
}

std::array<std::uint8_t, kPreambleSize> encode(const Preamble& p) {
  std::array<std::uint8_t, kPreambleSize> out{};
  std::memcpy(out.data(), kMagic.data(), 4);
  put_u32(out.data() + 4, p.kind);
  put_u32(out.data() + 8, p.client_rank);
  put_u32(out.data() + 12, p.server_rank);
  std::memcpy(out.data() + 16, p.job_digest.data(), 32);
  std::memcpy(out.data() + 48, p.client_nonce.data(), 32);
  return out;
}

Digest random_nonce() {
  Digest nonce;
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) throw Error("OpenSSL RAND_bytes failed");
  return nonce;
}

Digest hmac(const std::string& key, std::string_view label,
            std::initializer_list<std::span<const std::uint8_t>> parts) {
  std::vector<std::uint8_t> message(label.begin(), label.end());
  for (auto part : parts) message.insert(message.end(), part.begin(), part.end());
  Digest out{};
  std::size_t out_len = 0;
  if (!EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key.data(), key.size(), message.data(), message.size(),
                 out.data(), out.size(), &out_len) ||
      out_len != out.size()) {
    throw Error("OpenSSL HMAC-SHA256 failed");
  }
  return out;
}

bool equal(const Digest& a, const std::uint8_t* b) { return CRYPTO_memcmp(a.data(), b, a.size()) == 0; }

template <std::size_t N>
asio::awaitable<void> read_exact(tcp::socket& socket, std::array<std::uint8_t, N>& record) {
  co_await asio::async_read(socket, asio::buffer(record), asio::use_awaitable);
}
template <std::size_t N>
asio::awaitable<void> write_all(tcp::socket& socket, const std::array<std::uint8_t, N>& record) {
  co_await asio::async_write(socket, asio::buffer(record), asio::use_awaitable);
}

}  // namespace

Digest sha256(const std::string& data) {
  Digest out{};
  unsigned int len = 0;
  if (!EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr))
    throw Error("OpenSSL SHA-256 failed");
  return out;
}

std::string describe(const tcp::socket& socket) {
  boost::system::error_code ec;
  auto endpoint = socket.remote_endpoint(ec);
  if (ec) return "?";
  return endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
}

PreambleCheck check_preamble(std::span<const std::uint8_t, kPreambleSize> preamble, const AuthContext& auth,
                             int my_rank, const std::string& peer) {
  if (std::memcmp(preamble.data(), kMagic.data(), 4) != 0) {
    throw JobError("connection from " + peer + " is not a tnt handshake (bad magic)");
  }
  const auto kind = get_u32(preamble.data() + 4);
  const auto client_rank = get_u32(preamble.data() + 8);
  const auto server_rank = get_u32(preamble.data() + 12);
  if (kind != static_cast<std::uint32_t>(ChannelKind::rendezvous) &&
      kind != static_cast<std::uint32_t>(ChannelKind::data) &&
      kind != static_cast<std::uint32_t>(ChannelKind::data_on_demand)) {
    throw JobError("connection from " + peer + " asked for an unknown channel kind " + std::to_string(kind));
  }
  ServerStatus status = ServerStatus::ok;
  if (!equal(sha256(auth.job_id), preamble.data() + 16))
    status = ServerStatus::other_job;
  else if (server_rank != static_cast<std::uint32_t>(my_rank))
    status = ServerStatus::wrong_rank;
  return {PeerIdentity{static_cast<ChannelKind>(kind), static_cast<int>(client_rank)}, status};
}

void check_challenge(std::span<const std::uint8_t, kChallengeSize> challenge,
                     std::span<const std::uint8_t, kPreambleSize> preamble, const AuthContext& auth, int server_rank,
                     const std::string& peer) {
  if (std::memcmp(challenge.data(), kMagic.data(), 4) != 0) {
    throw JobError("the peer at " + peer +
                   " does not speak tnt's handshake (is something else listening on that port?)");
  }
  switch (static_cast<ServerStatus>(get_u32(challenge.data() + 4))) {
    case ServerStatus::ok: break;
    case ServerStatus::other_job:
      throw JobError("the peer at " + peer + " belongs to another job (TNT_JOB_ID differs)");
    case ServerStatus::wrong_rank:
      throw JobError("the peer at " + peer + " is not rank " + std::to_string(server_rank) + " of this job");
    default: throw JobError("the peer at " + peer + " sent an unknown handshake status");
  }
  const Digest expected = hmac(auth.job_token, "tnt-server", {preamble, challenge.subspan<8, 32>()});
  if (!equal(expected, challenge.data() + 40)) {
    throw JobError("the peer at " + peer +
                   " could not prove it holds this job's token (TNT_JOB_TOKEN differs between ranks?)");
  }
}

SocketDeadline::SocketDeadline(tcp::socket& socket, std::chrono::milliseconds timeout)
    : timer_(socket.get_executor(), timeout), expired_(std::make_shared<bool>(false)) {
  timer_.async_wait([&socket, expired = expired_](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: the guarded work finished in time
    *expired = true;
    boost::system::error_code ignored;
    socket.close(ignored);
  });
}

SocketDeadline::~SocketDeadline() { timer_.cancel(); }

asio::awaitable<void> authenticate_as_client(tcp::socket& socket, const AuthContext& auth, ChannelKind kind,
                                             int my_rank, int server_rank) {
  const std::string peer = describe(socket);
  Preamble preamble{static_cast<std::uint32_t>(kind), static_cast<std::uint32_t>(my_rank),
                    static_cast<std::uint32_t>(server_rank), sha256(auth.job_id), random_nonce()};
  const auto preamble_bytes = encode(preamble);
  co_await write_all(socket, preamble_bytes);

  std::array<std::uint8_t, kChallengeSize> challenge{};
  co_await read_exact(socket, challenge);
  check_challenge(challenge, preamble_bytes, auth, server_rank, peer);
  const std::uint8_t* server_nonce = challenge.data() + 8;
  const std::uint8_t* server_proof = challenge.data() + 40;
  const Digest proof = hmac(auth.job_token, "tnt-client", {preamble_bytes, {server_nonce, 32}, {server_proof, 32}});
  std::array<std::uint8_t, 32> proof_record;
  std::memcpy(proof_record.data(), proof.data(), 32);
  co_await write_all(socket, proof_record);

  std::array<std::uint8_t, 4> verdict{};
  co_await read_exact(socket, verdict);
  if (static_cast<Verdict>(get_u32(verdict.data())) != Verdict::accepted) {
    throw JobError("the peer at " + peer + " refused this rank's proof of the job token");
  }
}

asio::awaitable<PeerIdentity> authenticate_as_server(tcp::socket& socket, const AuthContext& auth, int my_rank) {
  const std::string peer = describe(socket);
  std::array<std::uint8_t, kPreambleSize> preamble_bytes{};
  co_await read_exact(socket, preamble_bytes);
  const auto [identity, status] = check_preamble(preamble_bytes, auth, my_rank, peer);
  std::array<std::uint8_t, kChallengeSize> challenge{};
  std::memcpy(challenge.data(), kMagic.data(), 4);
  put_u32(challenge.data() + 4, static_cast<std::uint32_t>(status));
  if (status != ServerStatus::ok) {
    co_await write_all(socket, challenge);
    throw JobError("connection from " + peer +
                   (status == ServerStatus::other_job ? " belongs to another job" : " asked for another rank"));
  }
  const Digest nonce = random_nonce();
  const Digest server_proof = hmac(auth.job_token, "tnt-server", {preamble_bytes, nonce});
  std::memcpy(challenge.data() + 8, nonce.data(), 32);
  std::memcpy(challenge.data() + 40, server_proof.data(), 32);
  co_await write_all(socket, challenge);

  std::array<std::uint8_t, 32> client_proof{};
  co_await read_exact(socket, client_proof);
  const Digest expected = hmac(auth.job_token, "tnt-client", {preamble_bytes, nonce, server_proof});
  std::array<std::uint8_t, 4> verdict{};
  const bool accepted = equal(expected, client_proof.data());
  put_u32(verdict.data(), static_cast<std::uint32_t>(accepted ? Verdict::accepted : Verdict::bad_proof));
  co_await write_all(socket, verdict);
  if (!accepted) {
    throw JobError("connection from " + peer + " claiming rank " + std::to_string(identity.rank) +
                   " failed to prove the job token (bad proof)");
  }
  co_return identity;
}

}  // namespace tnt::transport
