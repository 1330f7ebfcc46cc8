/* Communication layer: counted collectives over the process grid's groups,
 * and the conjugate forward/backward pairs parallel layers are built from.
 *
 *   copy    forward: identity            backward: all-reduce (sum)
 *   reduce  forward: all-reduce (sum)    backward: identity
 *   gather  forward: all-gather columns  backward: scatter (keep my columns)
 *
 * One interface, backends behind it (comm_backend): MPI (comm_mpi.c) moves
 * host buffers -- the CPU backends' memory directly, any other backend's
 * through host staging -- and NCCL moves device buffers. Every data-plane
 * call names the memory it moves by the compute backend's types (float,
 * the act type, double) and counts bytes, calls and seconds per group and
 * kind; the trainer reports them per step. Requests are opaque: nothing
 * outside a backend sees MPI_Request or an event.
 *
 * Control plane: small host values every rank must agree on (a failure
 * flag, a step number, a signal, rank 0's verdict) go through one watched
 * call, comm_control (MPI on the host, uncounted), never through the data
 * plane and never through a raw MPI collective.
 *
 * Every call that waits for other ranks (data plane, control plane, a
 * receive, a send's completion, and -- once comm_attach_watchdog is
 * called -- the compute backend's device waits, where queued collectives
 * complete) is recorded for the collective watchdog while it is in flight
 * (trainer/parallel/watchdog.h: group, kind, peer; a few relaxed stores, nothing on
 * threads the watchdog does not watch).
 *
 * Errors: a backend returns its failures (NCCL's, CUDA's) to the front,
 * which aborts every communicator and ends the job through the watchdog's
 * failure path (watchdog_fail: one line naming the group, the step and the
 * ranks; exit 74, or 75 when the newest state is committed). No backend
 * exits by itself. MPI's own errors stay fatal (MPI_ERRORS_ARE_FATAL: the
 * launcher ends the job). */
#ifndef BOOST_COMM_H
#define BOOST_COMM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "device_wait.h"
#include "status.h"

typedef enum { COMM_TP = 0, COMM_DP, COMM_PP, COMM_WORLD, COMM_NUM_GROUPS } comm_group;
typedef enum { COMM_ALLREDUCE = 0, COMM_ALLGATHER, COMM_REDUCE_SCATTER, COMM_SENDRECV, COMM_ALLTOALL, COMM_NUM_KINDS } comm_kind;
typedef enum { COMM_SUM = 0, COMM_MAX } comm_redop;

extern const char *const comm_group_names[COMM_NUM_GROUPS];
extern const char *const comm_kind_names[COMM_NUM_KINDS];

typedef struct {
  uint64_t bytes, calls;
  double seconds;
} comm_counter;

/* An operation in flight (the backend's part opaque; zero-initialised
 * means none). The front keeps where it goes for the watchdog. */
typedef struct {
  uint64_t opaque[2];
  int group, peer, tag;
  int kind; /* 0: a send; else the collective's comm_kind + 1 */
} comm_request;

typedef struct comm_ctx comm_ctx;

/* What a communication backend implements; the comm_* functions below
 * count and dispatch. Buffers are the compute backend's memory (c->be), or
 * host memory when c->be is NULL. n counts elements of type t. Every call
 * returns 0, or -1 with a one-line reason in c->err (the front ends the
 * job: see Errors above). */
typedef struct {
  const char *name;
  int (*allreduce)(comm_ctx *c, comm_group g, void *buf, size_t n, boost_dtype t, comm_redop op);
  /* [a (n_a of type ta), b (n_b floats)] summed as one collective where the
   * backend can (the btp bottleneck and its norm statistics) */
  int (*allreduce_pair)(comm_ctx *c, comm_group g, void *a, size_t n_a, boost_dtype ta, float *b, size_t n_b);
  /* buf: size * chunk elements; leaves this rank's chunk of the sum at
   * buf + rank * chunk */
  int (*reduce_scatter)(comm_ctx *c, comm_group g, void *buf, size_t chunk, boost_dtype t);
  /* buf: size * chunk elements, this rank's at buf + rank * chunk: fills the others */
  int (*allgather_chunks)(comm_ctx *c, comm_group g, void *buf, size_t chunk, boost_dtype t);
  /* recv: size blocks of n elements, block r from rank r */
  int (*allgather)(comm_ctx *c, comm_group g, const void *send, void *recv, size_t n, boost_dtype t);
  /* element counts and displacements per rank, as MPI_Alltoallv */
  int (*alltoallv)(comm_ctx *c, comm_group g, const void *send, const size_t *scount, const size_t *sdispl,
                   void *recv, const size_t *rcount, const size_t *rdispl, boost_dtype t);
  int (*isend)(comm_ctx *c, comm_group g, const void *buf, size_t n, boost_dtype t, int peer, int tag,
               comm_request *req);
  int (*recv)(comm_ctx *c, comm_group g, void *buf, size_t n, boost_dtype t, int peer, int tag);
  int (*wait)(comm_ctx *c, comm_request *req);
  /* Non-blocking float sums (the bucketed gradient reduction): complete at
   * wait. ireduce_scatter: the elements [begin, end) of buf (size * chunk
   * floats, rank r's chunk at r * chunk); this rank's part of the range,
   * summed, lands in out (its chunk) at the same offset within the chunk.
   * test: *done = 1 once req has completed (MPI progresses only inside its
   * calls). */
  int (*iallreduce)(comm_ctx *c, comm_group g, float *buf, size_t n, comm_request *req);
  int (*ireduce_scatter)(comm_ctx *c, comm_group g, float *buf, size_t begin, size_t end, size_t chunk, float *out,
                         comm_request *req);
  int (*test)(comm_ctx *c, comm_request *req, int *done);
  /* Optional (NULL: nothing to do). poll: an error the communication
   * reported asynchronously (queued collectives that failed), checked while
   * the host waits for the device; abort: every communicator abandoned,
   * operations in flight cancelled (the job is ending; callable from the
   * watchdog's thread). */
  int (*poll)(comm_ctx *c);
  void (*abort)(comm_ctx *c);
  void (*destroy)(comm_ctx *c);
} comm_backend;

