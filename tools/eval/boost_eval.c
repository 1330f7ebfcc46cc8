/* boost-eval: a checkpoint's model measured (docs/EVAL.md).
 *
 *   boost-eval CKPT --data FILE [--batches N]       loss, perplexity, bits per byte on a token shard
 *   boost-eval CKPT --val [--data FILE]             the training run's validation figure, reproduced
 *   boost-eval CKPT --choice FILE.jsonl             multiple-choice accuracy (HellaSwag layout)
 *   boost-eval CKPT --stored-batch                  the loss on the batch the checkpoint stores
 *
 * The model is the checkpoint's stored config built whole on one process
 * (ckpt_model.h). Under mpirun every rank builds it and takes every N-th
 * batch (or example); rank 0 gathers the per-batch results and sums them in
 * batch order, so N processes print the same figure as one.
 *
 * Exit status: 0 ok, 1 bad input or checkpoint, 2 usage. */
#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ckpt_h5.h"
#include "ckpt_model.h"
#include "eval_choice.h"
#include "eval_data.h"
#include "eval_loss.h"
#include "ckpt_reader.h"
#include "tool_ckpt.h"
#include "tool.h"
#include "tool_bpe.h"
#include "util.h"
#include "log.h"

typedef struct {
  const char *ckpt, *data, *choice, *tokenizer, *device, *precision;
  int val, stored, json, quiet, threads, B, T;
  int64_t batches; /* 0: the default */
  int rank, nranks;
} eval_opts;

static int usage(FILE *f, int status) {
  fprintf(f,
          "usage: boost-eval CKPT --data FILE [--batches N] [--batch-size B] [--seq-len T] [--tokenizer FILE]\n"
          "       boost-eval CKPT --val [--data FILE] [--batches N]\n"
          "       boost-eval CKPT --choice FILE.jsonl\n"
          "       boost-eval CKPT --stored-batch\n"
          "\n"
          "Measures checkpoint CKPT (a file, or a checkpoint directory: its `latest`).\n"
          "  --data FILE        token shard(s) made by boost-data, or llm.c .bin shards: the mean\n"
          "                     next-token loss over every window of seq-len tokens, perplexity and\n"
          "                     bits per byte\n"
          "  --val              the validation split of the stored config (data.val, else the last\n"
          "                     data.val_fraction of data.train; --data replaces the file), its\n"
          "                     train.val_batches batches of train.batch_size: the `val` figure the\n"
          "                     training log printed at the checkpoint's step\n"
          "  --batches N        N batches (windows in order, starting over at the end) instead of all\n"
          "  --batch-size B     sequences per batch (default: the stored train.batch_size)\n"
          "  --seq-len T        tokens per sequence (default and maximum: the stored model.seq_len)\n"
          "  --tokenizer FILE   llm.c's gpt2_tokenizer.bin: bytes per token, for bits per byte on\n"
          "                     GPT-2 shards (byte-level shards need none); with --choice, the\n"
          "                     tiktoken rank file of the checkpoint's BPE tokenizer (default: found\n"
          "                     in $BOOST_TOKENIZER_PATH or next to the checkpoint)\n"
          "  --choice FILE      multiple-choice accuracy (acc, acc_norm) on JSONL in HellaSwag's layout:\n"
          "                     {\"ctx\": ..., \"endings\": [...], \"label\": N} per line, encoded with the\n"
          "                     model's tokenizer (byte-v1 or the BPE one the checkpoint records)\n"
          "  --stored-batch     the mean next-token loss on the checkpoint's stored batch\n"
          "                     (/activations/tokens; each token's target is the next stored one)\n"
          "  --device D         cpu (default), guarded, cuda\n"
          "  --precision P      auto (default: the checkpoint's), fp32, bf16\n"
          "  --threads N        threads per process (default: OpenMP's)\n"
          "  --json             one JSON object: loss, perplexity, bits_per_byte, acc, acc_norm, counts\n"
          "  --quiet            no progress lines\n"
          "Under mpirun -n N the batches (or examples) are shared over N processes; the result is\n"
          "the same as one process's.\n"
          "Exit status: 0 ok, 1 bad input or checkpoint, 2 usage.\n");
  return status;
}

