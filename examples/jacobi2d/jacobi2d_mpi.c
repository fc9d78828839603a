/* jacobi2d's OpenMPI twin: jacobi2d_tnt.c call for call, on MPI (MPI_Isend/MPI_Irecv halos,
 * MPI_Allreduce of the residual, MPI_Gatherv of the field), with the same numerics (jacobi2d.h).
 *   mpirun -n 4 jacobi2d-mpi 512 2 2 500 [field.bin] */
#include <mpi.h>

#include "jacobi2d.h"

int main(int argc, char** argv) {
  int rank, size, n, px, py, iterations;
  const char* dump;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (jacobi_parse(argc, argv, size, &n, &px, &py, &iterations, &dump) != 0) {
    MPI_Finalize();
    return 2;
  }
  block b;
  jacobi_setup(&b, n, px, py, rank);

  MPI_Request requests[8];
  double residual = 0.0;
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int it = 0; it < iterations; ++it) {
    jacobi_pack(&b);
    int pending = 0;
    for (int side = 0; side < 4; ++side) {
      const int peer = jacobi_neighbour(&b, side);
      if (peer < 0) continue;
      const int count = jacobi_edge_length(&b, side);
      MPI_Irecv(b.unpack[side], count, MPI_DOUBLE, peer, side ^ 1, MPI_COMM_WORLD, &requests[pending++]);
      MPI_Isend(b.pack[side], count, MPI_DOUBLE, peer, side, MPI_COMM_WORLD, &requests[pending++]);
    }
    MPI_Waitall(pending, requests, MPI_STATUSES_IGNORE);
    jacobi_unpack(&b);
    residual = jacobi_sweep(&b);
    MPI_Allreduce(MPI_IN_PLACE, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const double seconds = MPI_Wtime() - start;

  int* counts = malloc((size_t)size * sizeof(int));
  int* offsets = malloc((size_t)size * sizeof(int));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    int first, nx, ny;
    jacobi_part(n, px, r % px, &first, &nx);
    jacobi_part(n, py, r / px, &first, &ny);
    counts[r] = nx * ny;
    offsets[r] = total;
    total += counts[r];
  }
  double* mine = malloc((size_t)b.nx * (size_t)b.ny * sizeof(double));
  double* gathered = rank == 0 ? malloc((size_t)total * sizeof(double)) : NULL;
  jacobi_interior(&b, mine);
  MPI_Gatherv(mine, counts[rank], MPI_DOUBLE, gathered, counts, offsets, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  int status = 0;
  if (rank == 0) {
    double* field = malloc((size_t)n * (size_t)n * sizeof(double));
    jacobi_assemble(n, px, py, gathered, field);
    status = jacobi_report("mpi", n, iterations, size, residual, seconds, field, dump);
    free(field);
  }
  free(mine);
  free(gathered);
  free(counts);
  free(offsets);
  jacobi_free(&b);
  MPI_Finalize();
  return status;
}
