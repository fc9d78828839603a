// The C functions of mpi.h: each checks its arguments, names what it cannot take, and hands the
// work to tnt::Communicator (layer.h has the handle tables and the error machinery).
#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

#include "layer.h"

using namespace tnt::mpi;
using tnt::Communicator;

namespace {

void check_out(const void* pointer, const char* argument) {
  if (!pointer) throw CallError{MPI_ERR_ARG, fmt::format("argument {} is a null pointer", argument)};
}

// The bytes of one rank's block in the collectives that take a (count, datatype) on both sides:
// this layer moves bytes, so both sides must describe the same number of them.
std::size_t matching_bytes(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int recvcount,
                           MPI_Datatype recvtype) {
  const std::size_t recv_bytes = count_bytes(recvcount, datatype(recvtype, "recvtype"), "recvcount");
  if (sendbuf == MPI_IN_PLACE) return recv_bytes;
  const std::size_t send_bytes = count_bytes(sendcount, datatype(sendtype, "sendtype"), "sendcount");
  if (send_bytes != recv_bytes) {
    throw CallError{MPI_ERR_TRUNCATE, fmt::format("arguments sendcount/sendtype describe {} bytes and "
                                                  "recvcount/recvtype {}: they must describe the same data",
                                                  send_bytes, recv_bytes)};
  }
  return recv_bytes;
}

// Copies the input of a reduction into the buffer the Communicator reduces in place.
void copy_input(const void* sendbuf, void* buffer, std::size_t bytes) {
  if (sendbuf != MPI_IN_PLACE && sendbuf != buffer && bytes) std::memmove(buffer, sendbuf, bytes);
}

MPI_Request* checked_request_out(MPI_Request* request) {
  check_out(request, "request");
  return request;
}

}  // namespace

extern "C" {

// ---- Start and end ----

int MPI_Init(int* /*argc*/, char*** /*argv*/) {
  return call_any_time("MPI_Init", [] { initialize(MPI_THREAD_SINGLE); });
}

int MPI_Init_thread(int* /*argc*/, char*** /*argv*/, int required, int* provided) {
  return call_any_time("MPI_Init_thread", [&] {
    check_out(provided, "provided");
    if (required < MPI_THREAD_SINGLE || required > MPI_THREAD_MULTIPLE) {
      throw CallError{MPI_ERR_ARG, fmt::format("argument required: {} is not a thread level", required)};
    }
    *provided = initialize(required);
  });
}

int MPI_Initialized(int* flag) {
  return call_any_time("MPI_Initialized", [&] {
    check_out(flag, "flag");
    *flag = initialized() ? 1 : 0;
  });
}

int MPI_Finalized(int* flag) {
  return call_any_time("MPI_Finalized", [&] {
    check_out(flag, "flag");
    *flag = finalized() ? 1 : 0;
  });
}

int MPI_Finalize(void) {
  return call("MPI_Finalize", MPI_COMM_WORLD, [] { finalize(); });
}

int MPI_Abort(MPI_Comm comm, int errorcode) { abort_job(comm, errorcode); }

double MPI_Wtime(void) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double MPI_Wtick(void) {
  return static_cast<double>(std::chrono::steady_clock::period::num) / std::chrono::steady_clock::period::den;
}

int MPI_Get_processor_name(char* name, int* resultlen) {
  return call_any_time("MPI_Get_processor_name", [&] {
    check_out(name, "name");
    check_out(resultlen, "resultlen");
    char host[MPI_MAX_PROCESSOR_NAME] = {};
    if (gethostname(host, sizeof host - 1) != 0) throw CallError{MPI_ERR_OTHER, "gethostname failed"};
    const std::size_t length = std::strlen(host);
    std::memcpy(name, host, length + 1);
    *resultlen = static_cast<int>(length);
  });
}

int MPI_Get_version(int* version, int* subversion) {
  return call_any_time("MPI_Get_version", [&] {
    check_out(version, "version");
    check_out(subversion, "subversion");
    *version = MPI_VERSION;
    *subversion = MPI_SUBVERSION;
  });
}

// ---- Communicators ----

int MPI_Comm_rank(MPI_Comm comm, int* rank) {
  return call("MPI_Comm_rank", comm, [&] {
    auto& c = communicator(comm);
    check_out(rank, "rank");
    *rank = c.rank();
  });
}

int MPI_Comm_size(MPI_Comm comm, int* size) {
  return call("MPI_Comm_size", comm, [&] {
    auto& c = communicator(comm);
    check_out(size, "size");
    *size = c.size();
  });
}

int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int* result) {
  return call("MPI_Comm_compare", comm1, [&] {
    const auto& first = comm_entry(comm1, "comm1");
    const auto& second = comm_entry(comm2, "comm2");
    check_out(result, "result");
    if (comm1 == comm2) {
      *result = MPI_IDENT;
    } else if (first.world_ranks == second.world_ranks) {
      *result = MPI_CONGRUENT;
    } else {
      auto a = first.world_ranks, b = second.world_ranks;
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      *result = a == b ? MPI_SIMILAR : MPI_UNEQUAL;
    }
  });
}