static int parse_int(const char *opt, const char *v, long lo, long hi, long *out, boost_status *err) {
  char *end;
  errno = 0;
  const long x = v ? strtol(v, &end, 10) : 0;
  if (!v || !*v || *end || errno || x < lo || x > hi)
    return boost_err(err, "%s wants a whole number from %ld to %ld, got '%s'", opt, lo, hi, v ? v : "");
  *out = x;
  return 0;
}

static int parse_args(int argc, char **argv, eval_opts *o, boost_status *err) {
  memset(o, 0, sizeof *o);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    long x = 0;
    const char **str = !strcmp(a, "--data") ? &o->data : !strcmp(a, "--choice") ? &o->choice
                     : !strcmp(a, "--tokenizer") ? &o->tokenizer : !strcmp(a, "--device") ? &o->device
                     : !strcmp(a, "--precision") ? &o->precision : NULL;
    if (str) {
      if (!v) return boost_err(err, "%s wants a value", a);
      if (*str) return boost_err(err, "%s given twice", a);
      *str = v, i++;
    } else if (!strcmp(a, "--batches") || !strcmp(a, "--batch-size") || !strcmp(a, "--seq-len") || !strcmp(a, "--threads")) {
      if (parse_int(a, v, 1, 1L << 30, &x, err) != 0) return -1;
      if (a[2] == 'b' && a[7] == 'e') o->batches = x;
      else if (a[2] == 'b') o->B = (int)x;
      else if (a[2] == 's') o->T = (int)x;
      else o->threads = (int)x;
      i++;
    } else if (!strcmp(a, "--val")) o->val = 1;
    else if (!strcmp(a, "--stored-batch")) o->stored = 1;
    else if (!strcmp(a, "--json")) o->json = 1;
    else if (!strcmp(a, "--quiet")) o->quiet = 1;
    else if (a[0] == '-') return boost_err(err, "unknown option '%s' (see --help)", a);
    else if (!o->ckpt) o->ckpt = a;
    else return boost_err(err, "unexpected argument '%s' (see --help)", a);
  }
  const int modes = (o->data && !o->val) + o->val + (o->choice != NULL) + o->stored;
  if (!o->ckpt) return boost_err(err, "no checkpoint given (see --help)");
  if (modes != 1) return boost_err(err, "give one of --data FILE, --val, --choice FILE, --stored-batch (see --help)");
  if ((o->choice || o->stored) && (o->batches || o->B || o->T))
    return boost_err(err, "--batches, --batch-size and --seq-len go with --data or --val");
  if (o->choice && o->tokenizer && tool_is_llmc_tokenizer(o->tokenizer))
    return boost_err(err, "--choice encodes text: llm.c's tokenizer file decodes, it cannot encode (give the tiktoken rank file)");
  return 0;
}

/* Progress on rank 0: a line per tenth once the run has taken 5 s. */
typedef struct {
  const eval_opts *o;
  int64_t done, total;
  double t0;
  int tenth;
  const char *what;
} progress;

static void tick(void *ctx) {
  progress *p = ctx;
  p->done += p->o->nranks; /* the other ranks move at the same pace */
  if (p->o->quiet || p->o->rank != 0 || p->total <= 0) return;
  const double el = boost_now_s() - p->t0;
  const int pct = (int)(100 * (p->done < p->total ? p->done : p->total) / p->total);
  if (pct / 10 > p->tenth && el >= 5) {
    fprintf(stderr, "boost-eval: %3d%% (%lld/%lld %s, %.0f s)\n", pct, (long long)(p->done < p->total ? p->done : p->total),
            (long long)p->total, p->what, el);
    p->tenth = pct / 10;
  }
}

/* Sums every rank's array onto rank 0: each entry is set by one rank and
 * zero elsewhere, so the sum is that value exactly. */
