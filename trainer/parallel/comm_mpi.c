/* The MPI communication backend. MPI moves host memory: the CPU backends'
 * buffers directly (host_view), any other backend's through a host copy
 * (download, MPI, upload) -- correct everywhere, fast where memory is host
 * memory; GPUs use the NCCL backend instead. bf16 sums use a user-defined
 * MPI operation that adds in float and rounds back by the kernels' rule
 * (bf16.h). Its calls return 0: MPI's own errors are fatal
 * (MPI_ERRORS_ARE_FATAL: the launcher ends the job). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "check.h"
#include "comm.h"
#include "comm_pair.h"

/* MPI counts are int: large buffers go in pieces. */
#define COMM_CHUNK ((size_t)1 << 28)

typedef struct {
  MPI_Op bf16_sum;
  comm_pair_pool pair; /* the non-blocking sums of groups of two */
} mpi_impl;

static void bf16_sum_op(void *in, void *inout, int *len, MPI_Datatype *type) {
  (void)type;
  const uint16_t *a = in;
  uint16_t *b = inout;
  for (int i = 0; i < *len; i++) b[i] = f32_to_bf16(bf16_to_f32(a[i]) + bf16_to_f32(b[i]));
}

static MPI_Datatype mpi_type(boost_dtype t) {
  switch (t) {
  case BOOST_F32: return MPI_FLOAT;
  case BOOST_BF16: return MPI_UINT16_T;
  case BOOST_F64: return MPI_DOUBLE;
  case BOOST_I32: return MPI_INT32_T;
  default: BOOST_ASSERT(!"unknown dtype"); return MPI_BYTE;
  }
}

static MPI_Op mpi_op(comm_ctx *c, boost_dtype t, comm_redop op) {
  if (t == BOOST_BF16) {
    BOOST_ASSERT(op == COMM_SUM);
    return ((mpi_impl *)c->impl)->bf16_sum;
  }
  return op == COMM_SUM ? MPI_SUM : MPI_MAX;
}

/* ---- host views of the buffers -------------------------------------------------
 * A buffer MPI can touch: backend memory itself when it is host memory, else
 * a host copy (from the buffer when `in`, back into it by host_done when
 * `out`). */
typedef struct {
  void *host;
  int staged;
} host_buf;

static host_buf host_of(comm_ctx *c, const void *p, size_t bytes, int in) {
  host_buf h = {(void *)p, 0};
  if (!c->be || !bytes) return h;
  h.host = c->be->mem->host_view(c->be, p);
  if (h.host) return h;
  h.host = boost_calloc(bytes, 1);
  h.staged = 1;
  if (in) c->be->mem->download(c->be, h.host, p, bytes);
  return h;
}

static void host_done(comm_ctx *c, host_buf h, void *p, size_t bytes, int out) {
  if (!h.staged) return;
  if (out) c->be->mem->upload(c->be, p, h.host, bytes);
  boost_free(h.host);
}

static int mpi_allreduce(comm_ctx *c, comm_group g, void *buf, size_t n, boost_dtype t, comm_redop op) {
  const size_t es = boost_dtype_size(t);
  host_buf h = host_of(c, buf, n * es, 1);
  for (size_t off = 0; off < n; off += COMM_CHUNK) {
    const int cnt = (int)(n - off < COMM_CHUNK ? n - off : COMM_CHUNK);
    MPI_Allreduce(MPI_IN_PLACE, (char *)h.host + off * es, cnt, mpi_type(t), mpi_op(c, t, op), c->mpi[g]);
  }
  host_done(c, h, buf, n * es, 1);
  return 0;
}

static int mpi_allreduce_pair(comm_ctx *c, comm_group g, void *a, size_t n_a, boost_dtype ta, float *b, size_t n_b) {
  /* float bottleneck with its statistics right behind it: one message */
  if (ta == BOOST_F32 && (float *)a + n_a == b) return mpi_allreduce(c, g, a, n_a + n_b, BOOST_F32, COMM_SUM);
  const size_t ea = boost_dtype_size(ta);
  BOOST_ASSERT(n_a < COMM_CHUNK && n_b < COMM_CHUNK);
  host_buf ha = host_of(c, a, n_a * ea, 1), hb = host_of(c, b, n_b * sizeof(float), 1);
  MPI_Request r[2];
  MPI_Iallreduce(MPI_IN_PLACE, ha.host, (int)n_a, mpi_type(ta), mpi_op(c, ta, COMM_SUM), c->mpi[g], &r[0]);
  MPI_Iallreduce(MPI_IN_PLACE, hb.host, (int)n_b, MPI_FLOAT, MPI_SUM, c->mpi[g], &r[1]);
  MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
  host_done(c, ha, a, n_a * ea, 1);
  host_done(c, hb, b, n_b * sizeof(float), 1);
  return 0;
}

