#include "tcp_transport.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "../pair_transport.h"
#include "../side_channel.h"
#include "tcp_inbox.h"
#include "tnt/core/copy.h"
#include "tnt/core/error.h"

namespace tnt::transport {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// Messages gathered into one writev.
constexpr std::size_t kMaxGather = 32;

std::string error_text(const boost::system::error_code& ec) {
  if (ec == asio::error::eof) return "connection closed by the peer (process ended or killed?)";
  return ec.message();
}

// Note [Whole transfers]: Asio's async_read and async_write, with their default transfer_all,
// hand the socket at most 64 KiB (default_max_transfer_size) per system call, so a 1 MiB message
// cost 16 reads, 16 writes and as many reactor rounds. This completion condition asks for all
// that remains, and the kernel moves what it can. Measured 2026-11-27, 2 ranks with TNT_SHM=0 on
// loopback, tnt-bench-p2p latency under chrt -f 10, 1 MiB: 338-348 us before (OpenMPI's tcp btl
// 153-167 us); after, medians of 3 alternating rounds: 1 MiB 346 -> 255 us, 4 MiB 1633 -> 1026 us,
// 256 KiB 95 -> 70 us.
struct Remaining {
  std::size_t total;
  std::size_t operator()(const boost::system::error_code& ec, std::size_t done) const { return ec ? 0 : total - done; }
};

}  // namespace

class TcpTransport;

class TcpPair final : public Pair {
 public:
  TcpPair(TcpTransport& owner, tcp::socket socket, int peer, std::string peer_name)
      : owner_(owner), socket_(std::move(socket)), peer_(peer), peer_name_(std::move(peer_name)), inbox_(peer_name_) {
    writing_.reserve(kMaxGather);
    buffers_.reserve(2 * kMaxGather);
  }

  int peer_rank() const override { return peer_; }

  // Note [Eager over TCP]: a rendezvous costs a round trip of three messages, about 5 us each
  // on loopback, and an eager copy of 64 KiB about 3 us, so up to 64 KiB (OpenMPI's tcp btl's
  // eager limit too) goes eagerly. Measured 2026-11-28, 2 ranks with TNT_SHM=0 on loopback,
  // tnt-bench-p2p latency under chrt -f 10 with builds beside it (load 6), 3 alternating rounds,
  // medians: 32 KiB 23.4 -> 14.6 us, 64 KiB 36.3 -> 23.4; OpenMPI's tcp btl in the next minutes
  // (bench/p2p/compare_osu.sh --tcp --realtime) 11.7 and 29.9. Shared memory keeps 16 KiB: its
  // rendezvous reads the sender's buffer once (Note [Single copy] in shm_transport.cpp).
  std::size_t preferred_eager_bytes() const override { return 64 * 1024; }

  void send(Tag tag, const void* data, std::size_t bytes, CompletionSink& sink, std::uint64_t cookie) override {
    if (failed_) return;
    queue_.push_back(Outgoing{TcpHeader{tag.value, tag.context, 0, bytes}, data, &sink, cookie});
    if (writing_.empty()) write_more();
  }

  void recv(Tag tag, void* data, std::size_t capacity, CompletionSink& sink, std::uint64_t cookie) override;

  void start_reading() { read_more(); }

  void close() {
    closing_ = true;
    // Nothing may complete any more: a failed job has completed its operations, whose buffers
    // may be gone, and a read or write that finished before the close still has its handler
    // queued. Under ASan such a read's completion reduced from a freed buffer (the collectives'
    // Failure.PeerKilledMidAllreduceOverTcp..., 1 run in 3), as ShmPair::close says for shared memory.
    failed_ = true;
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

 private:
  struct Outgoing {
    TcpHeader header;
    const void* data;
    CompletionSink* sink;
    std::uint64_t cookie;
  };

  void write_more();
  std::size_t write_now();  // Note [Writing at once]
  void drop_written(std::size_t written);
  void written_all();
  void read_more();
  void deliver();
  void fail(const std::string& what);

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

  TcpInbox inbox_;
};

class TcpTransport final : public PairTransport<TcpPair> {
 public:
  TcpTransport(EventLoop& loop, const JobEnvironment& env) : PairTransport(loop, env) {}

  ~TcpTransport() override {
    close();
    wait_for_handlers();
  }

  std::string listen(const std::string& local_ip) override {
    check_congestion_control();
    return listen_side_channel(acceptor_, parse_data_ip(local_ip), "data connections");
  }

