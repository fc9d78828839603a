/* Point-to-point against what each rank knows every other rank sends: sizes from 0 to past the
 * eager limit, MPI's matching (any source, any tag, the order of one sender's messages),
 * MPI_PROC_NULL, statuses and MPI_Get_count, probes, requests, truncation and refused peers. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int rank, size;

static int value(int source, int dest, int tag, int i) { return source * 1000003 + dest * 10007 + tag * 101 + i; }

static void fill(int* buffer, int count, int source, int dest, int tag) {
  for (int i = 0; i < count; ++i) buffer[i] = value(source, dest, tag, i);
}

static void check_message(const int* buffer, int count, int source, int dest, int tag, const char* what) {
  for (int i = 0; i < count; ++i) {
    CHECK(buffer[i] == value(source, dest, tag, i), "%s: element %d of %d from %d (tag %d): %d, expected %d", what, i,
          count, source, tag, buffer[i], value(source, dest, tag, i));
  }
}

static void check_status(const MPI_Status* status, int source, int tag, int count, const char* what) {
  int got = -1;
  CHECK_OK(MPI_Get_count(status, MPI_INT, &got));
  CHECK(status->MPI_SOURCE == source && status->MPI_TAG == tag && got == count,
        "%s: status (source %d, tag %d, count %d), expected (%d, %d, %d)", what, status->MPI_SOURCE, status->MPI_TAG,
        got, source, tag, count);
}

/* Every size, blocking, around the ring: even ranks send first, odd ranks receive first. */
static void ring(void) {
  const int counts[] = {0, 1, 7, 1000, 100000};
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  for (int c = 0; c < 5; ++c) {
    const int count = counts[c];
    int* out = malloc(sizeof(int) * (size_t)count + 1);
    int* in = malloc(sizeof(int) * (size_t)count + 1);
    fill(out, count, rank, next, c);
    MPI_Status status;
    if (size == 1) {
      /* A blocking send to itself waits for a receive that it itself would post: MPI_Sendrecv only. */
    } else if (rank % 2 == 0) {
      CHECK_OK(c % 2 ? MPI_Ssend(out, count, MPI_INT, next, c, MPI_COMM_WORLD)
                     : MPI_Send(out, count, MPI_INT, next, c, MPI_COMM_WORLD));
      CHECK_OK(MPI_Recv(in, count, MPI_INT, previous, c, MPI_COMM_WORLD, &status));
    } else {
      CHECK_OK(MPI_Recv(in, count, MPI_INT, previous, c, MPI_COMM_WORLD, &status));
      CHECK_OK(c % 2 ? MPI_Ssend(out, count, MPI_INT, next, c, MPI_COMM_WORLD)
                     : MPI_Send(out, count, MPI_INT, next, c, MPI_COMM_WORLD));
    }
    if (size > 1) {
      check_message(in, count, previous, rank, c, "ring");
      check_status(&status, previous, c, count, "ring");
    }
    /* The same with MPI_Sendrecv, the other way round. */
    fill(out, count, rank, previous, c + 10);
    CHECK_OK(
        MPI_Sendrecv(out, count, MPI_INT, previous, c + 10, in, count, MPI_INT, next, c + 10, MPI_COMM_WORLD, &status));
    check_message(in, count, next, rank, c + 10, "sendrecv");
    check_status(&status, next, c + 10, count, "sendrecv");
    free(out);
    free(in);
  }
}

