/* Losses of a checkpoint's model on token windows and on the stored batch
 * (eval_loss.h). */
#include "eval_loss.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util.h"

static int batch_rows(const eval_batches *p, int64_t b) {
  if (p->wrap) return p->B;
  const int64_t left = data_split_num_samples(p->split) - b * p->B;
  return left < p->B ? (int)left : p->B;
}

void eval_run_batches(const model *m, model_acts *r, const eval_batches *p, int64_t first, int64_t stride, double *mean, double *weight,
                      void (*tick)(void *), void *tick_ctx) {
  const int64_t n = data_split_num_samples(p->split);
  int32_t *in = boost_calloc((size_t)p->B * p->T, sizeof *in), *tg = boost_calloc((size_t)p->B * p->T, sizeof *tg);
  for (int64_t b = first; b < p->batches; b += stride) {
    const int rows = batch_rows(p, b);
    for (int i = 0; i < rows; i++)
      data_get_window(p->split, (b * p->B + i) % n, in + (size_t)i * p->T, tg + (size_t)i * p->T);
    model_alloc_acts(m, r, rows, p->T, 1, RECOMPUTE_NONE); /* a no-op unless the shape changes (the last batch) */
    mean[b] = model_forward(m, r, in, tg, rows, p->T);
    weight[b] = (double)rows / p->B;
    if (tick) tick(tick_ctx);
  }
  boost_free(in);
  boost_free(tg);
}

double eval_combine(const double *mean, const double *weight, int64_t n) {
  double sum = 0.0, w = 0.0;
  for (int64_t b = 0; b < n; b++) {
    sum += weight[b] * mean[b]; /* 1.0 * mean: the mean itself */
    w += weight[b];
  }
  return w > 0 ? sum / w : NAN;
}

void eval_token_losses(const model *m, const model_acts *r, float *out, size_t n) {
  BOOST_ASSERT(n <= (size_t)r->B * r->T);
  m->be->mem->download(m->be, out, r->cur->losses, n * sizeof *out);
}

int eval_stored_batch(const ckr_ckpt *c, const model *m, model_acts *r, double *loss, int64_t *tokens,
                      boost_status *err) {
  const ckr_dset *d = ckr_find(c, "/activations/tokens");
  if (!d) return boost_err(err, "%s stores no batch (/activations/tokens: the run had ckpt.activations=none)", c->path);
  if (d->ndim != 2 || strcmp(d->dtype, "int32") || d->dims[0] < 1 || d->dims[1] < 2 || d->dims[1] > (hsize_t)m->cfg.seq_len + 1)
    return boost_err(err, "%s: /activations/tokens is not an int32 [sequences, 2..%d] batch", c->path, m->cfg.seq_len + 1);
  boost_status e = {0};
  size_t n = 0, esz = 0;
  int32_t *tok = ckr_read(c, d, &n, &esz, &e);
  const int nseq = (int)d->dims[0], T = (int)d->dims[1];
  if (!tok || esz != sizeof(int32_t) || n != (size_t)nseq * T) {
    free(tok);
    return boost_err(err, "%s: /activations/tokens cannot be read: %.600s", c->path, e.msg);
  }
  for (size_t i = 0; i < n; i++)
    if (tok[i] < 0 || tok[i] >= m->cfg.vocab) {
      const int32_t bad = tok[i];
      free(tok);
      return boost_err(err, "%s: stored token %d is outside the model's vocabulary of %d", c->path, bad, m->cfg.vocab);
    }
  /* Positions 0..T-2 predict the next stored token; causal attention makes
   * their logits those of the whole stored sequence. */
  int32_t *in = boost_calloc((size_t)nseq * (T - 1), sizeof *in), *tg = boost_calloc((size_t)nseq * (T - 1), sizeof *tg);
  for (int s = 0; s < nseq; s++)
    for (int t = 0; t + 1 < T; t++) {
      in[(size_t)s * (T - 1) + t] = tok[(size_t)s * T + t];
      tg[(size_t)s * (T - 1) + t] = tok[(size_t)s * T + t + 1];
    }
  free(tok);
  model_alloc_acts(m, r, nseq, T - 1, 1, RECOMPUTE_NONE);
  *loss = model_forward(m, r, in, tg, nseq, T - 1);
  *tokens = (int64_t)nseq * (T - 1);
  boost_free(in);
  boost_free(tg);
  return 0;
}
