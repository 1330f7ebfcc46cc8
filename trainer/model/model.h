/* LLaMA-style decoder whose projections are full-rank or CoLA bottlenecks,
 * with tensor parallelism over a comm_ctx's tp group.
 *
 *   x0 = wte[tokens]
 *   per layer:  h  = x + o(attn(rope(q(n1(x))), rope(k(n1(x))), v(n1(x))))
 *               x' = h + down(g(n2(h)) * up(n2(h)))
 *        where g = gate (CoLA MLP form) or silu(gate) (full-rank SwiGLU)
 *   logits = lm_head(norm_f(x_L));  loss = mean cross-entropy
 *
 * Projections that share an input form a group (q/k/v, o, gate/up, down)
 * stored as one tensor per factor: low-rank "layers.i.attn.qkv.A" [3, r, d]
 * and ".B" [3, d, r]; full-rank ".W" [3, d, d]. A group's A's are one GEMM.
 * (A group whose members differ in rank-ness is split into single
 * projections, named after the projection: "layers.i.attn.q.W" [d, d].)
 *
 * Tensor-parallel modes (docs/PARALLELISM.md):
 *  - btp (low-rank): residual sharded over d; A's row-parallel over the local
 *    d-shard with one all-reduce of the b*s*g*r bottleneck per group, RMSNorm
 *    folded into that all-reduce (online RMSNorm); B's column-parallel.
 *  - vanilla (low-rank baseline): residual replicated; A column-parallel over
 *    r, B row-parallel with an all-reduce of the full-width output.
 *  - megatron (full-rank): column-parallel q/k/v and gate/up, row-parallel
 *    o and down.
 * Embedding, final norm and LM head: the head is vocab-parallel with a
 * parallel cross-entropy whenever tp > 1 (full logits are never gathered). */
#ifndef BOOST_MODEL_H
#define BOOST_MODEL_H

#include <stdint.h>

#include "backend.h"
#include "comm.h"
#include "config.h"
#include "tensor.h"


/* How a group's tensors and activations are split over tp ranks. */
typedef enum {
  STYLE_LOCAL = 0, /* tp = 1 */
  STYLE_BTP,       /* low-rank: in sharded, H all-reduced, out sharded */
  STYLE_FACTOR,    /* low-rank: in replicated, r sharded, out all-reduced */
  STYLE_COLUMN,    /* full-rank: in replicated, out sharded */
  STYLE_ROW,       /* full-rank: in sharded, out all-reduced */
} group_style;

typedef struct {
  int nproj;
  proj_kind kinds[3];
  int lowrank;
  group_style style;
  int in, out, r;             /* global, per projection */
  int in_loc, out_loc, r_loc; /* this rank's */
  int A, B;                   /* registry indices; full-rank: A is W, B = -1 */
} proj_group;

enum { SLOT_ATTN_IN = 0, SLOT_ATTN_OUT, SLOT_MLP_IN, SLOT_MLP_OUT, NUM_SLOTS };

typedef struct {
  int attn_norm, mlp_norm;
  int ngroups;
  proj_group groups[PROJ_COUNT];
  int first_group[NUM_SLOTS + 1]; /* groups of slot s: [first_group[s], first_group[s+1]) */
} layer_param;

/* Saved activations of one layer: backend memory carved from the
 * activation arena; boost_act in the backend's act type, float statistics. */
typedef struct {
  float *rstd1;
  boost_act *xn1;                            /* normalised (btp: x * gain, unnormalised) */
  boost_act *hpre[PROJ_COUNT], *h[PROJ_COUNT]; /* per group: [N, g*r_loc]; hpre is followed by the btp norm's
                                                 N float sums of squares (group_ss) */
  boost_act *q, *k, *v, *attn_out;
  float *att; /* attention row stats [B, H, T, 2] (max, 1/sum) */
  boost_act *resid_mid, *xn2;
  float *rstd2;
  boost_act *gate, *gate_act, *up, *prod;
} layer_acts;

/* The layers this pipeline stage holds (global indices), and whether it
 * holds the embedding (first stage) and the head (last stage). */
