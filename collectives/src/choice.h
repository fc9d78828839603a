#pragma once
// Which algorithm runs a collective: one function, from the operation, its size, the topology
// and the settings (Note [Choosing an algorithm] in choice.cpp).
#include <cstddef>
#include <string_view>

#include "topology.h"

namespace tnt::detail {

enum class Collective { allreduce, allgather, barrier, broadcast, reduce_scatter, alltoall };

enum class Algorithm {
  board,         // the host board: every rank on one host, blocking callers (Note [Host board])
  gather,        // gather every rank's buffer along the ring, reduce locally in rank order
  ring,          // the job's ring (Note [Ring schedule] in operation.h)
  hierarchical,  // within hosts, across them, within again (Note [Hierarchical allreduce])
  chain,         // the broadcast chain (Note [Broadcast])
  exchange,      // point-to-point messages between every pair (Note [Exchanges])
};

std::string_view name_of(Algorithm algorithm);

// TNT_ALLREDUCE_ALGORITHM and TNT_ALLGATHER_ALGORITHM: `automatic` chooses by size and topology.
enum class Forced { automatic, ring, gather, hierarchical };
Forced parse_forced(std::string_view setting);  // "auto", "ring", "gather", "hierarchical"

struct AlgorithmSettings {
  Forced allreduce = Forced::automatic;
  Forced allgather = Forced::automatic;
  std::size_t small_allreduce_bytes = 16 << 10;  // TNT_SMALL_ALLREDUCE_KB
  // The largest message the host board carries; 0 where there is none (it holds every rank of
  // the job or none, and every rank sees the same capacity).
  std::size_t board_capacity = 0;
  std::size_t board_area_bytes = 0;  // what one round on the board carries per rank (HostBoard::area_bytes)
};

// `blocking`: the caller waits in the call (only such calls may use the host board, which needs
// no event loop but the caller's thread). The same inputs give the same choice on every rank.
Algorithm choose_algorithm(Collective what, std::size_t bytes, bool blocking, const Topology& topology, int size,
                           const AlgorithmSettings& settings);

}  // namespace tnt::detail
