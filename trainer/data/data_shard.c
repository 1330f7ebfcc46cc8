/* One token shard (boost v1 or llm.c .bin): mapped, its header and tokens
 * checked; a shard's header read alone (data_shard_info_read). See data.h
 * and docs/DATA_FORMAT.md. */
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
/* one shard                                                          */


void data_shard_unmap(shard *s) {
  if (s->map && s->map_len) munmap((void *)s->map, s->map_len);
  s->map = NULL;
  s->map_len = 0;
  boost_free(s->path);
  s->path = NULL;
}

static uint32_t scan_max(const uint8_t *tok, uint64_t n, uint32_t width, uint32_t limit, uint64_t *bad_at) {
  uint32_t mx = 0;
  *bad_at = UINT64_MAX;
  if (width == 2) {
    const uint16_t *t = (const uint16_t *)(const void *)tok;
    for (uint64_t i = 0; i < n; i++) mx = t[i] > mx ? t[i] : mx;
    if (mx >= limit)
      for (uint64_t i = 0; i < n; i++)
        if (t[i] >= limit) {
          *bad_at = i;
          break;
        }
  } else {
    const uint32_t *t = (const uint32_t *)(const void *)tok;
    for (uint64_t i = 0; i < n; i++) mx = t[i] > mx ? t[i] : mx;
    if (mx >= limit)
      for (uint64_t i = 0; i < n; i++)
        if (t[i] >= limit) {
          *bad_at = i;
          break;
        }
  }
  return mx;
}

/* Parse the header in hdr (have bytes of it, file size fsize) into info. */
static int parse_header(const char *path, const uint8_t *hdr, size_t have, uint64_t fsize, data_shard_info *info,
                        boost_status *err) {
  memset(info, 0, sizeof *info);
  if (fsize >= 8 && memcmp(hdr, DATA_MAGIC, 8) == 0) {
    info->format = DATA_FORMAT_BOOST;
    if (fsize < H_VERSION + 4) {
      boost_err(err, "%s: truncated boost token shard header (%" PRIu64 " bytes)", path, fsize);
      return -1;
    }
    info->version = rd32(hdr + H_VERSION);
    if (info->version != DATA_VERSION && info->version != DATA_VERSION_HASHED) {
      boost_err(err, "%s: unsupported boost token shard version %" PRIu32 " (this build reads versions 1 and 2)",
             path, info->version);
      return -1;
    }
    if (fsize < DATA_HEADER_BYTES || have < DATA_HEADER_BYTES) {
      boost_err(err, "%s: truncated boost token shard header (%" PRIu64 " of %u bytes)", path, fsize,
             DATA_HEADER_BYTES);
      return -1;
    }
    uint64_t hsum = XXH3_64bits(hdr, H_HEADER_SUM);
    if (info->version == DATA_VERSION_HASHED) { /* v2: the whole header, the sum field zero */
      uint8_t h0[DATA_HEADER_BYTES];
      memcpy(h0, hdr, sizeof h0);
      wr64(h0 + H_HEADER_SUM, 0);
      hsum = XXH3_64bits(h0, sizeof h0);
      info->tokenizer_hash = rd64(hdr + H_TOKENIZER_HASH);
    }
    if (hsum != rd64(hdr + H_HEADER_SUM)) {
      boost_err(err, "%s: header checksum mismatch (stored %016" PRIx64 ", computed %016" PRIx64 ")", path,
             rd64(hdr + H_HEADER_SUM), hsum);
      return -1;
    }
    info->header_bytes = rd32(hdr + H_HEADER_BYTES);
    info->token_bytes = rd32(hdr + H_TOKEN_BYTES);
    info->vocab_size = rd32(hdr + H_VOCAB);
    info->num_tokens = rd64(hdr + H_NUM_TOKENS);
    info->num_documents = rd64(hdr + H_NUM_DOCS);
    info->eot_token = rd32(hdr + H_EOT);
    info->checksum = rd64(hdr + H_PAYLOAD_SUM);
    memcpy(info->tokenizer, hdr + H_TOKENIZER, DATA_TOKENIZER_MAX);
    info->tokenizer[DATA_TOKENIZER_MAX] = '\0';
    if (info->header_bytes < DATA_HEADER_BYTES) {
      boost_err(err, "%s: malformed header: header_bytes %" PRIu32 " < %u", path, info->header_bytes,
             DATA_HEADER_BYTES);
      return -1;
    }
    if (info->token_bytes != 2 && info->token_bytes != 4) {
      boost_err(err, "%s: malformed header: token width %" PRIu32 " bytes (must be 2 or 4)", path,
             info->token_bytes);
      return -1;
    }
    uint64_t maxvocab = info->token_bytes == 2 ? 65536u : (uint64_t)INT32_MAX;
    if (info->vocab_size == 0 || info->vocab_size > maxvocab) {
      boost_err(err, "%s: malformed header: vocab size %" PRIu32 " (must be 1..%" PRIu64 ")", path,
             info->vocab_size, maxvocab);
      return -1;
    }
  } else if (fsize >= 4 && (rd32(hdr) == LLMC_MAGIC_GPT2 || rd32(hdr) == LLMC_MAGIC_LLAMA3)) {
    info->format = DATA_FORMAT_LLMC;
    uint32_t magic = rd32(hdr);
    if (fsize < LLMC_HEADER_BYTES || have < 12) {
      boost_err(err, "%s: truncated llm.c shard header (%" PRIu64 " of %u bytes)", path, fsize,
             LLMC_HEADER_BYTES);
      return -1;
    }
    info->version = rd32(hdr + 4);
    uint32_t want = magic == LLMC_MAGIC_GPT2 ? 1 : 7;
    if (info->version != want) {
      boost_err(err, "%s: unsupported llm.c shard version %" PRIu32 " for magic %" PRIu32 " (expected %" PRIu32 ")",
             path, info->version, magic, want);
      return -1;
    }
    int32_t count = (int32_t)rd32(hdr + 8);
    if (count < 0) {
      boost_err(err, "%s: malformed llm.c header: negative token count %" PRId32, path, count);
      return -1;
    }
    info->header_bytes = LLMC_HEADER_BYTES;
    info->token_bytes = magic == LLMC_MAGIC_GPT2 ? 2 : 4;
    info->num_tokens = (uint64_t)count;
    info->vocab_size = 0;
    info->eot_token = DATA_NO_EOT;
  } else {
    boost_err(err,
           "%s: bad magic: not a boost token shard (\"BOOSTTOK\") nor an llm.c .bin (20240520/20240801)", path);
    return -1;
  }
  if (info->num_tokens > (UINT64_MAX - info->header_bytes) / info->token_bytes ||
      info->num_tokens > (uint64_t)INT64_MAX / 8) {
    boost_err(err, "%s: malformed header: token count %" PRIu64 " is impossible", path, info->num_tokens);
    return -1;
  }
  uint64_t want = info->header_bytes + info->num_tokens * info->token_bytes;
  if (fsize < want) {
    boost_err(err,
           "%s: truncated: header says %" PRIu64 " tokens (%" PRIu64 " bytes) but the file has %" PRIu64 " bytes",
           path, info->num_tokens, want, fsize);
    return -1;
  }
  if (fsize > want) {
    boost_err(err,
           "%s: size mismatch: header says %" PRIu64 " tokens (%" PRIu64 " bytes) but the file has %" PRIu64
           " bytes",
           path, info->num_tokens, want, fsize);
    return -1;
  }
  return 0;
}

