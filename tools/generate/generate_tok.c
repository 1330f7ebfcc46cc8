/* Tokenizers and the sampler of boost-generate (generate.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "check.h"
#include "generate.h"
#include "util.h"

void gen_tok_byte(gen_tokenizer *t, int model_vocab) {
  memset(t, 0, sizeof *t);
  t->kind = GEN_TOK_BYTE;
  t->vocab = model_vocab < 257 ? model_vocab : 257;
  t->eot = model_vocab > 256 ? 256 : -1;
}

void gen_tok_ids(gen_tokenizer *t, int model_vocab) {
  memset(t, 0, sizeof *t);
  t->kind = GEN_TOK_IDS;
  t->vocab = model_vocab;
  t->eot = -1;
}

/* llm.c's tokenizer file: 256 uint32 of header (magic 20240328, version 1
 * or 2, vocab size, and in version 2 the end-of-text id), then per token
 * one length byte and that many bytes. */
#define GPT2_TOK_MAGIC 20240328u

int gen_tok_gpt2(gen_tokenizer *t, const char *path, int model_vocab, boost_status *err) {
  memset(t, 0, sizeof *t);
  FILE *f = fopen(path, "rb");
  if (!f) return boost_err(err, "--tokenizer %s: cannot be opened", path);
  uint32_t h[256];
  if (fread(h, sizeof h, 1, f) != 1 || h[0] != GPT2_TOK_MAGIC || (h[1] != 1 && h[1] != 2) || h[2] == 0 ||
      h[2] > (1u << 24)) {
    fclose(f);
    return boost_err(err, "--tokenizer %s: not an llm.c tokenizer file (gpt2_tokenizer.bin: magic %u, "
                                  "version 1 or 2)", path, GPT2_TOK_MAGIC);
  }
  const int n = (int)h[2];
  t->kind = GEN_TOK_GPT2;
  t->eot = h[1] == 2 ? (int)h[3] : 50256;
  t->piece = boost_calloc((size_t)n, sizeof *t->piece);
  t->len = boost_calloc((size_t)n, 1);
  t->vocab = n;
  for (int i = 0; i < n; i++) {
    unsigned char len;
    t->piece[i] = NULL;
    if (fread(&len, 1, 1, f) != 1 || len == 0) goto bad;
    t->piece[i] = boost_calloc((size_t)len + 1, 1);
    t->len[i] = len;
    if (fread(t->piece[i], 1, len, f) != len) goto bad;
  }
  if (fgetc(f) != EOF) goto bad;
  fclose(f);
  if (t->eot >= n) t->eot = -1;
  if (t->vocab > model_vocab) {
    gen_tok_free(t);
    return boost_err(err, "--tokenizer %s: %d tokens, more than the model's vocabulary of %d", path, n,
                     model_vocab);
  }
  return 0;
bad:
  fclose(f);
  gen_tok_free(t);
  return boost_err(err, "--tokenizer %s: truncated or malformed after its header (expected %d tokens, each "
                                "a length byte and its bytes)", path, n);
}

int gen_tok_bpe(gen_tokenizer *t, const bpe_tokenizer *bpe, int model_vocab, boost_status *err) {
  memset(t, 0, sizeof *t);
  const int n = (int)bpe_vocab_size(bpe);
  if (n > model_vocab)
    return boost_err(err, "the tokenizer has %d tokens, more than the model's vocabulary of %d", n, model_vocab);
  t->kind = GEN_TOK_GPT2;
  t->vocab = n;
  t->eot = bpe_eot(bpe);
  snprintf(t->name, sizeof t->name, "%s", bpe_name(bpe));
  t->piece = boost_calloc((size_t)n, sizeof *t->piece);
  t->len = boost_calloc((size_t)n, 1);
  for (int i = 0; i < n; i++) {
    size_t len = 0;
    const uint8_t *b = i == t->eot ? NULL : bpe_token_bytes(bpe, i, &len);
    if (len > 255) {
      gen_tok_free(t);
      return boost_err(err, "token %d is %zu bytes long: longer than this decoder takes (255)", i, len);
    }
    t->piece[i] = boost_calloc(len + 1, 1);
    if (len) memcpy(t->piece[i], b, len);
    t->len[i] = (unsigned char)len;
  }
  return 0;
}

void gen_tok_free(gen_tokenizer *t) {
  if (t->piece)
    for (int i = 0; i < t->vocab; i++) boost_free(t->piece[i]);
  boost_free(t->piece);
  boost_free(t->len);
  memset(t, 0, sizeof *t);
}

