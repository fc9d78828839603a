#include "node_transport.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <map>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "shm/shm_transport.h"
#include "tnt/core/error.h"
#include "tnt/core/settings.h"
#include "tnt/transport/host_board.h"

namespace tnt::transport {
namespace {

// What separates the network address from the shared-memory part in a published address, and
// the host board's part (Note [Host board]) from the rest.
constexpr std::string_view kShmMark = " shm=";
constexpr std::string_view kBoardMark = " board=";

std::string namespace_inode(const char* kind) {
  struct stat status {};
  if (::stat((std::string("/proc/self/ns/") + kind).c_str(), &status) != 0) return "?";
  return std::to_string(status.st_ino);
}

// A published address, split into its network part, (when the rank offers one) its
// shared-memory part "HOSTKEY@ip:port", and its host board "pid:fd".
struct Published {
  std::string network;
  std::string host_key;
  std::string shm_address;
  std::string board_address;
};

Published split(std::string address) {
  std::string board;
  if (const auto mark = address.find(kBoardMark); mark != std::string::npos) {
    board = address.substr(mark + kBoardMark.size());
    address.resize(mark);
  }
  const auto mark = address.find(kShmMark);
  if (mark == std::string::npos) return {address, {}, {}, board};
  const std::string shm = address.substr(mark + kShmMark.size());
  const auto at = shm.rfind('@');
  if (at == std::string::npos) throw JobError("malformed data-plane address '" + address + "'");
  return {address.substr(0, mark), shm.substr(0, at), shm.substr(at + 1), board};
}

// Pairs of ranks on the same host talk through shared memory; the others through the network
// back end (TCP or InfiniBand). Both sides of a pair decide alike: each compares the same two
// entries of hosts_of(book), and a rank that offers no shared memory (TNT_SHM=0: `shm` is null,
// its address names its host but no segment) is reached over the network by everyone.
class NodeTransport final : public Transport {
 public:
  NodeTransport(std::unique_ptr<Transport> network, std::unique_ptr<Transport> shm, int rank, std::size_t board_bytes)
      : network_(std::move(network)),
        shm_(std::move(shm)),
        rank_(rank),
        host_key_(this_host_key()),
        board_offer_(rank, shm_ ? board_bytes : 0) {}

  std::string listen(const std::string& local_ip) override {
    std::string address = network_->listen(local_ip) + std::string(kShmMark) + host_key_ + "@" +
                          (shm_ ? shm_->listen(local_ip) : std::string());
    if (const std::string board = board_offer_.address(); !board.empty()) address += std::string(kBoardMark) + board;
    return address;
  }

  void connect(const std::vector<PeerAddress>& book, const std::vector<int>& peers) override {
    std::vector<PeerAddress> network_book = book;
    std::vector<PeerAddress> shm_book = book;
    std::vector<int> network_peers;
    std::vector<int> shm_peers;
    const std::vector<int> hosts = hosts_of(book);
    on_shm_.assign(book.size(), false);
    std::vector<int> board_members;
    std::vector<std::string> board_addresses;
    for (std::size_t rank = 0; rank < book.size(); ++rank) {
      const Published published = split(book[rank].data_address);
      network_book[rank].data_address = published.network;
      shm_book[rank].data_address = published.shm_address;
      on_shm_[rank] = shm_ && !published.shm_address.empty() && hosts[rank] == hosts.at(rank_);
      if ((on_shm_[rank] || static_cast<int>(rank) == rank_) && !published.board_address.empty()) {
        board_members.push_back(static_cast<int>(rank));
        board_addresses.push_back(published.board_address);
      }
    }
    board_ = board_offer_.join(board_members, board_addresses);
    for (int peer : peers) (on_shm_.at(peer) ? shm_peers : network_peers).push_back(peer);
    spdlog::debug("data plane: ranks [{}] through shared memory, ranks [{}] through the network",
                  fmt::join(shm_peers, " "), fmt::join(network_peers, " "));
    // Both back ends always take part, with no peer or some: each ends its set-up on its own.
    network_->connect(network_book, network_peers);
    if (shm_) shm_->connect(shm_book, shm_peers);
  }

  Pair& pair(int peer_rank) override { return back_end_of(peer_rank).pair(peer_rank); }

  void open(int peer_rank) override { back_end_of(peer_rank).open(peer_rank); }
  bool is_open(int peer_rank) const override {
    return const_cast<NodeTransport*>(this)->back_end_of(peer_rank).is_open(peer_rank);
  }
  void set_channel_handler(std::function<void(int)> handler) override {
    if (shm_) shm_->set_channel_handler(handler);
    network_->set_channel_handler(std::move(handler));
  }

  Executor executor() const override { return network_->executor(); }

  HostBoard* host_board() override { return board_.get(); }

  void set_error_handler(ErrorHandler handler) override {
    if (shm_) shm_->set_error_handler(handler);
    network_->set_error_handler(std::move(handler));
  }

  void close() override {
    if (shm_) shm_->close();
    network_->close();
  }

 private:
  Transport& back_end_of(int peer_rank) {
    const bool shm = peer_rank >= 0 && peer_rank < static_cast<int>(on_shm_.size()) && on_shm_[peer_rank];
    return shm ? *shm_ : *network_;
  }

  std::unique_ptr<Transport> network_;
  std::unique_ptr<Transport> shm_;
  int rank_;
  std::string host_key_;
  std::vector<bool> on_shm_;
  BoardOffer board_offer_;
  std::unique_ptr<HostBoard> board_;
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

std::unique_ptr<Transport> make_node_transport(std::unique_ptr<Transport> network, std::unique_ptr<Transport> shm,
                                               int rank, std::size_t board_bytes) {
  return std::make_unique<NodeTransport>(std::move(network), std::move(shm), rank, board_bytes);
}

std::vector<int> hosts_of(const std::vector<PeerAddress>& book) {
  // Ranks by host key, in rank order; a rank that names no host stands alone.
  std::vector<std::vector<int>> hosts;
  std::map<std::string, std::size_t> index_of_key;
  for (std::size_t rank = 0; rank < book.size(); ++rank) {
    const std::string key = split(book[rank].data_address).host_key;
    const auto [it, added] = index_of_key.emplace(key.empty() ? "rank " + std::to_string(rank) : key, hosts.size());
    if (added) hosts.emplace_back();
    hosts[it->second].push_back(static_cast<int>(rank));
  }
  // TNT_VIRTUAL_HOSTS: each host's ranks in `virtual_hosts` contiguous blocks, the first
  // size % virtual_hosts blocks one rank longer (as Communicator::block cuts buffers).
  const auto virtual_hosts = static_cast<std::size_t>(settings::kVirtualHosts.read());
  std::vector<int> host(book.size(), 0);
  int next = 0;
  for (const auto& ranks : hosts) {
    const std::size_t blocks = std::clamp<std::size_t>(virtual_hosts, 1, ranks.size());
    const std::size_t base = ranks.size() / blocks;
    const std::size_t extra = ranks.size() % blocks;
    std::size_t position = 0;
    for (std::size_t block = 0; block < blocks; ++block, ++next) {
      const std::size_t length = base + (block < extra ? 1 : 0);
      for (std::size_t i = 0; i < length; ++i) host[static_cast<std::size_t>(ranks[position++])] = next;
    }
  }
  return host;
}

}  // namespace tnt::transport