static int mpi_reduce_scatter(comm_ctx *c, comm_group g, void *buf, size_t chunk, boost_dtype t) {
  BOOST_ASSERT(chunk < (size_t)1 << 31);
  const size_t es = boost_dtype_size(t), bytes = chunk * (size_t)c->size[g] * es;
  host_buf h = host_of(c, buf, bytes, 1);
  /* In place, MPI leaves the result at the start of the buffer. */
  MPI_Reduce_scatter_block(MPI_IN_PLACE, h.host, (int)chunk, mpi_type(t), mpi_op(c, t, COMM_SUM), c->mpi[g]);
  if (c->rank[g] != 0) memmove((char *)h.host + (size_t)c->rank[g] * chunk * es, h.host, chunk * es);
  host_done(c, h, buf, bytes, 1);
  return 0;
}

static int mpi_allgather_chunks(comm_ctx *c, comm_group g, void *buf, size_t chunk, boost_dtype t) {
  BOOST_ASSERT(chunk < (size_t)1 << 31);
  const size_t bytes = chunk * (size_t)c->size[g] * boost_dtype_size(t);
  host_buf h = host_of(c, buf, bytes, 1);
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, h.host, (int)chunk, mpi_type(t), c->mpi[g]);
  host_done(c, h, buf, bytes, 1);
  return 0;
}

static int mpi_allgather(comm_ctx *c, comm_group g, const void *send, void *recv, size_t n, boost_dtype t) {
  const size_t es = boost_dtype_size(t);
  BOOST_ASSERT(n * (size_t)c->size[g] < (size_t)1 << 31);
  host_buf hs = host_of(c, send, n * es, 1), hr = host_of(c, recv, n * (size_t)c->size[g] * es, 0);
  MPI_Allgather(hs.host, (int)n, mpi_type(t), hr.host, (int)n, mpi_type(t), c->mpi[g]);
  host_done(c, hs, (void *)send, n * es, 0);
  host_done(c, hr, recv, n * (size_t)c->size[g] * es, 1);
  return 0;
}

static int *int_counts(const size_t *v, int n) {
  int *out = boost_calloc((size_t)n, sizeof *out);
  for (int i = 0; i < n; i++) {
    BOOST_ASSERT(v[i] < (size_t)1 << 31);
    out[i] = (int)v[i];
  }
  return out;
}

static int mpi_alltoallv(comm_ctx *c, comm_group g, const void *send, const size_t *scount, const size_t *sdispl,
                          void *recv, const size_t *rcount, const size_t *rdispl, boost_dtype t) {
  const int p = c->size[g];
  const size_t es = boost_dtype_size(t);
  size_t send_end = 0, recv_end = 0;
  for (int r = 0; r < p; r++) {
    if (scount[r] && sdispl[r] + scount[r] > send_end) send_end = sdispl[r] + scount[r];
    if (rcount[r] && rdispl[r] + rcount[r] > recv_end) recv_end = rdispl[r] + rcount[r];
  }
  host_buf hs = host_of(c, send, send_end * es, 1), hr = host_of(c, recv, recv_end * es, 0);
  int *sc = int_counts(scount, p), *sd = int_counts(sdispl, p), *rc = int_counts(rcount, p), *rd = int_counts(rdispl, p);
  /* MPI buffers must not alias: an empty side gets a placeholder of its own */
  static char no_send, no_recv;
  MPI_Alltoallv(send_end ? hs.host : &no_send, sc, sd, mpi_type(t), recv_end ? hr.host : &no_recv, rc, rd, mpi_type(t),
                c->mpi[g]);
  boost_free(sc), boost_free(sd), boost_free(rc), boost_free(rd);
  host_done(c, hs, (void *)send, send_end * es, 0);
  host_done(c, hr, recv, recv_end * es, 1);
  return 0;
}

/* A group of two: a comm_pair op (opaque[1]: its address, bits 0 and 1 set). */
#define PAIR_BIT 2u
static void hold_pair(comm_request *req, comm_pair_op *op) {
  req->opaque[0] = 0;
  req->opaque[1] = (uint64_t)(uintptr_t)op | 1u | PAIR_BIT;
}
static comm_pair_op *pair_of(const comm_request *req) {
  return (req->opaque[1] & PAIR_BIT) ? (comm_pair_op *)(uintptr_t)(req->opaque[1] & ~(uint64_t)3) : NULL;
}
static comm_pair_pool *pool(comm_ctx *c) { return &((mpi_impl *)c->impl)->pair; }

