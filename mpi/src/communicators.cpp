// MPI_Comm_dup, MPI_Comm_split and MPI_Comm_free on the Communicator's dup() and split().
#include <spdlog/fmt/fmt.h>

#include "layer.h"

using namespace tnt::mpi;
using tnt::Communicator;

extern "C" {

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  return call("MPI_Comm_dup", comm, [&] {
    const auto& entry = comm_entry(comm);
    if (!newcomm) throw CallError{MPI_ERR_ARG, "argument newcomm is a null pointer"};
    // MPI: the new communicator has the same group and error handler, and a context of its own.
    auto copy = std::make_shared<Communicator>(entry.comm->dup());
    *newcomm = add_comm(std::move(copy), entry.errhandler, entry.world_ranks);
  });
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  return call("MPI_Comm_split", comm, [&] {
    const auto& entry = comm_entry(comm);
    if (!newcomm) throw CallError{MPI_ERR_ARG, "argument newcomm is a null pointer"};
    if (color < 0 && color != MPI_UNDEFINED) {
      throw CallError{MPI_ERR_ARG, fmt::format("argument color: {} is negative (and not MPI_UNDEFINED)", color)};
    }
    const MPI_Errhandler errhandler = entry.errhandler;
    auto part = entry.comm->split(color == MPI_UNDEFINED ? -1 : color, key);
    if (!part) {
      *newcomm = MPI_COMM_NULL;
      return;
    }
    auto shared = std::make_shared<Communicator>(std::move(*part));
    // Its ranks' world ranks, for MPI_Comm_compare: one allgather over the new communicator.
    const int world_rank = communicator(MPI_COMM_WORLD).rank();
    std::vector<int> world_ranks(static_cast<std::size_t>(shared->size()));
    shared->allgather(&world_rank, world_ranks.data(), sizeof(int));
    *newcomm = add_comm(std::move(shared), errhandler, std::move(world_ranks));
  });
}

int MPI_Comm_free(MPI_Comm* comm) {
  return call("MPI_Comm_free", comm ? *comm : MPI_COMM_NULL, [&] {
    if (!comm) throw CallError{MPI_ERR_ARG, "argument comm is a null pointer"};
    if (*comm == MPI_COMM_WORLD || *comm == MPI_COMM_SELF) {
      throw CallError{MPI_ERR_COMM, fmt::format("argument comm: {} cannot be freed",
                                                *comm == MPI_COMM_WORLD ? "MPI_COMM_WORLD" : "MPI_COMM_SELF")};
    }
    free_comm(*comm);
    *comm = MPI_COMM_NULL;
  });
}

}  // extern "C"
