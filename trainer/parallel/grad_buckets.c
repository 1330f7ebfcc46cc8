/* The bucketed data-parallel gradient reduction (grad_buckets.h). */
#include "grad_buckets.h"

#include <string.h>

#include "check.h"

void grad_buckets_init(grad_buckets *b, comm_ctx *comm, const tensor_store *store, double bucket_mb, int zero) {
  memset(b, 0, sizeof *b);
  b->comm = comm;
  b->store = store;
  b->numel = store->reg->numel;
  b->zero = zero;
  b->chunk = zero ? store->mom_end - store->mom_begin : b->numel;
  b->mine = zero ? store->mom_begin : 0;
  b->posted_from = b->numel;
  const int dp = comm->size[COMM_DP];
  /* one call: no buckets asked for, more than two replicas (the header says
   * why), or nothing to reduce (a group of one rank moves nothing) */
  if (bucket_mb <= 0.0 || dp > 2 || (dp == 1 && !comm->every_group)) return;
  BOOST_ASSERT(comm->be);
  b->bucket = (size_t)(bucket_mb * (1 << 20) / sizeof(float));
  if (b->bucket == 0) b->bucket = 1;
  if (zero) b->scatter_out = boost_be_alloc(comm->be, b->chunk * sizeof(float), "the gradient buckets' sums");
}

void grad_buckets_free(grad_buckets *b) {
  if (b->scatter_out) b->comm->be->mem->free(b->comm->be, b->scatter_out);
  boost_free(b->req);
  memset(b, 0, sizeof *b);
}

void grad_buckets_set_local(grad_buckets *b, grad_buckets_local_fn fn, void *ctx) {
  b->local = fn;
  b->local_ctx = ctx;
}

int grad_buckets_overlapped(const grad_buckets *b) { return b->bucket > 0; }

/* [from, posted_from) goes out as one non-blocking sum. */
static void post(grad_buckets *b, size_t from) {
  if (b->nreq == b->cap) {
    b->cap = b->cap ? 2 * b->cap : 16;
    b->req = boost_realloc(b->req, (size_t)b->cap, sizeof *b->req);
  }
  float *grads = b->store->arena[TENSOR_GRADS];
  if (b->local) b->local(b->local_ctx, grads, from, b->posted_from);
  comm_request *req = &b->req[b->nreq++];
  memset(req, 0, sizeof *req);
  if (b->zero)
    comm_ireduce_scatter_sum(b->comm, COMM_DP, grads, from, b->posted_from, b->chunk, b->scatter_out, req);
  else
    comm_iallreduce_sum(b->comm, COMM_DP, grads + from, b->posted_from - from, req);
  b->posted_from = from;
}

void grad_buckets_ready(void *ctx, size_t from) {
  grad_buckets *b = ctx;
  if (!b->bucket || from >= b->posted_from || b->posted_from - from < b->bucket) return;
  post(b, from);
  for (int i = 0; i < b->nreq; i++) comm_test(b->comm, &b->req[i]); /* MPI moves data inside its calls */
}

void grad_buckets_finish(grad_buckets *b) {
  float *grads = b->store->arena[TENSOR_GRADS];
  if (!b->bucket) {
    if (b->local) b->local(b->local_ctx, grads, 0, b->numel);
    if (b->zero)
      comm_reduce_scatter_sum(b->comm, COMM_DP, grads, b->chunk);
    else
      comm_allreduce_sum(b->comm, COMM_DP, grads, b->numel);
    return;
  }
  if (b->posted_from > 0) post(b, 0);
  for (int i = 0; i < b->nreq; i++) comm_wait(b->comm, &b->req[i]);
  if (b->zero && b->nreq) {
    boost_backend *be = b->comm->be;
    be->mem->copy(be, grads + b->mine, b->scatter_out, b->chunk * sizeof(float));
  }
  b->nreq = 0;
  b->posted_from = b->numel;
}
