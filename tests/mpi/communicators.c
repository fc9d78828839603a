/* Communicators: MPI_Comm_dup isolates traffic with the same tags, MPI_Comm_split by colour and
 * (reversed) key gives the ranks and groups a serial computation expects, collectives and
 * point-to-point work on the parts, MPI_UNDEFINED gives MPI_COMM_NULL, MPI_Comm_compare tells
 * the relations apart, MPI_Comm_free ends a handle. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int rank, size;

static void dup(void) {
  MPI_Comm copy;
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  CHECK_OK(MPI_Comm_dup(MPI_COMM_WORLD, &copy));
  MPI_Errhandler handler;
  CHECK_OK(MPI_Comm_get_errhandler(copy, &handler));
  CHECK(handler == MPI_ERRORS_RETURN, "a dup does not inherit the error handler: 0x%x", handler);
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  CHECK_OK(MPI_Comm_set_errhandler(copy, MPI_ERRORS_ARE_FATAL));
  int result = -1, copy_rank = -1, copy_size = -1;
  CHECK_OK(MPI_Comm_compare(MPI_COMM_WORLD, copy, &result));
  CHECK(result == MPI_CONGRUENT, "WORLD vs its dup: %d", result);
  CHECK_OK(MPI_Comm_rank(copy, &copy_rank));
  CHECK_OK(MPI_Comm_size(copy, &copy_size));
  CHECK(copy_rank == rank && copy_size == size, "dup: rank %d of %d", copy_rank, copy_size);
  /* The same tag on both: each receive gets its own communicator's message, whichever is first. */
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  int on_world = 1000 + rank, on_copy = 2000 + rank, got_world = -1, got_copy = -1;
  MPI_Request requests[2];
  CHECK_OK(MPI_Isend(&on_world, 1, MPI_INT, next, 5, MPI_COMM_WORLD, &requests[0]));
  CHECK_OK(MPI_Isend(&on_copy, 1, MPI_INT, next, 5, copy, &requests[1]));
  CHECK_OK(MPI_Recv(&got_copy, 1, MPI_INT, previous, 5, copy, MPI_STATUS_IGNORE));
  CHECK_OK(MPI_Recv(&got_world, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  CHECK_OK(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE));
  CHECK(got_copy == 2000 + previous && got_world == 1000 + previous, "dup's traffic mixed: %d %d", got_copy, got_world);
  /* A collective in flight on the world while the dup runs its own. */
  double x = rank, sum = 0, y = 1, count = 0;
  MPI_Request world_sum;
  CHECK_OK(MPI_Iallreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &world_sum));
  CHECK_OK(MPI_Allreduce(&y, &count, 1, MPI_DOUBLE, MPI_SUM, copy));
  CHECK_OK(MPI_Wait(&world_sum, MPI_STATUS_IGNORE));
  CHECK(sum == size * (size - 1) / 2.0 && count == size, "world %g, dup %g", sum, count);
  CHECK_OK(MPI_Comm_free(&copy));
  CHECK(copy == MPI_COMM_NULL, "MPI_Comm_free left 0x%x", copy);
}