typedef struct {
  int first_layer, num_layers, has_embed, has_head;
} model_stage;


/* Activations of one micro-batch in flight. */
typedef struct {
  boost_act **resid; /* num_layers + 1 points of the residual stream, [N, d_res] */
  layer_acts *acts;
  float *rstd_f, *losses, *ce_max, *ce_sum;
  boost_act *x_full, *xn_f, *logits;
  int32_t *tokens, *targets; /* [N] each, uploaded by model_set_batch */
  int has_targets;
  /* logits_grad_scale > 0: a training forward already turned the logits
   * into d loss / d logits with that dloss per token (model_forward_train) */
  float logits_grad_scale;
} act_set;

/* Gradient and scratch buffers shared by every micro-batch (backward runs
 * one micro-batch at a time). */
typedef struct {
  boost_act *d_resid[2], *d_xn, *d_xfull, *d_tmp, *d_attn, *d_q, *d_k, *d_v;
  void *d_att;
  boost_act *d_prod, *d_gate, *d_up, *d_h, *proj_out;
  float *d_ss;
} model_scratch;

/* A model in memory is three types, in llama2.c's spirit (Config /
 * Weights / RunState), so that each user holds only what it runs:
 *  - `model`: the configuration and layout (the config, backend, tp mode,
 *    stage, local widths, the registry's descriptors, the projection groups,
 *    the communicator) and the weights (`w`: the float parameter arena and
 *    its working copy; none when built layout_only);
 *  - `model_acts` (below): an activation state, the activations of the micro-batches
 *    in flight, the backward's scratch, RoPE tables and statistics. Any
 *    number of activation states may run over one model's weights: generation's
 *    decode step (model_decode.h) and the training log's samples each hold
 *    their own;
 *  - `model_train` (model_train.h): the training state, gradients, both
 *    AdamW moments (with their ZeRO-1 chunk), the optimizer plan and the
 *    grads-ready hook. Only training includes that header: forward code
 *    (generation, evaluation, export) cannot reach gradients or moments. */
typedef struct {
  model_config cfg;
  boost_backend *be; /* not owned: memory and every numeric op */
  tp_mode mode;
  model_stage stage;
  int nl; /* layers on this stage */
  comm_ctx *comm; /* not owned (own_comm when none was given) */
  comm_ctx own_comm;
  int tp, tp_rank;
  /* local widths */
  int d_res, d_qkv, heads_loc, ffn_loc, vocab_loc, vocab_start;
  tensor_registry reg; /* the descriptors: names, shapes, shards, arena offsets */
  struct {
    int wte, lm_head, final_norm; /* registry indices; -1 where not on this stage */
  } ends;                        /* the parameters at the model's two ends: embedding, final norm, head */
  layer_param *layers;
  tensor_weights w; /* the weights */
} model;

/* The activation state of one user of a model's weights. Zero-initialised it is
 * empty; model_alloc_acts fills it, model_acts_free empties it. */
typedef struct {
  int B, T, nsets;
  recompute_mode recompute;
  void *act_arena;
  size_t act_bytes;
  size_t act_bytes_per_layer; /* kept per layer per micro-batch in flight */
  act_set *sets;
  act_set *cur; /* the micro-batch forward/backward work on (model_use_acts) */
  boost_act *d_in;  /* after model_backward on a stage without the embedding: d loss / d stage input */
  float *rope_cos, *rope_sin;
  double *stats; /* backend memory: [0] the training losses accumulated since model_loss_reset, [1] model_grad_sumsq,
                    [2] an evaluation's loss */
  model_scratch s;
} model_acts;

/* How a model is built besides its config and tp mode. Zero-initialised
 * fields take the defaults. */
typedef struct {
  boost_backend *backend;   /* NULL: the process's default CPU backend (float) */
  comm_ctx *comm;           /* NULL: a single process */
  const model_stage *stage; /* NULL: the whole model */
  size_t arena_multiple;    /* arenas padded to a multiple of this many floats (ZeRO-1 splits them evenly
                               over dp ranks: the trainer passes dp * 16); 0: 16 */
  int layout_only;          /* the registry (names, shapes, shards) without weights: tools planning a layout */
} model_options;

