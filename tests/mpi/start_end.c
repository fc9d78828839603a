/* Start and end: MPI_Init_thread's level, the queries before and after, ranks against the
 * launcher's TNT_SIZE, COMM_SELF, version, processor name, clock, datatype sizes. */
#define _DEFAULT_SOURCE /* gethostname, usleep */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

/* The C layouts of MPI_DOUBLE_INT and MPI_2INT. */
struct double_int {
  double value;
  int index;
};
struct int_int {
  int value;
  int index;
};

int main(int argc, char** argv) {
  int flag = -1;
  CHECK_OK(MPI_Initialized(&flag));
  CHECK(flag == 0, "MPI_Initialized before MPI_Init gave %d", flag);
  int provided = -1;
  CHECK_OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
  /* tnt's Communicator takes calls from one thread at a time. */
  CHECK(provided == MPI_THREAD_SERIALIZED, "provided %d", provided);
  CHECK_OK(MPI_Initialized(&flag));
  CHECK(flag == 1, "MPI_Initialized after MPI_Init gave %d", flag);
  CHECK_OK(MPI_Finalized(&flag));
  CHECK(flag == 0, "MPI_Finalized before MPI_Finalize gave %d", flag);

  int rank = -1, size = -1;
  CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  const char* env_size = getenv("TNT_SIZE");
  const char* env_rank = getenv("TNT_RANK");
  CHECK(size == (env_size ? atoi(env_size) : 1), "size %d, TNT_SIZE %s", size, env_size ? env_size : "unset");
  CHECK(rank == (env_rank ? atoi(env_rank) : 0), "rank %d, TNT_RANK %s", rank, env_rank ? env_rank : "unset");

  int self_rank = -1, self_size = -1, compared = -1;
  CHECK_OK(MPI_Comm_rank(MPI_COMM_SELF, &self_rank));
  CHECK_OK(MPI_Comm_size(MPI_COMM_SELF, &self_size));
  CHECK(self_rank == 0 && self_size == 1, "COMM_SELF: rank %d of %d", self_rank, self_size);
  CHECK_OK(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &compared));
  CHECK(compared == MPI_IDENT, "WORLD vs WORLD: %d", compared);
  CHECK_OK(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_SELF, &compared));
  CHECK(compared == (size == 1 ? MPI_CONGRUENT : MPI_UNEQUAL), "WORLD vs SELF on %d ranks: %d", size, compared);
  double one = 1, sum = 0;
  CHECK_OK(MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF));
  CHECK(sum == 1, "allreduce on COMM_SELF gave %g", sum);

  int version = 0, subversion = -1;
  CHECK_OK(MPI_Get_version(&version, &subversion));
  CHECK(version == MPI_VERSION && subversion == MPI_SUBVERSION, "version %d.%d", version, subversion);

  char name[MPI_MAX_PROCESSOR_NAME], host[MPI_MAX_PROCESSOR_NAME] = {0};
  int length = -1;
  CHECK_OK(MPI_Get_processor_name(name, &length));
  gethostname(host, sizeof host - 1);
  CHECK(strcmp(name, host) == 0 && length == (int)strlen(host), "processor name '%s' (%d), host '%s'", name, length,
        host);

  const double tick = MPI_Wtick();
  CHECK(tick > 0 && tick <= 1e-6, "MPI_Wtick %g", tick);
  const double start = MPI_Wtime();
  usleep(20000);
  const double elapsed = MPI_Wtime() - start;
  CHECK(elapsed >= 0.019 && elapsed < 5, "20 ms measured as %g s", elapsed);

  struct {
    MPI_Datatype type;
    int size;
  } sizes[] = {{MPI_CHAR, 1},
               {MPI_BYTE, 1},
               {MPI_INT, sizeof(int)},
               {MPI_UNSIGNED, sizeof(unsigned)},
               {MPI_LONG, sizeof(long)},
               {MPI_UNSIGNED_LONG, sizeof(unsigned long)},
               {MPI_LONG_LONG, sizeof(long long)},
               {MPI_FLOAT, sizeof(float)},
               {MPI_DOUBLE, sizeof(double)},
               {MPI_INT8_T, 1},
               {MPI_INT16_T, 2},
               {MPI_INT32_T, 4},
               {MPI_INT64_T, 8},
               {MPI_UINT8_T, 1},
               {MPI_UINT16_T, 2},
               {MPI_UINT32_T, 4},
               {MPI_UINT64_T, 8},
               {MPI_DOUBLE_INT, sizeof(struct double_int)},
               {MPI_2INT, sizeof(struct int_int)}};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    int type_size = -1;
    CHECK_OK(MPI_Type_size(sizes[i].type, &type_size));
    CHECK(type_size == sizes[i].size, "datatype %zu: MPI_Type_size %d, sizeof %d", i, type_size, sizes[i].size);
  }

  CHECK_OK(MPI_Finalize());
  CHECK_OK(MPI_Finalized(&flag));
  CHECK(flag == 1, "MPI_Finalized after MPI_Finalize gave %d", flag);
  CHECK_OK(MPI_Initialized(&flag));
  CHECK(flag == 1, "MPI_Initialized after MPI_Finalize gave %d", flag);
  printf("rank %d of %d: start_end ok\n", rank, size);
  return 0;
}
