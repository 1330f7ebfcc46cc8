/* The decoder's forward and backward over this stage's layers (model.h has
 * the equations). Every numeric step is a backend op (m->ops); collectives
 * go through the comm layer between ops. Construction: model_layout.c;
 * activation memory: model_acts.c; projection groups: model_proj.c; the
 * head and loss: model_head.c. */
#include "model_internal.h"

#include <string.h>

#include "check.h"

/* ---- norms around the groups --------------------------------------------- */

/* btp: xn = x * gain (the group's GEMM input) and the local sum of squares
 * into the tail of the slot's (single) group's hpre. Otherwise a plain
 * RMSNorm of the replicated stream. */
static void norm_forward(model *m, int l, int slot, const float *x, int gain_idx, float *xn, float *rstd) {
  const int N = m->B * m->T, C = m->d_res;
  const float *gain = P(m, gain_idx);
  if (m->mode != TP_BTP) {
    m->ops->rmsnorm_forward(xn, rstd, x, gain, N, C, m->cfg.norm_eps);
    return;
  }
  const layer_param *lp = &m->layers[l];
  const int gi = lp->first_group[slot];
  float *ss = m->cur->acts[l].hpre[gi] + (size_t)N * group_width(&lp->groups[gi]);
  m->ops->gain_sumsq_forward(xn, ss, x, gain, N, C);
}

/* dx_acc += gradient w.r.t. x of the norm given dxn (w.r.t. its output);
 * gain gradient accumulated. */
static void norm_backward(model *m, const float *x, int gain_idx, const float *rstd, const float *dxn, const float *dss,
                          float *dx_acc) {
  const int N = m->B * m->T, C = m->d_res;
  const float *gain = P(m, gain_idx);
  float *dgain = G(m, gain_idx);
  if (m->mode != TP_BTP) {
    m->ops->rmsnorm_backward(m->s.d_tmp, dgain, dxn, x, gain, rstd, N, C);
    m->ops->add_inplace(dx_acc, m->s.d_tmp, (size_t)N * C);
    return;
  }
  m->ops->gain_sumsq_backward(dx_acc, dgain, dxn, x, gain, dss, N, C);
}

/* ---- layers -------------------------------------------------------------- */

/* reuse_bottleneck: low-rank recompute, the saved h is current. */
static void layer_forward(model *m, int l, const float *x, float *x_out, int reuse_bottleneck) {
  const boost_ops *o = m->ops;
  const model_config *cfg = &m->cfg;
  const layer_param *lp = &m->layers[l];
  layer_acts *a = &m->cur->acts[l];
  const int B = m->B, T = m->T, N = B * T, hd = cfg->d_model / cfg->n_heads, H = m->heads_loc;
  const size_t NF = (size_t)N * m->ffn_loc, Nd = (size_t)N * m->d_res;
  const int btp = m->mode == TP_BTP;

  norm_forward(m, l, SLOT_ATTN_IN, x, lp->attn_norm, a->xn1, a->rstd1);
  slot_forward(m, l, SLOT_ATTN_IN, a->xn1, NULL, btp ? a->rstd1 : NULL, reuse_bottleneck);
  o->rope_forward(a->q, a->q, m->rope_cos, m->rope_sin, B, T, H, hd);
  o->rope_forward(a->k, a->k, m->rope_cos, m->rope_sin, B, T, H, hd);
  o->attention_forward(a->attn_out, a->att, m->s.d_att, a->q, a->k, a->v, B, T, H, hd);
  slot_forward(m, l, SLOT_ATTN_OUT, a->attn_out, m->s.proj_out, NULL, reuse_bottleneck);
  o->add_forward(a->resid_mid, x, m->s.proj_out, Nd);

  norm_forward(m, l, SLOT_MLP_IN, a->resid_mid, lp->mlp_norm, a->xn2, a->rstd2);
  slot_forward(m, l, SLOT_MLP_IN, a->xn2, NULL, btp ? a->rstd2 : NULL, reuse_bottleneck);
  if (!model_is_lowrank(cfg, PROJ_GATE)) o->silu_forward(a->gate_act, a->gate, NF);
  o->mul_forward(a->prod, a->gate_act, a->up, NF);
  slot_forward(m, l, SLOT_MLP_OUT, a->prod, m->s.proj_out, NULL, reuse_bottleneck);
  o->add_forward(x_out, a->resid_mid, m->s.proj_out, Nd);
}

/* dx: gradient w.r.t. the layer output; the gradient w.r.t. its input goes
 * to dx_in (dx is updated in place on the way). */
