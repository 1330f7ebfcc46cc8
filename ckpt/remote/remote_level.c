/* The remote checkpoint level: push, newest, fetch, retention, orphans
 * (remote_level.h). */
#include "remote_level.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_fs.h"
#include "s3_multipart.h"

#define REMOTE_FORMAT "boost-remote 1"
#define REMOTE_MANIFEST "manifest.json"
#define REMOTE_DATA "ckpt.h5"

void remote_ckpt_free(remote_ckpt *r) {
  free(r->hashes);
  r->hashes = NULL;
}

static void step_key(s3_client *c, long long step, const char *leaf, char *out, size_t cap) {
  snprintf(out, cap, "%sstep_%012lld/%s", s3_client_prefix(c), step, leaf);
}

static char *manifest_text(long long step, uint64_t size, uint64_t part, int nparts, const uint64_t *hashes,
                           const char *run_id) {
  cJSON *m = cJSON_CreateObject(), *parts = cJSON_CreateArray();
  char hex[24];
  cJSON_AddStringToObject(m, "format", REMOTE_FORMAT);
  cJSON_AddNumberToObject(m, "step", (double)step);
  snprintf(hex, sizeof hex, "%" PRIu64, size);
  cJSON_AddStringToObject(m, "size", hex); /* a string: exact past 2^53 */
  snprintf(hex, sizeof hex, "%" PRIu64, part);
  cJSON_AddStringToObject(m, "part_size", hex);
  cJSON_AddStringToObject(m, "checksum", "xxh3-64 per part");
  for (int i = 0; i < nparts; i++) {
    snprintf(hex, sizeof hex, "%016" PRIx64, hashes[i]);
    cJSON_AddItemToArray(parts, cJSON_CreateString(hex));
  }
  cJSON_AddItemToObject(m, "parts", parts);
  cJSON_AddStringToObject(m, "run_id", run_id ? run_id : "");
  char *text = cJSON_PrintUnformatted(m);
  cJSON_Delete(m);
  return text;
}

void remote_data_key(s3_client *c, long long step, char *out, size_t cap) { step_key(c, step, REMOTE_DATA, out, cap); }

uint64_t remote_part_size(uint64_t size) {
  const char *ps = getenv("BOOST_S3_PART_MIB");
  uint64_t wanted = ps && atoi(ps) > 0 ? (uint64_t)atoi(ps) << 20 : 0;
  return s3_part_size(size, wanted);
}

int remote_put_manifest(s3_client *c, long long step, uint64_t size, uint64_t part, const uint64_t *hashes,
                        const char *run_id, boost_status *err) {
  char man_key[1024];
  step_key(c, step, REMOTE_MANIFEST, man_key, sizeof man_key);
  char *text = manifest_text(step, size, part, s3_part_count(size, part), hashes, run_id);
  if (!text) return boost_err(err, "out of memory for the manifest of step %lld", step);
  int rc = s3_put(c, man_key, text, strlen(text), err);
  free(text);
  return rc;
}

int remote_push(s3_client *c, const char *path, long long step, const char *run_id, int threads,
                boost_status *err) {
  char data_key[1024];
  remote_data_key(c, step, data_key, sizeof data_key);
  FILE *f = fopen(path, "rb");
  if (!f) return boost_err(err, "cannot open %s: %s", path, strerror(errno));
  fseeko(f, 0, SEEK_END);
  uint64_t size0 = (uint64_t)ftello(f);
  fclose(f);
  uint64_t part = remote_part_size(size0), size = 0, *hashes = NULL;
  if (s3_upload_file(c, path, data_key, part, threads, &size, &hashes, err)) return -1;
  int rc = remote_put_manifest(c, step, size, part, hashes, run_id, err);
  free(hashes);
  return rc;
}

static int parse_u64(const cJSON *m, const char *name, uint64_t *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, name);
  if (!cJSON_IsString(v)) return -1;
  char *end;
  errno = 0;
  *out = strtoull(v->valuestring, &end, 10);
  return (*end || errno) ? -1 : 0;
}

static int parse_manifest(const char *text, const char *key, remote_ckpt *r, boost_status *err) {
  memset(r, 0, sizeof *r);
  cJSON *m = cJSON_Parse(text);
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(m, "format");
  const cJSON *step = cJSON_GetObjectItemCaseSensitive(m, "step");
  const cJSON *parts = cJSON_GetObjectItemCaseSensitive(m, "parts");
  const cJSON *run = cJSON_GetObjectItemCaseSensitive(m, "run_id");
  int ok = m && cJSON_IsString(fmt) && !strcmp(fmt->valuestring, REMOTE_FORMAT) && cJSON_IsNumber(step) &&
           cJSON_IsArray(parts) && !parse_u64(m, "size", &r->size) && !parse_u64(m, "part_size", &r->part) &&
           r->part > 0;
  if (ok) {
    r->step = (long long)step->valuedouble;
    r->nparts = cJSON_GetArraySize(parts);
    ok = r->nparts == s3_part_count(r->size, r->part);
  }
  if (ok) r->hashes = calloc((size_t)r->nparts, sizeof *r->hashes);
  for (int i = 0; ok && i < r->nparts; i++) {
    const cJSON *h = cJSON_GetArrayItem(parts, i);
    char *end;
    ok = r->hashes && cJSON_IsString(h) && strlen(h->valuestring) == 16;
    if (ok) r->hashes[i] = strtoull(h->valuestring, &end, 16), ok = !*end;
  }
  if (ok && cJSON_IsString(run)) snprintf(r->run_id, sizeof r->run_id, "%s", run->valuestring);
  cJSON_Delete(m);
  if (!ok) {
    remote_ckpt_free(r);
    return boost_err(err, "remote manifest %s is not a boost-remote 1 manifest", key);
  }
  return 0;
}

