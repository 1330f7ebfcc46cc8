/* Shared inside the model's files (model*.c); not for other modules. */
#ifndef BOOST_MODEL_INTERNAL_H
#define BOOST_MODEL_INTERNAL_H

#include "model.h"

/* The training state, for the backward's declarations below: only the
 * files that run the backward include model_train.h and see inside it. */
struct model_train;

/* A parameter as the ops read it (the working copy, act type). */
static inline boost_act *P(const model *m, int idx) { return weights_work(&m->w, &m->reg, m->be, idx); }

/* n act elements past p */
static inline boost_act *AT(const model *m, const boost_act *p, size_t n) { return boost_act_at(m->be, p, n); }

/* Columns of a group's bottleneck on this rank: nproj * r_loc. */
static inline size_t group_width(const proj_group *g) { return (size_t)g->nproj * g->r_loc; }

/* Where a group's hpre buffer keeps the btp norm's per-token sums of
 * squares: right behind the N x width bottleneck when the act type is float
 * (so both travel as one message), 64-byte aligned otherwise. */
static inline size_t group_ss_offset(const model *m, size_t N, const proj_group *g) {
  const size_t b = boost_act_bytes(m->be, N * group_width(g));
  return m->be->act_dtype == BOOST_F32 ? b : (b + 63) / 64 * 64;
}
static inline float *group_ss(const model *m, const boost_act *hpre, const proj_group *g, size_t N) {
  return (float *)((char *)hpre + group_ss_offset(m, N, g));
}

/* A decode step's place in a KV cache (model_decode.c): caches [nl, B,
 * max_T, d_qkv] of act elements, RoPE tables of max_T rows, the position
 * of the new token. */
typedef struct {
  boost_act *k_cache, *v_cache;
  const float *rope_cos, *rope_sin;
  int pos, max_T;
} model_decode_at;
/* model.c: the forward of r's current set (T = 1: the new tokens, already
 * set) as one decode step; the logits [B, vocab] are left in the set. */
void model_forward_decode(const model *m, model_acts *r, const model_decode_at *dec);
/* model.c: the embedding (on its stage) and this stage's layers over r's
 * current set's B x T tokens, no head: each layer's rotated k and v stay in
 * its activations (a prompt's keys and values for a KV cache). */
void model_forward_layers(const model *m, model_acts *r);

/* model_acts.c: r's activations and scratch (its statistics stay). */
void model_free_acts(const model *m, model_acts *r);

/* model_proj.c: every group of a slot of layer l on input X [N, in_loc].
 * out_override: one output buffer for all (o, down) instead of the saved
 * q/k/v/gate/up buffers. rstd (btp): the fused norm's per-token scale.
 * reuse_bottleneck: the saved h is current (low-rank recompute): skip the
 * A-GEMMs and their all-reduce. */
void slot_forward(const model *m, model_acts *r, int l, int slot, const boost_act *X, boost_act *out_override,
                  float *rstd, int reuse_bottleneck);
/* dX [N, in_loc] assigned; with rstd, dss gets d loss / d (sum of squares). */
void slot_backward(const model *m, model_acts *r, struct model_train *ts, int l, int slot, const boost_act *X,
                   boost_act *dout_override, const float *rstd, float *dss, boost_act *dX);

/* model_head.c: final norm, LM head and loss on the last stage. Training
 * (grad_scale > 0) adds the mean loss to the loss sum; evaluation returns it. */
float head_forward(const model *m, model_acts *r, int N, float grad_scale);
/* Leaves d loss / d (last layer's output) in dx [N, d_res]. */
void head_backward(const model *m, model_acts *r, struct model_train *ts, int N, float scale, boost_act *dx);

#endif
