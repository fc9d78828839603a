/* Every function of tnt/tnt.h against a serial reference, on however many ranks tnt-launch
 * starts (the tests run 2 and 4). Each rank's inputs are a function of (rank, index), so every
 * rank can compute what any collective must give by folding the ranks' inputs in rank order.
 * Values are small integers (also as doubles), whose sums are exact in any order. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tnt/tnt.h"

static int rank, size;
static unsigned ranks; /* size, for sizes of arrays */

#define OK(call)                                                                                                    \
  do {                                                                                                              \
    int status_ = (call);                                                                                           \
    if (status_ != TNT_SUCCESS) {                                                                                   \
      fprintf(stderr, "rank %d: %s:%d: %s -> %s: %s\n", rank, __FILE__, __LINE__, #call, tnt_error_string(status_), \
              tnt_last_error());                                                                                    \
      exit(1);                                                                                                      \
    }                                                                                                               \
  } while (0)

#define EXPECT(cond, ...)                                                              \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      fprintf(stderr, "rank %d: %s:%d: %s failed: ", rank, __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                    \
      fprintf(stderr, "\n");                                                           \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

/* Rank r's input element i. */
static int32_t value(int r, size_t i) { return (int32_t)((r + 1) * 7 + (int32_t)i * 3 - 11 * (int32_t)(i % 5)); }

/* Waits for a collective started in its nonblocking form, then frees it. */
static void finish(tnt_request* request) {
  OK(tnt_wait(request, NULL));
  OK(tnt_request_free(request));
}

static void test_point_to_point(tnt_comm* comm) {
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  enum { n = 1000 };
  int32_t out[n], in[n];
  for (size_t i = 0; i < n; ++i) out[i] = value(rank, i);
  tnt_message_status status;

  /* Blocking ring shift: even ranks send first, odd ranks receive first. */
  if (rank % 2 == 0) {
    OK(tnt_send(comm, out, sizeof out, right, 1));
    OK(tnt_recv(comm, in, sizeof in, left, 1, &status));
  } else {
    OK(tnt_recv(comm, in, sizeof in, left, 1, &status));
    OK(tnt_send(comm, out, sizeof out, right, 1));
  }
  EXPECT(status.source == left && status.tag == 1 && status.bytes == sizeof in, "recv status %d %d %zu", status.source,
         status.tag, status.bytes);
  for (size_t i = 0; i < n; ++i) EXPECT(in[i] == value(left, i), "recv element %zu", i);

  /* sendrecv the other way, from any source. (Not any tag as well: the left neighbour may
   * already have sent its next message, tag 3, which would match just as well.) */
  memset(in, 0, sizeof in);
  OK(tnt_sendrecv(comm, out, 40, left, 2, in, sizeof in, TNT_ANY_SOURCE, 2, &status));
  EXPECT(status.source == right && status.tag == 2 && status.bytes == 40, "sendrecv status %d %d %zu", status.source,
         status.tag, status.bytes);
  for (size_t i = 0; i < 10; ++i) EXPECT(in[i] == value(right, i), "sendrecv element %zu", i);

  /* Synchronous sends, blocking and not, against a receive posted first. */
  tnt_request* receive;
  OK(tnt_irecv(comm, in, sizeof in, left, 3, &receive));
  if (rank % 2 == 0) {
    OK(tnt_ssend(comm, out, 8, right, 3));
  } else {
    tnt_request* send;
    OK(tnt_issend(comm, out, 8, right, 3, &send));
    OK(tnt_wait(send, &status));
    EXPECT(status.source == rank && status.tag == 3 && status.bytes == 8, "issend status");
    OK(tnt_request_free(send));
  }
  OK(tnt_wait(receive, &status));
  EXPECT(status.source == left && status.bytes == 8, "irecv after ssend");
  OK(tnt_request_status(receive, &status));
  EXPECT(status.source == left && status.tag == 3 && status.bytes == 8, "tnt_request_status");
  EXPECT(in[0] == value(left, 0) && in[1] == value(left, 1), "ssend payload");
  OK(tnt_request_free(receive));

  /* probe and iprobe see the size before the receive. */
  OK(tnt_send(comm, out, 12 * sizeof(int32_t), right, 4));
  OK(tnt_probe(comm, TNT_ANY_SOURCE, 4, &status));
  EXPECT(status.source == left && status.tag == 4 && status.bytes == 48, "probe %d %d %zu", status.source, status.tag,
         status.bytes);
  OK(tnt_recv(comm, in, status.bytes, status.source, status.tag, NULL));
  OK(tnt_send(comm, out, 5, right, 5));
  int found = 0;
  while (!found) OK(tnt_iprobe(comm, left, TNT_ANY_TAG, &found, &status));
  EXPECT(status.tag == 5 && status.bytes == 5, "iprobe");
  OK(tnt_iprobe(comm, left, 99, &found, &status));
  EXPECT(!found, "iprobe found a message never sent");
  OK(tnt_recv(comm, in, 5, left, 5, NULL));

  /* Self-send, and a 0-byte message. */
  int32_t self = -1;
  OK(tnt_isend(comm, &out[7], sizeof(int32_t), rank, 6, &receive));
  OK(tnt_recv(comm, &self, sizeof self, rank, 6, NULL));
  finish(receive);
  EXPECT(self == value(rank, 7), "self-send");
  OK(tnt_sendrecv(comm, NULL, 0, right, 7, NULL, 0, left, 7, &status));
  EXPECT(status.bytes == 0 && status.source == left, "0-byte sendrecv");
}

