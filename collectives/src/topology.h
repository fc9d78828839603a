#pragma once
// Which ranks share a host, as the collectives use it (built from transport::hosts_of).
#include <vector>

namespace tnt::detail {

struct Topology {
  // `host_of[r]`: the host of rank r, hosts numbered from 0 in the order of their lowest rank.
  static Topology build(const std::vector<int>& host_of, int rank);

  int hosts = 1;
  int host = 0;  // this rank's
  // Note [Node-aware order]: the job's ring visits the ranks host by host (ascending ranks
  // within a host), so that it crosses between hosts once per host whatever the placement of
  // ranks; the broadcast chain and the job-wide rings follow this order.
  std::vector<int> order;
  std::vector<int> position;  // position[r]: rank r's place in `order`
  std::vector<int> local;     // the ranks of this rank's host, ascending
  int local_index = 0;        // this rank's place in `local`
  // The ranks with this rank's local index, one per host, in host order; empty unless every
  // host holds the same number of ranks (what the hierarchical algorithms need).
  std::vector<int> cross;

  bool uniform() const { return !cross.empty(); }
  // Whether the hierarchical algorithms have anything to do beyond a flat ring.
  bool layered() const { return uniform() && hosts > 1 && local.size() > 1; }
};

}  // namespace tnt::detail
