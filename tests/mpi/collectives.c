/* Every collective of the layer against a serial reference: each rank builds every rank's input
 * (values.h), folds them in rank order, and compares with what the collective gave it. Counts 0,
 * 1, 7 and 1000, every root, in place and not, blocking and nonblocking, on MPI_COMM_WORLD and
 * MPI_COMM_SELF. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "values.h"

static const int kCounts[] = {0, 1, 7, 1000};
#define COUNTS (int)(sizeof kCounts / sizeof kCounts[0])
/* Every datatype and op of the subset; mpi_defines (values.h) picks the pairs MPI defines. */
static const MPI_Datatype kReduceTypes[] = {
    MPI_BYTE,   MPI_INT,     MPI_UNSIGNED, MPI_LONG,    MPI_UNSIGNED_LONG, MPI_LONG_LONG, MPI_FLOAT,    MPI_DOUBLE,
    MPI_INT8_T, MPI_INT16_T, MPI_INT32_T,  MPI_INT64_T, MPI_UINT8_T,       MPI_UINT16_T,  MPI_UINT32_T, MPI_UINT64_T};
#define REDUCE_TYPES (int)(sizeof kReduceTypes / sizeof kReduceTypes[0])
static const MPI_Op kOps[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_LAND, MPI_LOR, MPI_BAND, MPI_BOR};
#define OPS (int)(sizeof kOps / sizeof kOps[0])

static int rank, size;

static void fill_input(MPI_Datatype t, MPI_Op op, void* buffer, int count, int of_rank) {
  for (int i = 0; i < count; ++i) put_value(t, buffer, i, typed_input(t, of_rank, i, op == MPI_PROD));
}

static void check_reduced(const char* what, MPI_Datatype t, MPI_Op op, const void* buffer, int count, int first,
                          int comm_size) {
  for (int i = 0; i < count; ++i) {
    const double expected = reference(t, op, comm_size, first + i);
    const double got = get_value(t, buffer, i);
    CHECK(got == expected, "%s: type 0x%x op 0x%x element %d of %d: %g, expected %g", what, t, op, first + i, count,
          got, expected);
  }
}

static void allreduce_and_reduce(void) {
  for (int ti = 0; ti < REDUCE_TYPES; ++ti) {
    for (int oi = 0; oi < OPS; ++oi) {
      for (int ci = 0; ci < COUNTS; ++ci) {
        const MPI_Datatype t = kReduceTypes[ti];
        const MPI_Op op = kOps[oi];
        const int count = kCounts[ci];
        if (!mpi_defines(t, op)) continue;
        int type_size;
        MPI_Type_size(t, &type_size);
        char* send = malloc((size_t)count * type_size + 1);
        char* recv = malloc((size_t)count * type_size + 1);
        fill_input(t, op, send, count, rank);
        CHECK_OK(MPI_Allreduce(send, recv, count, t, op, MPI_COMM_WORLD));
        check_reduced("MPI_Allreduce", t, op, recv, count, 0, size);
        fill_input(t, op, recv, count, rank);
        CHECK_OK(MPI_Allreduce(MPI_IN_PLACE, recv, count, t, op, MPI_COMM_WORLD));
        check_reduced("MPI_Allreduce in place", t, op, recv, count, 0, size);
        MPI_Request request = MPI_REQUEST_NULL;
        CHECK_OK(MPI_Iallreduce(send, recv, count, t, op, MPI_COMM_WORLD, &request));
        CHECK_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
        CHECK(request == MPI_REQUEST_NULL, "MPI_Wait left the request %d", request);
        check_reduced("MPI_Iallreduce", t, op, recv, count, 0, size);
        for (int root = 0; root < size; ++root) {
          memset(recv, 0x5a, (size_t)count * type_size);
          if (rank == root && (root & 1)) {
            fill_input(t, op, recv, count, rank);
            CHECK_OK(MPI_Reduce(MPI_IN_PLACE, recv, count, t, op, root, MPI_COMM_WORLD));
          } else {
            CHECK_OK(MPI_Reduce(send, recv, count, t, op, root, MPI_COMM_WORLD));
          }
          if (rank == root) check_reduced("MPI_Reduce", t, op, recv, count, 0, size);
        }
        /* MPI_COMM_SELF: the fold over one rank is rank 0's input. */
        fill_input(t, op, send, count, 0);
        CHECK_OK(MPI_Allreduce(send, recv, count, t, op, MPI_COMM_SELF));
        check_reduced("MPI_Allreduce on MPI_COMM_SELF", t, op, recv, count, 0, 1);
        free(send);
        free(recv);
      }
    }
  }
}

