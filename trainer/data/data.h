/* Token data: shard files, the byte-level tokenizer, the loader and the
 * deterministic sample order.
 *
 * Formats read (see docs/DATA_FORMAT.md):
 *   - "boost token shard" v1 (magic "BOOSTTOK"): written by boost-data (its
 *     writer: tools/data/data_writer.h); 2- or 4-byte tokens, vocab size, tokenizer name and an
 *     XXH3-64 checksum of the token payload in a 256-byte little-endian header.
 *   - llm.c .bin shards: 256 int32 header, magic 20240520 / version 1 (uint16
 *     tokens, GPT-2) or magic 20240801 / version 7 (uint32 tokens, LLaMA 3),
 *     token count in header[2]. They carry no vocab size and no checksum: the
 *     vocab of such a shard is reported as max token + 1.
 *
 * A data_source is one or more shards memory-mapped read-only and seen as one
 * token stream (shards concatenated in order). Everything is validated when it
 * is opened (size vs header count, magic, version, checksum, token < vocab), so
 * reading samples afterwards cannot fail.
 *
 * Samples: a split is a contiguous token range cut into non-overlapping windows
 * of seq_len + 1 tokens with stride seq_len (the last token of a window is the
 * first of the next). Training reads, in the shuffled order (the default),
 * window perm(epoch)[i % n] for global sample index i, epoch = i / n, where
 * perm is a keyed pseudo-random bijection of [0, n) computed on the fly: the
 * same (seed, i) always gives the same tokens however many data-parallel ranks
 * share the index space. In the sequential order it reads window i % n: the
 * stored order, so a stretch of a shard meets consecutive steps.
 *
 * All functions that can fail on user input return NULL / -1 and write one
 * line (no newline) naming the file and the problem into err. Reading from an
 * open source is thread-safe (nothing is mutated).
 */
#ifndef BOOST_DATA_H
#define BOOST_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define DATA_MAGIC "BOOSTTOK"       /* 8 bytes, no terminator in the file */
#define DATA_VERSION 1u             /* written when the tokenizer has no file (byte-v1) */
#define DATA_VERSION_HASHED 2u      /* v1 + the tokenizer's hash; read: 1 and 2 */
#define DATA_HEADER_BYTES 256u      /* header size written by v1 */
#define DATA_TOKENIZER_MAX 32       /* tokenizer name field, NUL-padded */
#define DATA_BYTE_TOKENIZER "byte-v1"
#define DATA_BYTE_EOT 256           /* end-of-text token of byte-v1 */
#define DATA_BYTE_VOCAB 257         /* 256 byte values + EOT */
#define DATA_NO_EOT UINT32_MAX      /* header eot field when there is none */

#define LLMC_MAGIC_GPT2 20240520    /* version 1, uint16 tokens */
#define LLMC_MAGIC_LLAMA3 20240801  /* version 7, uint32 tokens */
#define LLMC_HEADER_BYTES 1024u     /* 256 x int32 */

/* ---- shard description (--info, logging) ---- */

typedef enum { DATA_FORMAT_BOOST = 1, DATA_FORMAT_LLMC = 2 } data_format;

typedef struct {
  data_format format;
  uint32_t version;        /* boost: 1; llm.c: header[1] */
  uint32_t header_bytes;   /* offset of the first token */
  uint32_t token_bytes;    /* 2 or 4 */
  uint32_t vocab_size;     /* from the header; 0 for llm.c (unknown) */
  uint32_t eot_token;      /* DATA_NO_EOT if none/unknown */
  uint64_t num_tokens;
  uint64_t num_documents;  /* boost: from the header (0 = unknown); llm.c: 0 */
  uint64_t checksum;       /* boost: XXH3-64 of the payload; llm.c: 0 */
  uint32_t max_token;      /* largest token present (0 if no tokens) */
  char tokenizer[DATA_TOKENIZER_MAX + 1]; /* boost: header; llm.c: "" */
  uint64_t tokenizer_hash; /* v2: hash of the tokenizer's files; 0: none recorded */
} data_shard_info;

