/* boost-generate: text from a checkpoint (docs/GENERATE.md). The model is
 * built whole on one process from the weights the file stores (any layout
 * wrote it; fp32 masters or a --bf16 export) and decodes on the backend
 * seam with its KV cache in backend memory (model_decode.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ckpt_model.h"
#include "generate.h"
#include "model_decode.h"
#include "tool_bpe.h"
#include "tool_ckpt.h"
#include "util.h"
#include "log.h"
#include "tool.h" /* tool_remote_args */

static int usage(FILE *f, int status) {
  fprintf(f,
          "usage: boost-generate [options] CKPT\n"
          "\n"
          "Generates text from checkpoint CKPT (a file, or a checkpoint directory: its `latest`),\n"
          "whatever layout wrote it, from its fp32 weights or a `boost-reshard --bf16` export.\n"
          "Tokens stream to stdout as they come; tokens/s goes to stderr at the end.\n"
          "  --prompt TEXT          the prompt as text, encoded with the model's tokenizer (byte-v1, or the\n"
          "                         BPE one the checkpoint records); an end-of-text token goes first, as\n"
          "                         before every document of the training data\n"
          "  --tokens ID,ID,...     the prompt as token ids (any tokenizer)\n"
          "                         (neither: generation starts from end-of-text alone)\n"
          "  --tokenizer FILE       a tiktoken rank file (encodes and decodes; must be the tokenizer the\n"
          "                         checkpoint records), or llm.c's gpt2_tokenizer.bin (decodes only)\n"
          "                         (default: the BPE tokenizer the checkpoint records, its rank file\n"
          "                         found in $BOOST_TOKENIZER_PATH or next to the checkpoint; else the\n"
          "                         byte tokenizer byte-v1 for vocabularies under 1024, else [id]s)\n"
          "  --max-new-tokens N     at most N new tokens (default 128); stops earlier at end-of-text\n"
          "                         or when the model's context (model.seq_len) is full\n"
          "  --temperature T        0: greedy; default 1\n"
          "  --top-k K              sample among the K most likely tokens (0: all; default 0)\n"
          "  --top-p P              sample within the smallest set of probability >= P (default 1)\n"
          "  --seed S               the random stream (default 1337): the same seed, the same text\n"
          "  --device cpu|cuda      where the model runs (default cpu; guarded: the test backend)\n"
          "  --precision fp32|bf16|auto   activations and working weights (default auto: the precision\n"
          "                         of the run that wrote CKPT)\n"
          "  --threads N            CPU threads (default: OpenMP's)\n"
          "  --no-cache             recompute the whole sequence for every token (tests: the cache\n"
          "                         must give the same tokens)\n"
          "  --json                 no streaming; one JSON object at the end: prompt_tokens, tokens\n"
          "                         (the new ones, without the end-of-text that stopped them), text,\n"
          "                         stop (eot, max_new_tokens, context), tokens_per_s, ...\n"
          "Exit status: 0 ok, 1 bad input or checkpoint, 2 usage.\n");
  return status;
}

static int parse_long(const char *name, const char *v, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  const long x = strtol(v, &end, 10);
  if (!*v || *end || errno || x < lo || x > hi) {
    fprintf(stderr, "boost-generate: %s '%s' is not an integer in [%ld, %ld]\n", name, v, lo, hi);
    return -1;
  }
  *out = x;
  return 0;
}

static int parse_float(const char *name, const char *v, double lo, double hi, float *out) {
  char *end;
  errno = 0;
  const double x = strtod(v, &end);
  if (!*v || *end || errno || !(x >= lo && x <= hi)) {
    fprintf(stderr, "boost-generate: %s '%s' is not a number in [%g, %g]\n", name, v, lo, hi);
    return -1;
  }
  *out = (float)x;
  return 0;
}

