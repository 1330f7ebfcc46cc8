/* Token shards (boost v1 and llm.c .bin), the loader, splits, the keyed
 * sample permutation (one shard: data_shard.c; the shard writer: tools/data/data_writer.c). See data.h and docs/DATA_FORMAT.md. */
#include "data.h"
#include "data_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL /* header-only use of libxxhash: no link dependency */
#include <xxhash.h>

#include "check.h"
#include "data_format.h"
#include "util.h"


/* ------------------------------------------------------------------ */
/* data source                                                        */

struct data_source {
  char *path;
  shard *shards;
  int nshards;
  int64_t num_tokens;
  int vocab;
};

typedef struct {
  char **v;
  int n, cap;
} strlist;

static void sl_push(strlist *l, const char *s) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 16;
    char **v = boost_calloc((size_t)cap, sizeof *v);
    if (l->n) memcpy(v, l->v, (size_t)l->n * sizeof *v);
    boost_free(l->v);
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = boost_strdup(s);
}

static void sl_free(strlist *l) {
  for (int i = 0; i < l->n; i++) boost_free(l->v[i]);
  boost_free(l->v);
  memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Add the shards named by one element of the path list. */
static int collect(const char *elem, strlist *out, boost_status *err) {
  struct stat st;
  if (stat(elem, &st) != 0) {
    boost_err(err, "%s: %s", elem, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    sl_push(out, elem);
    return 0;
  }
  DIR *d = opendir(elem);
  if (!d) {
    boost_err(err, "%s: cannot read directory: %s", elem, strerror(errno));
    return -1;
  }
  strlist found = {0};
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (!boost_ends_with(e->d_name, ".tok") && !boost_ends_with(e->d_name, ".bin")) continue;
    size_t n = strlen(elem) + strlen(e->d_name) + 2;
    char *p = boost_calloc(n, 1);
    snprintf(p, n, "%s%s%s", elem, boost_ends_with(elem, "/") ? "" : "/", e->d_name);
    struct stat fs;
    if (stat(p, &fs) == 0 && S_ISREG(fs.st_mode)) sl_push(&found, p);
    boost_free(p);
  }
  closedir(d);
  if (found.n == 0) {
    boost_err(err, "%s: no *.tok or *.bin shards in directory", elem);
    sl_free(&found);
    return -1;
  }
  qsort(found.v, (size_t)found.n, sizeof *found.v, cmp_str);
  for (int i = 0; i < found.n; i++) sl_push(out, found.v[i]);
  sl_free(&found);
  return 0;
}

static data_source *open_source(const char *path, boost_status *err) {
  if (!path || !*path) {
    boost_err(err, "empty data path");
    return NULL;
  }
  strlist files = {0};
  char *copy = boost_strdup(path);
  int rc = 0;
  for (char *p = copy;;) {
    char *comma = strchr(p, ',');
    if (comma) *comma = '\0';
    if (!*p) {
      boost_err(err, "%s: empty element in comma-separated data path", path);
      rc = -1;
      break;
    }
    if (collect(p, &files, err) != 0) {
      rc = -1;
      break;
    }
    if (!comma) break;
    p = comma + 1;
  }
  boost_free(copy);
  if (rc != 0) {
    sl_free(&files);
    return NULL;
  }
  data_source *src = boost_calloc(1, sizeof *src);
  src->path = boost_strdup(path);
  src->shards = boost_calloc((size_t)files.n, sizeof *src->shards);
  for (int i = 0; i < files.n; i++) {
    shard *s = &src->shards[i];
    if (data_shard_open(files.v[i], s, err) != 0) {
      sl_free(&files);
      data_close(src);
      return NULL;
    }
    src->nshards++;
    const shard *s0 = &src->shards[0];
    if (s->info.format == DATA_FORMAT_BOOST && s0->info.format == DATA_FORMAT_BOOST &&
        (strcmp(s->info.tokenizer, s0->info.tokenizer) || s->info.tokenizer_hash != s0->info.tokenizer_hash)) {
      boost_err(err, "%s: tokenizer %s (%016" PRIx64 ") differs from %s's %s (%016" PRIx64 "): one tokenizer per data set",
                files.v[i], s->info.tokenizer, s->info.tokenizer_hash, files.v[0], s0->info.tokenizer,
                s0->info.tokenizer_hash);
      sl_free(&files);
      data_close(src);
      return NULL;
    }
    s->first = src->num_tokens;
    src->num_tokens += (int64_t)s->info.num_tokens;
    int64_t v = s->info.format == DATA_FORMAT_BOOST ? (int64_t)s->info.vocab_size
                                                    : (s->info.num_tokens ? (int64_t)s->info.max_token + 1 : 0);
    if (v > src->vocab) src->vocab = (int)v;
  }
  sl_free(&files);
  return src;
}

int data_open(const char *path, data_source **out, boost_status *err) {
  *out = open_source(path, err);
  return *out ? 0 : -1;
}

void data_close(data_source *src) {
  if (!src) return;
  for (int i = 0; i < src->nshards; i++) data_shard_unmap(&src->shards[i]);
  boost_free(src->shards);
  boost_free(src->path);
  boost_free(src);
}

int64_t data_num_tokens(const data_source *src) { return src->num_tokens; }
int data_vocab_size(const data_source *src) { return src->vocab; }
int data_num_shards(const data_source *src) { return src->nshards; }
void data_tokenizer_id(const data_source *src, char *out, size_t outlen) {
  const data_shard_info *in = &src->shards[0].info;
  if (in->tokenizer_hash)
    snprintf(out, outlen, "%s:%016" PRIx64, in->tokenizer, in->tokenizer_hash);
  else
    snprintf(out, outlen, "%s", in->tokenizer);
}

void data_read_tokens(const data_source *src, int64_t start, int64_t count, int32_t *out) {
  BOOST_ASSERT(start >= 0 && count >= 0 && count <= src->num_tokens - start);
  if (count == 0) return;
  int lo = 0, hi = src->nshards - 1; /* last shard with first <= start */
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (src->shards[mid].first <= start)
      lo = mid;
    else
      hi = mid - 1;
  }
  for (int k = lo; count > 0; k++) {
    BOOST_ASSERT(k < src->nshards);
    const shard *s = &src->shards[k];
    int64_t off = start - s->first;
    int64_t avail = (int64_t)s->info.num_tokens - off;
    if (avail <= 0) continue;
    int64_t take = avail < count ? avail : count;
    if (s->info.token_bytes == 2) {
      const uint16_t *t = (const uint16_t *)(const void *)s->tokens + off;
      for (int64_t i = 0; i < take; i++) out[i] = (int32_t)t[i];
    } else {
      const uint32_t *t = (const uint32_t *)(const void *)s->tokens + off;
      for (int64_t i = 0; i < take; i++) out[i] = (int32_t)t[i];
    }
    out += take;
    start += take;
    count -= take;
  }
}

