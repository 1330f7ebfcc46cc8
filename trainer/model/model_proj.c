/* Projection groups: the projections that share an input (q/k/v, gate/up)
 * run as one group, full-rank (W) or low-rank (A then B), in the layout the
 * tensor-parallel style asks for; the collectives sit between the backend's
 * pieces.
 *
 *   low-rank forward:  H = X . A^T  (one GEMM for the group, [N, g*r_loc])
 *                      btp: all-reduce [H, local sum of squares] (one call)
 *                           and scale by the global rms (online RMSNorm)
 *                      h = silu(H);  out_j = h_j . B_j^T  per projection j
 *                      factor: all-reduce each out_j (vanilla's row-parallel B)
 *   full-rank forward: out_j = X . W_j^T; row: all-reduce out_j */
#include "model_internal.h"

#include "model_train.h"

/* Forward of a group on input X [N, in_loc] into outs[j] [N, out_loc] (or
 * the full width for styles that reduce). With rstd non-NULL (btp), X is the
 * gain-scaled unnormalised input and ss (behind hpre: group_ss) holds each
 * token's local sum of squares: it travels in the bottleneck's all-reduce
 * and the group normalises by the global RMS (online RMSNorm). */
static void group_forward(const model *m, const proj_group *g, const boost_act *X, boost_act *const *outs, boost_act *hpre,
                          boost_act *h, float *rstd, int N, int reuse_bottleneck) {
  boost_backend *be = m->be;
  const boost_ops *o = be->ops;
  if (!g->lowrank) {
    const boost_act *W = P(m, g->A);
    for (int j = 0; j < g->nproj; j++) {
      o->gemm(be, 0, 1, N, g->out_loc, g->in_loc, X, g->in_loc, AT(m, W, (size_t)j * g->out_loc * g->in_loc),
              g->in_loc, 0.0f, outs[j], g->out_loc);
      if (g->style == STYLE_ROW) comm_reduce_forward(m->comm, COMM_TP, outs[j], (size_t)N * g->out);
    }
    return;
  }
  const int w = (int)group_width(g);
  if (!reuse_bottleneck) {
    float *ss = group_ss(m, hpre, g, (size_t)N);
    o->gemm(be, 0, 1, N, w, g->in_loc, X, g->in_loc, P(m, g->A), g->in_loc, 0.0f, hpre, w);
    if (g->style == STYLE_BTP && m->tp > 1) comm_allreduce_btp(m->comm, COMM_TP, hpre, (size_t)N * w, ss, rstd ? (size_t)N : 0);
    if (rstd) o->online_rms_forward(be, hpre, rstd, ss, N, w, 1.0f / (float)m->cfg.d_model, m->cfg.norm_eps);
    o->silu_forward(be, h, hpre, (size_t)N * w);
  }
  const boost_act *B = P(m, g->B);
  for (int j = 0; j < g->nproj; j++) {
    o->gemm(be, 0, 1, N, g->out_loc, g->r_loc, AT(m, h, (size_t)j * g->r_loc), w,
            AT(m, B, (size_t)j * g->out_loc * g->r_loc), g->r_loc, 0.0f, outs[j], g->out_loc);
    if (g->style == STYLE_FACTOR) comm_reduce_forward(m->comm, COMM_TP, outs[j], (size_t)N * g->out);
  }
}

static void full_rank_backward(const model *m, model_train *ts, const proj_group *g, boost_act *const *douts,
                               const boost_act *X, boost_act *dX, int N) {
  boost_backend *be = m->be;
  const boost_ops *o = be->ops;
  const boost_act *W = P(m, g->A);
  float *dW = model_train_grad(ts, g->A);
  for (int j = 0; j < g->nproj; j++) {
    const size_t off = (size_t)j * g->out_loc * g->in_loc;
    o->gemm_acc_f32(be, 1, 0, g->out_loc, g->in_loc, N, douts[j], g->out_loc, X, g->in_loc, dW + off, g->in_loc);
    o->gemm(be, 0, 0, N, g->in_loc, g->out_loc, douts[j], g->out_loc, AT(m, W, off), g->in_loc, j ? 1.0f : 0.0f, dX,
            g->in_loc);
  }
  if (g->style == STYLE_COLUMN) comm_copy_backward(m->comm, COMM_TP, dX, (size_t)N * g->in);
}

/* Backward of a group: douts[j] as in forward, dX [N, in_loc] assigned. With
 * rstd non-NULL, dss [N] receives d loss / d (sum of squares) of the fused
 * norm, and dX is with respect to the gain-scaled input. */
