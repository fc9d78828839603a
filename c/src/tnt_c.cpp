// tnt's C API: each function forwards to tnt::Communicator inside guarded(), which turns every
// exception into a status code and keeps its message, prefixed with the C call's name, for
// tnt_last_error(). Nothing may throw past this file: a C or Fortran caller cannot catch.
#include "tnt/tnt.h"

#include <array>
#include <cstring>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "tnt/collectives/communicator.h"
#include "tnt/core/error.h"

struct tnt_comm {
  tnt::Communicator comm;
};
struct tnt_request {
  tnt::Request request;
};

// tnt_datatype and tnt_op are tnt::DataType and tnt::ReduceOp, value for value.
static_assert(TNT_FLOAT32 == static_cast<int>(tnt::DataType::float32) &&
              TNT_BFLOAT16 == static_cast<int>(tnt::DataType::bfloat16) &&
              TNT_UINT64 == static_cast<int>(tnt::DataType::uint64) &&
              TNT_CHAR == static_cast<int>(tnt::DataType::character) &&
              TNT_INT64_INT32 == static_cast<int>(tnt::DataType::int64_int32) &&
              TNT_INT64_INT32 + 1 == tnt::kDataTypes);
static_assert(TNT_SUM == static_cast<int>(tnt::ReduceOp::sum) && TNT_PROD == static_cast<int>(tnt::ReduceOp::prod) &&
              TNT_BXOR == static_cast<int>(tnt::ReduceOp::bit_xor) &&
              TNT_MAXLOC == static_cast<int>(tnt::ReduceOp::max_loc) && TNT_MAXLOC + 1 == tnt::kReduceOps);

