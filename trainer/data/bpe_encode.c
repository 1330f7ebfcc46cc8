/* Encoding: the tokenizer's lifetime, the merge loop over one piece, the
 * per-thread cache of piece encodings and the OpenMP loop over documents. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "bpe_internal.h"
#include "check.h"

/* A tokenizer.json names its own pre-tokenizer: a different one asked for
 * by name or pattern is refused rather than silently ignored. */
static int open_json(bpe_tokenizer *t, const char *path, const char *pretok, const char *pattern, uint64_t *file_hash,
                     boost_status *err) {
  const char *own = NULL;
  if (bpe_json_read(t, path, file_hash, &own, err)) return -1;
  if (pattern)
    return boost_err(err, "%s: a tokenizer.json brings its pre-tokenizer (%s), give no pattern", path, own);
  if (pretok && strcmp(pretok, own))
    return boost_err(err, "%s: its pre-tokenizer is %s, not %s", path, own, pretok);
  snprintf(t->name, sizeof t->name, "bpe-%s", own);
  t->pattern = boost_strdup(bpe_pretokenizer_pattern(own));
  return 0;
}

int bpe_open(const char *path, const char *pretok, const char *pattern, bpe_tokenizer **out, boost_status *err) {
  *out = NULL;
  const bool json = bpe_file_is_json(path);
  if (json) {
    if (pretok && !bpe_pretokenizer_pattern(pretok))
      return boost_err(err, "unknown pre-tokenizer \"%s\" (known: gpt2, cl100k, llama3)", pretok);
  } else if (pretok) {
    pattern = bpe_pretokenizer_pattern(pretok);
    if (!pattern) return boost_err(err, "unknown pre-tokenizer \"%s\" (known: gpt2, cl100k, llama3)", pretok);
  } else if (!pattern) {
    return boost_err(err, "no pre-tokenizer: name one (gpt2, cl100k, llama3) or give a pattern");
  }
  bpe_tokenizer *t = boost_calloc(1, sizeof *t);
  uint64_t file_hash = 0;
  int rc;
  if (json) {
    rc = open_json(t, path, pretok, pattern, &file_hash, err);
  } else {
    snprintf(t->name, sizeof t->name, "bpe-%s", pretok ? pretok : "custom");
    t->pattern = boost_strdup(pattern);
    rc = bpe_ranks_read(t, path, &file_hash, err);
  }
  if (rc || bpe_pretok_compile(t, err)) {
    bpe_close(t);
    return -1;
  }
  t->hash = XXH3_64bits_withSeed(&file_hash, sizeof file_hash, XXH3_64bits(t->pattern, strlen(t->pattern)));
  *out = t;
  return 0;
}

void bpe_close(bpe_tokenizer *t) {
  if (!t) return;
  bpe_ranks_free(t);
  if (t->re) pcre2_code_free(t->re);
  boost_free(t->pattern);
  boost_free(t);
}

uint32_t bpe_vocab_size(const bpe_tokenizer *t) { return t->nranks + 1; }
int32_t bpe_eot(const bpe_tokenizer *t) { return (int32_t)t->nranks; }
const char *bpe_name(const bpe_tokenizer *t) { return t->name; }
uint64_t bpe_hash(const bpe_tokenizer *t) { return t->hash; }
const char *bpe_pattern(const bpe_tokenizer *t) { return t->pattern; }

void bpe_tokens_push(bpe_tokens *l, int32_t tok) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 256;
    l->v = boost_realloc(l->v, l->cap, sizeof *l->v);
  }
  l->v[l->n++] = tok;
}

void bpe_tokens_free(bpe_tokens *l) {
  free(l->v);
  l->v = NULL;
  l->n = l->cap = 0;
}

/* ---- the cache of piece encodings ---- */

/* Pieces up to CACHE_PIECE bytes that are not tokens themselves; cleared
 * whole when full (text repeats its pieces locally: a clear costs little). */
#define CACHE_SLOTS (1u << 16)
#define CACHE_PIECE 64
#define CACHE_ARENA (4u << 20)
/* Longer pieces merge through a heap (bpe_long.c): the scan is quadratic. */
#define LONG_PIECE 256

typedef struct {
  uint64_t hash;
  uint32_t off, len; /* piece bytes in `bytes` */
  uint32_t tok, ntok; /* tokens in `toks` */
} cache_slot;

