/* The one seam of a training step (step.c): where its micro-batches come
 * from and who sees its gradients on their way through the data-parallel
 * reduction. A run is built with the data's source, which also feeds the
 * guard's replay (replay.h); under the test hook BOOST_TRAIN_TEST_FAULT it
 * is built with the faulty source wrapped around that one
 * (trainer_faults.c, docs/CHAOS.md), the way the guarded backend wraps the
 * backend: the step itself holds no test hook. */
#ifndef BOOST_STEP_SOURCE_H
#define BOOST_STEP_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "data.h"
#include "grid.h"
#include "replay.h"

typedef struct step_source step_source;

typedef struct {
  /* An execution of the step whose global batch begins at sample `cursor`
   * begins: this rank's micro-batches into in/tg ([micro][B*T] each). */
  void (*fill)(step_source *s, int64_t cursor, int32_t *in, int32_t *tg);
  /* This rank's own gradients [from, to) as the dp reduction takes them,
   * before it sums them in place (grad_buckets_local_fn's shape). */
  void (*local_grads)(step_source *s, float *grads, size_t from, size_t to);
  /* After the reduction, before the loss and the norm are summed over the
   * job: the reduced gradients, and this rank's share of the loss at
   * loss_share (backend memory: one double). */
  void (*reduced)(step_source *s, double *loss_share);
  void (*destroy)(step_source *s);
} step_source_ops;

struct step_source {
  const step_source_ops *ops;
};

/* The micro-batches a rank trains on: samples [cursor, cursor + global
 * batch) by global index, whatever the layout. */
typedef struct {
  const data_split *train;
  data_order order;
  uint64_t seed;
  int micro_batches, dp, dp_rank, B, T;
} step_batches;

/* The data's source: the batches from the data, the replay (NULL: none)
 * fed with the gradients and loss share. */
step_source *step_source_data(const step_batches *batches, replay *rp, boost_backend *be);

/* grad_buckets_set_local's function over a source (ctx: the step_source). */
void step_source_local_grads(void *ctx, float *grads, size_t from, size_t to);

#endif