/* Every pair at once, nonblocking, receives posted before the sends. */
static void all_pairs(void) {
  enum { kCount = 5000 };
  int* out = malloc(sizeof(int) * kCount * (size_t)size);
  int* in = malloc(sizeof(int) * kCount * (size_t)size);
  MPI_Request* requests = malloc(sizeof(MPI_Request) * 2 * (size_t)size);
  MPI_Status* statuses = malloc(sizeof(MPI_Status) * 2 * (size_t)size);
  for (int peer = 0; peer < size; ++peer) {
    CHECK_OK(MPI_Irecv(in + peer * kCount, kCount, MPI_INT, peer, 7, MPI_COMM_WORLD, &requests[peer]));
  }
  for (int peer = 0; peer < size; ++peer) {
    fill(out + peer * kCount, kCount, rank, peer, 7);
    CHECK_OK(MPI_Isend(out + peer * kCount, kCount, MPI_INT, peer, 7, MPI_COMM_WORLD, &requests[size + peer]));
  }
  CHECK_OK(MPI_Waitall(2 * size, requests, statuses));
  for (int peer = 0; peer < size; ++peer) {
    CHECK(requests[peer] == MPI_REQUEST_NULL, "MPI_Waitall left request %d", peer);
    check_message(in + peer * kCount, kCount, peer, rank, 7, "all pairs");
    check_status(&statuses[peer], peer, 7, kCount, "all pairs");
  }
  free(out);
  free(in);
  free(requests);
  free(statuses);
}

/* Rank 0 takes one message from every other rank with MPI_ANY_SOURCE, then, from rank 1, 60
 * messages with MPI_ANY_TAG: they come in the order sent. The receives of one tag come in the
 * order of that tag's sends whatever the order of the tags asked for. */
