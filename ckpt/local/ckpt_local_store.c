#include "ckpt_local_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "check.h"
#include "ckpt_fs.h"
#include "ckpt_private.h"
#include "ckpt_run_id.h"
#include "util.h"

const char *const ckpt_local_part_names[LOCAL_NPARTS] = {"params", "adam_m", "adam_v", "state"};

/* ---- the state part: a growing byte buffer ------------------------------- */

typedef struct {
  unsigned char *p;
  size_t len, cap;
} bytes_out;

static void put(bytes_out *b, const void *v, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n) cap *= 2;
    unsigned char *q = realloc(b->p, cap);
    if (!q) boost_fail("out of memory for a local checkpoint's state part (%zu bytes)", cap);
    b->p = q, b->cap = cap;
  }
  if (n) memcpy(b->p + b->len, v, n);
  b->len += n;
}

int ckpt_local_pack(const ckpt_meta *m, const ckpt_state *st, unsigned char **buf, size_t *len) {
  bytes_out b = {0};
  put(&b, &m->present, sizeof m->present);
  for (int f = 0; f < CKPT_META_NFIELDS; f++) {
    if (!ckpt_meta_has(m, f)) continue;
    const ckpt_meta_field *d = &ckpt_meta_fields[f];
    const char *at = (const char *)m + d->offset;
    if (d->type == CKPT_META_T_STR) {
      const char *s = *(char *const *)at;
      const uint64_t n = s ? strlen(s) : 0;
      put(&b, &n, sizeof n);
      put(&b, s, (size_t)n);
    } else {
      put(&b, at, 8); /* int64_t or double */
    }
  }
  for (int k = 0; k < CKPT_STATE_NSETS; k++) {
    const int64_t rows = st->set[k].rows;
    put(&b, &rows, sizeof rows);
    put(&b, st->set[k].data, (size_t)rows * (size_t)ckpt_state_width(k) * ckpt_state_esize(k));
  }
  *buf = b.p;
  *len = b.len;
  return 0;
}

typedef struct {
  const unsigned char *p;
  size_t len, at;
} bytes_in;

static int take(bytes_in *b, void *v, size_t n) {
  if (n > b->len - b->at) return -1;
  memcpy(v, b->p + b->at, n);
  b->at += n;
  return 0;
}

int ckpt_local_unpack(const unsigned char *buf, size_t len, ckpt_meta *m, ckpt_state *st, boost_status *err) {
  bytes_in b = {buf, len, 0};
  ckpt_meta_init(m);
  memset(st, 0, sizeof *st);
  uint32_t present = 0;
  if (take(&b, &present, sizeof present) != 0 || (CKPT_META_NFIELDS < 32 && present >> CKPT_META_NFIELDS)) goto bad;
  for (int f = 0; f < CKPT_META_NFIELDS; f++) {
    if (!((present >> f) & 1u)) continue;
    const ckpt_meta_field *d = &ckpt_meta_fields[f];
    char *at = (char *)m + d->offset;
    if (d->type == CKPT_META_T_STR) {
      uint64_t n;
      if (take(&b, &n, sizeof n) != 0 || n > b.len - b.at) goto bad; /* never more than the part holds */
      char *s = boost_calloc((size_t)n + 1, 1);
      if (take(&b, s, (size_t)n) != 0) {
        boost_free(s);
        goto bad;
      }
      int rc = ckpt_meta_set_str(m, f, s);
      boost_free(s);
      if (rc != 0) goto bad;
    } else {
      if (take(&b, at, 8) != 0) goto bad;
      m->present |= 1u << f;
    }
  }
  for (int k = 0; k < CKPT_STATE_NSETS; k++) {
    int64_t rows;
    if (take(&b, &rows, sizeof rows) != 0 || rows < 0 || (uint64_t)rows > b.len - b.at) goto bad;
    const size_t n = (size_t)rows * (size_t)ckpt_state_width(k) * ckpt_state_esize(k);
    if (n > b.len - b.at) goto bad; /* checked before the allocation: the part holds the rows */
    st->set[k].rows = rows;
    st->set[k].data = n ? malloc(n) : NULL;
    if (n && (!st->set[k].data || take(&b, st->set[k].data, n) != 0)) goto bad;
  }
  if (b.at != len) goto bad;
  return 0;
bad:
  ckpt_meta_free(m);
  ckpt_state_free(st);
  return boost_err(err, "state part is malformed (%zu bytes)", len);
}