/* MPI_MINLOC and MPI_MAXLOC: the extreme value and, among ranks that hold it, the smallest rank. */
static void value_index(void) {
  enum { kCount = 50 };
  struct {
    double value;
    int index;
  } d[kCount], d_out[kCount];
  struct {
    int value;
    int index;
  } n[kCount], n_out[kCount];
  for (int loc = 0; loc < 2; ++loc) {
    const MPI_Op op = loc ? MPI_MAXLOC : MPI_MINLOC;
    for (int i = 0; i < kCount; ++i) {
      d[i].value = input_value(rank, i, 0) / 2;
      d[i].index = rank;
      n[i].value = (int)input_value(rank, i, 0) % 3; /* many ties */
      n[i].index = rank;
    }
    CHECK_OK(MPI_Allreduce(d, d_out, kCount, MPI_DOUBLE_INT, op, MPI_COMM_WORLD));
    CHECK_OK(MPI_Allreduce(n, n_out, kCount, MPI_2INT, op, MPI_COMM_WORLD));
    for (int i = 0; i < kCount; ++i) {
      double best_d = input_value(0, i, 0) / 2;
      int best_d_rank = 0, best_n = (int)input_value(0, i, 0) % 3, best_n_rank = 0;
      for (int r = 1; r < size; ++r) {
        const double vd = input_value(r, i, 0) / 2;
        const int vn = (int)input_value(r, i, 0) % 3;
        if (loc ? vd > best_d : vd < best_d) best_d = vd, best_d_rank = r;
        if (loc ? vn > best_n : vn < best_n) best_n = vn, best_n_rank = r;
      }
      CHECK(d_out[i].value == best_d && d_out[i].index == best_d_rank, "MPI_DOUBLE_INT op 0x%x element %d: (%g, %d)",
            op, i, d_out[i].value, d_out[i].index);
      CHECK(n_out[i].value == best_n && n_out[i].index == best_n_rank, "MPI_2INT op 0x%x element %d: (%d, %d)", op, i,
            n_out[i].value, n_out[i].index);
    }
  }
}

static unsigned char pattern(int of_rank, size_t i) { return (unsigned char)(of_rank * 31 + i * 7 + 1); }

static void bcast(void) {
  const MPI_Datatype types[] = {MPI_CHAR, MPI_BYTE, MPI_DOUBLE, MPI_2INT, MPI_UINT16_T};
  for (int ti = 0; ti < 5; ++ti) {
    for (int ci = 0; ci < COUNTS; ++ci) {
      for (int root = 0; root < size; ++root) {
        int type_size;
        MPI_Type_size(types[ti], &type_size);
        const size_t bytes = (size_t)kCounts[ci] * type_size;
        unsigned char* buffer = malloc(bytes + 1);
        for (size_t i = 0; i < bytes; ++i) buffer[i] = pattern(rank, i);
        if ((root + ci) % 2) {
          MPI_Request request;
          int done = 0;
          CHECK_OK(MPI_Ibcast(buffer, kCounts[ci], types[ti], root, MPI_COMM_WORLD, &request));
          while (!done) CHECK_OK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
          CHECK(request == MPI_REQUEST_NULL, "MPI_Test left the request %d", request);
        } else {
          CHECK_OK(MPI_Bcast(buffer, kCounts[ci], types[ti], root, MPI_COMM_WORLD));
        }
        for (size_t i = 0; i < bytes; ++i) {
          CHECK(buffer[i] == pattern(root, i), "MPI_Bcast from %d: byte %zu of %zu is %u, expected %u", root, i, bytes,
                buffer[i], pattern(root, i));
        }
        free(buffer);
      }
    }
  }
}

static void allgather(void) {
  for (int ci = 0; ci < COUNTS; ++ci) {
    const int count = kCounts[ci];
    const size_t block = (size_t)count * sizeof(int);
    int* send = malloc(block + 1);
    int* recv = malloc(block * size + 1);
    for (int i = 0; i < count; ++i) send[i] = rank * 100000 + i;
    for (int variant = 0; variant < 3; ++variant) {
      memset(recv, 0, block * size);
      if (variant == 0) {
        CHECK_OK(MPI_Allgather(send, count, MPI_INT, recv, count, MPI_INT, MPI_COMM_WORLD));
      } else if (variant == 1) {
        memcpy(recv + (size_t)rank * count, send, block);
        CHECK_OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, count, MPI_INT, MPI_COMM_WORLD));
      } else {
        /* Other types of the same bytes on the send side. */
        MPI_Request requests[2];
        int flag = 0;
        CHECK_OK(MPI_Iallgather(send, count * 4, MPI_BYTE, recv, count, MPI_INT, MPI_COMM_WORLD, &requests[0]));
        CHECK_OK(MPI_Ibarrier(MPI_COMM_WORLD, &requests[1]));
        while (!flag) CHECK_OK(MPI_Testall(2, requests, &flag, MPI_STATUSES_IGNORE));
        CHECK(requests[0] == MPI_REQUEST_NULL && requests[1] == MPI_REQUEST_NULL, "MPI_Testall left requests");
      }
      for (int r = 0; r < size; ++r) {
        for (int i = 0; i < count; ++i) {
          CHECK(recv[(size_t)r * count + i] == r * 100000 + i, "MPI_Allgather variant %d: rank %d's element %d is %d",
                variant, r, i, recv[(size_t)r * count + i]);
        }
      }
    }
    free(send);
    free(recv);
  }
}