// ---- Datatypes ----

int MPI_Type_size(MPI_Datatype type, int* size) {
  return call("MPI_Type_size", MPI_COMM_NULL, [&] {
    const auto& info = datatype(type);
    check_out(size, "size");
    *size = static_cast<int>(info.size);
  });
}

int MPI_Get_count(const MPI_Status* status, MPI_Datatype type, int* count) {
  return call("MPI_Get_count", MPI_COMM_NULL, [&] {
    check_out(status, "status");
    const auto& info = datatype(type);
    check_out(count, "count");
    *count = status->tnt_bytes % info.size ? MPI_UNDEFINED : static_cast<int>(status->tnt_bytes / info.size);
  });
}

// ---- Requests ----

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  return call("MPI_Wait", MPI_COMM_NULL, [&] { complete(request, status, /*block=*/true); });
}

int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  return call("MPI_Test", MPI_COMM_NULL, [&] {
    check_out(flag, "flag");
    *flag = complete(request, status, /*block=*/false) ? 1 : 0;
  });
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  return call("MPI_Waitall", MPI_COMM_NULL, [&] {
    if (count < 0) throw CallError{MPI_ERR_COUNT, fmt::format("argument count is negative ({})", count)};
    if (count) check_out(requests, "requests");
    for (int i = 0; i < count; ++i) {
      complete(&requests[i], statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i], true);
    }
  });
}

int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  return call("MPI_Testall", MPI_COMM_NULL, [&] {
    if (count < 0) throw CallError{MPI_ERR_COUNT, fmt::format("argument count is negative ({})", count)};
    if (count) check_out(requests, "requests");
    check_out(flag, "flag");
    // MPI: either all complete in this call, or none does.
    for (int i = 0; i < count; ++i) {
      if (!finished(requests[i], "requests")) {
        *flag = 0;
        return;
      }
    }
    for (int i = 0; i < count; ++i) {
      complete(&requests[i], statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i], true);
    }
    *flag = 1;
  });
}

int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  return call("MPI_Waitany", MPI_COMM_NULL, [&] {
    if (count < 0) throw CallError{MPI_ERR_COUNT, fmt::format("argument count is negative ({})", count)};
    if (count) check_out(requests, "requests");
    check_out(index, "index");
    // Requests complete from the start (MPI_PROC_NULL) have no Communicator request to wait on.
    std::vector<tnt::Request> in_flight(static_cast<std::size_t>(count));
    bool any = false;
    for (int i = 0; i < count; ++i) {
      if (requests[i] == MPI_REQUEST_NULL) continue;
      any = true;
      if (finished(requests[i], "requests")) {
        *index = i;
        complete(&requests[i], status, true);
        return;
      }
      in_flight[static_cast<std::size_t>(i)] = tnt_request(requests[i]);
    }
    if (!any) {
      *index = MPI_UNDEFINED;
      set_empty(status);
      return;
    }
    const std::size_t done = tnt::Request::wait_any(in_flight);
    *index = static_cast<int>(done);
    complete(&requests[done], status, true);
  });
}

int MPI_Request_free(MPI_Request* request) {
  return call("MPI_Request_free", MPI_COMM_NULL, [&] { free_request(request); });
}

// ---- Collectives ----

int MPI_Barrier(MPI_Comm comm) {
  return call("MPI_Barrier", comm, [&] { communicator(comm).barrier(); });
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  return call("MPI_Ibarrier", comm, [&] {
    auto& c = communicator(comm);
    checked_request_out(request);
    auto pending = std::make_unique<PendingRequest>();
    pending->comm = comm;
    pending->request = c.barrier_async();
    *request = add_request(std::move(pending));
  });
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  return call("MPI_Bcast", comm, [&] {
    auto& c = communicator(comm);
    const std::size_t bytes = count_bytes(count, datatype(type));
    check_buffer(buffer, bytes, "buffer");
    check_root(root, c.size());
    c.broadcast(buffer, bytes, root);
  });
}

