// MPI's collectives that the Communicator runs as exchanges (Note [Exchanges] in
// collectives/src/exchange.cpp): gather(v), scatter(v), allgatherv, alltoall(v), reduce, scan,
// exscan and reduce_scatter(_block), blocking and nonblocking. MPI's counts and displacements are
// in elements of a datatype, the Communicator's in bytes. Where MPI_IN_PLACE leaves the input in
// the output buffer and the Communicator does not say that its input may alias its output, the
// input is copied aside first.
#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "layer.h"

using namespace tnt::mpi;
using tnt::Communicator;

namespace {

// Runs a collective blocking (request null: `blocking`) or nonblocking (`async`, its scratch kept
// in the request until it completes).
template <class Blocking, class Async>
void issue(MPI_Request* request, MPI_Comm comm, std::unique_ptr<PendingRequest> pending, Blocking&& blocking,
           Async&& async) {
  if (!request) {
    blocking();
    return;
  }
  pending->comm = comm;
  pending->request = async();
  *request = add_request(std::move(pending));
}

// The nonblocking forms (MPI_I...) need somewhere to put their request.
void check_request(std::string_view function, MPI_Request* request) {
  if (function.starts_with("MPI_I") && !request) throw CallError{MPI_ERR_ARG, "argument request is a null pointer"};
}

// Per-rank counts or displacements (elements of a datatype of `type_size` bytes) in bytes.
std::vector<std::size_t> in_bytes(const int values[], int size, std::size_t type_size, const char* argument,
                                  bool displacements) {
  if (!values) throw CallError{MPI_ERR_ARG, fmt::format("argument {} is a null pointer", argument)};
  std::vector<std::size_t> bytes(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    if (values[r] < 0) {
      throw CallError{displacements ? MPI_ERR_ARG : MPI_ERR_COUNT,
                      fmt::format("argument {}: {}[{}] is negative ({})", argument, argument, r, values[r])};
    }
    bytes[static_cast<std::size_t>(r)] = static_cast<std::size_t>(values[r]) * type_size;
  }
  return bytes;
}

// The bytes a layout reaches into its buffer.
std::size_t extent(const std::vector<std::size_t>& counts, const std::vector<std::size_t>& offsets) {
  std::size_t end = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    if (counts[r]) end = std::max(end, offsets[r] + counts[r]);
  }
  return end;
}

void check_same(std::size_t send_bytes, std::size_t recv_bytes, const char* what) {
  if (send_bytes != recv_bytes) {
    throw CallError{MPI_ERR_TRUNCATE, fmt::format("{}: the send side describes {} bytes and the receive side {}: they "
                                                  "must describe the same data",
                                                  what, send_bytes, recv_bytes)};
  }
}

// A copy of `bytes` bytes at `data`, kept in the request's scratch.
const void* set_aside(PendingRequest& pending, const void* data, std::size_t bytes) {
  pending.scratch.resize(bytes);
  if (bytes) std::memcpy(pending.scratch.data(), data, bytes);
  return pending.scratch.data();
}

int gather(const char* function, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
           int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return call(function, comm, [&] {
    auto& c = communicator(comm);
    check_root(root, c.size());
    check_request(function, request);
    const bool at_root = c.rank() == root;
    if (sendbuf == MPI_IN_PLACE && !at_root) {
      throw CallError{MPI_ERR_BUFFER, "argument sendbuf: MPI_IN_PLACE is for the root only"};
    }
    // The receive side is significant at the root only.
    std::size_t bytes = 0;
    if (at_root) {
      bytes = count_bytes(recvcount, datatype(recvtype, "recvtype"), "recvcount");
      check_buffer(recvbuf, bytes * static_cast<std::size_t>(c.size()), "recvbuf");
    }
    if (sendbuf != MPI_IN_PLACE) {
      const std::size_t send_bytes = count_bytes(sendcount, datatype(sendtype, "sendtype"), "sendcount");
      if (at_root) check_same(send_bytes, bytes, "sendcount/sendtype and recvcount/recvtype");
      bytes = send_bytes;
      check_buffer(sendbuf, bytes, "sendbuf");
    }
    // In place: the root's block of recvbuf is its input, which the Communicator allows.
    const void* send = sendbuf == MPI_IN_PLACE
                           ? static_cast<const std::byte*>(recvbuf) + static_cast<std::size_t>(root) * bytes
                           : sendbuf;
    issue(
        request, comm, std::make_unique<PendingRequest>(), [&] { c.gather(send, recvbuf, bytes, root); },
        [&] { return c.gather_async(send, recvbuf, bytes, root); });
  });
}