/* ---- what a manifest and its state part must say ------------------------- */

static int run_id_set(const unsigned char *id) {
  static const unsigned char none[CKPT_RUN_ID_BYTES];
  return id && memcmp(id, none, sizeof none) != 0;
}

uint64_t ckpt_local_state_bound(int64_t step) {
  /* Rows per state dataset: a few per step (a loss, a norm, a guard event;
   * replays and rollbacks repeat steps) and a fixed allowance for the rows
   * that do not grow with the step (starts, skipped ranges). */
  const uint64_t s = step < 0 ? 0 : (uint64_t)step > (1ull << 40) ? (1ull << 40) : (uint64_t)step;
  const uint64_t rows = 4 * (s + 1) + 65536;
  uint64_t bound = sizeof(uint32_t);
  for (int f = 0; f < CKPT_META_NFIELDS; f++)
    bound += ckpt_meta_fields[f].type == CKPT_META_T_STR ? 8 + LOCAL_STATE_STR_MAX : 8;
  for (int k = 0; k < CKPT_STATE_NSETS; k++) bound += 8 + rows * (uint64_t)ckpt_state_width(k) * ckpt_state_esize(k);
  return bound;
}

int ckpt_local_manifest_fits(const ckpt_local_manifest *m, const char *path, int64_t step,
                             const ckpt_local_shape *want, const unsigned char *run_id, boost_status *why) {
  char mine[CKPT_RUN_ID_HEX + 1], theirs[CKPT_RUN_ID_HEX + 1];
  if (step >= 0 && m->step != step)
    return boost_err(why, "%s: its manifest says step %lld (passed over, left in place)", path, (long long)m->step);
  if (!run_id_set(run_id) || memcmp(m->run_id, run_id, sizeof m->run_id) != 0) {
    ckpt_run_id_from_bytes(m->run_id, theirs);
    ckpt_run_id_from_bytes(run_id ? run_id : (const unsigned char[CKPT_RUN_ID_BYTES]){0}, mine);
    return boost_err(why, "%s is another run's (identity %s, this run's %s): passed over, left in place", path,
                     theirs[0] ? theirs : "none", mine[0] ? mine : "not yet known");
  }
  if (want && memcmp(&m->shape, want, sizeof *want) != 0)
    return boost_err(why, "%s was written by another layout (world %d dp %d tp %d pp %d, %llu floats%s)", path,
                     m->shape.world_size, m->shape.dp, m->shape.tp, m->shape.pp, (unsigned long long)m->shape.numel,
                     m->shape.tensors_sum != want->tensors_sum ? ", tensors placed otherwise in the arenas" : "");
  const ckpt_local_shape *sh = &m->shape;
  const uint64_t arena[LOCAL_STATE] = {sh->numel * sizeof(float), (sh->mom_end - sh->mom_begin) * sizeof(float),
                                       (sh->mom_end - sh->mom_begin) * sizeof(float)};
  for (int k = 0; k < LOCAL_STATE; k++)
    if (sh->mom_end < sh->mom_begin || sh->numel > (UINT64_MAX >> 3) || m->bytes[k] != arena[k])
      return boost_err(why, "%s: its %s part has %llu bytes where its layout holds %llu (damaged)", path,
                       ckpt_local_part_names[k], (unsigned long long)m->bytes[k], (unsigned long long)arena[k]);
  if (m->bytes[LOCAL_STATE] > ckpt_local_state_bound(m->step))
    return boost_err(why, "%s: its state part has %llu bytes, more than a step-%lld state can hold (damaged)", path,
                     (unsigned long long)m->bytes[LOCAL_STATE], (long long)m->step);
  return 0;
}

