// A misbehaving peer for the rendezvous tests. It reads the job from the TNT_* environment,
// like a rank, and then does one thing wrong:
//   version     joins with protocol version 99
//   malformed   authenticates, then sends a Hello frame that is not a Cap'n Proto message
//   oversized   authenticates, then announces a 1 GiB Hello
//   flood N     opens N connections that send garbage or nothing (a scanner), says how many got
//               through, holds them open for 3 s, then exits 0
// It prints what the master answered and exits 0 when the master refused it as it should.
#include <cstdio>
#include <random>
#include <string>

#include "auth.h"
#include "framing.h"
#include "tnt/core/error.h"
#include "tnt/transport/environment.h"
#include "tnt/transport/event_loop.h"
#include "tnt/transport/rendezvous.h"
#include "wire.capnp.h"

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace tnt::transport;

namespace {

asio::awaitable<tcp::socket> connect_authenticated(const tnt::JobEnvironment& env) {
  tcp::socket socket(co_await asio::this_coro::executor);
  tcp::resolver resolver(socket.get_executor());
  auto endpoints =
      co_await resolver.async_resolve(env.master_addr, std::to_string(env.master_port), asio::use_awaitable);
  for (int attempt = 0;; ++attempt) {  // the master may not be listening yet
    boost::system::error_code ec;
    co_await asio::async_connect(socket, endpoints, asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) break;
    if (attempt == 50) throw boost::system::system_error(ec);
    socket = tcp::socket(socket.get_executor());
    asio::steady_timer pause(socket.get_executor(), std::chrono::milliseconds(100));
    co_await pause.async_wait(asio::use_awaitable);
  }
  // A named object, not a temporary: GCC 12 mishandles temporaries that live across co_await.
  const AuthContext auth{env.job_id, env.job_token};
  co_await authenticate_as_client(socket, auth, ChannelKind::rendezvous, env.rank, 0);
  co_return socket;
}

// Returns the master's answer: its refusal text, or why the connection ended.
asio::awaitable<std::string> read_answer(tcp::socket& socket) {
  try {
    Frame frame = co_await read_frame(socket, 1 << 20, "reply", "master");
    auto reader = frame.reader();
    auto reply = reader.getRoot<wire::RendezvousReply>();
    if (reply.isRefusal()) co_return std::string("refused: ") + reply.getRefusal().cStr();
    co_return "accepted";
  } catch (const std::exception& error) {
    co_return std::string("closed: ") + error.what();
  }
}

asio::awaitable<std::string> send_malformed(tnt::JobEnvironment env) {
  auto socket = co_await connect_authenticated(env);
  std::vector<std::uint8_t> frame(4 + 64, 0xAB);
  frame[0] = 64, frame[1] = frame[2] = frame[3] = 0;
  co_await asio::async_write(socket, asio::buffer(frame), asio::use_awaitable);
  co_return co_await read_answer(socket);
}

asio::awaitable<std::string> send_oversized(tnt::JobEnvironment env) {
  auto socket = co_await connect_authenticated(env);
  const std::uint32_t length = 1u << 30;
  std::uint8_t prefix[4] = {static_cast<std::uint8_t>(length), static_cast<std::uint8_t>(length >> 8),
                            static_cast<std::uint8_t>(length >> 16), static_cast<std::uint8_t>(length >> 24)};
  co_await asio::async_write(socket, asio::buffer(prefix), asio::use_awaitable);
  co_return co_await read_answer(socket);
}

asio::awaitable<std::string> flood(tnt::JobEnvironment env, int connections) {
  auto executor = co_await asio::this_coro::executor;
  tcp::resolver resolver(executor);
  auto endpoints =
      co_await resolver.async_resolve(env.master_addr, std::to_string(env.master_port), asio::use_awaitable);
  std::mt19937 random(12345);
  std::vector<tcp::socket> open;
  // Wait until the master listens, so that the whole flood reaches it.
  for (int attempt = 0;; ++attempt) {
    tcp::socket probe(executor);
    boost::system::error_code ec;
    co_await asio::async_connect(probe, endpoints, asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) {
      open.push_back(std::move(probe));
      break;
    }
    if (attempt == 100) co_return "the master never listened: " + ec.message();
    asio::steady_timer pause(executor, std::chrono::milliseconds(50));
    co_await pause.async_wait(asio::use_awaitable);
  }
  int connected = 0;
  for (int i = 0; i < connections; ++i) {
    tcp::socket socket(executor);
    boost::system::error_code ec;
    co_await asio::async_connect(socket, endpoints, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) continue;
    ++connected;
    std::vector<std::uint8_t> garbage(random() % 300);
    for (auto& byte : garbage) byte = static_cast<std::uint8_t>(random());
    if (i % 3 == 1) garbage.assign({'T', 'N', 'T', 1});  // a plausible start, then silence
    if (i % 3 != 2)
      co_await asio::async_write(socket, asio::buffer(garbage), asio::redirect_error(asio::use_awaitable, ec));
    open.push_back(std::move(socket));  // keep some open and silent
  }
  // Said before the pause, so that the test starts the real ranks while these connections are
  // still open: the master must serve the ranks beside them.
  std::printf("bad-peer: flooded with %d connections\n", connected);
  std::fflush(stdout);
  asio::steady_timer hold(executor, std::chrono::seconds(3));
  co_await hold.async_wait(asio::use_awaitable);
  co_return "closed the flood";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    auto env = tnt::JobEnvironment::from_env();
    EventLoop loop;
    if (mode == "version") {
      Rendezvous rendezvous(loop, env, RendezvousOptions{"test-configuration", 99});
      rendezvous.join([](const std::string& ip) { return ip + ":1"; });
      std::printf("bad-peer: the master accepted protocol version 99\n");
      return 1;
    }
    std::string answer;
    if (mode == "malformed")
      answer = loop.run(send_malformed(env));
    else if (mode == "oversized")
      answer = loop.run(send_oversized(env));
    else if (mode == "flood") {
      std::printf("bad-peer: %s\n", loop.run(flood(env, argc > 2 ? std::stoi(argv[2]) : 100)).c_str());
      return 0;
    } else {
      std::fprintf(stderr, "usage: tnt-test-bad-peer version|malformed|oversized|flood N\n");
      return 2;
    }
    std::printf("bad-peer: %s\n", answer.c_str());
    return answer.rfind("refused", 0) == 0 || answer.rfind("closed", 0) == 0 ? 0 : 1;
  } catch (const std::exception& error) {
    std::printf("bad-peer: error: %s\n", error.what());
    return mode == "version" ? 0 : 1;
  }
}
