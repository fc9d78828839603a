#include "tcp_transport.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <spdlog/spdlog.h>

#include "../auth.h"
#include "tnt/transport/error.h"

namespace tnt::transport {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// An authenticated peer can still be buggy: no single message may claim more than this.
constexpr std::uint64_t kMaxMessageBytes = std::uint64_t{1} << 31;
// Messages gathered into one writev.
constexpr std::size_t kMaxGather = 32;

// Data-plane framing: every message is this header followed by `bytes` of payload.
struct Header {
  std::uint64_t tag;
  std::uint64_t bytes;
};
static_assert(sizeof(Header) == 16);

std::string error_text(const boost::system::error_code& ec) {
  if (ec == asio::error::eof) return "connection closed by the peer (process ended or killed?)";
  return ec.message();
}

}  // namespace

class TcpTransport;

class TcpPair final : public Pair {
 public:
  TcpPair(TcpTransport& owner, tcp::socket socket, int peer, std::string peer_name)
      : owner_(owner), socket_(std::move(socket)), peer_(peer), peer_name_(std::move(peer_name)) {
    writing_.reserve(kMaxGather);
    buffers_.reserve(2 * kMaxGather);
  }

  int peer_rank() const override { return peer_; }

  void send(std::uint64_t tag, const void* data, std::size_t bytes, CompletionSink& sink, std::uint64_t cookie) override {
    if (failed_) return;
    queue_.push_back(Outgoing{Header{tag, bytes}, data, &sink, cookie});
    if (writing_.empty()) write_more();
  }

  void recv(std::uint64_t tag, void* data, std::size_t capacity, CompletionSink& sink, std::uint64_t cookie) override {
    if (failed_) return;
    // A message that came before its receive was posted waits in a staging buffer.
    for (std::size_t i = 0; i < staged_.size(); ++i) {
      if (staged_[i].tag != tag || !staged_[i].complete) continue;
      Staged staged = std::move(staged_[i]);
      staged_[i] = std::move(staged_.back());
      staged_.pop_back();
      if (staged.bytes > capacity) {
        fail_protocol(tag, staged.bytes, capacity);
        return;
      }
      std::memcpy(data, staged.buffer.data(), staged.bytes);
      const std::size_t bytes = staged.bytes;
      spare_.push_back(std::move(staged.buffer));
      // Complete later, never inside the caller's own call (it may hold state mid-update).
      asio::post(socket_.get_executor(), [this, &sink, cookie, bytes] {
        if (!failed_) sink.on_recv_complete(cookie, bytes);
      });
      return;
    }
    posted_.push_back(Incoming{tag, data, capacity, &sink, cookie});
  }

  void start_reading() { read_header(); }

