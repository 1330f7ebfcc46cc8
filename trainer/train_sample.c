/* The training log's samples (train_sample.h). */
#include "train_sample.h"

#include <stdint.h>

#include "check.h"
#include "model_decode.h"

static void print_token(FILE *f, int id, int bytes) {
  if (!bytes)
    fprintf(f, "[%d]", id);
  else if (id == '\n')
    fputs("\\n", f);
  else if (id == '\\')
    fputs("\\\\", f);
  else if (id >= 32 && id < 127)
    fputc(id, f);
  else
    fprintf(f, "\\x%02x", id);
}

void train_sample_print(const model *m, FILE *f) {
  const int V = m->cfg.vocab, bytes = V < 1024, eot = V > 256 ? 256 : 0;
  const int max_T = m->cfg.seq_len < TRAIN_SAMPLE_TOKENS + 1 ? m->cfg.seq_len : TRAIN_SAMPLE_TOKENS + 1;
  model_kv_cache kv;
  boost_status err = {0};
  if (model_kv_cache_init(&kv, m, 1, max_T, &err) != 0) {
    fprintf(f, "sample: none (%s)\n", err.msg);
    return;
  }
  float *logits = boost_calloc((size_t)V, sizeof *logits);
  const int limit = bytes && V > 257 ? 257 : V; /* byte-v1 data never holds ids past end-of-text */
  int32_t tok = eot;
  fputs("sample: ", f);
  for (int n = 1; n < max_T; n++) {
    model_decode_step(&kv, &tok, logits);
    int best = 0;
    for (int i = 1; i < limit; i++)
      if (logits[i] > logits[best]) best = i;
    if (best == eot && bytes) break;
    print_token(f, best, bytes && best < 256);
    tok = best;
  }
  fputc('\n', f);
  fflush(f);
  boost_free(logits);
  model_kv_cache_free(&kv);
}
