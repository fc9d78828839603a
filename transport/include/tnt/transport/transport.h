#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tnt/core/asio.h"
#include "tnt/transport/environment.h"
#include "tnt/transport/event_loop.h"
#include "tnt/transport/pair.h"

namespace tnt::transport {

class HostBoard;

struct PeerAddress {
  int rank = 0;
  std::string hostname;      // for error messages: "rank 3 (node07)"
  std::string data_address;  // back-end specific, published in the address book
};

// A data-plane back end (TCP or InfiniBand verbs): it publishes an address, connects to
// the peers an algorithm needs, and hands out one Pair per peer. Collectives see only
// Transport and Pair; the back ends live in transport/src/tcp and transport/src/ib.
//
// Concurrency: constructed and connected from one thread; afterwards every call is made on
// executor(), like the Pair calls.
class Transport {
 public:
  using Executor = boost::asio::strand<boost::asio::io_context::executor_type>;
  using ErrorHandler = std::function<void(int peer_rank, const std::string& message)>;

  virtual ~Transport() = default;
  // Starts listening on `local_ip` and returns what the other ranks need to reach this one
  // (it goes into the Hello).
  virtual std::string listen(const std::string& local_ip) = 0;
  // Connects to every rank in `peers` (blocking, bounded by the environment's connect
  // timeout); every connection is mutually authenticated before it is used.
  virtual void connect(const std::vector<PeerAddress>& book, const std::vector<int>& peers) = 0;
  virtual Pair& pair(int peer_rank) = 0;
  // Note [Channels on first use] (transport/src/side_channel.cpp): channels beyond those of
  // connect() open when a rank first needs one. On executor(): open() starts opening the channel
  // to `peer_rank` unless it is open or opening; is_open() says whether pair() may be called; the
  // channel handler runs once for each channel opened after connect(), whichever rank opened it.
  // A channel that cannot be opened goes to the error handler.
  virtual void open(int peer_rank) = 0;
  virtual bool is_open(int peer_rank) const = 0;
  virtual void set_channel_handler(std::function<void(int peer_rank)> handler) = 0;
  virtual Executor executor() const = 0;
  // Called once per failed channel, on executor().
  virtual void set_error_handler(ErrorHandler handler) = 0;
  // This host's board after connect() (Note [Host board]), or null where there is none (no
  // shared memory, TNT_HOST_ALLREDUCE_KB=0, or this rank alone on its host).
  virtual HostBoard* host_board() { return nullptr; }
  // Closes every channel; pending operations complete no more. Errors seen after this are
  // not reported (the job is ending on purpose).
  virtual void close() = 0;
};

// Which ranks share a host, from the address book (so every rank computes the same): element r
// is the host of rank r, hosts numbered 0, 1, ... in the order of their lowest rank. "Same
// host" is what shared memory needs (Note [Same host] in node_transport.cpp), whether or not
// TNT_SHM is on. TNT_VIRTUAL_HOSTS=N (for tests) cuts each host's ranks into N contiguous
// blocks that count as hosts of their own, for the collectives and for the choice of shared
// memory alike. A rank whose address names no host is a host of its own.
std::vector<int> hosts_of(const std::vector<PeerAddress>& book);

// The back end named by env.transport ("tcp" or "ib"). Throws tnt::ConfigError when that back
// end was not built or, for "ib", when no InfiniBand device is present.
std::unique_ptr<Transport> make_transport(EventLoop& loop, const tnt::JobEnvironment& env);

}  // namespace tnt::transport
