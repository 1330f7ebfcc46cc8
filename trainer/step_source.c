/* The data's step source (step_source.h): the micro-batches from the
 * training split, the gradients and the loss share into the guard's replay. */
#include "step_source.h"

#include "check.h"

typedef struct {
  step_source base;
  step_batches batches;
  replay *rp;
  boost_backend *be;
} data_source_step;

static void fill(step_source *s, int64_t cursor, int32_t *in, int32_t *tg) {
  const data_source_step *d = (const data_source_step *)s;
  const step_batches *b = &d->batches;
  const size_t T = (size_t)b->T;
  replay_begin(d->rp);
  for (int micro = 0; micro < b->micro_batches; micro++)
    for (int row = 0; row < b->B; row++) {
      const int64_t idx = data_sample_index(cursor, micro, b->dp, b->dp_rank, b->B, row);
      const int64_t w = data_sample_window(b->train, b->order, b->seed, idx);
      const size_t at = ((size_t)micro * b->B + row) * T;
      data_get_window(b->train, w, in + at, tg + at);
    }
}

static void local_grads(step_source *s, float *grads, size_t from, size_t to) {
  replay_grads(((data_source_step *)s)->rp, grads, from, to);
}

static void reduced(step_source *s, double *loss_share) {
  data_source_step *d = (data_source_step *)s;
  if (!d->rp) return; /* no replay: the share stays where it is, nothing is read back */
  double mine;
  d->be->mem->download(d->be, &mine, loss_share, sizeof mine);
  replay_end(d->rp, mine);
}

static void destroy(step_source *s) { boost_free(s); }

static const step_source_ops data_ops = {fill, local_grads, reduced, destroy};

step_source *step_source_data(const step_batches *batches, replay *rp, boost_backend *be) {
  data_source_step *d = boost_calloc(1, sizeof *d);
  d->base.ops = &data_ops;
  d->batches = *batches;
  d->rp = rp;
  d->be = be;
  return &d->base;
}

void step_source_local_grads(void *ctx, float *grads, size_t from, size_t to) {
  step_source *s = ctx;
  s->ops->local_grads(s, grads, from, to);
}
