/* Generation on a whole model (tp = 1, every layer on this process): a KV
 * cache in backend memory and the decode step that extends it by one
 * token per sequence, and the recomputation of a whole sequence that it
 * must agree with (logits within rounding, the same greedy tokens).
 *
 * A cache runs over a model's configuration and weights (not copied: the
 * model must outlive it) and owns only what a token needs: an activation state of
 * one position's activations, the caches of k and v per layer ([B, max_T,
 * d_qkv] each, act type), RoPE tables of max_T positions and the float
 * logits. The model may be a checkpoint's weights or the trainer's own (the
 * training log's samples): the cache's activation states are its own, and nothing
 * here can reach gradients or moments (no training state is included). */
#ifndef BOOST_MODEL_DECODE_H
#define BOOST_MODEL_DECODE_H

#include <stdint.h>

#include "model.h"

typedef struct {
  const model *m; /* the layout and weights it runs */
  model_acts acts; /* one position's activations */
  int B, max_T;  /* sequences, positions the cache holds */
  int pos;       /* positions cached so far (the next token's position) */
  void *arena;   /* backend memory: caches, RoPE tables, float logits */
  boost_act *k_cache, *v_cache;
  float *rope_cos, *rope_sin, *logits;
  model_acts full; /* model_full_logits' and model_prefill's (allocated on use) */
} model_kv_cache;

/* Whether m can decode: tp = 1 and every layer, the embedding and the head
 * on this process. Returns -1 with one line in err otherwise, or when
 * max_T is outside [1, model.seq_len]. */
int model_kv_cache_init(model_kv_cache *kv, const model *m, int B, int max_T, boost_status *err);
void model_kv_cache_free(model_kv_cache *kv);
/* Forget every cached position (the next step is position 0). */
static inline void model_kv_cache_reset(model_kv_cache *kv) { kv->pos = 0; }

/* One decode step: tokens [B] (host, checked against the vocabulary) at
 * position kv->pos; logits [B, vocab] (host floats) of the next token;
 * kv->pos advances. Requires kv->pos < max_T. */
void model_decode_step(model_kv_cache *kv, const int32_t *tokens, float *logits);

/* A prompt in one forward: tokens [B, T] (host, checked) through the
 * embedding and the layers as in training (causal attention over the T
 * positions, the GEMMs over all T rows at once), their rotated k and v into
 * the cache's positions 0..T-1, kv->pos = T; no logits (the next step reads
 * the prompt's last token, or prefill stops one short of it). Requires an
 * empty cache (kv->pos = 0) and 1 <= T <= max_T. The same keys and values as
 * T decode steps within rounding; the forward's activations are freed after. */
void model_prefill(model_kv_cache *kv, const int32_t *tokens, int T);

/* Without the cache: the whole sequence tokens[0..T) of one sequence
 * recomputed (causal attention over T positions) and the logits of its
 * last position into logits [vocab] (host floats). */
void model_full_logits(model_kv_cache *kv, const int32_t *tokens, int T, float *logits);

#endif
