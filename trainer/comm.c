/* The comm layer's front: counting, the act-type calls, the column gather
 * and scatter, and the control plane. Backends: comm_mpi.c (and NCCL). */
#include "comm.h"

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "watchdog.h"

const char *const comm_group_names[COMM_NUM_GROUPS] = {"tp", "dp", "pp", "world"};
const char *const comm_kind_names[COMM_NUM_KINDS] = {"allreduce", "allgather", "reduce_scatter", "sendrecv",
                                                     "alltoall"};

void comm_free(comm_ctx *c) {
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

static boost_dtype act_type(const comm_ctx *c) { return c->be ? c->be->act_dtype : BOOST_F32; }

static void allreduce(comm_ctx *c, comm_group g, void *buf, size_t n, boost_dtype t, comm_redop op) {
  if (c->size[g] == 1 || n == 0) return;
  const double t0 = begin(c, g, COMM_ALLREDUCE);
  c->ops->allreduce(c, g, buf, n, t, op);
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
  if (c->size[g] == 1 || n_h + n_ss == 0) return;
  const double t0 = begin(c, g, COMM_ALLREDUCE);
  c->ops->allreduce_pair(c, g, h, n_h, act_type(c), ss, n_ss);
  count(c, g, COMM_ALLREDUCE, n_h * boost_dtype_size(act_type(c)) + n_ss * sizeof(float), t0);
}

void comm_reduce_scatter_sum(comm_ctx *c, comm_group g, float *buf, size_t chunk) {
  if (c->size[g] == 1 || chunk == 0) return;
  const double t0 = begin(c, g, COMM_REDUCE_SCATTER);
  c->ops->reduce_scatter(c, g, buf, chunk, BOOST_F32);
  count(c, g, COMM_REDUCE_SCATTER, chunk * (size_t)c->size[g] * sizeof(float), t0);
}

void comm_allgather_chunks(comm_ctx *c, comm_group g, float *buf, size_t chunk) {
  if (c->size[g] == 1 || chunk == 0) return;
  const double t0 = begin(c, g, COMM_ALLGATHER);
  c->ops->allgather_chunks(c, g, buf, chunk, BOOST_F32);
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
  if (p == 1) {
    c->be->mem->copy(c->be, full, local, n * es);
    return;
  }
  const double t0 = begin(c, g, COMM_ALLGATHER);
  /* Gathered as [p][rows][cols], then interleaved into [rows][p * cols]. */
  char *stage = scratch(c, n * (size_t)p * es);
  c->ops->allgather(c, g, local, stage, n, act_type(c));
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
  c->ops->isend(c, g, buf, n, act_type(c), peer, tag, req);
  req->group = (int)g, req->peer = peer, req->tag = tag;
  count(c, g, COMM_SENDRECV, n * boost_dtype_size(act_type(c)), t0);
}

void comm_recv_act(comm_ctx *c, comm_group g, boost_act *buf, size_t n, int peer, int tag) {
  watch_p2p(c->mpi[g], g, "recv", peer, tag);
  const double t0 = MPI_Wtime();
  c->ops->recv(c, g, buf, n, act_type(c), peer, tag);
  count(c, g, COMM_SENDRECV, n * boost_dtype_size(act_type(c)), t0);
}

void comm_wait(comm_ctx *c, comm_request *req) {
  watch_p2p(c->mpi[req->group], (comm_group)req->group, "send completion", req->peer, req->tag);
  c->ops->wait(c, req);
  watch_done();
}

void comm_alltoallv_f32(comm_ctx *c, comm_group g, const float *send, const size_t *scount, const size_t *sdispl,
                        float *recv, const size_t *rcount, const size_t *rdispl) {
  const double t0 = begin(c, g, COMM_ALLTOALL);
  size_t moved = 0;
  for (int r = 0; r < c->size[g]; r++) moved += r == c->rank[g] ? 0 : scount[r];
  c->ops->alltoallv(c, g, send, scount, sdispl, recv, rcount, rdispl, BOOST_F32);
  count(c, g, COMM_ALLTOALL, moved * sizeof(float), t0);
}

/* The control plane: one watched allreduce of host values. */
static void control(comm_ctx *c, comm_group g, void *host, int n, MPI_Datatype t, MPI_Op op) {
  if (c->size[g] == 1 || n <= 0) return;
  watch_collective(c->mpi[g], g, "control allreduce");
  MPI_Allreduce(MPI_IN_PLACE, host, n, t, op, c->mpi[g]);
  watch_done();
}

void comm_control_sum_f64(comm_ctx *c, comm_group g, double *host, int n) { control(c, g, host, n, MPI_DOUBLE, MPI_SUM); }

int comm_control_max_int(comm_ctx *c, comm_group g, int v) {
  control(c, g, &v, 1, MPI_INT, MPI_MAX);
  return v;
}

int comm_control_min_int(comm_ctx *c, comm_group g, int v) {
  control(c, g, &v, 1, MPI_INT, MPI_MIN);
  return v;
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