struct bpe_worker {
  const bpe_tokenizer *t;
  bpe_matcher m;
  cache_slot *slots; /* len 0 = empty */
  uint32_t used;
  uint8_t *bytes;
  uint32_t nbytes;
  int32_t *toks;
  uint32_t ntoks;
  /* merge scratch: part starts and the rank of each part with the next */
  size_t scratch_cap;
  size_t *start;
  uint32_t *rank;
};

bpe_worker *bpe_worker_new(const bpe_tokenizer *t) {
  bpe_worker *w = boost_calloc(1, sizeof *w);
  w->t = t;
  bpe_matcher_init(&w->m, t);
  w->slots = boost_calloc(CACHE_SLOTS, sizeof *w->slots);
  w->bytes = boost_calloc(CACHE_ARENA, 1);
  w->toks = boost_calloc(CACHE_ARENA / 4, sizeof *w->toks);
  return w;
}

void bpe_worker_free(bpe_worker *w) {
  if (!w) return;
  bpe_matcher_free(&w->m);
  boost_free(w->slots);
  boost_free(w->bytes);
  boost_free(w->toks);
  free(w->start);
  free(w->rank);
  boost_free(w);
}

static cache_slot *cache_find(bpe_worker *w, const uint8_t *p, size_t n, uint64_t h) {
  for (uint32_t i = (uint32_t)h & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1)) {
    cache_slot *s = &w->slots[i];
    if (s->len == 0 || (s->hash == h && s->len == n && memcmp(w->bytes + s->off, p, n) == 0)) return s;
  }
}

static void cache_put(bpe_worker *w, const uint8_t *p, size_t n, uint64_t h, const int32_t *tok, size_t ntok) {
  if (w->used >= CACHE_SLOTS / 2 || w->nbytes + n > CACHE_ARENA || w->ntoks + ntok > CACHE_ARENA / 4) {
    memset(w->slots, 0, CACHE_SLOTS * sizeof *w->slots);
    w->used = w->nbytes = w->ntoks = 0;
  }
  cache_slot *s = cache_find(w, p, n, h);
  memcpy(w->bytes + w->nbytes, p, n);
  memcpy(w->toks + w->ntoks, tok, ntok * sizeof *tok);
  *s = (cache_slot){.hash = h, .off = w->nbytes, .len = (uint32_t)n, .tok = w->ntoks, .ntok = (uint32_t)ntok};
  w->nbytes += (uint32_t)n;
  w->ntoks += (uint32_t)ntok;
  w->used++;
}

/* ---- the merge loop ---- */

/* Rank of the bytes from part i to the end of part i + 1 (parts k: [start[k],
 * start[k + 1]); np parts, start[np] the piece's end). */
static uint32_t pair_rank(const bpe_tokenizer *t, const uint8_t *p, const size_t *start, size_t np, size_t i) {
  if (i + 1 >= np) return BPE_NO_RANK;
  return bpe_lookup(t, p + start[i], start[i + 2] - start[i]);
}

/* tiktoken's byte_pair_merge: merge the lowest-ranked adjacent pair (the
 * leftmost of equals) until no pair is a token; appends the parts' ranks. */
static void merge_piece(bpe_worker *w, const uint8_t *p, size_t n, bpe_tokens *out) {
  const bpe_tokenizer *t = w->t;
  if (n + 1 > w->scratch_cap) {
    w->scratch_cap = 2 * (n + 1);
    w->start = boost_realloc(w->start, w->scratch_cap, sizeof *w->start);
    w->rank = boost_realloc(w->rank, w->scratch_cap, sizeof *w->rank);
  }
  size_t *start = w->start;
  uint32_t *rank = w->rank;
  size_t np = n;
  for (size_t i = 0; i <= n; i++) start[i] = i;
  for (size_t i = 0; i < np; i++) rank[i] = pair_rank(t, p, start, np, i);
  for (;;) {
    uint32_t best = BPE_NO_RANK;
    size_t bi = 0;
    for (size_t i = 0; i + 1 < np; i++)
      if (rank[i] < best) {
        best = rank[i];
        bi = i;
      }
    if (best == BPE_NO_RANK) break;
    /* Part bi swallows part bi + 1. */
    memmove(start + bi + 1, start + bi + 2, (np - bi - 1) * sizeof *start);
    memmove(rank + bi + 1, rank + bi + 2, (np - bi - 2) * sizeof *rank);
    np--;
    rank[bi] = pair_rank(t, p, start, np, bi);
    if (bi > 0) rank[bi - 1] = pair_rank(t, p, start, np, bi - 1);
  }
  for (size_t i = 0; i < np; i++) {
    uint32_t r = bpe_lookup(t, p + start[i], start[i + 1] - start[i]);
    BOOST_ASSERT(r != BPE_NO_RANK); /* every byte is a token (bpe_ranks_read checks) */
    bpe_tokens_push(out, (int32_t)r);
  }
}