 private:
  std::string plane() const override { return "data plane"; }

  // The TCP back end carries its data on the authenticated side channel itself.
  asio::awaitable<void> establish(int peer, tcp::socket& socket) override {
    add_pair(peer, std::move(socket));
    co_return;
  }

  void start(int peer) override { pairs_[peer]->start_reading(); }

  // Note [Congestion control]: Debian's default here is BBR, which paces its sends by the
  // bandwidth it estimates; between ranks whose "bottleneck" is the receiving CPU it estimates
  // low. Measured here (2 ranks, loopback, bus bandwidth, medians of 5 interleaved runs): BBR
  // 0.68 / 0.72 / 0.82 GB/s at 4 / 16 / 64 MiB, reno 0.87 / 1.03 / 1.05, cubic 1.00 / 1.05 /
  // 1.00. Reno is the default because every Linux has it and lets any user choose it (cubic
  // needs privileges where it is not in net.ipv4.tcp_allowed_congestion_control). With reno,
  // fixed 4 or 8 MiB socket buffers measured no better than the kernel's autotuning (1.05 /
  // 1.15 against 1.01 GB/s at 64 MiB, within the runs' spread), so autotuning stays on.
  void check_congestion_control() {
    if (env_.tcp_congestion.empty()) return;
    tcp::socket probe(loop_.strand(), tcp::v4());
    if (!set_congestion_control(probe)) {
      throw ConfigError("TNT_TCP_CONGESTION='" + env_.tcp_congestion +
                        "' cannot be used here: " + std::strerror(errno) +
                        " (see net.ipv4.tcp_available_congestion_control and tcp_allowed_congestion_control; "
                        "TNT_TCP_CONGESTION= keeps the system's)");
    }
  }

  bool set_congestion_control(tcp::socket& socket) {
    return ::setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_CONGESTION, env_.tcp_congestion.data(),
                        static_cast<socklen_t>(env_.tcp_congestion.size())) == 0;
  }

  void add_pair(int peer, tcp::socket side_channel) {
    // Note [Completions without a hop] in event_loop.cpp: the data socket is the side channel's,
    // moved off the strand.
    const auto protocol = side_channel.local_endpoint().protocol();
    tcp::socket socket(loop_.completion_executor(), protocol, side_channel.release());
    boost::system::error_code ignored;                                 // no_delay is set for every side channel
    if (!env_.tcp_congestion.empty()) set_congestion_control(socket);  // check_congestion_control() vouched for it
    if (env_.socket_buffer_bytes > 0) {
      socket.set_option(asio::socket_base::send_buffer_size(env_.socket_buffer_bytes), ignored);
      socket.set_option(asio::socket_base::receive_buffer_size(env_.socket_buffer_bytes), ignored);
    }
    pairs_[peer] = std::make_unique<TcpPair>(*this, std::move(socket), peer, peer_name(book_, peer));
  }
};

void TcpPair::write_more() {
  if (queue_head_ == queue_.size() || failed_) return;
  writing_.clear();
  buffers_.clear();
  while (queue_head_ < queue_.size() && writing_.size() < kMaxGather) {
    writing_.push_back(queue_[queue_head_++]);
    const Outgoing& message = writing_.back();
    buffers_.emplace_back(&message.header, sizeof(TcpHeader));
    if (message.header.bytes) buffers_.emplace_back(message.data, message.header.bytes);
  }
  if (queue_head_ == queue_.size() || (queue_head_ > 1024 && 2 * queue_head_ > queue_.size())) {
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(queue_head_));  // keeps capacity
    queue_head_ = 0;
  }
  const std::size_t total = asio::buffer_size(buffers_);
  const std::size_t written = write_now();
  owner_.begin_io();
  if (written == total) {
    owner_.loop().post_completion([this] {  // never inside the caller's send()
      TcpTransport::IoScope counted{owner_};
      if (!failed_) written_all();
    });
    return;
  }
  drop_written(written);
  asio::async_write(socket_, buffers_, Remaining{total - written},
                    [this](const boost::system::error_code& ec, std::size_t) {
                      // Counted until it returns (IoScope): it touches the pair to the end.
                      TcpTransport::IoScope counted{owner_};
                      if (ec) {
                        fail("sending to " + peer_name_ + " failed: " + error_text(ec));
                        return;
                      }
                      if (!failed_) written_all();  // else closed meanwhile
                    });
}

