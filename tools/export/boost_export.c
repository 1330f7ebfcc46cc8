/* boost-export --hf DIR CKPT: a checkpoint as a Hugging Face model folder
 * (docs/EXPORT.md). Serial and streaming: one source tensor in memory at a
 * time; DIR appears only when complete. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "data.h"
#include "export.h"
#include "tool_bpe.h"
#include "tool_ckpt.h"
#include "util.h"
#include "log.h"
#include "tool.h" /* tool_remote_args */

typedef struct {
  const char *dir, *ckpt, *dtype, *tokenizer, *shard_size;
  int json, quiet;
} options;

static int usage(FILE *f, int status) {
  fprintf(f,
          "usage: boost-export --hf DIR CKPT [--dtype fp32|bf16] [--max-shard-size SIZE]\n"
          "                    [--tokenizer auto|byte|gpt2|none|RANKS] [--json] [--quiet]\n"
          "\n"
          "Writes checkpoint CKPT (a file, or a checkpoint directory: its `latest`) as a new\n"
          "Hugging Face model folder DIR: model.safetensors (or shards and their index),\n"
          "config.json, generation_config.json, the tokenizer where it can be expressed, and,\n"
          "for CoLA (low-rank) models, the remote code (load with trust_remote_code=True).\n"
          "Full-rank models load as transformers' LlamaForCausalLM with no custom code.\n"
          "  --hf DIR            the folder to create (must not exist)\n"
          "  --dtype D           fp32 or bf16 (nearest-even, as boost-reshard --bf16);\n"
          "                      default: the checkpoint's (fp32, or bf16 for a --bf16 reshard)\n"
          "  --max-shard-size S  largest safetensors file, bytes with optional KB/MB/GB\n"
          "                      (powers of 1000, as transformers counts); default 5GB\n"
          "  --tokenizer T       auto (default: the BPE tokenizer the checkpoint records, its rank file\n"
          "                      found in $BOOST_TOKENIZER_PATH or next to the checkpoint; else from\n"
          "                      the training shard the stored config names), byte (byte-v1), gpt2\n"
          "                      (llm.c shards), none, or the checkpoint's tiktoken rank file\n"
          "                      (vocab.json and merges.txt derived from its ranks)\n"
          "  --json              one JSON summary on stdout\n"
          "  --quiet             no progress bar\n"
          "Memory: about the largest tensor of the checkpoint. Exit status: 0 ok, 1 bad input\n"
          "or checkpoint (nothing is left behind), 2 usage.\n");
  return status;
}

static int parse_args(int argc, char **argv, options *o) {
  *o = (options){.tokenizer = "auto", .shard_size = "5GB"};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char **val = !strcmp(a, "--hf")               ? &o->dir
                       : !strcmp(a, "--dtype")          ? &o->dtype
                       : !strcmp(a, "--max-shard-size") ? &o->shard_size
                       : !strcmp(a, "--tokenizer")      ? &o->tokenizer
                                                        : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout, 0), 1;
    if (!strcmp(a, "--json")) o->json = 1;
    else if (!strcmp(a, "--quiet")) o->quiet = 1;
    else if (val) {
      if (i + 1 >= argc) return fprintf(stderr, "boost-export: %s needs a value\n", a), -1;
      *val = argv[++i];
    } else if (a[0] == '-' && a[1]) return fprintf(stderr, "boost-export: unknown option %s (see --help)\n", a), -1;
    else if (o->ckpt) return fprintf(stderr, "boost-export: one checkpoint only (got %s and %s)\n", o->ckpt, a), -1;
    else o->ckpt = a;
  }
  if (!o->dir) return fprintf(stderr, "boost-export: --hf DIR is required (see --help)\n"), -1;
  if (!o->ckpt) return fprintf(stderr, "boost-export: no checkpoint given (see --help)\n"), -1;
  return 0;
}

