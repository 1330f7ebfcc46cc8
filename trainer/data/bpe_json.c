/* Reading a Hugging Face tokenizer.json (GPT-2 style: a byte-level BPE model)
 * into the same tables a tiktoken rank file gives (docs/DATA_FORMAT.md).
 *
 * The encoder merges by rank, the lowest first (tiktoken); a tokenizer.json
 * merges by the order of model.merges. The two agree when a token's id is its
 * rank and the merges are listed in id order, as in GPT-2's files. So the
 * ids are taken as the ranks, and every merge is checked: both parts and
 * their join are tokens, the joins' ids rise with the merge order, and BPE on
 * the join's bytes with only the lower ids ends in exactly these two parts
 * (the encoder makes the merge the file lists). Every token longer than one
 * byte must be some merge's join (else the encoder could make a token the
 * file's BPE never does). A file that fails a check is refused, naming the
 * merge or token, not re-ranked: re-ranking would change the ids a model
 * sees. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "bpe_internal.h"
#include "check.h"

/* GPT-2's byte-level alphabet: the printable bytes stand for themselves,
 * the others (controls, space, 0x7f-0xa0, 0xad) for U+0100 on, in byte order. */
#define BYTE_LEVEL_CPS 324
static void byte_level_table(int16_t byte_of[BYTE_LEVEL_CPS]) {
  for (int c = 0; c < BYTE_LEVEL_CPS; c++) byte_of[c] = -1;
  int next = 256;
  for (int b = 0; b < 256; b++) {
    const int printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
    byte_of[printable ? b : next++] = (int16_t)b;
  }
}

/* The bytes a byte-level string stands for, into out (room for strlen(s));
 * -1 when s holds a character outside the alphabet. */
static long byte_level_decode(const int16_t *byte_of, const char *s, uint8_t *out) {
  const uint8_t *p = (const uint8_t *)s;
  long n = 0;
  while (*p) {
    uint32_t cp;
    if (p[0] < 0x80) {
      cp = p[0];
      p += 1;
    } else if ((p[0] & 0xe0) == 0xc0 && (p[1] & 0xc0) == 0x80) {
      cp = ((uint32_t)(p[0] & 0x1f) << 6) | (p[1] & 0x3f);
      p += 2;
    } else {
      return -1; /* three-byte and longer characters are all above U+0143 */
    }
    if (cp >= BYTE_LEVEL_CPS || byte_of[cp] < 0) return -1;
    out[n++] = (uint8_t)byte_of[cp];
  }
  return n;
}

typedef struct {
  const char *path;
  int16_t byte_of[BYTE_LEVEL_CPS];
  bpe_tokenizer *t;
} json_reader;

/* The pre-tokenizer: byte-level with GPT-2's regular expression, no prefix
 * space ("gpt2"); anything else is refused. */
static int read_pretok(const json_reader *r, const cJSON *root, const char **pretok, boost_status *err) {
  const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(pt, "type");
  if (!cJSON_IsString(type))
    return boost_err(err, "%s: no pre_tokenizer.type (boost reads byte-level GPT-2-style tokenizer.json files)",
                     r->path);
  if (strcmp(type->valuestring, "ByteLevel"))
    return boost_err(err, "%s: pre_tokenizer is \"%s\", boost reads the byte-level (\"ByteLevel\") one of GPT-2", r->path,
                     type->valuestring);
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pt, "add_prefix_space")))
    return boost_err(err, "%s: pre_tokenizer.add_prefix_space is true, boost's GPT-2 pre-tokenizer adds none", r->path);
  if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(pt, "use_regex")))
    return boost_err(err, "%s: pre_tokenizer.use_regex is false, boost's GPT-2 pre-tokenizer splits with it", r->path);
  *pretok = "gpt2";
  return 0;
}

/* The end-of-text token's id from added_tokens (-1 when none); any other
 * added token is refused: the encoder has only that one special token. */
static int read_added(const json_reader *r, const cJSON *root, long *eot, boost_status *err) {
  *eot = -1;
  const cJSON *tok;
  cJSON_ArrayForEach(tok, cJSON_GetObjectItemCaseSensitive(root, "added_tokens")) {
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(tok, "content");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(tok, "id");
    if (!cJSON_IsString(content) || !cJSON_IsNumber(id))
      return boost_err(err, "%s: an added_tokens entry without content or id", r->path);
    if (strcmp(content->valuestring, BPE_EOT_TEXT))
      return boost_err(err, "%s: added token \"%.40s\" (id %d): boost's BPE has one special token, " BPE_EOT_TEXT,
                       r->path, content->valuestring, id->valueint);
    *eot = (long)id->valuedouble;
  }
  return 0;
}