/* Resolve parallel.tp_mode for a config ("auto": btp when every projection
 * is low-rank, megatron when none is). Returns -1 with a message when the
 * mode does not fit the model or the dims do not divide over tp. */
int model_check_layout(const model_config *cfg, tp_mode requested, int tp, tp_mode *mode, boost_status *err);

/* The configuration, layout and (unless opt->layout_only) the weights, zeroed. */
void model_init(model *m, const model_config *cfg, tp_mode mode, const model_options *opt);
void model_free(model *m);

/* Deterministic init: each element is a function of (seed, tensor name,
 * global element index), so any sharding yields the same global values.
 * Drawn on the host and uploaded (the working copy follows). */
void model_init_params(model *m, uint64_t seed);
/* The working copy follows the float parameters (after they were loaded). */
static inline void model_refresh_work(model *m) { weights_refresh_work(&m->w, &m->reg, m->be); }

/* r's activation arena for nsets micro-batches of B x T in flight over m
 * (pipeline 1F1B keeps up to pp - stage), keeping per layer what
 * `recompute` says: none: everything; lowrank: the layer input and the
 * r-dim bottleneck activations (recomputing the rest needs no collective
 * under btp); full: the layer input only. Idempotent. */
void model_alloc_acts(const model *m, model_acts *r, int B, int T, int nsets, recompute_mode recompute);
void model_use_acts(model_acts *r, int set);
/* Frees what r holds (r is empty after; m's weights are untouched). */
void model_acts_free(const model *m, model_acts *r);

/* Pipeline stage boundaries of r's current set: a stage without the
 * embedding finds its input in model_stage_input() (filled by the caller
 * before model_forward); a stage without the head leaves its output in
 * model_stage_output(), takes the gradient w.r.t. it in
 * model_stage_output_grad() before model_backward, and leaves the gradient
 * w.r.t. its input in r->d_in. Each is [B*T, d_res]. */
static inline boost_act *model_stage_input(model_acts *r) { return r->cur->resid[0]; }
static inline boost_act *model_stage_output(const model *m, model_acts *r) { return r->cur->resid[m->nl]; }
static inline boost_act *model_stage_output_grad(model_acts *r) { return r->s.d_resid[0]; }

/* Name of a projection group in tensor names: "qkv", "gate_up", or the
 * single projection's ("q", "o", "down", ...). */
const char *model_group_name(const proj_group *g);

/* Contiguous balanced split of n_layers over pp stages by FLOPs, counting the
 * embedding on the first and the LM head on the last; or `spec` ("3,5": layers
 * per stage). Returns -1 with a message when it cannot be done. */
int model_plan_stages(const model_config *cfg, int pp, const char *spec, int T, int *layers_per_stage,
                      boost_status *err);

/* r's current set's micro-batch: tokens and (NULL: none) targets, [B*T]
 * each, checked against the vocabulary on the host and uploaded. */
void model_set_batch(const model *m, model_acts *r, const int32_t *tokens, const int32_t *targets);

/* model_set_batch, then the forward of m's weights in activation state r (its
 * activations allocated for B x T on first use); returns the mean loss over
 * B*T targets on the stage with the head (NULL targets: logits only), 0
 * elsewhere. The loss is read back (a synchronisation): evaluation and
 * tests. */
float model_forward(const model *m, model_acts *r, const int32_t *tokens, const int32_t *targets, int B, int T);

/* The training loss sum (double, backend memory) and its reset. */
static inline double *model_loss_sum(model_acts *r) { return &r->stats[0]; }
void model_loss_reset(const model *m, model_acts *r);
/* Both statistics read back: [0] loss sum, [1] gradient sum of squares. */
void model_download_stats(const model *m, const model_acts *r, double out[2]);

int64_t model_num_params(const model *m);
double model_flops_per_token(const model_config *cfg, int T);

#endif