int scatter(const char* function, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
            int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return call(function, comm, [&] {
    auto& c = communicator(comm);
    check_root(root, c.size());
    check_request(function, request);
    const bool at_root = c.rank() == root;
    if (recvbuf == MPI_IN_PLACE && !at_root) {
      throw CallError{MPI_ERR_BUFFER, "argument recvbuf: MPI_IN_PLACE is for the root only"};
    }
    std::size_t bytes = 0;
    if (at_root) {
      bytes = count_bytes(sendcount, datatype(sendtype, "sendtype"), "sendcount");
      check_buffer(sendbuf, bytes * static_cast<std::size_t>(c.size()), "sendbuf");
    }
    if (recvbuf != MPI_IN_PLACE) {
      const std::size_t recv_bytes = count_bytes(recvcount, datatype(recvtype, "recvtype"), "recvcount");
      if (at_root) check_same(bytes, recv_bytes, "sendcount/sendtype and recvcount/recvtype");
      bytes = recv_bytes;
      check_buffer(recvbuf, bytes, "recvbuf");
    }
    auto pending = std::make_unique<PendingRequest>();
    // In place: the root's own block stays where it is; what the Communicator delivers to the root
    // goes to scratch.
    void* recv = recvbuf;
    if (recvbuf == MPI_IN_PLACE) {
      pending->scratch.resize(bytes);
      recv = pending->scratch.data();
    }
    issue(
        request, comm, std::move(pending), [&] { c.scatter(sendbuf, recv, bytes, root); },
        [&] { return c.scatter_async(sendbuf, recv, bytes, root); });
  });
}

int gatherv(const char* function, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
            const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm,
            MPI_Request* request) {
  return call(function, comm, [&] {
    auto& c = communicator(comm);
    check_root(root, c.size());
    check_request(function, request);
    const bool at_root = c.rank() == root;
    if (sendbuf == MPI_IN_PLACE && !at_root) {
      throw CallError{MPI_ERR_BUFFER, "argument sendbuf: MPI_IN_PLACE is for the root only"};
    }
    std::vector<std::size_t> counts, offsets;
    if (at_root) {
      const std::size_t type_size = datatype(recvtype, "recvtype").size;
      counts = in_bytes(recvcounts, c.size(), type_size, "recvcounts", false);
      offsets = in_bytes(displs, c.size(), type_size, "displs", true);
      check_buffer(recvbuf, extent(counts, offsets), "recvbuf");
    }
    auto pending = std::make_unique<PendingRequest>();
    const void* send = sendbuf;
    std::size_t send_bytes = 0;
    const auto me = static_cast<std::size_t>(root);
    if (sendbuf == MPI_IN_PLACE) {
      send_bytes = counts[me];
      send = set_aside(*pending, static_cast<const std::byte*>(recvbuf) + offsets[me], send_bytes);
    } else {
      send_bytes = count_bytes(sendcount, datatype(sendtype, "sendtype"), "sendcount");
      check_buffer(sendbuf, send_bytes, "sendbuf");
      if (at_root) check_same(send_bytes, counts[me], "sendcount/sendtype and the root's recvcounts/recvtype");
    }
    issue(
        request, comm, std::move(pending), [&] { c.gatherv(send, send_bytes, recvbuf, counts, offsets, root); },
        [&] { return c.gatherv_async(send, send_bytes, recvbuf, counts, offsets, root); });
  });
}

