/* The collective watchdog (parallel.timeout; docs/PARALLELISM.md, "The
 * collective watchdog"), and the one thread per rank that watches every
 * deadline: the checkpoint writer's job registers its own
 * (watchdog_deadline, ckpt.timeout).
 *
 * One thread per rank watches the thread that started it (the training
 * thread) and ends the job when that thread has waited for other ranks
 * longer than the timeout: one line on stderr naming the wait (group and
 * kind of the collective, or the start-up phase), the step, and the ranks
 * that have not arrived as far as they can be asked; then job_end
 * (kernels/job_abort.h) ends every rank: the abort hooks (ncclCommAbort of
 * every communicator), then MPI_Abort on the world (or _exit outside
 * MPI_Init..MPI_Finalize) with the exit status the run says: 75 when
 * nothing was trained since its newest committed state, 74 otherwise.
 *
 * What counts is time spent waiting for other ranks, never compute:
 *   - every call of the comm layer's front (trainer/parallel/comm.c: data plane,
 *     control plane -- the stop-signal agreement and every other agreement
 *     --, the pipeline's receives and send completions) and every device
 *     wait of the compute backend (where queued collectives complete) is
 *     one wait, timed from its start; a wait inside a WATCH_CKPT phase is
 *     bounded as the phase is;
 *   - phases of the run (start-up, the checkpoint load, the final save, MPI
 *     start-up and finalize) count as a whole with their own bound:
 *     WATCH_WAIT (the timeout: they wait for others), WATCH_CKPT (the
 *     timeout + ckpt.timeout: a checkpoint job, whose own watchdog fires
 *     first) or WATCH_WORK (never: local work, e.g. building the model).
 *
 * Which ranks have not arrived: each rank's watchdog answers queries on a
 * duplicate of MPI_COMM_WORLD (nonblocking, polled a few times a second)
 * with where its training thread is: step, phase, the wait in flight and
 * how many collectives it has begun per group. A rank that does not answer
 * within 2 s is stopped, dead, or stuck with its MPI progress; a rank that
 * answers with fewer collectives begun on the group has not arrived.
 *
 * The recording on the watched thread is a few relaxed atomic stores and a
 * clock read per call; other threads (and programs that never start the
 * watchdog) record nothing. */
#ifndef BOOST_WATCHDOG_H
#define BOOST_WATCHDOG_H

#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "status.h"
#include "util.h"

/* How long a phase may last before the watchdog fires. */
typedef enum {
  WATCH_WORK = 0, /* never: local work (model build, the training loop between waits) */
  WATCH_WAIT,     /* parallel.timeout: waiting for other ranks */
  WATCH_CKPT      /* parallel.timeout + ckpt.timeout: a checkpoint job (never when ckpt.timeout is 0) */
} watch_bound;

/* The wait in flight on the watched thread, published as a seqlock (one
 * writer: that thread; `seq` is odd while the fields change, and every
 * change -- a wait begun or done -- moves it on: progress). */
typedef struct {
  _Atomic uint64_t seq;
  _Atomic int active;                     /* inside a wait */
  _Atomic int group, peer, tag;           /* comm_group; point-to-point: the peer's group rank and tag (else -1) */
  _Atomic(const char *) kind;             /* "allreduce", "recv", "send completion", "control allreduce", ... */
  _Atomic(MPI_Comm) comm;                 /* the communicator waited on */
  _Atomic double since;                   /* boost_now_s() at the start */
  _Atomic uint64_t coll[COMM_NUM_GROUPS]; /* collectives begun per group */
} watch_wait;

extern watch_wait watch_now;
extern _Thread_local int watch_mine; /* this thread is the watched one */