/* Open, fully validate and describe one shard file (either format). */
int data_shard_info_read(const char *path, data_shard_info *info, boost_status *err);

/* ---- loader ---- */

typedef struct data_source data_source;

/* path: one shard file, a comma-separated list of files/directories, or a
 * directory (its *.tok and *.bin files, not recursive, in sorted order).
 * Into *out; -1 (and *out NULL) with a one-line message when a shard is
 * missing or malformed. */
int data_open(const char *path, data_source **out, boost_status *err);
void data_close(data_source *src);
int64_t data_num_tokens(const data_source *src);
/* Max over shards of the header vocab (boost) or max token + 1 (llm.c). */
int data_vocab_size(const data_source *src);
int data_num_shards(const data_source *src);
/* The tokenizer the shards record (data_open refuses shards that disagree),
 * as "NAME:HASH" (v2 shards: bpe-gpt2:7175d6c8b74bd913), "NAME" (v1:
 * byte-v1) or "" (llm.c shards record none). */
void data_tokenizer_id(const data_source *src, char *out, size_t outlen);

/* Copy tokens [start, start + count) of the concatenated stream. */
void data_read_tokens(const data_source *src, int64_t start, int64_t count, int32_t *out);

/* ---- splits and samples ---- */

typedef struct {
  const data_source *src; /* not owned; must outlive the split */
  int64_t start;          /* first token of the range */
  int64_t num_tokens;     /* tokens in the range */
  int seq_len;
  int64_t num_samples;    /* windows: (num_tokens - 1) / seq_len, 0 if empty */
} data_split;

/* Validation = the last val_fraction of the tokens (rounded, at least
 * seq_len + 1 tokens when val_fraction > 0), train = the tokens before it.
 * val_fraction in [0, 1). Fails if train (or val, when requested) cannot hold
 * one sample of seq_len + 1 tokens. val is left empty (0 samples) when
 * val_fraction == 0; val may be NULL then. */
int data_split_make(const data_source *src, double val_fraction, int seq_len, data_split *train,
                    data_split *val, boost_status *err);
int64_t data_split_num_samples(const data_split *split);

/* The order training reads windows in (config key data.order). */
typedef enum { DATA_ORDER_SHUFFLED = 0, DATA_ORDER_SEQUENTIAL, DATA_ORDER_COUNT } data_order;

/* The window training sample i >= 0 reads in `order` (seed: shuffled only). */
int64_t data_sample_window(const data_split *split, data_order order, uint64_t seed, int64_t global_index);

/* Shuffled training sample at global index i >= 0 (any number of epochs):
 * inputs[t] = tok[w + t], targets[t] = tok[w + t + 1], t < seq_len, where
 * w = start + seq_len * data_permute(n, seed, i / n, i % n). */
void data_get_sample(const data_split *split, uint64_t seed, int64_t global_index, int32_t *inputs,
                     int32_t *targets);

/* The global index of sequence b of micro-batch `micro` of a step whose
 * first sample is `cursor`, on data-parallel replica dp_rank of dp, B
 * sequences per micro-batch: a step takes samples [cursor, cursor +
 * micro-batches * dp * B), micro-batch by micro-batch, replica by replica,
 * whatever the layout. */
static inline int64_t data_sample_index(int64_t cursor, int micro, int dp, int dp_rank, int B, int b) {
  return cursor + ((int64_t)micro * dp + dp_rank) * B + b;
}

/* Window `index` in stored order, 0 <= index < num_samples (validation). */
void data_get_window(const data_split *split, int64_t index, int32_t *inputs, int32_t *targets);

/* Keyed bijection of [0, n): a balanced Feistel network over the smallest
 * even-bit power of two >= n with cycle walking. n >= 1, 0 <= i < n. */
int64_t data_permute(int64_t n, uint64_t seed, uint64_t epoch, int64_t i);

#endif
