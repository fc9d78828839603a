// Which ranks share a host: transport::hosts_of on address books, TNT_VIRTUAL_HOSTS, and the
// collectives' Topology (node-aware order, local and cross-host rings).
#include <gtest/gtest.h>
#include <stdlib.h>

#include "tnt/core/error.h"
#include "tnt/transport/transport.h"
#include "topology.h"

namespace tnt::test {
namespace {

std::vector<transport::PeerAddress> book_of(const std::vector<std::string>& addresses) {
  std::vector<transport::PeerAddress> book;
  for (std::size_t r = 0; r < addresses.size(); ++r) book.push_back({static_cast<int>(r), "h", addresses[r]});
  return book;
}

class HostsOf : public ::testing::Test {
 protected:
  void TearDown() override { ::unsetenv("TNT_VIRTUAL_HOSTS"); }
};

TEST_F(HostsOf, GroupsByHostKeyNumberedByLowestRank) {
  // Rank 3 published no host (a back end without the node transport): a host of its own. Rank 4
  // runs with TNT_SHM=0: it names its host but no segment, and still shares rank 1's host.
  const auto hosts = transport::hosts_of(
      book_of({"1.1.1.1:1 shm=B@x:1", "1.1.1.2:1 shm=A@y:1", "1.1.1.1:2 shm=B@x:2", "1.1.1.3:1", "1.1.1.2:2 shm=A@"}));
  EXPECT_EQ(hosts, (std::vector<int>{0, 1, 0, 2, 1}));
}

TEST_F(HostsOf, VirtualHostsCutEachHostIntoContiguousBlocks) {
  ::setenv("TNT_VIRTUAL_HOSTS", "2", 1);
  // Five ranks on one host: blocks of 3 and 2. Then two ranks on another: one each.
  EXPECT_EQ(transport::hosts_of(
                book_of({"a shm=K@1", "a shm=K@2", "a shm=K@3", "a shm=K@4", "a shm=K@5", "b shm=L@1", "b shm=L@2"})),
            (std::vector<int>{0, 0, 0, 1, 1, 2, 3}));
  // More virtual hosts than ranks: every rank alone.
  ::setenv("TNT_VIRTUAL_HOSTS", "8", 1);
  EXPECT_EQ(transport::hosts_of(book_of({"a shm=K@1", "a shm=K@2", "a shm=K@3"})), (std::vector<int>{0, 1, 2}));
  ::setenv("TNT_VIRTUAL_HOSTS", "-1", 1);
  try {
    transport::hosts_of(book_of({"a shm=K@1"}));
    FAIL() << "a negative TNT_VIRTUAL_HOSTS was accepted";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("TNT_VIRTUAL_HOSTS"), std::string::npos) << error.what();
  }
}

TEST(Topology, InterleavedRanksAreOrderedHostByHost) {
  // Ranks placed round-robin over two hosts: 0 and 2 on host 0, 1 and 3 on host 1.
  const auto t = detail::Topology::build({0, 1, 0, 1}, 2);
  EXPECT_EQ(t.hosts, 2);
  EXPECT_EQ(t.host, 0);
  EXPECT_EQ(t.order, (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(t.position, (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(t.local, (std::vector<int>{0, 2}));
  EXPECT_EQ(t.local_index, 1);
  EXPECT_EQ(t.cross, (std::vector<int>{2, 3}));
  EXPECT_TRUE(t.layered());
}

TEST(Topology, HostsOfDifferentSizesHaveNoCrossRing) {
  const auto t = detail::Topology::build({0, 0, 1}, 2);
  EXPECT_EQ(t.local, (std::vector<int>{2}));
  EXPECT_FALSE(t.uniform());
  EXPECT_FALSE(t.layered());
  // One host, or one rank per host: uniform, but nothing to layer.
  EXPECT_FALSE(detail::Topology::build({0, 0, 0}, 1).layered());
  EXPECT_TRUE(detail::Topology::build({0, 1, 2}, 1).uniform());
  EXPECT_FALSE(detail::Topology::build({0, 1, 2}, 1).layered());
}

}  // namespace
}  // namespace tnt::test
