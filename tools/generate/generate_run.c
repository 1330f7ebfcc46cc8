/* boost-generate's loop (generate.h): the prompt through the KV cache,
 * then one token at a time, streamed or collected for --json. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "generate.h"
#include "model_decode.h"
#include "util.h"

typedef struct {
  int32_t *seq; /* the prompt, then the new tokens */
  int n, np, max_T;
  const char *stop;
  double prefill_s, decode_s;
} gen_result;

/* Bytes of working weights a decode step reads: every parameter once,
 * except the embedding, of which it reads one row (unless tied to the head). */
static double weight_bytes_per_token(const model *m) {
  const double emb = m->cfg.tie_embeddings ? 0.0 : (double)(m->cfg.vocab - 1) * m->cfg.d_model;
  return ((double)model_num_params(m) - emb) * (double)boost_dtype_size(m->be->act_dtype);
}

static void print_json(const gen_options *o, const ckpt_model *cm, const gen_tokenizer *tok, const gen_result *r) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "checkpoint", o->ckpt);
  cJSON_AddStringToObject(j, "device", cm->be->name);
  cJSON_AddStringToObject(j, "precision", cm->be->act_dtype == BOOST_BF16 ? "bf16" : "fp32");
  cJSON_AddBoolToObject(j, "cache", !o->no_cache);
  cJSON_AddStringToObject(j, "tokenizer", tok->name[0] ? tok->name : tok->kind == GEN_TOK_GPT2 ? "gpt2" : tok->kind == GEN_TOK_BYTE ? "byte-v1" : "ids");
  cJSON_AddNumberToObject(j, "seed", (double)o->seed);
  cJSON_AddNumberToObject(j, "temperature", o->temperature);
  cJSON_AddNumberToObject(j, "top_k", o->top_k);
  cJSON_AddNumberToObject(j, "top_p", o->top_p);
  cJSON *pt = cJSON_AddArrayToObject(j, "prompt_tokens"), *nt = cJSON_AddArrayToObject(j, "tokens");
  for (int i = 0; i < r->np; i++) cJSON_AddItemToArray(pt, cJSON_CreateNumber(r->seq[i]));
  char *text = NULL;
  size_t len = 0, cap = 0;
  gen_tok_append(tok, -1, &text, &len, &cap);
  for (int i = r->np; i < r->n; i++) {
    cJSON_AddItemToArray(nt, cJSON_CreateNumber(r->seq[i]));
    gen_tok_append(tok, r->seq[i], &text, &len, &cap);
  }
  char *clean = gen_utf8_clean(text, len);
  cJSON_AddStringToObject(j, "text", clean);
  cJSON_AddStringToObject(j, "stop", r->stop);
  cJSON_AddNumberToObject(j, "prefill_s", r->prefill_s);
  cJSON_AddNumberToObject(j, "decode_s", r->decode_s);
  cJSON_AddNumberToObject(j, "tokens_per_s", r->decode_s > 0 ? (r->n - r->np) / r->decode_s : 0.0);
  cJSON_AddNumberToObject(j, "weight_bytes_per_token", weight_bytes_per_token(&cm->m));
  char *s = cJSON_PrintUnformatted(j);
  printf("%s\n", s);
  free(s);
  cJSON_Delete(j);
  boost_free(clean);
  boost_free(text);
}

/* The logits of the next token after seq[0..n): one decode step (the
 * cache holds positions 0..n-2), or the whole sequence recomputed. */
static void next_logits(model_kv_cache *kv, int no_cache, const int32_t *seq, int n, float *logits) {
  if (no_cache)
    model_full_logits(kv, seq, n, logits);
  else
    model_decode_step(kv, &seq[n - 1], logits);
}

static void generate(const gen_options *o, model_kv_cache *kv, const gen_tokenizer *tok, gen_result *r) {
  const int V = kv->m->cfg.vocab;
  float *logits = boost_calloc((size_t)V, sizeof *logits);
  int *idx = boost_calloc((size_t)V, sizeof *idx);
  double *prob = boost_calloc((size_t)V, sizeof *prob);
  gen_sampler smp;
  gen_sampler_init(&smp, o->temperature, o->top_k, o->top_p, o->seed);
  const double t0 = boost_now_s();
  if (!o->no_cache && r->np > 1) model_prefill(kv, r->seq, r->np - 1); /* the first step reads the last one */
  const double t1 = boost_now_s();
  r->stop = "max_new_tokens";
  while (r->n - r->np < o->max_new) {
    if (r->n > r->max_T) {
      r->stop = "context";
      break;
    }
    next_logits(kv, o->no_cache, r->seq, r->n, logits);
    const int id = gen_sample(&smp, logits, tok->vocab, idx, prob);
    if (id == tok->eot) {
      r->stop = "eot";
      break;
    }
    r->seq[r->n++] = id;
    if (!o->json) {
      gen_tok_write(tok, id, stdout);
      fflush(stdout);
    }
  }
  r->prefill_s = t1 - t0;
  r->decode_s = boost_now_s() - t1;
  boost_free(logits);
  boost_free(idx);
  boost_free(prob);
}

int gen_run(const gen_options *o, ckpt_model *cm, const gen_tokenizer *tok, const int32_t *prompt, int np) {
  const int seq_len = cm->cfg.model.seq_len;
  if (np > seq_len) {
    fprintf(stderr, "boost-generate: the prompt's %d tokens do not fit the model's context of %d (model.seq_len)\n",
            np, seq_len);
    return 1;
  }
  gen_result r = {.np = np, .n = np};
  r.max_T = np + o->max_new < seq_len ? np + o->max_new : seq_len;
  boost_status err = {0};
  model_kv_cache kv;
  if (model_kv_cache_init(&kv, &cm->m, 1, r.max_T, &err) != 0) {
    fprintf(stderr, "boost-generate: %s\n", err.msg);
    return 1;
  }
  r.seq = boost_calloc((size_t)r.max_T + 1, sizeof *r.seq);
  memcpy(r.seq, prompt, (size_t)np * sizeof *prompt);
  generate(o, &kv, tok, &r);
  const int made = r.n - r.np;
  if (o->json)
    print_json(o, cm, tok, &r);
  else
    printf("\n");
  fflush(stdout);
  fprintf(stderr, "boost-generate: %d new tokens in %.3f s: %.1f tokens/s (prompt: %d tokens in %.3f s; %s, %s, %s; "
                  "stop: %s)\n", made, r.decode_s, r.decode_s > 0 ? made / r.decode_s : 0.0, np, r.prefill_s,
          cm->be->name, cm->be->act_dtype == BOOST_BF16 ? "bf16" : "fp32", o->no_cache ? "no cache" : "KV cache",
          r.stop);
  boost_free(r.seq);
  model_kv_cache_free(&kv);
  return 0;
}
