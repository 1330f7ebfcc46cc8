/* The token shard writer: tokens buffered and hashed as they come, written
 * to PATH.tmp, header last, fsync, rename into place. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XXH_INLINE_ALL /* header-only use of libxxhash: no link dependency */
#include <xxhash.h>

#include "check.h"
#include "data.h"
#include "data_writer.h"
#include "data_format.h"
#include "util.h"

/* ------------------------------------------------------------------ */
/* writer                                                             */

#define WRITER_BUF (1u << 20)

struct data_writer {
  char *path, *tmp;
  int fd;
  uint32_t width, vocab, eot;
  char tokenizer[DATA_TOKENIZER_MAX];
  uint64_t tokenizer_hash; /* 0: a v1 header */
  uint64_t ntok, ndocs;
  XXH3_state_t *hash;
  uint8_t *buf;
  size_t used;
};

static int write_all(int fd, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n > 0) {
    ssize_t k = write(fd, b, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    b += k;
    n -= (size_t)k;
  }
  return 0;
}

static int writer_flush(data_writer *w, boost_status *err) {
  if (w->used == 0) return 0;
  XXH3_64bits_update(w->hash, w->buf, w->used);
  if (write_all(w->fd, w->buf, w->used) != 0) {
    boost_err(err, "%s: write failed: %s", w->tmp, strerror(errno));
    return -1;
  }
  w->used = 0;
  return 0;
}

static void writer_free(data_writer *w) {
  if (w->fd >= 0) close(w->fd);
  if (w->hash) XXH3_freeState(w->hash);
  boost_free(w->buf);
  boost_free(w->path);
  boost_free(w->tmp);
  boost_free(w);
}

int data_writer_open(const char *path, uint32_t token_bytes, uint32_t vocab_size, const char *tokenizer,
                     uint32_t eot_token, data_writer **out, boost_status *err) {
  *out = NULL;
  if (token_bytes != 2 && token_bytes != 4) {
    return boost_err(err, "%s: token width %" PRIu32 " bytes (must be 2 or 4)", path, token_bytes);
  }
  uint64_t maxvocab = token_bytes == 2 ? 65536u : (uint64_t)INT32_MAX;
  if (vocab_size == 0 || vocab_size > maxvocab) {
    return boost_err(err, "%s: vocab size %" PRIu32 " does not fit %" PRIu32 "-byte tokens", path, vocab_size,
           token_bytes);
  }
  if (eot_token != DATA_NO_EOT && eot_token >= vocab_size) {
    return boost_err(err, "%s: EOT token %" PRIu32 " >= vocab size %" PRIu32, path, eot_token, vocab_size);
  }
  if (!tokenizer) tokenizer = "";
  if (strlen(tokenizer) > DATA_TOKENIZER_MAX) {
    return boost_err(err, "%s: tokenizer name longer than %d bytes", path, DATA_TOKENIZER_MAX);
  }
  data_writer *w = boost_calloc(1, sizeof *w);
  w->fd = -1;
  w->path = boost_strdup(path);
  size_t n = strlen(path) + 5;
  w->tmp = boost_calloc(n, 1);
  snprintf(w->tmp, n, "%s.tmp", path);
  w->width = token_bytes;
  w->vocab = vocab_size;
  w->eot = eot_token;
  memcpy(w->tokenizer, tokenizer, strlen(tokenizer));
  w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd < 0) {
    boost_err(err, "%s: cannot create: %s", w->tmp, strerror(errno));
    writer_free(w);
    return -1;
  }
  w->hash = XXH3_createState();
  BOOST_ASSERT(w->hash);
  XXH3_64bits_reset(w->hash);
  w->buf = boost_calloc(WRITER_BUF, 1);
  uint8_t zero[DATA_HEADER_BYTES] = {0};
  if (write_all(w->fd, zero, sizeof zero) != 0) {
    boost_err(err, "%s: write failed: %s", w->tmp, strerror(errno));
    data_writer_abort(w);
    return -1;
  }
  *out = w;
  return 0;
}

static int writer_put(data_writer *w, uint32_t t, boost_status *err) {
  if (w->used + w->width > WRITER_BUF && writer_flush(w, err) != 0) return -1;
  if (w->width == 2) {
    uint16_t v = (uint16_t)t;
    memcpy(w->buf + w->used, &v, 2);
  } else {
    memcpy(w->buf + w->used, &t, 4);
  }
  w->used += w->width;
  w->ntok++;
  return 0;
}

int data_writer_add(data_writer *w, const int32_t *tokens, size_t count, boost_status *err) {
  for (size_t i = 0; i < count; i++) {
    if (tokens[i] < 0 || (uint32_t)tokens[i] >= w->vocab) {
      boost_err(err, "%s: token %" PRId32 " out of range [0, %" PRIu32 ")", w->path, tokens[i], w->vocab);
      return -1;
    }
    if (writer_put(w, (uint32_t)tokens[i], err) != 0) return -1;
  }
  return 0;
}

