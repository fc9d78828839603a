// The handshake of Note [Handshake] (transport/src/auth.h), checked against an independent
// implementation of its records in this test: a genuine client is accepted, a recorded
// handshake replayed on a new connection is not, and the token never crosses the wire.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <array>
#include <cstring>
#include <future>
#include <thread>

#include "auth.h"
#include "side_channel.h"
#include "tnt/core/error.h"

namespace tnt::transport {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using Bytes = std::vector<std::uint8_t>;

const AuthContext kAuth{"job-42", "s3cret-token-0123456789"};

Bytes hmac(const std::string& key, const std::string& label, const Bytes& data) {
  Bytes message(label.begin(), label.end());
  message.insert(message.end(), data.begin(), data.end());
  Bytes out(32);
  std::size_t length = 0;
  EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key.data(), key.size(), message.data(), message.size(),
            out.data(), out.size(), &length);
  return out;
}

Bytes preamble(int client_rank, int server_rank, std::uint8_t nonce_byte) {
  Bytes p = {'T', 'N', 'T', 1};
  auto put = [&](std::uint32_t v) {
    for (int i = 0; i < 4; ++i) p.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  };
  put(static_cast<std::uint32_t>(ChannelKind::data));
  put(static_cast<std::uint32_t>(client_rank));
  put(static_cast<std::uint32_t>(server_rank));
  auto digest = sha256(kAuth.job_id);
  p.insert(p.end(), digest.begin(), digest.end());
  p.insert(p.end(), 32, nonce_byte);
  return p;
}

// Runs authenticate_as_server for one connection on its own thread; returns its verdict.
struct Server {
  asio::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  std::promise<std::string> verdict;

  std::thread serve_one() {
    asio::co_spawn(
        io,
        [this]() -> asio::awaitable<void> {
          tcp::socket socket = co_await acceptor.async_accept(asio::use_awaitable);
          try {
            auto identity = co_await authenticate_as_server(socket, kAuth, 5);
            verdict.set_value("accepted rank " + std::to_string(identity.rank));
          } catch (const std::exception& error) {
            verdict.set_value(std::string("refused: ") + error.what());
          }
        },
        asio::detached);
    return std::thread([this] { io.run(); });
  }
};

struct Transcript {
  Bytes sent_preamble;
  Bytes sent_proof;
  Bytes challenge;
  std::uint32_t verdict = 99;
};

// A client that follows the protocol with the right token, or replays an old proof.
Transcript run_client(std::uint16_t port, const Bytes& my_preamble, const Bytes* replayed_proof) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  Transcript t;
  t.sent_preamble = my_preamble;
  asio::write(socket, asio::buffer(my_preamble));
  t.challenge.resize(72);
  asio::read(socket, asio::buffer(t.challenge));
  Bytes server_nonce(t.challenge.begin() + 8, t.challenge.begin() + 40);
  Bytes server_proof(t.challenge.begin() + 40, t.challenge.end());
  Bytes signed_part = my_preamble;
  signed_part.insert(signed_part.end(), server_nonce.begin(), server_nonce.end());
  EXPECT_EQ(hmac(kAuth.job_token, "tnt-server", signed_part), server_proof) << "server proof does not verify";
  signed_part.insert(signed_part.end(), server_proof.begin(), server_proof.end());
  t.sent_proof = replayed_proof ? *replayed_proof : hmac(kAuth.job_token, "tnt-client", signed_part);
  asio::write(socket, asio::buffer(t.sent_proof));
  std::uint8_t verdict[4];
  boost::system::error_code ec;
  asio::read(socket, asio::buffer(verdict), ec);
  if (!ec) t.verdict = verdict[0];
  return t;
}

bool contains(const Bytes& haystack, const std::string& needle) {
  return std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end()) != haystack.end();
}

