/* Runs the local level's readers (tools/testkit/local_fuzz_one.h: manifest, state
 * part, partner message) on files.
 *
 *   local_fuzz_files FILE|DIR...
 *       every file (a directory: every file in it) through local_fuzz_one;
 *       one line per file, "NAME: accepted" or "NAME: refused: WHY". Exit 0
 *       unless a file cannot be read: the point is that nothing crashes (the
 *       seed regression test, tests/cli/local_fuzz_corpus.sh).
 *   local_fuzz_files --make-seeds DIR
 *       writes the seeds (tests/fuzz/local/): a whole manifest, state part
 *       and partner message of the layout the harness expects, and
 *       malformed ones, each named bad-<what>.bin. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "ckpt_run_id.h"
#include "local_fuzz_one.h"
#include "log.h"

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  const long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
  *len = buf && n > 0 ? fread(buf, 1, (size_t)n, f) : 0;
  fclose(f);
  return buf;
}

static int one_file(const char *path) {
  size_t len;
  unsigned char *buf = slurp(path, &len);
  if (!buf) {
    fprintf(stderr, "local_fuzz_files: cannot read %s\n", path);
    return -1;
  }
  boost_status why = {0};
  const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  if (local_fuzz_one(buf, len, &why) == 0) printf("%s: accepted\n", name);
  else printf("%s: refused: %s\n", name, why.msg);
  free(buf);
  return 0;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int one_arg(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return one_file(path);
  if (!S_ISDIR(st.st_mode)) return one_file(path);
  DIR *d = opendir(path);
  if (!d) return -1;
  char **names = NULL;
  size_t n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    names = realloc(names, (n + 1) * sizeof *names);
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof *names, cmp_names);
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", path, names[i]);
    if (one_file(p) != 0) rc = -1;
    free(names[i]);
  }
  free(names);
  return rc;
}

/* ---- --make-seeds ---------------------------------------------------------- */

static void put(const char *dir, const char *name, int kind, const void *a, size_t alen, const void *b, size_t blen) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "wb");
  if (!f) {
    perror(p);
    exit(1);
  }
  const unsigned char k = (unsigned char)kind;
  fwrite(&k, 1, 1, f);
  if (alen) fwrite(a, 1, alen, f);
  if (blen) fwrite(b, 1, blen, f);
  fclose(f);
}

/* A state part of step `step` of the harness's run and layout. */
static void state_of(int64_t step, unsigned char **buf, size_t *len) {
  ckpt_local_manifest want;
  local_fuzz_expected(&want);
  char id[CKPT_RUN_ID_HEX + 1];
  ckpt_run_id_from_bytes(want.run_id, id);
  ckpt_meta m;
  ckpt_meta_init(&m);
  CKPT_META_SET(&m, run, step, step);
  CKPT_META_SET(&m, run, tokens_seen, 1024.0);
  ckpt_meta_set_str(&m, CKPT_META_F_run_id, id);
  ckpt_meta_set_str(&m, CKPT_META_F_config, "{\"model\":{\"preset\":\"tiny\"}}");
  ckpt_meta_set_str(&m, CKPT_META_F_layout, "{\"world_size\":2,\"dp\":2,\"tp\":1,\"pp\":1,\"tp_mode\":\"none\",\"zero\":0}");
  float loss[7] = {5, 4.5f, 4, 3.5f, 3.25f, 3, 2.75f};
  ckpt_state st;
  memset(&st, 0, sizeof st);
  st.set[CKPT_STATE_loss_history] = (ckpt_series){loss, 7};
  ckpt_local_pack(&m, &st, buf, len);
  ckpt_meta_free(&m);
}

static void make_seeds(const char *dir) {
  unsigned char *state, *state11;
  size_t slen, s11len;
  state_of(7, &state, &slen);
  state_of(11, &state11, &s11len);
  ckpt_local_manifest m;
  local_fuzz_expected(&m);
  m.bytes[LOCAL_STATE] = slen;
  m.sum[LOCAL_STATE] = XXH3_64bits(state, slen);
  ckpt_local_seal_manifest(&m);
  put(dir, "manifest.bin", LOCAL_FUZZ_MANIFEST, &m, sizeof m, NULL, 0);
  put(dir, "state.bin", LOCAL_FUZZ_STATE, state, slen, NULL, 0);
  put(dir, "partner.bin", LOCAL_FUZZ_PARTNER, &m, sizeof m, state, slen);
  ckpt_local_manifest bad = m;
  bad.bytes[LOCAL_ADAM_M] = 1ull << 40;
  ckpt_local_seal_manifest(&bad);
  put(dir, "bad-manifest-arena.bin", LOCAL_FUZZ_MANIFEST, &bad, sizeof bad, NULL, 0);
  bad = m;
  bad.run_id[0] ^= 0xff;
  ckpt_local_seal_manifest(&bad);
  put(dir, "bad-manifest-run.bin", LOCAL_FUZZ_MANIFEST, &bad, sizeof bad, NULL, 0);
  bad = m;
  memcpy(bad.magic, "boost-local-v2", sizeof "boost-local-v2");
  put(dir, "bad-manifest-v2.bin", LOCAL_FUZZ_MANIFEST, &bad, sizeof bad, NULL, 0);
  bad = m;
  bad.shape.tensors_sum ^= 1;
  ckpt_local_seal_manifest(&bad);
  put(dir, "bad-manifest-layout.bin", LOCAL_FUZZ_MANIFEST, &bad, sizeof bad, NULL, 0);
  unsigned char *rows = malloc(slen);
  memcpy(rows, state, slen);
  const int64_t huge = 1ll << 40; /* the first state dataset's rows: after the fields, 4 + ... bytes in */
  memcpy(rows + slen - 8 * 6 - sizeof(float) * 7 - 8, &huge, 8);
  put(dir, "bad-state-rows.bin", LOCAL_FUZZ_STATE, rows, slen, NULL, 0);
  put(dir, "bad-state-step.bin", LOCAL_FUZZ_STATE, state11, s11len, NULL, 0);
  bad = m;
  bad.bytes[LOCAL_STATE] = ckpt_local_state_bound(bad.step) + 1;
  ckpt_local_seal_manifest(&bad);
  put(dir, "bad-partner-size.bin", LOCAL_FUZZ_PARTNER, &bad, sizeof bad, state, slen);
  bad = m; /* step 99999999's manifest, step 11's state part: sums valid */
  bad.step = 99999999;
  ckpt_local_seal_manifest(&bad);
  put(dir, "bad-partner-step.bin", LOCAL_FUZZ_PARTNER, &bad, sizeof bad, state, slen);
  bad = m;
  bad.bytes[LOCAL_STATE] = s11len;
  bad.sum[LOCAL_STATE] = XXH3_64bits(state11, s11len);
  ckpt_local_seal_manifest(&bad);
  put(dir, "bad-partner-state.bin", LOCAL_FUZZ_PARTNER, &bad, sizeof bad, state11, s11len);
  free(rows);
  free(state);
  free(state11);
}

int main(int argc, char **argv) {
  boost_log_program("local_fuzz_files"); /* first: every warning of the process carries this name */
  if (argc == 3 && !strcmp(argv[1], "--make-seeds")) {
    make_seeds(argv[2]);
    return 0;
  }
  if (argc < 2) {
    fprintf(stderr, "usage: local_fuzz_files FILE|DIR... | --make-seeds DIR\n");
    return 2;
  }
  int rc = 0;
  for (int i = 1; i < argc; i++)
    if (one_arg(argv[i]) != 0) rc = 1;
  return rc;
}