static int parse_args(int argc, char **argv, gen_options *o) {
  *o = (gen_options){.max_new = 128, .temperature = 1.0f, .top_p = 1.0f, .seed = 1337, .device = "cpu"};
  enum { O_PROMPT = 256, O_TOKENS, O_TOKENIZER, O_MAXNEW, O_TEMP, O_TOPK, O_TOPP, O_SEED, O_DEVICE, O_PREC,
         O_THREADS, O_NOCACHE, O_JSON, O_HELP };
  static const struct option opts[] = {
      {"prompt", 1, 0, O_PROMPT},      {"tokens", 1, 0, O_TOKENS},   {"tokenizer", 1, 0, O_TOKENIZER},
      {"max-new-tokens", 1, 0, O_MAXNEW}, {"temperature", 1, 0, O_TEMP}, {"top-k", 1, 0, O_TOPK},
      {"top-p", 1, 0, O_TOPP},         {"seed", 1, 0, O_SEED},       {"device", 1, 0, O_DEVICE},
      {"precision", 1, 0, O_PREC},     {"threads", 1, 0, O_THREADS}, {"no-cache", 0, 0, O_NOCACHE},
      {"json", 0, 0, O_JSON},          {"help", 0, 0, O_HELP},       {0, 0, 0, 0}};
  opterr = 0;
  int c;
  long v;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    int bad = 0;
    switch (c) {
    case O_PROMPT: o->prompt = optarg; break;
    case O_TOKENS: o->tokens = optarg; break;
    case O_TOKENIZER: o->tokenizer = optarg; break;
    case O_MAXNEW: bad = parse_long("--max-new-tokens", optarg, 0, 1 << 24, &v), o->max_new = (int)v; break;
    case O_TEMP: bad = parse_float("--temperature", optarg, 0.0, 1e6, &o->temperature); break;
    case O_TOPK: bad = parse_long("--top-k", optarg, 0, 1 << 24, &v), o->top_k = (int)v; break;
    case O_TOPP: bad = parse_float("--top-p", optarg, 1e-9, 1.0, &o->top_p); break;
    case O_SEED: bad = parse_long("--seed", optarg, 0, __LONG_MAX__, &v), o->seed = (uint64_t)v; break;
    case O_DEVICE: o->device = optarg; break;
    case O_PREC: o->precision = optarg; break;
    case O_THREADS: bad = parse_long("--threads", optarg, 1, 4096, &v), o->threads = (int)v; break;
    case O_NOCACHE: o->no_cache = 1; break;
    case O_JSON: o->json = 1; break;
    case 'h':
    case O_HELP: exit(usage(stdout, 0));
    default:
      fprintf(stderr, "boost-generate: unknown option or missing value: %s (see --help)\n", argv[optind - 1]);
      return -1;
    }
    if (bad) return -1;
  }
  if (optind != argc - 1) {
    fprintf(stderr, "boost-generate: expected one checkpoint argument, got %d (see --help)\n", argc - optind);
    return -1;
  }
  o->ckpt = argv[optind];
  if (o->prompt && o->tokens) {
    fprintf(stderr, "boost-generate: --prompt and --tokens both give the prompt: choose one\n");
    return -1;
  }
  if (o->prompt && o->tokenizer && tool_is_llmc_tokenizer(o->tokenizer)) {
    fprintf(stderr, "boost-generate: --tokenizer %s is llm.c's decoding table, it cannot encode --prompt: give the "
                    "tiktoken rank file, or the prompt as --tokens\n", o->tokenizer);
    return -1;
  }
  return 0;
}

