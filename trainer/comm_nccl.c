/* The NCCL communication backend (trainer/comm.h): buffers are the CUDA
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
 * on a link come in micro-batch order on both sides, so tags are not needed. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "comm.h"
#include "cuda_backend.h"
#include "util.h"

enum { P2P_UP = 0, P2P_DOWN = 1 };

typedef struct {
  ncclComm_t comm[COMM_NUM_GROUPS]; /* NULL for a group of one rank */
  ncclComm_t p2p[2][2];             /* pp: [parity of the link's lower stage][direction] */
  cudaStream_t stream;              /* the compute backend's */
  cudaStream_t send[2];             /* sends up and down the pipeline */
} nccl_impl;

static void nccl_check(ncclResult_t r, const char *what, const char *file, int line) {
  if (r != ncclSuccess) boost_fail("NCCL error at %s:%d: %s: %s", file, line, what, ncclGetErrorString(r));
}
static void cuda_ok(cudaError_t e, const char *what, const char *file, int line) {
  if (e != cudaSuccess) boost_fail("CUDA error at %s:%d: %s: %s", file, line, what, cudaGetErrorString(e));
}
#define NCCL(call) nccl_check((call), #call, __FILE__, __LINE__)
#define CUDA(call) cuda_ok((call), #call, __FILE__, __LINE__)

static nccl_impl *impl(comm_ctx *c) { return c->impl; }

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

static void n_allreduce(comm_ctx *c, comm_group g, void *buf, size_t n, boost_dtype t, comm_redop op) {
  NCCL(ncclAllReduce(buf, buf, n, nccl_type(t), op == COMM_SUM ? ncclSum : ncclMax, group_comm(c, g), impl(c)->stream));
}

static void n_allreduce_pair(comm_ctx *c, comm_group g, void *a, size_t n_a, boost_dtype ta, float *b, size_t n_b) {
  NCCL(ncclGroupStart());
  if (n_a) n_allreduce(c, g, a, n_a, ta, COMM_SUM);
  if (n_b) n_allreduce(c, g, b, n_b, BOOST_F32, COMM_SUM);
  NCCL(ncclGroupEnd());
}

static void n_reduce_scatter(comm_ctx *c, comm_group g, void *buf, size_t chunk, boost_dtype t) {
  char *mine = (char *)buf + (size_t)c->rank[g] * chunk * boost_dtype_size(t);
  NCCL(ncclReduceScatter(buf, mine, chunk, nccl_type(t), ncclSum, group_comm(c, g), impl(c)->stream));
}

static void n_allgather_chunks(comm_ctx *c, comm_group g, void *buf, size_t chunk, boost_dtype t) {
  const char *mine = (const char *)buf + (size_t)c->rank[g] * chunk * boost_dtype_size(t);
  NCCL(ncclAllGather(mine, buf, chunk, nccl_type(t), group_comm(c, g), impl(c)->stream));
}

static void n_allgather(comm_ctx *c, comm_group g, const void *send, void *recv, size_t n, boost_dtype t) {
  NCCL(ncclAllGather(send, recv, n, nccl_type(t), group_comm(c, g), impl(c)->stream));
}

/* grouped sends and receives; this rank's own piece is a device copy */
static void n_alltoallv(comm_ctx *c, comm_group g, const void *send, const size_t *scount, const size_t *sdispl,
                        void *recv, const size_t *rcount, const size_t *rdispl, boost_dtype t) {
  const size_t es = boost_dtype_size(t);
  const int me = c->rank[g];
  BOOST_ASSERT(scount[me] == rcount[me]);
  if (scount[me])
    CUDA(cudaMemcpyAsync((char *)recv + rdispl[me] * es, (const char *)send + sdispl[me] * es, scount[me] * es,
                         cudaMemcpyDeviceToDevice, impl(c)->stream));
  if (c->size[g] == 1) return;
  NCCL(ncclGroupStart());
  for (int r = 0; r < c->size[g]; r++) {
    if (r == me) continue;
    if (scount[r])
      NCCL(ncclSend((const char *)send + sdispl[r] * es, scount[r], nccl_type(t), r, group_comm(c, g), impl(c)->stream));
    if (rcount[r])
      NCCL(ncclRecv((char *)recv + rdispl[r] * es, rcount[r], nccl_type(t), r, group_comm(c, g), impl(c)->stream));
  }
  NCCL(ncclGroupEnd());
}

/* The point-to-point communicator of the link between me and peer (pipeline
 * neighbours) for messages flowing in direction dir. */
static ncclComm_t link_comm(comm_ctx *c, comm_group g, int peer, int dir) {
  const int me = c->rank[g], lo = me < peer ? me : peer;
  if (g != COMM_PP || (peer != me + 1 && peer != me - 1))
    boost_fail("NCCL backend: point-to-point only between neighbouring pipeline stages (group %s, %d -> %d)",
               comm_group_names[g], me, peer);
  return impl(c)->p2p[lo % 2][dir];
}

