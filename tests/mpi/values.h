/* Test data for the MPI layer's tests: element i of rank r's input, and a typed view of buffers,
 * so that each result is checked against a serial fold over the ranks' inputs. The values are
 * small integers: every type holds them exactly, and a sum is exact in any order. */
#ifndef TNT_TESTS_MPI_VALUES_H
#define TNT_TESTS_MPI_VALUES_H
#include <mpi.h>
#include <stdint.h>

static double input_value(int rank, int i, int op_is_prod) {
  if (op_is_prod) return (double)((rank + i) % 3 + 1); /* 1..3: products stay small */
  return (double)((rank * 7 + i * 3) % 11 - 5);
}

static int is_unsigned(MPI_Datatype t) {
  return t == MPI_BYTE || t == MPI_UNSIGNED || t == MPI_UNSIGNED_LONG || t == MPI_UINT8_T || t == MPI_UINT16_T ||
         t == MPI_UINT32_T || t == MPI_UINT64_T;
}

static void put_value(MPI_Datatype t, void* buffer, int i, double v) {
  if (t == MPI_INT)
    ((int*)buffer)[i] = (int)v;
  else if (t == MPI_UNSIGNED)
    ((unsigned*)buffer)[i] = (unsigned)v;
  else if (t == MPI_LONG)
    ((long*)buffer)[i] = (long)v;
  else if (t == MPI_UNSIGNED_LONG)
    ((unsigned long*)buffer)[i] = (unsigned long)v;
  else if (t == MPI_LONG_LONG)
    ((long long*)buffer)[i] = (long long)v;
  else if (t == MPI_FLOAT)
    ((float*)buffer)[i] = (float)v;
  else if (t == MPI_DOUBLE)
    ((double*)buffer)[i] = v;
  else if (t == MPI_INT8_T)
    ((int8_t*)buffer)[i] = (int8_t)v;
  else if (t == MPI_INT16_T)
    ((int16_t*)buffer)[i] = (int16_t)v;
  else if (t == MPI_INT32_T)
    ((int32_t*)buffer)[i] = (int32_t)v;
  else if (t == MPI_INT64_T)
    ((int64_t*)buffer)[i] = (int64_t)v;
  else if (t == MPI_UINT8_T || t == MPI_BYTE)
    ((uint8_t*)buffer)[i] = (uint8_t)v;
  else if (t == MPI_UINT16_T)
    ((uint16_t*)buffer)[i] = (uint16_t)v;
  else if (t == MPI_UINT32_T)
    ((uint32_t*)buffer)[i] = (uint32_t)v;
  else if (t == MPI_UINT64_T)
    ((uint64_t*)buffer)[i] = (uint64_t)v;
}

static double get_value(MPI_Datatype t, const void* buffer, int i) {
  if (t == MPI_INT) return ((const int*)buffer)[i];
  if (t == MPI_UNSIGNED) return ((const unsigned*)buffer)[i];
  if (t == MPI_LONG) return (double)((const long*)buffer)[i];
  if (t == MPI_UNSIGNED_LONG) return (double)((const unsigned long*)buffer)[i];
  if (t == MPI_LONG_LONG) return (double)((const long long*)buffer)[i];
  if (t == MPI_FLOAT) return ((const float*)buffer)[i];
  if (t == MPI_DOUBLE) return ((const double*)buffer)[i];
  if (t == MPI_INT8_T) return ((const int8_t*)buffer)[i];
  if (t == MPI_INT16_T) return ((const int16_t*)buffer)[i];
  if (t == MPI_INT32_T) return ((const int32_t*)buffer)[i];
  if (t == MPI_INT64_T) return (double)((const int64_t*)buffer)[i];
  if (t == MPI_UINT8_T || t == MPI_BYTE) return ((const uint8_t*)buffer)[i];
  if (t == MPI_UINT16_T) return ((const uint16_t*)buffer)[i];
  if (t == MPI_UINT32_T) return ((const uint32_t*)buffer)[i];
  if (t == MPI_UINT64_T) return (double)((const uint64_t*)buffer)[i];
  return -1e300;
}

/* Rank r's input as the type holds it (unsigned types hold the value + 5, never negative). */
static double typed_input(MPI_Datatype t, int rank, int i, int op_is_prod) {
  const double v = input_value(rank, i, op_is_prod);
  return is_unsigned(t) && !op_is_prod ? v + 5 : v;
}

/* The serial reference: element i of the fold of every rank's input, in rank order. */
static double reference(MPI_Datatype t, MPI_Op op, int size, int i) {
  const int prod = op == MPI_PROD;
  double result = typed_input(t, 0, i, prod);
  long long bits = (long long)result;
  for (int r = 1; r < size; ++r) {
    const double v = typed_input(t, r, i, prod);
    if (op == MPI_SUM)
      result += v;
    else if (op == MPI_PROD)
      result *= v;
    else if (op == MPI_MIN)
      result = v < result ? v : result;
    else if (op == MPI_MAX)
      result = v > result ? v : result;
    else if (op == MPI_LAND)
      result = (result != 0) && (v != 0);
    else if (op == MPI_LOR)
      result = (result != 0) || (v != 0);
    else if (op == MPI_BAND)
      bits &= (long long)v;
    else if (op == MPI_BOR)
      bits |= (long long)v;
  }
  if (op == MPI_BAND || op == MPI_BOR) return (double)bits;
  /* Over one rank there is nothing to combine: the input itself, as in OpenMPI (not 0 or 1). */
  return result;
}

/* MPI's rules (the standard's table of ops and types), independent of the layer's own. */
static int is_integer(MPI_Datatype t) {
  return t == MPI_INT || t == MPI_UNSIGNED || t == MPI_LONG || t == MPI_UNSIGNED_LONG || t == MPI_LONG_LONG ||
         t == MPI_INT8_T || t == MPI_INT16_T || t == MPI_INT32_T || t == MPI_INT64_T || t == MPI_UINT8_T ||
         t == MPI_UINT16_T || t == MPI_UINT32_T || t == MPI_UINT64_T;
}
static int mpi_defines(MPI_Datatype t, MPI_Op op) {
  if (op == MPI_SUM || op == MPI_PROD || op == MPI_MIN || op == MPI_MAX) {
    return is_integer(t) || t == MPI_FLOAT || t == MPI_DOUBLE;
  }
  if (op == MPI_LAND || op == MPI_LOR) return is_integer(t);
  if (op == MPI_BAND || op == MPI_BOR) return is_integer(t) || t == MPI_BYTE;
  if (op == MPI_MINLOC || op == MPI_MAXLOC) return t == MPI_DOUBLE_INT || t == MPI_2INT;
  return 0;
}
#endif