static void layer_backward(model *m, int l, const float *x, float *dx, float *dx_in) {
  const boost_ops *o = m->ops;
  const model_config *cfg = &m->cfg;
  const layer_param *lp = &m->layers[l];
  layer_acts *a = &m->cur->acts[l];
  model_scratch *s = &m->s;
  const int B = m->B, T = m->T, N = B * T, hd = cfg->d_model / cfg->n_heads, H = m->heads_loc;
  const size_t NF = (size_t)N * m->ffn_loc, Nd = (size_t)N * m->d_res;
  const int btp = m->mode == TP_BTP;
  float *dss_mlp = s->d_ss, *dss_attn = s->d_ss + N;
  /* Rebuild what was dropped from the layer input (and, for lowrank, the
   * saved bottleneck: no A GEMM, no all-reduce). The output goes to a
   * scratch buffer: the saved next-layer input stays as it is. */
  if (m->recompute != RECOMPUTE_NONE) layer_forward(m, l, x, s->d_xn, m->recompute == RECOMPUTE_LOWRANK);

  slot_backward(m, l, SLOT_MLP_OUT, a->prod, dx, NULL, NULL, s->d_prod);
  o->mul_backward(s->d_gate, s->d_up, s->d_prod, a->gate_act, a->up, NF);
  if (!model_is_lowrank(cfg, PROJ_GATE)) o->silu_backward(s->d_gate, s->d_gate, a->gate, NF);
  slot_backward(m, l, SLOT_MLP_IN, a->xn2, NULL, btp ? a->rstd2 : NULL, dss_mlp, s->d_xn);
  norm_backward(m, a->resid_mid, lp->mlp_norm, a->rstd2, s->d_xn, dss_mlp, dx);

  slot_backward(m, l, SLOT_ATTN_OUT, a->attn_out, dx, NULL, NULL, s->d_attn);
  o->attention_backward(s->d_q, s->d_k, s->d_v, s->d_att, s->d_attn, a->q, a->k, a->v, a->att, B, T, H, hd);
  o->rope_backward(s->d_q, s->d_q, m->rope_cos, m->rope_sin, B, T, H, hd);
  o->rope_backward(s->d_k, s->d_k, m->rope_cos, m->rope_sin, B, T, H, hd);
  slot_backward(m, l, SLOT_ATTN_IN, a->xn1, NULL, btp ? a->rstd1 : NULL, dss_attn, s->d_xn);
  memcpy(dx_in, dx, Nd * sizeof(float));
  norm_backward(m, x, lp->attn_norm, a->rstd1, s->d_xn, dss_attn, dx_in);
}

/* ---- the stage ----------------------------------------------------------- */

static float forward_stage(model *m, const int32_t *tokens, const int32_t *targets, int B, int T, float grad_scale) {
  if (!m->act_arena) model_alloc_acts(m, B, T, 1, RECOMPUTE_NONE);
  BOOST_ASSERT(m->B == B && m->T == T);
  const int N = B * T;
  float **resid = m->cur->resid;
  if (m->stage.has_embed) {
    model_validate_tokens(m, tokens, (size_t)N, "input");
    m->ops->embedding_forward(resid[0], tokens, P(m, m->wte), N, m->cfg.vocab, m->d_res);
  }
  for (int l = 0; l < m->nl; l++) layer_forward(m, l, resid[l], resid[l + 1], 0);
  return m->stage.has_head ? head_forward(m, targets, N, grad_scale) : 0.0f;
}

float model_forward(model *m, const int32_t *tokens, const int32_t *targets, int B, int T) {
  return forward_stage(m, tokens, targets, B, T, 0.0f);
}

float model_forward_train(model *m, const int32_t *tokens, const int32_t *targets, int B, int T, float scale) {
  BOOST_ASSERT(scale > 0.0f);
  return forward_stage(m, tokens, targets, B, T, scale);
}

void model_backward(model *m, const int32_t *tokens, const int32_t *targets, int B, int T, float scale) {
  BOOST_ASSERT(m->B == B && m->T == T);
  const int N = B * T;
  float *dx = m->s.d_resid[0], *dx_in = m->s.d_resid[1];
  if (m->stage.has_head) head_backward(m, targets, N, scale, dx);
  for (int l = m->nl - 1; l >= 0; l--) {
    layer_backward(m, l, m->cur->resid[l], dx, dx_in);
    float *t = dx;
    dx = dx_in;
    dx_in = t;
  }
  m->d_in = dx;
  if (m->stage.has_embed) m->ops->embedding_backward(G(m, m->wte), dx, tokens, N, m->cfg.vocab, m->d_res);
}

void model_zero_grads(model *m) { memset(m->reg.arena[TENSOR_GRADS], 0, m->reg.numel * sizeof(float)); }

double model_grad_sumsq_range(const model *m, size_t begin, size_t end) {
  double s = 0.0;
  size_t lo, hi;
  for (int i = 0; i < m->reg.count; i++) {
    const tensor_desc *t = &m->reg.tensors[i];
    if ((t->split_dim < 0 && m->tp_rank != 0) || !tensor_clip_range(t, begin, end, &lo, &hi)) continue;
    s += m->ops->sum_squares(m->reg.arena[TENSOR_GRADS] + lo, hi - lo);
  }
  return s;
}

double model_grad_sumsq(const model *m) { return model_grad_sumsq_range(m, 0, m->reg.numel); }
