/* jacobi2d on tnt's C API: halos by tnt_isend/tnt_irecv, the residual by tnt_allreduce, the
 * field to rank 0 by tnt_gatherv. The numerics are in jacobi2d.h; jacobi2d_mpi.c is its twin.
 *   tnt-launch -n 4 -- jacobi2d-tnt 512 2 2 500 [field.bin] */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <time.h>

#include "jacobi2d.h"
#include "tnt/tnt.h"

static void check(int status, const char* what) {
  if (status != TNT_SUCCESS) {
    fprintf(stderr, "jacobi2d: %s failed: %s (%s)\n", what, tnt_last_error(), tnt_error_string(status));
    exit(1);
  }
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char** argv) {
  tnt_comm* world;
  int rank, size, n, px, py, iterations;
  const char* dump;
  check(tnt_init(&world), "tnt_init");
  check(tnt_comm_rank(world, &rank), "tnt_comm_rank");
  check(tnt_comm_size(world, &size), "tnt_comm_size");
  if (jacobi_parse(argc, argv, size, &n, &px, &py, &iterations, &dump) != 0) {
    tnt_comm_free(world);
    return 2;
  }
  block b;
  jacobi_setup(&b, n, px, py, rank);

  tnt_request* requests[8];
  double residual = 0.0;
  check(tnt_barrier(world), "tnt_barrier");
  const double start = now();
  for (int it = 0; it < iterations; ++it) {
    jacobi_pack(&b);
    size_t pending = 0;
    for (int side = 0; side < 4; ++side) {
      const int peer = jacobi_neighbour(&b, side);
      if (peer < 0) continue;
      const size_t bytes = (size_t)jacobi_edge_length(&b, side) * sizeof(double);
      /* A message's tag is the side it leaves from: what comes in from the west left its
       * sender's east side. */
      check(tnt_irecv(world, b.unpack[side], bytes, peer, side ^ 1, &requests[pending++]), "tnt_irecv");
      check(tnt_isend(world, b.pack[side], bytes, peer, side, &requests[pending++]), "tnt_isend");
    }
    check(tnt_waitall(pending, requests), "tnt_waitall");
    for (size_t k = 0; k < pending; ++k) tnt_request_free(requests[k]);
    jacobi_unpack(&b);
    residual = jacobi_sweep(&b);
    check(tnt_allreduce(world, &residual, 1, TNT_FLOAT64, TNT_SUM), "tnt_allreduce");
  }
  check(tnt_barrier(world), "tnt_barrier");
  const double seconds = now() - start;

  size_t* bytes = malloc((size_t)size * sizeof(size_t));
  size_t* offsets = malloc((size_t)size * sizeof(size_t));
  size_t total = 0;
  for (int r = 0; r < size; ++r) {
    int first, nx, ny;
    jacobi_part(n, px, r % px, &first, &nx);
    jacobi_part(n, py, r / px, &first, &ny);
    bytes[r] = (size_t)nx * (size_t)ny * sizeof(double);
    offsets[r] = total;
    total += bytes[r];
  }
  double* mine = malloc((size_t)b.nx * (size_t)b.ny * sizeof(double));
  double* gathered = rank == 0 ? malloc(total) : NULL;
  jacobi_interior(&b, mine);
  check(tnt_gatherv(world, mine, bytes[rank], gathered, bytes, offsets, 0), "tnt_gatherv");
  int status = 0;
  if (rank == 0) {
    double* field = malloc((size_t)n * (size_t)n * sizeof(double));
    jacobi_assemble(n, px, py, gathered, field);
    status = jacobi_report("tnt", n, iterations, size, residual, seconds, field, dump);
    free(field);
  }
  free(mine);
  free(gathered);
  free(bytes);
  free(offsets);
  jacobi_free(&b);
  check(tnt_finalize(world), "tnt_finalize");
  return status;
}
