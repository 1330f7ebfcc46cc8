/* Reading a tiktoken rank file ("BASE64 RANK" per line) into a hash table
 * of token bytes -> rank, and the id -> bytes table decoding uses. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "bpe_internal.h"
#include "check.h"

static uint64_t hash_bytes(const uint8_t *b, size_t n) { return XXH3_64bits(b, n); }

uint32_t bpe_lookup(const bpe_tokenizer *t, const uint8_t *b, size_t len) {
  uint64_t h = hash_bytes(b, len);
  for (uint32_t i = (uint32_t)h & t->mask;; i = (i + 1) & t->mask) {
    uint32_t s = t->slots[i];
    if (s == 0) return BPE_NO_RANK;
    uint32_t id = s - 1;
    if (t->tok_len[id] == len && memcmp(t->bytes + t->tok_off[id], b, len) == 0) return id;
  }
}

static int b64_value(uint8_t c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

/* Standard base64 with '=' padding; -1 when s is not that. */
static long b64_decode(const uint8_t *s, size_t n, uint8_t *out) {
  if (n == 0 || n % 4 != 0) return -1;
  size_t pad = 0;
  while (pad < 2 && s[n - 1 - pad] == '=') pad++;
  long k = 0;
  uint32_t acc = 0;
  for (size_t i = 0; i < n - pad; i++) {
    int v = b64_value(s[i]);
    if (v < 0) return -1;
    acc = (acc << 6) | (uint32_t)v;
    if (i % 4 == 3) {
      out[k++] = (uint8_t)(acc >> 16);
      out[k++] = (uint8_t)(acc >> 8);
      out[k++] = (uint8_t)acc;
      acc = 0;
    }
  }
  if (pad == 2) {
    out[k++] = (uint8_t)(acc >> 4);
  } else if (pad == 1) {
    out[k++] = (uint8_t)(acc >> 10);
    out[k++] = (uint8_t)(acc >> 2);
  }
  return k;
}

int bpe_read_file(const char *path, uint8_t **data, size_t *len, boost_status *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return boost_err(err, "%s: cannot open the rank file: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return boost_err(err, "%s: not a regular file (a tiktoken rank file or a tokenizer.json)", path);
  }
  size_t n = (size_t)st.st_size;
  uint8_t *buf = boost_calloc(n + 1, 1);
  size_t got = 0;
  while (got < n) {
    ssize_t k = read(fd, buf + got, n - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      close(fd);
      boost_free(buf);
      return boost_err(err, "%s: read failed: %s", path, k < 0 ? strerror(errno) : "file shrank while read");
    }
    got += (size_t)k;
  }
  close(fd);
  *data = buf;
  *len = n;
  return 0;
}

void bpe_entries_grow(bpe_entry **v, size_t *cap, size_t need) {
  if (need <= *cap) return;
  *cap = *cap ? *cap * 2 : 1024;
  *v = boost_realloc(*v, *cap, sizeof **v);
}

/* Parses one non-empty line [s, e) into *en (its bytes appended at bytes + *used). */
static int parse_line(const char *path, uint32_t line, const uint8_t *s, const uint8_t *e, uint8_t *bytes,
                      size_t *used, bpe_entry *en, boost_status *err) {
  const uint8_t *sp = memchr(s, ' ', (size_t)(e - s));
  if (!sp || sp == s || sp + 1 == e || memchr(sp + 1, ' ', (size_t)(e - sp - 1)))
    return boost_err(err, "%s:%" PRIu32 ": expected \"BASE64 RANK\" (a tiktoken rank file), got \"%.*s\"", path,
                     line, (int)(e - s > 40 ? 40 : e - s), (const char *)s);
  long k = b64_decode(s, (size_t)(sp - s), bytes + *used);
  if (k <= 0)
    return boost_err(err, "%s:%" PRIu32 ": \"%.*s\" is not a base64 token", path, line, (int)(sp - s > 40 ? 40 : sp - s),
                     (const char *)s);
  uint64_t rank = 0;
  for (const uint8_t *p = sp + 1; p < e; p++) {
    if (*p < '0' || *p > '9' || rank > (uint64_t)INT32_MAX)
      return boost_err(err, "%s:%" PRIu32 ": rank \"%.*s\" is not a whole number below 2^31 - 1", path, line,
                       (int)(e - sp - 1 > 20 ? 20 : e - sp - 1), (const char *)sp + 1);
    rank = rank * 10 + (uint64_t)(*p - '0');
  }
  if (rank >= (uint64_t)INT32_MAX - 1)
    return boost_err(err, "%s:%" PRIu32 ": rank %" PRIu64 " is too large", path, line, rank);
  en->rank = (uint32_t)rank;
  en->line = line;
  en->off = *used;
  en->len = (uint32_t)k;
  *used += (size_t)k;
  return 0;
}