int scatterv(const char* function, const void* sendbuf, const int sendcounts[], const int displs[],
             MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
             MPI_Request* request) {
  return call(function, comm, [&] {
    auto& c = communicator(comm);
    check_root(root, c.size());
    check_request(function, request);
    const bool at_root = c.rank() == root;
    if (recvbuf == MPI_IN_PLACE && !at_root) {
      throw CallError{MPI_ERR_BUFFER, "argument recvbuf: MPI_IN_PLACE is for the root only"};
    }
    std::vector<std::size_t> counts, offsets;
    if (at_root) {
      const std::size_t type_size = datatype(sendtype, "sendtype").size;
      counts = in_bytes(sendcounts, c.size(), type_size, "sendcounts", false);
      offsets = in_bytes(displs, c.size(), type_size, "displs", true);
      check_buffer(sendbuf, extent(counts, offsets), "sendbuf");
    }
    auto pending = std::make_unique<PendingRequest>();
    void* recv = recvbuf;
    std::size_t recv_bytes = 0;
    if (recvbuf == MPI_IN_PLACE) {
      recv_bytes = counts[static_cast<std::size_t>(root)];
      pending->scratch.resize(recv_bytes);
      recv = pending->scratch.data();
    } else {
      recv_bytes = count_bytes(recvcount, datatype(recvtype, "recvtype"), "recvcount");
      check_buffer(recvbuf, recv_bytes, "recvbuf");
      if (at_root) {
        check_same(counts[static_cast<std::size_t>(root)], recv_bytes, "the root's sendcounts/sendtype and recvcount");
      }
    }
    issue(
        request, comm, std::move(pending), [&] { c.scatterv(sendbuf, counts, offsets, recv, recv_bytes, root); },
        [&] { return c.scatterv_async(sendbuf, counts, offsets, recv, recv_bytes, root); });
  });
}

int allgatherv(const char* function, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return call(function, comm, [&] {
    auto& c = communicator(comm);
    check_request(function, request);
    const std::size_t type_size = datatype(recvtype, "recvtype").size;
    const auto counts = in_bytes(recvcounts, c.size(), type_size, "recvcounts", false);
    const auto offsets = in_bytes(displs, c.size(), type_size, "displs", true);
    check_buffer(recvbuf, extent(counts, offsets), "recvbuf");
    const auto me = static_cast<std::size_t>(c.rank());
    auto pending = std::make_unique<PendingRequest>();
    const void* send = sendbuf;
    std::size_t send_bytes = counts[me];
    if (sendbuf == MPI_IN_PLACE) {
      send = set_aside(*pending, static_cast<const std::byte*>(recvbuf) + offsets[me], send_bytes);
    } else {
      send_bytes = count_bytes(sendcount, datatype(sendtype, "sendtype"), "sendcount");
      check_buffer(sendbuf, send_bytes, "sendbuf");
      check_same(send_bytes, counts[me], "sendcount/sendtype and this rank's recvcounts/recvtype");
    }
    issue(
        request, comm, std::move(pending), [&] { c.allgatherv(send, send_bytes, recvbuf, counts, offsets); },
        [&] { return c.allgatherv_async(send, send_bytes, recvbuf, counts, offsets); });
  });
}

int alltoall(const char* function, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
             int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return call(function, comm, [&] {
    auto& c = communicator(comm);
    check_request(function, request);
    const std::size_t bytes = count_bytes(recvcount, datatype(recvtype, "recvtype"), "recvcount");
    const std::size_t total = bytes * static_cast<std::size_t>(c.size());
    check_buffer(recvbuf, total, "recvbuf");
    auto pending = std::make_unique<PendingRequest>();
    const void* send = sendbuf;
    if (sendbuf == MPI_IN_PLACE) {
      send = set_aside(*pending, recvbuf, total);
    } else {
      check_same(count_bytes(sendcount, datatype(sendtype, "sendtype"), "sendcount"), bytes,
                 "sendcount/sendtype and recvcount/recvtype");
      check_buffer(sendbuf, total, "sendbuf");
    }
    issue(
        request, comm, std::move(pending), [&] { c.alltoall(send, recvbuf, bytes); },
        [&] { return c.alltoall_async(send, recvbuf, bytes); });
  });
}

