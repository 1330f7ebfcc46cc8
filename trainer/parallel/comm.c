/* The comm layer's front: counting, the act-type calls, the column gather
 * and scatter, and the control plane. Backends: comm_mpi.c (and NCCL). */
#include "comm.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "job_abort.h"
#include "watchdog.h"
#include "log.h"

const char *const comm_group_names[COMM_NUM_GROUPS] = {"tp", "dp", "pp", "world"};
const char *const comm_kind_names[COMM_NUM_KINDS] = {"allreduce", "allgather", "reduce_scatter", "sendrecv",
                                                     "alltoall"};

void comm_free(comm_ctx *c) {
  if (c->wait_hooks.ctx == c) boost_wait_set_hooks(NULL);
  job_abort_on(NULL, c);
  if (c->scratch && c->be) c->be->mem->free(c->be, c->scratch);
  if (c->ops && c->ops->destroy) c->ops->destroy(c);
  memset(c, 0, sizeof *c);
}

void comm_reset_counts(comm_ctx *c) { memset(c->count, 0, sizeof c->count); }

uint64_t comm_bytes(const comm_ctx *c, comm_group g, comm_kind k) { return c->count[g][k].bytes; }

/* A collective of kind k over group g begins: the watchdog's record, and
 * the start time for the counters. */
static double begin(comm_ctx *c, comm_group g, comm_kind k) {
  watch_collective(c->mpi[g], g, comm_kind_names[k]);
  c->last_group = (int)g;
  return MPI_Wtime();
}

/* The call is over: counted (data plane) and no longer in flight. */
static void count(comm_ctx *c, comm_group g, comm_kind k, size_t bytes, double t0) {
  watch_done();
  comm_counter *ct = &c->count[g][k];
  ct->bytes += bytes;
  ct->calls++;
  ct->seconds += MPI_Wtime() - t0;
}

/* A context is abandoned by the watchdog (the job ends): its backend's abort. */
static void abort_hook(void *ctx) {
  comm_ctx *c = ctx;
  if (c->ops && c->ops->abort) c->ops->abort(c);
}

/* The backend failed (rc != 0): every communicator is abandoned and the job
 * ends with one line naming the call (its watch record names the group). */
static void check_rc(comm_ctx *c, int rc, const char *what) {
  if (rc == 0) return;
  char why[640];
  abort_hook(c);
  boost_msgf(why, sizeof why, "the %s backend failed in %s: %s", c->ops->name, what,
             c->err.failed ? c->err.msg : "no reason given");
  watchdog_fail(why);
}

static int skip(const comm_ctx *c, comm_group g) { return c->size[g] == 1 && !c->every_group; }

static boost_dtype act_type(const comm_ctx *c) { return c->be ? c->be->act_dtype : BOOST_F32; }

static void allreduce(comm_ctx *c, comm_group g, void *buf, size_t n, boost_dtype t, comm_redop op) {
  if (skip(c, g) || n == 0) return;
  const double t0 = begin(c, g, COMM_ALLREDUCE);
  check_rc(c, c->ops->allreduce(c, g, buf, n, t, op), "allreduce");
  count(c, g, COMM_ALLREDUCE, n * boost_dtype_size(t), t0);
}

void comm_allreduce_sum(comm_ctx *c, comm_group g, float *buf, size_t n) { allreduce(c, g, buf, n, BOOST_F32, COMM_SUM); }
void comm_allreduce_max(comm_ctx *c, comm_group g, float *buf, size_t n) { allreduce(c, g, buf, n, BOOST_F32, COMM_MAX); }
void comm_allreduce_sum_f64(comm_ctx *c, comm_group g, double *buf, size_t n) {
  allreduce(c, g, buf, n, BOOST_F64, COMM_SUM);
}
void comm_allreduce_act(comm_ctx *c, comm_group g, boost_act *buf, size_t n) {
  allreduce(c, g, buf, n, act_type(c), COMM_SUM);
}