/* Every rank sends a message to every rank (itself included); the receiver collects them with
 * waitany, testany, testall and waitall. */
static void test_requests(tnt_comm* comm) {
  int32_t* box = calloc(ranks, sizeof(int32_t));
  tnt_request** receives = calloc(ranks + 1, sizeof(tnt_request*)); /* last stays NULL */
  tnt_request** sends = calloc(ranks, sizeof(tnt_request*));
  int32_t mine = value(rank, 42);
  for (int p = 0; p < size; ++p) OK(tnt_irecv(comm, &box[p], sizeof(int32_t), p, 10, &receives[p]));
  int done = 1;
  OK(tnt_testall((size_t)size, receives, &done));
  /* Nothing was sent yet, so the receives from other ranks cannot have finished. */
  EXPECT(size == 1 || !done, "testall before any send");
  for (int p = 0; p < size; ++p) OK(tnt_isend(comm, &mine, sizeof mine, p, 10, &sends[p]));

  int* seen = calloc(ranks, sizeof(int));
  for (int k = 0; k < size; ++k) {
    size_t index = 0;
    if (k % 2 == 0) {
      OK(tnt_waitany((size_t)size + 1, receives, &index));
    } else {
      int found = 0;
      while (!found) OK(tnt_testany((size_t)size + 1, receives, &found, &index));
    }
    EXPECT(index < (size_t)size && !seen[index], "waitany/testany gave %zu", index);
    seen[index] = 1;
    tnt_message_status status;
    int finished = 0;
    OK(tnt_test(receives[index], &finished, &status));
    EXPECT(finished && status.source == (int)index, "tnt_test on a finished receive");
    EXPECT(box[index] == value((int)index, 42), "message from %zu", index);
    OK(tnt_request_free(receives[index]));
    receives[index] = NULL;
  }
  size_t index = 0;
  OK(tnt_waitany((size_t)size + 1, receives, &index));
  EXPECT(index == (size_t)size + 1, "waitany over no valid request gave %zu", index);
  OK(tnt_waitall((size_t)size, sends));
  OK(tnt_testall((size_t)size, sends, &done));
  EXPECT(done, "testall after waitall");
  for (int p = 0; p < size; ++p) OK(tnt_request_free(sends[p]));
  free(seen);
  free(sends);
  free(receives);
  free(box);
}

