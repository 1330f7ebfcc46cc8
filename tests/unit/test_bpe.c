/* The BPE encoder (trainer/data/bpe.h) on a small hand-made vocabulary:
 * the merge order (lowest rank first, leftmost of equals), whole-piece
 * tokens, the pre-tokenizers' pieces, invalid UTF-8, the batch over threads
 * and the merges merges.txt lists. tiktoken itself is the reference in
 * tests/cli/bpe_tiktoken.sh. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpe.h"

static char g_path[64];
static bpe_tokenizer *g_tok;

/* The 256 bytes at ranks 0..255, then these merges in rank order. */
static const char *const g_merges[] = {"aa", "ab", "aab", " a", "cd", "cde", "hello", "he", "ll", "hell", "\xef\xbf\xbd\xef\xbf\xbd"};
enum { NMERGE = sizeof g_merges / sizeof *g_merges };

static void b64(const unsigned char *s, size_t n, char *out) {
  static const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
    out[o++] = a[v >> 18 & 63];
    out[o++] = a[v >> 12 & 63];
    out[o++] = i + 1 < n ? a[v >> 6 & 63] : '=';
    out[o++] = i + 2 < n ? a[v & 63] : '=';
  }
  out[o] = 0;
}

static void setup(void) {
  snprintf(g_path, sizeof g_path, "/tmp/boost-test-bpe-XXXXXX");
  int fd = mkstemp(g_path);
  cr_assert(fd >= 0);
  FILE *f = fdopen(fd, "w");
  char buf[64];
  for (int b = 0; b < 256; b++) {
    unsigned char c = (unsigned char)b;
    b64(&c, 1, buf);
    fprintf(f, "%s %d\n", buf, b);
  }
  for (int i = 0; i < NMERGE; i++) {
    b64((const unsigned char *)g_merges[i], strlen(g_merges[i]), buf);
    fprintf(f, "%s %d\n", buf, 256 + i);
  }
  fclose(f);
  boost_status err = {0};
  cr_assert_eq(bpe_open(g_path, "gpt2", NULL, &g_tok, &err), 0, "%s", err.msg);
}
static void teardown(void) {
  bpe_close(g_tok);
  unlink(g_path);
}
TestSuite(bpe, .init = setup, .fini = teardown);

static void expect(const char *text, const int32_t *want, size_t n) {
  bpe_worker *w = bpe_worker_new(g_tok);
  bpe_tokens out = {0};
  for (int pass = 0; pass < 2; pass++) { /* the second pass meets the piece cache */
    out.n = 0;
    cr_assert_eq(bpe_encode(w, (const uint8_t *)text, strlen(text), &out, NULL), 0);
    cr_assert_eq(out.n, n, "\"%s\": %zu tokens, expected %zu", text, out.n, n);
    for (size_t i = 0; i < n; i++) cr_assert_eq(out.v[i], want[i], "\"%s\" token %zu: %d, expected %d", text, i, out.v[i], want[i]);
  }
  bpe_tokens_free(&out);
  bpe_worker_free(w);
}
#define R(i) (256 + (i)) /* rank of g_merges[i] */

Test(bpe, merges_lowest_rank_first) {
  expect("aaab", (int32_t[]){R(0), R(1)}, 2);   /* aa at 0 first (leftmost of equals), then ab */
  expect("aab", (int32_t[]){R(2)}, 1);           /* a whole piece that is a token */
  expect("cdef", (int32_t[]){R(5), 'f'}, 2);
  expect("hello", (int32_t[]){R(6)}, 1);
  expect("hellx", (int32_t[]){R(9), 'x'}, 2); /* he, ll, then hell */
}

Test(bpe, pretokenizer_pieces) {
  /* " ?\p{L}+" takes " aab" whole: aa (256) before " a" (259), then aab */
  expect(" aab", (int32_t[]){' ', R(2)}, 2);
  expect(" ab", (int32_t[]){' ', R(1)}, 2); /* ab (257) before " a" (259) */
  expect(" ac", (int32_t[]){R(3), 'c'}, 2);
  expect("it's 12", (int32_t[]){'i', 't', '\'', 's', ' ', '1', '2'}, 7);
  expect("a  b", (int32_t[]){'a', ' ', ' ', 'b'}, 4);
}

Test(bpe, invalid_utf8_reads_as_replacement) {
  expect("\xff\xfe", (int32_t[]){R(10)}, 1); /* two stray bytes: two U+FFFD, merged */
  expect("\xc3", (int32_t[]){0xef, 0xbf, 0xbd}, 3);
}

Test(bpe, batch_equals_one_by_one) {
  const char *docs[] = {"aaab", "hello world", "", "cdef cdef", "\xff"};
  const uint8_t *t[5];
  size_t len[5];
  for (int i = 0; i < 5; i++) t[i] = (const uint8_t *)docs[i], len[i] = strlen(docs[i]);
  bpe_tokens out[5] = {{0}}, one = {0};
  cr_assert_eq(bpe_encode_batch(g_tok, 5, t, len, out, 2, NULL), 0);
  bpe_worker *w = bpe_worker_new(g_tok);
  for (int i = 0; i < 5; i++) {
    one.n = 0;
    bpe_encode(w, t[i], len[i], &one, NULL);
    cr_assert_eq(out[i].n, one.n);
    if (one.n) cr_assert_eq(memcmp(out[i].v, one.v, one.n * sizeof *one.v), 0);
    bpe_tokens_free(&out[i]);
  }
  bpe_tokens_free(&one);
  bpe_worker_free(w);
}

Test(bpe, vocabulary_and_merges) {
  cr_assert_eq(bpe_vocab_size(g_tok), 256 + NMERGE + 1);
  cr_assert_eq(bpe_eot(g_tok), 256 + NMERGE);
  size_t n, split;
  cr_assert_str_eq((const char *)bpe_token_bytes(g_tok, bpe_eot(g_tok), &n), BPE_EOT_TEXT);
  cr_assert_eq(bpe_last_merge(g_tok, 'a', &split), -1);
  cr_assert_eq(bpe_last_merge(g_tok, R(2), &split), 0); /* aab = aa + b */
  cr_assert_eq(split, 2);
  cr_assert_eq(bpe_last_merge(g_tok, R(6), &split), -1); /* hello: lower ranks reach no two parts */
  cr_assert_eq(bpe_last_merge(g_tok, R(9), &split), 0);  /* hell = he + ll */
  cr_assert_eq(split, 2);
  cr_assert_eq(bpe_rank_of(g_tok, (const uint8_t *)"cde", 3), R(5));
  cr_assert_eq(bpe_rank_of(g_tok, (const uint8_t *)"cdx", 3), -1);
}

Test(bpe, named_pretokenizers_and_bad_patterns) {
  cr_assert_not_null(bpe_pretokenizer_pattern("cl100k"));
  cr_assert_not_null(bpe_pretokenizer_pattern("llama3"));
  cr_assert_null(bpe_pretokenizer_pattern("gpt4"));
  bpe_tokenizer *t = NULL;
  boost_status err = {0};
  cr_assert_eq(bpe_open(g_path, NULL, "(\\p{L}", &t, &err), -1);
  cr_assert(strstr(err.msg, "pre-tokenizer pattern"), "%s", err.msg);
  cr_assert_null(t);
  cr_assert_eq(bpe_open(g_path, "llama3", NULL, &t, &err), 0, "%s", err.msg);
  cr_assert_neq(bpe_hash(t), bpe_hash(g_tok)); /* same file, other pattern */
  cr_assert_str_eq(bpe_name(t), "bpe-llama3");
  bpe_close(t);
}
