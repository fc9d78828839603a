/* The collectives that move data by rank: gather(v), scatter(v), allgatherv and alltoall(v), on
 * every root, with uneven counts including zeros and displacements with gaps, in place where MPI
 * allows it; and the prefix reductions scan and exscan. Every rank knows what every rank sends
 * (value()), so each result is checked against a serial computation. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int rank, size;

/* Element i of what rank `from` sends to rank `to`. */
static int value(int from, int to, int i) { return from * 1000000 + to * 1000 + i; }
/* Uneven counts, zero for some pairs. */
static int count_of(int from, int to) { return (from * 3 + to * 5) % 4 == 0 ? 0 : (from + 2 * to) % 7 + 1; }

static void gather_scatter(void) {
  for (int root = 0; root < size; ++root) {
    /* MPI_Gather: 5 ints from each rank, in place at root for odd roots. */
    int mine[5], *all = malloc(sizeof(int) * 5 * (size_t)size);
    for (int i = 0; i < 5; ++i) mine[i] = value(rank, root, i);
    if (rank == root && root % 2) {
      for (int r = 0; r < size; ++r) memset(all + 5 * r, 0, sizeof mine);
      memcpy(all + 5 * root, mine, sizeof mine);
      CHECK_OK(MPI_Gather(MPI_IN_PLACE, 5, MPI_INT, all, 5, MPI_INT, root, MPI_COMM_WORLD));
    } else {
      CHECK_OK(MPI_Gather(mine, 5, MPI_INT, all, 5, MPI_INT, root, MPI_COMM_WORLD));
    }
    if (rank == root) {
      for (int r = 0; r < size; ++r)
        for (int i = 0; i < 5; ++i)
          CHECK(all[5 * r + i] == value(r, root, i), "MPI_Gather root %d: rank %d's element %d", root, r, i);
    }
    /* MPI_Scatter: the root's block r goes to rank r. */
    if (rank == root)
      for (int r = 0; r < size; ++r)
        for (int i = 0; i < 5; ++i) all[5 * r + i] = value(root, r, i);
    int got[5] = {0};
    CHECK_OK(MPI_Scatter(all, 5, MPI_INT, got, 5, MPI_INT, root, MPI_COMM_WORLD));
    for (int i = 0; i < 5; ++i) CHECK(got[i] == value(root, rank, i), "MPI_Scatter root %d: element %d", root, i);
    free(all);

    /* MPI_Gatherv and MPI_Scatterv: uneven counts, displacements with a gap of 3 between blocks. */
    int* counts = malloc(sizeof(int) * (size_t)size);
    int* displs = malloc(sizeof(int) * (size_t)size);
    int total = 0;
    for (int r = 0; r < size; ++r) {
      counts[r] = count_of(r, root);
      displs[r] = total;
      total += counts[r] + 3;
    }
    int* varied = malloc(sizeof(int) * ((size_t)total + 1));
    int send[8];
    for (int i = 0; i < count_of(rank, root); ++i) send[i] = value(rank, root, i);
    for (int i = 0; i < total; ++i) varied[i] = -1;
    CHECK_OK(MPI_Gatherv(send, count_of(rank, root), MPI_INT, varied, counts, displs, MPI_INT, root, MPI_COMM_WORLD));
    if (rank == root) {
      for (int r = 0; r < size; ++r) {
        for (int i = 0; i < counts[r]; ++i)
          CHECK(varied[displs[r] + i] == value(r, root, i), "MPI_Gatherv root %d: rank %d element %d", root, r, i);
        CHECK(varied[displs[r] + counts[r]] == -1, "MPI_Gatherv wrote into the gap after rank %d", r);
      }
    }
    /* The scatter's own counts, with gaps of 2 between blocks, in reverse rank order. */
    total = 0;
    for (int r = size - 1; r >= 0; --r) {
      counts[r] = count_of(root, r);
      displs[r] = total;
      total += counts[r] + 2;
    }
    free(varied);
    varied = malloc(sizeof(int) * ((size_t)total + 1));
    if (rank == root)
      for (int r = 0; r < size; ++r)
        for (int i = 0; i < counts[r]; ++i) varied[displs[r] + i] = value(root, r, i);
    int received[8] = {0};
    CHECK_OK(
        MPI_Scatterv(varied, counts, displs, MPI_INT, received, count_of(root, rank), MPI_INT, root, MPI_COMM_WORLD));
    for (int i = 0; i < count_of(root, rank); ++i)
      CHECK(received[i] == value(root, rank, i), "MPI_Scatterv root %d: element %d", root, i);
    free(counts);
    free(displs);
    free(varied);
  }
}

