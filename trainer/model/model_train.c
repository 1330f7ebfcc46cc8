/* The training state (model_train.h): its arenas, the optimizer plan and
 * the steps over them that do not run the model (the backward is
 * model.c's). */
#include "model_train.h"

#include <string.h>

#include "check.h"

void model_train_init(model_train *ts, const model *m, const model_train_options *o) {
  static const model_train_options defaults = {0};
  if (!o) o = &defaults;
  BOOST_ASSERT(m->w.params); /* not a layout-only model */
  memset(ts, 0, sizeof *ts);
  store_init(&ts->store, &m->reg, &m->w, m->be);
  unsigned mask = 1u << TENSOR_GRADS;
  if (o->with_optimizer) {
    if (o->zero_shards > 1) store_shard_moments(&ts->store, o->zero_shards, o->zero_rank);
    mask |= (1u << TENSOR_ADAM_M) | (1u << TENSOR_ADAM_V);
  }
  store_allocate(&ts->store, mask);
  if (o->with_optimizer) ts->plan = model_optimizer_plan(m, ts, 0, m->reg.count);
}

void model_train_free(model_train *ts) {
  if (ts->plan) ts->store.be->ops->optim_plan_free(ts->store.be, ts->plan);
  store_free(&ts->store);
  memset(ts, 0, sizeof *ts);
}

/* This rank's AdamW segments: every tensor's part of the moment range, with
 * its weight-decay flag, counted in the gradient norm unless it is
 * replicated over tp and this is not tp rank 0. */
boost_optim_plan *model_optimizer_plan(const model *m, const model_train *ts, int t0, int t1) {
  const tensor_registry *r = &m->reg;
  const tensor_store *st = &ts->store;
  boost_segment *segs = boost_calloc((size_t)(r->count ? r->count : 1), sizeof *segs);
  int n = 0;
  size_t lo, hi;
  for (int i = t0; i < t1; i++) {
    const tensor_desc *t = &r->tensors[i];
    if (!tensor_clip_range(t, st->mom_begin, st->mom_end, &lo, &hi)) continue;
    segs[n++] = (boost_segment){lo, hi - lo,
                                ((t->flags & TENSOR_DECAY) ? BOOST_SEG_DECAY : 0u) |
                                    ((t->split_dim < 0 && m->tp_rank != 0) ? 0u : BOOST_SEG_NORM)};
  }
  boost_optim_plan *p = m->be->ops->optim_plan_create(m->be, segs, n, st->mom_begin, st->mom_end);
  boost_free(segs);
  return p;
}

void model_set_grads_hook(model_train *ts, model_grads_ready_fn fn, void *ctx) {
  ts->grads_ready = fn;
  ts->grads_ready_ctx = ctx;
}

void model_zero_grads(model_train *ts) {
  const tensor_store *st = &ts->store;
  st->be->mem->zero(st->be, st->arena[TENSOR_GRADS], st->reg->numel * sizeof(float));
}

double *model_grad_sumsq(const model_train *ts, model_acts *r) {
  BOOST_ASSERT(ts->plan);
  ts->store.be->ops->grad_sumsq(ts->store.be, ts->plan, ts->store.arena[TENSOR_GRADS], &r->stats[1]);
  return &r->stats[1];
}

void model_adamw(model_train *ts, adamw_hparams hp, int t, float grad_scale) {
  BOOST_ASSERT(ts->plan);
  model_adamw_plan(ts, ts->plan, hp, t, grad_scale);
}

void model_adamw_plan(model_train *ts, const boost_optim_plan *p, adamw_hparams hp, int t, float grad_scale) {
  const tensor_store *st = &ts->store;
  float *const *a = st->arena;
  st->be->ops->adamw(st->be, p, a[TENSOR_PARAMS], a[TENSOR_GRADS], a[TENSOR_ADAM_M], a[TENSOR_ADAM_V],
                     (void *)st->work == (void *)a[TENSOR_PARAMS] ? NULL : st->work, hp, t, grad_scale);
}
