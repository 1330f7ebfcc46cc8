/* The token data boost-eval measures: a shard taken whole, or the
 * validation split a checkpoint's stored config names (the windows and the
 * rule the training run's `val` used), and what a token is worth in bytes
 * (for bits per byte). */
#ifndef BOOST_EVAL_DATA_H
#define BOOST_EVAL_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "data.h"
#include "eval_loss.h"
#include "status.h"

typedef struct {
  data_source *src;
  data_split split;
  char tokenizer[DATA_TOKENIZER_MAX + 8]; /* "byte-v1", "gpt2" or "llama3" (llm.c shards), "" when unknown */
  char what[CONFIG_STR + 96];             /* which windows, in words */
} eval_data;

/* val = 0: every window of `path` (seq_len T). val = 1: the validation
 * split of the stored config cfg: data.val whole when it is set, else the
 * last data.val_fraction of data.train; `path` (may be NULL) replaces the
 * file the config names. Checks the data's tokens against vocab. Returns 0,
 * or -1 with one line. */
int eval_data_open(const char *path, int val, const train_config *cfg, int T, int vocab, eval_data *d, boost_status *err);
void eval_data_close(eval_data *d);

/* The tokenizer a single shard file's header names ("byte-v1"; "gpt2" or
 * "llama3" for llm.c shards), "" when path is not one readable shard. */
void eval_shard_tokenizer(const char *path, char *out, size_t outlen);

/* Bytes each token stands for, from llm.c's tokenizer file
 * (gpt2_tokenizer.bin: magic 20240328, versions 1 and 2): *len[vocab],
 * 0 for the end-of-text token
 * (malloc'd). Returns 0, or -1 with one line. */
int eval_token_bytes(const char *path, int **len, int *vocab, boost_status *err);

/* The bytes the scored targets of the batches stand for (len from
 * eval_token_bytes), and the targets counted. Returns -1 with err when a
 * target is outside len's vocabulary. */
int eval_target_bytes(const eval_batches *p, const int *len, int vocab, int64_t *bytes, int64_t *tokens, boost_status *err);

#endif