/* Two tokens with one id: said here, as bpe_build_tables would name a line. */
static int check_unique_ids(const char *path, const bpe_entry *v, size_t n, boost_status *err) {
  uint32_t top = 0;
  for (size_t i = 0; i < n; i++)
    if (v[i].rank > top) top = v[i].rank;
  uint8_t *seen = boost_calloc((size_t)top + 1, 1);
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++)
    if (seen[v[i].rank]++) rc = boost_err(err, "%s: model.vocab gives id %u to two tokens", path, v[i].rank);
  boost_free(seen);
  return rc;
}

/* model.vocab into the tables: id = rank, the end-of-text token left out. */
static int read_vocab(json_reader *r, const cJSON *vocab, long eot, boost_status *err) {
  bpe_tokenizer *t = r->t;
  size_t room = 1, n = 0, cap = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, vocab) room += strlen(it->string);
  t->bytes = boost_calloc(room, 1);
  bpe_entry *v = NULL;
  size_t used = 0;
  int rc = 0;
  cJSON_ArrayForEach(it, vocab) {
    if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= (double)INT32_MAX - 1 ||
        it->valuedouble != (double)(long)it->valuedouble) {
      rc = boost_err(err, "%s: model.vocab[\"%.40s\"] is not a token id (a whole number below 2^31 - 1)", r->path,
                     it->string);
      break;
    }
    if (!strcmp(it->string, BPE_EOT_TEXT) && (long)it->valuedouble == eot) continue;
    long k = byte_level_decode(r->byte_of, it->string, t->bytes + used);
    if (k <= 0) {
      rc = boost_err(err, "%s: model.vocab token \"%.40s\" is not in GPT-2's byte-level alphabet", r->path, it->string);
      break;
    }
    bpe_entries_grow(&v, &cap, n + 1);
    v[n] = (bpe_entry){.rank = (uint32_t)it->valuedouble, .line = (uint32_t)n + 1, .off = used, .len = (uint32_t)k};
    used += (size_t)k;
    n++;
  }
  if (rc == 0 && n == 0) rc = boost_err(err, "%s: model.vocab is empty", r->path);
  if (rc == 0) rc = check_unique_ids(r->path, v, n, err);
  if (rc == 0) rc = bpe_build_tables(t, r->path, v, n, err);
  free(v);
  if (rc == 0 && eot >= 0 && eot != (long)t->nranks)
    rc = boost_err(err, "%s: " BPE_EOT_TEXT " has id %ld, boost's end-of-text token is the id after the vocabulary (%u)",
                   r->path, eot, t->nranks);
  return rc;
}

/* A merge's two parts: "a b" or ["a", "b"]; 0 when it is neither. */
static int merge_parts(const cJSON *m, char *buf, size_t buflen, const char **a, const char **b) {
  if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(cJSON_GetArrayItem(m, 0)) &&
      cJSON_IsString(cJSON_GetArrayItem(m, 1))) {
    *a = cJSON_GetArrayItem(m, 0)->valuestring;
    *b = cJSON_GetArrayItem(m, 1)->valuestring;
    return 1;
  }
  if (!cJSON_IsString(m) || strlen(m->valuestring) >= buflen) return 0;
  strcpy(buf, m->valuestring);
  char *sp = strchr(buf, ' ');
  if (!sp || sp == buf || !sp[1] || strchr(sp + 1, ' ')) return 0;
  *sp = 0;
  *a = buf;
  *b = sp + 1;
  return 1;
}

/* The id of byte-level string s (-1: not a token; -2: not byte-level). */
static long token_id(const json_reader *r, const char *s, uint8_t *scratch, size_t *len) {
  long k = byte_level_decode(r->byte_of, s, scratch);
  if (k <= 0) return -2;
  *len = (size_t)k;
  uint32_t id = bpe_lookup(r->t, scratch, (size_t)k);
  return id == BPE_NO_RANK ? -1 : (long)id;
}

