/* Multiple-choice accuracy on HellaSwag-layout JSONL (eval_choice.h). */
#include "eval_choice.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "data.h"
#include "eval_loss.h"
#include "util.h"

/* Appends the tokens of s: its bytes (byte-v1), or its BPE encoding (never
 * more tokens than bytes), through w. */
static int32_t *put_text(bpe_worker *w, int32_t *out, const char *s) {
  if (!w) {
    for (; *s; s++) *out++ = (unsigned char)*s;
    return out;
  }
  bpe_tokens enc = {0};
  if (bpe_encode(w, (const uint8_t *)s, strlen(s), &enc, NULL) == 0 && enc.n) memcpy(out, enc.v, enc.n * sizeof *out);
  out += enc.n; /* an engine failure encodes nothing: the ending then fails as empty */
  bpe_tokens_free(&enc);
  return out;
}

static int label_of(const cJSON *l, int *label) {
  if (cJSON_IsNumber(l) && l->valuedouble >= 0 && l->valuedouble <= 1e6 && l->valuedouble == (double)(int)l->valuedouble) {
    *label = (int)l->valuedouble;
    return 0;
  }
  if (!cJSON_IsString(l) || !l->valuestring[0]) return -1;
  char *end;
  errno = 0;
  const long v = strtol(l->valuestring, &end, 10);
  if (*end || errno || v < 0 || v > 1000000) return -1;
  *label = (int)v;
  return 0;
}

/* One line's object into an item; -1 with what is wrong in err. */
static int parse_item(const char *line, bpe_worker *w, int eot, int vocab, int seq_len, eval_choice_item *it,
                      boost_status *err) {
  memset(it, 0, sizeof *it);
  cJSON *o = cJSON_Parse(line);
  if (!o || !cJSON_IsObject(o)) {
    cJSON_Delete(o);
    return boost_err(err, "not a JSON object");
  }
  const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(o, "ctx");
  if (!ctx) ctx = cJSON_GetObjectItemCaseSensitive(o, "context");
  const cJSON *ends = cJSON_GetObjectItemCaseSensitive(o, "endings");
  const cJSON *lab = cJSON_GetObjectItemCaseSensitive(o, "label");
  int rc = 0;
  if (!cJSON_IsString(ctx)) rc = boost_err(err, "no string `ctx` (or `context`)");
  else if (!cJSON_IsArray(ends) || cJSON_GetArraySize(ends) < 2 || cJSON_GetArraySize(ends) > EVAL_CHOICE_MAX)
    rc = boost_err(err, "`endings` is not a list of 2 to %d strings", EVAL_CHOICE_MAX);
  else if (!lab || label_of(lab, &it->label) != 0) rc = boost_err(err, "`label` is not a whole number");
  else if (it->label >= cJSON_GetArraySize(ends))
    rc = boost_err(err, "`label` %d is not an index of the %d endings", it->label, cJSON_GetArraySize(ends));
  size_t total = rc == 0 ? strlen(ctx->valuestring) + 1 : 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, ends) {
    if (rc == 0 && (!cJSON_IsString(e) || !e->valuestring[0])) rc = boost_err(err, "an ending is not a non-empty string");
    if (rc == 0) total += strlen(e->valuestring) + 1;
  }
  if (rc == 0 && (!w && DATA_BYTE_EOT >= vocab)) rc = boost_err(err, "the model's vocabulary (%d) does not hold the byte tokenizer's 257 tokens", vocab);
  if (rc == 0) {
    it->n_endings = cJSON_GetArraySize(ends);
    it->end_len = boost_calloc((size_t)it->n_endings, sizeof *it->end_len);
    /* BPE: at most a token per byte, but a stray byte reads as U+FFFD's 3 */
    it->tokens = boost_calloc(w ? 3 * total : total, sizeof *it->tokens);
    int32_t *p = put_text(w, it->tokens, ctx->valuestring);
    if (p == it->tokens) *p++ = eot; /* an empty context: the start of a document */
    it->ctx_len = (int)(p - it->tokens);
    int k = 0;
    cJSON_ArrayForEach(e, ends) {
      char *joined = boost_calloc(strlen(e->valuestring) + 2, 1);
      joined[0] = ' ';
      strcpy(joined + 1, e->valuestring);
      int32_t *q = put_text(w, p, joined);
      boost_free(joined);
      it->end_len[k] = (int)(q - p);
      if (it->end_len[k++] > seq_len && rc == 0)
        rc = boost_err(err, "an ending of %d tokens does not fit the model's %d positions", (int)(q - p), seq_len);
      p = q;
    }
  }
  cJSON_Delete(o);
  return rc;
}