/* Open, map and fully validate one shard. */
int data_shard_open(const char *path, shard *s, boost_status *err) {
  memset(s, 0, sizeof *s);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    boost_err(err, "%s: cannot open: %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    boost_err(err, "%s: cannot stat: %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    boost_err(err, "%s: not a regular file", path);
    close(fd);
    return -1;
  }
  uint64_t fsize = (uint64_t)st.st_size;
  if (fsize < 8) {
    boost_err(err, "%s: too small to be a token shard (%" PRIu64 " bytes)", path, fsize);
    close(fd);
    return -1;
  }
  uint8_t hdr[DATA_HEADER_BYTES];
  size_t want = fsize < sizeof hdr ? (size_t)fsize : sizeof hdr;
  ssize_t got = pread(fd, hdr, want, 0);
  if (got < 0 || (size_t)got != want) {
    boost_err(err, "%s: cannot read header: %s", path, got < 0 ? strerror(errno) : "short read");
    close(fd);
    return -1;
  }
  if (parse_header(path, hdr, want, fsize, &s->info, err) != 0) {
    close(fd);
    return -1;
  }
  void *map = mmap(NULL, (size_t)fsize, PROT_READ, MAP_SHARED, fd, 0);
  int map_errno = errno;
  close(fd);
  if (map == MAP_FAILED) {
    boost_err(err, "%s: cannot mmap %" PRIu64 " bytes: %s", path, fsize, strerror(map_errno));
    return -1;
  }
  s->map = map;
  s->map_len = (size_t)fsize;
  s->tokens = s->map + s->info.header_bytes;
  s->path = boost_strdup(path);
  data_shard_info *in = &s->info;
  size_t payload = (size_t)(in->num_tokens * in->token_bytes);
  if (in->format == DATA_FORMAT_BOOST) {
    uint64_t sum = XXH3_64bits(s->tokens, payload);
    if (sum != in->checksum) {
      boost_err(err,
             "%s: checksum mismatch: header %016" PRIx64 ", payload %016" PRIx64 " (token data is corrupted)", path,
             in->checksum, sum);
      data_shard_unmap(s);
      return -1;
    }
  }
  uint32_t limit = in->format == DATA_FORMAT_BOOST ? in->vocab_size : (uint32_t)INT32_MAX;
  uint64_t bad_at;
  in->max_token = scan_max(s->tokens, in->num_tokens, in->token_bytes, limit, &bad_at);
  if (bad_at != UINT64_MAX) {
    uint32_t t = in->token_bytes == 2 ? (uint32_t)((const uint16_t *)(const void *)s->tokens)[bad_at]
                                      : ((const uint32_t *)(const void *)s->tokens)[bad_at];
    if (in->format == DATA_FORMAT_BOOST)
      boost_err(err, "%s: token %" PRIu32 " at index %" PRIu64 " >= vocab size %" PRIu32, path, t, bad_at,
             in->vocab_size);
    else
      boost_err(err, "%s: token %" PRIu32 " at index %" PRIu64 " does not fit int32", path, t, bad_at);
    data_shard_unmap(s);
    return -1;
  }
  return 0;
}

int data_shard_info_read(const char *path, data_shard_info *info, boost_status *err) {
  shard s;
  if (data_shard_open(path, &s, err) != 0) return -1;
  *info = s.info;
  data_shard_unmap(&s);
  return 0;
}
