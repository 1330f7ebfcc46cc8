/* The first half of an optimizer step: the micro-batches forward and
 * backward and the gradients reduced (trainer_internal.h). Its one seam is
 * the run's step source (step_source.h): the data, which the test hook's
 * faulty source wraps. */
#include "trainer_internal.h"

#include <math.h>

/* One tp rank of the last pipeline stage of each replica. */
int owns_loss(const trainer *t) { return t->grid.tp_rank == 0 && t->grid.pp_rank == t->grid.pp - 1; }

/* grad_accum micro-batches per replica through the pipeline (pipeline.c)
 * and the gradient reduction over dp. Returns the mean loss over the
 * global batch and sets the pre-clip gradient norm: the same values on
 * every rank, before anything changes the weights or moments (the step
 * guard judges them). */
float step_gradients(trainer *t, double *grad_norm) {
  const train_config *cfg = t->cfg;
  trainer_data *d = &t->data;
  train_state *st = &t->st;
  boost_backend *be = t->be;
  step_source *src = t->source;
  const int M = cfg->train.grad_accum;
  const float scale = 1.0f / ((float)d->B * d->T * M * t->grid.dp);
  model_zero_grads(&t->mt);
  src->ops->fill(src, st->data_cursor, d->micro_in, d->micro_tg);
  pipeline_train(&t->par.pipe, M, scale, d->micro_in, d->micro_tg);
  st->last_tokens = d->micro_in + (size_t)(M - 1) * d->B * d->T; /* the checkpoint's activations recompute it */
  st->last_B = d->B;
  st->last_T = d->T;
  /* Gradients over dp: all-reduced, or (ZeRO-1) reduce-scattered so each
   * replica updates its chunk of the parameters and moments, then the
   * parameters are all-gathered; in buckets posted during the last
   * backward (grad_buckets.h), here only the rest and the waits. Each
   * range passes the source first (step_source_local_grads). */
  grad_buckets_finish(&t->par.buckets);
  /* Loss: owned by one rank per replica, summed over dp. Gradient norm: tp
   * shards and pipeline stages summed (replicated tensors counted once),
   * dp replicas hold equal gradients (counted once) or disjoint chunks.
   * Both reduced in backend memory and read back once: the step's one
   * synchronisation, which also carries the step guard's verdict (every
   * rank judges the same reduced values). */
  double *stats = model_loss_sum(&t->acts);
  if (!owns_loss(t)) be->mem->zero(be, &stats[0], sizeof(double));
  src->ops->reduced(src, &stats[0]);
  if (cfg->parallel.zero || t->grid.dp_rank == 0)
    model_grad_sumsq(&t->mt, &t->acts);
  else
    be->mem->zero(be, &stats[1], sizeof(double));
  comm_allreduce_sum_f64(&t->comm, COMM_WORLD, stats, 2);
  double red[2];
  model_download_stats(&t->m, &t->acts, red);
  *grad_norm = sqrt(red[1]);
  return (float)(red[0] / ((double)M * t->grid.dp));
}
