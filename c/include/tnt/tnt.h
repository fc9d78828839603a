/* tnt's C API (C11): the Communicator of tnt/collectives for C and Fortran codes.
 *
 * Every function returns a tnt_status (TNT_SUCCESS or why not) and hands results back through
 * pointers; no exception, Boost or C++ header crosses this file. After a failure,
 * tnt_last_error() gives this thread's message, which starts with the failed call's name.
 * Semantics (matching, ordering, failures, threading) are those of tnt::Communicator in
 * tnt/collectives/communicator.h; c/README.md shows the calls side by side with MPI's.
 */
#ifndef TNT_TNT_H
#define TNT_TNT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
/* In C any int may be passed for an enum, and the API refuses the unknown ones with
 * TNT_ERR_USAGE; in C++ an enum without a fixed type cannot even hold them. */
#define TNT_ENUM_TYPE : int
#else
#define TNT_ENUM_TYPE
#endif

typedef struct tnt_comm tnt_comm;       /* a communicator: the world, or a dup or split of one */
typedef struct tnt_request tnt_request; /* an operation in flight; free with tnt_request_free */

typedef enum tnt_status TNT_ENUM_TYPE {
  TNT_SUCCESS = 0,
  TNT_ERR_USAGE = 1,     /* a bad argument or setting: a NULL handle, wrong peer, tag, root, type */
  TNT_ERR_JOB = 2,       /* the job failed: a peer lost or stopped, mismatched calls, an abort */
  TNT_ERR_TRUNCATED = 3, /* a receive's message was larger than its buffer (what fits was kept) */
  TNT_ERR_STATE = 4,     /* a call in the wrong order, e.g. after tnt_finalize */
  TNT_ERR_FAILED = 5,    /* any other failure tnt reports (I/O, ...) */
  TNT_ERR_NO_MEMORY = 6,
  TNT_ERR_INTERNAL = 7 /* an unexpected exception: a bug to report */
} tnt_status;

/* Element types of the reductions, as tnt::DataType. The pairs are C's struct { T value; int
 * index; } (MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_2INT, MPI_LONG_INT), for MINLOC and MAXLOC only. */
typedef enum tnt_datatype TNT_ENUM_TYPE {
  TNT_FLOAT32 = 0,
  TNT_FLOAT64,
  TNT_INT32,
  TNT_INT64,
  TNT_BFLOAT16,
  TNT_INT8,
  TNT_INT16,
  TNT_UINT8,
  TNT_UINT16,
  TNT_UINT32,
  TNT_UINT64,
  TNT_CHAR,
  TNT_FLOAT32_INT32,
  TNT_FLOAT64_INT32,
  TNT_INT32_INT32,
  TNT_INT64_INT32
} tnt_datatype;

/* As tnt::ReduceOp. AVG of integers divides the sum by the size, rounding toward zero. */
typedef enum tnt_op TNT_ENUM_TYPE {
  TNT_SUM = 0,
  TNT_AVG,
  TNT_MIN,
  TNT_MAX,
  TNT_PROD,
  TNT_LAND,
  TNT_LOR,
  TNT_LXOR,
  TNT_BAND,
  TNT_BOR,
  TNT_BXOR,
  TNT_MINLOC,
  TNT_MAXLOC
} tnt_op;

/* Point-to-point wildcards, for receives and probes only. */
#define TNT_ANY_SOURCE (-1)
#define TNT_ANY_TAG (-1)

/* What a receive or probe found (for a send: this rank, its tag and its size). */
typedef struct tnt_message_status {
  int source;
  int tag;
  size_t bytes;
} tnt_message_status;

/* An explicit job, for codes that start their ranks themselves (the fields of
 * tnt::JobEnvironment). NULL strings and zero numbers take the defaults noted. */
typedef struct tnt_job {
  int rank;
  int size;
  const char* master_addr; /* rank 0's address; NULL: 127.0.0.1 */
  int master_port;         /* rank 0 listens there; every rank must give the same */
  const char* job_id;      /* NULL: "local" */
  const char* token;       /* secret shared by the ranks; NULL: none */
  int local_rank;          /* among this host's ranks; with local_size 0: rank */
  int local_size;          /* 0: every rank on this host */
} tnt_job;

/* ---- Errors ------------------------------------------------------------------------------ */
const char* tnt_error_string(int status); /* the status's name in words, e.g. "job failed" */
const char* tnt_last_error(void);         /* this thread's last failure's message; "" when none yet */

