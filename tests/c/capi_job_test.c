/* tnt_init_job (a job the program starts itself, no launcher) and tnt_abort: this process forks
 * the ranks of a 3-rank job on a free port; they allreduce, then rank 2 aborts and ranks 0 and 1
 * must get TNT_ERR_JOB from their next call, naming rank 2 and its reason. */
#define _POSIX_C_SOURCE 200809L /* fork, waitpid */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tnt/tnt.h"

enum { ranks = 3 };
static const char* const reason = "stopped on purpose by capi_job_test";

static int fail(int rank, int line, const char* what) {
  fprintf(stderr, "rank %d: capi_job_test.c:%d: %s (last error: %s)\n", rank, line, what, tnt_last_error());
  return 1;
}
#define CHECK(cond, what) \
  if (!(cond)) return fail(rank, __LINE__, what)

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in address;
  memset(&address, 0, sizeof address);
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (fd < 0 || bind(fd, (struct sockaddr*)&address, sizeof address) != 0 ||
      getsockname(fd, (struct sockaddr*)&address, &length) != 0) {
    perror("capi_job_test: finding a free port");
    exit(1);
  }
  close(fd);
  return ntohs(address.sin_port);
}

static int run_rank(int rank, int port) {
  tnt_job job = {.rank = rank,
                 .size = ranks,
                 .master_addr = "127.0.0.1",
                 .master_port = port,
                 .job_id = "capi-job-test",
                 .token = "capi-job-test-token"};
  tnt_comm* world;
  CHECK(tnt_init_job(&job, &world) == TNT_SUCCESS, "tnt_init_job");
  int got_rank = -1, got_size = -1;
  CHECK(tnt_comm_rank(world, &got_rank) == TNT_SUCCESS && got_rank == rank, "rank");
  CHECK(tnt_comm_size(world, &got_size) == TNT_SUCCESS && got_size == ranks, "size");
  int sum = rank;
  CHECK(tnt_allreduce(world, &sum, 1, TNT_INT32, TNT_SUM) == TNT_SUCCESS && sum == 0 + 1 + 2, "allreduce");
  if (rank == 2) {
    CHECK(tnt_abort(world, reason) == TNT_SUCCESS, "tnt_abort");
    int status = tnt_barrier(world);
    CHECK(status == TNT_ERR_JOB, "a call after tnt_abort did not fail with TNT_ERR_JOB");
    tnt_comm_free(world);
    return 0;
  }
  /* Rank 2 never joins this barrier: it must fail, naming rank 2 and the reason, not hang. */
  int status = tnt_barrier(world);
  CHECK(status == TNT_ERR_JOB, "the barrier after rank 2's abort did not fail with TNT_ERR_JOB");
  CHECK(strstr(tnt_last_error(), "tnt_barrier") != NULL, "the message does not name the call");
  CHECK(strstr(tnt_last_error(), "rank 2") != NULL, "the message does not name rank 2");
  CHECK(strstr(tnt_last_error(), reason) != NULL, "the message does not give the reason");
  CHECK(tnt_finalize(world) == TNT_ERR_JOB, "tnt_finalize of a failed job did not fail");
  if (rank == 0) printf("rank 0: after rank 2's abort: %s\n", tnt_last_error());
  return 0;
}

int main(void) {
  const int port = free_port();
  pid_t children[ranks];
  for (int rank = 1; rank < ranks; ++rank) {
    children[rank] = fork();
    if (children[rank] == 0) _exit(run_rank(rank, port));
  }
  int status = run_rank(0, port);
  for (int rank = 1; rank < ranks; ++rank) {
    int child = 0;
    if (waitpid(children[rank], &child, 0) < 0 || !WIFEXITED(child) || WEXITSTATUS(child) != 0) {
      fprintf(stderr, "capi_job_test: rank %d failed\n", rank);
      status = 1;
    }
  }
  if (status == 0) printf("tnt_init_job and tnt_abort OK\n");
  return status;
}