static void gather_f64(const eval_opts *o, double *v, int64_t n) {
  if (o->nranks > 1) MPI_Reduce(o->rank ? v : MPI_IN_PLACE, v, (int)n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
}
static void gather_int(const eval_opts *o, int *v, int64_t n) {
  if (o->nranks > 1) MPI_Reduce(o->rank ? v : MPI_IN_PLACE, v, (int)n, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
}

/* Bits per byte: loss / ln 2 for the byte tokenizer (one token, one byte;
 * the end-of-text token counts as one), the summed loss over the bytes the
 * targets decode to with --tokenizer, NaN when neither is known. */
static int bits_per_byte(const eval_data *d, const int *len, int vocab, const eval_batches *p, double loss, double *bpb,
                         boost_status *err) {
  *bpb = NAN;
  if (!len) {
    if (!strcmp(d->tokenizer, DATA_BYTE_TOKENIZER)) *bpb = loss / log(2.0);
    return 0;
  }
  int64_t bytes = 0, tokens = 0;
  const int rc = eval_target_bytes(p, len, vocab, &bytes, &tokens, err);
  if (rc == 0 && bytes > 0) *bpb = loss * (double)tokens / log(2.0) / (double)bytes;
  return rc;
}

/* What a mode found: the JSON object and the text lines, printed once the
 * whole run has succeeded (a failure prints its one line only). */
typedef struct {
  cJSON *json;
  char text[2048];
} result;

/* Bytes per token from the checkpoint's BPE tokenizer (tool_bpe.h): with
 * --tokenizer RANKS its failures are the run's; found by the recorded hash,
 * a miss leaves bits per byte unknown. */
static int bpe_token_lengths(const eval_opts *o, const ckr_ckpt *c, int **len, int *vocab, boost_status *err) {
  bpe_tokenizer *bpe = NULL;
  boost_status miss = {0};
  if (tool_bpe_open(ckpt_meta_str(&c->meta, CKPT_META_F_tokenizer), o->tokenizer, o->ckpt, &bpe,
                    o->tokenizer ? err : &miss) != 0) {
    if (!o->tokenizer) return 0;
    boost_status_append(err, " (and not an llm.c tokenizer file, gpt2_tokenizer.bin, either)");
    return -1;
  }
  if (!bpe) return 0;
  *vocab = (int)bpe_vocab_size(bpe);
  *len = boost_calloc((size_t)*vocab, sizeof **len);
  for (int i = 0; i < *vocab; i++) {
    size_t n = 0;
    (*len)[i] = i == bpe_eot(bpe) || !bpe_token_bytes(bpe, i, &n) ? 0 : (int)n; /* end-of-text: no text */
  }
  bpe_close(bpe);
  return 0;
}

static int run_loss(const eval_opts *o, const ckr_ckpt *c, ckpt_model *cm, result *res, boost_status *err) {
  cJSON *out = res->json;
  const train_config *cfg = &cm->cfg;
  eval_batches p = {.B = o->B ? o->B : cfg->train.batch_size, .T = o->T ? o->T : cfg->model.seq_len};
  if (p.T > cfg->model.seq_len) return boost_err(err, "--seq-len %d exceeds the model's %d", p.T, cfg->model.seq_len);
  int *len = NULL, vocab = 0; /* bytes per token (--tokenizer), read before the work */
  if (o->tokenizer && tool_is_llmc_tokenizer(o->tokenizer)) {
    if (eval_token_bytes(o->tokenizer, &len, &vocab, err) != 0) return -1;
  } else if (bpe_token_lengths(o, c, &len, &vocab, err) != 0) {
    return -1;
  }
  eval_data d;
  if (eval_data_open(o->data, o->val, cfg, p.T, cfg->model.vocab, &d, err) != 0) {
    boost_free(len);
    return -1;
  }
  const int64_t n = data_split_num_samples(&d.split);
  p.split = &d.split;
  p.wrap = o->val || o->batches;
  p.batches = o->batches ? o->batches : o->val ? cfg->train.report.val_batches : (n + p.B - 1) / p.B;
  if (p.batches <= 0) {
    boost_free(len);
    eval_data_close(&d);
    return boost_err(err, "the run evaluated no batches (train.val_batches = 0): give --batches N");
  }
  double *mean = boost_calloc((size_t)p.batches, sizeof *mean), *weight = boost_calloc((size_t)p.batches, sizeof *weight);
  progress pr = {o, 0, p.batches, boost_now_s(), 0, "batches"};
  eval_run_batches(&cm->m, &cm->acts, &p, o->rank, o->nranks, mean, weight, tick, &pr);
  gather_f64(o, mean, p.batches);
  gather_f64(o, weight, p.batches);
  int rc = 0;
  if (o->rank == 0) {
    /* rounded to float as the training log's figure is */
    const double loss = (float)eval_combine(mean, weight, p.batches), ppl = exp(loss);
    double wsum = 0;
    for (int64_t b = 0; b < p.batches; b++) wsum += weight[b];
    const int64_t tokens = (int64_t)llround(wsum * p.B) * p.T;
    double bpb = NAN;
    rc = bits_per_byte(&d, len, vocab, &p, loss, &bpb, err);
    cJSON_AddNumberToObject(out, "loss", loss);
    cJSON_AddNumberToObject(out, "perplexity", ppl);
    if (isnan(bpb)) cJSON_AddNullToObject(out, "bits_per_byte");
    else cJSON_AddNumberToObject(out, "bits_per_byte", bpb);
    cJSON_AddStringToObject(out, "data", d.what);
    cJSON_AddStringToObject(out, "tokenizer", o->tokenizer && tool_is_llmc_tokenizer(o->tokenizer) ? "gpt2 (--tokenizer)" : d.tokenizer[0] ? d.tokenizer : "unknown");
    cJSON_AddNumberToObject(out, "batches", (double)p.batches);
    cJSON_AddNumberToObject(out, "batch_size", p.B);
    cJSON_AddNumberToObject(out, "seq_len", p.T);
    cJSON_AddNumberToObject(out, "tokens", (double)tokens);
    if (rc == 0) {
      char b[64] = "unknown (give --tokenizer FILE)";
      if (!isnan(bpb)) snprintf(b, sizeof b, "%.4f", bpb);
      boost_msgf(res->text, sizeof res->text, "%s: %s\nloss %.4f | perplexity %.4f | bits per byte %s | %lld batches of %d x %d tokens (%lld scored)\n",
             o->val ? "validation" : "data", d.what, loss, ppl, b, (long long)p.batches, p.B, p.T, (long long)tokens);
    }
  }
  boost_free(mean);
  boost_free(weight);
  boost_free(len);
  eval_data_close(&d);
  return rc;
}

static int run_choice(const eval_opts *o, const ckr_ckpt *c, ckpt_model *cm, result *res, boost_status *err) {
  cJSON *out = res->json;
  /* The checkpoint's BPE tokenizer (or --tokenizer's), else byte-v1. */
  bpe_tokenizer *bpe = NULL;
  const char *recorded = ckpt_meta_str(&c->meta, CKPT_META_F_tokenizer);
  if (tool_bpe_open(recorded, o->tokenizer, o->ckpt, &bpe, err) != 0) return -1;
  char tok[DATA_TOKENIZER_MAX + 8];
  eval_shard_tokenizer(cm->cfg.data.train, tok, sizeof tok);
  if (!bpe && tok[0] && strcmp(tok, DATA_BYTE_TOKENIZER))
    return boost_err(err, "the model was trained on %s tokens (%s) and the checkpoint names no BPE tokenizer: give "
                          "its rank file with --tokenizer", tok, cm->cfg.data.train);
  if (bpe && (int)bpe_vocab_size(bpe) > cm->cfg.model.vocab) {
    const unsigned n = bpe_vocab_size(bpe);
    bpe_close(bpe);
    return boost_err(err, "the tokenizer has %u tokens, more than the model's vocabulary of %d", n, cm->cfg.model.vocab);
  }
  eval_choice_set set;
  const int loaded = eval_choice_load(o->choice, bpe, cm->cfg.model.vocab, cm->cfg.model.seq_len, &set, err);
  const char *unit = bpe ? "token" : "byte"; /* what acc_norm divides by */
  bpe_close(bpe);
  if (loaded != 0) return -1;
  int *pred = boost_calloc((size_t)set.n, sizeof *pred), *pred_norm = boost_calloc((size_t)set.n, sizeof *pred_norm);
  progress pr = {o, 0, set.n, boost_now_s(), 0, "examples"};
  eval_choice_run(&cm->m, &cm->acts, &set, o->rank, o->nranks, pred, pred_norm, tick, &pr);
  gather_int(o, pred, set.n);
  gather_int(o, pred_norm, set.n);
  if (o->rank == 0) {
    int64_t right = 0, right_norm = 0;
    for (int64_t i = 0; i < set.n; i++) {
      right += pred[i] == set.items[i].label;
      right_norm += pred_norm[i] == set.items[i].label;
    }
    const double acc = (double)right / set.n, acc_norm = (double)right_norm / set.n;
    cJSON_AddNumberToObject(out, "acc", acc);
    cJSON_AddNumberToObject(out, "acc_norm", acc_norm);
    cJSON_AddNumberToObject(out, "examples", (double)set.n);
    cJSON_AddNumberToObject(out, "correct", (double)right);
    cJSON_AddNumberToObject(out, "correct_norm", (double)right_norm);
    cJSON_AddStringToObject(out, "data", o->choice);
    boost_msgf(res->text, sizeof res->text, "%s: %lld examples\nacc %.4f (%lld right) | acc_norm %.4f (%lld right; log-likelihood per %s of the ending)\n",
             o->choice, (long long)set.n, acc, (long long)right, acc_norm, (long long)right_norm, unit);
  }
  boost_free(pred);
  boost_free(pred_norm);
  eval_choice_free(&set);
  return 0;
}

static int run_stored(const eval_opts *o, const ckr_ckpt *c, ckpt_model *cm, result *res, boost_status *err) {
  cJSON *out = res->json;
  if (o->rank != 0) return 0; /* one batch: rank 0 alone */
  double loss = 0;
  int64_t tokens = 0;
  if (eval_stored_batch(c, &cm->m, &cm->acts, &loss, &tokens, err) != 0) return -1;
  cJSON_AddNumberToObject(out, "loss", loss);
  cJSON_AddNumberToObject(out, "perplexity", exp(loss));
  cJSON_AddNumberToObject(out, "tokens", (double)tokens);
  cJSON_AddStringToObject(out, "data", "/activations/tokens (targets: the next stored token)");
  boost_msgf(res->text, sizeof res->text, "stored batch: loss %.4f | perplexity %.4f | %lld tokens scored\n", loss, exp(loss), (long long)tokens);
  return 0;
}

static int run(const eval_opts *o, boost_status *err) {
  ckr_ckpt c;
  if (!tool_agree(o->nranks, ckr_open(o->ckpt, &c, err) == 0, err)) return -1;
  ckpt_model cm;
  const ckpt_model_options mo = {.device = o->device, .precision = o->precision, .threads = o->threads};
  int rc = tool_agree(o->nranks, ckpt_model_load(&c, &mo, &cm, err) == 0, err) ? 0 : -1;
  if (rc == 0) {
    result res = {cJSON_CreateObject(), ""};
    cJSON_AddStringToObject(res.json, "checkpoint", c.path);
    cJSON_AddNumberToObject(res.json, "step", (double)c.meta.run.step);
    rc = o->stored ? run_stored(o, &c, &cm, &res, err)
       : o->choice ? run_choice(o, &c, &cm, &res, err)
                   : run_loss(o, &c, &cm, &res, err);
    if (!tool_agree(o->nranks, rc == 0, err)) rc = -1;
    if (rc == 0 && o->rank == 0 && !o->json)
      printf("checkpoint %s (step %lld, %s)\n%s", c.path, (long long)c.meta.run.step, cm.be->info, res.text);
    if (rc == 0 && o->rank == 0 && o->json) tool_print_json(res.json); /* and deletes it */
    else cJSON_Delete(res.json);
    ckpt_model_free(&cm);
  }
  ckr_close(&c);
  return rc;
}

int main(int argc, char **argv) {
  boost_log_program("boost-eval"); /* first: every warning of the process carries this name */
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(stdout, 0);
  int rank, nranks;
  const int mpi = tool_mpi_start(&argc, &argv, &rank, &nranks);
  if (tool_remote_args("boost-eval", argc, argv)) return 1; /* s3:// checkpoints */
  eval_opts o;
  boost_status err = {0};
  int rc = parse_args(argc, argv, &o, &err) != 0 ? 2 : 0;
  o.rank = rank, o.nranks = nranks;
  ckpt_h5_quiet();
  if (rc == 0) rc = run(&o, &err) == 0 ? 0 : 1;
  if (rc != 0 && rank == 0) fprintf(stderr, "boost-eval: %s\n", err.msg);
  if (mpi) MPI_Finalize();
  return rc;
}