static int check_merges(const json_reader *r, const cJSON *merges, boost_status *err) {
  const bpe_tokenizer *t = r->t;
  if (!cJSON_IsArray(merges)) return boost_err(err, "%s: no model.merges list", r->path);
  uint8_t *made = boost_calloc(t->nranks, 1);
  uint8_t *sa = boost_calloc(1024, 1), *sb = boost_calloc(1024, 1), *sj = boost_calloc(2048, 1);
  char buf[1024];
  long prev = -1, i = 0;
  int rc = 0;
  const cJSON *m;
  cJSON_ArrayForEach(m, merges) {
    const char *a, *b;
    size_t la = 0, lb = 0, split = 0;
    i++;
    if (!merge_parts(m, buf, sizeof buf, &a, &b) || strlen(a) >= 1024 || strlen(b) >= 1024) {
      rc = boost_err(err, "%s: model.merges[%ld] is neither \"A B\" nor [\"A\", \"B\"]", r->path, i - 1);
      break;
    }
    const long ia = token_id(r, a, sa, &la), ib = token_id(r, b, sb, &lb);
    if (ia < 0 || ib < 0) {
      rc = boost_err(err, "%s: model.merges[%ld] (\"%.40s %.40s\") names \"%.40s\", which is not in model.vocab", r->path,
                     i - 1, a, b, ia < 0 ? a : b);
      break;
    }
    memcpy(sj, sa, la);
    memcpy(sj + la, sb, lb);
    const uint32_t ij = bpe_lookup(t, sj, la + lb);
    if (ij == BPE_NO_RANK) {
      rc = boost_err(err, "%s: model.merges[%ld] (\"%.40s %.40s\") makes a token that is not in model.vocab", r->path,
                     i - 1, a, b);
      break;
    }
    if ((long)ij <= prev || bpe_last_merge(t, (int32_t)ij, &split) != 0 || split != la) {
      rc = boost_err(err,
                     "%s: model.merges[%ld] (\"%.40s %.40s\", id %u) is not the merge boost's encoder makes "
                     "(it merges by token id: the merges must be in id order, each the one BPE on the lower ids gives)",
                     r->path, i - 1, a, b, ij);
      break;
    }
    prev = (long)ij;
    made[ij] = 1;
  }
  for (uint32_t id = 0; rc == 0 && id < t->nranks; id++)
    if (t->tok_len[id] > 1 && !made[id])
      rc = boost_err(err, "%s: token id %u (%u bytes) is made by no merge in model.merges", r->path, id, t->tok_len[id]);
  boost_free(made);
  boost_free(sa);
  boost_free(sb);
  boost_free(sj);
  return rc;
}

bool bpe_file_is_json(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  int c;
  while ((c = fgetc(f)) == ' ' || c == '\t' || c == '\r' || c == '\n') {
  }
  fclose(f);
  return c == '{';
}

int bpe_json_read(bpe_tokenizer *t, const char *path, uint64_t *file_hash, const char **pretok, boost_status *err) {
  uint8_t *data = NULL;
  size_t len = 0;
  if (bpe_read_file(path, &data, &len, err)) return -1;
  *file_hash = XXH3_64bits(data, len);
  cJSON *root = cJSON_ParseWithLength((const char *)data, len);
  if (!root) {
    const char *at = cJSON_GetErrorPtr();
    const long off = at ? (long)(at - (const char *)data) : -1;
    boost_free(data);
    return boost_err(err, "%s: not valid JSON (near byte %ld; a tokenizer.json or a tiktoken rank file)", path, off);
  }
  json_reader r = {.path = path, .t = t};
  byte_level_table(r.byte_of);
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
  const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
  long eot = -1;
  int rc = 0;
  if (!cJSON_IsObject(model) || !cJSON_IsObject(vocab))
    rc = boost_err(err, "%s: no model.vocab object (a tokenizer.json's BPE model has vocab and merges)", path);
  else if (cJSON_IsString(type) && strcmp(type->valuestring, "BPE"))
    rc = boost_err(err, "%s: model.type is \"%s\", boost reads BPE tokenizers", path, type->valuestring);
  else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback")))
    rc = boost_err(err, "%s: model.byte_fallback is true, a byte-level BPE needs none", path);
  if (rc == 0) rc = read_pretok(&r, root, pretok, err);
  if (rc == 0) rc = read_added(&r, root, &eot, err);
  if (rc == 0) rc = read_vocab(&r, vocab, eot, err);
  if (rc == 0) rc = check_merges(&r, cJSON_GetObjectItemCaseSensitive(model, "merges"), err);
  cJSON_Delete(root);
  boost_free(data);
  return rc;
}
