/* Byte-pair encoding with tiktoken-format vocabularies (docs/DATA_FORMAT.md).
 *
 * A rank file holds one token per line: the token's bytes in base64, a
 * space, its rank (GPT-2's gpt2.tiktoken, cl100k_base.tiktoken, Llama 3's
 * tokenizer.model). Encoding a text is tiktoken's encode_ordinary:
 *   1. the text is cut into pieces by the pre-tokenizer's regular expression
 *      (leftmost-first matches, text between matches dropped);
 *   2. each piece, as bytes, starts as single bytes and repeatedly merges the
 *      adjacent pair whose concatenation has the lowest rank in the file;
 *   3. each final part's rank is its token id.
 * Special tokens are never read from text: the end-of-text token (named
 * <|endoftext|>, id = largest rank + 1, GPT-2's 50256) is what a caller puts
 * between documents, as tiktoken's encode does with allowed_special.
 *
 * Text is UTF-8. A byte that is not part of a valid UTF-8 sequence reads as
 * U+FFFD, one per byte: what tiktoken's encode_ordinary does with a str
 * decoded with errors="surrogateescape" (it replaces each lone surrogate).
 *
 * Pre-tokenizers: "gpt2" (tiktoken's r50k/GPT-2 pattern), "cl100k"
 * (tiktoken's cl100k_base pattern), "llama3" (Meta's Llama 3 pattern), or any
 * PCRE2 pattern (UTF and Unicode-property mode, $ only at the end).
 *
 * A bpe_tokenizer is read-only once opened: any number of threads may encode
 * with it at once, each with its own bpe_worker (matcher state and a cache of
 * piece encodings). */
#ifndef BOOST_BPE_H
#define BOOST_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define BPE_EOT_TEXT "<|endoftext|>"

typedef struct bpe_tokenizer bpe_tokenizer;
typedef struct bpe_worker bpe_worker;

/* A growable token list (free with bpe_tokens_free). */
typedef struct {
  int32_t *v;
  size_t n, cap;
} bpe_tokens;

/* The pattern of a named pre-tokenizer, NULL when the name is unknown. */
const char *bpe_pretokenizer_pattern(const char *name);

/* Reads the rank file at path and compiles the pre-tokenizer: `pretok` names
 * one ("gpt2", "cl100k", "llama3"); or `pattern` gives one (pretok NULL,
 * the tokenizer is then named "custom"). A malformed line fails with
 * "PATH:LINE: what is wrong". */
int bpe_open(const char *path, const char *pretok, const char *pattern, bpe_tokenizer **out, boost_status *err);
void bpe_close(bpe_tokenizer *t);

/* Token ids are [0, bpe_vocab_size): the ranks, then the end-of-text token. */
uint32_t bpe_vocab_size(const bpe_tokenizer *t);
int32_t bpe_eot(const bpe_tokenizer *t);
/* "bpe-<pre-tokenizer>", e.g. "bpe-gpt2". */
const char *bpe_name(const bpe_tokenizer *t);
/* XXH3-64 of the rank file's bytes, seeded with the pattern's XXH3-64: two
 * tokenizers that could encode a text differently have different hashes. */
uint64_t bpe_hash(const bpe_tokenizer *t);
const char *bpe_pattern(const bpe_tokenizer *t);

/* The bytes of token id (the end-of-text token gives BPE_EOT_TEXT); NULL for
 * an id outside the vocabulary. */
const uint8_t *bpe_token_bytes(const bpe_tokenizer *t, int32_t id, size_t *len);
/* The rank of exactly these bytes, -1 when they are not a token. */
int32_t bpe_rank_of(const bpe_tokenizer *t, const uint8_t *bytes, size_t len);

/* The merge that makes token id (for merges.txt): BPE on its bytes with
 * only the ranks below id ends in two parts; *split gets the first one's
 * length. -1 when it does not (a single byte, or a token BPE never makes). */
int bpe_last_merge(const bpe_tokenizer *t, int32_t id, size_t *split);

bpe_worker *bpe_worker_new(const bpe_tokenizer *t);
void bpe_worker_free(bpe_worker *w);

/* Appends the tokens of text[0, len) to out (encode_ordinary). Fails only
 * when the regular expression engine does (its message in err). */
int bpe_encode(bpe_worker *w, const uint8_t *text, size_t len, bpe_tokens *out, boost_status *err);

/* Encodes n documents over `threads` OpenMP threads (0: OpenMP's default),
 * outs[i] gets document i's tokens (appended). */
int bpe_encode_batch(const bpe_tokenizer *t, size_t n, const uint8_t *const *texts, const size_t *lens,
                     bpe_tokens *outs, int threads, boost_status *err);

void bpe_tokens_push(bpe_tokens *l, int32_t tok);
void bpe_tokens_free(bpe_tokens *l);

#endif