/* "5GB", "500MB", "123": bytes (decimal units, as transformers counts). */
static int parse_size(const char *s, uint64_t *out) {
  char *end;
  const double v = strtod(s, &end);
  double mul = 1;
  if (!strcasecmp(end, "KB")) mul = 1e3;
  else if (!strcasecmp(end, "MB")) mul = 1e6;
  else if (!strcasecmp(end, "GB")) mul = 1e9;
  else if (*end) return -1;
  if (end == s || !(v * mul >= 1) || v * mul > 1e15) return -1;
  *out = (uint64_t)(v * mul);
  return 0;
}

/* The tokenizer, from --tokenizer or the header of the training shard the
 * stored config names (when it is still there). */
static int pick_tokenizer(const options *o, const ckr_ckpt *c, const train_config *cfg, exp_plan *p,
                          boost_status *err) {
  const char *t = o->tokenizer;
  p->tokenizer = TOK_NONE;
  p->eot = -1;
  const char *recorded = ckpt_meta_str(&c->meta, CKPT_META_F_tokenizer);
  const int keyword = !strcmp(t, "auto") || !strcmp(t, "byte") || !strcmp(t, "gpt2") || !strcmp(t, "none");
  if (!keyword && access(t, F_OK) != 0)
    return boost_err(err, "--tokenizer %s: no such file: expected auto, byte, gpt2 or none, or a tiktoken rank file", t);
  if (!keyword || (!strcmp(t, "auto") && recorded && !strncmp(recorded, "bpe-", 4))) {
    if (tool_bpe_open(recorded, keyword ? NULL : t, o->ckpt, &p->bpe, err) != 0) return -1;
    p->tokenizer = TOK_BPE;
    p->eot = bpe_eot(p->bpe);
    if ((int)bpe_vocab_size(p->bpe) > p->m.vocab)
      return boost_err(err, "the tokenizer has %u tokens, more than the model's vocabulary of %d",
                       bpe_vocab_size(p->bpe), p->m.vocab);
    return 0;
  }
  if (!strcmp(t, "auto")) {
    data_shard_info info;
    boost_status e = {0};
    if (data_shard_info_read(cfg->data.train, &info, &e) != 0) return 0;
    if (info.format == DATA_FORMAT_LLMC) t = "gpt2";
    else if (!strcmp(info.tokenizer, "byte-v1")) t = "byte";
    else return 0;
  }
  if (!strcmp(t, "byte")) p->tokenizer = TOK_BYTE, p->eot = 256;
  else if (!strcmp(t, "gpt2")) p->tokenizer = TOK_GPT2, p->eot = 50256;
  else if (strcmp(t, "none")) return boost_err(err, "--tokenizer %s: expected auto, byte, gpt2 or none, or a tiktoken rank file", t);
  if (p->eot >= p->m.vocab)
    return boost_err(err, "--tokenizer %s: its end-of-text id %d is beyond the model's vocab %d", t, p->eot, p->m.vocab);
  return 0;
}

/* Everything decided before the first byte is written: the model, dtype,
 * tokenizer and the tensors, checked against the file. */
static int make_plan(const options *o, const ckr_ckpt *c, exp_plan *p, boost_status *err) {
  const char *json = ckpt_meta_str(&c->meta, CKPT_META_F_config);
  const char *wd = ckpt_meta_str(&c->meta, CKPT_META_F_weights_dtype);
  const int bf16_weights = wd && !strcmp(wd, "bf16");
  train_config cfg;
  ckr_tensor *expected = NULL;
  boost_status e = {0};
  if (ckr_expected_tensors(json, &expected, &cfg, &e) < 0)
    return boost_err(err, "%s: stored config: %s", c->path, e.msg);
  free(expected);
  if (exp_plan_build(p, &cfg.model, err) != 0) return -1;
  p->dtype = bf16_weights ? EXP_BF16 : EXP_F32;
  if (o->dtype && !strcmp(o->dtype, "bf16")) p->dtype = EXP_BF16;
  else if (o->dtype && !strcmp(o->dtype, "fp32")) {
    if (bf16_weights)
      return boost_err(err, "%s holds bfloat16 weights (a boost-reshard --bf16 export): fp32 would only widen "
                       "them; export with --dtype bf16, or from the fp32 checkpoint", c->path);
    p->dtype = EXP_F32;
  } else if (o->dtype) return boost_err(err, "--dtype %s: expected fp32 or bf16", o->dtype);
  if (parse_size(o->shard_size, &p->max_shard_bytes) != 0)
    return boost_err(err, "--max-shard-size %s: expected a size such as 2GB, 500MB or 1000000", o->shard_size);
  if (pick_tokenizer(o, c, &cfg, p, err) != 0 || exp_plan_check(p, c, err) != 0) return -1;
  exp_plan_layout(p);
  return 0;
}