  void close() {
    closing_ = true;
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

 private:
  struct Outgoing {
    Header header;
    const void* data;
    CompletionSink* sink;
    std::uint64_t cookie;
  };
  struct Incoming {
    std::uint64_t tag;
    void* data;
    std::size_t capacity;
    CompletionSink* sink;
    std::uint64_t cookie;
  };
  struct Staged {
    std::uint64_t tag;
    std::vector<std::byte> buffer;
    std::size_t bytes;
    bool complete;  // false while its payload is still being read
  };

  void write_more();
  void read_header();
  void on_header();
  void on_staged(std::uint64_t tag);
  void fail(const std::string& what);
  void fail_protocol(std::uint64_t tag, std::uint64_t bytes, std::size_t capacity) {
    fail("protocol violation: message with tag " + std::to_string(tag) + " has " + std::to_string(bytes) +
         " bytes but the matching receive holds " + std::to_string(capacity) +
         " (do all ranks call the same collectives with the same counts, in the same order?)");
  }

  TcpTransport& owner_;
  tcp::socket socket_;
  int peer_;
  std::string peer_name_;
  bool failed_ = false;
  bool closing_ = false;

  // Sends not yet handed to the kernel: queue_[queue_head_..]. A vector that is cleared, never
  // shrunk, once drained, so a steady stream of segments allocates nothing.
  std::vector<Outgoing> queue_;
  std::size_t queue_head_ = 0;
  std::vector<Outgoing> writing_;  // the messages of the writev in flight
  std::vector<asio::const_buffer> buffers_;

  Header incoming_{};
  std::vector<Incoming> posted_;
  std::vector<Staged> staged_;
  std::vector<std::vector<std::byte>> spare_;  // staging buffers kept for reuse
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(EventLoop& loop, const JobEnvironment& env)
      : loop_(loop), env_(env), auth_{env.job_id, env.job_token}, acceptor_(loop.strand()) {}

  ~TcpTransport() override {
    close();
    loop_.wait_until([this] { return outstanding_.load() == 0; });
  }

  std::string listen(const std::string& local_ip) override {
    boost::system::error_code ec;
    auto address = asio::ip::make_address(local_ip, ec);
    if (ec) throw ConfigError("data-plane address '" + local_ip + "' is not an IP address (TNT_DATA_ADDR?)");
    tcp::endpoint endpoint(address, 0);
    acceptor_.open(endpoint.protocol());
    acceptor_.bind(endpoint, ec);
    if (ec) throw JobError("cannot listen for data connections on " + local_ip + ": " + ec.message());
    acceptor_.listen(asio::socket_base::max_listen_connections);
    const auto port = acceptor_.local_endpoint().port();
    return address.is_v6() ? "[" + local_ip + "]:" + std::to_string(port) : local_ip + ":" + std::to_string(port);
  }

  void connect(const std::vector<PeerAddress>& book, const std::vector<int>& peers) override {
    pairs_.resize(book.size());
    book_ = book;
    loop_.run(connect_all(peers));
  }

  Pair& pair(int peer_rank) override {
    if (peer_rank < 0 || peer_rank >= static_cast<int>(pairs_.size()) || !pairs_[peer_rank]) {
      throw Error("no data channel to rank " + std::to_string(peer_rank));
    }
    return *pairs_[peer_rank];
  }

  Executor executor() const override { return loop_.strand(); }
  void set_error_handler(ErrorHandler handler) override { error_handler_ = std::move(handler); }

  void close() override {
    bool done = false;
    asio::dispatch(loop_.strand(), [&] {
      closed_ = true;
      boost::system::error_code ignored;
      acceptor_.close(ignored);
      for (auto& pair : pairs_) {
        if (pair) pair->close();
      }
      done = true;
      loop_.wake();
    });
    loop_.wait_until([&] { return done; });  // at once when called on the strand: dispatch ran inline
  }

  // Bookkeeping for handlers that still refer to this object (the destructor waits for 0).
  void begin_io() { ++outstanding_; }
  void end_io() {
    if (--outstanding_ == 0) loop_.wake();
  }
  bool closed() const { return closed_; }
  void report(int peer, const std::string& message) {
    if (closed_) return;
    if (error_handler_) error_handler_(peer, message);
  }

 private:
  std::string peer_name(int rank) const {
    const auto& entry = book_[rank];
    return "rank " + std::to_string(rank) + " (" + entry.hostname + ", " + entry.data_address + ")";
  }

  asio::awaitable<void> connect_all(std::vector<int> peers) {
    std::sort(peers.begin(), peers.end());
    peers.erase(std::unique(peers.begin(), peers.end()), peers.end());  // with 2 ranks, left == right
    // Note [Who connects]: of two ranks that need a channel, the higher one connects and the
    // lower one accepts, so each pair of ranks has exactly one connection.
    std::set<int> to_accept;
    int to_connect = 0;
    for (int peer : peers) {
      if (peer == env_.rank || pairs_[peer]) continue;
      if (peer < env_.rank) ++to_connect;
      else to_accept.insert(peer);
    }
    std::string error;
    int pending = to_connect + static_cast<int>(to_accept.empty() ? 0 : 1);
    // Cancelled when the last connection is up: an event to wait on, not a poll.
    asio::steady_timer all_done(loop_.strand(), asio::steady_timer::time_point::max());
    auto finished = [&] {
      if (--pending == 0) all_done.cancel();
    };
    asio::steady_timer deadline(loop_.strand(), env_.connect_timeout);
    deadline.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      if (error.empty()) error = "timed out after " + std::to_string(env_.connect_timeout.count() / 1000) + " s connecting the data plane";
      boost::system::error_code ignored;
      acceptor_.close(ignored);
    });
    for (int peer : peers) {
      if (peer < env_.rank && !pairs_[peer]) {
        asio::co_spawn(loop_.strand(), connect_to(peer), [&, peer](std::exception_ptr failure) {
          if (failure && error.empty()) {
            try {
              std::rethrow_exception(failure);
            } catch (const std::exception& e) {
              error = "cannot connect to " + peer_name(peer) + ": " + e.what();
            }
          }
          finished();
        });
      }
    }
    if (!to_accept.empty()) {
      asio::co_spawn(loop_.strand(), accept_from(to_accept, error), [&](std::exception_ptr) { finished(); });
    }
    if (pending > 0) {
      boost::system::error_code cancelled;
      co_await all_done.async_wait(asio::redirect_error(asio::use_awaitable, cancelled));
    }
    deadline.cancel();
    if (!error.empty()) throw JobError(error);
    for (int peer : peers) {
      if (peer != env_.rank) pairs_[peer]->start_reading();
    }
  }

  asio::awaitable<void> connect_to(int peer) {
    const auto& address = book_[peer].data_address;
    const auto colon = address.rfind(':');
    if (colon == std::string::npos) throw JobError("bad data address '" + address + "'");
    std::string host = address.substr(0, colon);
    if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    tcp::endpoint endpoint(asio::ip::make_address(host), static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
    tcp::socket socket(loop_.strand());
    SocketDeadline deadline(socket, env_.connect_timeout);
    co_await socket.async_connect(endpoint, asio::use_awaitable);
    co_await authenticate_as_client(socket, auth_, ChannelKind::data, env_.rank, peer);
    add_pair(peer, std::move(socket));
  }

  asio::awaitable<void> accept_from(std::set<int> expected, std::string& error) {
    while (!expected.empty() && error.empty()) {
      tcp::socket socket(loop_.strand());
      boost::system::error_code ec;
      co_await acceptor_.async_accept(socket, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;  // closed by the deadline; `error` says why
      const std::string from = describe(socket);
      try {
        SocketDeadline deadline(socket, env_.handshake_timeout);
        auto identity = co_await authenticate_as_server(socket, auth_, env_.rank);
        if (identity.kind != ChannelKind::data || !expected.count(identity.rank)) {
          spdlog::warn("data plane: ignored connection from {} (rank {} was not expected)", from, identity.rank);
          continue;
        }
        expected.erase(identity.rank);
        add_pair(identity.rank, std::move(socket));
      } catch (const std::exception& e) {
        spdlog::warn("data plane: ignored connection from {}: {}", from, e.what());
      }
    }
  }

  void add_pair(int peer, tcp::socket socket) {
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    pairs_[peer] = std::make_unique<TcpPair>(*this, std::move(socket), peer, peer_name(peer));
  }

  EventLoop& loop_;
  JobEnvironment env_;
  AuthContext auth_;
  tcp::acceptor acceptor_;
  std::vector<PeerAddress> book_;
  std::vector<std::unique_ptr<TcpPair>> pairs_;
  ErrorHandler error_handler_;
  std::atomic<int> outstanding_{0};
  bool closed_ = false;
};

void TcpPair::write_more() {
  if (queue_head_ == queue_.size() || failed_) return;
  writing_.clear();
  buffers_.clear();
  while (queue_head_ < queue_.size() && writing_.size() < kMaxGather) {
    writing_.push_back(queue_[queue_head_++]);
    const Outgoing& message = writing_.back();
    buffers_.emplace_back(&message.header, sizeof(Header));
    if (message.header.bytes) buffers_.emplace_back(message.data, message.header.bytes);
  }
  if (queue_head_ == queue_.size() || (queue_head_ > 1024 && 2 * queue_head_ > queue_.size())) {
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(queue_head_));  // keeps capacity
    queue_head_ = 0;
  }
  owner_.begin_io();
  asio::async_write(socket_, buffers_, [this](const boost::system::error_code& ec, std::size_t) {
    owner_.end_io();
    if (ec) {
      fail("sending to " + peer_name_ + " failed: " + error_text(ec));
      return;
    }
    // Completions may post new sends: take the batch out first.
    for (const Outgoing& message : writing_) message.sink->on_send_complete(message.cookie);
    writing_.clear();
    if (!failed_) write_more();
  });
}