void data_writer_set_tokenizer_hash(data_writer *w, uint64_t hash) { w->tokenizer_hash = hash; }

int data_writer_add_encoded(data_writer *w, const int32_t *tokens, size_t count, boost_status *err) {
  if (w->eot != DATA_NO_EOT && writer_put(w, w->eot, err) != 0) return -1;
  if (data_writer_add(w, tokens, count, err) != 0) return -1;
  w->ndocs++;
  return 0;
}

int data_writer_add_document(data_writer *w, const void *bytes, size_t len, boost_status *err) {
  if (w->vocab < 256) {
    boost_err(err, "%s: byte tokenizer needs vocab >= 256, shard has %" PRIu32, w->path, w->vocab);
    return -1;
  }
  if (w->eot != DATA_NO_EOT && writer_put(w, w->eot, err) != 0) return -1;
  const uint8_t *b = bytes;
  while (len > 0) {
    if (w->used + w->width > WRITER_BUF && writer_flush(w, err) != 0) return -1;
    size_t take = (WRITER_BUF - w->used) / w->width;
    if (take > len) take = len;
    uint8_t *dst = w->buf + w->used;
    for (size_t i = 0; i < take; i++) {
      uint32_t v = b[i];
      memcpy(dst + i * w->width, &v, w->width); /* little-endian: low bytes first */
    }
    w->used += take * w->width;
    w->ntok += take;
    b += take;
    len -= take;
  }
  w->ndocs++;
  return 0;
}

uint64_t data_writer_num_tokens(const data_writer *w) { return w->ntok; }
uint64_t data_writer_num_documents(const data_writer *w) { return w->ndocs; }
const char *data_writer_tmp_path(const data_writer *w) { return w->tmp; }

void data_writer_abort(data_writer *w) {
  if (!w) return;
  if (w->fd >= 0) close(w->fd);
  w->fd = -1;
  unlink(w->tmp);
  writer_free(w);
}


int data_writer_finish(data_writer *w, uint64_t *checksum, boost_status *err) {
  if (writer_flush(w, err) != 0) {
    data_writer_abort(w);
    return -1;
  }
  uint64_t sum = XXH3_64bits_digest(w->hash);
  uint8_t h[DATA_HEADER_BYTES] = {0};
  memcpy(h + H_MAGIC, DATA_MAGIC, 8);
  wr32(h + H_VERSION, w->tokenizer_hash ? DATA_VERSION_HASHED : DATA_VERSION);
  wr32(h + H_HEADER_BYTES, DATA_HEADER_BYTES);
  wr32(h + H_TOKEN_BYTES, w->width);
  wr32(h + H_VOCAB, w->vocab);
  wr64(h + H_NUM_TOKENS, w->ntok);
  wr64(h + H_NUM_DOCS, w->ndocs);
  wr32(h + H_EOT, w->eot);
  wr32(h + H_FLAGS, 0);
  memcpy(h + H_TOKENIZER, w->tokenizer, DATA_TOKENIZER_MAX);
  wr64(h + H_PAYLOAD_SUM, sum);
  if (w->tokenizer_hash) {
    /* v2: the sum covers the whole header, its own field zero. */
    wr64(h + H_TOKENIZER_HASH, w->tokenizer_hash);
    wr64(h + H_HEADER_SUM, XXH3_64bits(h, DATA_HEADER_BYTES));
  } else {
    wr64(h + H_HEADER_SUM, XXH3_64bits(h, H_HEADER_SUM));
  }
  ssize_t k = pwrite(w->fd, h, sizeof h, 0);
  if (k != (ssize_t)sizeof h) {
    boost_err(err, "%s: header write failed: %s", w->tmp, k < 0 ? strerror(errno) : "short write");
    data_writer_abort(w);
    return -1;
  }
  if (fsync(w->fd) != 0) {
    boost_err(err, "%s: fsync failed: %s", w->tmp, strerror(errno));
    data_writer_abort(w);
    return -1;
  }
  int rc = close(w->fd);
  w->fd = -1;
  if (rc != 0) {
    boost_err(err, "%s: close failed: %s", w->tmp, strerror(errno));
    data_writer_abort(w);
    return -1;
  }
  if (rename(w->tmp, w->path) != 0) {
    boost_err(err, "%s: cannot rename to %s: %s", w->tmp, w->path, strerror(errno));
    data_writer_abort(w);
    return -1;
  }
  boost_fsync_parent(w->path); /* best effort: some file systems refuse directory fsync */
  if (checksum) *checksum = sum;
  writer_free(w);
  return 0;
}
