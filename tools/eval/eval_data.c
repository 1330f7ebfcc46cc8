/* boost-eval's token data and token byte lengths (eval_data.h). */
#include "eval_data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "util.h"

#define LLMC_TOKENIZER_MAGIC 20240328u

/* The tokenizer of a single shard file, from its header ("" for a list or
 * a directory of shards, or an unreadable header: data_open reports it). */
void eval_shard_tokenizer(const char *path, char *out, size_t outlen) {
  struct stat st;
  data_shard_info info;
  boost_status e = {0};
  out[0] = 0;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || data_shard_info_read(path, &info, &e) != 0) return;
  if (info.format == DATA_FORMAT_BOOST) boost_msgf(out, outlen, "%s", info.tokenizer);
  else boost_msgf(out, outlen, "%s", info.token_bytes == 2 ? "gpt2" : "llama3");
}

int eval_data_open(const char *path, int val, const train_config *cfg, int T, int vocab, eval_data *d, boost_status *err) {
  memset(d, 0, sizeof *d);
  const int separate = val && cfg->data.val[0];
  const char *file = path ? path : !val ? NULL : separate ? cfg->data.val : cfg->data.train;
  if (!file || !file[0]) return boost_err(err, "the stored config names no training data (data.train): give --data FILE");
  if (val && !separate && cfg->data.val_fraction <= 0)
    return boost_err(err, "the run had no validation split (data.val empty, data.val_fraction = 0): give --data FILE without --val");
  boost_status e = {0};
  if (data_open(file, &d->src, &e) != 0) return boost_err(err, "%s", e.msg);
  data_split rest;
  const double fraction = val && !separate ? cfg->data.val_fraction : 0.0;
  const int rc = fraction > 0 ? data_split_make(d->src, fraction, T, &rest, &d->split, &e)
                              : data_split_make(d->src, 0.0, T, &d->split, NULL, &e);
  if (rc != 0) {
    eval_data_close(d);
    return boost_err(err, "%s", e.msg);
  }
  if (data_vocab_size(d->src) > vocab) {
    const int v = data_vocab_size(d->src);
    eval_data_close(d);
    return boost_err(err, "%s: the data's vocabulary (%d) exceeds the model's (%d)", file, v, vocab);
  }
  eval_shard_tokenizer(file, d->tokenizer, sizeof d->tokenizer);
  if (fraction > 0) boost_msgf(d->what, sizeof d->what, "%s, its last %g (validation split)", file, fraction);
  else boost_msgf(d->what, sizeof d->what, "%s%s", file, val ? " (validation data)" : "");
  return 0;
}

void eval_data_close(eval_data *d) {
  if (d->src) data_close(d->src);
  memset(d, 0, sizeof *d);
}

static uint32_t le32(const unsigned char *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

int eval_token_bytes(const char *path, int **len, int *vocab, boost_status *err) {
  *len = NULL, *vocab = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return boost_err(err, "%s: %s", path, strerror(errno));
  unsigned char hdr[1024];
  int rc = 0;
  if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr || le32(hdr) != LLMC_TOKENIZER_MAGIC)
    rc = boost_err(err, "%s: not an llm.c tokenizer file (gpt2_tokenizer.bin: magic %u)", path, LLMC_TOKENIZER_MAGIC);
  else if (le32(hdr + 4) != 1 && le32(hdr + 4) != 2)
    rc = boost_err(err, "%s: llm.c tokenizer version %u (this reader knows 1 and 2)", path, le32(hdr + 4));
  else if (le32(hdr + 8) < 1 || le32(hdr + 8) > (1u << 24))
    rc = boost_err(err, "%s: implausible vocabulary size %u", path, le32(hdr + 8));
  if (rc == 0) {
    *vocab = (int)le32(hdr + 8);
    *len = boost_calloc((size_t)*vocab, sizeof **len);
    unsigned char buf[256];
    for (int i = 0; i < *vocab && rc == 0; i++) {
      const int n = fgetc(f);
      if (n == EOF || n == 0 || fread(buf, 1, (size_t)n, f) != (size_t)n)
        rc = boost_err(err, "%s: truncated at token %d of %d", path, i, *vocab);
      else (*len)[i] = n;
    }
  }
  /* The end-of-text token stands for no text (version 2 names it; GPT-2's is 50256). */
  const uint32_t eot = le32(hdr + 4) == 2 ? le32(hdr + 12) : 50256u;
  if (rc == 0 && eot < (uint32_t)*vocab) (*len)[eot] = 0;
  fclose(f);
  if (rc != 0) {
    boost_free(*len);
    *len = NULL;
  }
  return rc;
}

int eval_target_bytes(const eval_batches *p, const int *len, int vocab, int64_t *bytes, int64_t *tokens, boost_status *err) {
  const int64_t n = data_split_num_samples(p->split);
  int32_t *in = boost_calloc((size_t)p->T, sizeof *in), *tg = boost_calloc((size_t)p->T, sizeof *tg);
  *bytes = *tokens = 0;
  int rc = 0;
  for (int64_t b = 0; b < p->batches && rc == 0; b++)
    for (int i = 0; i < p->B && rc == 0; i++) {
      if (!p->wrap && b * p->B + i >= n) break;
      data_get_window(p->split, (b * p->B + i) % n, in, tg);
      for (int t = 0; t < p->T; t++) {
        if (tg[t] >= vocab) {
          rc = boost_err(err, "token %d is outside the tokenizer's %d tokens", tg[t], vocab);
          break;
        }
        *bytes += len[tg[t]];
      }
      *tokens += p->T;
    }
  boost_free(in);
  boost_free(tg);
  return rc;
}