/* The prompt's tokens (n of them) into a new array; NULL with one line on stderr. */
static int32_t *prompt_tokens(const gen_options *o, const gen_tokenizer *tok, const bpe_tokenizer *bpe, int vocab,
                              int *n) {
  const size_t cap = (o->prompt ? strlen(o->prompt) : o->tokens ? strlen(o->tokens) : 0) + 2;
  int32_t *t = boost_calloc(cap, sizeof *t);
  *n = 0;
  if (o->tokens) {
    const char *p = o->tokens;
    while (*p) {
      char *end;
      errno = 0;
      const long id = strtol(p, &end, 10);
      if (end == p || errno || id < 0 || id >= vocab || (*end && *end != ',') || (*end == ',' && !end[1])) {
        fprintf(stderr, "boost-generate: --tokens '%.60s': expected token ids in [0, %d) separated by commas\n",
                o->tokens, vocab);
        boost_free(t);
        return NULL;
      }
      t[(*n)++] = (int32_t)id;
      p = *end ? end + 1 : end;
    }
    if (*n) return t;
  }
  if (tok->eot >= 0) t[(*n)++] = tok->eot;
  if (o->prompt && bpe) { /* never more tokens than bytes: cap holds them */
    bpe_worker *w = bpe_worker_new(bpe);
    bpe_tokens enc = {0};
    boost_status err = {0};
    const int rc = bpe_encode(w, (const uint8_t *)o->prompt, strlen(o->prompt), &enc, &err);
    bpe_worker_free(w);
    if (rc != 0) {
      fprintf(stderr, "boost-generate: --prompt: %s\n", err.msg);
      bpe_tokens_free(&enc);
      boost_free(t);
      return NULL;
    }
    if (enc.n) memcpy(t + *n, enc.v, enc.n * sizeof *t);
    *n += (int)enc.n;
    bpe_tokens_free(&enc);
  } else if (o->prompt) {
    for (const unsigned char *c = (const unsigned char *)o->prompt; *c; c++) t[(*n)++] = *c;
  }
  if (!*n) {
    fprintf(stderr, "boost-generate: an empty prompt needs an end-of-text token to start from, and this "
                    "tokenizer has none: give --tokens\n");
    boost_free(t);
    return NULL;
  }
  return t;
}

int main(int argc, char **argv) {
  boost_log_program("boost-generate"); /* first: every warning of the process carries this name */
  gen_options o;
  if (tool_remote_args("boost-generate", argc, argv)) return 1; /* s3:// checkpoints */
  if (parse_args(argc, argv, &o) != 0) return 2;
  boost_status err = {0};
  ckr_ckpt c;
  if (tool_open_or_say(o.ckpt, &c, 1) != 0) return 1;
  /* The checkpoint's BPE tokenizer (or --tokenizer's rank file), before the model's load. */
  bpe_tokenizer *bpe = NULL;
  const char *recorded = ckpt_meta_str(&c.meta, CKPT_META_F_tokenizer);
  if ((!o.tokenizer || !tool_is_llmc_tokenizer(o.tokenizer)) &&
      tool_bpe_open(recorded, o.tokenizer, o.ckpt, &bpe, &err) != 0) {
    fprintf(stderr, "boost-generate: %s%s\n", err.msg,
            o.tokenizer ? " (and not an llm.c tokenizer file, gpt2_tokenizer.bin, either)" : "");
    ckr_close(&c);
    return 1;
  }
  ckpt_model cm;
  const ckpt_model_options mo = {.device = o.device, .precision = o.precision, .threads = o.threads};
  if (ckpt_model_load(&c, &mo, &cm, &err) != 0) {
    fprintf(stderr, "boost-generate: %s\n", err.msg);
    ckr_close(&c);
    bpe_close(bpe);
    return 1;
  }
  ckr_close(&c);
  const int vocab = cm.cfg.model.vocab;
  gen_tokenizer tok;
  if (bpe || o.tokenizer) {
    if ((bpe ? gen_tok_bpe(&tok, bpe, vocab, &err) : gen_tok_gpt2(&tok, o.tokenizer, vocab, &err)) != 0) {
      fprintf(stderr, "boost-generate: %s\n", err.msg);
      ckpt_model_free(&cm);
      bpe_close(bpe);
      return 1;
    }
  } else if (vocab < 1024) {
    gen_tok_byte(&tok, vocab);
  } else {
    gen_tok_ids(&tok, vocab);
  }
  int np = 0, status = 1;
  int32_t *prompt = prompt_tokens(&o, &tok, bpe, vocab, &np);
  if (prompt) status = gen_run(&o, &cm, &tok, prompt, np);
  boost_free(prompt);
  gen_tok_free(&tok);
  ckpt_model_free(&cm);
  bpe_close(bpe);
  return status;
}