struct comm_ctx {
  const comm_backend *ops;
  void *impl;         /* the backend's group handles */
  boost_backend *be;  /* whose memory the buffers are; NULL: host memory */
  MPI_Comm mpi[COMM_NUM_GROUPS]; /* the groups' MPI communicators (control plane; backends may use them) */
  int size[COMM_NUM_GROUPS], rank[COMM_NUM_GROUPS];
  comm_counter count[COMM_NUM_GROUPS][COMM_NUM_KINDS];
  void *scratch; /* backend memory for comm_allgather_cols */
  size_t scratch_bytes;
  int every_group;   /* collectives run in groups of one rank too (parallel.nccl_single) */
  int last_group;    /* the group of the latest collective begun: where a device wait is charged */
  boost_status err;  /* a backend's failure, for the front */
  boost_wait_hooks wait_hooks; /* comm_attach_watchdog's */
  int device_wait_recorded;    /* the device wait in flight is the watch record */
};

/* The MPI backend over groups borrowed from a process grid (not freed):
 * buffers in be's memory (NULL: host memory). */
void comm_init_mpi(comm_ctx *c, boost_backend *be, MPI_Comm tp, MPI_Comm dp, MPI_Comm pp, MPI_Comm world);
/* The NCCL backend (comm_nccl.c, built with CUDA and NCCL: BOOST_HAVE_NCCL)
 * over the same groups, for the cuda backend's device memory: one NCCL
 * communicator per group of more than one rank -- per group, even of one
 * rank, when every_group (parallel.nccl_single: a single GPU runs every
 * collective through NCCL) -- ids broadcast over the groups' MPI
 * communicators. Collective over world, and agreed: every rank returns 0,
 * or every rank -1 with the same line naming the first rank that failed. */
int comm_init_nccl(comm_ctx *c, boost_backend *be, MPI_Comm tp, MPI_Comm dp, MPI_Comm pp, MPI_Comm world,
                   int every_group, boost_status *err);
/* The run's context (one per process; comm_free undoes it): the compute
 * backend's device waits (kernels/device_wait.h) become watched waits
 * charged to the group of the latest collective begun, polling this
 * context's asynchronous errors, and a failed wait ends the job as a failed
 * collective does; whatever ends the job (kernels/job_abort.h: the
 * watchdog, a CUDA error) aborts this context's communicators first
 * (ncclCommAbort). */
void comm_attach_watchdog(comm_ctx *c);
/* A single-process context (every group of size 1, MPI_COMM_SELF): its
 * collectives move nothing. */
void comm_init_self(comm_ctx *c, boost_backend *be);
void comm_free(comm_ctx *c);
void comm_reset_counts(comm_ctx *c);
/* Bytes of one kind over one group since the last reset. */
uint64_t comm_bytes(const comm_ctx *c, comm_group g, comm_kind k);

/* ---- data plane (counted; nothing happens in a group of one rank) ---- */
void comm_allreduce_sum(comm_ctx *c, comm_group g, float *buf, size_t n);
void comm_allreduce_max(comm_ctx *c, comm_group g, float *buf, size_t n);
void comm_allreduce_sum_f64(comm_ctx *c, comm_group g, double *buf, size_t n);
/* Activations and their gradients (the compute backend's act type). */
void comm_allreduce_act(comm_ctx *c, comm_group g, boost_act *buf, size_t n);
/* The btp bottleneck H [n_h act elements] and its per-token local sums of
 * squares ss [n_ss floats], summed together in one collective. */
