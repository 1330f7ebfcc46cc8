/* boost-generate's parts (docs/GENERATE.md): the tokenizers that turn
 * tokens into bytes (byte-v1; GPT-2 BPE from llm.c's gpt2_tokenizer.bin),
 * the sampler (greedy, temperature, top-k, top-p, seeded), and the
 * generation loop over a model's KV cache, shared by the program and the
 * training log's samples. */
#ifndef BOOST_GENERATE_H
#define BOOST_GENERATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ckpt_model.h"
#include "status.h"

/* ---- tokenizers (generate_tok.c) ---- */
typedef struct {
  int kind;          /* GEN_TOK_BYTE, GEN_TOK_GPT2, GEN_TOK_IDS */
  int vocab;         /* tokens it decodes (sampling stays below it) */
  int eot;           /* end-of-text id, -1 when none */
  char **piece;      /* GPT-2: the bytes of each token */
  unsigned char *len;
  char name[40];     /* a BPE tokenizer's (bpe-gpt2); "" for the others */
} gen_tokenizer;
enum { GEN_TOK_BYTE = 0, GEN_TOK_GPT2, GEN_TOK_IDS };

/* byte-v1 (docs/DATA_FORMAT.md): bytes 0..255, end-of-text 256. */
void gen_tok_byte(gen_tokenizer *t, int model_vocab);
/* No tokenizer: tokens print as [id]. */
void gen_tok_ids(gen_tokenizer *t, int model_vocab);
/* llm.c's gpt2_tokenizer.bin (versions 1 and 2). Returns -1 with one line
 * in err when the file is not one. */
int gen_tok_gpt2(gen_tokenizer *t, const char *path, int model_vocab, boost_status *err);
/* Decoding with a BPE tokenizer (bpe.h; encoding goes through it directly). */
struct bpe_tokenizer;
int gen_tok_bpe(gen_tokenizer *t, const struct bpe_tokenizer *bpe, int model_vocab, boost_status *err);
void gen_tok_free(gen_tokenizer *t);
/* The bytes of token id (nothing for end-of-text or ids it does not know). */
void gen_tok_write(const gen_tokenizer *t, int id, FILE *f);
/* Appends them to a growing buffer. */
void gen_tok_append(const gen_tokenizer *t, int id, char **buf, size_t *len, size_t *cap);

/* ---- sampling (generate_tok.c) ---- */
typedef struct {
  float temperature; /* 0: greedy (the first largest logit) */
  int top_k;         /* 0: all */
  float top_p;       /* 1: all */
  uint64_t state;    /* the random stream, from the seed */
} gen_sampler;
void gen_sampler_init(gen_sampler *s, float temperature, int top_k, float top_p, uint64_t seed);
/* A token among logits[0..n); scratch: n ints and n doubles of caller memory. */
int gen_sample(gen_sampler *s, const float *logits, int n, int *idx, double *prob);

/* ---- the program (boost_generate.c, generate_run.c) ---- */
typedef struct {
  const char *ckpt, *prompt, *tokens, *tokenizer, *device, *precision;
  int max_new, top_k, threads, no_cache, json;
  float temperature, top_p;
  uint64_t seed;
} gen_options;
/* Generates from prompt[0..np) on the loaded model: streams or prints the
 * JSON object; the figures on stderr. Returns the exit status. */
int gen_run(const gen_options *o, ckpt_model *cm, const gen_tokenizer *tok, const int32_t *prompt,
            int np);

/* A string that is valid UTF-8 (invalid bytes become U+FFFD), for JSON. */
char *gen_utf8_clean(const char *s, size_t n);

#endif
