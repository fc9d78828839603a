#include "pmix_exchange.h"

#include <pmix.h>

#include <cstdlib>
#include <mutex>
#include <optional>

#include "tnt/core/error.h"

// Note [Bootstrap through PMIx]
// mpirun gives its ranks their rank and size (OMPI_COMM_WORLD_*) but no peer's address, so rank
// 0's rendezvous address has to reach the others some other way. Every launcher that starts MPI
// programs today runs a PMIx server for them (OpenMPI 4's mpirun, and srun --mpi=pmix), and that
// server exists precisely to pass such "business cards" around: rank 0 Puts its address (and, when
// the user gave none, a fresh job token), Commits, and every rank takes part in a Fence that
// collects the data; then each Gets rank 0's values from its local server. A second, empty
// Fence keeps rank 0 from finalizing (and its server from dropping its data) before every rank has
// read them; then all Finalize, which mpirun expects from every process that initialised PMIx.
// The data travels between the launcher's own daemons (local Unix sockets on one host), never to
// another user. Each call is bounded by PMIX_TIMEOUT, TNT_CONNECT_TIMEOUT_S.

namespace tnt::bootstrap {
namespace {

constexpr const char* kMasterKey = "tnt.master";
constexpr const char* kTokenKey = "tnt.token";

[[noreturn]] void fail(const std::string& what, pmix_status_t status) {
  throw JobError("bootstrap through PMIx: " + what + " failed: " + PMIx_Error_string(status) +
                 " (is every rank of the job a tnt program started by the same mpirun or srun --mpi=pmix?)");
}

void put(const char* key, const std::string& value) {
  pmix_value_t v;
  PMIX_VALUE_CONSTRUCT(&v);
  v.type = PMIX_STRING;
  v.data.string = const_cast<char*>(value.c_str());
  const pmix_status_t status = PMIx_Put(PMIX_GLOBAL, key, &v);
  if (status != PMIX_SUCCESS) fail(std::string("PMIx_Put(") + key + ")", status);
}

void fence(const pmix_proc_t& self, bool collect, int timeout_s) {
  pmix_proc_t all;
  PMIX_LOAD_PROCID(&all, self.nspace, PMIX_RANK_WILDCARD);
  pmix_info_t info[2];
  bool yes = collect;
  PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
  PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &timeout_s, PMIX_INT);
  const pmix_status_t status = PMIx_Fence(&all, 1, info, 2);
  PMIX_INFO_DESTRUCT(&info[0]);
  PMIX_INFO_DESTRUCT(&info[1]);
  if (status != PMIX_SUCCESS) {
    fail("PMIx_Fence (waiting " + std::to_string(timeout_s) + " s for every rank of the job)", status);
  }
}

// Rank 0's value of `key`, or empty when rank 0 published none.
std::string get_from_rank0(const pmix_proc_t& self, const char* key, int timeout_s) {
  pmix_proc_t rank0;
  PMIX_LOAD_PROCID(&rank0, self.nspace, 0);
  pmix_info_t info;
  PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &timeout_s, PMIX_INT);
  pmix_value_t* value = nullptr;
  const pmix_status_t status = PMIx_Get(&rank0, key, &info, 1, &value);
  PMIX_INFO_DESTRUCT(&info);
  if (status == PMIX_ERR_NOT_FOUND) return {};
  if (status != PMIX_SUCCESS) fail(std::string("PMIx_Get(") + key + " of rank 0)", status);
  std::string out;
  if (value != nullptr && value->type == PMIX_STRING && value->data.string != nullptr) out = value->data.string;
  if (value != nullptr) PMIX_VALUE_RELEASE(value);
  return out;
}

PmixShared exchange(bool is_rank0, const std::string& master, const std::string& token,
                    std::chrono::milliseconds timeout) {
  const int timeout_s = static_cast<int>(std::max<std::int64_t>(1, (timeout.count() + 999) / 1000));
  pmix_proc_t self;
  PMIX_PROC_CONSTRUCT(&self);
  pmix_status_t status = PMIx_Init(&self, nullptr, 0);
  if (status != PMIX_SUCCESS) fail("PMIx_Init", status);
  PmixShared shared;
  try {
    if (is_rank0 != (self.rank == 0)) {
      throw ConfigError("bootstrap through PMIx: PMIx says this is rank " + std::to_string(self.rank) +
                        ", the launcher's variables say otherwise");
    }
    if (is_rank0) {
      // Both keys always, empty where rank 0 has nothing to share: under OpenMPI 4's PMIx a Get of a
      // key that rank 0 never put waits out its whole timeout instead of answering "not found"
      // (TNT_JOB_TOKEN given under mpirun: every rank failed after TNT_CONNECT_TIMEOUT_S).
      put(kMasterKey, master);
      put(kTokenKey, token);
      status = PMIx_Commit();
      if (status != PMIX_SUCCESS) fail("PMIx_Commit", status);
    }
    fence(self, true, timeout_s);
    shared.master = get_from_rank0(self, kMasterKey, timeout_s);
    shared.token = get_from_rank0(self, kTokenKey, timeout_s);
    shared.nspace = self.nspace;
    shared.rank = static_cast<int>(self.rank);
    fence(self, false, timeout_s);
  } catch (...) {
    PMIx_Finalize(nullptr, 0);
    throw;
  }
  status = PMIx_Finalize(nullptr, 0);
  if (status != PMIX_SUCCESS) fail("PMIx_Finalize", status);
  return shared;
}

}  // namespace

bool pmix_available() {
  const char* nspace = std::getenv("PMIX_NAMESPACE");
  const char* uri = std::getenv("PMIX_SERVER_URI41");
  if (uri == nullptr) uri = std::getenv("PMIX_SERVER_URI4");
  if (uri == nullptr) uri = std::getenv("PMIX_SERVER_URI3");
  if (uri == nullptr) uri = std::getenv("PMIX_SERVER_URI21");
  if (uri == nullptr) uri = std::getenv("PMIX_SERVER_URI2");
  return nspace != nullptr && *nspace != '\0' && uri != nullptr && *uri != '\0';
}

PmixShared exchange_through_pmix(bool is_rank0, const std::string& master, const std::string& token,
                                 std::chrono::milliseconds timeout) {
  // PMIx may be initialised and finalized once per process: keep the first answer.
  static std::mutex mutex;
  static std::optional<PmixShared> done;
  std::lock_guard lock(mutex);
  if (!done) done = exchange(is_rank0, master, token, timeout);
  return *done;
}

}  // namespace tnt::bootstrap