static void test_reductions(tnt_comm* comm, int nonblocking) {
  enum { n = 37 };
  int32_t ints[n], expect_sum[n];
  double doubles[n], expect_max[n];
  for (size_t i = 0; i < n; ++i) {
    ints[i] = value(rank, i);
    doubles[i] = (double)value(rank, i) * 0.5;
    expect_sum[i] = 0;
    expect_max[i] = -1e300;
    for (int r = 0; r < size; ++r) {
      expect_sum[i] += value(r, i);
      if ((double)value(r, i) * 0.5 > expect_max[i]) expect_max[i] = (double)value(r, i) * 0.5;
    }
  }
  tnt_request* request;
  if (nonblocking) {
    OK(tnt_iallreduce(comm, ints, n, TNT_INT32, TNT_SUM, &request));
    finish(request);
    OK(tnt_iallreduce(comm, doubles, n, TNT_FLOAT64, TNT_MAX, &request));
    finish(request);
  } else {
    OK(tnt_allreduce(comm, ints, n, TNT_INT32, TNT_SUM));
    OK(tnt_allreduce(comm, doubles, n, TNT_FLOAT64, TNT_MAX));
  }
  for (size_t i = 0; i < n; ++i) EXPECT(ints[i] == expect_sum[i], "allreduce sum [%zu]", i);
  for (size_t i = 0; i < n; ++i) EXPECT(doubles[i] == expect_max[i], "allreduce max [%zu]", i);

  /* MINLOC over (value, index) pairs: the smallest value, its smallest index on a tie. */
  struct {
    double value;
    int32_t index;
  } pair = {(double)(rank % 2), rank};
  OK(tnt_allreduce(comm, &pair, 1, TNT_FLOAT64_INT32, TNT_MINLOC));
  EXPECT(pair.value == 0.0 && pair.index == 0, "minloc gave (%g, %d)", pair.value, pair.index);

  /* reduce to every root, product of int64. */
  for (int root = 0; root < size; ++root) {
    int64_t mine[3] = {rank + 1, -(rank + 2), 2}, result[3] = {0, 0, 0}, expect[3] = {1, 1, 1};
    for (int r = 0; r < size; ++r) {
      expect[0] *= r + 1;
      expect[1] *= -(r + 2);
      expect[2] *= 2;
    }
    if (nonblocking) {
      OK(tnt_ireduce(comm, mine, result, 3, TNT_INT64, TNT_PROD, root, &request));
      finish(request);
    } else {
      OK(tnt_reduce(comm, mine, result, 3, TNT_INT64, TNT_PROD, root));
    }
    if (rank == root)
      for (int i = 0; i < 3; ++i) EXPECT(result[i] == expect[i], "reduce prod root %d [%d]", root, i);
  }

  /* scan and exscan of uint32 bitwise or / sum. */
  uint32_t bits = 1u << rank, scanned = 0, exscanned = 12345;
  if (nonblocking) {
    OK(tnt_iscan(comm, &bits, &scanned, 1, TNT_UINT32, TNT_BOR, &request));
    finish(request);
    OK(tnt_iexscan(comm, &bits, &exscanned, 1, TNT_UINT32, TNT_SUM, &request));
    finish(request);
  } else {
    OK(tnt_scan(comm, &bits, &scanned, 1, TNT_UINT32, TNT_BOR));
    OK(tnt_exscan(comm, &bits, &exscanned, 1, TNT_UINT32, TNT_SUM));
  }
  EXPECT(scanned == (1u << (rank + 1)) - 1, "scan gave %u", scanned);
  if (rank == 0) {
    EXPECT(exscanned == 12345, "exscan changed rank 0's recv");
  } else {
    EXPECT(exscanned == (1u << rank) - 1, "exscan gave %u", exscanned);
  }

  /* reduce_scatter_block in place, with tnt_block's blocks. */
  enum { m = 11 };
  int32_t data[m];
  for (size_t i = 0; i < m; ++i) data[i] = value(rank, i);
  if (nonblocking) {
    OK(tnt_ireduce_scatter_block(comm, data, m, TNT_INT32, TNT_SUM, &request));
    finish(request);
  } else {
    OK(tnt_reduce_scatter_block(comm, data, m, TNT_INT32, TNT_SUM));
  }
  size_t offset, count;
  OK(tnt_block(m, size, rank, &offset, &count));
  EXPECT(count == m / (size_t)size + ((size_t)rank < m % (size_t)size), "block count %zu", count);
  for (size_t i = offset; i < offset + count; ++i) {
    int32_t expect = 0;
    for (int r = 0; r < size; ++r) expect += value(r, i);
    EXPECT(data[i] == expect, "reduce_scatter_block [%zu]", i);
  }

  /* reduce_scatter with uneven counts (rank r gets r elements, so rank 0 gets none). */
  size_t* counts = malloc(ranks * sizeof(size_t));
  size_t total = 0, before = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = (size_t)r;
    if (r < rank) before += (size_t)r;
    total += (size_t)r;
  }
  int16_t* send = malloc(total * sizeof(int16_t) + 1);
  int16_t recv[8] = {0};
  for (size_t i = 0; i < total; ++i) send[i] = (int16_t)value(rank, i);
  if (nonblocking) {
    OK(tnt_ireduce_scatter(comm, send, recv, counts, TNT_INT16, TNT_MIN, &request));
    finish(request);
  } else {
    OK(tnt_reduce_scatter(comm, send, recv, counts, TNT_INT16, TNT_MIN));
  }
  for (size_t i = 0; i < counts[rank]; ++i) {
    int16_t expect = (int16_t)value(0, before + i);
    for (int r = 1; r < size; ++r)
      if ((int16_t)value(r, before + i) < expect) expect = (int16_t)value(r, before + i);
    EXPECT(recv[i] == expect, "reduce_scatter min [%zu]", i);
  }
  free(send);
  free(counts);
}

