/* Communication layer: counted collectives over the process grid's groups,
 * and the conjugate forward/backward pairs parallel layers are built from.
 *
 *   copy    forward: identity            backward: all-reduce (sum)
 *   reduce  forward: all-reduce (sum)    backward: identity
 *   gather  forward: all-gather columns  backward: scatter (keep my columns)
 *
 * Every call counts bytes, calls and seconds per group and kind; the trainer
 * reports them per step. One interface; this is the MPI backend (host
 * buffers). A NCCL backend keeps the same calls over device buffers. */
#ifndef BOOST_COMM_H
#define BOOST_COMM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { COMM_TP = 0, COMM_DP, COMM_PP, COMM_WORLD, COMM_NUM_GROUPS } comm_group;
typedef enum { COMM_ALLREDUCE = 0, COMM_ALLGATHER, COMM_REDUCE_SCATTER, COMM_SENDRECV, COMM_NUM_KINDS } comm_kind;

extern const char *const comm_group_names[COMM_NUM_GROUPS];
extern const char *const comm_kind_names[COMM_NUM_KINDS];

typedef struct {
  uint64_t bytes, calls;
  double seconds;
} comm_counter;

typedef struct {
  MPI_Comm comm[COMM_NUM_GROUPS];
  int size[COMM_NUM_GROUPS], rank[COMM_NUM_GROUPS];
  comm_counter count[COMM_NUM_GROUPS][COMM_NUM_KINDS];
} comm_ctx;

/* A single-process context (every group of size 1) for tests and tools. */
void comm_init_self(comm_ctx *c);
/* A shared context whose groups are all MPI_COMM_SELF (one process): what a
 * model built without a comm uses. Its collectives are no-ops. */
comm_ctx *comm_self(void);
/* Groups borrowed from a process grid (not freed by comm). */
void comm_init(comm_ctx *c, MPI_Comm tp, MPI_Comm dp, MPI_Comm pp, MPI_Comm world);
void comm_reset_counts(comm_ctx *c);
/* Bytes of one kind over one group since the last reset. */
uint64_t comm_bytes(const comm_ctx *c, comm_group g, comm_kind k);

/* In-place sum over the group (counted; skipped when the group has 1 rank). */
void comm_allreduce_sum(comm_ctx *c, comm_group g, float *buf, size_t n);
void comm_allreduce_max(comm_ctx *c, comm_group g, float *buf, size_t n);
/* Sum of doubles (scalar statistics: loss, squared norms). */
void comm_allreduce_sum_f64(comm_ctx *c, comm_group g, double *buf, size_t n);
/* buf holds size * chunk floats: sums them over the group and leaves this
 * rank's chunk of the sum at buf + rank * chunk (ZeRO-1 gradients). */
void comm_reduce_scatter_sum(comm_ctx *c, comm_group g, float *buf, size_t chunk);
/* buf holds size * chunk floats, this rank's chunk at buf + rank * chunk:
 * gathers every rank's chunk into place (ZeRO-1 parameters). */
void comm_allgather_chunks(comm_ctx *c, comm_group g, float *buf, size_t chunk);
/* Gather column shards: local [rows, cols] -> full [rows, cols * size]. */
void comm_allgather_cols(comm_ctx *c, comm_group g, const float *local, float *full, size_t rows, size_t cols);
/* Keep this rank's column shard: full [rows, cols * size] -> local [rows, cols]. */
void comm_scatter_cols(const comm_ctx *c, comm_group g, const float *full, float *local, size_t rows, size_t cols);

/* Point-to-point within a group (pipeline stages), counted as sendrecv.
 * comm_isend's buffer must stay untouched until *req completes. */
void comm_isend(comm_ctx *c, comm_group g, const float *buf, size_t n, int peer, int tag, MPI_Request *req);
void comm_recv(comm_ctx *c, comm_group g, float *buf, size_t n, int peer, int tag);

/* Conjugate pairs (what parallel layers call). */
static inline void comm_copy_forward(comm_ctx *c, comm_group g, float *x, size_t n) { (void)c, (void)g, (void)x, (void)n; }
static inline void comm_copy_backward(comm_ctx *c, comm_group g, float *dx, size_t n) { comm_allreduce_sum(c, g, dx, n); }
static inline void comm_reduce_forward(comm_ctx *c, comm_group g, float *x, size_t n) { comm_allreduce_sum(c, g, x, n); }
static inline void comm_reduce_backward(comm_ctx *c, comm_group g, float *dx, size_t n) { (void)c, (void)g, (void)dx, (void)n; }

/* One line per (group, kind) with traffic, e.g. "tp allreduce 12.3 MiB/41". */
void comm_format_counts(const comm_ctx *c, char *out, size_t outlen);

#endif
