#pragma once
// What the TCP and InfiniBand back ends keep alike: the address book, one Pair per peer reached
// through the authenticated side channel, the error handler, and the count of handlers that
// still refer to the transport (its destructor waits for none).
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "auth.h"
#include "tnt/core/error.h"
#include "tnt/transport/transport.h"

namespace tnt::transport {

template <class PairType>
class PairTransport : public Transport {
 public:
  PairTransport(EventLoop& loop, const JobEnvironment& env)
      : loop_(loop), env_(env), auth_{env.job_id, env.job_token}, acceptor_(loop.strand()) {}

  void connect(const std::vector<PeerAddress>& book, const std::vector<int>& peers) final {
    pairs_.resize(book.size());
    book_ = book;
    loop_.run(connect_all(peers));
  }

  Pair& pair(int peer_rank) final {
    if (peer_rank < 0 || peer_rank >= static_cast<int>(pairs_.size()) || !pairs_[peer_rank]) {
      throw Error("no data channel to rank " + std::to_string(peer_rank));
    }
    return *pairs_[peer_rank];
  }

  Executor executor() const final { return loop_.strand(); }
  void set_error_handler(ErrorHandler handler) final { error_handler_ = std::move(handler); }

  void close() final {
    loop_.call([this] {
      closed_ = true;
      boost::system::error_code ignored;
      acceptor_.close(ignored);
      stop_watching();
      for (auto& pair : pairs_) {
        if (pair) pair->close();
      }
    });
  }

  // For the pairs: every asynchronous handler that refers to the transport is counted.
  void begin_io() { ++outstanding_; }
  // Ends an I/O as the handler that began it returns, after its last touch of the pair or the
  // transport: once the count is 0 the destructor may go on (on another thread, where the loop
  // has a progress thread of its own). UBSan caught an IB side-channel handler reading its pair
  // after end_io() had let the fake-fabric test destroy it.
  struct IoScope {
    PairTransport& owner;
    ~IoScope() { owner.end_io(); }
  };
  void end_io() {
    EventLoop& loop = loop_;  // at 0 the destructor may go on: touch only the loop after it
    if (--outstanding_ == 0) loop.wake();
  }
  bool closed() const { return closed_; }
  EventLoop& loop() { return loop_; }
  void report(int peer, const std::string& message) {
    if (closed_) return;
    if (error_handler_) error_handler_(peer, message);
  }

 protected:
  // Connects the side channels to `peers` and makes their pairs (on the strand).
  virtual boost::asio::awaitable<void> connect_all(std::vector<int> peers) = 0;
  // On the strand, in close(): stops whatever else the back end watches.
  virtual void stop_watching() {}
  // For the derived destructor, after close(): handlers must not outlive the object.
  void wait_for_handlers() {
    loop_.wait_until([this] { return outstanding_.load() == 0; });
  }

  EventLoop& loop_;
  JobEnvironment env_;
  AuthContext auth_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::vector<PeerAddress> book_;
  std::vector<std::unique_ptr<PairType>> pairs_;

 private:
  ErrorHandler error_handler_;
  std::atomic<int> outstanding_{0};
  bool closed_ = false;
};

}  // namespace tnt::transport