int eval_choice_load(const char *path, const bpe_tokenizer *bpe, int vocab, int seq_len, eval_choice_set *set,
                     boost_status *err) {
  memset(set, 0, sizeof *set);
  FILE *f = fopen(path, "r");
  bpe_worker *w = f && bpe ? bpe_worker_new(bpe) : NULL;
  if (!f) return boost_err(err, "%s: %s", path, strerror(errno));
  char *line = NULL;
  boost_status why = {0};
  size_t cap = 0, have = 0;
  ssize_t len;
  int rc = 0;
  for (long lineno = 1; rc == 0 && (len = getline(&line, &cap, f)) >= 0; lineno++) {
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
    if (strspn(line, " \t") == (size_t)len) continue;
    if ((size_t)len != strlen(line)) {
      rc = boost_err(err, "%s line %ld: holds a NUL byte (not JSONL text)", path, lineno);
      break;
    }
    if (set->n == (int64_t)have) {
      have = have ? 2 * have : 256;
      set->items = realloc(set->items, have * sizeof *set->items);
      BOOST_ASSERT(set->items);
    }
    if (parse_item(line, w, bpe ? bpe_eot(bpe) : DATA_BYTE_EOT, vocab, seq_len, &set->items[set->n], &why) != 0) {
      free(set->items[set->n].tokens);
      free(set->items[set->n].end_len);
      rc = boost_err(err, "%s line %ld: %s", path, lineno, why.msg);
    } else set->n++;
  }
  if (rc == 0 && ferror(f)) rc = boost_err(err, "%s: read error", path);
  if (rc == 0 && set->n == 0) rc = boost_err(err, "%s: no examples (expected one JSON object per line)", path);
  free(line);
  fclose(f);
  bpe_worker_free(w);
  if (rc != 0) eval_choice_free(set);
  return rc;
}

void eval_choice_free(eval_choice_set *set) {
  for (int64_t i = 0; i < set->n; i++) {
    free(set->items[i].tokens);
    free(set->items[i].end_len);
  }
  free(set->items);
  memset(set, 0, sizeof *set);
}

/* The log-likelihood of every ending of one item, ll[k], each row the
 * context's last tokens then the ending, scored in one forward. */
static void score_item(const model *m, model_acts *r, const eval_choice_item *it, double *ll) {
  const int E = it->n_endings, cap = m->cfg.seq_len + 1;
  int len[EVAL_CHOICE_MAX], off[EVAL_CHOICE_MAX], T = 1;
  BOOST_ASSERT(E <= EVAL_CHOICE_MAX);
  for (int k = 0, o = it->ctx_len; k < E; o += it->end_len[k++]) {
    off[k] = o;
    len[k] = it->ctx_len + it->end_len[k] < cap ? it->ctx_len + it->end_len[k] : cap;
    if (len[k] - 1 > T) T = len[k] - 1;
  }
  /* rows padded to a multiple of 32 positions (at most seq_len): fewer
   * shapes, so the activations are rarely reallocated; causal attention
   * keeps the padding out of the scored positions */
  T = (T + 31) / 32 * 32 < m->cfg.seq_len ? (T + 31) / 32 * 32 : m->cfg.seq_len;
  int32_t *in = boost_calloc((size_t)E * T, sizeof *in), *tg = boost_calloc((size_t)E * T, sizeof *tg);
  for (int k = 0; k < E; k++) {
    /* row = the last len[k] tokens of context + ending */
    const int from_ctx = len[k] - it->end_len[k];
    int32_t *row = boost_calloc((size_t)len[k], sizeof *row);
    memcpy(row, it->tokens + it->ctx_len - from_ctx, (size_t)from_ctx * sizeof *row);
    memcpy(row + from_ctx, it->tokens + off[k], (size_t)it->end_len[k] * sizeof *row);
    memcpy(in + (size_t)k * T, row, (size_t)(len[k] - 1) * sizeof *row);
    memcpy(tg + (size_t)k * T, row + 1, (size_t)(len[k] - 1) * sizeof *row);
    boost_free(row);
  }
  model_alloc_acts(m, r, E, T, 1, RECOMPUTE_NONE);
  model_forward(m, r, in, tg, E, T);
  float *loss = boost_calloc((size_t)E * T, sizeof *loss);
  eval_token_losses(m, r, loss, (size_t)E * T);
  for (int k = 0; k < E; k++) {
    double s = 0.0;
    for (int t = len[k] - 1 - it->end_len[k]; t < len[k] - 1; t++) s += loss[(size_t)k * T + t];
    ll[k] = -s;
  }
  boost_free(loss);
  boost_free(in);
  boost_free(tg);
}

void eval_choice_run(const model *m, model_acts *r, const eval_choice_set *set, int64_t first, int64_t stride, int *pred, int *pred_norm,
                     void (*tick)(void *), void *tick_ctx) {
  double ll[EVAL_CHOICE_MAX];
  for (int64_t i = first; i < set->n; i += stride) {
    const eval_choice_item *it = &set->items[i];
    score_item(m, r, it, ll);
    int best = 0, best_norm = 0;
    for (int k = 1; k < it->n_endings; k++) {
      if (ll[k] > ll[best]) best = k;
      if (ll[k] / it->end_len[k] > ll[best_norm] / it->end_len[best_norm]) best_norm = k;
    }
    pred[i] = best;
    pred_norm[i] = best_norm;
    if (tick) tick(tick_ctx);
  }
}
