/* The NCCL communication backend (trainer/parallel/comm.h): buffers are the CUDA
 * backend's device memory, every collective is queued on the backend's
 * compute stream (so it is ordered with the ops around it and the host does
 * not wait), and the front (comm.c) counts bytes and calls as for MPI.
 * Built only with the CUDA backend and NCCL (BOOST_HAVE_NCCL).
 *
 * Communicators: one per process group of more than one rank (tp, dp, pp,
 * world), made from a unique id that the group's rank 0 broadcasts over the
 * group's MPI communicator. Point-to-point messages (the pipeline, between
 * neighbouring stages) have communicators of their own, one per link parity
 * and direction: a send goes on a send stream of its direction, after an
 * event on the compute stream, and its request holds the event recorded
 * after it; a receive is queued on the compute stream. So on every rank each
 * communicator is used from one stream only, a send never holds up the
 * compute stream (the 1F1B schedule's sends and receives cross: with both on
 * one stream two stages would wait on each other), and comm_wait makes the
 * compute stream, not the host, wait for the send. NCCL matches messages
 * between two ranks in the order they are posted: the pipeline's messages
 * on a link come in micro-batch order on both sides, so tags are not needed.
 *
 * Failures: an NCCL or CUDA call that fails returns its reason to the front
 * (comm.c ends the job); while the host waits for the device the front
 * polls ncclCommGetAsyncError (poll), and the watchdog, when it ends the
 * job, aborts every communicator (abort: ncclCommAbort, under a lock that
 * poll holds too, so the two never touch a communicator at once). Set-up
 * is agreed across the world after each communicator: one failing rank
 * makes every rank return the same line naming it. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "comm.h"
#include "cuda_backend.h"
#include "device_wait.h"
#include "util.h"

enum { P2P_UP = 0, P2P_DOWN = 1, NUM_P2P = 4 };

typedef struct {
  ncclComm_t comm[COMM_NUM_GROUPS]; /* NULL for a group of one rank (unless every_group) */
  ncclComm_t p2p[2][2];             /* pp: [parity of the link's lower stage][direction] */
  cudaStream_t stream;              /* the compute backend's */
  cudaStream_t send[2];             /* sends up and down the pipeline */
  cudaStream_t reduce;              /* the bucketed gradient sums (made at the first) */
  pthread_mutex_t mu;               /* the communicators, between poll and abort */
  int aborted;
} nccl_impl;

static nccl_impl *impl(comm_ctx *c) { return c->impl; }

