#pragma once
// What the rendezvous's parts share: the master's side (master_side.cpp), a joining rank's side
// (joining_side.cpp) and the control plane both hand their connections to (control_plane.cpp).
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tnt/core/asio.h"
#include "tnt/transport/event_loop.h"
#include "tnt/transport/transport.h"

namespace tnt::transport::detail {

using Clock = std::chrono::steady_clock;
using DataAddressFor = std::function<std::string(const std::string& local_ip)>;

std::string local_hostname();
std::string seconds(std::chrono::milliseconds duration);  // "2.5 s"

// Counts the coroutines and writes that still refer to the rendezvous's objects; their owner
// closes every socket and then waits for none before it lets them go.
class TaskCount {
 public:
  explicit TaskCount(EventLoop& loop) : loop_(loop) {}

  class Scope {
   public:
    explicit Scope(TaskCount& count) : count_(count) { ++count_.active_; }
    ~Scope() {
      // Once the count reaches 0 the owner may destroy `count_`: only the loop, which outlives
      // it, may be touched after the decrement.
      EventLoop& loop = count_.loop_;
      --count_.active_;
      loop.wake();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    TaskCount& count_;
  };

  void wait_for_none() {
    loop_.wait_until([&] { return active_.load() == 0; });
  }

 private:
  EventLoop& loop_;
  std::atomic<int> active_{0};
};

// One control connection: master <-> rank. Writes are queued so that heartbeats, aborts and
// goodbyes from different coroutines never interleave on the socket.
struct ControlLink {
  explicit ControlLink(boost::asio::ip::tcp::socket s) : socket(std::move(s)) {}
  boost::asio::ip::tcp::socket socket;
  int rank = -1;
  std::string hostname;
  std::string address;
  Clock::time_point last_heard = Clock::now();
  // The silence that the last warning about this link reported (0: none since it was last heard).
  std::chrono::milliseconds silence_warned{0};
  std::deque<std::vector<std::uint8_t>> outbox;
  bool writing = false;
  bool said_goodbye = false;
  bool closed = false;

  std::string name() const { return "rank " + std::to_string(rank) + " (" + hostname + ", " + address + ")"; }
};

// What joining gives the control plane: the connections (to every other rank on the master, to
// the master elsewhere), the address book indexed by rank, and on the master the frame that
// answers every rank (the address book), which the control plane sends before anything else.
struct Joined {
  std::vector<std::unique_ptr<ControlLink>> links;
  std::vector<PeerAddress> book;
  std::vector<std::uint8_t> answer;
};

}  // namespace tnt::transport::detail
