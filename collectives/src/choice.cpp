#include "choice.h"

#include <algorithm>

#include "tnt/core/error.h"

namespace tnt::detail {

std::string_view name_of(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::board: return "board";
    case Algorithm::gather: return "gather";
    case Algorithm::ring: return "ring";
    case Algorithm::hierarchical: return "hierarchical";
    case Algorithm::chain: return "chain";
    case Algorithm::exchange: return "exchange";
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
// Blocking alltoalls go through the board where all of a rank's blocks fit one of its areas
// (1 MiB; Note [Alltoall on the board]): one round instead of size - 1 messages each way. Larger
// ones would take a round per area and copy every byte twice, where the exchange's messages
// are read once, and lose: measured 2026-11-28 (15:05 UTC), OSU's osu_alltoall through the MPI
// layer on 2 cores, µs, exchange / board, 3 alternating rounds: 4 ranks, blocks of 1 KiB 17-23 /
// 5.2-5.8 (OpenMPI's 6.2-7.7 in the same rounds), 64 KiB 62-70 / 49-51, 256 KiB (1 MiB a rank)
// 219-244 / 170-173, 512 KiB (two areas) 390-463 / 429-459, 1 MiB 821-876 / 976-1085; 2 ranks,
// 1 KiB 4.3 / 1.0, 64 KiB 17-21 / 16-17, 256 KiB 50-60 / 55-57, 1 MiB 205-207 / 219-224.
// Hierarchical takes fewer steps than the ring at every size (Note [Hierarchical allreduce])
// and puts less on each inter-host stream, so no size threshold of its own. Measured with
// tnt-bench-allreduce, 4 ranks as 2 virtual hosts x 2 (shared memory within, TCP loopback
// across), on 2 cores loaded by other builds (load average 11), medians of 3-5 alternating
// rounds, time hierarchical / ring: 64 KiB 0.70 and 0.77 (two runs), 256 KiB 3.2 and 0.73
// (noise of this load), 1 MiB 0.78, 4 MiB 0.39, 16 MiB 0.80.
// Blocking broadcasts up to kBoardBroadcastBytes take one round on the board: the root's area
// is every rank's copy (BoardCollectives::broadcast). Larger ones stay on the chain, which
// pipelines its segments where the board copies the whole message twice, one copy after the
// other. Measured 2026-11-28 (15:15 UTC), OSU's osu_bcast through the MPI layer, 2 ranks on 2
// cores, chain / board, us, the two quieter of 3 alternating rounds: 4 B 1.6-1.8 / 0.47-0.51
// (OpenMPI 0.33), 1 KiB 2.7 / 0.5 (0.75), 4 KiB 2.2-2.9 / 0.36-0.38, 16 KiB 1.6-4.8 / 0.97,
// 32 KiB 1.9-7.2 / 1.6, 64 KiB 2.8-12.9 / 3.1-3.2; 4 ranks, 4 B 6.8 / 3.7, 64 KiB 12.6 / 5.0.
constexpr std::size_t kBoardBroadcastBytes = 32 << 10;

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
    case Collective::broadcast:
      return board && bytes > 0 && bytes <= std::min(settings.board_area_bytes, kBoardBroadcastBytes)
                 ? Algorithm::board
                 : Algorithm::chain;
    case Collective::reduce_scatter: return Algorithm::ring;
    case Collective::alltoall:  // `bytes`: all blocks of one rank
      return board && bytes > 0 && bytes <= settings.board_area_bytes ? Algorithm::board : Algorithm::exchange;
  }
  return Algorithm::ring;
}

}  // namespace tnt::detail