/* ---- The world --------------------------------------------------------------------------- */
/* From the environment tnt-launch, srun or mpirun set (a lone process is a job of size 1). Every
 * rank calls it; every call in a process gives the same world (another handle to it). */
int tnt_init(tnt_comm** world);
int tnt_init_job(const tnt_job* job, tnt_comm** world);
/* Orderly end of the whole job (waits for pending operations and every rank's goodbye), then
 * frees the handle, even when it fails. No call may use the job's communicators afterwards but
 * tnt_comm_free. */
int tnt_finalize(tnt_comm* comm);
/* This rank cannot go on: every rank's pending and later calls fail with TNT_ERR_JOB, naming
 * this rank and `reason`. The handle stays to be freed. */
int tnt_abort(tnt_comm* comm, const char* reason);
/* Frees a handle (NULL is fine). Freeing the last handle of a world that was not finalized
 * leaves the job as tnt::Communicator's destructor does. */
int tnt_comm_free(tnt_comm* comm);

int tnt_comm_rank(const tnt_comm* comm, int* rank);
int tnt_comm_size(const tnt_comm* comm, int* size);
/* Collective over comm. split: a negative color gives *newcomm == NULL. */
int tnt_comm_dup(const tnt_comm* comm, tnt_comm** newcomm);
int tnt_comm_split(const tnt_comm* comm, int color, int key, tnt_comm** newcomm);

/* ---- Point-to-point (sizes in bytes; tags >= 0) ------------------------------------------- */
int tnt_send(tnt_comm* comm, const void* data, size_t bytes, int peer, int tag);
int tnt_ssend(tnt_comm* comm, const void* data, size_t bytes, int peer, int tag); /* returns once matched */
int tnt_recv(tnt_comm* comm, void* data, size_t capacity, int peer, int tag, tnt_message_status* status);
int tnt_isend(tnt_comm* comm, const void* data, size_t bytes, int peer, int tag, tnt_request** request);
int tnt_issend(tnt_comm* comm, const void* data, size_t bytes, int peer, int tag, tnt_request** request);
int tnt_irecv(tnt_comm* comm, void* data, size_t capacity, int peer, int tag, tnt_request** request);
int tnt_sendrecv(tnt_comm* comm, const void* send_data, size_t send_bytes, int dest, int send_tag, void* recv_data,
                 size_t capacity, int source, int recv_tag, tnt_message_status* status);
int tnt_probe(tnt_comm* comm, int peer, int tag, tnt_message_status* status);
int tnt_iprobe(tnt_comm* comm, int peer, int tag, int* found, tnt_message_status* status);

/* ---- Requests ---------------------------------------------------------------------------- */
/* Status pointers may be NULL. Waiting does not free: call tnt_request_free (NULL is fine). In
 * arrays, NULL entries are skipped. waitall reports the first failure after all have finished;
 * waitany and testany give the index of a finished one (count when none is valid) and fail
 * if that one failed. */
int tnt_wait(tnt_request* request, tnt_message_status* status);
int tnt_test(tnt_request* request, int* done, tnt_message_status* status);
int tnt_request_status(const tnt_request* request, tnt_message_status* status);
int tnt_waitall(size_t count, tnt_request* const* requests);
int tnt_waitany(size_t count, tnt_request* const* requests, size_t* index);
int tnt_testany(size_t count, tnt_request* const* requests, int* found, size_t* index);
int tnt_testall(size_t count, tnt_request* const* requests, int* done);
int tnt_request_free(tnt_request* request);

/* ---- Collectives ------------------------------------------------------------------------- */
/* Every rank of comm calls them in the same order. Element counts for the reductions, bytes for
 * data movement; the *v forms take per-rank byte counts and offsets (comm size entries). The
 * reductions are the fold in rank order, bitwise the same on every rank. Count arrays are read
 * during the call (only at the root for gatherv and scatterv, where others may pass NULL). The
 * tnt_i* forms start the operation: its buffers must stay until it completes. */
