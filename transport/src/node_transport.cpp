#include "node_transport.h"

#include <sys/stat.h>

#include <fstream>
#include <map>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "shm/shm_transport.h"
#include "tnt/core/error.h"

namespace tnt::transport {
namespace {

// What separates the network address from the shared-memory part in a published address.
constexpr std::string_view kShmMark = " shm=";

std::string namespace_inode(const char* kind) {
  struct stat status {};
  if (::stat((std::string("/proc/self/ns/") + kind).c_str(), &status) != 0) return "?";
  return std::to_string(status.st_ino);
}

// A published address, split into its network part and (when the rank offers one) its
// shared-memory part "HOSTKEY@ip:port".
struct Published {
  std::string network;
  std::string host_key;
  std::string shm_address;
};

Published split(const std::string& address) {
  const auto mark = address.find(kShmMark);
  if (mark == std::string::npos) return {address, {}, {}};
  const std::string shm = address.substr(mark + kShmMark.size());
  const auto at = shm.rfind('@');
  if (at == std::string::npos) throw JobError("malformed data-plane address '" + address + "'");
  return {address.substr(0, mark), shm.substr(0, at), shm.substr(at + 1)};
}

// Pairs of ranks on the same host talk through shared memory; the others through the network
// back end (TCP or InfiniBand). Both sides of a pair decide alike: each compares the same two
// published host keys, and a rank that offers no shared memory (TNT_SHM=0) is reached over the
// network by everyone.
class NodeTransport final : public Transport {
 public:
  NodeTransport(std::unique_ptr<Transport> network, std::unique_ptr<Transport> shm)
      : network_(std::move(network)), shm_(std::move(shm)), host_key_(this_host_key()) {}

  std::string listen(const std::string& local_ip) override {
    return network_->listen(local_ip) + std::string(kShmMark) + host_key_ + "@" + shm_->listen(local_ip);
  }

  void connect(const std::vector<PeerAddress>& book, const std::vector<int>& peers) override {
    std::vector<PeerAddress> network_book = book;
    std::vector<PeerAddress> shm_book = book;
    std::vector<int> network_peers;
    std::vector<int> shm_peers;
    on_shm_.assign(book.size(), false);
    for (std::size_t rank = 0; rank < book.size(); ++rank) {
      const Published published = split(book[rank].data_address);
      network_book[rank].data_address = published.network;
      shm_book[rank].data_address = published.shm_address;
      on_shm_[rank] = !published.host_key.empty() && published.host_key == host_key_;
    }
    for (int peer : peers) (on_shm_.at(peer) ? shm_peers : network_peers).push_back(peer);
    spdlog::debug("data plane: ranks [{}] through shared memory, ranks [{}] through the network",
                  fmt::join(shm_peers, " "), fmt::join(network_peers, " "));
    // Both back ends always take part, with no peer or some: each ends its set-up on its own.
    network_->connect(network_book, network_peers);
    shm_->connect(shm_book, shm_peers);
  }

  Pair& pair(int peer_rank) override {
    const bool shm = peer_rank >= 0 && peer_rank < static_cast<int>(on_shm_.size()) && on_shm_[peer_rank];
    return shm ? shm_->pair(peer_rank) : network_->pair(peer_rank);
  }

  Executor executor() const override { return network_->executor(); }

  void set_error_handler(ErrorHandler handler) override {
    network_->set_error_handler(handler);
    shm_->set_error_handler(std::move(handler));
  }

  void close() override {
    shm_->close();
    network_->close();
  }

 private:
  std::unique_ptr<Transport> network_;
  std::unique_ptr<Transport> shm_;
  std::string host_key_;
  std::vector<bool> on_shm_;
};

}  // namespace

std::string this_host_key() {
  // Note [Same host]: ranks share memory when they run on one kernel (boot id), in one network
  // namespace (ranks in other namespaces count as other hosts: the multi-host tests rely on it)
  // and one pid namespace (the peer opens the segment through /proc/<pid>).
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  return (boot_id.empty() ? std::string("?") : boot_id) + "/" + namespace_inode("net") + "/" + namespace_inode("pid");
}

std::unique_ptr<Transport> make_node_transport(std::unique_ptr<Transport> network, std::unique_ptr<Transport> shm) {
  return std::make_unique<NodeTransport>(std::move(network), std::move(shm));
}

}  // namespace tnt::transport
