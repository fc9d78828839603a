/* Errors under MPI_ERRORS_RETURN: a datatype handle and an op handle the layer does not know,
 * passed to provided functions, come back as MPI_ERR_TYPE and MPI_ERR_OP whose MPI_Error_string
 * names the call and the argument; so do the other refusals. With "fatal" as its argument, the
 * last rank passes an unknown datatype under the default MPI_ERRORS_ARE_FATAL instead, and the
 * whole job must end (the test checks the message). */
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void expect_error(int rc, int expected_class, const char* call, const char* argument) {
  CHECK(rc != MPI_SUCCESS, "%s succeeded where it should have failed naming %s", call, argument);
  int error_class = -1;
  CHECK_OK(MPI_Error_class(rc, &error_class));
  CHECK(error_class == expected_class, "%s: class %d, expected %d", call, error_class, expected_class);
  char text[MPI_MAX_ERROR_STRING];
  int length = -1;
  CHECK_OK(MPI_Error_string(rc, text, &length));
  CHECK(length == (int)strlen(text), "length %d of '%s'", length, text);
  CHECK(strstr(text, call) == text, "the message does not start with the call %s: '%s'", call, text);
  CHECK(strstr(text, argument) != NULL, "the message does not name %s: '%s'", argument, text);
}

enum { kUnknownType = 0x4c0001ff, kUnknownOp = 0x12345 };

