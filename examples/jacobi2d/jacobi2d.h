/* The numerics of jacobi2d, shared by its tnt program (jacobi2d_tnt.c) and its OpenMPI twin
 * (jacobi2d_mpi.c), which differ only in how they communicate.
 *
 * -Δu = f on the unit square, u = 0 on its boundary, on an n × n grid of interior points
 * (spacing h = 1/(n+1)), by Jacobi sweeps of the 5-point stencil. The grid is cut into px × py
 * blocks, one per rank (rank = y * px + x); each block keeps a ghost layer of its neighbours'
 * edge values. A point's new value depends only on its four neighbours' old values, so any
 * decomposition gives bitwise the same field as a serial run. */
#ifndef JACOBI2D_H
#define JACOBI2D_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct block {
  int n, px, py, x, y; /* grid size, ranks per direction, this block's position */
  int i0, j0, nx, ny;  /* first global column and row, columns and rows held */
  double* u;           /* (ny + 2) rows of (nx + 2), ghosts included */
  double* next;
  double* f;         /* right-hand side times h², same layout */
  double* pack[4];   /* west, east, south, north: outgoing edges */
  double* unpack[4]; /* incoming ghosts */
} block;

enum { WEST, EAST, SOUTH, NORTH };

/* Part r of n points over p parts: the first n % p parts hold one point more. */
static inline void jacobi_part(int n, int p, int r, int* first, int* count) {
  *count = n / p + (r < n % p);
  *first = r * (n / p) + (r < n % p ? r : n % p);
}

static inline double* at(const block* b, double* field, int i, int j) { return field + (size_t)j * (b->nx + 2) + i; }

/* Usage: PROGRAM n px py iterations [dump-file]. Returns 0, or prints why not and returns 2. */
static inline int jacobi_parse(int argc, char** argv, int size, int* n, int* px, int* py, int* iterations,
                               const char** dump) {
  if (argc < 5 || argc > 6) {
    fprintf(stderr, "usage: %s N PX PY ITERATIONS [DUMP-FILE]\n  an N x N grid on PX x PY ranks\n", argv[0]);
    return 2;
  }
  *n = atoi(argv[1]);
  *px = atoi(argv[2]);
  *py = atoi(argv[3]);
  *iterations = atoi(argv[4]);
  *dump = argc == 6 ? argv[5] : NULL;
  if (*n < 1 || *px < 1 || *py < 1 || *iterations < 0) {
    fprintf(stderr, "%s: N, PX and PY must be >= 1 and ITERATIONS >= 0\n", argv[0]);
    return 2;
  }
  if (*px * *py != size) {
    fprintf(stderr, "%s: PX x PY = %d x %d is not the %d ranks of the job\n", argv[0], *px, *py, size);
    return 2;
  }
  if (*px > *n || *py > *n) {
    fprintf(stderr, "%s: %d x %d ranks cannot split a %d x %d grid\n", argv[0], *px, *py, *n, *n);
    return 2;
  }
  return 0;
}

static inline void jacobi_setup(block* b, int n, int px, int py, int rank) {
  b->n = n;
  b->px = px;
  b->py = py;
  b->x = rank % px;
  b->y = rank / px;
  jacobi_part(n, px, b->x, &b->i0, &b->nx);
  jacobi_part(n, py, b->y, &b->j0, &b->ny);
  const size_t points = (size_t)(b->nx + 2) * (size_t)(b->ny + 2);
  b->u = calloc(points, sizeof(double));
  b->next = calloc(points, sizeof(double));
  b->f = calloc(points, sizeof(double));
  const size_t edge = (size_t)(b->nx > b->ny ? b->nx : b->ny);
  for (int s = 0; s < 4; ++s) {
    b->pack[s] = calloc(edge, sizeof(double));
    b->unpack[s] = calloc(edge, sizeof(double));
  }
  const double h = 1.0 / (n + 1);
  for (int j = 1; j <= b->ny; ++j) {
    for (int i = 1; i <= b->nx; ++i) {
      const double gx = (b->i0 + i) * h, gy = (b->j0 + j) * h;
      *at(b, b->f, i, j) = h * h * (1.0 + 8.0 * gx * (1.0 - gy)); /* a source with no symmetry */
    }
  }
}

static inline void jacobi_free(block* b) {
  free(b->u);
  free(b->next);
  free(b->f);
  for (int s = 0; s < 4; ++s) {
    free(b->pack[s]);
    free(b->unpack[s]);
  }
}

/* The rank beside this block in direction `side`, or -1 at the domain's boundary. */
static inline int jacobi_neighbour(const block* b, int side) {
  switch (side) {
    case WEST: return b->x > 0 ? b->y * b->px + b->x - 1 : -1;
    case EAST: return b->x < b->px - 1 ? b->y * b->px + b->x + 1 : -1;
    case SOUTH: return b->y > 0 ? (b->y - 1) * b->px + b->x : -1;
    default: return b->y < b->py - 1 ? (b->y + 1) * b->px + b->x : -1;
  }
}

