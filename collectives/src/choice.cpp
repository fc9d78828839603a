#include "choice.h"

#include "tnt/core/error.h"

namespace tnt::detail {

std::string_view name_of(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::board: return "board";
    case Algorithm::gather: return "gather";
    case Algorithm::ring: return "ring";
    case Algorithm::hierarchical: return "hierarchical";
    case Algorithm::chain: return "chain";
  }
  return "?";
}

Forced parse_forced(std::string_view setting) {
  if (setting == "auto") return Forced::automatic;
  if (setting == "ring") return Forced::ring;
  if (setting == "gather") return Forced::gather;
  if (setting == "hierarchical") return Forced::hierarchical;
  throw ConfigError("unknown collective algorithm '" + std::string(setting) + "'");
}

// Note [Choosing an algorithm]: allreduces up to small_allreduce_bytes gather and reduce
// locally (fewest steps); larger ones run hierarchically when there are several hosts of
// several ranks each, all alike, else on the job's ring. Blocking allreduces and barriers go
// through the host board where it holds every rank and the message fits, and only when nothing
// is forced, so that a forced algorithm still runs in the tests. TNT_ALLREDUCE_ALGORITHM forces
// one (hierarchical falls back to the automatic flat choice where hosts differ in size).
// Allgather: hierarchical where hosts are layered, unless TNT_ALLGATHER_ALGORITHM says otherwise.
// Hierarchical takes fewer steps than the ring at every size (Note [Hierarchical allreduce])
// and puts less on each inter-host stream, so no size threshold of its own. Measured with
// tnt-bench-allreduce, 4 ranks as 2 virtual hosts x 2 (shared memory within, TCP loopback
// across), on 2 cores loaded by other builds (load average 11), medians of 3-5 alternating
// rounds, time hierarchical / ring: 64 KiB 0.70 and 0.77 (two runs), 256 KiB 3.2 and 0.73
// (noise of this load), 1 MiB 0.78, 4 MiB 0.39, 16 MiB 0.80.
Algorithm choose_algorithm(Collective what, std::size_t bytes, bool blocking, const Topology& topology, int size,
                           const AlgorithmSettings& settings) {
  const bool can_layer = topology.uniform() && size > 1;
  const bool board = blocking && settings.board_capacity > 0 && settings.allreduce == Forced::automatic;
  switch (what) {
    case Collective::allreduce: {
      if (board && bytes > 0 && bytes <= settings.board_capacity) return Algorithm::board;
      const Forced forced = settings.allreduce;
      const bool small = bytes <= settings.small_allreduce_bytes;
      if (can_layer &&
          (forced == Forced::hierarchical || (forced == Forced::automatic && topology.layered() && !small))) {
        return Algorithm::hierarchical;
      }
      if (forced == Forced::ring) return Algorithm::ring;
      if (forced == Forced::gather) return Algorithm::gather;
      return small ? Algorithm::gather : Algorithm::ring;
    }
    case Collective::allgather: {
      const Forced forced = settings.allgather;
      if (can_layer && (forced == Forced::hierarchical || (forced == Forced::automatic && topology.layered()))) {
        return Algorithm::hierarchical;
      }
      return Algorithm::ring;
    }
    case Collective::barrier: return board ? Algorithm::board : Algorithm::ring;
    case Collective::broadcast: return Algorithm::chain;
    case Collective::reduce_scatter: return Algorithm::ring;
  }
  return Algorithm::ring;
}

}  // namespace tnt::detail