static void matching(void) {
  if (size < 2) return;
  if (rank == 0) {
    int* seen = calloc((size_t)size, sizeof(int));
    for (int i = 1; i < size; ++i) {
      int message[3];
      MPI_Status status;
      CHECK_OK(MPI_Recv(message, 3, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &status));
      CHECK(status.MPI_SOURCE >= 1 && status.MPI_SOURCE < size && !seen[status.MPI_SOURCE], "any source gave %d",
            status.MPI_SOURCE);
      seen[status.MPI_SOURCE] = 1;
      check_message(message, 3, status.MPI_SOURCE, 0, 3, "any source");
      check_status(&status, status.MPI_SOURCE, 3, 3, "any source");
    }
    free(seen);
    for (int i = 0; i < 60; ++i) {
      int message = -1;
      MPI_Status status;
      CHECK_OK(MPI_Recv(&message, 1, MPI_INT, 1, MPI_ANY_TAG, MPI_COMM_WORLD, &status));
      CHECK(message == i && status.MPI_TAG == 100 + i % 3, "any tag: message %d with tag %d, expected %d with %d",
            message, status.MPI_TAG, i, 100 + i % 3);
    }
    /* Tag 202's messages first, then 201's, then 200's: each tag in its own order. */
    for (int tag = 202; tag >= 200; --tag) {
      for (int i = tag - 200; i < 30; i += 3) {
        int message = -1;
        CHECK_OK(MPI_Recv(&message, 1, MPI_INT, 1, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(message == i, "tag %d: message %d, expected %d", tag, message, i);
      }
    }
  } else {
    int message[3];
    fill(message, 3, rank, 0, 3);
    CHECK_OK(MPI_Send(message, 3, MPI_INT, 0, 3, MPI_COMM_WORLD));
    if (rank == 1) {
      MPI_Request requests[60];
      int values[60];
      for (int i = 0; i < 60; ++i) {
        values[i] = i;
        CHECK_OK(MPI_Isend(&values[i], 1, MPI_INT, 0, 100 + i % 3, MPI_COMM_WORLD, &requests[i]));
      }
      CHECK_OK(MPI_Waitall(60, requests, MPI_STATUSES_IGNORE));
      for (int i = 0; i < 30; ++i) CHECK_OK(MPI_Send(&values[i], 1, MPI_INT, 0, 200 + i % 3, MPI_COMM_WORLD));
    }
  }
}

static void proc_null_and_self(void) {
  int x = 5;
  MPI_Status status;
  CHECK_OK(MPI_Send(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
  CHECK_OK(MPI_Recv(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &status));
  check_status(&status, MPI_PROC_NULL, MPI_ANY_TAG, 0, "MPI_Recv from MPI_PROC_NULL");
  CHECK(x == 5, "a receive from MPI_PROC_NULL changed the buffer");
  MPI_Request requests[2];
  CHECK_OK(MPI_Irecv(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &requests[0]));
  CHECK_OK(MPI_Isend(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &requests[1]));
  CHECK_OK(MPI_Wait(&requests[0], &status));
  check_status(&status, MPI_PROC_NULL, MPI_ANY_TAG, 0, "MPI_Irecv from MPI_PROC_NULL");
  CHECK_OK(MPI_Wait(&requests[1], MPI_STATUS_IGNORE));
  int flag = 0;
  CHECK_OK(MPI_Iprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &flag, &status));
  CHECK(flag == 1 && status.MPI_SOURCE == MPI_PROC_NULL, "MPI_Iprobe of MPI_PROC_NULL");
  /* A non-periodic shift: the ends talk to MPI_PROC_NULL. */
  const int left = rank > 0 ? rank - 1 : MPI_PROC_NULL, right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
  int from_left = -1;
  CHECK_OK(MPI_Sendrecv(&rank, 1, MPI_INT, right, 9, &from_left, 1, MPI_INT, left, 9, MPI_COMM_WORLD, &status));
  CHECK(from_left == (rank > 0 ? rank - 1 : -1), "shift: %d from the left", from_left);
  CHECK(status.MPI_SOURCE == left, "shift: source %d", status.MPI_SOURCE);
  /* To itself. */
  int mine[4] = {1, 2, 3, 4}, back[4] = {0};
  MPI_Request to_self;
  CHECK_OK(MPI_Isend(mine, 4, MPI_INT, rank, 11, MPI_COMM_WORLD, &to_self));
  CHECK_OK(MPI_Recv(back, 4, MPI_INT, rank, 11, MPI_COMM_WORLD, &status));
  CHECK_OK(MPI_Wait(&to_self, MPI_STATUS_IGNORE));
  CHECK(memcmp(mine, back, sizeof mine) == 0 && status.MPI_SOURCE == rank, "send to self");
}

/* Probes say what is waiting; MPI_Waitany and MPI_Testall; MPI_Request_free on a send. */
static void probes_and_requests(void) {
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  int message[17];
  fill(message, 17, rank, next, 21);
  MPI_Request send;
  CHECK_OK(MPI_Isend(message, 17, MPI_INT, next, 21, MPI_COMM_WORLD, &send));
  MPI_Status status;
  CHECK_OK(MPI_Probe(MPI_ANY_SOURCE, 21, MPI_COMM_WORLD, &status));
  check_status(&status, previous, 21, 17, "MPI_Probe");
  int bytes = -1;
  CHECK_OK(MPI_Get_count(&status, MPI_DOUBLE, &bytes));
  CHECK(bytes == MPI_UNDEFINED, "68 bytes as MPI_DOUBLE: %d", bytes);
  int flag = 0;
  while (!flag) CHECK_OK(MPI_Iprobe(previous, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status));
  check_status(&status, previous, 21, 17, "MPI_Iprobe");
  int in[17];
  CHECK_OK(MPI_Recv(in, 17, MPI_INT, previous, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  check_message(in, 17, previous, rank, 21, "after probes");
  CHECK_OK(MPI_Request_free(&send));
  CHECK(send == MPI_REQUEST_NULL, "MPI_Request_free left %d", send);

  MPI_Request requests[3];
  int values[3] = {-1, -1, -1}, out[2] = {rank, rank};
  CHECK_OK(MPI_Irecv(&values[0], 1, MPI_INT, previous, 31, MPI_COMM_WORLD, &requests[0]));
  CHECK_OK(MPI_Irecv(&values[1], 1, MPI_INT, MPI_PROC_NULL, 31, MPI_COMM_WORLD, &requests[1]));
  CHECK_OK(MPI_Irecv(&values[2], 1, MPI_INT, previous, 32, MPI_COMM_WORLD, &requests[2]));
  CHECK_OK(MPI_Send(&out[0], 1, MPI_INT, next, 31, MPI_COMM_WORLD));
  CHECK_OK(MPI_Send(&out[1], 1, MPI_INT, next, 32, MPI_COMM_WORLD));
  int done[3] = {0, 0, 0};
  for (int k = 0; k < 3; ++k) {
    int index = -1;
    CHECK_OK(MPI_Waitany(3, requests, &index, &status));
    CHECK(index >= 0 && index < 3 && !done[index] && requests[index] == MPI_REQUEST_NULL, "MPI_Waitany gave %d", index);
    done[index] = 1;
    CHECK(status.MPI_SOURCE == (index == 1 ? MPI_PROC_NULL : previous), "MPI_Waitany %d: source %d", index,
          status.MPI_SOURCE);
  }
  CHECK(values[0] == previous && values[1] == -1 && values[2] == previous, "MPI_Waitany values %d %d %d", values[0],
        values[1], values[2]);
  CHECK_OK(MPI_Irecv(&values[0], 1, MPI_INT, previous, 33, MPI_COMM_WORLD, &requests[0]));
  CHECK_OK(MPI_Isend(&out[0], 1, MPI_INT, next, 33, MPI_COMM_WORLD, &requests[1]));
  flag = 0;
  while (!flag) CHECK_OK(MPI_Testall(2, requests, &flag, MPI_STATUSES_IGNORE));
  CHECK(values[0] == previous, "MPI_Testall: %d", values[0]);
}

static void refusals(void) {
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int x[10] = {0};
  char text[MPI_MAX_ERROR_STRING];
  int length, error_class;
  int rc = MPI_Send(x, 1, MPI_INT, size, 0, MPI_COMM_WORLD);
  MPI_Error_class(rc, &error_class);
  MPI_Error_string(rc, text, &length);
  CHECK(error_class == MPI_ERR_RANK && strstr(text, "MPI_Send: argument dest"), "dest %d: %s", size, text);
  rc = MPI_Send(x, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD);
  MPI_Error_class(rc, &error_class);
  CHECK(error_class == MPI_ERR_RANK, "MPI_ANY_SOURCE as dest gave class %d", error_class);
  rc = MPI_Irecv(x, 1, MPI_INT, 0, -5, MPI_COMM_WORLD, &(MPI_Request){0});
  MPI_Error_class(rc, &error_class);
  MPI_Error_string(rc, text, &length);
  CHECK(error_class == MPI_ERR_TAG && strstr(text, "MPI_Irecv: argument tag"), "tag -5: %s", text);
  /* Truncation: 10 ints into a receive of 4; the receive keeps what fits and says so. */
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  fill(x, 10, rank, next, 41);
  MPI_Request send;
  CHECK_OK(MPI_Isend(x, 10, MPI_INT, next, 41, MPI_COMM_WORLD, &send));
  int in[10] = {0};
  MPI_Status status;
  rc = MPI_Recv(in, 4, MPI_INT, previous, 41, MPI_COMM_WORLD, &status);
  MPI_Error_class(rc, &error_class);
  MPI_Error_string(rc, text, &length);
  CHECK(error_class == MPI_ERR_TRUNCATE && strstr(text, "MPI_Recv: ") == text, "truncation: class %d: %s", error_class,
        text);
  CHECK(status.MPI_ERROR == MPI_ERR_TRUNCATE, "truncation: status error %d", status.MPI_ERROR);
  check_message(in, 4, previous, rank, 41, "truncated");
  CHECK(in[4] == 0, "the receive was written past its count");
  CHECK_OK(MPI_Wait(&send, MPI_STATUS_IGNORE));
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char** argv) {
  CHECK_OK(MPI_Init(&argc, &argv));
  CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  ring();
  all_pairs();
  matching();
  proc_null_and_self();
  probes_and_requests();
  refusals();
  CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_OK(MPI_Finalize());
  printf("rank %d of %d: point_to_point ok\n", rank, size);
  return 0;
}