static inline int jacobi_edge_length(const block* b, int side) { return side == WEST || side == EAST ? b->ny : b->nx; }

/* Copies this block's edge values into the outgoing buffers. */
static inline void jacobi_pack(block* b) {
  for (int j = 1; j <= b->ny; ++j) {
    b->pack[WEST][j - 1] = *at(b, b->u, 1, j);
    b->pack[EAST][j - 1] = *at(b, b->u, b->nx, j);
  }
  memcpy(b->pack[SOUTH], at(b, b->u, 1, 1), (size_t)b->nx * sizeof(double));
  memcpy(b->pack[NORTH], at(b, b->u, 1, b->ny), (size_t)b->nx * sizeof(double));
}

/* Copies the received edges into the ghost layer (ghosts at the domain boundary stay 0). */
static inline void jacobi_unpack(block* b) {
  if (jacobi_neighbour(b, WEST) >= 0)
    for (int j = 1; j <= b->ny; ++j) *at(b, b->u, 0, j) = b->unpack[WEST][j - 1];
  if (jacobi_neighbour(b, EAST) >= 0)
    for (int j = 1; j <= b->ny; ++j) *at(b, b->u, b->nx + 1, j) = b->unpack[EAST][j - 1];
  if (jacobi_neighbour(b, SOUTH) >= 0) memcpy(at(b, b->u, 1, 0), b->unpack[SOUTH], (size_t)b->nx * sizeof(double));
  if (jacobi_neighbour(b, NORTH) >= 0)
    memcpy(at(b, b->u, 1, b->ny + 1), b->unpack[NORTH], (size_t)b->nx * sizeof(double));
}

/* One sweep into b->next, then the swap; returns this block's sum of squared updates. */
static inline double jacobi_sweep(block* b) {
  double change = 0.0;
  for (int j = 1; j <= b->ny; ++j) {
    for (int i = 1; i <= b->nx; ++i) {
      const double value = 0.25 * (*at(b, b->u, i - 1, j) + *at(b, b->u, i + 1, j) + *at(b, b->u, i, j - 1) +
                                   *at(b, b->u, i, j + 1) + *at(b, b->f, i, j));
      const double d = value - *at(b, b->u, i, j);
      change += d * d;
      *at(b, b->next, i, j) = value;
    }
  }
  double* old = b->u;
  b->u = b->next;
  b->next = old;
  return change;
}

/* This block's interior, row by row, into `out` (nx * ny values). */
static inline void jacobi_interior(const block* b, double* out) {
  for (int j = 1; j <= b->ny; ++j)
    memcpy(out + (size_t)(j - 1) * b->nx, at(b, b->u, 1, j), (size_t)b->nx * sizeof(double));
}

/* Rank 0: the whole field from every rank's interior, gathered in rank order, as n × n rows. */
static inline void jacobi_assemble(int n, int px, int py, const double* gathered, double* field) {
  size_t offset = 0;
  for (int r = 0; r < px * py; ++r) {
    int i0, nx, j0, ny;
    jacobi_part(n, px, r % px, &i0, &nx);
    jacobi_part(n, py, r / px, &j0, &ny);
    for (int j = 0; j < ny; ++j)
      memcpy(field + (size_t)(j0 + j) * n + i0, gathered + offset + (size_t)j * nx, (size_t)nx * sizeof(double));
    offset += (size_t)nx * (size_t)ny;
  }
}

/* FNV-1a over the field's bytes: equal checksums mean (all but surely) bitwise equal fields. */
static inline uint64_t jacobi_checksum(const double* field, size_t count) {
  const unsigned char* bytes = (const unsigned char*)field;
  uint64_t hash = 1469598103934665603ull;
  for (size_t k = 0; k < count * sizeof(double); ++k) hash = (hash ^ bytes[k]) * 1099511628211ull;
  return hash;
}

/* Rank 0's report and optional dump (raw little-endian doubles, n × n, row by row). */
static inline int jacobi_report(const char* program, int n, int iterations, int size, double residual, double seconds,
                                const double* field, const char* dump) {
  double sum = 0.0;
  for (size_t k = 0; k < (size_t)n * n; ++k) sum += field[k];
  printf("jacobi2d %s: n %d, %d iterations on %d ranks: residual %.17g, sum %.17g, checksum %016llx\n", program, n,
         iterations, size, residual, sum, (unsigned long long)jacobi_checksum(field, (size_t)n * n));
  printf("jacobi2d %s: %.3f us per iteration\n", program, iterations > 0 ? 1e6 * seconds / iterations : 0.0);
  if (dump != NULL) {
    FILE* out = fopen(dump, "wb");
    if (out == NULL || fwrite(field, sizeof(double), (size_t)n * n, out) != (size_t)n * n || fclose(out) != 0) {
      fprintf(stderr, "jacobi2d: cannot write the field to %s\n", dump);
      return 1;
    }
  }
  return 0;
}

#endif