TEST(Handshake, GenuineClientIsAccepted) {
  Server server;
  auto thread = server.serve_one();
  auto t = run_client(server.acceptor.local_endpoint().port(), preamble(3, 5, 0x11), nullptr);
  EXPECT_EQ(server.verdict.get_future().get(), "accepted rank 3");
  EXPECT_EQ(t.verdict, 0u);
  for (const Bytes* record : {&t.sent_preamble, &t.sent_proof, &t.challenge})
    EXPECT_FALSE(contains(*record, kAuth.job_token));
  thread.join();
}

TEST(Handshake, ReplayedHandshakeIsRefused) {
  Transcript recorded;
  {
    Server server;
    auto thread = server.serve_one();
    recorded = run_client(server.acceptor.local_endpoint().port(), preamble(3, 5, 0x22), nullptr);
    EXPECT_EQ(server.verdict.get_future().get(), "accepted rank 3");
    thread.join();
  }
  // An eavesdropper replays the same preamble and proof: the server's fresh nonce differs.
  Server server;
  auto thread = server.serve_one();
  auto replay = run_client(server.acceptor.local_endpoint().port(), recorded.sent_preamble, &recorded.sent_proof);
  const std::string verdict = server.verdict.get_future().get();
  EXPECT_NE(verdict.find("failed to prove the job token (bad proof)"), std::string::npos) << verdict;
  EXPECT_EQ(replay.verdict, 1u);
  EXPECT_NE(Bytes(replay.challenge.begin() + 8, replay.challenge.begin() + 40),
            Bytes(recorded.challenge.begin() + 8, recorded.challenge.begin() + 40));
  thread.join();
}

TEST(Handshake, WrongTokenClientIsRefused) {
  Server server;
  auto thread = server.serve_one();
  const Bytes forged(32, 0x5A);
  auto t = run_client(server.acceptor.local_endpoint().port(), preamble(1, 5, 0x33), &forged);
  EXPECT_NE(server.verdict.get_future().get().find("bad proof"), std::string::npos);
  EXPECT_EQ(t.verdict, 1u);
  thread.join();
}

TEST(Handshake, OtherJobIsRefusedBeforeAnyProof) {
  Server server;
  auto thread = server.serve_one();
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(server.acceptor.local_endpoint());
  Bytes p = preamble(1, 5, 0x44);
  p[16] ^= 0xFF;  // another job's digest
  asio::write(socket, asio::buffer(p));
  Bytes challenge(72);
  asio::read(socket, asio::buffer(challenge));
  EXPECT_EQ(challenge[4], 1);  // status: other job
  EXPECT_EQ(Bytes(challenge.begin() + 40, challenge.end()), Bytes(32, 0)) << "no proof is given to another job";
  EXPECT_NE(server.verdict.get_future().get().find("belongs to another job"), std::string::npos);
  thread.join();
}

// Data addresses come from other ranks through the master's address book. Found by
// fuzz/data_address_fuzz.cpp: a bad one escaped as std::invalid_argument ("stoi") or
// boost::system::system_error instead of a JobError naming the address, and a port above
// 65535 was silently taken modulo 65536.
TEST(DataAddress, ParsesIpv4AndBracketedIpv6) {
  EXPECT_EQ(parse_data_address("10.0.0.7:40123"), tcp::endpoint(asio::ip::make_address("10.0.0.7"), 40123));
  EXPECT_EQ(parse_data_address("[::1]:80"), tcp::endpoint(asio::ip::make_address("::1"), 80));
}

TEST(DataAddress, RefusesWhatIsNotIpAndPort) {
  for (const std::string bad : {"10.0.0.7", "10.0.0.7:", "10.0.0.7:x", "10.0.0.7:70000", "10.0.0.7:0", "host:80",
                                "[::1:80", "10.0.0.7:80x", "10.0.0.7:-1", ":"}) {
    try {
      parse_data_address(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const tnt::JobError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + bad + "'"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "'" << bad << "' raised a " << typeid(e).name() << " instead of a JobError: " << e.what();
    }
  }
}

}  // namespace
}  // namespace tnt::transport
