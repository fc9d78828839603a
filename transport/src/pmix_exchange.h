#pragma once
// What rank 0 tells every other rank through the PMIx server of whatever started the job
// (OpenMPI's mpirun, or srun --mpi=pmix): Note [Bootstrap through PMIx] in pmix_exchange.cpp.
#include <chrono>
#include <string>

namespace tnt::bootstrap {

struct PmixShared {
  std::string master;  // "ADDRESS:PORT" of rank 0's rendezvous
  std::string token;   // the job's secret, when rank 0 published one
  std::string nspace;  // the PMIx namespace: unique per job of the launching system
  int rank = -1;       // this process's rank as PMIx knows it
};

// Whether a PMIx server announced itself to this process (PMIX_NAMESPACE and its URI are set).
bool pmix_available();

// Rank 0 publishes `master` and `token` (either may be empty: nothing to share); every rank
// gets what rank 0 published. Collective over the PMIx job: every rank must call it,
// once per process (the result is kept: later calls return it without a second exchange).
// Bounded by `timeout`; a failure is a ConfigError or JobError naming PMIx's status.
PmixShared exchange_through_pmix(bool is_rank0, const std::string& master, const std::string& token,
                                 std::chrono::milliseconds timeout);

}  // namespace tnt::bootstrap