static int nccl_failed(comm_ctx *c, ncclResult_t r, const char *what) {
  return boost_err(&c->err, "NCCL: %s: %s (%s)", what, ncclGetErrorString(r),
                   ncclGetLastError(NULL) ? ncclGetLastError(NULL) : "");
}
static int cuda_failed(comm_ctx *c, cudaError_t e, const char *what) {
  return boost_err(&c->err, "CUDA: %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}
/* In a function returning int: a failure returns -1 with the reason in c->err. */
#define NCCL(call)                                                                                                     \
  do {                                                                                                                 \
    const ncclResult_t r_ = (call);                                                                                    \
    if (r_ != ncclSuccess && r_ != ncclInProgress) return nccl_failed(c, r_, #call);                                   \
  } while (0)
#define CUDA(call)                                                                                                     \
  do {                                                                                                                 \
    const cudaError_t e_ = (call);                                                                                     \
    if (e_ != cudaSuccess) return cuda_failed(c, e_, #call);                                                           \
  } while (0)

static ncclDataType_t nccl_type(boost_dtype t) {
  switch (t) {
  case BOOST_F32: return ncclFloat32;
  case BOOST_BF16: return ncclBfloat16;
  case BOOST_F64: return ncclFloat64;
  case BOOST_I32: return ncclInt32;
  default: BOOST_ASSERT(!"unknown dtype"); return ncclFloat32;
  }
}

static ncclComm_t group_comm(comm_ctx *c, comm_group g) {
  BOOST_ASSERT(impl(c)->comm[g]);
  return impl(c)->comm[g];
}

static int n_allreduce(comm_ctx *c, comm_group g, void *buf, size_t n, boost_dtype t, comm_redop op) {
  NCCL(ncclAllReduce(buf, buf, n, nccl_type(t), op == COMM_SUM ? ncclSum : ncclMax, group_comm(c, g), impl(c)->stream));
  return 0;
}

static int n_allreduce_pair(comm_ctx *c, comm_group g, void *a, size_t n_a, boost_dtype ta, float *b, size_t n_b) {
  NCCL(ncclGroupStart());
  int rc = n_a ? n_allreduce(c, g, a, n_a, ta, COMM_SUM) : 0;
  if (rc == 0 && n_b) rc = n_allreduce(c, g, b, n_b, BOOST_F32, COMM_SUM);
  NCCL(ncclGroupEnd());
  return rc;
}

static int n_reduce_scatter(comm_ctx *c, comm_group g, void *buf, size_t chunk, boost_dtype t) {
  char *mine = (char *)buf + (size_t)c->rank[g] * chunk * boost_dtype_size(t);
  NCCL(ncclReduceScatter(buf, mine, chunk, nccl_type(t), ncclSum, group_comm(c, g), impl(c)->stream));
  return 0;
}

static int n_allgather_chunks(comm_ctx *c, comm_group g, void *buf, size_t chunk, boost_dtype t) {
  const char *mine = (const char *)buf + (size_t)c->rank[g] * chunk * boost_dtype_size(t);
  NCCL(ncclAllGather(mine, buf, chunk, nccl_type(t), group_comm(c, g), impl(c)->stream));
  return 0;
}

static int n_allgather(comm_ctx *c, comm_group g, const void *send, void *recv, size_t n, boost_dtype t) {
  NCCL(ncclAllGather(send, recv, n, nccl_type(t), group_comm(c, g), impl(c)->stream));
  return 0;
}

/* grouped sends and receives; this rank's own piece is a device copy */
static int n_alltoallv(comm_ctx *c, comm_group g, const void *send, const size_t *scount, const size_t *sdispl,
                       void *recv, const size_t *rcount, const size_t *rdispl, boost_dtype t) {
  const size_t es = boost_dtype_size(t);
  const int me = c->rank[g];
  BOOST_ASSERT(scount[me] == rcount[me]);
  if (scount[me])
    CUDA(cudaMemcpyAsync((char *)recv + rdispl[me] * es, (const char *)send + sdispl[me] * es, scount[me] * es,
                         cudaMemcpyDeviceToDevice, impl(c)->stream));
  if (c->size[g] == 1) return 0;
  NCCL(ncclGroupStart());
  int rc = 0;
  for (int r = 0; r < c->size[g] && rc == 0; r++) {
    if (r == me) continue;
    ncclResult_t e = ncclSuccess;
    if (scount[r])
      e = ncclSend((const char *)send + sdispl[r] * es, scount[r], nccl_type(t), r, group_comm(c, g), impl(c)->stream);
    if (e == ncclSuccess && rcount[r])
      e = ncclRecv((char *)recv + rdispl[r] * es, rcount[r], nccl_type(t), r, group_comm(c, g), impl(c)->stream);
    if (e != ncclSuccess) rc = nccl_failed(c, e, "ncclSend/ncclRecv");
  }
  NCCL(ncclGroupEnd());
  return rc;
}

/* The point-to-point communicator of the link between me and peer (pipeline
 * neighbours) for messages flowing in direction dir; NULL (reason in c->err)
 * for any other pair. */
static ncclComm_t link_comm(comm_ctx *c, comm_group g, int peer, int dir) {
  const int me = c->rank[g], lo = me < peer ? me : peer;
  if (g != COMM_PP || (peer != me + 1 && peer != me - 1)) {
    boost_err(&c->err,
              "NCCL backend: point-to-point only between neighbouring pipeline stages (group %s, %d -> %d)",
              comm_group_names[g], me, peer);
    return NULL;
  }
  return impl(c)->p2p[lo % 2][dir];
}

/* opaque[0]: the event recorded after the send; opaque[1]: 1 while in flight */
static int n_isend(comm_ctx *c, comm_group g, const void *buf, size_t n, boost_dtype t, int peer, int tag,
                   comm_request *req) {
  (void)tag;
  nccl_impl *m = impl(c);
  BOOST_ASSERT(req->opaque[1] == 0);
  const int dir = peer > c->rank[g] ? P2P_UP : P2P_DOWN;
  const ncclComm_t link = link_comm(c, g, peer, dir);
  if (!link) return -1;
  cudaEvent_t ready, done;
  CUDA(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  CUDA(cudaEventRecord(ready, m->stream)); /* buf is complete here */
  CUDA(cudaStreamWaitEvent(m->send[dir], ready, 0));
  CUDA(cudaEventDestroy(ready));
  NCCL(ncclSend(buf, n, nccl_type(t), peer, link, m->send[dir]));
  CUDA(cudaEventRecord(done, m->send[dir]));
  _Static_assert(sizeof(cudaEvent_t) <= sizeof req->opaque[0], "an event fits the opaque request");
  memcpy(&req->opaque[0], &done, sizeof done);
  req->opaque[1] = 1;
  return 0;
}

static int n_recv(comm_ctx *c, comm_group g, void *buf, size_t n, boost_dtype t, int peer, int tag) {
  (void)tag;
  const int dir = peer > c->rank[g] ? P2P_DOWN : P2P_UP; /* the direction the message flows */
  const ncclComm_t link = link_comm(c, g, peer, dir);
  if (!link) return -1;
  NCCL(ncclRecv(buf, n, nccl_type(t), peer, link, impl(c)->stream));
  return 0;
}

/* The compute stream (not the host) waits for the send. */
static int n_wait(comm_ctx *c, comm_request *req) {
  if (!req->opaque[1]) return 0;
  cudaEvent_t done;
  memcpy(&done, &req->opaque[0], sizeof done);
  CUDA(cudaStreamWaitEvent(impl(c)->stream, done, 0));
  CUDA(cudaEventDestroy(done));
  memset(req, 0, sizeof *req);
  return 0;
}

/* ---- non-blocking sums (the bucketed gradient reduction) ----------------------
 * Queued on a stream of their own after an event on the compute stream
 * (the bucket's gradients are complete there), so the backward's kernels
 * keep running while NCCL sums; the request holds the event recorded after
 * the sum, and n_wait makes the compute stream wait for it. The group's
 * communicator is used from this stream only during the backward (no other
 * collective of the group runs then) and from the compute stream only after
 * the wait: one order on every rank. */
static int reduce_stream(comm_ctx *c, cudaStream_t *out) {
  nccl_impl *m = impl(c);
  if (!m->reduce) CUDA(cudaStreamCreateWithFlags(&m->reduce, cudaStreamNonBlocking));
  cudaEvent_t ready;
  CUDA(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  CUDA(cudaEventRecord(ready, m->stream));
  CUDA(cudaStreamWaitEvent(m->reduce, ready, 0));
  CUDA(cudaEventDestroy(ready));
  *out = m->reduce;
  return 0;
}

static int hold_done(comm_ctx *c, cudaStream_t s, comm_request *req) {
  cudaEvent_t done;
  CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  CUDA(cudaEventRecord(done, s));
  memcpy(&req->opaque[0], &done, sizeof done);
  req->opaque[1] = 1;
  return 0;
}

static int n_iallreduce(comm_ctx *c, comm_group g, float *buf, size_t n, comm_request *req) {
  cudaStream_t s;
  if (reduce_stream(c, &s) != 0) return -1;
  NCCL(ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, group_comm(c, g), s));
  return hold_done(c, s, req);
}

/* One reduce per rank whose chunk the range meets (ReduceScatter wants
 * equal parts), grouped into one launch. */
static int n_ireduce_scatter(comm_ctx *c, comm_group g, float *buf, size_t begin, size_t end, size_t chunk,
                             float *out, comm_request *req) {
  cudaStream_t s;
  if (reduce_stream(c, &s) != 0) return -1;
  NCCL(ncclGroupStart());
  for (int r = 0; r < c->size[g]; r++) {
    const size_t lo = chunk * (size_t)r, hi = lo + chunk;
    const size_t a = begin > lo ? begin : lo, b = end < hi ? end : hi;
    if (a >= b) continue;
    float *dst = r == c->rank[g] ? out + (a - lo) : buf + a; /* recvbuff matters on the root only */
    const ncclResult_t e = ncclReduce(buf + a, dst, b - a, ncclFloat32, ncclSum, r, group_comm(c, g), s);
    if (e != ncclSuccess && e != ncclInProgress) {
      (void)ncclGroupEnd();
      return nccl_failed(c, e, "ncclReduce");
    }
  }
  NCCL(ncclGroupEnd());
  return hold_done(c, s, req);
}

static int n_test(comm_ctx *c, comm_request *req, int *done) {
  (void)c;
  *done = 0; /* the compute stream waits at n_wait: nothing for the host to learn early */
  if (!req->opaque[1]) *done = 1;
  return 0;
}

/* Every communicator of the context, in one array of NUM_GROUPS + NUM_P2P. */
static ncclComm_t *comm_slot(nccl_impl *m, int i) {
  return i < COMM_NUM_GROUPS ? &m->comm[i] : &m->p2p[(i - COMM_NUM_GROUPS) / 2][(i - COMM_NUM_GROUPS) % 2];
}
static const char *slot_name(int i) { return i < COMM_NUM_GROUPS ? comm_group_names[i] : "pipeline link"; }

static int n_poll(comm_ctx *c) {
  nccl_impl *m = impl(c);
  int rc = 0;
  pthread_mutex_lock(&m->mu);
  for (int i = 0; i < COMM_NUM_GROUPS + NUM_P2P && rc == 0 && !m->aborted; i++) {
    ncclComm_t *cm = comm_slot(m, i);
    ncclResult_t async = ncclSuccess;
    if (!*cm) continue;
    const ncclResult_t r = ncclCommGetAsyncError(*cm, &async);
    if (r != ncclSuccess) async = r;
    if (async != ncclSuccess && async != ncclInProgress)
      rc = boost_err(&c->err, "NCCL reports an error on the %s communicator: %s", slot_name(i),
                     ncclGetErrorString(async));
  }
  pthread_mutex_unlock(&m->mu);
  return rc;
}

/* The job ends: every communicator abandoned (its kernels stop waiting for
 * peers), never to be used again. */
static void n_abort(comm_ctx *c) {
  nccl_impl *m = impl(c);
  if (!m) return;
  pthread_mutex_lock(&m->mu);
  for (int i = 0; i < COMM_NUM_GROUPS + NUM_P2P && !m->aborted; i++) {
    ncclComm_t *cm = comm_slot(m, i);
    if (*cm) (void)ncclCommAbort(*cm);
    *cm = NULL;
  }
  m->aborted = 1;
  pthread_mutex_unlock(&m->mu);
}

/* The end of a healthy run: the streams drained (a poll, watched like any
 * device wait), then every communicator destroyed. */
static void n_destroy(comm_ctx *c) {
  nccl_impl *m = impl(c);
  if (!m) return;
  if (!m->aborted) {
    boost_device_wait("device sync", cuda_stream_ready, (void *)m->stream);
    for (int d = 0; d < 2; d++)
      if (m->send[d]) boost_device_wait("device sync", cuda_stream_ready, (void *)m->send[d]);
    if (m->reduce) boost_device_wait("device sync", cuda_stream_ready, (void *)m->reduce);
  }
  for (int i = 0; i < COMM_NUM_GROUPS + NUM_P2P; i++) {
    ncclComm_t *cm = comm_slot(m, i);
    if (*cm) (void)ncclCommDestroy(*cm);
  }
  for (int d = 0; d < 2; d++)
    if (m->send[d]) (void)cudaStreamDestroy(m->send[d]);
  if (m->reduce) (void)cudaStreamDestroy(m->reduce);
  pthread_mutex_destroy(&m->mu);
  boost_free(m);
  c->impl = NULL;
}

static const comm_backend nccl_backend = {
    .name = "nccl",
    .allreduce = n_allreduce,
    .allreduce_pair = n_allreduce_pair,
    .reduce_scatter = n_reduce_scatter,
    .allgather_chunks = n_allgather_chunks,
    .allgather = n_allgather,
    .alltoallv = n_alltoallv,
    .isend = n_isend,
    .recv = n_recv,
    .wait = n_wait,
    .iallreduce = n_iallreduce,
    .ireduce_scatter = n_ireduce_scatter,
    .test = n_test,
    .poll = n_poll,
    .abort = n_abort,
    .destroy = n_destroy,
};

/* A communicator over the ranks of mc (group g): its rank 0 makes the id,
 * the control plane carries it. Collective over mc; 0, or -1 with the
 * reason in c->err. */
static int comm_over(comm_ctx *c, MPI_Comm mc, comm_group g, ncclComm_t *out) {
  int size, rank;
  MPI_Comm_size(mc, &size);
  MPI_Comm_rank(mc, &rank);
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  const ncclResult_t r = rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
  const int ok = comm_control_all(mc, g, "NCCL set-up agreement", r == ncclSuccess);
  if (r != ncclSuccess) return nccl_failed(c, r, "ncclGetUniqueId");
  if (!ok)
    return boost_err(&c->err, "the %s group's rank 0 could not make an NCCL id", comm_group_names[g]);
  comm_control_bcast(mc, g, "NCCL set-up agreement", &id, (int)sizeof id, 0);
  NCCL(ncclCommInitRank(out, size, id, rank));
  return 0;
}

/* Every rank learns whether set-up step `what` worked everywhere: 0, or -1
 * on every rank with one line naming the first rank that failed. */
static int agree(comm_ctx *c, MPI_Comm world, int rc, const char *what, boost_status *err) {
  char msg[512];
  boost_msgf(msg, sizeof msg, "%s", rc == 0 ? "" : c->err.msg);
  const int first =
      comm_control_first_failure(world, COMM_WORLD, "NCCL set-up agreement", rc == 0, msg, (int)sizeof msg);
  if (first < 0) return 0;
  return boost_err(err, "NCCL could not start on rank %d (%s): %s", first, what, msg);
}

/* Streams and communicators, each step agreed over world. */
static int set_up(comm_ctx *c, const MPI_Comm *groups, int every_group, boost_status *err) {
  nccl_impl *m = impl(c);
  const MPI_Comm world = groups[COMM_WORLD];
  const cudaError_t dev = cudaSetDevice(cuda_backend_device(c->be));
  int rc = dev == cudaSuccess ? 0 : cuda_failed(c, dev, "cudaSetDevice");
  for (int d = 0; d < 2 && rc == 0; d++) {
    const cudaError_t e = cudaStreamCreateWithFlags(&m->send[d], cudaStreamNonBlocking);
    if (e != cudaSuccess) rc = cuda_failed(c, e, "cudaStreamCreateWithFlags");
  }
  if (agree(c, world, rc, "the device and its streams", err) != 0) return -1;
  for (int g = 0; g < COMM_NUM_GROUPS; g++) {
    rc = c->size[g] > 1 || every_group ? comm_over(c, groups[g], (comm_group)g, &m->comm[g]) : 0;
    char what[64];
    boost_msgf(what, sizeof what, "the %s communicator", comm_group_names[g]);
    if (agree(c, world, rc, what, err) != 0) return -1;
  }
  for (int p = 0; p < 2 && c->size[COMM_PP] > 1; p++)
    for (int d = 0; d < 2; d++) {
      rc = comm_over(c, groups[COMM_PP], COMM_PP, &m->p2p[p][d]);
      if (agree(c, world, rc, "a pipeline link's communicator", err) != 0) return -1;
    }
  return 0;
}

int comm_init_nccl(comm_ctx *c, boost_backend *be, MPI_Comm tp, MPI_Comm dp, MPI_Comm pp, MPI_Comm world,
                   int every_group, boost_status *err) {
  memset(c, 0, sizeof *c);
  const cudaStream_t stream = cuda_backend_stream(be);
  /* every rank runs the same backend (agreed before): all refuse together */
  if (!stream) return boost_err(err, "the NCCL backend needs the cuda backend, not %s", be->name);
  c->ops = &nccl_backend;
  c->be = be;
  c->every_group = every_group;
  c->last_group = COMM_WORLD;
  nccl_impl *m = boost_calloc(1, sizeof *m);
  pthread_mutex_init(&m->mu, NULL);
  c->impl = m;
  m->stream = stream;
  const MPI_Comm groups[COMM_NUM_GROUPS] = {tp, dp, pp, world};
  for (int g = 0; g < COMM_NUM_GROUPS; g++) {
    c->mpi[g] = groups[g];
    MPI_Comm_size(groups[g], &c->size[g]);
    MPI_Comm_rank(groups[g], &c->rank[g]);
  }
  if (set_up(c, groups, every_group, err) != 0) {
    n_abort(c); /* never used: abandoned, not destroyed (that could wait for peers) */
    n_destroy(c);
    memset(c, 0, sizeof *c);
    return -1;
  }
  return 0;
}