static void group_backward(const model *m, model_acts *r, model_train *ts, const proj_group *g,
                           boost_act *const *douts, const boost_act *X, const boost_act *hpre, const boost_act *h, const float *rstd, float *dss, boost_act *dX,
                           int N) {
  if (!g->lowrank) {
    full_rank_backward(m, ts, g, douts, X, dX, N);
    return;
  }
  boost_backend *be = m->be;
  const boost_ops *o = be->ops;
  const int w = (int)group_width(g);
  boost_act *dH = r->s.d_h;
  const boost_act *B = P(m, g->B);
  float *dB = model_train_grad(ts, g->B);
  for (int j = 0; j < g->nproj; j++) {
    const size_t off = (size_t)j * g->out_loc * g->r_loc;
    o->gemm_acc_f32(be, 1, 0, g->out_loc, g->r_loc, N, douts[j], g->out_loc, AT(m, h, (size_t)j * g->r_loc), w,
                    dB + off, g->r_loc);
    o->gemm(be, 0, 0, N, g->r_loc, g->out_loc, douts[j], g->out_loc, AT(m, B, off), g->r_loc, 0.0f,
            AT(m, dH, (size_t)j * g->r_loc), w);
  }
  if (g->style == STYLE_BTP && m->tp > 1) comm_allreduce_act(m->comm, COMM_TP, dH, (size_t)N * w);
  o->silu_backward(be, dH, dH, hpre, (size_t)N * w);
  if (rstd) o->online_rms_backward(be, dH, dss, hpre, rstd, N, w, 1.0f / (float)m->cfg.d_model);
  o->gemm_acc_f32(be, 1, 0, w, g->in_loc, N, dH, w, X, g->in_loc, model_train_grad(ts, g->A), g->in_loc);
  o->gemm(be, 0, 0, N, g->in_loc, w, dH, w, P(m, g->A), g->in_loc, 0.0f, dX, g->in_loc);
  if (g->style == STYLE_FACTOR) comm_copy_backward(m->comm, COMM_TP, dX, (size_t)N * g->in);
}

/* Where a projection's output (forward) and its gradient (backward) live. */
static boost_act *proj_buffer(model_acts *r, layer_acts *a, proj_kind k, int grad) {
  switch (k) {
  case PROJ_Q: return grad ? r->s.d_q : a->q;
  case PROJ_K: return grad ? r->s.d_k : a->k;
  case PROJ_V: return grad ? r->s.d_v : a->v;
  case PROJ_GATE: return grad ? r->s.d_gate : a->gate;
  case PROJ_UP: return grad ? r->s.d_up : a->up;
  default: return NULL; /* o and down: the caller's buffer */
  }
}

void slot_forward(const model *m, model_acts *r, int l, int slot, const boost_act *X, boost_act *out_override,
                  float *rstd, int reuse_bottleneck) {
  const layer_param *lp = &m->layers[l];
  layer_acts *a = &r->cur->acts[l];
  const int N = r->B * r->T;
  for (int gi = lp->first_group[slot]; gi < lp->first_group[slot + 1]; gi++) {
    const proj_group *g = &lp->groups[gi];
    boost_act *outs[3];
    for (int j = 0; j < g->nproj; j++) outs[j] = out_override ? out_override : proj_buffer(r, a, g->kinds[j], 0);
    group_forward(m, g, X, outs, a->hpre[gi], a->h[gi], rstd, N, reuse_bottleneck);
  }
}

void slot_backward(const model *m, model_acts *r, model_train *ts, int l, int slot, const boost_act *X,
                   boost_act *dout_override, const float *rstd, float *dss, boost_act *dX) {
  const layer_param *lp = &m->layers[l];
  layer_acts *a = &r->cur->acts[l];
  const int N = r->B * r->T;
  for (int gi = lp->first_group[slot]; gi < lp->first_group[slot + 1]; gi++) {
    const proj_group *g = &lp->groups[gi];
    boost_act *douts[3];
    for (int j = 0; j < g->nproj; j++) douts[j] = dout_override ? dout_override : proj_buffer(r, a, g->kinds[j], 1);
    const int first = gi == lp->first_group[slot];
    boost_act *target = first ? dX : r->s.d_tmp;
    group_backward(m, r, ts, g, douts, X, a->hpre[gi], a->h[gi], rstd, dss, target, N);
    if (!first) m->be->ops->add_inplace(m->be, dX, r->s.d_tmp, (size_t)N * g->in_loc);
  }
}