static void allgatherv_alltoall(void) {
  int* counts = malloc(sizeof(int) * (size_t)size);
  int* displs = malloc(sizeof(int) * (size_t)size);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = count_of(r, 0);
    displs[r] = total + 1;
    total += counts[r] + 1;
  }
  int* all = malloc(sizeof(int) * ((size_t)total + 2));
  int send[8];
  for (int i = 0; i < counts[rank]; ++i) send[i] = value(rank, 0, i);
  CHECK_OK(MPI_Allgatherv(send, counts[rank], MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD));
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < counts[r]; ++i)
      CHECK(all[displs[r] + i] == value(r, 0, i), "MPI_Allgatherv: rank %d element %d", r, i);
  free(all);

  /* MPI_Alltoall: 3 ints per pair. */
  int* out = malloc(sizeof(int) * 3 * (size_t)size);
  int* in = malloc(sizeof(int) * 3 * (size_t)size);
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < 3; ++i) out[3 * r + i] = value(rank, r, i);
  CHECK_OK(MPI_Alltoall(out, 3, MPI_INT, in, 3, MPI_INT, MPI_COMM_WORLD));
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < 3; ++i) CHECK(in[3 * r + i] == value(r, rank, i), "MPI_Alltoall: from %d element %d", r, i);
  free(out);
  free(in);

  /* MPI_Alltoallv: uneven counts per pair, zeros included, displacements in reverse order. */
  int *scounts = malloc(sizeof(int) * (size_t)size), *sdispls = malloc(sizeof(int) * (size_t)size);
  int *rcounts = malloc(sizeof(int) * (size_t)size), *rdispls = malloc(sizeof(int) * (size_t)size);
  int stotal = 0, rtotal = 0;
  for (int r = size - 1; r >= 0; --r) {
    scounts[r] = count_of(rank, r);
    sdispls[r] = stotal;
    stotal += scounts[r];
    rcounts[r] = count_of(r, rank);
    rdispls[r] = rtotal;
    rtotal += rcounts[r];
  }
  int* sbuf = malloc(sizeof(int) * ((size_t)stotal + 1));
  int* rbuf = malloc(sizeof(int) * ((size_t)rtotal + 1));
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < scounts[r]; ++i) sbuf[sdispls[r] + i] = value(rank, r, i);
  CHECK_OK(MPI_Alltoallv(sbuf, scounts, sdispls, MPI_INT, rbuf, rcounts, rdispls, MPI_INT, MPI_COMM_WORLD));
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < rcounts[r]; ++i)
      CHECK(rbuf[rdispls[r] + i] == value(r, rank, i), "MPI_Alltoallv: from %d element %d", r, i);
  free(scounts);
  free(sdispls);
  free(rcounts);
  free(rdispls);
  free(sbuf);
  free(rbuf);
  free(counts);
  free(displs);
}