void comm_allreduce_btp(comm_ctx *c, comm_group g, boost_act *h, size_t n_h, float *ss, size_t n_ss) {
  if (skip(c, g) || n_h + n_ss == 0) return;
  const double t0 = begin(c, g, COMM_ALLREDUCE);
  check_rc(c, c->ops->allreduce_pair(c, g, h, n_h, act_type(c), ss, n_ss), "allreduce");
  count(c, g, COMM_ALLREDUCE, n_h * boost_dtype_size(act_type(c)) + n_ss * sizeof(float), t0);
}

void comm_reduce_scatter_sum(comm_ctx *c, comm_group g, float *buf, size_t chunk) {
  if (skip(c, g) || chunk == 0) return;
  const double t0 = begin(c, g, COMM_REDUCE_SCATTER);
  check_rc(c, c->ops->reduce_scatter(c, g, buf, chunk, BOOST_F32), "reduce_scatter");
  count(c, g, COMM_REDUCE_SCATTER, chunk * (size_t)c->size[g] * sizeof(float), t0);
}

void comm_allgather_chunks(comm_ctx *c, comm_group g, float *buf, size_t chunk) {
  if (skip(c, g) || chunk == 0) return;
  const double t0 = begin(c, g, COMM_ALLGATHER);
  check_rc(c, c->ops->allgather_chunks(c, g, buf, chunk, BOOST_F32), "allgather");
  count(c, g, COMM_ALLGATHER, chunk * sizeof(float), t0);
}

static void *scratch(comm_ctx *c, size_t bytes) {
  if (bytes > c->scratch_bytes) {
    if (c->scratch) c->be->mem->free(c->be, c->scratch);
    c->scratch = boost_be_alloc(c->be, bytes, "the column gather's buffer");
    c->scratch_bytes = bytes;
  }
  return c->scratch;
}

void comm_allgather_cols(comm_ctx *c, comm_group g, const boost_act *local, boost_act *full, size_t rows, size_t cols) {
  const int p = c->size[g];
  const size_t es = boost_dtype_size(act_type(c)), n = rows * cols;
  BOOST_ASSERT(c->be);
  if (skip(c, g)) {
    c->be->mem->copy(c->be, full, local, n * es);
    return;
  }
  const double t0 = begin(c, g, COMM_ALLGATHER);
  /* Gathered as [p][rows][cols], then interleaved into [rows][p * cols]. */
  char *stage = scratch(c, n * (size_t)p * es);
  check_rc(c, c->ops->allgather(c, g, local, stage, n, act_type(c)), "allgather");
  watch_done();
  for (int r = 0; r < p; r++)
    c->be->mem->copy2d(c->be, (char *)full + (size_t)r * cols * es, cols * (size_t)p * es, stage + (size_t)r * n * es,
                       cols * es, cols * es, rows);
  count(c, g, COMM_ALLGATHER, n * es, t0);
}

void comm_scatter_cols(comm_ctx *c, comm_group g, const boost_act *full, boost_act *local, size_t rows, size_t cols) {
  const int p = c->size[g], me = c->rank[g];
  const size_t es = boost_dtype_size(act_type(c));
  BOOST_ASSERT(c->be);
  c->be->mem->copy2d(c->be, local, cols * es, (const char *)full + (size_t)me * cols * es, cols * (size_t)p * es,
                     cols * es, rows);
}

void comm_isend_act(comm_ctx *c, comm_group g, const boost_act *buf, size_t n, int peer, int tag, comm_request *req) {
  const double t0 = MPI_Wtime(); /* returns at once: not a wait */
  c->last_group = (int)g;
  check_rc(c, c->ops->isend(c, g, buf, n, act_type(c), peer, tag, req), "send");
  req->group = (int)g, req->peer = peer, req->tag = tag;
  count(c, g, COMM_SENDRECV, n * boost_dtype_size(act_type(c)), t0);
}

void comm_recv_act(comm_ctx *c, comm_group g, boost_act *buf, size_t n, int peer, int tag) {
  watch_p2p(c->mpi[g], g, "recv", peer, tag);
  c->last_group = (int)g;
  const double t0 = MPI_Wtime();
  check_rc(c, c->ops->recv(c, g, buf, n, act_type(c), peer, tag), "recv");
  count(c, g, COMM_SENDRECV, n * boost_dtype_size(act_type(c)), t0);
}

/* A non-blocking sum completes: a wait on its group, recorded under its
 * kind but not counted as another collective (it was, when posted: every
 * rank's count still names the same collective). */
