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

/* The gradients [from, numel) of the arena are final (model_set_grads_hook). */
typedef void (*model_grads_ready_fn)(void *ctx, size_t from);

/* Three parts, in llama2.c's spirit (Config / Weights / RunState), built
 * by separate calls so that each user allocates what it runs:
 *  - configuration and layout (model_init): the config, backend, tp mode,
 *    stage, local widths, the registry's descriptors and projection groups;
 *  - weights (model_init): the parameter arena and its working copy; the
 *    training state on top (model_alloc_train, which model_init calls
 *    unless weights_only): gradients, AdamW moments and the optimizer plan;
 *  - run state: activations of the micro-batches in flight, the backward's
 *    scratch, RoPE tables (model_alloc_acts), statistics. A second run
 *    state over the same weights is a borrowed view (model_borrow): what
 *    generation's decode step (model_decode.h) and the training log's
 *    samples run on. */
typedef struct {
  /* ---- configuration and layout ---- */
  model_config cfg;
  boost_backend *be; /* not owned: memory and every numeric op */
  tp_mode mode;
  model_stage stage;
  int nl; /* layers on this stage */
  recompute_mode recompute;
  comm_ctx *comm; /* not owned (own_comm when none was given) */
  comm_ctx own_comm;
  int tp, tp_rank;
  /* local widths */
  int d_res, d_qkv, heads_loc, ffn_loc, vocab_loc, vocab_start;

  /* ---- weights (the registry's arenas; gradients and moments when training) ---- */
  tensor_registry reg;
  int wte, lm_head, final_norm;
  layer_param *layers;
  boost_optim_plan *plan; /* with the optimizer: this rank's AdamW segments ([mom_begin, mom_end)) */
  int borrowed;           /* a view (model_borrow): the weights and layout are another model's */

  /* ---- run state ---- */
  int B, T, nsets;
  void *act_arena;
  size_t act_bytes;
  size_t act_bytes_per_layer; /* kept per layer per micro-batch in flight */
  act_set *sets;
  act_set *cur; /* the micro-batch forward/backward work on (model_use_acts) */
  boost_act *d_in;  /* after model_backward on a stage without the embedding: d loss / d stage input */
  float *rope_cos, *rope_sin;
  double *stats; /* backend memory: [0] the training losses accumulated since model_loss_reset, [1] model_grad_sumsq */
  model_scratch s;
  model_grads_ready_fn grads_ready; /* model_set_grads_hook's (NULL: none) */
  void *grads_ready_ctx;
} model;

/* How a model is built besides its config and tp mode. Zero-initialised
 * fields take the defaults. */
typedef struct {
  boost_backend *backend;   /* NULL: the process's default CPU backend (float) */
  comm_ctx *comm;           /* NULL: a single process */
  int with_optimizer;       /* allocate the AdamW moment arenas */
  const model_stage *stage; /* NULL: the whole model */
  size_t arena_multiple;    /* arenas padded to a multiple of this many floats (ZeRO-1 splits them evenly
                               over dp ranks: the trainer passes dp * 16); 0: 16 */
  int layout_only;          /* the registry (names, shapes, shards) without arenas: tools planning a layout */
  int zero_shards, zero_rank; /* ZeRO-1: the moment arenas hold chunk zero_rank of zero_shards (the trainer passes
                                 dp, dp_rank); 0 or 1: whole */
  int weights_only;          /* no gradients, moments or plan (inference; model_alloc_train adds them) */
} model_options;

/* Resolve parallel.tp_mode for a config ("auto": btp when every projection
 * is low-rank, megatron when none is). Returns -1 with a message when the
 * mode does not fit the model or the dims do not divide over tp. */
int model_check_layout(const model_config *cfg, tp_mode requested, int tp, tp_mode *mode, char *err, size_t errlen);

/* The configuration and the weights, and unless opt->weights_only the
 * training state (model_alloc_train(m, opt->with_optimizer)). */
void model_init(model *m, const model_config *cfg, tp_mode mode, const model_options *opt);
/* Gradients, and with_optimizer the AdamW moments (sharded as model_init's
 * options said) and the optimizer plan. Idempotent. */
void model_alloc_train(model *m, int with_optimizer);
/* view: owner's configuration and weights (shared, not copied) with a run
 * state of its own, empty (model_alloc_acts fills it) and no training
 * state: forwards only. model_free(view) frees its run state; the owner
 * must outlive it. */
void model_borrow(model *view, const model *owner);
void model_free(model *m);

/* Deterministic init: each element is a function of (seed, tensor name,
 * global element index), so any sharding yields the same global values.
 * Drawn on the host and uploaded (the working copy follows). */