int main(int argc, char** argv) {
  CHECK_OK(MPI_Init(&argc, &argv));
  int rank, size;
  CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
  CHECK_OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &handler));
  CHECK(handler == MPI_ERRORS_ARE_FATAL, "the default handler is 0x%x", handler);

  if (argc > 1 && strcmp(argv[1], "fatal") == 0) {
    double x = 1;
    if (rank == size - 1) MPI_Allreduce(MPI_IN_PLACE, &x, 1, (MPI_Datatype)kUnknownType, MPI_SUM, MPI_COMM_WORLD);
    /* The other ranks wait here until the failure reaches them; none may pass. */
    MPI_Barrier(MPI_COMM_WORLD);
    fprintf(stderr, "rank %d: passed the barrier after a fatal error\n", rank);
    return 0;
  }

  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
  double x[4] = {1, 2, 3, 4}, y[4] = {0};
  const MPI_Datatype unknown_type = (MPI_Datatype)kUnknownType;
  const MPI_Op unknown_op = (MPI_Op)kUnknownOp;
  expect_error(MPI_Allreduce(x, y, 4, unknown_type, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_TYPE, "MPI_Allreduce",
               "argument datatype");
  expect_error(MPI_Allreduce(x, y, 4, MPI_DOUBLE, unknown_op, MPI_COMM_WORLD), MPI_ERR_OP, "MPI_Allreduce",
               "argument op");
  expect_error(MPI_Reduce(x, y, 4, unknown_type, MPI_SUM, 0, MPI_COMM_WORLD), MPI_ERR_TYPE, "MPI_Reduce",
               "argument datatype");
  expect_error(MPI_Reduce(x, y, 4, MPI_DOUBLE, unknown_op, 0, MPI_COMM_WORLD), MPI_ERR_OP, "MPI_Reduce", "argument op");
  expect_error(MPI_Bcast(x, 4, unknown_type, 0, MPI_COMM_WORLD), MPI_ERR_TYPE, "MPI_Bcast", "argument datatype");
  expect_error(MPI_Allgather(x, 1, unknown_type, y, 1, MPI_DOUBLE, MPI_COMM_WORLD), MPI_ERR_TYPE, "MPI_Allgather",
               "argument sendtype");
  expect_error(MPI_Reduce_scatter_block(x, y, 1, MPI_DOUBLE, unknown_op, MPI_COMM_WORLD), MPI_ERR_OP,
               "MPI_Reduce_scatter_block", "argument op");
  int type_size = 0;
  expect_error(MPI_Type_size(unknown_type, &type_size), MPI_ERR_TYPE, "MPI_Type_size", "argument datatype");
  expect_error(MPI_Type_size(MPI_DATATYPE_NULL, &type_size), MPI_ERR_TYPE, "MPI_Type_size", "MPI_DATATYPE_NULL");
  /* A provided op on a type MPI does not reduce with it. */
  char c[2] = {1, 2};
  expect_error(MPI_Allreduce(MPI_IN_PLACE, c, 2, MPI_CHAR, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_TYPE, "MPI_Allreduce",
               "MPI_CHAR");
  float f[2] = {1, 2};
  expect_error(MPI_Allreduce(MPI_IN_PLACE, f, 2, MPI_FLOAT, MPI_LAND, MPI_COMM_WORLD), MPI_ERR_OP, "MPI_Allreduce",
               "MPI_LAND on MPI_FLOAT");
  unsigned char bytes[2] = {1, 2};
  expect_error(MPI_Allreduce(MPI_IN_PLACE, bytes, 2, MPI_BYTE, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_OP, "MPI_Allreduce",
               "MPI_SUM on MPI_BYTE");
  expect_error(MPI_Allreduce(MPI_IN_PLACE, x, 2, MPI_DOUBLE, MPI_MAXLOC, MPI_COMM_WORLD), MPI_ERR_OP, "MPI_Allreduce",
               "MPI_MAXLOC on MPI_DOUBLE");
  /* Counts, roots, communicators, requests, buffers. */
  expect_error(MPI_Bcast(x, -1, MPI_DOUBLE, 0, MPI_COMM_WORLD), MPI_ERR_COUNT, "MPI_Bcast", "argument count");
  expect_error(MPI_Bcast(x, 1, MPI_DOUBLE, size, MPI_COMM_WORLD), MPI_ERR_ROOT, "MPI_Bcast", "argument root");
  expect_error(MPI_Barrier((MPI_Comm)0x44000077), MPI_ERR_COMM, "MPI_Barrier", "argument comm");
  expect_error(MPI_Barrier(MPI_COMM_NULL), MPI_ERR_COMM, "MPI_Barrier", "MPI_COMM_NULL");
  expect_error(MPI_Bcast(NULL, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER, "MPI_Bcast", "argument buffer");
  MPI_Request bogus = 4242;
  expect_error(MPI_Wait(&bogus, MPI_STATUS_IGNORE), MPI_ERR_REQUEST, "MPI_Wait", "argument request");
  expect_error(MPI_Comm_set_errhandler(MPI_COMM_WORLD, 77), MPI_ERR_ARG, "MPI_Comm_set_errhandler",
               "argument errhandler");
  if (rank == 0) {
    expect_error(MPI_Reduce(x, y, 4, MPI_DOUBLE, MPI_SUM, 0, (MPI_Comm)0x0c000000), MPI_ERR_COMM, "MPI_Reduce",
                 "argument comm");
  } else {
    expect_error(MPI_Reduce(MPI_IN_PLACE, y, 4, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER, "MPI_Reduce",
                 "MPI_IN_PLACE");
  }
  /* Every class has its text; an error code that no call returned is refused. */
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  CHECK_OK(MPI_Error_string(MPI_ERR_TYPE, text, &length));
  CHECK(strstr(text, "MPI_ERR_TYPE") == text, "class text '%s'", text);
  CHECK(MPI_Error_string(-5, text, &length) != MPI_SUCCESS, "MPI_Error_string took -5");

  /* After the refusals, the job goes on: the failed calls were not issued. */
  CHECK_OK(MPI_Allreduce(x, y, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  CHECK(y[3] == 4.0 * size, "allreduce after the errors gave %g", y[3]);
  CHECK_OK(MPI_Finalize());
  printf("rank %d of %d: errors ok\n", rank, size);
  return 0;
}
