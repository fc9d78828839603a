#pragma once
// The MPI layer's state behind the C functions of mpi.h: the handle tables (communicators,
// datatypes, ops, requests) and the translation of failures into MPI error codes. Every C function
// runs its body through call(), so that no C++ exception crosses the C boundary.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tnt/collectives/communicator.h"
#include "tnt/collectives/types.h"
#include "tnt/mpi/mpi.h"

namespace tnt::mpi {

// A failure of one call, thrown inside the layer and turned into an error code (or the end of the
// job) at the C boundary. `message` says what is wrong; call() puts the function's name before it.
struct CallError {
  int error_class;
  std::string message;
};

struct TypeInfo {
  MPI_Datatype handle;
  const char* name;
  std::size_t size;
  // The Communicator's element type for reductions; none where MPI reduces no such type.
  std::optional<DataType> reduce_as;
  bool bitwise_only;  // MPI_BYTE: MPI_BAND and MPI_BOR only
};

struct OpInfo {
  MPI_Op handle;
  const char* name;
  std::optional<ReduceOp> reduce_as;  // none where the Communicator has no such reduction yet
};

struct CommEntry {
  std::shared_ptr<Communicator> comm;  // null once freed
  MPI_Errhandler errhandler = MPI_ERRORS_ARE_FATAL;
  std::vector<int> world_ranks;  // its ranks' ranks in MPI_COMM_WORLD, in its rank order
};

// A nonblocking call in flight. `finish` runs once the Communicator's request has completed
// (e.g. copies this rank's block out of `scratch`).
struct PendingRequest {
  Request request;  // invalid for a request that is complete from the start (MPI_PROC_NULL)
  MPI_Comm comm = MPI_COMM_NULL;
  std::shared_ptr<Communicator> owner;  // keeps a freed communicator until its requests end
  std::vector<std::byte> scratch;
  std::function<void()> finish;
  // Point-to-point: MPI_Wait's status comes from the Communicator's MessageStatus.
  bool point_to_point = false;
  bool receive = false;
  std::optional<MPI_Status> preset;  // the status of a request complete from the start
};

// Waits for a receive's request and gives its status; a receive that failed alone (a message
// larger than the receive) becomes MPI_ERR_TRUNCATE, with `status` filled in first.
void wait_receive(const Request& request, MPI_Status* status);
// Fills `status` for a receive whose message did not fit, and throws MPI_ERR_TRUNCATE with `what`.
[[noreturn]] void fail_truncated(MPI_Status* status, const MessageStatus& message, const char* what);
void set_status(MPI_Status* status, const MessageStatus& message);
// MPI_PROC_NULL's status: source MPI_PROC_NULL, tag MPI_ANY_TAG, count 0.
void set_proc_null(MPI_Status* status);

// The error code for the exception being handled in `function` on `comm`, after the handler of
// `comm` (of MPI_COMM_WORLD where `comm` is not a valid handle) has seen it: under
// MPI_ERRORS_ARE_FATAL this ends the job and does not return.
int fail_current(const char* function, MPI_Comm comm) noexcept;
// Throws a CallError unless MPI is initialised and not yet finalised.
void check_active();

// Runs `body` as the MPI function `function` on `comm` (MPI_COMM_NULL where the call has none):
// MPI_SUCCESS, or what fail_current() makes of its exception.
template <class Body>
int call(const char* function, MPI_Comm comm, Body&& body) noexcept {
  try {
    check_active();
    body();
    return MPI_SUCCESS;
  } catch (...) {
    return fail_current(function, comm);
  }
}
// As call(), for the functions MPI allows before MPI_Init and after MPI_Finalize.
template <class Body>
int call_any_time(const char* function, Body&& body) noexcept {
  try {
    body();
    return MPI_SUCCESS;
  } catch (...) {
    return fail_current(function, MPI_COMM_NULL);
  }
}

CommEntry& comm_entry(MPI_Comm comm, const char* argument = "comm");
// A new communicator handle (never one a freed communicator had).
MPI_Comm add_comm(std::shared_ptr<Communicator> comm, MPI_Errhandler errhandler, std::vector<int> world_ranks);
void free_comm(MPI_Comm comm);
Communicator& communicator(MPI_Comm comm, const char* argument = "comm");
const TypeInfo& datatype(MPI_Datatype type, const char* argument = "datatype");
const OpInfo& op_info(MPI_Op op, const char* argument = "op");
// The Communicator's (type, op) for a reduction, or a CallError saying which is not supported.
// What the Communicator reduces an MPI type and op as.
struct Reduction {
  DataType type;
  ReduceOp op;
};
Reduction reduction(const TypeInfo& type, const OpInfo& op);

// Checks on arguments, each throwing a CallError that names the argument.
std::size_t count_bytes(int count, const TypeInfo& type, const char* argument = "count");
void check_buffer(const void* buffer, std::size_t bytes, const char* argument);
void check_root(int root, int size);

// Nonblocking calls.
MPI_Request add_request(std::unique_ptr<PendingRequest> pending);
// Waits for (or, with `block` false, tests) *request; once it has completed, fills `status`
// (which may be MPI_STATUS_IGNORE), frees the request and sets *request to MPI_REQUEST_NULL.
// Returns whether it has completed. MPI_REQUEST_NULL completes at once with an empty status.
bool complete(MPI_Request* request, MPI_Status* status, bool block);
// Whether the request has finished (always for MPI_REQUEST_NULL); never blocks.
bool finished(MPI_Request request, const char* argument = "request");
// The Communicator's request behind a handle (an empty one for MPI_REQUEST_NULL and for a
// request complete from the start).
Request tnt_request(MPI_Request request, const char* argument = "requests");
// Drops the handle; the operation goes on and its buffers live until it ends.
void free_request(MPI_Request* request);

// Start and end.
bool initialized();
bool finalized();
int initialize(int required_thread_level);
void finalize();
[[noreturn]] void abort_job(MPI_Comm comm, int errorcode);
std::string error_string(int code);
int error_class_of(int code);
void set_empty(MPI_Status* status);

}  // namespace tnt::mpi
