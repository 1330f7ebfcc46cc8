/* The decoder's forward and backward over this stage's layers (model.h has
 * the equations). Every numeric step is a backend op (m->ops); collectives
 * go through the comm layer between ops. Construction: model_layout.c;
 * activation memory: model_acts.c; projection groups: model_proj.c; the
 * head and loss: model_head.c. */
#include "model_internal.h"

#include <string.h>

#include "check.h"
#include "model_train.h"

/* ---- norms around the groups --------------------------------------------- */

/* btp: xn = x * gain (the group's GEMM input) and the local sum of squares
 * into the tail of the slot's (single) group's hpre. Otherwise a plain
 * RMSNorm of the replicated stream. */
static void norm_forward(const model *m, model_acts *r, int l, int slot, const boost_act *x, int gain_idx, boost_act *xn,
                         float *rstd) {
  const int N = r->B * r->T, C = m->d_res;
  const boost_act *gain = P(m, gain_idx);
  if (m->mode != TP_BTP) {
    m->be->ops->rmsnorm_forward(m->be, xn, rstd, x, gain, N, C, m->cfg.norm_eps);
    return;
  }
  const layer_param *lp = &m->layers[l];
  const int gi = lp->first_group[slot];
  float *ss = group_ss(m, r->cur->acts[l].hpre[gi], &lp->groups[gi], (size_t)N);
  m->be->ops->gain_sumsq_forward(m->be, xn, ss, x, gain, N, C);
}

/* dx_acc += gradient w.r.t. x of the norm given dxn (w.r.t. its output);
 * gain gradient accumulated. */
static void norm_backward(const model *m, model_acts *r, model_train *ts, const boost_act *x, int gain_idx,
                          const float *rstd, const boost_act *dxn, const float *dss, boost_act *dx_acc) {
  const int N = r->B * r->T, C = m->d_res;
  const boost_act *gain = P(m, gain_idx);
  float *dgain = model_train_grad(ts, gain_idx);
  boost_backend *be = m->be;
  if (m->mode != TP_BTP) {
    be->ops->rmsnorm_backward(be, r->s.d_tmp, dgain, dxn, x, gain, rstd, N, C);
    be->ops->add_inplace(be, dx_acc, r->s.d_tmp, (size_t)N * C);
    return;
  }
  be->ops->gain_sumsq_backward(be, dx_acc, dgain, dxn, x, gain, dss, N, C);
}

/* ---- layers -------------------------------------------------------------- */

/* reuse_bottleneck: low-rank recompute, the saved h is current. dec: a
 * decode step (one new position per sequence, attending to a KV cache)
 * instead of the causal attention over the set's T positions. */
static void layer_forward(const model *m, model_acts *r, int l, const boost_act *x, boost_act *x_out,
                          int reuse_bottleneck, const model_decode_at *dec) {
  boost_backend *be = m->be;
  const boost_ops *o = be->ops;
  const model_config *cfg = &m->cfg;
  const layer_param *lp = &m->layers[l];
  layer_acts *a = &r->cur->acts[l];
  const int B = r->B, T = r->T, N = B * T, hd = cfg->d_model / cfg->n_heads, H = m->heads_loc;
  const size_t NF = (size_t)N * m->ffn_loc, Nd = (size_t)N * m->d_res;
  const int btp = m->mode == TP_BTP;

  norm_forward(m, r, l, SLOT_ATTN_IN, x, lp->attn_norm, a->xn1, a->rstd1);
  slot_forward(m, r, l, SLOT_ATTN_IN, a->xn1, NULL, btp ? a->rstd1 : NULL, reuse_bottleneck);
  if (dec) {
    const size_t layer = (size_t)B * dec->max_T * m->d_qkv;
    o->attention_decode(be, a->attn_out, AT(m, dec->k_cache, l * layer), AT(m, dec->v_cache, l * layer), a->q, a->k,
                        a->v, dec->rope_cos, dec->rope_sin, B, dec->pos, dec->max_T, H, hd);
  } else {
    o->rope_forward(be, a->q, a->q, r->rope_cos, r->rope_sin, B, T, H, hd);
    o->rope_forward(be, a->k, a->k, r->rope_cos, r->rope_sin, B, T, H, hd);
    o->attention_forward(be, a->attn_out, a->att, r->s.d_att, a->q, a->k, a->v, B, T, H, hd);
  }
  slot_forward(m, r, l, SLOT_ATTN_OUT, a->attn_out, r->s.proj_out, NULL, reuse_bottleneck);
  o->add_forward(be, a->resid_mid, x, r->s.proj_out, Nd);

  norm_forward(m, r, l, SLOT_MLP_IN, a->resid_mid, lp->mlp_norm, a->xn2, a->rstd2);
  slot_forward(m, r, l, SLOT_MLP_IN, a->xn2, NULL, btp ? a->rstd2 : NULL, reuse_bottleneck);
  if (!model_is_lowrank(cfg, PROJ_GATE)) o->silu_forward(be, a->gate_act, a->gate, NF);
  o->mul_forward(be, a->prod, a->gate_act, a->up, NF);
  slot_forward(m, r, l, SLOT_MLP_OUT, a->prod, r->s.proj_out, NULL, reuse_bottleneck);
  o->add_forward(be, x_out, a->resid_mid, r->s.proj_out, Nd);
}