void TcpPair::read_header() {
  owner_.begin_io();
  asio::async_read(socket_, asio::buffer(&incoming_, sizeof(Header)), [this](const boost::system::error_code& ec, std::size_t) {
    owner_.end_io();
    if (ec) {
      fail("receiving from " + peer_name_ + " failed: " + error_text(ec));
      return;
    }
    on_header();
  });
}

void TcpPair::on_header() {
  const Header header = incoming_;
  if (header.bytes > kMaxMessageBytes) {
    fail("protocol violation: " + peer_name_ + " announced a message of " + std::to_string(header.bytes) + " bytes");
    return;
  }
  auto posted = std::find_if(posted_.begin(), posted_.end(), [&](const Incoming& r) { return r.tag == header.tag; });
  if (posted != posted_.end()) {
    Incoming target = *posted;
    *posted = posted_.back();
    posted_.pop_back();
    if (header.bytes > target.capacity) {
      fail_protocol(header.tag, header.bytes, target.capacity);
      return;
    }
    owner_.begin_io();
    asio::async_read(socket_, asio::buffer(target.data, header.bytes),
                     [this, target, bytes = header.bytes](const boost::system::error_code& ec, std::size_t) {
                       owner_.end_io();
                       if (ec) {
                         fail("receiving from " + peer_name_ + " failed: " + error_text(ec));
                         return;
                       }
                       target.sink->on_recv_complete(target.cookie, bytes);
                       if (!failed_) read_header();
                     });
    return;
  }
  // Unexpected: the peer is ahead of us (e.g. it started a collective we have not issued yet).
  std::vector<std::byte> buffer;
  if (!spare_.empty()) {
    buffer = std::move(spare_.back());
    spare_.pop_back();
  }
  if (buffer.size() < header.bytes) buffer.resize(header.bytes);
  // The vector's heap block stays put when staged_ grows or is reordered.
  std::byte* destination = buffer.data();
  staged_.push_back(Staged{header.tag, std::move(buffer), header.bytes, false});
  owner_.begin_io();
  asio::async_read(socket_, asio::buffer(destination, header.bytes),
                   [this, tag = header.tag](const boost::system::error_code& ec, std::size_t) {
                     owner_.end_io();
                     if (ec) {
                       fail("receiving from " + peer_name_ + " failed: " + error_text(ec));
                       return;
                     }
                     on_staged(tag);
                     if (!failed_) read_header();
                   });
}

void TcpPair::on_staged(std::uint64_t tag) {
  auto staged = std::find_if(staged_.begin(), staged_.end(), [&](const Staged& s) { return s.tag == tag; });
  staged->complete = true;
  // Its receive may have been posted while the payload was arriving.
  auto posted = std::find_if(posted_.begin(), posted_.end(), [&](const Incoming& r) { return r.tag == tag; });
  if (posted == posted_.end()) return;
  Incoming target = *posted;
  *posted = posted_.back();
  posted_.pop_back();
  recv(target.tag, target.data, target.capacity, *target.sink, target.cookie);
}

void TcpPair::fail(const std::string& what) {
  if (failed_) return;
  failed_ = true;
  if (closing_ || owner_.closed()) return;
  owner_.report(peer_, what);
}

std::unique_ptr<Transport> make_tcp_transport(EventLoop& loop, const JobEnvironment& env) {
  return std::make_unique<TcpTransport>(loop, env);
}

}  // namespace tnt::transport