namespace {

thread_local std::string last_error;

// A usage error found here, before tnt is called.
struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

template <class Body>
int guarded(const char* call, Body&& body) noexcept {
  auto fail = [call](tnt_status status, const char* what) {
    try {
      last_error = std::string(call) + ": " + what;
    } catch (...) {
      last_error.clear();  // out of memory while describing the failure: the code still says it
    }
    return static_cast<int>(status);
  };
  try {
    body();
    return TNT_SUCCESS;
  } catch (const tnt::ConfigError& e) {
    return fail(TNT_ERR_USAGE, e.what());
  } catch (const tnt::JobError& e) {
    return fail(TNT_ERR_JOB, e.what());
  } catch (const tnt::LogicError& e) {
    return fail(TNT_ERR_STATE, e.what());
  } catch (const tnt::TruncationError& e) {
    return fail(TNT_ERR_TRUNCATED, e.what());
  } catch (const tnt::Error& e) {
    return fail(TNT_ERR_FAILED, e.what());
  } catch (const std::invalid_argument& e) {
    return fail(TNT_ERR_USAGE, e.what());
  } catch (const std::bad_alloc&) {
    return fail(TNT_ERR_NO_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(TNT_ERR_INTERNAL, e.what());
  } catch (...) {
    return fail(TNT_ERR_INTERNAL, "unknown exception");
  }
}

template <class T>
T& non_null(T* pointer, const char* what) {
  if (pointer == nullptr) throw UsageError(std::string(what) + " is NULL");
  return *pointer;
}
tnt::Communicator& comm_of(tnt_comm* comm) { return non_null(comm, "comm").comm; }
const tnt::Communicator& comm_of(const tnt_comm* comm) { return non_null(comm, "comm").comm; }

tnt::DataType type_of(tnt_datatype type) {
  const int value = static_cast<int>(type);
  if (value < 0 || value >= tnt::kDataTypes)
    throw UsageError("data type " + std::to_string(value) + " is not a tnt_datatype");
  return static_cast<tnt::DataType>(value);
}
tnt::ReduceOp op_of(tnt_op op) {
  const int value = static_cast<int>(op);
  if (value < 0 || value >= tnt::kReduceOps)
    throw UsageError("operation " + std::to_string(value) + " is not a tnt_op");
  return static_cast<tnt::ReduceOp>(value);
}

// A per-rank array of the communicator's size; NULL gives none, which tnt refuses where counts
// are read (only at the root for gatherv and scatterv, as in MPI).
std::span<const std::size_t> per_rank(const std::size_t* values, const tnt::Communicator& comm) {
  if (values == nullptr) return {};
  return {values, static_cast<std::size_t>(comm.size())};
}

// Note [Spare handles]: a C code issues and frees a request handle per message, several per step
// of a halo exchange; freed handles are kept, per thread, for the next ones (new and delete were
// 300 of the 4,000 instructions of jacobi2d's 16 x 16 iteration besides its arithmetic, callgrind,
// 2026-11-29). `handles_gone` is plain thread storage, valid to the thread's last instruction: a
// handle freed after the spares went (from an exit handler) is simply deleted. Both are
// initial-exec: in a shared library's default model each read was a call to __tls_get_addr,
// seven per isend/irecv/free pair, 155 instructions of that exchange (callgrind, 2026-11-29).
// libtnt_c is linked by C and Fortran programs, not opened later, so static TLS holds them.
[[gnu::tls_model("initial-exec")]] thread_local bool handles_gone = false;
class SpareHandles {
 public:
  SpareHandles() { spare_.reserve(kKept); }  // so that giving a handle back never allocates
  SpareHandles(const SpareHandles&) = delete;
  SpareHandles& operator=(const SpareHandles&) = delete;
  ~SpareHandles() {
    handles_gone = true;
    for (tnt_request* handle : spare_) delete handle;
  }
  tnt_request* take(tnt::Request request) {
    if (spare_.empty()) return new tnt_request{std::move(request)};
    tnt_request* handle = spare_.back();
    spare_.pop_back();
    handle->request = std::move(request);
    return handle;
  }
  void give_back(tnt_request* handle) {
    if (spare_.size() == kKept) {
      delete handle;
      return;
    }
    handle->request = tnt::Request();  // its operation's state goes now, not when reused
    spare_.push_back(handle);
  }

 private:
  static constexpr std::size_t kKept = 64;
  std::vector<tnt_request*> spare_;
};
[[gnu::tls_model("initial-exec")]] thread_local SpareHandles spare_handles;

void hand_out(tnt::Request request, tnt_request** out) {
  *out = handles_gone ? new tnt_request{std::move(request)} : spare_handles.take(std::move(request));
}

void set_status(tnt_message_status* out, const tnt::MessageStatus& status) {
  if (out != nullptr) *out = tnt_message_status{status.source, status.tag, status.bytes};
}

// Calls `use` with the requests as a span of pointers (NULL handles give null ones, which tnt
// skips). A halo exchange waits on a few requests per step: up to kOnStack of them are listed
// without allocating.
template <class Use>
auto with_requests(std::size_t count, tnt_request* const* requests, Use&& use) {
  constexpr std::size_t kOnStack = 16;
  if (count > 0 && requests == nullptr) throw UsageError("requests is NULL");
  std::array<const tnt::Request*, kOnStack> small;
  std::vector<const tnt::Request*> large(count > kOnStack ? count : 0);
  const std::span<const tnt::Request*> all =
      count > kOnStack ? std::span<const tnt::Request*>(large) : std::span(small).first(count);
  for (std::size_t i = 0; i < count; ++i) all[i] = requests[i] != nullptr ? &requests[i]->request : nullptr;
  return use(std::span<const tnt::Request* const>(all));
}

}  // namespace

extern "C" {

const char* tnt_error_string(int status) {
  switch (status) {
    case TNT_SUCCESS: return "success";
    case TNT_ERR_USAGE: return "usage error";
    case TNT_ERR_JOB: return "job failed";
    case TNT_ERR_TRUNCATED: return "message truncated";
    case TNT_ERR_STATE: return "call in the wrong order";
    case TNT_ERR_FAILED: return "failed";
    case TNT_ERR_NO_MEMORY: return "out of memory";
    case TNT_ERR_INTERNAL: return "internal error";
    default: return "unknown tnt status";
  }
}

const char* tnt_last_error(void) { return last_error.c_str(); }

int tnt_init(tnt_comm** world) {
  return guarded("tnt_init", [&] {
    non_null(world, "world");
    *world = new tnt_comm{tnt::Communicator()};
  });
}

int tnt_init_job(const tnt_job* job, tnt_comm** world) {
  return guarded("tnt_init_job", [&] {
    const tnt_job& given = non_null(job, "job");
    non_null(world, "world");
    if (given.size < 1 || given.rank < 0 || given.rank >= given.size) {
      throw UsageError("rank " + std::to_string(given.rank) + " of size " + std::to_string(given.size) +
                       " is not a rank of a job");
    }
    if (given.master_port < 0 || given.master_port > 65535) {
      throw UsageError("master_port " + std::to_string(given.master_port) + " is not a TCP port");
    }
    tnt::JobEnvironment env;
    env.rank = given.rank;
    env.size = given.size;
    env.local_size = given.local_size > 0 ? given.local_size : given.size;
    env.local_rank = given.local_size > 0 ? given.local_rank : given.rank;
    if (env.local_rank < 0 || env.local_rank >= env.local_size) {
      throw UsageError("local_rank " + std::to_string(env.local_rank) + " is not below local_size " +
                       std::to_string(env.local_size));
    }
    if (given.master_addr != nullptr) env.master_addr = given.master_addr;
    env.master_port = static_cast<std::uint16_t>(given.master_port);
    if (given.job_id != nullptr) env.job_id = given.job_id;
    if (given.token != nullptr) env.job_token = given.token;
    env.source = "tnt_init_job (given by the program)";
    tnt::CommunicatorOptions options;
    options.environment = env;
    *world = new tnt_comm{tnt::Communicator(std::move(options))};
  });
}

int tnt_finalize(tnt_comm* comm) {
  const int status = guarded("tnt_finalize", [&] { comm_of(comm).finish(); });
  delete comm;
  return status;
}

int tnt_abort(tnt_comm* comm, const char* reason) {
  return guarded("tnt_abort", [&] { comm_of(comm).abort(reason != nullptr ? reason : "tnt_abort"); });
}

int tnt_comm_free(tnt_comm* comm) {
  return guarded("tnt_comm_free", [&] { delete comm; });
}

int tnt_comm_rank(const tnt_comm* comm, int* rank) {
  return guarded("tnt_comm_rank", [&] { non_null(rank, "rank") = comm_of(comm).rank(); });
}

int tnt_comm_size(const tnt_comm* comm, int* size) {
  return guarded("tnt_comm_size", [&] { non_null(size, "size") = comm_of(comm).size(); });
}

int tnt_comm_dup(const tnt_comm* comm, tnt_comm** newcomm) {
  return guarded("tnt_comm_dup", [&] {
    non_null(newcomm, "newcomm");
    *newcomm = new tnt_comm{comm_of(comm).dup()};
  });
}

int tnt_comm_split(const tnt_comm* comm, int color, int key, tnt_comm** newcomm) {
  return guarded("tnt_comm_split", [&] {
    non_null(newcomm, "newcomm");
    std::optional<tnt::Communicator> part = comm_of(comm).split(color, key);
    *newcomm = part ? new tnt_comm{std::move(*part)} : nullptr;
  });
}

// ---- Point-to-point ----------------------------------------------------------------------------

int tnt_send(tnt_comm* comm, const void* data, size_t bytes, int peer, int tag) {
  return guarded("tnt_send", [&] { comm_of(comm).send(data, bytes, peer, tag); });
}

int tnt_ssend(tnt_comm* comm, const void* data, size_t bytes, int peer, int tag) {
  return guarded("tnt_ssend", [&] { comm_of(comm).send(data, bytes, peer, tag, tnt::SendMode::synchronous); });
}

int tnt_recv(tnt_comm* comm, void* data, size_t capacity, int peer, int tag, tnt_message_status* status) {
  return guarded("tnt_recv", [&] { set_status(status, comm_of(comm).recv(data, capacity, peer, tag)); });
}

int tnt_isend(tnt_comm* comm, const void* data, size_t bytes, int peer, int tag, tnt_request** request) {
  return guarded("tnt_isend", [&] {
    non_null(request, "request");
    hand_out(comm_of(comm).isend(data, bytes, peer, tag), request);
  });
}

int tnt_issend(tnt_comm* comm, const void* data, size_t bytes, int peer, int tag, tnt_request** request) {
  return guarded("tnt_issend", [&] {
    non_null(request, "request");
    hand_out(comm_of(comm).isend(data, bytes, peer, tag, tnt::SendMode::synchronous), request);
  });
}

int tnt_irecv(tnt_comm* comm, void* data, size_t capacity, int peer, int tag, tnt_request** request) {
  return guarded("tnt_irecv", [&] {
    non_null(request, "request");
    hand_out(comm_of(comm).irecv(data, capacity, peer, tag), request);
  });
}

int tnt_sendrecv(tnt_comm* comm, const void* send_data, size_t send_bytes, int dest, int send_tag, void* recv_data,
                 size_t capacity, int source, int recv_tag, tnt_message_status* status) {
  return guarded("tnt_sendrecv", [&] {
    set_status(status,
               comm_of(comm).sendrecv(send_data, send_bytes, dest, send_tag, recv_data, capacity, source, recv_tag));
  });
}

int tnt_probe(tnt_comm* comm, int peer, int tag, tnt_message_status* status) {
  return guarded("tnt_probe", [&] { set_status(status, comm_of(comm).probe(peer, tag)); });
}

int tnt_iprobe(tnt_comm* comm, int peer, int tag, int* found, tnt_message_status* status) {
  return guarded("tnt_iprobe", [&] {
    non_null(found, "found");
    const std::optional<tnt::MessageStatus> next = comm_of(comm).iprobe(peer, tag);
    *found = next.has_value() ? 1 : 0;
    if (next) set_status(status, *next);
  });
}

// ---- Requests ----------------------------------------------------------------------------------

int tnt_wait(tnt_request* request, tnt_message_status* status) {
  return guarded("tnt_wait", [&] {
    const tnt::Request& r = non_null(request, "request").request;
    r.wait();
    set_status(status, r.status());
  });
}

int tnt_test(tnt_request* request, int* done, tnt_message_status* status) {
  return guarded("tnt_test", [&] {
    const tnt::Request& r = non_null(request, "request").request;
    non_null(done, "done") = 0;
    if (!r.test()) return;
    r.wait();  // finished: returns at once, or reports its failure
    *done = 1;
    set_status(status, r.status());
  });
}

int tnt_request_status(const tnt_request* request, tnt_message_status* status) {
  return guarded("tnt_request_status", [&] {
    non_null(status, "status");
    set_status(status, non_null(request, "request").request.status());
  });
}

int tnt_waitall(size_t count, tnt_request* const* requests) {
  return guarded("tnt_waitall",
                 [&] { with_requests(count, requests, [](auto all) { return tnt::Request::wait_all(all); }); });
}

int tnt_waitany(size_t count, tnt_request* const* requests, size_t* index) {
  return guarded("tnt_waitany", [&] {
    non_null(index, "index") = count;
    *index = with_requests(count, requests, [](auto all) { return tnt::Request::wait_any(all); });
  });
}

int tnt_testany(size_t count, tnt_request* const* requests, int* found, size_t* index) {
  return guarded("tnt_testany", [&] {
    non_null(found, "found") = 0;
    non_null(index, "index") = count;
    const std::optional<std::size_t> finished =
        with_requests(count, requests, [](auto all) { return tnt::Request::test_any(all); });
    if (finished) {
      *found = 1;
      *index = *finished;
    }
  });
}

int tnt_testall(size_t count, tnt_request* const* requests, int* done) {
  return guarded("tnt_testall", [&] {
    non_null(done, "done") = 0;
    with_requests(count, requests, [&](std::span<const tnt::Request* const> all) {
      if (!tnt::Request::test_all(all)) return;
      tnt::Request::wait_all(all);  // all finished: reports the first failure, if any
      *done = 1;
    });
  });
}

int tnt_request_free(tnt_request* request) {
  return guarded("tnt_request_free", [&] {
    if (request == nullptr) return;
    if (handles_gone)
      delete request;
    else
      spare_handles.give_back(request);
  });
}

// ---- Collectives -------------------------------------------------------------------------------

int tnt_barrier(tnt_comm* comm) {
  return guarded("tnt_barrier", [&] { comm_of(comm).barrier(); });
}
int tnt_ibarrier(tnt_comm* comm, tnt_request** request) {
  return guarded("tnt_ibarrier", [&] {
    non_null(request, "request");
    hand_out(comm_of(comm).barrier_async(), request);
  });
}

int tnt_allreduce(tnt_comm* comm, void* data, size_t count, tnt_datatype type, tnt_op op) {
  return guarded("tnt_allreduce", [&] { comm_of(comm).allreduce(data, count, type_of(type), op_of(op)); });
}
int tnt_iallreduce(tnt_comm* comm, void* data, size_t count, tnt_datatype type, tnt_op op, tnt_request** request) {
  return guarded("tnt_iallreduce", [&] {
    non_null(request, "request");
    hand_out(comm_of(comm).allreduce_async(data, count, type_of(type), op_of(op)), request);
  });
}

int tnt_broadcast(tnt_comm* comm, void* data, size_t bytes, int root) {
  return guarded("tnt_broadcast", [&] { comm_of(comm).broadcast(data, bytes, root); });
}
int tnt_ibroadcast(tnt_comm* comm, void* data, size_t bytes, int root, tnt_request** request) {
  return guarded("tnt_ibroadcast", [&] {
    non_null(request, "request");
    hand_out(comm_of(comm).broadcast_async(data, bytes, root), request);
  });
}

int tnt_allgather(tnt_comm* comm, const void* send, void* recv, size_t bytes_per_rank) {
  return guarded("tnt_allgather", [&] { comm_of(comm).allgather(send, recv, bytes_per_rank); });
}
int tnt_iallgather(tnt_comm* comm, const void* send, void* recv, size_t bytes_per_rank, tnt_request** request) {
  return guarded("tnt_iallgather", [&] {
    non_null(request, "request");
    hand_out(comm_of(comm).allgather_async(send, recv, bytes_per_rank), request);
  });
}

int tnt_reduce_scatter_block(tnt_comm* comm, void* data, size_t count, tnt_datatype type, tnt_op op) {
  return guarded("tnt_reduce_scatter_block",
                 [&] { comm_of(comm).reduce_scatter(data, count, type_of(type), op_of(op)); });
}
int tnt_ireduce_scatter_block(tnt_comm* comm, void* data, size_t count, tnt_datatype type, tnt_op op,
                              tnt_request** request) {
  return guarded("tnt_ireduce_scatter_block", [&] {
    non_null(request, "request");
    hand_out(comm_of(comm).reduce_scatter_async(data, count, type_of(type), op_of(op)), request);
  });
}

int tnt_block(size_t count, int size, int r, size_t* offset, size_t* block_count) {
  return guarded("tnt_block", [&] {
    if (size < 1 || r < 0 || r >= size) {
      throw UsageError("rank " + std::to_string(r) + " of size " + std::to_string(size) + " is not a rank");
    }
    const tnt::Communicator::Block block = tnt::Communicator::block(count, size, r);
    non_null(offset, "offset") = block.offset;
    non_null(block_count, "block_count") = block.count;
  });
}

int tnt_reduce_scatter(tnt_comm* comm, const void* send, void* recv, const size_t* counts, tnt_datatype type,
                       tnt_op op) {
  return guarded("tnt_reduce_scatter", [&] {
    tnt::Communicator& c = comm_of(comm);
    c.reduce_scatter(send, recv, per_rank(counts, c), type_of(type), op_of(op));
  });
}
int tnt_ireduce_scatter(tnt_comm* comm, const void* send, void* recv, const size_t* counts, tnt_datatype type,
                        tnt_op op, tnt_request** request) {
  return guarded("tnt_ireduce_scatter", [&] {
    non_null(request, "request");
    tnt::Communicator& c = comm_of(comm);
    hand_out(c.reduce_scatter_async(send, recv, per_rank(counts, c), type_of(type), op_of(op)), request);
  });
}

int tnt_alltoall(tnt_comm* comm, const void* send, void* recv, size_t bytes_per_rank) {
  return guarded("tnt_alltoall", [&] { comm_of(comm).alltoall(send, recv, bytes_per_rank); });
}
int tnt_ialltoall(tnt_comm* comm, const void* send, void* recv, size_t bytes_per_rank, tnt_request** request) {
  return guarded("tnt_ialltoall", [&] {
    non_null(request, "request");
    hand_out(comm_of(comm).alltoall_async(send, recv, bytes_per_rank), request);
  });
}

int tnt_alltoallv(tnt_comm* comm, const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                  const size_t* recv_bytes, const size_t* recv_offsets) {
  return guarded("tnt_alltoallv", [&] {
    tnt::Communicator& c = comm_of(comm);
    c.alltoallv(send, per_rank(send_bytes, c), per_rank(send_offsets, c), recv, per_rank(recv_bytes, c),
                per_rank(recv_offsets, c));
  });
}
int tnt_ialltoallv(tnt_comm* comm, const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                   const size_t* recv_bytes, const size_t* recv_offsets, tnt_request** request) {
  return guarded("tnt_ialltoallv", [&] {
    non_null(request, "request");
    tnt::Communicator& c = comm_of(comm);
    hand_out(c.alltoallv_async(send, per_rank(send_bytes, c), per_rank(send_offsets, c), recv, per_rank(recv_bytes, c),
                               per_rank(recv_offsets, c)),
             request);
  });
}

int tnt_allgatherv(tnt_comm* comm, const void* send, size_t send_bytes, void* recv, const size_t* recv_bytes,
                   const size_t* recv_offsets) {
  return guarded("tnt_allgatherv", [&] {
    tnt::Communicator& c = comm_of(comm);
    c.allgatherv(send, send_bytes, recv, per_rank(recv_bytes, c), per_rank(recv_offsets, c));
  });
}
int tnt_iallgatherv(tnt_comm* comm, const void* send, size_t send_bytes, void* recv, const size_t* recv_bytes,
                    const size_t* recv_offsets, tnt_request** request) {
  return guarded("tnt_iallgatherv", [&] {
    non_null(request, "request");
    tnt::Communicator& c = comm_of(comm);
    hand_out(c.allgatherv_async(send, send_bytes, recv, per_rank(recv_bytes, c), per_rank(recv_offsets, c)), request);
  });
}

int tnt_gather(tnt_comm* comm, const void* send, void* recv, size_t bytes_per_rank, int root) {
  return guarded("tnt_gather", [&] { comm_of(comm).gather(send, recv, bytes_per_rank, root); });
}
int tnt_igather(tnt_comm* comm, const void* send, void* recv, size_t bytes_per_rank, int root, tnt_request** request) {
  return guarded("tnt_igather", [&] {
    non_null(request, "request");
    hand_out(comm_of(comm).gather_async(send, recv, bytes_per_rank, root), request);
  });
}

int tnt_gatherv(tnt_comm* comm, const void* send, size_t send_bytes, void* recv, const size_t* recv_bytes,
                const size_t* recv_offsets, int root) {
  return guarded("tnt_gatherv", [&] {
    tnt::Communicator& c = comm_of(comm);
    c.gatherv(send, send_bytes, recv, per_rank(recv_bytes, c), per_rank(recv_offsets, c), root);
  });
}
int tnt_igatherv(tnt_comm* comm, const void* send, size_t send_bytes, void* recv, const size_t* recv_bytes,
                 const size_t* recv_offsets, int root, tnt_request** request) {
  return guarded("tnt_igatherv", [&] {
    non_null(request, "request");
    tnt::Communicator& c = comm_of(comm);
    hand_out(c.gatherv_async(send, send_bytes, recv, per_rank(recv_bytes, c), per_rank(recv_offsets, c), root),
             request);
  });
}

int tnt_scatter(tnt_comm* comm, const void* send, void* recv, size_t bytes_per_rank, int root) {
  return guarded("tnt_scatter", [&] { comm_of(comm).scatter(send, recv, bytes_per_rank, root); });
}
int tnt_iscatter(tnt_comm* comm, const void* send, void* recv, size_t bytes_per_rank, int root, tnt_request** request) {
  return guarded("tnt_iscatter", [&] {
    non_null(request, "request");
    hand_out(comm_of(comm).scatter_async(send, recv, bytes_per_rank, root), request);
  });
}

int tnt_scatterv(tnt_comm* comm, const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                 size_t recv_bytes, int root) {
  return guarded("tnt_scatterv", [&] {
    tnt::Communicator& c = comm_of(comm);
    c.scatterv(send, per_rank(send_bytes, c), per_rank(send_offsets, c), recv, recv_bytes, root);
  });
}
int tnt_iscatterv(tnt_comm* comm, const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                  size_t recv_bytes, int root, tnt_request** request) {
  return guarded("tnt_iscatterv", [&] {
    non_null(request, "request");
    tnt::Communicator& c = comm_of(comm);
    hand_out(c.scatterv_async(send, per_rank(send_bytes, c), per_rank(send_offsets, c), recv, recv_bytes, root),
             request);
  });
}

int tnt_reduce(tnt_comm* comm, const void* send, void* recv, size_t count, tnt_datatype type, tnt_op op, int root) {
  return guarded("tnt_reduce", [&] { comm_of(comm).reduce(send, recv, count, type_of(type), op_of(op), root); });
}
int tnt_ireduce(tnt_comm* comm, const void* send, void* recv, size_t count, tnt_datatype type, tnt_op op, int root,
                tnt_request** request) {
  return guarded("tnt_ireduce", [&] {
    non_null(request, "request");
    hand_out(comm_of(comm).reduce_async(send, recv, count, type_of(type), op_of(op), root), request);
  });
}

int tnt_scan(tnt_comm* comm, const void* send, void* recv, size_t count, tnt_datatype type, tnt_op op) {
  return guarded("tnt_scan", [&] { comm_of(comm).scan(send, recv, count, type_of(type), op_of(op)); });
}
int tnt_iscan(tnt_comm* comm, const void* send, void* recv, size_t count, tnt_datatype type, tnt_op op,
              tnt_request** request) {
  return guarded("tnt_iscan", [&] {
    non_null(request, "request");
    hand_out(comm_of(comm).scan_async(send, recv, count, type_of(type), op_of(op)), request);
  });
}

int tnt_exscan(tnt_comm* comm, const void* send, void* recv, size_t count, tnt_datatype type, tnt_op op) {
  return guarded("tnt_exscan", [&] { comm_of(comm).exscan(send, recv, count, type_of(type), op_of(op)); });
}
int tnt_iexscan(tnt_comm* comm, const void* send, void* recv, size_t count, tnt_datatype type, tnt_op op,
                tnt_request** request) {
  return guarded("tnt_iexscan", [&] {
    non_null(request, "request");
    hand_out(comm_of(comm).exscan_async(send, recv, count, type_of(type), op_of(op)), request);
  });
}

}  // extern "C"