void model_init_params(model *m, uint64_t seed);

/* Activation arena for nsets micro-batches of B x T in flight (pipeline
 * 1F1B keeps up to pp - stage), keeping per layer what `recompute` says:
 * none: everything; lowrank: the layer input and the r-dim bottleneck
 * activations (recomputing the rest needs no collective under btp); full:
 * the layer input only. Idempotent. */
void model_alloc_acts(model *m, int B, int T, int nsets, recompute_mode recompute);
void model_use_acts(model *m, int set);

/* Pipeline stage boundaries of the current set: a stage without the
 * embedding finds its input in model_stage_input() (filled by the caller
 * before model_forward); a stage without the head leaves its output in
 * model_stage_output(), takes the gradient w.r.t. it in
 * model_stage_output_grad() before model_backward, and leaves the gradient
 * w.r.t. its input in m->d_in. Each is [B*T, d_res]. */
static inline boost_act *model_stage_input(model *m) { return m->cur->resid[0]; }
static inline boost_act *model_stage_output(model *m) { return m->cur->resid[m->nl]; }
static inline boost_act *model_stage_output_grad(model *m) { return m->s.d_resid[0]; }

/* Name of a projection group in tensor names: "qkv", "gate_up", or the
 * single projection's ("q", "o", "down", ...). */
const char *model_group_name(const proj_group *g);

/* Contiguous balanced split of n_layers over pp stages by FLOPs, counting the
 * embedding on the first and the LM head on the last; or `spec` ("3,5": layers
 * per stage). Returns -1 with a message when it cannot be done. */
int model_plan_stages(const model_config *cfg, int pp, const char *spec, int T, int *layers_per_stage, char *err,
                      size_t errlen);

/* The current set's micro-batch: tokens and (NULL: none) targets, [B*T]
 * each, checked against the vocabulary on the host and uploaded. */
void model_set_batch(model *m, const int32_t *tokens, const int32_t *targets);

/* model_set_batch, then the forward; returns the mean loss over B*T targets
 * on the stage with the head (NULL targets: logits only), 0 elsewhere. The
 * loss is read back (a synchronisation): evaluation and tests. */
float model_forward(model *m, const int32_t *tokens, const int32_t *targets, int B, int T);
/* The forward of a training micro-batch already set (model_set_batch)
 * whose backward will use dloss per token = scale. Its mean loss is added
 * to the loss sum (model_loss_sum), not read back. On the stage with the
 * head (tp = 1) the cross-entropy computes the losses and d loss / d logits
 * together, in place, while each row of logits is in cache (max, exp and
 * sum, scale: three passes over a row where the forward's loss and the
 * backward's gradient made five). The same operations as model_forward
 * followed by model_backward, so the same bits. */
void model_forward_train(model *m, int B, int T, float scale);
/* Backward of the current set's last forward; grads accumulate with dloss
 * per token = scale. */
void model_backward(model *m, float scale);
/* During the following backwards, fn(ctx, from) is called each time the
 * gradients [from, numel) of the arena are complete for the step (the
 * backward runs the registry's order in reverse: after the head, each
 * layer, the embedding). Set it for the step's last backward only (earlier
 * ones still accumulate); NULL removes it. */
void model_set_grads_hook(model *m, model_grads_ready_fn fn, void *ctx);

void model_zero_grads(model *m);
/* The training loss sum (double, backend memory) and its reset. */
static inline double *model_loss_sum(model *m) { return &m->stats[0]; }
void model_loss_reset(model *m);

/* Sum of squared gradients over this rank's optimizer segments (the ZeRO-1
 * chunk, or everything), counting tp-replicated tensors on tp rank 0 only:
 * summed over the tp group (and ZeRO-1 replicas) it is the squared norm of
 * the global gradient. Written to the returned double of backend memory. */
double *model_grad_sumsq(model *m);
/* Both statistics read back: [0] loss sum, [1] gradient sum of squares. */
void model_download_stats(model *m, double out[2]);

/* The optimizer step over this rank's segments: AdamW with lr, step t (from
 * 1) and the gradient clip scale; the working copy follows. */
void model_adamw(model *m, adamw_hparams hp, int t, float grad_scale);
/* The same over the segments of plan p: model_optimizer_plan's of
 * registry tensors [t0, t1) (m->plan is all of them), freed with the
 * backend's optim_plan_free. */
boost_optim_plan *model_optimizer_plan(model *m, int t0, int t1);
void model_adamw_plan(model *m, const boost_optim_plan *p, adamw_hparams hp, int t, float grad_scale);

int64_t model_num_params(const model *m);
double model_flops_per_token(const model_config *cfg, int T);

#endif
