/* Finding and checking a checkpoint's BPE tokenizer (tool_bpe.h). */
#include "tool_bpe.h"

#include <dirent.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util.h"

#define LLMC_TOKENIZER_MAGIC 20240328u

int tool_is_llmc_tokenizer(const char *path) {
  FILE *f = fopen(path, "rb");
  uint32_t magic = 0;
  const int ok = f && fread(&magic, 4, 1, f) == 1 && magic == LLMC_TOKENIZER_MAGIC;
  if (f) fclose(f);
  return ok;
}

void tool_bpe_id(const bpe_tokenizer *t, char *out, size_t outlen) {
  snprintf(out, outlen, "%s:%016" PRIx64, bpe_name(t), bpe_hash(t));
}

/* The pre-tokenizer a recorded id names ("bpe-llama3:..." -> "llama3"), into
 * out; 0 when the id is no BPE tokenizer's. */
static int recorded_pretok(const char *recorded, char *out, size_t outlen) {
  if (!recorded || strncmp(recorded, "bpe-", 4) != 0) return 0;
  const char *colon = strchr(recorded + 4, ':');
  const size_t n = colon ? (size_t)(colon - recorded - 4) : strlen(recorded + 4);
  if (n + 1 > outlen) return 0;
  memcpy(out, recorded + 4, n);
  out[n] = 0;
  return 1;
}

/* Opens dir's *.tiktoken files and tokenizer.json in turn until one's id is `want`. */
static bpe_tokenizer *search_dir(const char *dir, const char *pretok, const char *want) {
  DIR *d = opendir(dir);
  if (!d) return NULL;
  bpe_tokenizer *found = NULL;
  struct dirent *e;
  while (!found && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || (!boost_ends_with(e->d_name, ".tiktoken") && strcmp(e->d_name, "tokenizer.json")))
      continue;
    char path[4096], id[96];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    bpe_tokenizer *t = NULL;
    if (bpe_open(path, pretok, NULL, &t, NULL) != 0) continue;
    tool_bpe_id(t, id, sizeof id);
    if (!strcmp(id, want))
      found = t;
    else
      bpe_close(t);
  }
  closedir(d);
  return found;
}

int tool_bpe_open(const char *recorded, const char *path, const char *ckpt_path, bpe_tokenizer **out,
                  boost_status *err) {
  *out = NULL;
  char pretok[32] = "gpt2";
  const int has_bpe = recorded_pretok(recorded, pretok, sizeof pretok);
  if (has_bpe && !strcmp(pretok, "custom"))
    return boost_err(err, "the checkpoint's tokenizer %s has a custom pre-tokenizer pattern, which this program "
                          "cannot take", recorded);
  if (path) {
    if (bpe_open(path, pretok, NULL, out, err) != 0) return -1;
    char id[96];
    tool_bpe_id(*out, id, sizeof id);
    if (recorded && recorded[0] && strcmp(id, recorded)) {
      bpe_close(*out);
      *out = NULL;
      return boost_err(err, "--tokenizer %s is tokenizer %s, the checkpoint was trained on %s: give its rank file",
                       path, id, recorded);
    }
    return 0;
  }
  if (!has_bpe) return 0;
  char *list = boost_strdup(getenv("BOOST_TOKENIZER_PATH") ? getenv("BOOST_TOKENIZER_PATH") : "");
  for (char *save = NULL, *dir = strtok_r(list, ":", &save); dir && !*out; dir = strtok_r(NULL, ":", &save))
    *out = search_dir(dir, pretok, recorded);
  boost_free(list);
  char *copy = boost_strdup(ckpt_path), *parent = boost_strdup(ckpt_path);
  const char *cdir = dirname(copy); /* a file's folder, or a checkpoint directory's parent */
  if (!*out) *out = search_dir(ckpt_path, pretok, recorded);
  if (!*out) *out = search_dir(cdir, pretok, recorded);
  if (!*out) *out = search_dir(dirname(dirname(parent)), pretok, recorded);
  boost_free(copy);
  boost_free(parent);
  if (*out) return 0;
  return boost_err(err, "the checkpoint was trained on tokenizer %s and no rank file or tokenizer.json found has its hash (looked in "
                        "$BOOST_TOKENIZER_PATH and next to the checkpoint): give it with --tokenizer FILE", recorded);
}