/* The committed steps under the prefix: keys PREFIX/step_N/manifest.json. */
typedef struct step_list {
  const char *prefix;
  long long *steps;
  int n, cap;
} step_list;

static int on_object(const char *key, uint64_t size, void *user) {
  (void)size;
  step_list *l = user;
  const char *rest = key + strlen(l->prefix);
  long long step;
  char leaf[64];
  if (sscanf(rest, "step_%lld/%63s", &step, leaf) != 2 || strcmp(leaf, REMOTE_MANIFEST)) return 0;
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    long long *s = realloc(l->steps, (size_t)cap * sizeof *s);
    if (!s) return 1;
    l->steps = s, l->cap = cap;
  }
  l->steps[l->n++] = step;
  return 0;
}

static int cmp_desc(const void *a, const void *b) {
  long long x = *(const long long *)a, y = *(const long long *)b;
  return (x < y) - (x > y);
}

static int committed_steps(s3_client *c, step_list *l, boost_status *err) {
  *l = (step_list){.prefix = s3_client_prefix(c)};
  if (s3_list(c, l->prefix, on_object, l, err)) {
    free(l->steps);
    return -1;
  }
  if (l->n) qsort(l->steps, (size_t)l->n, sizeof *l->steps, cmp_desc);
  return 0;
}

int remote_manifest(s3_client *c, long long step, remote_ckpt *out, boost_status *err) {
  char key[1024];
  step_key(c, step, REMOTE_MANIFEST, key, sizeof key);
  s3_buf text = {0};
  memset(out, 0, sizeof *out);
  int rc = s3_get(c, key, &text, err) || parse_manifest(text.data ? text.data : "", key, out, err) ? -1 : 0;
  s3_buf_free(&text);
  if (rc == 0 && out->step != step) {
    rc = boost_err(err, "remote manifest %s names step %lld", key, out->step);
    remote_ckpt_free(out);
  }
  return rc;
}

int remote_newest(s3_client *c, remote_ckpt *out, boost_status *err) {
  step_list l;
  memset(out, 0, sizeof *out);
  if (committed_steps(c, &l, err)) return -1;
  int rc = l.n ? (remote_manifest(c, l.steps[0], out, err) ? -1 : 1) : 0;
  free(l.steps);
  return rc;
}

void remote_fetch_temp(const char *path, char *tmp, size_t cap) { snprintf(tmp, cap, "%s" CKPT_TMP_SUFFIX, path); }

int remote_fetch_begin(const remote_ckpt *r, const char *tmp, boost_status *err) {
  return s3_download_create(tmp, r->size, err);
}

int remote_fetch_share(s3_client *c, const remote_ckpt *r, const char *tmp, int rank, int ranks, int threads,
                       int *fetched, boost_status *err) {
  char key[1024];
  step_key(c, r->step, REMOTE_DATA, key, sizeof key);
  return s3_download_share(c, key, r->size, r->part, r->hashes, tmp, rank, ranks, threads, fetched, err);
}

int remote_fetch_end(const char *tmp, const char *path, int ok, boost_status *err) {
  if (!ok) {
    remove(tmp);
    return -1;
  }
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  const char *name = slash ? slash + 1 : path, *tmp_name = strrchr(tmp, '/') ? strrchr(tmp, '/') + 1 : tmp;
  if (slash) *slash = 0;
  const int rc = ckpt_fs_commit(slash ? (dir[0] ? dir : "/") : ".", tmp_name, name, err);
  if (rc < 0) remove(tmp); /* not renamed: the file in the way (if any) is left alone */
  if (rc > 0) remove(path); /* renamed, not durable: a download that did not finish */
  return rc ? -1 : 0;
}

int remote_fetch(s3_client *c, const remote_ckpt *r, const char *path, int threads, boost_status *err) {
  char tmp[4200];
  int fetched;
  remote_fetch_temp(path, tmp, sizeof tmp);
  int ok = remote_fetch_begin(r, tmp, err) == 0 && remote_fetch_share(c, r, tmp, 0, 1, threads, &fetched, err) == 0;
  return remote_fetch_end(tmp, path, ok, err);
}

int remote_retain(s3_client *c, int keep, boost_status *err) {
  if (keep <= 0) return 0;
  step_list l;
  if (committed_steps(c, &l, err)) return -1;
  int rc = 0;
  for (int i = keep; i < l.n && rc == 0; i++) {
    char key[1024];
    step_key(c, l.steps[i], REMOTE_MANIFEST, key, sizeof key); /* uncommit first */
    rc = s3_delete(c, key, err);
    step_key(c, l.steps[i], REMOTE_DATA, key, sizeof key);
    if (rc == 0) rc = s3_delete(c, key, err);
  }
  free(l.steps);
  return rc;
}

typedef struct orphan_scan {
  s3_client *c;
  int n, failed;
  boost_status *err;
} orphan_scan;

static int on_upload(const char *key, const char *upload_id, void *user) {
  orphan_scan *s = user;
  if (s3_multipart_abort(s->c, key, upload_id, s->err)) return s->failed = 1;
  s->n++;
  return 0;
}

int remote_clean_orphans(s3_client *c, int *n, boost_status *err) {
  /* Aborting while listing moves the pages under the listing's markers, so
   * it lists again until a whole pass finds nothing. */
  *n = 0;
  for (int pass = 0; pass < 100; pass++) {
    orphan_scan s = {c, 0, 0, err};
    if (s3_list_uploads(c, s3_client_prefix(c), on_upload, &s, err) || s.failed) return -1;
    *n += s.n;
    if (!s.n) return 0;
  }
  return 0;
}
