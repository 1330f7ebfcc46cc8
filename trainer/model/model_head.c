/* The head on the last pipeline stage: final RMSNorm, LM head, loss.
 * With tp > 1 the head is vocab-parallel: each rank holds vocab/tp rows of
 * lm_head, the cross-entropy reduces max, sum of exponentials and target
 * logit over tp (3 scalars per token) and the logits are never gathered.
 * Under btp the residual stream is d-sharded, so it is gathered once
 * before the final norm. */
#include "model_internal.h"

#include "check.h"
#include "model_train.h"

static int gathers_head_input(const model *m) { return m->mode == TP_BTP && m->tp > 1; }

static void parallel_crossentropy_forward(const model *m, model_acts *r, int N) {
  boost_backend *be = m->be;
  act_set *a = r->cur;
  be->ops->vocab_ce_max(be, a->ce_max, a->logits, N, m->vocab_loc);
  comm_allreduce_max(m->comm, COMM_TP, a->ce_max, (size_t)N);
  be->ops->vocab_ce_sums(be, a->ce_sum, a->logits, a->ce_max, a->targets, m->vocab_start, N, m->vocab_loc);
  comm_allreduce_sum(m->comm, COMM_TP, a->ce_sum, 2 * (size_t)N);
  be->ops->vocab_ce_losses(be, a->losses, a->ce_sum, a->ce_max, N);
}

/* grad_scale > 0 (a training forward, tp = 1): the cross-entropy's backward
 * runs here, in place, and its losses are the forward's (the op computes
 * both from one pass of max, exp and sum over each row); head_backward then
 * starts from the gradient already in a->logits. Training adds the mean
 * loss to the loss sum; evaluation reads it back. */
float head_forward(const model *m, model_acts *r, int N, float grad_scale) {
  boost_backend *be = m->be;
  const boost_ops *o = be->ops;
  act_set *a = r->cur;
  a->logits_grad_scale = 0.0f;
  const int d = m->cfg.d_model;
  const boost_act *x = a->resid[m->nl];
  if (gathers_head_input(m)) {
    comm_allgather_cols(m->comm, COMM_TP, a->resid[m->nl], a->x_full, (size_t)N, (size_t)m->d_res);
    x = a->x_full;
  }
  o->rmsnorm_forward(be, a->xn_f, a->rstd_f, x, P(m, m->ends.final_norm), N, d, m->cfg.norm_eps);
  o->linear_forward(be, a->logits, a->xn_f, P(m, m->ends.lm_head), N, d, m->vocab_loc);
  if (!a->has_targets) return 0.0f;
  if (m->tp == 1 && grad_scale > 0.0f) {
    o->crossentropy_backward(be, a->logits, a->losses, a->logits, a->targets, N, m->cfg.vocab, grad_scale);
    a->logits_grad_scale = grad_scale;
  } else if (m->tp == 1)
    o->crossentropy_forward(be, a->losses, a->logits, a->targets, N, m->cfg.vocab);
  else
    parallel_crossentropy_forward(m, r, N);
  if (grad_scale > 0.0f) {
    o->loss_accumulate(be, a->losses, N, model_loss_sum(r));
    return 0.0f;
  }
  /* evaluation: the mean alone, read back */
  double mean = 0.0;
  o->loss_accumulate(be, a->losses, N, &r->stats[2]);
  be->mem->download(be, &mean, &r->stats[2], sizeof mean);
  be->mem->zero(be, &r->stats[2], sizeof mean);
  return (float)mean;
}

void head_backward(const model *m, model_acts *r, model_train *ts, int N, float scale, boost_act *dx) {
  boost_backend *be = m->be;
  const boost_ops *o = be->ops;
  act_set *a = r->cur;
  model_scratch *s = &r->s;
  const int d = m->cfg.d_model;
  if (a->logits_grad_scale > 0.0f)
    BOOST_ASSERT(a->logits_grad_scale == scale); /* the gradient is there already */
  else if (m->tp == 1)
    o->crossentropy_backward(be, a->logits, NULL, a->logits, a->targets, N, m->cfg.vocab, scale);
  else
    o->vocab_ce_backward(be, a->logits, a->ce_sum, a->ce_max, a->targets, m->vocab_start, N, m->vocab_loc, scale);
  a->logits_grad_scale = 0.0f;
  o->linear_backward(be, s->d_xn, model_train_grad(ts, m->ends.lm_head), a->logits, a->xn_f, P(m, m->ends.lm_head), N, d, m->vocab_loc);
  if (m->tp > 1) comm_allreduce_act(m->comm, COMM_TP, s->d_xn, (size_t)N * d);
  if (gathers_head_input(m)) {
    o->rmsnorm_backward(be, s->d_xfull, model_train_grad(ts, m->ends.final_norm), s->d_xn, a->x_full, P(m, m->ends.final_norm), a->rstd_f, N, d);
    comm_scatter_cols(m->comm, COMM_TP, s->d_xfull, dx, (size_t)N, (size_t)m->d_res);
  } else {
    o->rmsnorm_backward(be, dx, model_train_grad(ts, m->ends.final_norm), s->d_xn, a->resid[m->nl], P(m, m->ends.final_norm), a->rstd_f, N, d);
  }
}
