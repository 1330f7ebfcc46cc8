/* Shared inside the model's files (model*.c); not for other modules. */
#ifndef BOOST_MODEL_INTERNAL_H
#define BOOST_MODEL_INTERNAL_H

#include "model.h"

static inline float *P(const model *m, int idx) { return registry_data(&m->reg, TENSOR_PARAMS, idx); }
static inline float *G(const model *m, int idx) { return registry_data(&m->reg, TENSOR_GRADS, idx); }

/* Columns of a group's bottleneck on this rank: nproj * r_loc. */
static inline size_t group_width(const proj_group *g) { return (size_t)g->nproj * g->r_loc; }

/* model_acts.c */
void model_free_acts(model *m);

/* model_proj.c: every group of a slot of layer l on input X [N, in_loc].
 * out_override: one output buffer for all (o, down) instead of the saved
 * q/k/v/gate/up buffers. rstd (btp): the fused norm's per-token scale.
 * reuse_bottleneck: the saved h is current (low-rank recompute): skip the
 * A-GEMMs and their all-reduce. */
void slot_forward(model *m, int l, int slot, const float *X, float *out_override, float *rstd, int reuse_bottleneck);
/* dX [N, in_loc] assigned; with rstd, dss gets d loss / d (sum of squares). */
void slot_backward(model *m, int l, int slot, const float *X, float *dout_override, const float *rstd, float *dss,
                   float *dX);

/* model_head.c: final norm, LM head and loss on the last stage. */
float head_forward(model *m, const int32_t *targets, int N, float grad_scale);
/* Leaves d loss / d (last layer's output) in dx [N, d_res]. */
void head_backward(model *m, const int32_t *targets, int N, float scale, float *dx);
void model_validate_tokens(const model *m, const int32_t *tok, size_t n, const char *what);

#endif
