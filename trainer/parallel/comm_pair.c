/* Two-rank float sums by point-to-point messages (comm_pair.h). */
#include "comm_pair.h"

#include <stdlib.h>

#include "check.h"

#define PAIR_TAG_BASE 0x4000 /* dp's point-to-point tags: 0x4000 + 2 * (seq % 4096) + phase - 1 */

struct comm_pair_op {
  comm_pair_pool *pool;
  MPI_Comm mc;
  MPI_Request r[2];
  int phase, tag; /* phase 1: parts exchanged; 2: sums exchanged (all-reduce) */
  float *mine, *theirs, *in, *out; /* this rank's part, the peer's, the peer's values of mine, the sums' place */
  size_t n_mine, n_theirs;
  int own_in; /* in was allocated for this op (the pool was in use and short) */
};

/* Receive space: from the pool, which grows (while nothing is in flight)
 * to what a step needed; ops beyond it meanwhile get space of their own. */
static float *pool_take(comm_pair_pool *p, size_t n, int *own) {
  *own = 0;
  if (p->inflight == 0) {
    p->used = 0;
    const size_t want = p->want > n ? p->want : n;
    if (want > p->cap) {
      boost_free(p->base);
      p->base = boost_calloc(want, sizeof(float));
      p->cap = want;
    }
  }
  if (p->used + n <= p->cap) {
    float *at = p->base + p->used;
    p->used += n;
    return at;
  }
  *own = 1;
  if (p->used + n > p->want) p->want = p->used + n;
  return boost_calloc(n ? n : 1, sizeof(float));
}

comm_pair_op *comm_pair_start(comm_pair_pool *pool, MPI_Comm mc, float *buf, size_t n, size_t split, float *out) {
  int me;
  MPI_Comm_rank(mc, &me);
  BOOST_ASSERT(split <= n && n < (size_t)1 << 31);
  comm_pair_op *op = boost_calloc(1, sizeof *op);
  op->pool = pool;
  op->mc = mc;
  op->tag = PAIR_TAG_BASE + 2 * (int)(pool->seq++ % 4096);
  op->mine = me == 0 ? buf : buf + split;
  op->theirs = me == 0 ? buf + split : buf;
  op->n_mine = me == 0 ? split : n - split;
  op->n_theirs = n - op->n_mine;
  op->out = out ? out : op->mine;
  op->in = pool_take(pool, op->n_mine, &op->own_in);
  pool->inflight++;
  op->phase = 1;
  MPI_Irecv(op->in, (int)op->n_mine, MPI_FLOAT, 1 - me, op->tag, mc, &op->r[0]);
  MPI_Isend(op->theirs, (int)op->n_theirs, MPI_FLOAT, 1 - me, op->tag, mc, &op->r[1]);
  if (out) op->phase = 3; /* reduce-scatter: no phase 2 (3: the last phase is 1) */
  return op;
}

static void finish(comm_pair_op *op) {
  comm_pair_pool *p = op->pool;
  if (op->own_in) boost_free(op->in);
  if (--p->inflight == 0) p->used = 0;
  boost_free(op);
}

/* The phase's messages are done: the sums, and phase 2 where there is one.
 * Returns 1 when the op is complete. */
static int advance(comm_pair_op *op) {
  if (op->phase == 2) return 1;
  for (size_t i = 0; i < op->n_mine; i++) op->out[i] = op->mine[i] + op->in[i];
  if (op->phase == 3) return 1;
  int me;
  MPI_Comm_rank(op->mc, &me);
  op->phase = 2; /* phase 1's send of the peer's part is complete: its place takes the peer's sums */
  MPI_Irecv(op->theirs, (int)op->n_theirs, MPI_FLOAT, 1 - me, op->tag + 1, op->mc, &op->r[0]);
  MPI_Isend(op->mine, (int)op->n_mine, MPI_FLOAT, 1 - me, op->tag + 1, op->mc, &op->r[1]);
  return 0;
}

int comm_pair_test(comm_pair_op *op) {
  for (;;) {
    int done = 0;
    MPI_Testall(2, op->r, &done, MPI_STATUSES_IGNORE);
    if (!done) return 0;
    if (advance(op)) {
      finish(op);
      return 1;
    }
  }
}

void comm_pair_wait(comm_pair_op *op) {
  for (;;) {
    MPI_Waitall(2, op->r, MPI_STATUSES_IGNORE);
    if (advance(op)) {
      finish(op);
      return;
    }
  }
}

void comm_pair_pool_free(comm_pair_pool *pool) {
  boost_free(pool->base);
  *pool = (comm_pair_pool){0};
}
