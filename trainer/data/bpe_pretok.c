/* The pre-tokenizer: cutting text into pieces with PCRE2 (Unicode
 * properties, possessive quantifiers and lookahead, which the patterns need;
 * JIT-compiled where the platform allows), and the UTF-8 repair. */
#include <stdlib.h>
#include <string.h>

#include "bpe_internal.h"
#include "check.h"

/* The patterns, as the reference tokenizers define them: gpt2 is tiktoken's
 * r50k_base/gpt2 pat_str, cl100k tiktoken's cl100k_base pat_str, llama3 the
 * pat_str of Meta's Llama 3 tokenizer.py. */
static const struct {
  const char *name, *pattern;
} named[] = {
    {"gpt2", "'(?:[sdmt]|ll|ve|re)| ?\\p{L}++| ?\\p{N}++| ?[^\\s\\p{L}\\p{N}]++|\\s++$|\\s+(?!\\S)|\\s"},
    {"cl100k", "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|"
               "\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s"},
    {"llama3", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
               "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
};

const char *bpe_pretokenizer_pattern(const char *name) {
  for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
    if (strcmp(name, named[i].name) == 0) return named[i].pattern;
  return NULL;
}

int bpe_pretok_compile(bpe_tokenizer *t, boost_status *err) {
  int code;
  PCRE2_SIZE at;
  /* DOLLAR_ENDONLY: tiktoken's engine reads $ as the end of the text only. */
  t->re = pcre2_compile((PCRE2_SPTR)t->pattern, PCRE2_ZERO_TERMINATED,
                        PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &code, &at, NULL);
  if (!t->re) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(code, msg, sizeof msg);
    return boost_err(err, "pre-tokenizer pattern: at offset %zu: %s", (size_t)at, (const char *)msg);
  }
  t->jit = pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE) == 0; /* else the interpreter, slower */
  return 0;
}

void bpe_matcher_init(bpe_matcher *m, const bpe_tokenizer *t) {
  m->md = pcre2_match_data_create_from_pattern(t->re, NULL);
  m->mctx = pcre2_match_context_create(NULL);
  m->stack = NULL;
  if (t->jit) {
    /* Long runs under lookahead need more than the 32 KiB default. */
    m->stack = pcre2_jit_stack_create(64 << 10, 8 << 20, NULL);
    pcre2_jit_stack_assign(m->mctx, NULL, m->stack);
  }
  BOOST_ASSERT(m->md && m->mctx);
}

void bpe_matcher_free(bpe_matcher *m) {
  pcre2_match_data_free(m->md);
  pcre2_match_context_free(m->mctx);
  if (m->stack) pcre2_jit_stack_free(m->stack);
}

/* Length of the UTF-8 sequence at b (n bytes left), 0 when it is not a valid
 * one (overlong, surrogate, above U+10FFFF, cut short). */
static size_t utf8_len(const uint8_t *b, size_t n) {
  uint8_t c = b[0];
  if (c < 0x80) return 1;
  size_t k;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    k = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    k = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    k = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (n < k || b[1] < lo || b[1] > hi) return 0;
  for (size_t i = 2; i < k; i++)
    if ((b[i] & 0xC0) != 0x80) return 0;
  return k;
}

uint8_t *bpe_utf8_repair(const uint8_t *text, size_t len, size_t *out_len) {
  size_t i = 0;
  while (i < len) {
    if (text[i] < 0x80) {
      i++;
      continue;
    }
    size_t k = utf8_len(text + i, len - i);
    if (k == 0) break;
    i += k;
  }
  if (i == len) return NULL;
  uint8_t *out = boost_realloc(NULL, 3 * len + 1, 1); /* each stray byte becomes 3 */
  memcpy(out, text, i);
  size_t o = i;
  while (i < len) {
    size_t k = utf8_len(text + i, len - i);
    if (k == 0) {
      memcpy(out + o, "\xEF\xBF\xBD", 3);
      o += 3;
      i++;
    } else {
      memcpy(out + o, text + i, k);
      o += k;
      i += k;
    }
  }
  *out_len = o;
  return out;
}

int bpe_next_piece(const bpe_tokenizer *t, bpe_matcher *m, const uint8_t *text, size_t len, size_t *pos,
                   size_t *start, size_t *end, boost_status *err) {
  while (*pos < len) {
    int rc = t->jit ? pcre2_jit_match(t->re, text, len, *pos, 0, m->md, m->mctx)
                    : pcre2_match(t->re, text, len, *pos, PCRE2_NO_UTF_CHECK, m->md, m->mctx);
    if (rc == PCRE2_ERROR_NOMATCH) {
      *pos = len;
      return 0;
    }
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      return boost_err(err, "pre-tokenizer: the regular expression engine failed at byte %zu: %s", *pos,
                       (const char *)msg);
    }
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
    *start = ov[0];
    *end = ov[1];
    if (*end > *start) {
      *pos = *end;
      return 1;
    }
    /* An empty match gives no piece: go on one character later. */
    size_t k = utf8_len(text + *end, len - *end);
    *pos = *end + (k ? k : 1);
  }
  return 0;
}
