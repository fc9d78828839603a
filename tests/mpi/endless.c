/* A job that never ends by itself: ring exchanges and allreduces until the rank named by the
 * first argument kills itself with SIGKILL after 300 rounds (kill_test.sh checks that every other
 * rank then ends with tnt's named error). It first writes the time of the kill (CLOCK_REALTIME,
 * seconds) to the file named by the second argument. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"

int main(int argc, char** argv) {
  CHECK_OK(MPI_Init(&argc, &argv));
  int rank, size;
  CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(argc == 3, "usage: endless VICTIM_RANK KILL_TIME_FILE");
  const int victim = atoi(argv[1]);
  for (long round = 0;; ++round) {
    if (rank == victim && round == 300) {
      struct timespec now;
      clock_gettime(CLOCK_REALTIME, &now);
      FILE* file = fopen(argv[2], "w");
      CHECK(file != NULL, "cannot write %s", argv[2]);
      fprintf(file, "%ld.%09ld\n", (long)now.tv_sec, now.tv_nsec);
      fclose(file);
      raise(SIGKILL);
    }
    int out = rank, in = -1;
    CHECK_OK(MPI_Sendrecv(&out, 1, MPI_INT, (rank + 1) % size, 0, &in, 1, MPI_INT, (rank + size - 1) % size, 0,
                          MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    double x = 1, sum = 0;
    CHECK_OK(MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  }
}