int ckpt_local_state_agrees(const unsigned char *blob, size_t len, const ckpt_local_manifest *m, boost_status *why) {
  ckpt_meta meta;
  ckpt_state st;
  if (ckpt_local_unpack(blob, len, &meta, &st, why) != 0) return -1;
  ckpt_state_free(&st);
  unsigned char id[CKPT_RUN_ID_BYTES];
  ckpt_run_id_to_bytes(ckpt_meta_has(&meta, CKPT_META_F_run_id) ? meta.run.run_id : "", id);
  ckpt_layout lay;
  const int has_lay = ckpt_meta_has(&meta, CKPT_META_F_layout) && ckpt_layout_parse(meta.run.layout, &lay) == 0;
  int rc = 0;
  if (!ckpt_meta_has(&meta, CKPT_META_F_step) || meta.run.step != m->step)
    rc = boost_err(why, "its state part is of step %lld, its manifest says %lld", (long long)meta.run.step,
                   (long long)m->step);
  else if (memcmp(id, m->run_id, sizeof id) != 0)
    rc = boost_err(why, "its state part names another run than its manifest");
  else if (!has_lay || lay.world_size != m->shape.world_size || lay.dp != m->shape.dp || lay.tp != m->shape.tp ||
           lay.pp != m->shape.pp)
    rc = boost_err(why, "its state part's layout %s is not its manifest's (world %d dp %d tp %d pp %d)",
                   has_lay ? meta.run.layout : "(none)", m->shape.world_size, m->shape.dp, m->shape.tp, m->shape.pp);
  ckpt_meta_free(&meta);
  return rc;
}

/* ---- paths, manifests, listing --------------------------------------------- */

static int read_all(int fd, void *p, size_t n, size_t *got);

void ckpt_local_step_path(char *out, size_t outlen, const char *dir, int64_t step, int tmp) {
  boost_msgf(out, outlen, "%s/step_%08lld%s", dir, (long long)step, tmp ? ".tmp" : "");
}

static uint64_t manifest_sum(const ckpt_local_manifest *m) {
  return XXH3_64bits(m, offsetof(ckpt_local_manifest, self_sum));
}

void ckpt_local_seal_manifest(ckpt_local_manifest *m) {
  memset(m->magic, 0, sizeof m->magic);
  memcpy(m->magic, LOCAL_MAGIC, sizeof LOCAL_MAGIC);
  m->self_sum = manifest_sum(m);
}

int ckpt_local_write_manifest(const char *stepdir, ckpt_local_manifest *m, boost_status *err) {
  ckpt_local_seal_manifest(m);
  char path[PATH_MAX];
  boost_msgf(path, sizeof path, "%s/manifest.bin", stepdir);
  uint64_t unused;
  return ckpt_local_write_small(path, m, sizeof *m, &unused, err);
}

int ckpt_local_manifest_ok(const ckpt_local_manifest *m) {
  return memcmp(m->magic, LOCAL_MAGIC, sizeof LOCAL_MAGIC) == 0 && manifest_sum(m) == m->self_sum;
}

int ckpt_local_parse_manifest(const void *buf, size_t len, ckpt_local_manifest *m, boost_status *err) {
  /* another version of the record (v1, v2: other sizes) is named as such */
  static const char family[] = "boost-local-v";
  if (len >= sizeof m->magic && memcmp(buf, family, sizeof family - 1) == 0 &&
      memcmp(buf, LOCAL_MAGIC, sizeof LOCAL_MAGIC) != 0)
    return boost_err(err, "a manifest of another format (%.16s, this boost writes %s): passed over, left in place",
                     (const char *)buf, LOCAL_MAGIC);
  if (len != sizeof *m) return boost_err(err, "%zu bytes, not a manifest", len);
  memcpy(m, buf, sizeof *m);
  if (!ckpt_local_manifest_ok(m)) return boost_err(err, "not a boost local-level manifest, or damaged");
  return 0;
}

