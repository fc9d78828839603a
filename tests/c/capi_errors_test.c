/* Errors of the C API come back as status codes, with a message naming the call and what was
 * wrong, and the job goes on afterwards. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tnt/tnt.h"

static int rank, size;

static void fail(int line, const char* what) {
  fprintf(stderr, "rank %d: capi_errors_test.c:%d: %s (last error: %s)\n", rank, line, what, tnt_last_error());
  exit(1);
}

/* `status` must be `expected`, and the last error must contain every one of `words`. */
static void expect_error(int line, int status, int expected, const char* const* words) {
  if (status != expected) {
    fprintf(stderr, "rank %d: line %d: status %d (%s), expected %d (%s)\n", rank, line, status,
            tnt_error_string(status), expected, tnt_error_string(expected));
    fail(line, "wrong status");
  }
  for (; *words != NULL; ++words) {
    if (strstr(tnt_last_error(), *words) == NULL) {
      fprintf(stderr, "rank %d: line %d: the message lacks \"%s\"\n", rank, line, *words);
      fail(line, "message");
    }
  }
}
#define EXPECT_ERROR(call, expected, ...) \
  expect_error(__LINE__, (call), (expected), (const char* const[]){__VA_ARGS__, NULL})
#define OK(call) \
  if ((call) != TNT_SUCCESS) fail(__LINE__, #call)

int main(void) {
  tnt_comm* world;
  OK(tnt_init(&world));
  OK(tnt_comm_rank(world, &rank));
  OK(tnt_comm_size(world, &size));
  char buffer[64] = {0};
  tnt_request* request = NULL;

  EXPECT_ERROR(tnt_send(world, buffer, 8, size, 0), TNT_ERR_USAGE, "tnt_send", "peer", "not a rank");
  EXPECT_ERROR(tnt_isend(world, buffer, 8, -1, 0, &request), TNT_ERR_USAGE, "tnt_isend", "peer -1");
  EXPECT_ERROR(tnt_irecv(world, buffer, 8, size + 3, 0, &request), TNT_ERR_USAGE, "tnt_irecv", "peer");
  if (request != NULL) fail(__LINE__, "a refused call handed out a request");
  EXPECT_ERROR(tnt_send(world, buffer, 8, 0, -5), TNT_ERR_USAGE, "tnt_send", "tag -5", "negative");
  EXPECT_ERROR(tnt_recv(world, buffer, 8, 0, -2, NULL), TNT_ERR_USAGE, "tnt_recv", "tag -2");
  EXPECT_ERROR(tnt_reduce(world, buffer, buffer + 8, 1, TNT_INT32, TNT_SUM, size), TNT_ERR_USAGE, "tnt_reduce", "root");
  EXPECT_ERROR(tnt_gather(world, buffer, buffer + 8, 1, -1), TNT_ERR_USAGE, "tnt_gather", "root");
  EXPECT_ERROR(tnt_alltoallv(world, buffer, NULL, NULL, buffer, NULL, NULL), TNT_ERR_USAGE, "tnt_alltoallv",
               "one entry per rank");
  EXPECT_ERROR(tnt_allreduce(world, buffer, 1, (tnt_datatype)99, TNT_SUM), TNT_ERR_USAGE, "tnt_allreduce",
               "data type 99");
  EXPECT_ERROR(tnt_allreduce(world, buffer, 1, TNT_INT32, (tnt_op)-3), TNT_ERR_USAGE, "tnt_allreduce", "operation -3");
  EXPECT_ERROR(tnt_barrier(NULL), TNT_ERR_USAGE, "tnt_barrier", "comm is NULL");
  EXPECT_ERROR(tnt_wait(NULL, NULL), TNT_ERR_USAGE, "tnt_wait", "request is NULL");
  tnt_job bad_job = {.rank = 3, .size = 2};
  EXPECT_ERROR(tnt_init_job(&bad_job, &world), TNT_ERR_USAGE, "tnt_init_job", "rank 3 of size 2");
  EXPECT_ERROR(tnt_block(10, 2, 2, NULL, NULL), TNT_ERR_USAGE, "tnt_block", "rank 2");
  if (strcmp(tnt_error_string(TNT_ERR_JOB), "job failed") != 0) fail(__LINE__, "tnt_error_string");
  if (strcmp(tnt_error_string(12345), "unknown tnt status") != 0) fail(__LINE__, "tnt_error_string");

  /* A message larger than its receive: truncated, keeping what fits, and the job goes on. */
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  char out[16] = "0123456789abcde";
  tnt_message_status status;
  OK(tnt_isend(world, out, 16, right, 3, &request));
  EXPECT_ERROR(tnt_recv(world, buffer, 8, left, 3, &status), TNT_ERR_TRUNCATED, "tnt_recv", "truncated", "16 bytes");
  if (memcmp(buffer, out, 8) != 0) fail(__LINE__, "a truncated receive did not keep what fits");
  OK(tnt_wait(request, NULL));
  OK(tnt_request_free(request));

  /* The errors above left the job whole. */
  int sum = 1;
  OK(tnt_allreduce(world, &sum, 1, TNT_INT32, TNT_SUM));
  if (sum != size) fail(__LINE__, "allreduce after the errors");
  OK(tnt_finalize(world));
  printf("rank %d of %d: C API errors OK\n", rank, size);
  return 0;
}
