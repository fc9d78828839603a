/* Every collective of the subset on fixed inputs, each result written as a line of hex to
 * DIR/rankR.txt: built once with OpenMPI's mpicc and once with tnt-mpicc, the two runs must
 * write the same files (openmpi_outputs_test.sh). The inputs are small integers (values.h), so
 * that every order of a floating-point sum gives the same bits. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "values.h"

static FILE* out;
static int rank, size;

static void record(const char* label, const void* data, size_t bytes) {
  fprintf(out, "%s:", label);
  for (size_t i = 0; i < bytes; ++i) fprintf(out, "%02x", ((const unsigned char*)data)[i]);
  fprintf(out, "\n");
}

static const MPI_Datatype kTypes[] = {
    MPI_BYTE,   MPI_INT,     MPI_UNSIGNED, MPI_LONG,    MPI_UNSIGNED_LONG, MPI_LONG_LONG, MPI_FLOAT,    MPI_DOUBLE,
    MPI_INT8_T, MPI_INT16_T, MPI_INT32_T,  MPI_INT64_T, MPI_UINT8_T,       MPI_UINT16_T,  MPI_UINT32_T, MPI_UINT64_T};
static const char* const kTypeNames[] = {"BYTE",    "INT",      "UNSIGNED", "LONG",    "UNSIGNED_LONG", "LONG_LONG",
                                         "FLOAT",   "DOUBLE",   "INT8_T",   "INT16_T", "INT32_T",       "INT64_T",
                                         "UINT8_T", "UINT16_T", "UINT32_T", "UINT64_T"};
static const MPI_Op kOps[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_LAND, MPI_LOR, MPI_BAND, MPI_BOR};
static const char* const kOpNames[] = {"SUM", "PROD", "MIN", "MAX", "LAND", "LOR", "BAND", "BOR"};

static void reductions(void) {
  enum { kCount = 257 };
  char label[128];
  for (int t = 0; t < 16; ++t) {
    for (int o = 0; o < 8; ++o) {
      if (!mpi_defines(kTypes[t], kOps[o])) continue;
      unsigned char send[kCount * 8], recv[kCount * 8];
      int type_size;
      MPI_Type_size(kTypes[t], &type_size);
      for (int i = 0; i < kCount; ++i)
        put_value(kTypes[t], send, i, typed_input(kTypes[t], rank, i, kOps[o] == MPI_PROD));
      CHECK_OK(MPI_Allreduce(send, recv, kCount, kTypes[t], kOps[o], MPI_COMM_WORLD));
      snprintf(label, sizeof label, "allreduce %s %s", kTypeNames[t], kOpNames[o]);
      record(label, recv, (size_t)kCount * type_size);
      const int root = (t + o) % size;
      CHECK_OK(MPI_Reduce(send, recv, kCount, kTypes[t], kOps[o], root, MPI_COMM_WORLD));
      snprintf(label, sizeof label, "reduce %s %s root %d", kTypeNames[t], kOpNames[o], root);
      if (rank == root) record(label, recv, (size_t)kCount * type_size);
    }
  }
  struct {
    double value;
    int index;
  } d[64], d_out[64];
  struct {
    int value;
    int index;
  } n[64], n_out[64];
  for (int i = 0; i < 64; ++i) {
    d[i].value = input_value(rank, i, 0) / 4;
    d[i].index = rank * 3;
    n[i].value = (int)input_value(rank, i, 0) % 3;
    n[i].index = 100 - rank;
  }
  for (int loc = 0; loc < 2; ++loc) {
    memset(d_out, 0, sizeof d_out); /* the padding after index too */
    CHECK_OK(MPI_Allreduce(d, d_out, 64, MPI_DOUBLE_INT, loc ? MPI_MAXLOC : MPI_MINLOC, MPI_COMM_WORLD));
    for (int i = 0; i < 64; ++i)
      fprintf(out, "%s DOUBLE_INT %d: %a %d\n", loc ? "maxloc" : "minloc", i, d_out[i].value, d_out[i].index);
    CHECK_OK(MPI_Allreduce(n, n_out, 64, MPI_2INT, loc ? MPI_MAXLOC : MPI_MINLOC, MPI_COMM_WORLD));
    record(loc ? "maxloc 2INT" : "minloc 2INT", n_out, sizeof n_out);
  }
}

