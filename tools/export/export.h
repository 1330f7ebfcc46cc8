/* boost-export internals: the plan (which Hugging Face tensor comes from
 * which checkpoint dataset, and how), the safetensors writer that streams
 * it one source tensor at a time, the JSON and tokenizer files, the Python
 * files of the CoLA remote code, and the output folder that appears only
 * when complete. docs/EXPORT.md describes the tool. */
#ifndef BOOST_EXPORT_H
#define BOOST_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "ckpt_reader.h"
#include "status.h"

#define EXP_ERR 1024

/* One output tensor: rows [slice] of source dataset /model/<src> (slice -1:
 * the whole dataset), its rows permuted from RoPE's interleaved pairs to
 * Hugging Face's rotate-half order when rope_heads > 0. */
typedef struct {
  char name[128];
  char src[96];
  int slice;
  int rope_heads;
  int ndim;
  int64_t shape[2];
  int shard;            /* 0-based file it goes to */
  uint64_t begin, end;  /* byte offsets in that file's data section */
} exp_tensor;

typedef enum { EXP_LLAMA = 0, EXP_COLA = 1 } exp_kind;
typedef enum { EXP_F32 = 0, EXP_BF16 = 1 } exp_dtype;
typedef enum { TOK_NONE = 0, TOK_BYTE, TOK_GPT2, TOK_BPE } exp_tokenizer;
struct bpe_tokenizer;

typedef struct {
  exp_kind kind;
  exp_dtype dtype;
  exp_tokenizer tokenizer;
  int eot;               /* end-of-text id, -1 when unknown */
  struct bpe_tokenizer *bpe; /* TOK_BPE: the checkpoint's (owned) */
  model_config m;
  exp_tensor *t;
  int n, cap;
  int shards;
  uint64_t max_shard_bytes;
  uint64_t total_bytes;  /* tensor data, all shards */
  double parameters;
} exp_plan;

/* The tensors of the model cfg describes, in file order (export_plan.c). */
int exp_plan_build(exp_plan *p, const model_config *m, boost_status *err);
/* Every source the plan reads exists in the checkpoint with the shape the
 * config implies (one line naming the first that does not). */
int exp_plan_check(const exp_plan *p, const ckr_ckpt *c, boost_status *err);
/* Assigns shards and byte offsets under p->max_shard_bytes. */
void exp_plan_layout(exp_plan *p);
void exp_plan_free(exp_plan *p);
/* The Hugging Face name of a shard file ("model.safetensors", or
 * "model-00001-of-00003.safetensors"). */
void exp_shard_name(const exp_plan *p, int shard, char *out, size_t outlen);

/* Writes every shard (and the index when sharded) into dir, reading each
 * source dataset once; progress on stderr unless quiet (export_st.c). */
int exp_write_tensors(const exp_plan *p, const ckr_ckpt *c, const char *dir, int quiet, boost_status *err);

/* config.json, generation_config.json, the tokenizer files, the remote
 * code (CoLA) and a README.md (export_files.c). */
int exp_write_files(const exp_plan *p, const ckr_ckpt *c, const char *dir, boost_status *err);
/* n bytes to fd (EINTR retried); errors name file. */
int exp_write_all(int fd, const void *buf, size_t n, const char *file, boost_status *err);
/* A whole file written into dir (created new, synced). */
int exp_write_file(const char *dir, const char *name, const void *buf, size_t n, boost_status *err);

/* The output folder (export_dir.c): DIR must not exist; everything is
 * written into a temporary sibling that a stop signal or a failure
 * removes, and renamed to DIR at the end (never replacing anything). */
int exp_dir_begin(const char *dir, char *tmp, size_t tmplen, boost_status *err);
int exp_dir_track(const char *name); /* a file created in the temporary folder */
int exp_dir_commit(const char *tmp, const char *dir, boost_status *err);
void exp_dir_abort(const char *tmp);

/* The CoLA remote code, embedded at build time from tools/export/hf/ (generated
 * export_hf_files.c). */
typedef struct {
  const char *name;
  const unsigned char *data;
  size_t size;
} exp_embedded;
extern const exp_embedded exp_hf_files[];
extern const int exp_hf_nfiles;

#endif