int alltoallv(const char* function, const void* sendbuf, const int sendcounts[], const int sdispls[],
              MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
              MPI_Comm comm, MPI_Request* request) {
  return call(function, comm, [&] {
    auto& c = communicator(comm);
    check_request(function, request);
    const std::size_t recv_size = datatype(recvtype, "recvtype").size;
    const auto recv_counts = in_bytes(recvcounts, c.size(), recv_size, "recvcounts", false);
    const auto recv_offsets = in_bytes(rdispls, c.size(), recv_size, "rdispls", true);
    check_buffer(recvbuf, extent(recv_counts, recv_offsets), "recvbuf");
    auto pending = std::make_unique<PendingRequest>();
    const void* send = sendbuf;
    std::vector<std::size_t> send_counts = recv_counts, send_offsets = recv_offsets;
    if (sendbuf == MPI_IN_PLACE) {
      send = set_aside(*pending, recvbuf, extent(recv_counts, recv_offsets));
    } else {
      const std::size_t send_size = datatype(sendtype, "sendtype").size;
      send_counts = in_bytes(sendcounts, c.size(), send_size, "sendcounts", false);
      send_offsets = in_bytes(sdispls, c.size(), send_size, "sdispls", true);
      check_buffer(sendbuf, extent(send_counts, send_offsets), "sendbuf");
    }
    issue(
        request, comm, std::move(pending),
        [&] { c.alltoallv(send, send_counts, send_offsets, recvbuf, recv_counts, recv_offsets); },
        [&] { return c.alltoallv_async(send, send_counts, send_offsets, recvbuf, recv_counts, recv_offsets); });
  });
}

int reduce(const char* function, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
           MPI_Comm comm, MPI_Request* request) {
  return call(function, comm, [&] {
    auto& c = communicator(comm);
    const auto& info = datatype(type);
    const Reduction reduce = reduction(info, op_info(op));
    const std::size_t bytes = count_bytes(count, info);
    check_root(root, c.size());
    check_request(function, request);
    const bool at_root = c.rank() == root;
    if (sendbuf == MPI_IN_PLACE && !at_root) {
      throw CallError{MPI_ERR_BUFFER, "argument sendbuf: MPI_IN_PLACE is for the root only"};
    }
    if (sendbuf != MPI_IN_PLACE) check_buffer(sendbuf, bytes, "sendbuf");
    if (at_root) check_buffer(recvbuf, bytes, "recvbuf");
    // At the root, in place: the input is recvbuf, which the Communicator allows.
    const void* send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    const auto n = static_cast<std::size_t>(count);
    issue(
        request, comm, std::make_unique<PendingRequest>(),
        [&] { c.reduce(send, recvbuf, n, reduce.type, reduce.op, root); },
        [&] { return c.reduce_async(send, recvbuf, n, reduce.type, reduce.op, root); });
  });
}

int scan(const char* function, bool exclusive, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
         MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return call(function, comm, [&] {
    auto& c = communicator(comm);
    const auto& info = datatype(type);
    const Reduction reduce = reduction(info, op_info(op));
    const std::size_t bytes = count_bytes(count, info);
    check_request(function, request);
    if (sendbuf != MPI_IN_PLACE) check_buffer(sendbuf, bytes, "sendbuf");
    check_buffer(recvbuf, bytes, "recvbuf");
    const void* send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;  // the Communicator allows it
    const auto n = static_cast<std::size_t>(count);
    issue(
        request, comm, std::make_unique<PendingRequest>(),
        [&] {
          if (exclusive) {
            c.exscan(send, recvbuf, n, reduce.type, reduce.op);
          } else {
            c.scan(send, recvbuf, n, reduce.type, reduce.op);
          }
        },
        [&] {
          return exclusive ? c.exscan_async(send, recvbuf, n, reduce.type, reduce.op)
                           : c.scan_async(send, recvbuf, n, reduce.type, reduce.op);
        });
  });
}