/* dx: gradient w.r.t. the layer output; the gradient w.r.t. its input goes
 * to dx_in (dx is updated in place on the way). */
static void layer_backward(const model *m, model_acts *r, model_train *ts, int l, const boost_act *x, boost_act *dx,
                           boost_act *dx_in) {
  boost_backend *be = m->be;
  const boost_ops *o = be->ops;
  const model_config *cfg = &m->cfg;
  const layer_param *lp = &m->layers[l];
  layer_acts *a = &r->cur->acts[l];
  model_scratch *s = &r->s;
  const int B = r->B, T = r->T, N = B * T, hd = cfg->d_model / cfg->n_heads, H = m->heads_loc;
  const size_t NF = (size_t)N * m->ffn_loc, Nd = (size_t)N * m->d_res;
  const int btp = m->mode == TP_BTP;
  float *dss_mlp = s->d_ss, *dss_attn = s->d_ss + N;
  /* Rebuild what was dropped from the layer input (and, for lowrank, the
   * saved bottleneck: no A GEMM, no all-reduce). The output goes to a
   * scratch buffer: the saved next-layer input stays as it is. */
  if (r->recompute != RECOMPUTE_NONE) layer_forward(m, r, l, x, s->d_xn, r->recompute == RECOMPUTE_LOWRANK, NULL);

  slot_backward(m, r, ts, l, SLOT_MLP_OUT, a->prod, dx, NULL, NULL, s->d_prod);
  o->mul_backward(be, s->d_gate, s->d_up, s->d_prod, a->gate_act, a->up, NF);
  if (!model_is_lowrank(cfg, PROJ_GATE)) o->silu_backward(be, s->d_gate, s->d_gate, a->gate, NF);
  slot_backward(m, r, ts, l, SLOT_MLP_IN, a->xn2, NULL, btp ? a->rstd2 : NULL, dss_mlp, s->d_xn);
  norm_backward(m, r, ts, a->resid_mid, lp->mlp_norm, a->rstd2, s->d_xn, dss_mlp, dx);

  slot_backward(m, r, ts, l, SLOT_ATTN_OUT, a->attn_out, dx, NULL, NULL, s->d_attn);
  o->attention_backward(be, s->d_q, s->d_k, s->d_v, s->d_att, s->d_attn, a->q, a->k, a->v, a->att, B, T, H, hd);
  o->rope_backward(be, s->d_q, s->d_q, r->rope_cos, r->rope_sin, B, T, H, hd);
  o->rope_backward(be, s->d_k, s->d_k, r->rope_cos, r->rope_sin, B, T, H, hd);
  slot_backward(m, r, ts, l, SLOT_ATTN_IN, a->xn1, NULL, btp ? a->rstd1 : NULL, dss_attn, s->d_xn);
  be->mem->copy(be, dx_in, dx, boost_act_bytes(be, Nd));
  norm_backward(m, r, ts, x, lp->attn_norm, a->rstd1, s->d_xn, dss_attn, dx_in);
}

/* ---- the stage ----------------------------------------------------------- */

/* Tokens come from the loader, which checked every token of every shard
 * against the vocabulary at open (data_open) and the vocabulary against
 * model.vocab (the trainer): an out-of-range token here is a bug, not bad
 * input. */
static void validate_tokens(const model *m, const int32_t *tok, size_t n) {
  for (size_t i = 0; i < n; i++) BOOST_ASSERT(tok[i] >= 0 && tok[i] < m->cfg.vocab);
}

