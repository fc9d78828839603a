// MPI's point-to-point calls on the Communicator's: the same matching rules (any source, any tag,
// non-overtaking), with MPI_PROC_NULL, MPI's statuses and error classes added here.
#include <spdlog/fmt/fmt.h>

#include "layer.h"

using namespace tnt::mpi;
using tnt::Communicator;

static_assert(MPI_ANY_SOURCE == tnt::any_source && MPI_ANY_TAG == tnt::any_tag,
              "MPI's wildcards are the Communicator's");

namespace {

// MPI_ERR_RANK or MPI_ERR_TAG naming the argument, before the Communicator would refuse it.
void check_peer(int peer, int size, const char* argument, bool receive) {
  if (peer == MPI_PROC_NULL || (receive && peer == MPI_ANY_SOURCE)) return;
  if (peer < 0 || peer >= size) {
    throw CallError{MPI_ERR_RANK, fmt::format("argument {}: {} is not a rank of the communicator (size {}){}", argument,
                                              peer, size, receive ? "" : "; MPI_ANY_SOURCE is for receives only")};
  }
}

void check_tag(int tag, const char* argument, bool receive) {
  if (receive && tag == MPI_ANY_TAG) return;
  if (tag < 0) {
    throw CallError{MPI_ERR_TAG, fmt::format("argument {}: {} is negative{}", argument, tag,
                                             receive ? "" : " (MPI_ANY_TAG is for receives only)")};
  }
}

struct Message {
  Communicator* comm;
  std::size_t bytes;
};

Message send_arguments(const void* buffer, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  auto& c = communicator(comm);
  const std::size_t bytes = count_bytes(count, datatype(type));
  check_buffer(buffer, bytes, "buf");
  check_peer(dest, c.size(), "dest", false);
  check_tag(tag, "tag", false);
  return {&c, bytes};
}

Message receive_arguments(const void* buffer, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm) {
  auto& c = communicator(comm);
  const std::size_t bytes = count_bytes(count, datatype(type));
  check_buffer(buffer, bytes, "buf");
  check_peer(source, c.size(), "source", true);
  check_tag(tag, "tag", true);
  return {&c, bytes};
}

MPI_Request complete_from_start(MPI_Comm comm, bool receive) {
  auto pending = std::make_unique<PendingRequest>();
  pending->comm = comm;
  pending->point_to_point = true;
  pending->receive = receive;
  MPI_Status status{};
  if (receive) {
    set_proc_null(&status);
  } else {
    set_empty(&status);
  }
  pending->preset = status;
  return add_request(std::move(pending));
}

MPI_Request add_point_to_point(tnt::Request request, MPI_Comm comm, bool receive) {
  auto pending = std::make_unique<PendingRequest>();
  pending->request = std::move(request);
  pending->comm = comm;
  pending->point_to_point = true;
  pending->receive = receive;
  return add_request(std::move(pending));
}

int send(const char* function, const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
         tnt::SendMode mode) {
  return call(function, comm, [&] {
    const auto message = send_arguments(buf, count, type, dest, tag, comm);
    if (dest == MPI_PROC_NULL) return;
    message.comm->send(buf, message.bytes, dest, tag, mode);
  });
}

}  // namespace

extern "C" {

int MPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  return send("MPI_Send", buf, count, type, dest, tag, comm, tnt::SendMode::standard);
}

int MPI_Ssend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  return send("MPI_Ssend", buf, count, type, dest, tag, comm, tnt::SendMode::synchronous);
}

int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status* status) {
  return call("MPI_Recv", comm, [&] {
    const auto message = receive_arguments(buf, count, type, source, tag, comm);
    if (source == MPI_PROC_NULL) {
      set_proc_null(status);
      return;
    }
    // A blocking receive, not irecv and a wait: Note [Fast lane] in collectives/src/point_to_point.cpp.
    try {
      set_status(status, message.comm->recv(buf, message.bytes, source, tag));
    } catch (const tnt::ReceiveTruncated& e) {
      fail_truncated(status, e.status(), e.what());
    }
  });
}

int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request* request) {
  return call("MPI_Isend", comm, [&] {
    const auto message = send_arguments(buf, count, type, dest, tag, comm);
    if (!request) throw CallError{MPI_ERR_ARG, "argument request is a null pointer"};
    *request = dest == MPI_PROC_NULL
                   ? complete_from_start(comm, false)
                   : add_point_to_point(message.comm->isend(buf, message.bytes, dest, tag), comm, false);
  });
}

int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request* request) {
  return call("MPI_Irecv", comm, [&] {
    const auto message = receive_arguments(buf, count, type, source, tag, comm);
    if (!request) throw CallError{MPI_ERR_ARG, "argument request is a null pointer"};
    *request = source == MPI_PROC_NULL
                   ? complete_from_start(comm, true)
                   : add_point_to_point(message.comm->irecv(buf, message.bytes, source, tag), comm, true);
  });
}

int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  return call("MPI_Sendrecv", comm, [&] {
    auto& c = communicator(comm);
    const std::size_t send_bytes = count_bytes(sendcount, datatype(sendtype, "sendtype"), "sendcount");
    const std::size_t capacity = count_bytes(recvcount, datatype(recvtype, "recvtype"), "recvcount");
    check_buffer(sendbuf, send_bytes, "sendbuf");
    check_buffer(recvbuf, capacity, "recvbuf");
    check_peer(dest, c.size(), "dest", false);
    check_tag(sendtag, "sendtag", false);
    check_peer(source, c.size(), "source", true);
    check_tag(recvtag, "recvtag", true);
    // Both halves at once, so that two ranks exchange without deadlock; a half with
    // MPI_PROC_NULL is no operation.
    tnt::Request receive, send;
    if (source != MPI_PROC_NULL) receive = c.irecv(recvbuf, capacity, source, recvtag);
    if (dest != MPI_PROC_NULL) send = c.isend(sendbuf, send_bytes, dest, sendtag);
    if (send.valid()) send.wait();
    if (receive.valid()) {
      wait_receive(receive, status);
    } else {
      set_proc_null(status);
    }
  });
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  return call("MPI_Probe", comm, [&] {
    auto& c = communicator(comm);
    check_peer(source, c.size(), "source", true);
    check_tag(tag, "tag", true);
    if (source == MPI_PROC_NULL) {
      set_proc_null(status);
      return;
    }
    set_status(status, c.probe(source, tag));
  });
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  return call("MPI_Iprobe", comm, [&] {
    auto& c = communicator(comm);
    check_peer(source, c.size(), "source", true);
    check_tag(tag, "tag", true);
    if (!flag) throw CallError{MPI_ERR_ARG, "argument flag is a null pointer"};
    if (source == MPI_PROC_NULL) {
      *flag = 1;
      set_proc_null(status);
      return;
    }
    const auto found = c.iprobe(source, tag);
    *flag = found ? 1 : 0;
    if (found) set_status(status, *found);
  });
}

}  // extern "C"