/* Byte pattern of block (from, to, i). */
static uint8_t byte(int from, int to, size_t i) { return (uint8_t)(from * 31 + to * 7 + (int)i); }

static void test_movement(tnt_comm* comm, int nonblocking) {
  const size_t block = 13, p = ranks;
  uint8_t* send = malloc(p * block + 64);
  uint8_t* recv = malloc(p * block + 64);
  tnt_request* request;

  /* broadcast from every root */
  for (int root = 0; root < size; ++root) {
    for (size_t i = 0; i < block; ++i) recv[i] = rank == root ? byte(root, 0, i) : 0;
    if (nonblocking) {
      OK(tnt_ibroadcast(comm, recv, block, root, &request));
      finish(request);
    } else {
      OK(tnt_broadcast(comm, recv, block, root));
    }
    for (size_t i = 0; i < block; ++i) EXPECT(recv[i] == byte(root, 0, i), "broadcast root %d", root);
  }

  /* allgather */
  for (size_t i = 0; i < block; ++i) send[i] = byte(rank, 0, i);
  memset(recv, 0, p * block);
  if (nonblocking) {
    OK(tnt_iallgather(comm, send, recv, block, &request));
    finish(request);
  } else {
    OK(tnt_allgather(comm, send, recv, block));
  }
  for (size_t r = 0; r < p; ++r)
    for (size_t i = 0; i < block; ++i) EXPECT(recv[r * block + i] == byte((int)r, 0, i), "allgather");

  /* alltoall */
  for (size_t to = 0; to < p; ++to)
    for (size_t i = 0; i < block; ++i) send[to * block + i] = byte(rank, (int)to, i);
  memset(recv, 0, p * block);
  if (nonblocking) {
    OK(tnt_ialltoall(comm, send, recv, block, &request));
    finish(request);
  } else {
    OK(tnt_alltoall(comm, send, recv, block));
  }
  for (size_t from = 0; from < p; ++from)
    for (size_t i = 0; i < block; ++i) EXPECT(recv[from * block + i] == byte((int)from, rank, i), "alltoall");

  /* gather and scatter at every root */
  for (int root = 0; root < size; ++root) {
    for (size_t i = 0; i < block; ++i) send[i] = byte(rank, root, i);
    memset(recv, 0, p * block);
    if (nonblocking) {
      OK(tnt_igather(comm, send, recv, block, root, &request));
      finish(request);
    } else {
      OK(tnt_gather(comm, send, recv, block, root));
    }
    if (rank == root)
      for (size_t r = 0; r < p; ++r)
        for (size_t i = 0; i < block; ++i) EXPECT(recv[r * block + i] == byte((int)r, root, i), "gather");

    for (size_t to = 0; to < p; ++to)
      for (size_t i = 0; i < block; ++i) send[to * block + i] = rank == root ? byte(root, (int)to, i) : 0;
    memset(recv, 0, block);
    if (nonblocking) {
      OK(tnt_iscatter(comm, send, recv, block, root, &request));
      finish(request);
    } else {
      OK(tnt_scatter(comm, send, recv, block, root));
    }
    for (size_t i = 0; i < block; ++i) EXPECT(recv[i] == byte(root, rank, i), "scatter root %d", root);
  }

  /* The *v forms: rank r's piece for rank s is (r + s) % 3 bytes (zeros included), packed. */
  size_t *sb = calloc(p, sizeof(size_t)), *so = calloc(p, sizeof(size_t));
  size_t *rb = calloc(p, sizeof(size_t)), *ro = calloc(p, sizeof(size_t));
  size_t send_total = 0, recv_total = 0;
  for (size_t s = 0; s < p; ++s) {
    sb[s] = ((size_t)rank + s) % 3;
    so[s] = send_total;
    send_total += sb[s];
    rb[s] = ((size_t)rank + s) % 3;
    ro[s] = recv_total;
    recv_total += rb[s];
  }
  for (size_t s = 0; s < p; ++s)
    for (size_t i = 0; i < sb[s]; ++i) send[so[s] + i] = byte(rank, (int)s, i);
  memset(recv, 0, recv_total + 1);
  if (nonblocking) {
    OK(tnt_ialltoallv(comm, send, sb, so, recv, rb, ro, &request));
    finish(request);
  } else {
    OK(tnt_alltoallv(comm, send, sb, so, recv, rb, ro));
  }
  for (size_t s = 0; s < p; ++s)
    for (size_t i = 0; i < rb[s]; ++i) EXPECT(recv[ro[s] + i] == byte((int)s, rank, i), "alltoallv from %zu", s);

  /* allgatherv and gatherv: rank r contributes r % 3 bytes, stored in reverse rank order. */
  size_t offset = 0;
  for (size_t r = p; r-- > 0;) {
    rb[r] = r % 3;
    ro[r] = offset;
    offset += rb[r];
  }
  for (size_t i = 0; i < (size_t)rank % 3; ++i) send[i] = byte(rank, 9, i);
  memset(recv, 0, offset + 1);
  if (nonblocking) {
    OK(tnt_iallgatherv(comm, send, (size_t)rank % 3, recv, rb, ro, &request));
    finish(request);
  } else {
    OK(tnt_allgatherv(comm, send, (size_t)rank % 3, recv, rb, ro));
  }
  for (size_t r = 0; r < p; ++r)
    for (size_t i = 0; i < rb[r]; ++i) EXPECT(recv[ro[r] + i] == byte((int)r, 9, i), "allgatherv");
  for (int root = 0; root < size; ++root) {
    memset(recv, 0, offset + 1);
    if (nonblocking) {
      OK(tnt_igatherv(comm, send, (size_t)rank % 3, recv, rb, ro, root, &request));
      finish(request);
    } else {
      OK(tnt_gatherv(comm, send, (size_t)rank % 3, recv, rb, ro, root));
    }
    if (rank == root)
      for (size_t r = 0; r < p; ++r)
        for (size_t i = 0; i < rb[r]; ++i) EXPECT(recv[ro[r] + i] == byte((int)r, 9, i), "gatherv root %d", root);

    /* scatterv: root's piece for rank s is s % 3 bytes at ro[s]. */
    for (size_t s = 0; s < p; ++s)
      for (size_t i = 0; i < rb[s]; ++i) send[ro[s] + i] = byte(root, (int)s, i);
    memset(recv, 0, 4);
    if (nonblocking) {
      OK(tnt_iscatterv(comm, send, rb, ro, recv, (size_t)rank % 3, root, &request));
      finish(request);
    } else {
      OK(tnt_scatterv(comm, send, rb, ro, recv, (size_t)rank % 3, root));
    }
    for (size_t i = 0; i < (size_t)rank % 3; ++i) EXPECT(recv[i] == byte(root, rank, i), "scatterv root %d", root);
    for (size_t i = 0; i < (size_t)rank % 3; ++i) send[i] = byte(rank, 9, i); /* restore for gatherv */
  }
  free(sb);
  free(so);
  free(rb);
  free(ro);
  free(send);
  free(recv);
}