/* ------------------------------------------------------------------ */
/* splits, permutation, samples                                       */

static void split_init(data_split *sp, const data_source *src, int64_t start, int64_t n, int seq_len) {
  sp->src = src;
  sp->start = start;
  sp->num_tokens = n;
  sp->seq_len = seq_len;
  sp->num_samples = n >= (int64_t)seq_len + 1 ? (n - 1) / seq_len : 0;
}

int data_split_make(const data_source *src, double val_fraction, int seq_len, data_split *train, data_split *val,
                    boost_status *err) {
  const char *name = src->path;
  if (seq_len < 1) {
    boost_err(err, "%s: seq_len %d must be >= 1", name, seq_len);
    return -1;
  }
  if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
    boost_err(err, "%s: validation fraction %g must be in [0, 1)", name, val_fraction);
    return -1;
  }
  if (val_fraction > 0.0 && !val) {
    boost_err(err, "%s: validation fraction %g given but no validation split requested", name, val_fraction);
    return -1;
  }
  int64_t n = src->num_tokens, need = (int64_t)seq_len + 1;
  int64_t nval = 0;
  if (val_fraction > 0.0) {
    nval = (int64_t)llround(val_fraction * (double)n);
    if (nval < need) nval = need;
  }
  if (n - nval < need) {
    if (nval)
      boost_err(err,
             "%s: too few tokens: %" PRId64 " tokens, but seq_len %d needs %" PRId64
             " for one training sample plus %" PRId64 " for validation",
             name, n, seq_len, need, nval);
    else
      boost_err(err, "%s: too few tokens: %" PRId64 " tokens, but one sample of seq_len %d needs %" PRId64,
             name, n, seq_len, need);
    return -1;
  }
  split_init(train, src, 0, n - nval, seq_len);
  if (val) split_init(val, src, n - nval, nval, seq_len);
  return 0;
}

int64_t data_split_num_samples(const data_split *split) { return split->num_samples; }

static uint64_t mix64(uint64_t x) { /* splitmix64 finaliser: a bijection with full avalanche */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

#define FEISTEL_ROUNDS 6

int64_t data_permute(int64_t n, uint64_t seed, uint64_t epoch, int64_t i) {
  BOOST_ASSERT(n >= 1 && i >= 0 && i < n);
  if (n == 1) return 0;
  int bits = 64 - __builtin_clzll((uint64_t)(n - 1)); /* 2^bits >= n */
  if (bits & 1) bits++;
  int half = bits / 2;
  uint64_t mask = (half == 64) ? ~0ull : ((1ull << half) - 1);
  uint64_t key = mix64(seed ^ mix64(epoch ^ 0x5bd1e9955bd1e995ull));
  uint64_t rk[FEISTEL_ROUNDS];
  for (int r = 0; r < FEISTEL_ROUNDS; r++) rk[r] = mix64(key + (uint64_t)r * 0x632be59bd9b4e019ull);
  uint64_t x = (uint64_t)i;
  do { /* cycle walking: 2^bits < 4n, so a few steps on average */
    uint64_t L = x >> half, R = x & mask;
    for (int r = 0; r < FEISTEL_ROUNDS; r++) {
      uint64_t F = mix64(R ^ rk[r]) & mask;
      uint64_t t = L ^ F;
      L = R;
      R = t;
    }
    x = (L << half) | R;
  } while (x >= (uint64_t)n);
  return (int64_t)x;
}

void data_get_window(const data_split *split, int64_t index, int32_t *inputs, int32_t *targets) {
  BOOST_ASSERT(index >= 0 && index < split->num_samples);
  int64_t w = split->start + index * split->seq_len;
  data_read_tokens(split->src, w, split->seq_len, inputs);
  data_read_tokens(split->src, w + 1, split->seq_len, targets);
}

int64_t data_sample_window(const data_split *split, data_order order, uint64_t seed, int64_t global_index) {
  BOOST_ASSERT(global_index >= 0 && split->num_samples > 0);
  const int64_t n = split->num_samples;
  if (order == DATA_ORDER_SEQUENTIAL) return global_index % n;
  return data_permute(n, seed, (uint64_t)(global_index / n), global_index % n);
}

void data_get_sample(const data_split *split, uint64_t seed, int64_t global_index, int32_t *inputs,
                     int32_t *targets) {
  data_get_window(split, data_sample_window(split, DATA_ORDER_SHUFFLED, seed, global_index), inputs, targets);
}