static void reduce_scatter(void) {
  for (int ci = 0; ci < COUNTS; ++ci) {
    const int count = kCounts[ci];
    const int total = count * size;
    double* send = malloc(sizeof(double) * ((size_t)total + 4));
    double* recv = malloc(sizeof(double) * ((size_t)total + 4));
    fill_input(MPI_DOUBLE, MPI_SUM, send, total, rank);
    CHECK_OK(MPI_Reduce_scatter_block(send, recv, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    check_reduced("MPI_Reduce_scatter_block", MPI_DOUBLE, MPI_SUM, recv, count, rank * count, size);
    fill_input(MPI_DOUBLE, MPI_MAX, recv, total, rank);
    CHECK_OK(MPI_Reduce_scatter_block(MPI_IN_PLACE, recv, count, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    check_reduced("MPI_Reduce_scatter_block in place", MPI_DOUBLE, MPI_MAX, recv, count, rank * count, size);

    /* MPI_Reduce_scatter with the first total % size ranks one element more (total = count + 3). */
    const int uneven = count + 3;
    int* counts = malloc(sizeof(int) * (size_t)size);
    int first = 0;
    for (int r = 0; r < size; ++r) {
      counts[r] = uneven / size + (r < uneven % size);
      if (r < rank) first += counts[r];
    }
    fill_input(MPI_DOUBLE, MPI_SUM, send, uneven, rank);
    CHECK_OK(MPI_Reduce_scatter(send, recv, counts, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    check_reduced("MPI_Reduce_scatter", MPI_DOUBLE, MPI_SUM, recv, counts[rank], first, size);
    /* Any other layout: here all on the last rank, none on rank 0. */
    counts[size - 1] += counts[0];
    counts[0] = 0;
    first = 0;
    for (int r = 0; r < rank; ++r) first += counts[r];
    CHECK_OK(MPI_Reduce_scatter(send, recv, counts, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    check_reduced("MPI_Reduce_scatter, uneven", MPI_DOUBLE, MPI_SUM, recv, counts[rank], first, size);
    /* In place: the whole input in recvbuf, the result at its start. */
    fill_input(MPI_DOUBLE, MPI_MIN, recv, uneven, rank);
    CHECK_OK(MPI_Reduce_scatter(MPI_IN_PLACE, recv, counts, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
    check_reduced("MPI_Reduce_scatter in place", MPI_DOUBLE, MPI_MIN, recv, counts[rank], first, size);
    free(counts);
    free(send);
    free(recv);
  }
}

static void requests(void) {
  MPI_Request list[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int index = -2;
  MPI_Status status;
  CHECK_OK(MPI_Waitany(3, list, &index, &status));
  CHECK(index == MPI_UNDEFINED, "MPI_Waitany over null requests gave %d", index);
  CHECK(status.MPI_SOURCE == MPI_ANY_SOURCE && status.MPI_TAG == MPI_ANY_TAG, "not an empty status");
  int value = rank;
  CHECK_OK(MPI_Ibarrier(MPI_COMM_WORLD, &list[1]));
  CHECK_OK(MPI_Ibcast(&value, 1, MPI_INT, size - 1, MPI_COMM_WORLD, &list[2]));
  int completed = 0;
  while (completed < 2) {
    CHECK_OK(MPI_Waitany(3, list, &index, MPI_STATUS_IGNORE));
    CHECK(index == 1 || index == 2, "MPI_Waitany gave %d", index);
    CHECK(list[index] == MPI_REQUEST_NULL, "MPI_Waitany left request %d", index);
    ++completed;
  }
  CHECK(value == size - 1, "MPI_Ibcast gave %d", value);
  /* A freed request's operation still happens. */
  MPI_Request freed;
  CHECK_OK(MPI_Ibarrier(MPI_COMM_WORLD, &freed));
  CHECK_OK(MPI_Request_free(&freed));
  CHECK(freed == MPI_REQUEST_NULL, "MPI_Request_free left %d", freed);
  CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char** argv) {
  CHECK_OK(MPI_Init(&argc, &argv));
  CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  allreduce_and_reduce();
  value_index();
  bcast();
  allgather();
  reduce_scatter();
  requests();
  CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_OK(MPI_Finalize());
  printf("rank %d of %d: collectives ok\n", rank, size);
  return 0;
}