/* A request: the MPI_Request, and (low bit set: in flight) the host copy a
 * staged send owns until it completes. */
static int mpi_isend(comm_ctx *c, comm_group g, const void *buf, size_t n, boost_dtype t, int peer, int tag,
                      comm_request *req) {
  BOOST_ASSERT(n < (size_t)1 << 31 && req->opaque[1] == 0);
  host_buf h = host_of(c, buf, n * boost_dtype_size(t), 1);
  MPI_Request r;
  MPI_Isend(h.host, (int)n, mpi_type(t), peer, tag, c->mpi[g], &r);
  _Static_assert(sizeof(MPI_Request) <= sizeof req->opaque[0], "an MPI_Request fits the opaque request");
  memcpy(&req->opaque[0], &r, sizeof r);
  req->opaque[1] = (h.staged ? (uint64_t)(uintptr_t)h.host : 0) | 1u;
  return 0;
}

static int mpi_recv(comm_ctx *c, comm_group g, void *buf, size_t n, boost_dtype t, int peer, int tag) {
  BOOST_ASSERT(n < (size_t)1 << 31);
  const size_t bytes = n * boost_dtype_size(t);
  host_buf h = host_of(c, buf, bytes, 0);
  MPI_Recv(h.host, (int)n, mpi_type(t), peer, tag, c->mpi[g], MPI_STATUS_IGNORE);
  host_done(c, h, buf, bytes, 1);
  return 0;
}

static int mpi_wait(comm_ctx *c, comm_request *req) {
  (void)c;
  if (!(req->opaque[1] & 1u)) return 0;
  comm_pair_op *op = pair_of(req);
  if (op) {
    comm_pair_wait(op);
    memset(req, 0, sizeof *req);
    return 0;
  }
  MPI_Request r;
  memcpy(&r, &req->opaque[0], sizeof r);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  void *staged = (void *)(uintptr_t)(req->opaque[1] & ~(uint64_t)1);
  if (staged) boost_free(staged);
  memset(req, 0, sizeof *req);
  return 0;
}

/* ---- non-blocking sums -------------------------------------------------------
 * Memory MPI cannot touch (a device backend's, staged) is summed at once
 * by the blocking path and leaves the request empty: correct, not
 * overlapped. The request keeps the MPI_Request and, low bit set while in
 * flight, an allocation MPI reads until completion (the counts). */
static void hold_request(comm_request *req, MPI_Request r, void *owned) {
  _Static_assert(sizeof(MPI_Request) <= sizeof req->opaque[0], "an MPI_Request fits the opaque request");
  memcpy(&req->opaque[0], &r, sizeof r);
  req->opaque[1] = (uint64_t)(uintptr_t)owned | 1u;
}


static int mpi_iallreduce(comm_ctx *c, comm_group g, float *buf, size_t n, comm_request *req) {
  if (c->be && !c->be->mem->host_view(c->be, buf)) return mpi_allreduce(c, g, buf, n, BOOST_F32, COMM_SUM);
  BOOST_ASSERT(n < (size_t)1 << 31 && req->opaque[1] == 0);
  float *host = c->be ? c->be->mem->host_view(c->be, buf) : buf;
  if (c->size[g] == 2) {
    hold_pair(req, comm_pair_start(pool(c), c->mpi[g], host, n, n / 2, NULL));
    return 0;
  }
  MPI_Request r;
  MPI_Iallreduce(MPI_IN_PLACE, host, (int)n, MPI_FLOAT, MPI_SUM, c->mpi[g], &r);
  hold_request(req, r, NULL);
  return 0;
}

/* Rank r receives the part of [begin, end) inside its chunk. */
static int *scatter_counts(const comm_ctx *c, comm_group g, size_t begin, size_t end, size_t chunk) {
  int *counts = boost_calloc((size_t)c->size[g], sizeof *counts);
  for (int r = 0; r < c->size[g]; r++) {
    const size_t lo = chunk * (size_t)r, hi = lo + chunk;
    const size_t a = begin > lo ? begin : lo, b = end < hi ? end : hi;
    counts[r] = a < b ? (int)(b - a) : 0;
  }
  return counts;
}

