/* The boost token shard header, shared by the reader (data.c) and the
 * writer (data_writer.c). Little-endian fields; docs/DATA_FORMAT.md. */
#ifndef BOOST_DATA_FORMAT_H
#define BOOST_DATA_FORMAT_H

#include <stdint.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "boost token shards are little-endian; this reader maps them directly"
#endif

/* v1 header field offsets (docs/DATA_FORMAT.md). */
enum {
  H_MAGIC = 0,
  H_VERSION = 8,
  H_HEADER_BYTES = 12,
  H_TOKEN_BYTES = 16,
  H_VOCAB = 20,
  H_NUM_TOKENS = 24,
  H_NUM_DOCS = 32,
  H_EOT = 40,
  H_FLAGS = 44,
  H_TOKENIZER = 48,
  H_PAYLOAD_SUM = 80,
  H_HEADER_SUM = 88,
  H_END = 96, /* bytes covered by v1 fields; the rest of the 256 is zero */
  H_TOKENIZER_HASH = 96, /* v2: the tokenizer's hash (bpe.h: bpe_hash) */
  H_END_V2 = 104,
};


static inline uint32_t rd32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static inline uint64_t rd64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}
static inline void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void wr64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

#endif
