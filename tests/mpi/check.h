/* The MPI layer's test programs: a failed check names the rank, the place and the condition and
 * ends the job with MPI_Abort, so that tnt-launch (and the test) fails. */
#ifndef TNT_TESTS_MPI_CHECK_H
#define TNT_TESTS_MPI_CHECK_H
#include <mpi.h>
#include <stdio.h>

static int check_rank(void) {
  int initialized = 0, finalized = 0, rank = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

#define CHECK(condition, ...)                                                                              \
  do {                                                                                                     \
    if (!(condition)) {                                                                                    \
      fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", check_rank(), __FILE__, __LINE__, #condition); \
      fprintf(stderr, __VA_ARGS__);                                                                        \
      fprintf(stderr, "\n");                                                                               \
      MPI_Abort(MPI_COMM_WORLD, 3);                                                                        \
    }                                                                                                      \
  } while (0)

#define CHECK_OK(call) CHECK((call) == MPI_SUCCESS, "%s", #call)

#endif
