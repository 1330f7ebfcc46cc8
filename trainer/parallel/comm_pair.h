/* Float sums between exactly two ranks by point-to-point messages, the MPI
 * backend's non-blocking sums for a group of two (comm_mpi.c): Open MPI's
 * non-blocking collectives (libnbc) run their own schedules at two to
 * three times the time of the blocking call on large buffers (0.9-1.0 s
 * against 0.35-0.47 s for 180 MiB over shared memory on this machine), while
 * its point-to-point messages take the single-copy path.
 *
 * A buffer of n floats: rank 0 sums [0, split), rank 1 [split, n). Phase 1
 * sends the peer's part and receives the peer's values of this rank's part,
 * which are added (mine + theirs: one addition per element, and addition
 * commutes, so the bits of any two-rank sum); an all-reduce then sends the
 * sums back in phase 2, a reduce-scatter leaves them in out. MPI moves data
 * only inside its calls: comm_pair_test advances what has arrived. Each op
 * has tags of its own (its sequence number on the context, the same on both
 * ranks: both post the same ops in the same order), so ops may complete in
 * any order. */
#ifndef BOOST_COMM_PAIR_H
#define BOOST_COMM_PAIR_H

#include <mpi.h>
#include <stddef.h>

/* Receive space for the ops in flight on a context, reused step after step. */
typedef struct {
  float *base;
  size_t cap, used, want; /* floats: allocated, taken by the ops in flight, wanted next time */
  int inflight;
  unsigned seq;
} comm_pair_pool;

typedef struct comm_pair_op comm_pair_op;

/* out == NULL: all-reduce (buf holds the sums at completion); else
 * reduce-scatter: this rank's part summed into out (buf is left as it was). */
comm_pair_op *comm_pair_start(comm_pair_pool *pool, MPI_Comm mc, float *buf, size_t n, size_t split, float *out);
/* 1 when op has completed (op freed), else 0. */
int comm_pair_test(comm_pair_op *op);
/* Completes op and frees it. */
void comm_pair_wait(comm_pair_op *op);
void comm_pair_pool_free(comm_pair_pool *pool);

#endif