static void test_communicators(tnt_comm* world) {
  tnt_comm* dup;
  OK(tnt_comm_dup(world, &dup));
  int dup_rank, dup_size;
  OK(tnt_comm_rank(dup, &dup_rank));
  OK(tnt_comm_size(dup, &dup_size));
  EXPECT(dup_rank == rank && dup_size == size, "dup");
  /* The same tag on the world and the dup: each receive gets its own communicator's message. */
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  int32_t on_world = 1000 + rank, on_dup = 2000 + rank, got_world = 0, got_dup = 0;
  tnt_request* r[4];
  OK(tnt_irecv(dup, &got_dup, 4, left, 0, &r[0]));
  OK(tnt_irecv(world, &got_world, 4, left, 0, &r[1]));
  OK(tnt_isend(world, &on_world, 4, right, 0, &r[2]));
  OK(tnt_isend(dup, &on_dup, 4, right, 0, &r[3]));
  OK(tnt_waitall(4, r));
  for (int i = 0; i < 4; ++i) OK(tnt_request_free(r[i]));
  EXPECT(got_world == 1000 + left && got_dup == 2000 + left, "dup isolation: %d %d", got_world, got_dup);

  /* Split by parity, keys reversed. */
  tnt_comm* half;
  OK(tnt_comm_split(world, rank % 2, -rank, &half));
  EXPECT(half != NULL, "split gave no communicator");
  int half_rank, half_size;
  OK(tnt_comm_rank(half, &half_rank));
  OK(tnt_comm_size(half, &half_size));
  const int expect_size = (size - rank % 2 + 1) / 2;
  EXPECT(half_size == expect_size, "split size %d", half_size);
  EXPECT(half_rank == expect_size - 1 - rank / 2, "split rank %d", half_rank);
  int64_t sum = rank;
  OK(tnt_allreduce(half, &sum, 1, TNT_INT64, TNT_SUM));
  int64_t expect = 0;
  for (int q = rank % 2; q < size; q += 2) expect += q;
  EXPECT(sum == expect, "allreduce on a split: %lld", (long long)sum);
  tnt_message_status status;
  int32_t token = rank, got = -1;
  const int next = (half_rank + 1) % half_size, previous = (half_rank + half_size - 1) % half_size;
  OK(tnt_sendrecv(half, &token, 4, next, 1, &got, 4, previous, 1, &status));
  EXPECT(status.source == previous && got == rank + 2 * (half_rank == 0 ? -(half_size - 1) : 1),
         "sendrecv on a split got %d", got);
  OK(tnt_barrier(half));

  tnt_comm* none = (tnt_comm*)&none;
  OK(tnt_comm_split(world, rank == 0 ? -1 : 0, 0, &none));
  EXPECT((rank == 0) == (none == NULL), "negative color");
  OK(tnt_comm_free(none));
  OK(tnt_comm_free(half));
  OK(tnt_comm_free(dup));
}

int main(void) {
  tnt_comm* world;
  OK(tnt_init(&world));
  OK(tnt_comm_rank(world, &rank));
  OK(tnt_comm_size(world, &size));
  ranks = (unsigned)size;
  EXPECT(strcmp(tnt_error_string(TNT_SUCCESS), "success") == 0, "tnt_error_string");
  EXPECT(strcmp(tnt_last_error(), "") == 0, "a last error before any failure");

  /* A second tnt_init in one process is the same world. */
  tnt_comm* again;
  OK(tnt_init(&again));
  int again_size;
  OK(tnt_comm_size(again, &again_size));
  EXPECT(again_size == size, "second tnt_init");
  OK(tnt_comm_free(again));

  test_point_to_point(world);
  test_requests(world);
  for (int nonblocking = 0; nonblocking < 2; ++nonblocking) {
    test_reductions(world, nonblocking);
    test_movement(world, nonblocking);
  }
  test_communicators(world);
  tnt_request* barrier;
  OK(tnt_ibarrier(world, &barrier));
  finish(barrier);
  OK(tnt_barrier(world));
  OK(tnt_finalize(world));
  printf("rank %d of %d: C API OK\n", rank, size);
  return 0;
}