// Note [Writing at once]: Asio's async_write of a small message costs about 1,000 instructions
// (its composed operation, the reactor's speculative write, a posted completion through the
// scheduler) around the one sendmsg that sends it (callgrind of an 8-byte ping-pong with
// TNT_SHM=0, 2026-11-28). So the batch is first offered to the socket directly, without
// blocking; what the kernel takes at once completes through the loop's completions (Note
// [Completions of a poll] in event_loop.cpp), and only what is left, or an error, which the
// asynchronous write then reports, goes through Asio.
std::size_t TcpPair::write_now() {
  std::array<iovec, 2 * kMaxGather> vectors{};
  std::size_t count = 0;
  for (const asio::const_buffer& buffer : buffers_)
    vectors[count++] = iovec{const_cast<void*>(buffer.data()), buffer.size()};
  msghdr message{};
  message.msg_iov = vectors.data();
  message.msg_iovlen = count;
  const ssize_t sent = ::sendmsg(socket_.native_handle(), &message, MSG_DONTWAIT | MSG_NOSIGNAL);
  return sent > 0 ? static_cast<std::size_t>(sent) : 0;
}

void TcpPair::drop_written(std::size_t written) {
  std::size_t first = 0;
  while (first < buffers_.size() && written >= buffers_[first].size()) written -= buffers_[first++].size();
  buffers_.erase(buffers_.begin(), buffers_.begin() + static_cast<std::ptrdiff_t>(first));
  if (written > 0) buffers_.front() += written;
}

void TcpPair::written_all() {
  // Completions may post new sends: take the batch out first.
  for (const Outgoing& message : writing_) message.sink->on_send_complete(message.cookie);
  writing_.clear();
  if (!failed_) write_more();
}

void TcpPair::recv(Tag tag, void* data, std::size_t capacity, CompletionSink& sink, std::uint64_t cookie) {
  if (failed_) return;
  const auto completed = inbox_.post(TcpInbox::Receive{tag, data, capacity, &sink, cookie});
  if (!inbox_.violation().empty()) {
    fail(inbox_.violation());
    return;
  }
  if (!completed) return;
  // Its message came before it. Complete later, never inside the caller's own call (it may
  // hold state mid-update); counted, so that the transport outlives it.
  owner_.begin_io();
  asio::post(socket_.get_executor(), [this, completed] {
    TcpTransport::IoScope counted{owner_};
    if (!failed_) completed->sink->on_recv_complete(completed->cookie, completed->bytes);
  });
}

// Note [Buffered reads] in tcp_inbox.cpp.
void TcpPair::read_more() {
  bool whole = false;
  const std::span<std::byte> target = inbox_.read_target(whole);
  auto done = [this, wanted = target.size()](const boost::system::error_code& ec, std::size_t bytes) {
    TcpTransport::IoScope counted{owner_};  // it touches the pair to the end
    if (ec) {
      fail("receiving from " + peer_name_ + " failed: " + error_text(ec));
      return;
    }
    if (failed_) return;  // closed meanwhile
    inbox_.on_read(bytes);
    deliver();
    if (failed_) return;
    if (bytes == wanted) {
      read_more();
      return;
    }
    // Note [Reading again later]: a read that took less than it asked for emptied the socket, so
    // the next one would find nothing (Asio tries it at once: a recvfrom that fails with EAGAIN)
    // before registering with epoll. Queued instead, it runs after the caller waiting for this
    // message has seen it, not between the message's arrival and the reply.
    owner_.begin_io();
    asio::post(socket_.get_executor(), [this] {
      TcpTransport::IoScope counted_again{owner_};
      if (!failed_) read_more();
    });
  };
  owner_.begin_io();
  if (whole) {
    asio::async_read(socket_, asio::buffer(target.data(), target.size()), Remaining{target.size()}, std::move(done));
  } else {
    socket_.async_read_some(asio::buffer(target.data(), target.size()), std::move(done));
  }
}

// One completion at a time: a sink may post the receive of the next message that is already in
// the inbox, which then lands in place instead of being staged.
void TcpPair::deliver() {
  while (!failed_) {
    const auto completed = inbox_.next();
    if (!completed) {
      if (!inbox_.violation().empty()) fail(inbox_.violation());
      return;
    }
    completed->sink->on_recv_complete(completed->cookie, completed->bytes);
  }
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