int bpe_build_tables(bpe_tokenizer *t, const char *path, const bpe_entry *v, size_t n, boost_status *err) {
  uint32_t maxrank = 0;
  for (size_t i = 0; i < n; i++)
    if (v[i].rank > maxrank) maxrank = v[i].rank;
  t->nranks = maxrank + 1;
  t->tok_off = boost_calloc(t->nranks + 1, sizeof *t->tok_off);
  t->tok_len = boost_calloc(t->nranks + 1, sizeof *t->tok_len);
  uint32_t *line_of = boost_calloc(t->nranks, sizeof *line_of);
  size_t slots = 1024;
  while (slots < 2 * n) slots *= 2;
  t->slots = boost_calloc(slots, sizeof *t->slots);
  t->mask = (uint32_t)(slots - 1);
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    const bpe_entry *en = &v[i];
    if (line_of[en->rank]) {
      rc = boost_err(err, "%s:%" PRIu32 ": rank %" PRIu32 " given twice (first on line %" PRIu32 ")", path, en->line,
                     en->rank, line_of[en->rank]);
      break;
    }
    uint32_t twin = bpe_lookup(t, t->bytes + en->off, en->len);
    if (twin != BPE_NO_RANK) {
      rc = boost_err(err, "%s:%" PRIu32 ": token given twice (ranks %" PRIu32 " and %" PRIu32 ", line %" PRIu32 ")",
                     path, en->line, twin, en->rank, line_of[twin]);
      break;
    }
    line_of[en->rank] = en->line;
    t->tok_off[en->rank] = en->off;
    t->tok_len[en->rank] = en->len;
    uint64_t h = hash_bytes(t->bytes + en->off, en->len);
    uint32_t j = (uint32_t)h & t->mask;
    while (t->slots[j]) j = (j + 1) & t->mask;
    t->slots[j] = en->rank + 1;
  }
  boost_free(line_of);
  if (rc) return rc;
  for (int b = 0; b < 256; b++) {
    uint8_t c = (uint8_t)b;
    if (bpe_lookup(t, &c, 1) == BPE_NO_RANK)
      return boost_err(err, "%s: byte 0x%02x is no token, so some texts cannot be encoded (a byte-level BPE file has all 256)",
                       path, b);
  }
  return 0;
}

int bpe_ranks_read(bpe_tokenizer *t, const char *path, uint64_t *file_hash, boost_status *err) {
  uint8_t *data = NULL;
  size_t len = 0;
  if (bpe_read_file(path, &data, &len, err)) return -1;
  *file_hash = XXH3_64bits(data, len);
  t->bytes = boost_calloc(len + 1, 1); /* base64 never decodes longer than it is */
  size_t used = 0, n = 0, cap = 0;
  bpe_entry *v = NULL;
  uint32_t line = 0;
  int rc = 0;
  for (size_t pos = 0; pos < len && rc == 0;) {
    const uint8_t *s = data + pos, *nl = memchr(s, '\n', len - pos);
    const uint8_t *e = nl ? nl : data + len;
    pos = (size_t)(e - data) + 1;
    line++;
    if (e > s && e[-1] == '\r') e--;
    if (e == s) continue; /* tiktoken skips empty lines too */
    bpe_entries_grow(&v, &cap, n + 1);
    rc = parse_line(path, line, s, e, t->bytes, &used, &v[n], err);
    n++;
  }
  boost_free(data);
  if (rc == 0 && n == 0) rc = boost_err(err, "%s: no tokens (a tiktoken rank file has BASE64 RANK per line)", path);
  if (rc == 0) rc = bpe_build_tables(t, path, v, n, err);
  free(v);
  return rc;
}

void bpe_ranks_free(bpe_tokenizer *t) {
  boost_free(t->bytes);
  boost_free(t->tok_off);
  boost_free(t->tok_len);
  boost_free(t->slots);
}

const uint8_t *bpe_token_bytes(const bpe_tokenizer *t, int32_t id, size_t *len) {
  if (id >= 0 && (uint32_t)id < t->nranks && t->tok_len[id]) {
    *len = t->tok_len[id];
    return t->bytes + t->tok_off[id];
  }
  if (id == bpe_eot(t)) {
    *len = strlen(BPE_EOT_TEXT);
    return (const uint8_t *)BPE_EOT_TEXT;
  }
  return NULL;
}

int32_t bpe_rank_of(const bpe_tokenizer *t, const uint8_t *bytes, size_t len) {
  uint32_t r = bpe_lookup(t, bytes, len);
  return r == BPE_NO_RANK ? -1 : (int32_t)r;
}