static void print_summary(const options *o, const exp_plan *p, const ckr_ckpt *c, double seconds) {
  const char *const tok[] = {"none", "byte-v1", "gpt2", p->bpe ? bpe_name(p->bpe) : "bpe"};
  const char *arch = p->kind == EXP_COLA ? "ColaForCausalLM" : "LlamaForCausalLM";
  const char *dtype = p->dtype == EXP_BF16 ? "bf16" : "fp32";
  if (!o->json) {
    printf("boost-export: %s -> %s: %s, %s, %d tensors (%.0f parameters), %.1f MB in %d file%s, tokenizer %s, %.1f s\n",
           c->path, o->dir, arch, dtype, p->n, p->parameters, (double)p->total_bytes / 1e6, p->shards,
           p->shards > 1 ? "s" : "", tok[p->tokenizer], seconds);
    return;
  }
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "checkpoint", c->path);
  cJSON_AddStringToObject(j, "dir", o->dir);
  cJSON_AddStringToObject(j, "architecture", arch);
  cJSON_AddStringToObject(j, "model_type", p->kind == EXP_COLA ? "cola" : "llama");
  cJSON_AddStringToObject(j, "dtype", dtype);
  cJSON_AddNumberToObject(j, "step", (double)c->meta.run.step);
  cJSON_AddNumberToObject(j, "tensors", p->n);
  cJSON_AddNumberToObject(j, "parameters", p->parameters);
  cJSON_AddNumberToObject(j, "bytes", (double)p->total_bytes);
  cJSON_AddNumberToObject(j, "shards", p->shards);
  cJSON_AddStringToObject(j, "tokenizer", tok[p->tokenizer]);
  cJSON_AddNumberToObject(j, "seconds", seconds);
  tool_print_json(j); /* frees j */
}

int main(int argc, char **argv) {
  boost_log_program("boost-export"); /* first: every warning of the process carries this name */
  if (tool_remote_args("boost-export", argc, argv)) return 1; /* s3:// checkpoints */
  options o;
  const int a = parse_args(argc, argv, &o);
  if (a != 0) return a > 0 ? 0 : 2;
  const double t0 = boost_now_s();
  ckr_ckpt c;
  exp_plan p = {0};
  boost_status err = {0};
  char tmp[4200];
  int rc = ckr_open(o.ckpt, &c, &err);
  if (rc == 0 && c.walk_failed)
    rc = boost_err(&err, "%s: damaged (the dataset list is incomplete): %s", c.path, c.walk_error);
  if (rc == 0) rc = make_plan(&o, &c, &p, &err);
  if (rc == 0) rc = exp_dir_begin(o.dir, tmp, sizeof tmp, &err);
  if (rc == 0) {
    rc = exp_write_tensors(&p, &c, tmp, o.quiet, &err);
    if (rc == 0) rc = exp_write_files(&p, &c, tmp, &err);
    if (rc == 0) rc = exp_dir_commit(tmp, o.dir, &err);
    if (rc != 0) exp_dir_abort(tmp);
  }
  if (rc == 0) print_summary(&o, &p, &c, boost_now_s() - t0);
  else fprintf(stderr, "boost-export: %s\n", err.msg);
  bpe_close(p.bpe);
  exp_plan_free(&p);
  ckr_close(&c);
  return rc == 0 ? 0 : 1;
}