int ckpt_local_read_manifest(const char *stepdir, ckpt_local_manifest *m, boost_status *err) {
  char path[PATH_MAX];
  boost_msgf(path, sizeof path, "%s/manifest.bin", stepdir);
  const int fd = ckpt_private_read_open(path, err);
  if (fd < 0) return -1;
  unsigned char buf[sizeof *m + 1];
  size_t got = 0;
  const int rok = read_all(fd, buf, sizeof buf, &got) == 0;
  close(fd);
  if (!rok) return boost_err(err, "%s: read failed", path);
  boost_status why = {0};
  if (ckpt_local_parse_manifest(buf, got, m, &why) != 0) return boost_err(err, "%s: %s", path, why.msg);
  return 0;
}

/* step_SSSSSSSS[.tmp] -> step, tmp flag; -1 for another name. */
static int64_t parse_step_name(const char *name, int *tmp) {
  if (strncmp(name, "step_", 5) != 0) return -1;
  char *end;
  errno = 0;
  long long v = strtoll(name + 5, &end, 10);
  if (errno || end == name + 5 || v < 0) return -1;
  *tmp = strcmp(end, ".tmp") == 0;
  if (*end && !*tmp) return -1;
  return v;
}

/* A checked private folder for listing (NULL: missing or refused; the
 * level's folders were checked at its start, which said why). */
static DIR *open_private_dir(const char *dir) {
  boost_status why = {0};
  const int fd = ckpt_private_open(dir, 0, &why);
  if (fd < 0) return NULL;
  DIR *d = fdopendir(fd);
  if (!d) close(fd);
  return d;
}

static int cmp_desc(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

int ckpt_local_list(const char *dir, int owner, const ckpt_local_shape *want, const unsigned char *run_id,
                    int64_t *steps, int max, boost_status *why) {
  if (why) *why = (boost_status){0};
  DIR *d = open_private_dir(dir);
  if (!d) return 0;
  int64_t *all = NULL; /* every committed step: a folder may hold any number */
  size_t n = 0, cap = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    int tmp;
    const int64_t s = parse_step_name(e->d_name, &tmp);
    if (s < 0 || tmp) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      int64_t *more = realloc(all, cap * sizeof *all);
      if (!more) boost_fail("out of memory listing %s", dir);
      all = more;
    }
    all[n++] = s;
  }
  closedir(d);
  if (n) qsort(all, n, sizeof all[0], cmp_desc);
  int got = 0;
  for (size_t i = 0; i < n && got < max; i++) {
    char path[PATH_MAX];
    boost_status err = {0};
    ckpt_local_manifest m;
    ckpt_local_step_path(path, sizeof path, dir, all[i], 0);
    int ok = ckpt_local_read_manifest(path, &m, &err) == 0;
    if (ok && !want && (m.step != all[i] || m.shape.owner_rank != owner))
      ok = 0, boost_err(&err, "%s was written for rank %d, step %lld", path, m.shape.owner_rank, (long long)m.step);
    else if (ok && want) ok = ckpt_local_manifest_fits(&m, path, all[i], want, run_id, &err) == 0;
    else if (ok && ckpt_local_manifest_fits(&m, path, all[i], NULL, run_id, &err) != 0) ok = 0;
    if (ok) steps[got++] = all[i];
    else if (why && !why->failed) boost_status_take(why, &err);
  }
  free(all);
  return got;
}

