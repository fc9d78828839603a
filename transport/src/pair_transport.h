#pragma once
// What the TCP and InfiniBand back ends keep alike: the address book, one Pair per peer reached
// through the authenticated side channel, the error handler, and the count of handlers that
// still refer to the transport (its destructor waits for none).
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "auth.h"
#include "side_channel.h"
#include "tnt/core/error.h"
#include "tnt/transport/transport.h"

namespace tnt::transport {

template <class PairType>
class PairTransport : public Transport {
 public:
  PairTransport(EventLoop& loop, const JobEnvironment& env)
      : loop_(loop), env_(env), auth_{env.job_id, env.job_token}, acceptor_(loop.strand()) {}

  void connect(const std::vector<PeerAddress>& book, const std::vector<int>& peers) final {
    // On the strand, as everything else that touches them: a job failure that the control plane
    // reports meanwhile closes this transport there (close()), and the progress thread then read
    // pairs_ while this thread resized it (ThreadSanitizer in CI, 2026-11-29).
    loop_.call([&] {
      pairs_.resize(book.size());
      links_.assign(book.size(), Link::closed);
      book_ = book;
    });
    loop_.run(connect_all(peers));
  }

  Pair& pair(int peer_rank) final {
    if (!is_open(peer_rank)) throw Error("no data channel to rank " + std::to_string(peer_rank));
    return *pairs_[peer_rank];
  }

  bool is_open(int peer_rank) const final {
    return peer_rank >= 0 && peer_rank < static_cast<int>(pairs_.size()) && links_[peer_rank] == Link::open;
  }

  // Note [Channels on first use] in side_channel.cpp.
  void open(int peer_rank) final {
    if (peer_rank < 0 || peer_rank >= static_cast<int>(links_.size()) || closed_) return;
    if (links_[peer_rank] != Link::closed) return;
    links_[peer_rank] = Link::asking;
    begin_io();
    boost::asio::co_spawn(loop_.strand(), open_side_channel(*setup_, peer_rank),
                          [this, peer_rank](std::exception_ptr failure, bool taken) {
                            const IoScope io{*this};
                            if (failure) {
                              try {
                                std::rethrow_exception(failure);
                              } catch (const std::exception& e) {
                                report(peer_rank, "cannot open a channel (" + setup_->plane + ") to " +
                                                      peer_name(book_, peer_rank) + ": " + e.what());
                              }
                              return;
                            }
                            // Declined: the channel that peer asked for is the one (it is on its way).
                            if (taken) opened(peer_rank);
                          });
  }

  void set_channel_handler(std::function<void(int)> handler) final { channel_handler_ = std::move(handler); }

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
  // The back end's set-up of a pair on an authenticated side channel (both ranks run it, at
  // start-up or on first use); it puts the pair into pairs_[peer].
  virtual boost::asio::awaitable<void> establish(int peer, boost::asio::ip::tcp::socket& socket) = 0;
  // A pair just made begins its work (its first read, its polling).
  virtual void start(int peer) { (void)peer; }
  // Once, after the start-up channels are made.
  virtual void after_connect() {}
  virtual std::string plane() const = 0;  // for messages: "data plane", ...
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
  // Connects the side channels to `peers`, makes their pairs, and from then on answers requests
  // for more (on the strand).
  boost::asio::awaitable<void> connect_all(std::vector<int> peers) {
    setup_.emplace(
        SideChannelSetup{env_, auth_, book_, plane(),
                         [this](int peer, boost::asio::ip::tcp::socket& socket) { return establish(peer, socket); },
                         [this](int peer) { return accept_request(peer); }, [this](int peer) { opened(peer); },
                         [this](int peer, const std::string& error) {
                           links_[peer] = Link::closed;
                           report(peer, error);
                         }});
    co_await connect_side_channels(acceptor_, *setup_, peers);
    for (std::size_t rank = 0; rank < pairs_.size(); ++rank) {
      if (pairs_[rank] && links_[rank] == Link::closed) {
        links_[rank] = Link::open;
        start(static_cast<int>(rank));  // once per channel, also when left == right
      }
    }
    after_connect();
    begin_io();
    boost::asio::co_spawn(loop_.strand(), serve_side_channels(acceptor_, *setup_),
                          [this](std::exception_ptr) { end_io(); });
  }

  // The rule of Note [Channels on first use]: take a request unless this rank has (or is taking)
  // the channel, or has asked for it itself and outranks the asker.
  bool accept_request(int peer) {
    if (closed_) return false;
    switch (links_[peer]) {
      case Link::closed: links_[peer] = Link::accepting; return true;
      case Link::asking:
        if (env_.rank > peer) return false;
        links_[peer] = Link::accepting;
        return true;
      default: return false;
    }
  }

  void opened(int peer) {
    if (links_[peer] == Link::open || !pairs_[peer]) return;
    links_[peer] = Link::open;
    spdlog::debug("{}: channel to {} opened on first use", plane(), peer_name(book_, peer));
    start(peer);
    if (channel_handler_) channel_handler_(peer);
  }

  // closed: none; asking: this rank asked for it; accepting: it is taking the peer's request.
  enum class Link : std::uint8_t { closed, asking, accepting, open };
  std::vector<Link> links_;
  std::optional<SideChannelSetup> setup_;
  std::function<void(int)> channel_handler_;
  ErrorHandler error_handler_;
  std::atomic<int> outstanding_{0};
  bool closed_ = false;
};

}  // namespace tnt::transport