int tnt_barrier(tnt_comm* comm);
int tnt_ibarrier(tnt_comm* comm, tnt_request** request);
int tnt_allreduce(tnt_comm* comm, void* data, size_t count, tnt_datatype type, tnt_op op); /* in place */
int tnt_iallreduce(tnt_comm* comm, void* data, size_t count, tnt_datatype type, tnt_op op, tnt_request** request);
int tnt_broadcast(tnt_comm* comm, void* data, size_t bytes, int root);
int tnt_ibroadcast(tnt_comm* comm, void* data, size_t bytes, int root, tnt_request** request);
int tnt_allgather(tnt_comm* comm, const void* send, void* recv, size_t bytes_per_rank);
int tnt_iallgather(tnt_comm* comm, const void* send, void* recv, size_t bytes_per_rank, tnt_request** request);
/* In place: rank r's block (tnt_block) of data ends as that block's reduction over all ranks. */
int tnt_reduce_scatter_block(tnt_comm* comm, void* data, size_t count, tnt_datatype type, tnt_op op);
int tnt_ireduce_scatter_block(tnt_comm* comm, void* data, size_t count, tnt_datatype type, tnt_op op,
                              tnt_request** request);
/* Rank r's block of count elements over size ranks: the first count % size hold one more. */
int tnt_block(size_t count, int size, int r, size_t* offset, size_t* block_count);
/* recv (counts[r] elements on rank r): block r of every rank's send, blocks of counts[] elements. */
int tnt_reduce_scatter(tnt_comm* comm, const void* send, void* recv, const size_t* counts, tnt_datatype type,
                       tnt_op op);
int tnt_ireduce_scatter(tnt_comm* comm, const void* send, void* recv, const size_t* counts, tnt_datatype type,
                        tnt_op op, tnt_request** request);
int tnt_alltoall(tnt_comm* comm, const void* send, void* recv, size_t bytes_per_rank);
int tnt_ialltoall(tnt_comm* comm, const void* send, void* recv, size_t bytes_per_rank, tnt_request** request);
int tnt_alltoallv(tnt_comm* comm, const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                  const size_t* recv_bytes, const size_t* recv_offsets);
int tnt_ialltoallv(tnt_comm* comm, const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                   const size_t* recv_bytes, const size_t* recv_offsets, tnt_request** request);
int tnt_allgatherv(tnt_comm* comm, const void* send, size_t send_bytes, void* recv, const size_t* recv_bytes,
                   const size_t* recv_offsets);
int tnt_iallgatherv(tnt_comm* comm, const void* send, size_t send_bytes, void* recv, const size_t* recv_bytes,
                    const size_t* recv_offsets, tnt_request** request);
int tnt_gather(tnt_comm* comm, const void* send, void* recv, size_t bytes_per_rank, int root);
int tnt_igather(tnt_comm* comm, const void* send, void* recv, size_t bytes_per_rank, int root, tnt_request** request);
int tnt_gatherv(tnt_comm* comm, const void* send, size_t send_bytes, void* recv, const size_t* recv_bytes,
                const size_t* recv_offsets, int root);
int tnt_igatherv(tnt_comm* comm, const void* send, size_t send_bytes, void* recv, const size_t* recv_bytes,
                 const size_t* recv_offsets, int root, tnt_request** request);
int tnt_scatter(tnt_comm* comm, const void* send, void* recv, size_t bytes_per_rank, int root);
int tnt_iscatter(tnt_comm* comm, const void* send, void* recv, size_t bytes_per_rank, int root, tnt_request** request);
int tnt_scatterv(tnt_comm* comm, const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                 size_t recv_bytes, int root);
int tnt_iscatterv(tnt_comm* comm, const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                  size_t recv_bytes, int root, tnt_request** request);
int tnt_reduce(tnt_comm* comm, const void* send, void* recv, size_t count, tnt_datatype type, tnt_op op, int root);
int tnt_ireduce(tnt_comm* comm, const void* send, void* recv, size_t count, tnt_datatype type, tnt_op op, int root,
                tnt_request** request);
int tnt_scan(tnt_comm* comm, const void* send, void* recv, size_t count, tnt_datatype type, tnt_op op);
int tnt_iscan(tnt_comm* comm, const void* send, void* recv, size_t count, tnt_datatype type, tnt_op op,
              tnt_request** request);
int tnt_exscan(tnt_comm* comm, const void* send, void* recv, size_t count, tnt_datatype type, tnt_op op);
int tnt_iexscan(tnt_comm* comm, const void* send, void* recv, size_t count, tnt_datatype type, tnt_op op,
                tnt_request** request);

#ifdef __cplusplus
}
#endif
#endif /* TNT_TNT_H */
