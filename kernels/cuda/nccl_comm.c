/* NCCL wrappers: see nccl_comm.h. Plain C over the NCCL and CUDA runtime C APIs. */
#include "nccl_comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gpu_check_nccl(ncclResult_t r, const char *file, int line) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  fprintf(stderr, "boost: NCCL error at %s:%d: %s\n", file, line, ncclGetErrorString(r));
  fflush(stderr);
  exit(1);
}

static ncclDataType_t nccl_type(gpu_dtype dt) { return dt == GPU_DT_BF16 ? ncclBfloat16 : ncclFloat32; }
static size_t elem_size(gpu_dtype dt) { return dt == GPU_DT_BF16 ? 2 : 4; }

static void count(gpu_nccl *c, gpu_nccl_kind k, size_t bytes) {
  c->count[k].bytes += bytes;
  c->count[k].calls++;
}

void gpu_nccl_unique_id(ncclUniqueId *id) { ncclCheck(ncclGetUniqueId(id)); }

void gpu_nccl_init(gpu_nccl *c, const ncclUniqueId *id, int size, int rank, cudaStream_t stream) {
  memset(c, 0, sizeof *c);
  c->rank = rank;
  c->size = size;
  c->stream = stream;
  ncclCheck(ncclCommInitRank(&c->comm, size, *id, rank));
}

void gpu_nccl_destroy(gpu_nccl *c) {
  if (c->comm) ncclCheck(ncclCommDestroy(c->comm));
  memset(c, 0, sizeof *c);
}

void gpu_nccl_reset_counts(gpu_nccl *c) { memset(c->count, 0, sizeof c->count); }

void gpu_nccl_allreduce_sum(gpu_nccl *c, void *buf, size_t n, gpu_dtype dt) {
  if (c->size <= 1 || n == 0) return;
  ncclCheck(ncclAllReduce(buf, buf, n, nccl_type(dt), ncclSum, c->comm, c->stream));
  count(c, GPU_NCCL_ALLREDUCE, n * elem_size(dt));
}

void gpu_nccl_reduce_scatter_sum(gpu_nccl *c, void *buf, size_t chunk, gpu_dtype dt) {
  if (c->size <= 1 || chunk == 0) return;
  char *recv = (char *)buf + (size_t)c->rank * chunk * elem_size(dt);
  ncclCheck(ncclReduceScatter(buf, recv, chunk, nccl_type(dt), ncclSum, c->comm, c->stream));
  count(c, GPU_NCCL_REDUCE_SCATTER, (size_t)c->size * chunk * elem_size(dt));
}

void gpu_nccl_allgather_chunks(gpu_nccl *c, void *buf, size_t chunk, gpu_dtype dt) {
  if (c->size <= 1 || chunk == 0) return;
  const char *send = (const char *)buf + (size_t)c->rank * chunk * elem_size(dt);
  ncclCheck(ncclAllGather(send, buf, chunk, nccl_type(dt), c->comm, c->stream));
  count(c, GPU_NCCL_ALLGATHER, chunk * elem_size(dt));
}

void gpu_nccl_broadcast(gpu_nccl *c, void *buf, size_t n, gpu_dtype dt, int root) {
  if (c->size <= 1 || n == 0) return;
  ncclCheck(ncclBroadcast(buf, buf, n, nccl_type(dt), root, c->comm, c->stream));
  count(c, GPU_NCCL_BROADCAST, n * elem_size(dt));
}

void gpu_nccl_send(gpu_nccl *c, const void *buf, size_t n, gpu_dtype dt, int peer) {
  if (n == 0) return;
  ncclCheck(ncclSend(buf, n, nccl_type(dt), peer, c->comm, c->stream));
  count(c, GPU_NCCL_SENDRECV, n * elem_size(dt));
}

void gpu_nccl_recv(gpu_nccl *c, void *buf, size_t n, gpu_dtype dt, int peer) {
  if (n == 0) return;
  ncclCheck(ncclRecv(buf, n, nccl_type(dt), peer, c->comm, c->stream));
  count(c, GPU_NCCL_SENDRECV, n * elem_size(dt));
}