int ckpt_local_owner(const char *stepdir, const unsigned char *run_id) {
  struct stat st;
  char path[PATH_MAX];
  boost_msgf(path, sizeof path, "%s/manifest.bin", stepdir);
  if (lstat(path, &st) != 0 && errno == ENOENT) return LOCAL_NOBODY; /* no step there, or one cut short */
  ckpt_local_manifest m;
  boost_status err = {0};
  if (ckpt_local_read_manifest(stepdir, &m, &err) != 0 || !run_id_set(run_id)) return LOCAL_OTHER;
  if (memcmp(m.run_id, run_id, sizeof m.run_id) != 0) return LOCAL_OTHER;
  /* A whole state part that says something else than its manifest was not
   * written by this run's saves (they write both from one step): left
   * alone too. One whose checksum fails is this run's, damaged. */
  unsigned char *blob = NULL;
  boost_msgf(path, sizeof path, "%s/%s.bin", stepdir, ckpt_local_part_names[LOCAL_STATE]);
  if (m.bytes[LOCAL_STATE] > ckpt_local_state_bound(m.step) ||
      ckpt_local_read_small(path, m.bytes[LOCAL_STATE], m.sum[LOCAL_STATE], &blob, &err) != 0)
    return LOCAL_OURS;
  const int agrees = ckpt_local_state_agrees(blob, (size_t)m.bytes[LOCAL_STATE], &m, &err) == 0;
  free(blob);
  return agrees ? LOCAL_OURS : LOCAL_OTHER;
}

int ckpt_local_remove_tree(const char *path) { return ckpt_private_remove(path); }

int ckpt_local_remove_steps(const char *dir, int64_t keep, int only_newer, const unsigned char *run_id) {
  DIR *d = open_private_dir(dir);
  if (!d) return 0;
  int removed = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    int tmp;
    const int64_t s = parse_step_name(e->d_name, &tmp);
    if (s < 0 || (s == keep && !tmp) || (only_newer && s <= keep)) continue;
    char p[PATH_MAX];
    boost_msgf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (ckpt_local_owner(p, run_id) != LOCAL_OURS) continue; /* another run's: left alone */
    if (ckpt_private_remove_at(dirfd(d), e->d_name, p) == 0) removed++;
  }
  closedir(d);
  return removed;
}

double ckpt_local_held_bytes(const char *dir) {
  DIR *d = open_private_dir(dir);
  if (!d) return 0;
  double held = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    int tmp;
    if (parse_step_name(e->d_name, &tmp) < 0) continue;
    char p[PATH_MAX];
    boost_status why = {0};
    boost_msgf(p, sizeof p, "%s/%s", dir, e->d_name);
    const int step = ckpt_private_openat(dirfd(d), e->d_name, p, 0, &why);
    if (step < 0) continue; /* not a folder of ours: nothing of the level's */
    for (int k = 0; k < LOCAL_NPARTS; k++) {
      char name[32];
      struct stat st;
      boost_msgf(name, sizeof name, "%s.bin", ckpt_local_part_names[k]);
      if (fstatat(step, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) held += (double)st.st_size;
    }
    close(step);
  }
  closedir(d);
  return held;
}

/* ---- parts ---------------------------------------------------------------- */

int ckpt_local_write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    const ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    c += w, n -= (size_t)w;
  }
  return 0;
}

static int read_all(int fd, void *p, size_t n, size_t *got) {
  char *c = p;
  *got = 0;
  while (n > 0) {
    const ssize_t r = read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) return 0;
    c += r, n -= (size_t)r, *got += (size_t)r;
  }
  return 0;
}