static void split(void) {
  /* Colours by rank % 2, keys reversed: in each part the highest world rank is rank 0. */
  const int color = rank % 2;
  MPI_Comm part;
  CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, color, -rank, &part));
  int expected_size = 0, expected_rank = 0, expected_sum = 0, highest = -1;
  for (int r = 0; r < size; ++r) {
    if (r % 2 != color) continue;
    ++expected_size;
    expected_sum += r;
    if (r > rank) ++expected_rank;
    if (r > highest) highest = r;
  }
  int part_rank = -1, part_size = -1;
  CHECK_OK(MPI_Comm_rank(part, &part_rank));
  CHECK_OK(MPI_Comm_size(part, &part_size));
  CHECK(part_rank == expected_rank && part_size == expected_size, "split: rank %d of %d, expected %d of %d", part_rank,
        part_size, expected_rank, expected_size);
  int sum = -1;
  CHECK_OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, part));
  CHECK(sum == expected_sum, "allreduce on the part: %d, expected %d", sum, expected_sum);
  int root_value = rank;
  CHECK_OK(MPI_Bcast(&root_value, 1, MPI_INT, 0, part));
  CHECK(root_value == highest, "bcast from the part's rank 0: %d, expected world rank %d", root_value, highest);
  int from = -1;
  CHECK_OK(MPI_Sendrecv(&rank, 1, MPI_INT, (part_rank + 1) % part_size, 3, &from, 1, MPI_INT,
                        (part_rank + part_size - 1) % part_size, 3, part, MPI_STATUS_IGNORE));
  /* The part's previous rank is the next higher world rank of the colour (wrapping to the lowest). */
  int expected_from = rank;
  for (int r = rank + 2; r < size; r += 2) {
    expected_from = r;
    break;
  }
  if (expected_from == rank) expected_from = color;
  CHECK(from == expected_from, "sendrecv on the part: %d, expected %d", from, expected_from);
  int result = -1;
  CHECK_OK(MPI_Comm_compare(part, MPI_COMM_WORLD, &result));
  CHECK(result == (size == 1 ? MPI_CONGRUENT : MPI_UNEQUAL), "part vs WORLD: %d", result);
  CHECK_OK(MPI_Comm_free(&part));

  /* One colour, keys reversed: the same group in another order; keys equal: WORLD's order. */
  MPI_Comm reversed, same;
  CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, 7, -rank, &reversed));
  CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, 7, 0, &same));
  CHECK_OK(MPI_Comm_compare(reversed, MPI_COMM_WORLD, &result));
  CHECK(result == (size == 1 ? MPI_CONGRUENT : MPI_SIMILAR), "reversed vs WORLD: %d", result);
  CHECK_OK(MPI_Comm_compare(same, MPI_COMM_WORLD, &result));
  CHECK(result == MPI_CONGRUENT, "same order vs WORLD: %d", result);
  CHECK_OK(MPI_Comm_free(&reversed));
  CHECK_OK(MPI_Comm_free(&same));

  /* MPI_UNDEFINED: no communicator for rank 0. */
  MPI_Comm rest;
  CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 1, rank, &rest));
  if (rank == 0) {
    CHECK(rest == MPI_COMM_NULL, "MPI_UNDEFINED gave 0x%x", rest);
  } else {
    int rest_size = -1;
    CHECK_OK(MPI_Comm_size(rest, &rest_size));
    CHECK(rest_size == size - 1, "the rest has %d ranks", rest_size);
    CHECK_OK(MPI_Comm_free(&rest));
  }
}

static void refusals(void) {
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_Comm world = MPI_COMM_WORLD, freed;
  int error_class = -1;
  MPI_Error_class(MPI_Comm_free(&world), &error_class);
  CHECK(error_class == MPI_ERR_COMM, "freeing MPI_COMM_WORLD gave class %d", error_class);
  CHECK_OK(MPI_Comm_dup(MPI_COMM_WORLD, &freed));
  const MPI_Comm stale = freed;
  CHECK_OK(MPI_Comm_free(&freed));
  MPI_Error_class(MPI_Barrier(stale), &error_class);
  CHECK(error_class == MPI_ERR_COMM, "a freed communicator gave class %d", error_class);
  MPI_Comm part;
  MPI_Error_class(MPI_Comm_split(MPI_COMM_WORLD, -3, 0, &part), &error_class);
  CHECK(error_class == MPI_ERR_ARG, "colour -3 gave class %d", error_class);
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char** argv) {
  CHECK_OK(MPI_Init(&argc, &argv));
  CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  dup();
  split();
  refusals();
  CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_OK(MPI_Finalize());
  printf("rank %d of %d: communicators ok\n", rank, size);
  return 0;
}