void comm_allreduce_btp(comm_ctx *c, comm_group g, boost_act *h, size_t n_h, float *ss, size_t n_ss);
/* ZeRO-1: gradients reduce-scattered, parameters all-gathered (float). */
void comm_reduce_scatter_sum(comm_ctx *c, comm_group g, float *buf, size_t chunk);
void comm_allgather_chunks(comm_ctx *c, comm_group g, float *buf, size_t chunk);
/* Gather column shards (act): local [rows, cols] -> full [rows, cols * size]. */
void comm_allgather_cols(comm_ctx *c, comm_group g, const boost_act *local, boost_act *full, size_t rows, size_t cols);
/* Keep this rank's column shard: full [rows, cols * size] -> local [rows, cols] (no message). */
void comm_scatter_cols(comm_ctx *c, comm_group g, const boost_act *full, boost_act *local, size_t rows, size_t cols);
/* Point-to-point of activations within a group (pipeline stages), counted
 * as sendrecv. comm_isend's buffer must stay untouched until comm_wait. */
void comm_isend_act(comm_ctx *c, comm_group g, const boost_act *buf, size_t n, int peer, int tag, comm_request *req);
void comm_recv_act(comm_ctx *c, comm_group g, boost_act *buf, size_t n, int peer, int tag);
/* Completes req (none: returns at once) and clears it: a send, or a
 * non-blocking sum below (recorded for the watchdog as that collective). */
void comm_wait(comm_ctx *c, comm_request *req);
/* Non-blocking float sums over g (trainer/parallel/grad_buckets.h), counted when
 * posted (bytes and a call of their kind, as the blocking calls count), the
 * host's time in them (posting, comm_test, comm_wait) added to the kind's
 * seconds. buf (and out) stay untouched until comm_wait. A group of one
 * rank leaves req empty. ireduce_scatter: see comm_backend. */
void comm_iallreduce_sum(comm_ctx *c, comm_group g, float *buf, size_t n, comm_request *req);
void comm_ireduce_scatter_sum(comm_ctx *c, comm_group g, float *buf, size_t begin, size_t end, size_t chunk,
                              float *out, comm_request *req);
/* Progress: 1 when req (a non-blocking sum) has completed or is empty. */
int comm_test(comm_ctx *c, comm_request *req);
/* Floats moved between ranks in pieces (counts and displacements in floats). */
void comm_alltoallv_f32(comm_ctx *c, comm_group g, const float *send, const size_t *scount, const size_t *sdispl,
                        float *recv, const size_t *rcount, const size_t *rdispl);

/* Conjugate pairs (what parallel layers call). */
static inline void comm_copy_forward(comm_ctx *c, comm_group g, boost_act *x, size_t n) { (void)c, (void)g, (void)x, (void)n; }
static inline void comm_copy_backward(comm_ctx *c, comm_group g, boost_act *dx, size_t n) { comm_allreduce_act(c, g, dx, n); }
static inline void comm_reduce_forward(comm_ctx *c, comm_group g, boost_act *x, size_t n) { comm_allreduce_act(c, g, x, n); }
static inline void comm_reduce_backward(comm_ctx *c, comm_group g, boost_act *dx, size_t n) { (void)c, (void)g, (void)dx, (void)n; }

/* ---- control plane (host values, MPI, uncounted) ----
 * comm_control is the one watched agreement: an allreduce of n host values
 * of type t with op over mc -- group g's communicator, or one that spans
 * the same ranks (the run's world before a comm context exists) -- recorded
 * for the watchdog as group g, kind `what` (a string that outlives the
 * call, words of [a-z -], e.g. "stop-signal agreement"). Everything below
 * goes through it. Test hook: comm_test_stall_next_control. */
void comm_control(MPI_Comm mc, comm_group g, const char *what, void *host, int n, MPI_Datatype t, MPI_Op op);
/* bytes from root to every rank of mc (a bitwise-or agreement: the others
 * contribute zeros). */
void comm_control_bcast(MPI_Comm mc, comm_group g, const char *what, void *buf, int bytes, int root);
/* 1 when ok is non-zero on every rank of mc. */
int comm_control_all(MPI_Comm mc, comm_group g, const char *what, int ok);
/* The lowest rank of mc whose ok is zero (-1: none), and that rank's
 * one-line msg on every rank (msg: msglen bytes everywhere). */
int comm_control_first_failure(MPI_Comm mc, comm_group g, const char *what, int ok, char *msg, int msglen);
/* Test hook: the watched thread's next comm_control call sleeps inside the
 * watched call until the process is ended (a rank stuck in an agreement). */
void comm_test_stall_next_control(void);

void comm_control_sum_f64(comm_ctx *c, comm_group g, double *host, int n);
/* The largest / smallest value over the group. */
int comm_control_max_int(comm_ctx *c, comm_group g, int v);
int comm_control_min_int(comm_ctx *c, comm_group g, int v);

/* One line per (group, kind) with traffic, e.g. "tp allreduce 12.3 MiB/41". */
void comm_format_counts(const comm_ctx *c, char *out, size_t outlen);

#endif