int ckpt_local_write_part(const char *path, boost_backend *be, const void *src, size_t bytes, void *bounce,
                          size_t bounce_bytes, uint64_t *sum, boost_status *err) {
  ckpt_private_file out;
  if (ckpt_private_create(&out, path, err) != 0) return -1;
  const int fd = out.fd;
  XXH3_state_t *h = XXH3_createState();
  if (!h) boost_fail("out of memory for a checksum state");
  XXH3_64bits_reset(h);
  errno = 0;
  int ok = 1;
  const char *host = bytes ? be->mem->host_view(be, src) : NULL;
  if (host) { /* host memory: written as it is */
    XXH3_64bits_update(h, host, bytes);
    ok = ckpt_local_write_all(fd, host, bytes) == 0;
  } else {
    for (size_t at = 0; ok && at < bytes; at += bounce_bytes) {
      const size_t n = bytes - at < bounce_bytes ? bytes - at : bounce_bytes;
      be->mem->download(be, bounce, (const char *)src + at, n);
      XXH3_64bits_update(h, bounce, n);
      ok = ckpt_local_write_all(fd, bounce, n) == 0;
    }
  }
  *sum = XXH3_64bits_digest(h);
  XXH3_freeState(h);
  return ckpt_private_finish(&out, ok, err);
}

int ckpt_local_write_small(const char *path, const void *buf, size_t len, uint64_t *sum, boost_status *err) {
  ckpt_private_file out;
  if (ckpt_private_create(&out, path, err) != 0) return -1;
  *sum = XXH3_64bits(buf, len);
  return ckpt_private_finish(&out, ckpt_local_write_all(out.fd, buf, len) == 0, err);
}

/* Opens path and checks its size. */
static int open_sized(const char *path, uint64_t want_bytes, boost_status *err) {
  const int fd = ckpt_private_read_open(path, err);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != want_bytes) {
    close(fd);
    return boost_err(err, "%s: %lld bytes, the manifest says %llu (damaged)", path, (long long)st.st_size,
                     (unsigned long long)want_bytes);
  }
  return fd;
}

int ckpt_local_read_part(const char *path, boost_backend *be, void *dst, uint64_t want_bytes, uint64_t want_sum,
                         void *bounce, size_t bounce_bytes, boost_status *err) {
  const int fd = open_sized(path, want_bytes, err);
  if (fd < 0) return -1;
  XXH3_state_t *h = XXH3_createState();
  if (!h) boost_fail("out of memory for a checksum state");
  XXH3_64bits_reset(h);
  char *host = dst && want_bytes ? be->mem->host_view(be, dst) : NULL;
  int ok = 1;
  for (size_t at = 0; ok && at < want_bytes; at += bounce_bytes) {
    const size_t n = want_bytes - at < bounce_bytes ? (size_t)want_bytes - at : bounce_bytes;
    char *to = host ? host + at : bounce;
    size_t got;
    ok = read_all(fd, to, n, &got) == 0 && got == n;
    if (!ok) break;
    XXH3_64bits_update(h, to, n);
    if (dst && !host) be->mem->upload(be, (char *)dst + at, bounce, n);
  }
  const uint64_t sum = XXH3_64bits_digest(h);
  XXH3_freeState(h);
  close(fd);
  if (!ok) return boost_err(err, "%s: read failed", path);
  if (sum != want_sum) return boost_err(err, "%s: checksum mismatch (damaged)", path);
  return 0;
}

int ckpt_local_read_small(const char *path, uint64_t want_bytes, uint64_t want_sum, unsigned char **buf, boost_status *err) {
  *buf = NULL;
  const int fd = open_sized(path, want_bytes, err);
  if (fd < 0) return -1;
  unsigned char *b = malloc(want_bytes ? (size_t)want_bytes : 1);
  if (!b) boost_fail("out of memory for a local checkpoint's state part");
  size_t got;
  const int ok = read_all(fd, b, (size_t)want_bytes, &got) == 0 && got == want_bytes;
  close(fd);
  if (!ok || XXH3_64bits(b, (size_t)want_bytes) != want_sum) {
    free(b);
    return boost_err(err, "%s: %s", path, ok ? "checksum mismatch (damaged)" : "read failed");
  }
  *buf = b;
  return 0;
}
