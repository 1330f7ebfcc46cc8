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
  if (take(&b, &present, sizeof present) != 0) goto bad;
  for (int f = 0; f < CKPT_META_NFIELDS; f++) {
    if (!((present >> f) & 1u)) continue;
    const ckpt_meta_field *d = &ckpt_meta_fields[f];
    char *at = (char *)m + d->offset;
    if (d->type == CKPT_META_T_STR) {
      uint64_t n;
      if (take(&b, &n, sizeof n) != 0 || n > len) goto bad;
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
    if (take(&b, &rows, sizeof rows) != 0 || rows < 0 || (uint64_t)rows > len) goto bad;
    const size_t n = (size_t)rows * (size_t)ckpt_state_width(k) * ckpt_state_esize(k);
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

/* ---- paths, manifests, listing --------------------------------------------- */

static int read_all(int fd, void *p, size_t n, size_t *got);

void ckpt_local_step_path(char *out, size_t outlen, const char *dir, int64_t step, int tmp) {
  boost_msgf(out, outlen, "%s/step_%08lld%s", dir, (long long)step, tmp ? ".tmp" : "");
}

static uint64_t manifest_sum(const ckpt_local_manifest *m) {
  return XXH3_64bits(m, offsetof(ckpt_local_manifest, self_sum));
}

int ckpt_local_write_manifest(const char *stepdir, ckpt_local_manifest *m, boost_status *err) {
  memset(m->magic, 0, sizeof m->magic);
  memcpy(m->magic, LOCAL_MAGIC, sizeof LOCAL_MAGIC);
  m->self_sum = manifest_sum(m);
  char path[PATH_MAX];
  boost_msgf(path, sizeof path, "%s/manifest.bin", stepdir);
  uint64_t unused;
  return ckpt_local_write_small(path, m, sizeof *m, &unused, err);
}

int ckpt_local_manifest_ok(const ckpt_local_manifest *m) {
  return memcmp(m->magic, LOCAL_MAGIC, sizeof LOCAL_MAGIC) == 0 && manifest_sum(m) == m->self_sum;
}

int ckpt_local_read_manifest(const char *stepdir, ckpt_local_manifest *m, boost_status *err) {
  char path[PATH_MAX];
  boost_msgf(path, sizeof path, "%s/manifest.bin", stepdir);
  const int fd = ckpt_private_read_open(path, err);
  if (fd < 0) return -1;
  size_t got = 0, more = 0;
  char extra;
  const int rok = read_all(fd, m, sizeof *m, &got) == 0 && read_all(fd, &extra, 1, &more) == 0;
  close(fd);
  if (!rok || got != sizeof *m || more) return boost_err(err, "%s: %zu bytes, not a manifest", path, got);
  if (!ckpt_local_manifest_ok(m)) return boost_err(err, "%s: not a boost local-level manifest, or damaged", path);
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

int ckpt_local_list(const char *dir, int owner, const ckpt_local_shape *want, int64_t *steps, int max, boost_status *why) {
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
    if (ok && (m.step != all[i] || m.shape.owner_rank != owner || (want && memcmp(&m.shape, want, sizeof *want) != 0))) {
      ok = 0;
      boost_err(&err, "%s was written by another layout (world %d dp %d tp %d pp %d, %llu floats%s)", path,
                m.shape.world_size, m.shape.dp, m.shape.tp, m.shape.pp, (unsigned long long)m.shape.numel,
                want && m.shape.tensors_sum != want->tensors_sum ? ", tensors placed otherwise in the arenas" : "");
    }
    if (ok) steps[got++] = all[i];
    else if (why && !why->failed) boost_status_take(why, &err);
  }
  free(all);
  return got;
}

int ckpt_local_remove_tree(const char *path) { return ckpt_private_remove(path); }

int ckpt_local_remove_steps(const char *dir, int64_t keep, int only_newer) {
  DIR *d = open_private_dir(dir);
  if (!d) return 0;
  int removed = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    int tmp;
    const int64_t s = parse_step_name(e->d_name, &tmp);
    if (s < 0 || (s == keep && !tmp) || (only_newer && s <= keep)) continue;
    char p[PATH_MAX];
    boost_msgf(p, sizeof p, "%s/%s", dir, e->d_name);
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