static void wait_collective(comm_ctx *c, comm_request *req) {
  const comm_group g = (comm_group)req->group;
  const comm_kind k = (comm_kind)(req->kind - 1);
  watch_p2p(c->mpi[g], g, comm_kind_names[k], -1, -1); /* peer -1: the group's collective */
  const double t0 = MPI_Wtime();
  check_rc(c, c->ops->wait(c, req), comm_kind_names[k]);
  watch_done();
  c->count[g][k].seconds += MPI_Wtime() - t0;
  memset(req, 0, sizeof *req);
}

void comm_wait(comm_ctx *c, comm_request *req) {
  if (req->kind) {
    wait_collective(c, req);
    return;
  }
  watch_p2p(c->mpi[req->group], (comm_group)req->group, "send completion", req->peer, req->tag);
  check_rc(c, c->ops->wait(c, req), "send completion");
  watch_done();
}

/* A non-blocking sum was posted (its backend's fallback may have waited:
 * watched like a blocking call until here). */
static void posted(comm_ctx *c, comm_group g, comm_kind k, comm_request *req, size_t bytes, double t0) {
  count(c, g, k, bytes, t0);
  req->group = (int)g, req->kind = (int)k + 1, req->peer = -1, req->tag = 0;
}

void comm_iallreduce_sum(comm_ctx *c, comm_group g, float *buf, size_t n, comm_request *req) {
  BOOST_ASSERT(!req->kind);
  if (skip(c, g) || n == 0) return;
  const double t0 = begin(c, g, COMM_ALLREDUCE);
  check_rc(c, c->ops->iallreduce(c, g, buf, n, req), "allreduce");
  posted(c, g, COMM_ALLREDUCE, req, n * sizeof(float), t0);
}

void comm_ireduce_scatter_sum(comm_ctx *c, comm_group g, float *buf, size_t begin_at, size_t end, size_t chunk,
                              float *out, comm_request *req) {
  BOOST_ASSERT(!req->kind && begin_at <= end && end <= chunk * (size_t)c->size[g]);
  if (skip(c, g) || begin_at == end) return;
  const double t0 = begin(c, g, COMM_REDUCE_SCATTER);
  check_rc(c, c->ops->ireduce_scatter(c, g, buf, begin_at, end, chunk, out, req), "reduce_scatter");
  posted(c, g, COMM_REDUCE_SCATTER, req, (end - begin_at) * sizeof(float), t0);
}

int comm_test(comm_ctx *c, comm_request *req) {
  if (!req->kind) return 1;
  const double t0 = MPI_Wtime(); /* returns at once: not a wait */
  int done = 0;
  check_rc(c, c->ops->test(c, req, &done), comm_kind_names[req->kind - 1]);
  c->count[req->group][req->kind - 1].seconds += MPI_Wtime() - t0;
  return done;
}

void comm_alltoallv_f32(comm_ctx *c, comm_group g, const float *send, const size_t *scount, const size_t *sdispl,
                        float *recv, const size_t *rcount, const size_t *rdispl) {
  const double t0 = begin(c, g, COMM_ALLTOALL);
  size_t moved = 0;
  for (int r = 0; r < c->size[g]; r++) moved += r == c->rank[g] ? 0 : scount[r];
  check_rc(c, c->ops->alltoallv(c, g, send, scount, sdispl, recv, rcount, rdispl, BOOST_F32), "alltoall");
  count(c, g, COMM_ALLTOALL, moved * sizeof(float), t0);
}

/* ---- the control plane ---------------------------------------------------- */

static _Atomic int stall_next; /* comm_test_stall_next_control */

void comm_test_stall_next_control(void) { atomic_store(&stall_next, 1); }

void comm_control(MPI_Comm mc, comm_group g, const char *what, void *host, int n, MPI_Datatype t, MPI_Op op) {
  int size = 1;
  MPI_Comm_size(mc, &size);
  if (size == 1 || n <= 0) return;
  watch_collective(mc, g, what);
  if (watch_mine && atomic_exchange(&stall_next, 0)) {
    boost_log_warn("this rank stalls inside the %s (test hook)", what);
    for (;;) nanosleep(&(struct timespec){1, 0}, NULL);
  }
  MPI_Allreduce(MPI_IN_PLACE, host, n, t, op, mc);
  watch_done();
}