int bpe_last_merge(const bpe_tokenizer *t, int32_t id, size_t *split) {
  size_t n = 0;
  const uint8_t *p = id >= 0 && (uint32_t)id < t->nranks ? bpe_token_bytes(t, id, &n) : NULL;
  if (!p || n < 2) return -1;
  size_t *start = boost_calloc(n + 1, sizeof *start), np = n;
  for (size_t i = 0; i <= n; i++) start[i] = i;
  /* The same loop as merge_piece, blind to ranks from id on. */
  for (;;) {
    uint32_t best = BPE_NO_RANK;
    size_t bi = 0;
    for (size_t i = 0; i + 1 < np; i++) {
      uint32_t r = bpe_lookup(t, p + start[i], start[i + 2] - start[i]);
      if (r < (uint32_t)id && r < best) {
        best = r;
        bi = i;
      }
    }
    if (best == BPE_NO_RANK) break;
    memmove(start + bi + 1, start + bi + 2, (np - bi - 1) * sizeof *start);
    np--;
  }
  const int rc = np == 2 ? 0 : -1;
  if (rc == 0) *split = start[1];
  boost_free(start);
  return rc;
}

static void encode_piece(bpe_worker *w, const uint8_t *p, size_t n, bpe_tokens *out) {
  uint32_t whole = bpe_lookup(w->t, p, n);
  if (whole != BPE_NO_RANK) {
    bpe_tokens_push(out, (int32_t)whole);
    return;
  }
  if (n > LONG_PIECE) {
    bpe_merge_long(w->t, p, n, out);
    return;
  }
  if (n > CACHE_PIECE) {
    merge_piece(w, p, n, out);
    return;
  }
  uint64_t h = XXH3_64bits(p, n);
  cache_slot *s = cache_find(w, p, n, h);
  if (s->len) {
    for (uint32_t i = 0; i < s->ntok; i++) bpe_tokens_push(out, w->toks[s->tok + i]);
    return;
  }
  size_t before = out->n;
  merge_piece(w, p, n, out);
  cache_put(w, p, n, h, out->v + before, out->n - before);
}

int bpe_encode(bpe_worker *w, const uint8_t *text, size_t len, bpe_tokens *out, boost_status *err) {
  size_t fixed_len = 0;
  uint8_t *fixed = bpe_utf8_repair(text, len, &fixed_len);
  if (fixed) {
    text = fixed;
    len = fixed_len;
  }
  size_t pos = 0, s, e;
  int rc;
  while ((rc = bpe_next_piece(w->t, &w->m, text, len, &pos, &s, &e, err)) == 1) encode_piece(w, text + s, e - s, out);
  free(fixed);
  return rc < 0 ? -1 : 0;
}

int bpe_encode_batch(const bpe_tokenizer *t, size_t n, const uint8_t *const *texts, const size_t *lens,
                     bpe_tokens *outs, int threads, boost_status *err) {
  if (threads <= 0) threads = omp_get_max_threads();
  if ((size_t)threads > n) threads = n ? (int)n : 1;
  boost_status first = {0};
#pragma omp parallel num_threads(threads)
  {
    bpe_worker *w = bpe_worker_new(t);
    boost_status mine = {0};
    bpe_tokens local = {0}; /* neighbouring outs[] share cache lines: one write each */
#pragma omp for schedule(dynamic, 1)
    for (size_t i = 0; i < n; i++) {
      local.n = 0;
      if (mine.failed || bpe_encode(w, texts[i], lens[i], &local, &mine) != 0) continue;
      bpe_tokens out = outs[i];
      for (size_t k = 0; k < local.n; k++) bpe_tokens_push(&out, local.v[k]);
      outs[i] = out;
    }
    bpe_tokens_free(&local);
    bpe_worker_free(w);
#pragma omp critical(bpe_batch_status)
    if (mine.failed && !first.failed) first = mine;
  }
  return boost_status_take(err, &first);
}