int MPI_Ibcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* request) {
  return call("MPI_Ibcast", comm, [&] {
    auto& c = communicator(comm);
    const std::size_t bytes = count_bytes(count, datatype(type));
    check_buffer(buffer, bytes, "buffer");
    check_root(root, c.size());
    checked_request_out(request);
    auto pending = std::make_unique<PendingRequest>();
    pending->comm = comm;
    pending->request = c.broadcast_async(buffer, bytes, root);
    *request = add_request(std::move(pending));
  });
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return call("MPI_Allreduce", comm, [&] {
    auto& c = communicator(comm);
    const auto& info = datatype(type);
    const Reduction reduce = reduction(info, op_info(op));
    const std::size_t bytes = count_bytes(count, info);
    if (sendbuf != MPI_IN_PLACE) check_buffer(sendbuf, bytes, "sendbuf");
    check_buffer(recvbuf, bytes, "recvbuf");
    copy_input(sendbuf, recvbuf, bytes);
    c.allreduce(recvbuf, static_cast<std::size_t>(count), reduce.type, reduce.op);
  });
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  return call("MPI_Iallreduce", comm, [&] {
    auto& c = communicator(comm);
    const auto& info = datatype(type);
    const Reduction reduce = reduction(info, op_info(op));
    const std::size_t bytes = count_bytes(count, info);
    if (sendbuf != MPI_IN_PLACE) check_buffer(sendbuf, bytes, "sendbuf");
    check_buffer(recvbuf, bytes, "recvbuf");
    checked_request_out(request);
    copy_input(sendbuf, recvbuf, bytes);
    auto pending = std::make_unique<PendingRequest>();
    pending->comm = comm;
    pending->request = c.allreduce_async(recvbuf, static_cast<std::size_t>(count), reduce.type, reduce.op);
    *request = add_request(std::move(pending));
  });
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  return call("MPI_Allgather", comm, [&] {
    auto& c = communicator(comm);
    const std::size_t bytes = matching_bytes(sendbuf, sendcount, sendtype, recvcount, recvtype);
    check_buffer(recvbuf, bytes, "recvbuf");
    // In place: this rank's block of recvbuf is its input, which the Communicator allows.
    const void* send = sendbuf == MPI_IN_PLACE
                           ? static_cast<const std::byte*>(recvbuf) + static_cast<std::size_t>(c.rank()) * bytes
                           : sendbuf;
    if (sendbuf != MPI_IN_PLACE) check_buffer(sendbuf, bytes, "sendbuf");
    c.allgather(send, recvbuf, bytes);
  });
}

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return call("MPI_Iallgather", comm, [&] {
    auto& c = communicator(comm);
    const std::size_t bytes = matching_bytes(sendbuf, sendcount, sendtype, recvcount, recvtype);
    check_buffer(recvbuf, bytes, "recvbuf");
    const void* send = sendbuf == MPI_IN_PLACE
                           ? static_cast<const std::byte*>(recvbuf) + static_cast<std::size_t>(c.rank()) * bytes
                           : sendbuf;
    if (sendbuf != MPI_IN_PLACE) check_buffer(sendbuf, bytes, "sendbuf");
    checked_request_out(request);
    auto pending = std::make_unique<PendingRequest>();
    pending->comm = comm;
    pending->request = c.allgather_async(send, recvbuf, bytes);
    *request = add_request(std::move(pending));
  });
}

// ---- Errors ----

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
  return call("MPI_Comm_set_errhandler", comm, [&] {
    auto& entry = comm_entry(comm);
    if (errhandler != MPI_ERRORS_ARE_FATAL && errhandler != MPI_ERRORS_RETURN) {
      throw CallError{MPI_ERR_ARG, fmt::format("argument errhandler: 0x{:x} is neither MPI_ERRORS_ARE_FATAL nor "
                                               "MPI_ERRORS_RETURN (user error handlers are not supported)",
                                               errhandler)};
    }
    entry.errhandler = errhandler;
  });
}

int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler* errhandler) {
  return call("MPI_Comm_get_errhandler", comm, [&] {
    const auto& entry = comm_entry(comm);
    check_out(errhandler, "errhandler");
    *errhandler = entry.errhandler;
  });
}

int MPI_Error_string(int errorcode, char* string, int* resultlen) {
  return call_any_time("MPI_Error_string", [&] {
    check_out(string, "string");
    check_out(resultlen, "resultlen");
    std::string text = error_string(errorcode);
    if (text.size() > MPI_MAX_ERROR_STRING - 1) text.resize(MPI_MAX_ERROR_STRING - 1);
    std::memcpy(string, text.c_str(), text.size() + 1);
    *resultlen = static_cast<int>(text.size());
  });
}

int MPI_Error_class(int errorcode, int* errorclass) {
  return call_any_time("MPI_Error_class", [&] {
    check_out(errorclass, "errorclass");
    *errorclass = error_class_of(errorcode);
  });
}

}  // extern "C"
