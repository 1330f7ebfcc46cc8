/* The head on the last pipeline stage: final RMSNorm, LM head, loss.
 * With tp > 1 the head is vocab-parallel: each rank holds vocab/tp rows of
 * lm_head, the cross-entropy reduces max, sum of exponentials and target
 * logit over tp (3 scalars per token) and the logits are never gathered.
 * Under btp the residual stream is d-sharded, so it is gathered once
 * before the final norm. */
#include "model_internal.h"

#include "check.h"

/* Tokens come from the loader, which checked every token of every shard
 * against the vocabulary at open (data_open) and the vocabulary against
 * model.vocab (the trainer): an out-of-range token here is a bug, not bad
 * input. */
void model_validate_tokens(const model *m, const int32_t *tok, size_t n, const char *what) {
  (void)what;
  for (size_t i = 0; i < n; i++) BOOST_ASSERT(tok[i] >= 0 && tok[i] < m->cfg.vocab);
}

static int gathers_head_input(const model *m) { return m->mode == TP_BTP && m->tp > 1; }

static void parallel_crossentropy_forward(model *m, const int32_t *targets, int N) {
  act_set *a = m->cur;
  m->ops->vocab_ce_max(a->ce_max, a->logits, N, m->vocab_loc);
  comm_allreduce_max(m->comm, COMM_TP, a->ce_max, (size_t)N);
  m->ops->vocab_ce_sums(a->ce_sum, a->logits, a->ce_max, targets, m->vocab_start, N, m->vocab_loc);
  comm_allreduce_sum(m->comm, COMM_TP, a->ce_sum, 2 * (size_t)N);
  m->ops->vocab_ce_losses(a->losses, a->ce_sum, a->ce_max, N);
}

/* grad_scale > 0 (a training forward, tp = 1): the cross-entropy's backward
 * runs here, in place, and its losses are the forward's (the op computes
 * both from one pass of max, exp and sum over each row); head_backward then
 * starts from the gradient already in a->logits. */
float head_forward(model *m, const int32_t *targets, int N, float grad_scale) {
  const boost_ops *o = m->ops;
  act_set *a = m->cur;
  a->logits_grad_scale = 0.0f;
  const int d = m->cfg.d_model;
  const float *x = a->resid[m->nl];
  if (gathers_head_input(m)) {
    comm_allgather_cols(m->comm, COMM_TP, a->resid[m->nl], a->x_full, (size_t)N, (size_t)m->d_res);
    x = a->x_full;
  }
  o->rmsnorm_forward(a->xn_f, a->rstd_f, x, P(m, m->final_norm), N, d, m->cfg.norm_eps);
  o->linear_forward(a->logits, a->xn_f, P(m, m->lm_head), N, d, m->vocab_loc);
  if (!targets) return 0.0f;
  model_validate_tokens(m, targets, (size_t)N, "target");
  if (m->tp == 1 && grad_scale > 0.0f) {
    o->crossentropy_backward(a->logits, a->losses, a->logits, targets, N, m->cfg.vocab, grad_scale);
    a->logits_grad_scale = grad_scale;
  } else if (m->tp == 1)
    o->crossentropy_forward(a->losses, a->logits, targets, N, m->cfg.vocab);
  else
    parallel_crossentropy_forward(m, targets, N);
  return (float)o->loss_mean(a->losses, N);
}

void head_backward(model *m, const int32_t *targets, int N, float scale, float *dx) {
  const boost_ops *o = m->ops;
  act_set *a = m->cur;
  model_scratch *s = &m->s;
  const int d = m->cfg.d_model;
  if (a->logits_grad_scale > 0.0f)
    BOOST_ASSERT(a->logits_grad_scale == scale); /* the gradient is there already */
  else if (m->tp == 1)
    o->crossentropy_backward(a->logits, NULL, a->logits, targets, N, m->cfg.vocab, scale);
  else
    o->vocab_ce_backward(a->logits, a->ce_sum, a->ce_max, targets, m->vocab_start, N, m->vocab_loc, scale);
  a->logits_grad_scale = 0.0f;
  o->linear_backward(s->d_xn, G(m, m->lm_head), a->logits, a->xn_f, P(m, m->lm_head), N, d, m->vocab_loc);
  if (m->tp > 1) comm_allreduce_sum(m->comm, COMM_TP, s->d_xn, (size_t)N * d);
  if (gathers_head_input(m)) {
    o->rmsnorm_backward(s->d_xfull, G(m, m->final_norm), s->d_xn, a->x_full, P(m, m->final_norm), a->rstd_f, N, d);
    comm_scatter_cols(m->comm, COMM_TP, s->d_xfull, dx, (size_t)N, (size_t)m->d_res);
  } else {
    o->rmsnorm_backward(dx, G(m, m->final_norm), s->d_xn, a->resid[m->nl], P(m, m->final_norm), a->rstd_f, N, d);
  }
}