static void data_movement(void) {
  char label[64];
  unsigned char buffer[1000];
  for (int root = 0; root < size; ++root) {
    for (int i = 0; i < 1000; ++i) buffer[i] = (unsigned char)(rank * 37 + i);
    CHECK_OK(MPI_Bcast(buffer, 1000, MPI_BYTE, root, MPI_COMM_WORLD));
    snprintf(label, sizeof label, "bcast root %d", root);
    record(label, buffer, sizeof buffer);
  }
  int mine[100], all[100 * 64];
  for (int i = 0; i < 100; ++i) mine[i] = rank * 1000 + i;
  CHECK_OK(MPI_Allgather(mine, 100, MPI_INT, all, 100, MPI_INT, MPI_COMM_WORLD));
  record("allgather", all, sizeof(int) * 100 * (size_t)size);
  double input[64 * 10], block[64 * 10];
  for (int i = 0; i < 10 * size; ++i) input[i] = input_value(rank, i, 0) * 0.5;
  CHECK_OK(MPI_Reduce_scatter_block(input, block, 10, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  record("reduce_scatter_block", block, sizeof(double) * 10);
  int counts[64], total = 10 * size + 3;
  for (int r = 0; r < size; ++r) counts[r] = total / size + (r < total % size);
  for (int i = 0; i < total; ++i) input[i] = input_value(rank, i, 0);
  CHECK_OK(MPI_Reduce_scatter(input, block, counts, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  record("reduce_scatter", block, sizeof(double) * (size_t)counts[rank]);
}

/* The exchanges: what rank r sends rank s is value(r, s, i); counts uneven, with zeros. */
static int value(int from, int to, int i) { return from * 100000 + to * 1000 + i; }
static int count_of(int from, int to) { return (from * 3 + to * 5) % 4 == 0 ? 0 : (from + 2 * to) % 7 + 1; }

static void exchanges(void) {
  char label[64];
  int send[64 * 8], recv[64 * 8 + 64], counts[64], displs[64], rcounts[64], rdispls[64];
  for (int root = 0; root < size; ++root) {
    for (int i = 0; i < 4; ++i) send[i] = value(rank, root, i);
    memset(recv, 0, sizeof recv);
    CHECK_OK(MPI_Gather(send, 4, MPI_INT, recv, 4, MPI_INT, root, MPI_COMM_WORLD));
    snprintf(label, sizeof label, "gather root %d", root);
    if (rank == root) record(label, recv, sizeof(int) * 4 * (size_t)size);
    for (int r = 0; r < size; ++r)
      for (int i = 0; i < 4; ++i) send[4 * r + i] = value(root, r, i);
    CHECK_OK(MPI_Scatter(send, 4, MPI_INT, recv, 4, MPI_INT, root, MPI_COMM_WORLD));
    snprintf(label, sizeof label, "scatter root %d", root);
    record(label, recv, sizeof(int) * 4);
    int total = 0;
    for (int r = 0; r < size; ++r) {
      counts[r] = count_of(r, root);
      displs[r] = total;
      total += counts[r] + 1;
    }
    for (int i = 0; i < count_of(rank, root); ++i) send[i] = value(rank, root, i);
    memset(recv, 0, sizeof recv);
    CHECK_OK(MPI_Gatherv(send, count_of(rank, root), MPI_INT, recv, counts, displs, MPI_INT, root, MPI_COMM_WORLD));
    snprintf(label, sizeof label, "gatherv root %d", root);
    if (rank == root) record(label, recv, sizeof(int) * (size_t)total);
    total = 0;
    for (int r = 0; r < size; ++r) {
      counts[r] = count_of(root, r);
      displs[r] = total;
      total += counts[r];
      for (int i = 0; i < counts[r]; ++i) send[displs[r] + i] = value(root, r, i);
    }
    memset(recv, 0, sizeof recv);
    CHECK_OK(MPI_Scatterv(send, counts, displs, MPI_INT, recv, count_of(root, rank), MPI_INT, root, MPI_COMM_WORLD));
    snprintf(label, sizeof label, "scatterv root %d", root);
    record(label, recv, sizeof(int) * (size_t)count_of(root, rank));
  }
  int total = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = count_of(r, 0);
    displs[r] = total;
    total += counts[r];
  }
  for (int i = 0; i < counts[rank]; ++i) send[i] = value(rank, 0, i);
  CHECK_OK(MPI_Allgatherv(send, counts[rank], MPI_INT, recv, counts, displs, MPI_INT, MPI_COMM_WORLD));
  record("allgatherv", recv, sizeof(int) * (size_t)total);
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < 3; ++i) send[3 * r + i] = value(rank, r, i);
  CHECK_OK(MPI_Alltoall(send, 3, MPI_INT, recv, 3, MPI_INT, MPI_COMM_WORLD));
  record("alltoall", recv, sizeof(int) * 3 * (size_t)size);
  int stotal = 0, rtotal = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = count_of(rank, r);
    displs[r] = stotal;
    stotal += counts[r];
    rcounts[r] = count_of(r, rank);
    rdispls[r] = rtotal;
    rtotal += rcounts[r];
    for (int i = 0; i < counts[r]; ++i) send[displs[r] + i] = value(rank, r, i);
  }
  CHECK_OK(MPI_Alltoallv(send, counts, displs, MPI_INT, recv, rcounts, rdispls, MPI_INT, MPI_COMM_WORLD));
  record("alltoallv", recv, sizeof(int) * (size_t)rtotal);
  double in[50], out[50];
  for (int i = 0; i < 50; ++i) in[i] = input_value(rank, i, 0) * 0.25;
  CHECK_OK(MPI_Scan(in, out, 50, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  record("scan", out, sizeof out);
  CHECK_OK(MPI_Exscan(in, out, 50, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
  if (rank > 0) record("exscan", out, sizeof out); /* rank 0's is undefined */
  for (int r = 0; r < size; ++r) counts[r] = count_of(r, 1) + (r == 0) * 3;
  total = 0;
  for (int r = 0; r < size; ++r) total += counts[r];
  double input[64 * 8 + 8], block[16];
  for (int i = 0; i < total; ++i) input[i] = input_value(rank, i, 0);
  CHECK_OK(MPI_Reduce_scatter(input, block, counts, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  record("reduce_scatter uneven", block, sizeof(double) * (size_t)counts[rank]);
}

static void point_to_point(void) {
  int from_left = -1, from_anyone[64], sent = rank * 11;
  MPI_Status status;
  CHECK_OK(MPI_Sendrecv(&sent, 1, MPI_INT, (rank + 1) % size, 5, &from_left, 1, MPI_INT, (rank + size - 1) % size, 5,
                        MPI_COMM_WORLD, &status));
  fprintf(out, "sendrecv: %d from %d tag %d\n", from_left, status.MPI_SOURCE, status.MPI_TAG);
  if (rank == 0) {
    for (int i = 1; i < size; ++i) {
      CHECK_OK(MPI_Recv(&from_anyone[i], 1, MPI_INT, i, MPI_ANY_TAG, MPI_COMM_WORLD, &status));
      fprintf(out, "recv any tag: %d from %d tag %d\n", from_anyone[i], status.MPI_SOURCE, status.MPI_TAG);
    }
  } else {
    CHECK_OK(MPI_Send(&sent, 1, MPI_INT, 0, 40 + rank, MPI_COMM_WORLD));
  }
}

int main(int argc, char** argv) {
  CHECK_OK(MPI_Init(&argc, &argv));
  CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(argc == 2 && size <= 64, "usage: outputs DIR, on at most 64 ranks");
  char path[4096];
  snprintf(path, sizeof path, "%s/rank%d.txt", argv[1], rank);
  out = fopen(path, "w");
  CHECK(out != NULL, "cannot write %s", path);
  reductions();
  data_movement();
  exchanges();
  point_to_point();
  fclose(out);
  CHECK_OK(MPI_Finalize());
  return 0;
}