static int mpi_ireduce_scatter(comm_ctx *c, comm_group g, float *buf, size_t begin, size_t end, size_t chunk,
                               float *out, comm_request *req) {
  BOOST_ASSERT(end - begin < (size_t)1 << 31 && req->opaque[1] == 0);
  const size_t mine = chunk * (size_t)c->rank[g], at = begin > mine ? begin - mine : 0;
  int *counts = scatter_counts(c, g, begin, end, chunk);
  const size_t nsend = end - begin, nout = (size_t)counts[c->rank[g]];
  host_buf hs = host_of(c, buf + begin, nsend * sizeof(float), 1), ho = host_of(c, out + at, nout * sizeof(float), 0);
  if (hs.staged || ho.staged) {
    MPI_Reduce_scatter(hs.host, ho.host, counts, MPI_FLOAT, MPI_SUM, c->mpi[g]);
    host_done(c, hs, buf + begin, nsend * sizeof(float), 0);
    host_done(c, ho, out + at, nout * sizeof(float), 1);
    boost_free(counts);
    return 0;
  }
  if (c->size[g] == 2) {
    const size_t split = begin < chunk ? (end < chunk ? end : chunk) - begin : 0;
    hold_pair(req, comm_pair_start(pool(c), c->mpi[g], hs.host, nsend, split, ho.host));
    boost_free(counts);
    return 0;
  }
  static float no_out; /* this rank's part is empty: MPI still wants a buffer of its own */
  MPI_Request r;
  MPI_Ireduce_scatter(hs.host, nout ? ho.host : &no_out, counts, MPI_FLOAT, MPI_SUM, c->mpi[g], &r);
  hold_request(req, r, counts);
  return 0;
}

static int mpi_test(comm_ctx *c, comm_request *req, int *done) {
  (void)c;
  *done = 1;
  if (!(req->opaque[1] & 1u)) return 0;
  comm_pair_op *op = pair_of(req);
  if (op) {
    *done = comm_pair_test(op);
    if (*done) req->opaque[0] = req->opaque[1] = 0;
    return 0;
  }
  MPI_Request r;
  memcpy(&r, &req->opaque[0], sizeof r);
  MPI_Test(&r, done, MPI_STATUS_IGNORE);
  if (!*done) return 0;
  void *owned = (void *)(uintptr_t)(req->opaque[1] & ~(uint64_t)1);
  if (owned) boost_free(owned);
  req->opaque[0] = req->opaque[1] = 0;
  return 0;
}

static void mpi_destroy(comm_ctx *c) {
  mpi_impl *m = c->impl;
  if (!m) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Op_free(&m->bf16_sum);
  comm_pair_pool_free(&m->pair);
  boost_free(m);
  c->impl = NULL;
}

static const comm_backend mpi_backend = {
    .name = "mpi",
    .allreduce = mpi_allreduce,
    .allreduce_pair = mpi_allreduce_pair,
    .reduce_scatter = mpi_reduce_scatter,
    .allgather_chunks = mpi_allgather_chunks,
    .allgather = mpi_allgather,
    .alltoallv = mpi_alltoallv,
    .isend = mpi_isend,
    .recv = mpi_recv,
    .wait = mpi_wait,
    .iallreduce = mpi_iallreduce,
    .ireduce_scatter = mpi_ireduce_scatter,
    .test = mpi_test,
    .destroy = mpi_destroy,
};

static void init_common(comm_ctx *c, boost_backend *be) {
  memset(c, 0, sizeof *c);
  c->ops = &mpi_backend;
  c->be = be;
  c->last_group = COMM_WORLD;
}

void comm_init_mpi(comm_ctx *c, boost_backend *be, MPI_Comm tp, MPI_Comm dp, MPI_Comm pp, MPI_Comm world) {
  init_common(c, be);
  mpi_impl *m = boost_calloc(1, sizeof *m);
  c->impl = m;
  c->mpi[COMM_TP] = tp;
  c->mpi[COMM_DP] = dp;
  c->mpi[COMM_PP] = pp;
  c->mpi[COMM_WORLD] = world;
  for (int g = 0; g < COMM_NUM_GROUPS; g++) {
    MPI_Comm_size(c->mpi[g], &c->size[g]);
    MPI_Comm_rank(c->mpi[g], &c->rank[g]);
  }
  MPI_Op_create(bf16_sum_op, 1, &m->bf16_sum);
}

void comm_init_self(comm_ctx *c, boost_backend *be) {
  init_common(c, be);
  for (int g = 0; g < COMM_NUM_GROUPS; g++) {
    c->mpi[g] = MPI_COMM_SELF;
    c->size[g] = 1;
  }
}