void model_set_batch(const model *m, model_acts *r, const int32_t *tokens, const int32_t *targets) {
  BOOST_ASSERT(r->act_arena);
  const size_t N = (size_t)r->B * r->T;
  act_set *a = r->cur;
  if (tokens && m->stage.has_embed) {
    validate_tokens(m, tokens, N);
    m->be->mem->upload(m->be, a->tokens, tokens, N * sizeof *tokens);
  }
  a->has_targets = targets != NULL;
  if (targets && m->stage.has_head) {
    validate_tokens(m, targets, N);
    m->be->mem->upload(m->be, a->targets, targets, N * sizeof *targets);
  }
}

void model_forward_layers(const model *m, model_acts *r) {
  const int N = r->B * r->T;
  boost_act **resid = r->cur->resid;
  if (m->stage.has_embed)
    m->be->ops->embedding_forward(m->be, resid[0], r->cur->tokens, P(m, m->ends.wte), N, m->cfg.vocab, m->d_res);
  for (int l = 0; l < m->nl; l++) layer_forward(m, r, l, resid[l], resid[l + 1], 0, NULL);
}

static float forward_stage(const model *m, model_acts *r, int B, int T, float grad_scale) {
  BOOST_ASSERT(r->B == B && r->T == T);
  model_forward_layers(m, r);
  return m->stage.has_head ? head_forward(m, r, B * T, grad_scale) : 0.0f;
}

void model_forward_decode(const model *m, model_acts *r, const model_decode_at *dec) {
  BOOST_ASSERT(r->T == 1 && m->stage.has_embed && m->stage.has_head && m->tp == 1 && !r->cur->has_targets);
  boost_act **resid = r->cur->resid;
  m->be->ops->embedding_forward(m->be, resid[0], r->cur->tokens, P(m, m->ends.wte), r->B, m->cfg.vocab, m->d_res);
  for (int l = 0; l < m->nl; l++) layer_forward(m, r, l, resid[l], resid[l + 1], 0, dec);
  head_forward(m, r, r->B, 0.0f);
}

float model_forward(const model *m, model_acts *r, const int32_t *tokens, const int32_t *targets, int B, int T) {
  if (!r->act_arena) model_alloc_acts(m, r, B, T, 1, RECOMPUTE_NONE);
  model_set_batch(m, r, tokens, targets);
  return forward_stage(m, r, B, T, 0.0f);
}

void model_forward_train(const model *m, model_acts *r, int B, int T, float scale) {
  BOOST_ASSERT(scale > 0.0f && (r->cur->has_targets || !m->stage.has_head));
  forward_stage(m, r, B, T, scale);
}

/* The hook's tail: the gradients from tensor idx's on are final. */
static void grads_ready(const model *m, const model_train *ts, int idx) {
  if (ts->grads_ready) ts->grads_ready(ts->grads_ready_ctx, idx < 0 ? 0 : m->reg.tensors[idx].arena_offset);
}

/* The registry's order is embedding, layers, final norm, LM head (a tied
 * head is the embedding: complete only after it), reversed here. */
void model_backward(const model *m, model_acts *r, model_train *ts, float scale) {
  const int N = r->B * r->T;
  boost_act *dx = r->s.d_resid[0], *dx_in = r->s.d_resid[1];
  if (m->stage.has_head) {
    head_backward(m, r, ts, N, scale, dx);
    grads_ready(m, ts, m->ends.final_norm);
  }
  for (int l = m->nl - 1; l >= 0; l--) {
    layer_backward(m, r, ts, l, r->cur->resid[l], dx, dx_in);
    grads_ready(m, ts, m->layers[l].attn_norm);
    boost_act *t = dx;
    dx = dx_in;
    dx_in = t;
  }
  r->d_in = dx;
  if (m->stage.has_embed)
    m->be->ops->embedding_backward(m->be, model_train_grad(ts, m->ends.wte), dx, r->cur->tokens, N, m->cfg.vocab, m->d_res);
  grads_ready(m, ts, -1);
}

void model_loss_reset(const model *m, model_acts *r) { m->be->mem->zero(m->be, &r->stats[0], sizeof(double)); }

void model_download_stats(const model *m, const model_acts *r, double out[2]) {
  m->be->mem->download(m->be, out, r->stats, 2 * sizeof(double));
}