static inline uint64_t watch_open_(void) {
  const uint64_t s = atomic_load_explicit(&watch_now.seq, memory_order_relaxed);
  atomic_store_explicit(&watch_now.seq, s + 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  return s;
}

static inline void watch_begin_(MPI_Comm comm, comm_group g, const char *kind, int peer, int tag) {
  const uint64_t s = watch_open_();
  atomic_store_explicit(&watch_now.group, (int)g, memory_order_relaxed);
  atomic_store_explicit(&watch_now.peer, peer, memory_order_relaxed);
  atomic_store_explicit(&watch_now.tag, tag, memory_order_relaxed);
  atomic_store_explicit(&watch_now.kind, kind, memory_order_relaxed);
  atomic_store_explicit(&watch_now.comm, comm, memory_order_relaxed);
  atomic_store_explicit(&watch_now.since, boost_now_s(), memory_order_relaxed);
  atomic_store_explicit(&watch_now.active, 1, memory_order_relaxed);
  atomic_store_explicit(&watch_now.seq, s + 2, memory_order_release);
}

/* A collective on group g over comm begins. Every member begins the same
 * collectives in the same order, so the count per group identifies it. */
static inline void watch_collective(MPI_Comm comm, comm_group g, const char *kind) {
  if (!watch_mine) return;
  atomic_fetch_add_explicit(&watch_now.coll[g], 1, memory_order_relaxed);
  watch_begin_(comm, g, kind, -1, -1);
}

/* A point-to-point wait on peer (its rank in group g) begins. */
static inline void watch_p2p(MPI_Comm comm, comm_group g, const char *kind, int peer, int tag) {
  if (!watch_mine) return;
  watch_begin_(comm, g, kind, peer, tag);
}

/* The host waits for the device (a stream synchronize, a download), where
 * collectives queued on the device complete: charged to group g, the group
 * of the latest collective begun (not counted as one). */
static inline void watch_device(MPI_Comm comm, comm_group g, const char *kind) {
  if (!watch_mine) return;
  watch_begin_(comm, g, kind, -1, -1);
}

/* The wait in flight is over. */
static inline void watch_done(void) {
  if (!watch_mine) return;
  const uint64_t s = watch_open_();
  atomic_store_explicit(&watch_now.active, 0, memory_order_relaxed);
  atomic_store_explicit(&watch_now.seq, s + 2, memory_order_release);
}

/* Starts the watchdog for the calling thread (before MPI_Init: its start
 * is a WATCH_WAIT phase named "MPI start-up"). timeout_s <= 0: nothing is
 * started and every other call is a no-op. ckpt_timeout_s: ckpt.timeout
 * (0 = never), for WATCH_CKPT phases. Call it with the stop signals
 * blocked: the thread inherits the mask. */
void watchdog_start(double timeout_s, double ckpt_timeout_s);
/* After MPI_Init (collective over MPI_COMM_WORLD): the side channel that
 * asks the other ranks. thread_multiple: MPI_THREAD_MULTIPLE is provided
 * (else the watchdog does without the channel). A world of one rank has
 * nothing to wait for: the watchdog stands down. */
void watchdog_mpi_ready(int thread_multiple);
/* Before MPI_Finalize: the side channel is closed (its duplicate freed);
 * finalize itself is watched as a WATCH_WAIT phase. */
void watchdog_mpi_close(void);
/* After MPI_Finalize: waits are no longer watched; the thread ends (once
 * no deadline is left). */
void watchdog_stop(void);

/* Another thread's job with a deadline (the checkpoint writer's save or
 * load, ckpt/session/ckpt_session.c): the same thread asks fn(ctx, &line)
 * a few times a second, under the watchdog's lock (so fn's ctx stays alive
 * until it is removed), and ends the job (job_end) with the line fn wrote
 * (line.msg) and the status it returns when that is > 0; 0: within the deadline. The
 * thread runs for deadlines wherever they are registered, also where it
 * watches no waits (parallel.timeout=0, a world of one rank, a program
 * that never called watchdog_start). fn NULL: ctx's deadline is removed.
 * Eight at a time at most (one per live checkpoint session). */
typedef int (*watchdog_overdue_fn)(void *ctx, boost_status *line);
void watchdog_deadline(watchdog_overdue_fn fn, void *ctx);

/* The watched thread enters a phase (name: a string that outlives it). */
void watchdog_phase(const char *name, watch_bound bound);
/* The training step in progress (the training loop is a WATCH_WORK phase
 * whose waits count one by one). */
void watchdog_step(int64_t step);

/* The communication failed on this rank (an NCCL or CUDA error in a
 * collective or a device wait; why: one line): the job ends now as on a
 * timeout -- every abort hook of job_abort.h runs (the communicators are
 * aborted), one line names the error, the wait in flight (group, step) and
 * the ranks that have not arrived, exit 74 or 75. From the watched thread,
 * with the watchdog running, its thread does it; otherwise the caller.
 * Never returns. */
void watchdog_fail(const char *why) __attribute__((noreturn));

/* The exit status if the watchdog fires now: 74 or 75, with a few words on
 * why (why->msg). Called on the watchdog thread; must stay callable until
 * replaced. */
typedef int (*watchdog_status_fn)(void *ctx, boost_status *why);
/* fn NULL: `fixed` (74 or 75) with `why` (a string that outlives it). */
void watchdog_set_status(watchdog_status_fn fn, void *ctx, int fixed, const char *why);

#endif