/* The bytes of id into out (at most 24); returns their count. */
static size_t token_bytes(const gen_tokenizer *t, int id, const char **p, char out[24]) {
  if (id == t->eot || id < 0) return 0;
  if (t->kind == GEN_TOK_BYTE && id < 256) {
    out[0] = (char)id;
    *p = out;
    return 1;
  }
  if (t->kind == GEN_TOK_GPT2 && id < t->vocab) {
    *p = t->piece[id];
    return t->len[id];
  }
  if (t->kind == GEN_TOK_IDS) {
    *p = out;
    return (size_t)snprintf(out, 24, "[%d]", id);
  }
  return 0;
}

void gen_tok_write(const gen_tokenizer *t, int id, FILE *f) {
  char tmp[24];
  const char *p = NULL;
  const size_t n = token_bytes(t, id, &p, tmp);
  if (n) fwrite(p, 1, n, f);
}

void gen_tok_append(const gen_tokenizer *t, int id, char **buf, size_t *len, size_t *cap) {
  char tmp[24];
  const char *p = NULL;
  const size_t n = token_bytes(t, id, &p, tmp);
  if (*len + n + 1 > *cap) {
    const size_t want = (*len + n + 1) * 2;
    char *b = boost_calloc(want, 1);
    if (*buf) memcpy(b, *buf, *len);
    boost_free(*buf);
    *buf = b;
    *cap = want;
  }
  if (n) memcpy(*buf + *len, p, n);
  *len += n;
  (*buf)[*len] = 0;
}

/* ---- sampling ---------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void gen_sampler_init(gen_sampler *s, float temperature, int top_k, float top_p, uint64_t seed) {
  s->temperature = temperature;
  s->top_k = top_k;
  s->top_p = top_p;
  s->state = seed;
}

static const double *sort_prob;
static int by_prob_desc(const void *a, const void *b) {
  const double pa = sort_prob[*(const int *)a], pb = sort_prob[*(const int *)b];
  if (pa != pb) return pa < pb ? 1 : -1;
  return *(const int *)a - *(const int *)b; /* ties: the smaller id first, so the order is total */
}

int gen_sample(gen_sampler *s, const float *logits, int n, int *idx, double *prob) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (logits[i] > logits[best]) best = i;
  if (s->temperature <= 0.0f) return best;
  double sum = 0.0;
  for (int i = 0; i < n; i++) {
    prob[i] = exp(((double)logits[i] - logits[best]) / s->temperature);
    sum += prob[i];
    idx[i] = i;
  }
  for (int i = 0; i < n; i++) prob[i] /= sum;
  sort_prob = prob;
  qsort(idx, (size_t)n, sizeof *idx, by_prob_desc);
  int keep = s->top_k > 0 && s->top_k < n ? s->top_k : n;
  double mass = 0.0;
  for (int i = 0; i < keep; i++) {
    mass += prob[idx[i]];
    if (s->top_p < 1.0f && mass >= s->top_p) {
      keep = i + 1;
      break;
    }
  }
  double kept = 0.0;
  for (int i = 0; i < keep; i++) kept += prob[idx[i]];
  const double u = (double)(splitmix64(&s->state) >> 11) * 0x1.0p-53 * kept;
  double acc = 0.0;
  for (int i = 0; i < keep; i++) {
    acc += prob[idx[i]];
    if (u < acc) return idx[i];
  }
  return idx[keep - 1];
}

/* ---- JSON text ----------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p (1..4), 0 when invalid. */
static int utf8_len(const unsigned char *p, size_t n) {
  if (p[0] < 0x80) return p[0] ? 1 : 0; /* a NUL would end the C string */
  const unsigned b = p[0];
  int len = b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
  if (!len || (size_t)len > n) return 0;
  for (int i = 1; i < len; i++)
    if ((p[i] & 0xc0) != 0x80) return 0;
  if (len == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0))) return 0; /* overlong, surrogate */
  if (len == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))) return 0;
  return len;
}

char *gen_utf8_clean(const char *s, size_t n) {
  char *out = boost_calloc(3 * n + 1, 1);
  size_t o = 0;
  const unsigned char *p = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    const int len = utf8_len(p + i, n - i);
    if (len) {
      memcpy(out + o, p + i, (size_t)len);
      o += (size_t)len;
      i += (size_t)len;
    } else {
      memcpy(out + o, "\xef\xbf\xbd", 3);
      o += 3;
      i++;
    }
  }
  return out;
}
