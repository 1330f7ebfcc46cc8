/* The data-parallel gradient reduction, in buckets overlapped with the
 * step's last backward.
 *
 * The gradient arena is in the registry's order (embedding, layers 0..L-1,
 * final norm, LM head) and the backward runs from the head to the
 * embedding, so during the step's last backward the finished gradients are
 * always a tail [from, numel) of the arena: the model reports each new
 * `from` (model_set_grads_hook). Once at least bucket floats lie between
 * it and what is already posted, that range is posted as one non-blocking
 * sum over dp (all-reduce, or under ZeRO-1 reduce-scatter into this rank's
 * chunk); grad_buckets_finish posts the rest and waits for every bucket,
 * before the gradient norm and the optimizer read them.
 *
 * Same bits as one reduction: every element is summed over the group once,
 * in one collective; with two replicas that sum is one addition, and
 * addition commutes, so any split and any algorithm give the same bits.
 * With more replicas MPI and NCCL may order the additions differently for
 * different message sizes, so buckets are used only for dp <= 2; larger
 * groups reduce in one call after the backward (docs/PARALLELISM.md). */
#ifndef BOOST_GRAD_BUCKETS_H
#define BOOST_GRAD_BUCKETS_H

#include <stddef.h>

#include "comm.h"
#include "tensor.h"

/* Sees [from, to) of this rank's own gradients (backend memory) just
 * before they are reduced: the step guard hashes each rank's local
 * gradients there, so a replay can tell which rank computed differently. */
typedef void (*grad_buckets_local_fn)(void *ctx, float *grads, size_t from, size_t to);

typedef struct {
  comm_ctx *comm;
  const tensor_store *store; /* its gradient arena */
  size_t numel;
  int zero;             /* ZeRO-1: reduce-scattered into this rank's chunk */
  size_t chunk, mine;   /* floats per rank's chunk; this rank's first */
  float *scatter_out;   /* ZeRO-1 with buckets: this rank's sums (backend memory, chunk floats) */
  size_t bucket;        /* floats per bucket (at least); 0: one call after the backward */
  size_t posted_from;   /* [posted_from, numel) is posted this step */
  comm_request *req;
  int nreq, cap;
  grad_buckets_local_fn local; /* NULL: none */
  void *local_ctx;
} grad_buckets;

/* Buckets of bucket_mb MiB over store's gradients (0, or a dp group of more
 * than two: one reduction in grad_buckets_finish). zero: ZeRO-1. */
void grad_buckets_init(grad_buckets *b, comm_ctx *comm, const tensor_store *store, double bucket_mb, int zero);
void grad_buckets_free(grad_buckets *b);
/* fn sees every range of the local gradients before it is reduced, once
 * per step, in the same order at every execution of the same step. */
void grad_buckets_set_local(grad_buckets *b, grad_buckets_local_fn fn, void *ctx);
/* Whether buckets are posted during the backward. */
int grad_buckets_overlapped(const grad_buckets *b);
/* The gradients [from, numel) are final for the step (the model's hook). */
void grad_buckets_ready(void *ctx, size_t from);
/* The whole reduction done: the rest posted, every bucket waited for. */
void grad_buckets_finish(grad_buckets *b);

#endif
