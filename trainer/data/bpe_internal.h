/* Shared between the BPE modules (bpe_ranks.c, bpe_pretok.c, bpe_encode.c);
 * callers use bpe.h. */
#ifndef BOOST_BPE_INTERNAL_H
#define BOOST_BPE_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>

#include "bpe.h"

#define BPE_NO_RANK UINT32_MAX

struct bpe_tokenizer {
  char name[32];
  char *pattern;
  uint64_t hash;
  uint8_t *bytes;      /* every token's bytes, back to back */
  uint64_t *tok_off;   /* per id: offset into bytes */
  uint32_t *tok_len;   /* per id: length, 0 for an id no line gave */
  uint32_t nranks;     /* largest rank + 1 */
  uint32_t *slots;     /* open addressing: id + 1, 0 = empty */
  uint32_t mask;       /* slots - 1 (a power of two minus one) */
  pcre2_code *re;
  bool jit;
};

/* Rank of bytes[0, len) or BPE_NO_RANK (bpe_ranks.c). */
uint32_t bpe_lookup(const bpe_tokenizer *t, const uint8_t *b, size_t len);
/* Fills t's ranks from the rank file at path (bpe_ranks.c); file_hash gets
 * the XXH3-64 of its bytes. */
int bpe_ranks_read(bpe_tokenizer *t, const char *path, uint64_t *file_hash, boost_status *err);
void bpe_ranks_free(bpe_tokenizer *t);

/* The whole file at path (bpe_ranks.c), NUL-terminated (boost_free it). */
int bpe_read_file(const char *path, uint8_t **data, size_t *len, boost_status *err);
/* One token: its rank, the line (or entry) that gave it, its bytes at
 * t->bytes + off. */
typedef struct {
  uint32_t rank, line;
  uint64_t off;
  uint32_t len;
} bpe_entry;
void bpe_entries_grow(bpe_entry **v, size_t *cap, size_t need);
/* The id tables and the hash table from v (t->bytes filled); fails on a rank
 * or token given twice, or a byte that is no token (bpe_ranks.c). */
int bpe_build_tables(bpe_tokenizer *t, const char *path, const bpe_entry *v, size_t n, boost_status *err);

/* Fills t's ranks from the Hugging Face tokenizer.json at path (bpe_json.c):
 * token ids as ranks, every merge checked to be one the encoder makes;
 * *pretok gets the pre-tokenizer it names ("gpt2"). */
int bpe_json_read(bpe_tokenizer *t, const char *path, uint64_t *file_hash, const char **pretok, boost_status *err);
/* Whether the file at path looks like JSON (its first non-blank byte is '{'). */
bool bpe_file_is_json(const char *path);

/* Compiles t->pattern into t->re (bpe_pretok.c). */
int bpe_pretok_compile(bpe_tokenizer *t, boost_status *err);

/* One thread's matcher (bpe_pretok.c). */
typedef struct {
  pcre2_match_data *md;
  pcre2_match_context *mctx;
  pcre2_jit_stack *stack;
} bpe_matcher;
void bpe_matcher_init(bpe_matcher *m, const bpe_tokenizer *t);
void bpe_matcher_free(bpe_matcher *m);
/* Next piece at or after *pos: 1 with [*start, *end), 0 at the end, -1 on an
 * engine failure (err). */
int bpe_next_piece(const bpe_tokenizer *t, bpe_matcher *m, const uint8_t *text, size_t len, size_t *pos,
                   size_t *start, size_t *end, boost_status *err);
/* The merges of a long piece, as the scan makes them, in O(n log n)
 * (bpe_long.c). */
void bpe_merge_long(const bpe_tokenizer *t, const uint8_t *p, size_t n, bpe_tokens *out);

/* When text is not valid UTF-8: a copy (malloc) with every stray byte as
 * U+FFFD, its length in *out_len; NULL when text is valid as it is. */
uint8_t *bpe_utf8_repair(const uint8_t *text, size_t len, size_t *out_len);

#endif