static void prefixes(void) {
  enum { kCount = 100 };
  long in[kCount], scan[kCount], exscan[kCount];
  for (int i = 0; i < kCount; ++i) in[i] = (rank * 7 + i) % 13 - 6;
  CHECK_OK(MPI_Scan(in, scan, kCount, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
  for (int i = 0; i < kCount; ++i) exscan[i] = 12345;
  CHECK_OK(MPI_Exscan(in, exscan, kCount, MPI_LONG, MPI_MAX, MPI_COMM_WORLD));
  for (int i = 0; i < kCount; ++i) {
    long sum = 0, max = -1000;
    for (int r = 0; r <= rank; ++r) sum += (r * 7 + i) % 13 - 6;
    for (int r = 0; r < rank; ++r) max = (r * 7 + i) % 13 - 6 > max ? (r * 7 + i) % 13 - 6 : max;
    CHECK(scan[i] == sum, "MPI_Scan element %d: %ld, expected %ld", i, scan[i], sum);
    /* MPI: rank 0's exscan result is undefined; the others get the fold over the ranks below. */
    if (rank > 0) CHECK(exscan[i] == max, "MPI_Exscan element %d: %ld, expected %ld", i, exscan[i], max);
  }
}

/* The nonblocking forms, all in flight at once, and MPI_IN_PLACE for alltoall and allgatherv. */
static void nonblocking(void) {
  const int root = size - 1;
  int gathered[64 * 2], mine[2] = {value(rank, root, 0), value(rank, root, 1)};
  int* scatter_in = malloc(sizeof(int) * 2 * (size_t)size);
  int scattered[2] = {-1, -1};
  for (int r = 0; r < size; ++r) scatter_in[2 * r] = value(root, r, 0), scatter_in[2 * r + 1] = value(root, r, 1);
  int* a2a_out = malloc(sizeof(int) * (size_t)size);
  int* a2a_in = malloc(sizeof(int) * (size_t)size);
  for (int r = 0; r < size; ++r) a2a_out[r] = value(rank, r, 0);
  long x = rank + 1, reduced = -1, scanned = -1, exscanned = -1;
  double* rs_in = malloc(sizeof(double) * 3 * (size_t)size);
  double rs_out[3];
  for (int i = 0; i < 3 * size; ++i) rs_in[i] = rank * 100 + i;
  MPI_Request requests[7];
  CHECK_OK(MPI_Igather(mine, 2, MPI_INT, gathered, 2, MPI_INT, root, MPI_COMM_WORLD, &requests[0]));
  CHECK_OK(MPI_Iscatter(scatter_in, 2, MPI_INT, scattered, 2, MPI_INT, root, MPI_COMM_WORLD, &requests[1]));
  CHECK_OK(MPI_Ialltoall(a2a_out, 1, MPI_INT, a2a_in, 1, MPI_INT, MPI_COMM_WORLD, &requests[2]));
  CHECK_OK(MPI_Ireduce(&x, &reduced, 1, MPI_LONG, MPI_PROD, root, MPI_COMM_WORLD, &requests[3]));
  CHECK_OK(MPI_Iscan(&x, &scanned, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &requests[4]));
  CHECK_OK(MPI_Iexscan(&x, &exscanned, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &requests[5]));
  CHECK_OK(MPI_Ireduce_scatter_block(rs_in, rs_out, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &requests[6]));
  CHECK_OK(MPI_Waitall(7, requests, MPI_STATUSES_IGNORE));
  if (rank == root) {
    for (int r = 0; r < size; ++r)
      CHECK(gathered[2 * r] == value(r, root, 0) && gathered[2 * r + 1] == value(r, root, 1), "MPI_Igather from %d", r);
    long product = 1;
    for (int r = 0; r < size; ++r) product *= r + 1;
    CHECK(reduced == product, "MPI_Ireduce: %ld, expected %ld", reduced, product);
  }
  CHECK(scattered[0] == value(root, rank, 0) && scattered[1] == value(root, rank, 1), "MPI_Iscatter");
  for (int r = 0; r < size; ++r) CHECK(a2a_in[r] == value(r, rank, 0), "MPI_Ialltoall from %d", r);
  CHECK(scanned == (long)(rank + 1) * (rank + 2) / 2, "MPI_Iscan: %ld", scanned);
  if (rank > 0) CHECK(exscanned == (long)rank * (rank + 1) / 2, "MPI_Iexscan: %ld", exscanned);
  for (int i = 0; i < 3; ++i)
    CHECK(rs_out[i] == (size - 1) * 100 + 3 * rank + i, "MPI_Ireduce_scatter_block element %d: %g", i, rs_out[i]);

  /* In place: alltoall replaces recvbuf's blocks; allgatherv finds this rank's block there. */
  for (int r = 0; r < size; ++r) a2a_in[r] = value(rank, r, 7);
  CHECK_OK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a2a_in, 1, MPI_INT, MPI_COMM_WORLD));
  for (int r = 0; r < size; ++r) CHECK(a2a_in[r] == value(r, rank, 7), "MPI_Alltoall in place from %d", r);
  int* counts = malloc(sizeof(int) * (size_t)size);
  int* displs = malloc(sizeof(int) * (size_t)size);
  int total = 0;
  for (int r = 0; r < size; ++r) counts[r] = count_of(r, 1), displs[r] = total, total += counts[r];
  int* all = malloc(sizeof(int) * ((size_t)total + 1));
  for (int i = 0; i < counts[rank]; ++i) all[displs[rank] + i] = value(rank, 1, i);
  MPI_Request request;
  CHECK_OK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, counts, displs, MPI_INT, MPI_COMM_WORLD, &request));
  CHECK_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < counts[r]; ++i)
      CHECK(all[displs[r] + i] == value(r, 1, i), "MPI_Iallgatherv in place: rank %d element %d", r, i);
  free(scatter_in);
  free(a2a_out);
  free(a2a_in);
  free(rs_in);
  free(counts);
  free(displs);
  free(all);
}

int main(int argc, char** argv) {
  CHECK_OK(MPI_Init(&argc, &argv));
  CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  gather_scatter();
  allgatherv_alltoall();
  prefixes();
  nonblocking();
  CHECK_OK(MPI_Finalize());
  printf("rank %d of %d: data_movement ok\n", rank, size);
  return 0;
}