/* opaque[0]: the event recorded after the send; opaque[1]: 1 while in flight */
static void n_isend(comm_ctx *c, comm_group g, const void *buf, size_t n, boost_dtype t, int peer, int tag,
                    comm_request *req) {
  (void)tag;
  nccl_impl *m = impl(c);
  BOOST_ASSERT(req->opaque[1] == 0);
  const int dir = peer > c->rank[g] ? P2P_UP : P2P_DOWN;
  cudaEvent_t ready, done;
  CUDA(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  CUDA(cudaEventRecord(ready, m->stream)); /* buf is complete here */
  CUDA(cudaStreamWaitEvent(m->send[dir], ready, 0));
  CUDA(cudaEventDestroy(ready));
  NCCL(ncclSend(buf, n, nccl_type(t), peer, link_comm(c, g, peer, dir), m->send[dir]));
  CUDA(cudaEventRecord(done, m->send[dir]));
  _Static_assert(sizeof(cudaEvent_t) <= sizeof req->opaque[0], "an event fits the opaque request");
  memcpy(&req->opaque[0], &done, sizeof done);
  req->opaque[1] = 1;
}

static void n_recv(comm_ctx *c, comm_group g, void *buf, size_t n, boost_dtype t, int peer, int tag) {
  (void)tag;
  const int dir = peer > c->rank[g] ? P2P_DOWN : P2P_UP; /* the direction the message flows */
  NCCL(ncclRecv(buf, n, nccl_type(t), peer, link_comm(c, g, peer, dir), impl(c)->stream));
}

/* The compute stream (not the host) waits for the send. */
static void n_wait(comm_ctx *c, comm_request *req) {
  if (!req->opaque[1]) return;
  cudaEvent_t done;
  memcpy(&done, &req->opaque[0], sizeof done);
  CUDA(cudaStreamWaitEvent(impl(c)->stream, done, 0));
  CUDA(cudaEventDestroy(done));
  memset(req, 0, sizeof *req);
}

static void n_destroy(comm_ctx *c) {
  nccl_impl *m = impl(c);
  if (!m) return;
  CUDA(cudaStreamSynchronize(m->stream));
  for (int d = 0; d < 2; d++) CUDA(cudaStreamSynchronize(m->send[d]));
  for (int g = 0; g < COMM_NUM_GROUPS; g++)
    if (m->comm[g]) NCCL(ncclCommDestroy(m->comm[g]));
  for (int p = 0; p < 2; p++)
    for (int d = 0; d < 2; d++)
      if (m->p2p[p][d]) NCCL(ncclCommDestroy(m->p2p[p][d]));
  for (int d = 0; d < 2; d++) CUDA(cudaStreamDestroy(m->send[d]));
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
    .destroy = n_destroy,
};

/* A communicator over the ranks of an MPI communicator: its rank 0 makes
 * the id, MPI carries it. Collective over mc. */
static ncclResult_t comm_over(MPI_Comm mc, ncclComm_t *out) {
  int size, rank;
  MPI_Comm_size(mc, &size);
  MPI_Comm_rank(mc, &rank);
  ncclUniqueId id;
  ncclResult_t r = rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
  int ok = r == ncclSuccess;
  MPI_Bcast(&ok, 1, MPI_INT, 0, mc);
  if (!ok) return r != ncclSuccess ? r : ncclSystemError;
  MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, mc);
  return ncclCommInitRank(out, size, id, rank);
}

int comm_init_nccl(comm_ctx *c, boost_backend *be, MPI_Comm tp, MPI_Comm dp, MPI_Comm pp, MPI_Comm world, char *err,
                   size_t errlen) {
  memset(c, 0, sizeof *c);
  const cudaStream_t stream = cuda_backend_stream(be);
  if (!stream) return boost_err(err, errlen, "the NCCL backend needs the cuda backend, not %s", be->name);
  c->ops = &nccl_backend;
  c->be = be;
  nccl_impl *m = boost_calloc(1, sizeof *m);
  c->impl = m;
  m->stream = stream;
  const MPI_Comm groups[COMM_NUM_GROUPS] = {tp, dp, pp, world};
  CUDA(cudaSetDevice(cuda_backend_device(be)));
  for (int d = 0; d < 2; d++) CUDA(cudaStreamCreateWithFlags(&m->send[d], cudaStreamNonBlocking));
  ncclResult_t r = ncclSuccess;
  for (int g = 0; g < COMM_NUM_GROUPS; g++) {
    c->mpi[g] = groups[g];
    MPI_Comm_size(groups[g], &c->size[g]);
    MPI_Comm_rank(groups[g], &c->rank[g]);
    if (c->size[g] > 1 && r == ncclSuccess) r = comm_over(groups[g], &m->comm[g]);
  }
  for (int p = 0; p < 2 && c->size[COMM_PP] > 1; p++)
    for (int d = 0; d < 2 && r == ncclSuccess; d++) r = comm_over(pp, &m->p2p[p][d]);
  if (r != ncclSuccess) {
    boost_err(err, errlen, "NCCL communicators could not be made: %s", ncclGetErrorString(r));
    c->ops->destroy(c);
    memset(c, 0, sizeof *c);
    return -1;
  }
  return 0;
}