// MPI_Reduce_scatter with `counts` elements per rank (MPI_Reduce_scatter_block: all equal).
void reduce_scatter(Communicator& c, const void* sendbuf, void* recvbuf, const std::vector<std::size_t>& counts,
                    MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  const auto& info = datatype(type);
  const Reduction reduce = reduction(info, op_info(op));
  std::size_t total = 0;
  for (const std::size_t n : counts) total += n;
  const std::size_t mine = counts[static_cast<std::size_t>(c.rank())];
  // In place: recvbuf holds the whole input, and the result goes to its start.
  check_buffer(recvbuf, (sendbuf == MPI_IN_PLACE ? total : mine) * info.size, "recvbuf");
  auto pending = std::make_unique<PendingRequest>();
  const void* send = sendbuf;
  if (sendbuf == MPI_IN_PLACE) {
    send = set_aside(*pending, recvbuf, total * info.size);
  } else {
    check_buffer(sendbuf, total * info.size, "sendbuf");
  }
  issue(
      request, comm, std::move(pending), [&] { c.reduce_scatter(send, recvbuf, counts, reduce.type, reduce.op); },
      [&] { return c.reduce_scatter_async(send, recvbuf, counts, reduce.type, reduce.op); });
}

std::vector<std::size_t> element_counts(const int recvcounts[], int size) {
  return in_bytes(recvcounts, size, 1, "recvcounts", false);
}

}  // namespace

extern "C" {

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return gather("MPI_Gather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, nullptr);
}
int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return gather("MPI_Igather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
}
int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return scatter("MPI_Scatter", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, nullptr);
}
int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return scatter("MPI_Iscatter", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
}
int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return gatherv("MPI_Gatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm,
                 nullptr);
}
int MPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                 const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return gatherv("MPI_Igatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm,
                 request);
}
int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return scatterv("MPI_Scatterv", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
                  nullptr);
}
int MPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return scatterv("MPI_Iscatterv", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
                  request);
}
int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  return allgatherv("MPI_Allgatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                    nullptr);
}
int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                    const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return allgatherv("MPI_Iallgatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                    request);
}
int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoall("MPI_Alltoall", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, nullptr);
}
int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return alltoall("MPI_Ialltoall", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}
int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                  void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoallv("MPI_Alltoallv", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                   comm, nullptr);
}
int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                   void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request* request) {
  return alltoallv("MPI_Ialltoallv", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                   comm, request);
}
int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
  return reduce("MPI_Reduce", sendbuf, recvbuf, count, type, op, root, comm, nullptr);
}
int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                MPI_Request* request) {
  return reduce("MPI_Ireduce", sendbuf, recvbuf, count, type, op, root, comm, request);
}
int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return scan("MPI_Scan", false, sendbuf, recvbuf, count, type, op, comm, nullptr);
}
int MPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
              MPI_Request* request) {
  return scan("MPI_Iscan", false, sendbuf, recvbuf, count, type, op, comm, request);
}
int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return scan("MPI_Exscan", true, sendbuf, recvbuf, count, type, op, comm, nullptr);
}
int MPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                MPI_Request* request) {
  return scan("MPI_Iexscan", true, sendbuf, recvbuf, count, type, op, comm, request);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm) {
  return call("MPI_Reduce_scatter", comm, [&] {
    auto& c = communicator(comm);
    reduce_scatter(c, sendbuf, recvbuf, element_counts(recvcounts, c.size()), type, op, comm, nullptr);
  });
}
int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype type, MPI_Op op,
                        MPI_Comm comm, MPI_Request* request) {
  return call("MPI_Ireduce_scatter", comm, [&] {
    auto& c = communicator(comm);
    check_request("MPI_I", request);
    reduce_scatter(c, sendbuf, recvbuf, element_counts(recvcounts, c.size()), type, op, comm, request);
  });
}
int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm) {
  return call("MPI_Reduce_scatter_block", comm, [&] {
    auto& c = communicator(comm);
    count_bytes(recvcount, datatype(type), "recvcount");
    const std::vector<std::size_t> counts(static_cast<std::size_t>(c.size()), static_cast<std::size_t>(recvcount));
    reduce_scatter(c, sendbuf, recvbuf, counts, type, op, comm, nullptr);
  });
}
int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
                              MPI_Comm comm, MPI_Request* request) {
  return call("MPI_Ireduce_scatter_block", comm, [&] {
    auto& c = communicator(comm);
    check_request("MPI_I", request);
    count_bytes(recvcount, datatype(type), "recvcount");
    const std::vector<std::size_t> counts(static_cast<std::size_t>(c.size()), static_cast<std::size_t>(recvcount));
    reduce_scatter(c, sendbuf, recvbuf, counts, type, op, comm, request);
  });
}

}  // extern "C"