void comm_control_bcast(MPI_Comm mc, comm_group g, const char *what, void *buf, int bytes, int root) {
  int rank;
  MPI_Comm_rank(mc, &rank);
  if (rank != root) memset(buf, 0, (size_t)bytes);
  comm_control(mc, g, what, buf, bytes, MPI_BYTE, MPI_BOR);
}

int comm_control_all(MPI_Comm mc, comm_group g, const char *what, int ok) {
  int v = ok != 0;
  comm_control(mc, g, what, &v, 1, MPI_INT, MPI_MIN);
  return v;
}

int comm_control_first_failure(MPI_Comm mc, comm_group g, const char *what, int ok, char *msg, int msglen) {
  int rank, first;
  MPI_Comm_rank(mc, &rank);
  first = ok ? INT_MAX : rank;
  comm_control(mc, g, what, &first, 1, MPI_INT, MPI_MIN);
  if (first == INT_MAX) return -1;
  msg[msglen - 1] = '\0';
  comm_control_bcast(mc, g, what, msg, msglen, first);
  return first;
}

void comm_control_sum_f64(comm_ctx *c, comm_group g, double *host, int n) {
  comm_control(c->mpi[g], g, "control allreduce", host, n, MPI_DOUBLE, MPI_SUM);
}

int comm_control_max_int(comm_ctx *c, comm_group g, int v) {
  comm_control(c->mpi[g], g, "control allreduce", &v, 1, MPI_INT, MPI_MAX);
  return v;
}

int comm_control_min_int(comm_ctx *c, comm_group g, int v) {
  comm_control(c->mpi[g], g, "control allreduce", &v, 1, MPI_INT, MPI_MIN);
  return v;
}

/* ---- device waits ------------------------------------------------------------ */

/* Only the watched thread records, and a device wait inside a wait already
 * recorded (the MPI backend staging a device buffer) leaves that record. */
static void dw_begin(void *ctx, const char *what) {
  comm_ctx *c = ctx;
  if (!watch_mine) return;
  c->device_wait_recorded = !atomic_load_explicit(&watch_now.active, memory_order_relaxed);
  if (c->device_wait_recorded) watch_device(c->mpi[c->last_group], (comm_group)c->last_group, what);
}
static void dw_end(void *ctx) {
  comm_ctx *c = ctx;
  if (!watch_mine || !c->device_wait_recorded) return;
  c->device_wait_recorded = 0;
  watch_done();
}
static int dw_poll(void *ctx, boost_status *err) {
  comm_ctx *c = ctx;
  if (!c->ops->poll || c->ops->poll(c) == 0) return 0;
  return boost_err(err, "%s", c->err.msg);
}
static void dw_fail(void *ctx, const char *what, const char *err) {
  comm_ctx *c = ctx;
  char why[768];
  boost_msgf(why, sizeof why, "the device wait (%s) failed (%s backend): %s", what, c->ops->name, err);
  watchdog_fail(why);
}

void comm_attach_watchdog(comm_ctx *c) {
  c->wait_hooks = (boost_wait_hooks){.ctx = c, .begin = dw_begin, .end = dw_end, .poll = dw_poll, .fail = dw_fail};
  boost_wait_set_hooks(&c->wait_hooks);
  job_abort_on(abort_hook, c);
}

void comm_format_counts(const comm_ctx *c, char *out, size_t outlen) {
  size_t used = 0;
  out[0] = '\0';
  for (int g = 0; g < COMM_NUM_GROUPS; g++)
    for (int k = 0; k < COMM_NUM_KINDS; k++) {
      const comm_counter *ct = &c->count[g][k];
      if (!ct->calls || used >= outlen) continue;
      used += (size_t)snprintf(out + used, outlen - used, "%s%s %s %.2f MiB/%llu", used ? ", " : "", comm_group_names[g],
                               comm_kind_names[k], (double)ct->bytes / (1 << 20), (unsigned long long)ct->calls);
    }
  if (!used) snprintf(out, outlen, "none");
}
