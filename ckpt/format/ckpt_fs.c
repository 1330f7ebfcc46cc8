#include "ckpt_fs.h"

#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_h5.h"

static int fail(boost_status *err, const char *what, const char *path) {
  int e = errno;
  boost_err(err, "%s %s: %s", what, path, strerror(e));
  errno = e;
  return -1;
}

static void append(char *out, size_t outlen, const char *fmt, const char *a) {
  if (!out || !outlen) return;
  size_t used = strlen(out);
  if (used + 1 >= outlen) return;
  snprintf(out + used, outlen - used, fmt, a);
}

int ckpt_fs_mkdirs(const char *dir, boost_status *err) {
  char p[PATH_MAX];
  if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) {
    errno = ENAMETOOLONG;
    return fail(err, "checkpoint directory", dir);
  }
  for (char *s = p + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    if (mkdir(p, 0777) != 0 && errno != EEXIST) return fail(err, "cannot create", p);
    *s = '/';
  }
  if (mkdir(p, 0777) != 0 && errno != EEXIST) return fail(err, "cannot create", p);
  struct stat st;
  if (stat(p, &st) != 0) return fail(err, "cannot stat", p);
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return fail(err, "checkpoint directory", p);
  }
  if (access(p, W_OK | X_OK) != 0) return fail(err, "cannot write to", p);
  return 0;
}

static int cmp_desc(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

int ckpt_fs_list(const char *dir, int64_t **steps, int *n, boost_status *err) {
  *steps = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return fail(err, "cannot list", dir);
  int cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    int64_t s = ckpt_parse_file_name(e->d_name);
    if (s < 0) continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 16;
      int64_t *p = realloc(*steps, (size_t)cap * sizeof **steps);
      if (!p) {
        closedir(d);
        free(*steps);
        *steps = NULL;
        *n = 0;
        errno = ENOMEM;
        return fail(err, "listing", dir);
      }
      *steps = p;
    }
    (*steps)[(*n)++] = s;
  }
  closedir(d);
  if (*n) qsort(*steps, (size_t)*n, sizeof **steps, cmp_desc);
  return 0;
}

/* An age in seconds as people read it. */
static void age_text(long long a, char *out, size_t outlen) {
  if (a < 0) snprintf(out, outlen, "%lld s in the future (the hosts' clocks differ)", -a);
  else if (a < 120) snprintf(out, outlen, "%lld s ago", a);
  else if (a < 7200) snprintf(out, outlen, "%lld min ago", a / 60);
  else if (a < 172800) snprintf(out, outlen, "%lld h %lld min ago", a / 3600, a / 60 % 60);
  else snprintf(out, outlen, "%lld days ago", a / 86400);
}

/* The lock file's line ("host H pid P since ISO (unix T)"; an older boost
 * wrote "since T") with its start in UTC ISO 8601 and its age. */
static void describe_holder(const char *line, char *out, size_t outlen) {
  const char *since = strstr(line, " since ");
  const char *unix_t = since ? strstr(since, "(unix ") : NULL;
  long long t;
  if (!since || (unix_t ? sscanf(unix_t, "(unix %lld)", &t) : sscanf(since, " since %lld", &t)) != 1) {
    snprintf(out, outlen, "%s", line);
    return;
  }
  char iso[32] = "?", age[64];
  struct tm tm;
  const time_t tt = (time_t)t;
  if (gmtime_r(&tt, &tm)) strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &tm);
  age_text((long long)time(NULL) - t, age, sizeof age);
  snprintf(out, outlen, "%.*s since %s, %s", (int)(since - line), line, iso, age);
}

int ckpt_fs_lock(const char *dir, boost_status *err) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/" CKPT_LOCK, dir);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return fail(err, "cannot open the lock file", path);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    char holder[256] = "";
    ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
    holder[n > 0 ? n : 0] = 0;
    holder[strcspn(holder, "\n")] = 0;
    close(fd);
    if (e == EWOULDBLOCK) {
      char who[320];
      describe_holder(holder, who, sizeof who);
      boost_err(err, "ckpt.dir %s is in use by another job (%s): two jobs must not share a checkpoint directory",
               dir, who[0] ? who : "holder unknown");
      return -1;
    }
    errno = e;
    return fail(err, "cannot lock", path);
  }
  char host[128] = "?", line[256], iso[32] = "?";
  gethostname(host, sizeof host - 1);
  const time_t now = time(NULL);
  struct tm tm;
  if (gmtime_r(&now, &tm)) strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &tm);
  const int len = snprintf(line, sizeof line, "host %s pid %ld since %s (unix %lld)\n", host, (long)getpid(), iso,
                           (long long)now);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)len, 0) != len) { /* the lock holds anyway */
  }
  return fd;
}

void ckpt_fs_unlock(int fd) {
  if (fd >= 0) close(fd); /* closing releases the flock */
}

int ckpt_fs_clean_temporaries(const char *dir, char *removed, size_t removedlen) {
  if (removed && removedlen) removed[0] = 0;
  DIR *d = opendir(dir);
  if (!d) return -1;
  int count = 0;
  struct dirent *e;
  char path[PATH_MAX];
  while ((e = readdir(d))) {
    const int tmp_ckpt = strncmp(e->d_name, "step_", 5) == 0 && boost_ends_with(e->d_name, ".h5" CKPT_TMP_SUFFIX);
    const int tmp_latest = strcmp(e->d_name, CKPT_LATEST CKPT_TMP_SUFFIX) == 0;
    if (!tmp_ckpt && !tmp_latest) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (unlink(path) == 0) {
      append(removed, removedlen, count ? ", %s" : "%s", e->d_name);
      count++;
    }
  }
  closedir(d);
  return count;
}

int ckpt_fs_fsync(const char *path, boost_status *err) {
  return boost_fsync_path(path) == 0 ? 0 : fail(err, "fsync", path);
}

int ckpt_fs_reserve(const char *path, uint64_t bytes, boost_status *err) {
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path; /* short enough for a log line */
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return fail(err, "cannot open to reserve space", path);
  int rc = 0;
  if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)bytes) != 0) {
    if (errno == EOPNOTSUPP || errno == ENOSYS) {
      /* Cannot reserve here: at least check the free space (racy, but it
       * catches a disk that is already full). */
      struct statvfs v;
      rc = 1;
      if (fstatvfs(fd, &v) == 0 && (double)v.f_bavail * (double)v.f_frsize < (double)bytes) {
        errno = ENOSPC;
        char what[96];
        snprintf(what, sizeof what, "only %.1f MiB free, %.1f MiB needed for", (double)v.f_bavail * (double)v.f_frsize / (1 << 20),
                 (double)bytes / (1 << 20));
        rc = fail(err, what, base);
      }
    } else {
      char what[64];
      snprintf(what, sizeof what, "cannot reserve %.1f MiB for", (double)bytes / (1 << 20));
      rc = fail(err, what, base);
    }
  }
  int e = errno;
  close(fd);
  errno = e;
  return rc;
}

int ckpt_fs_trim(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return -1;
  /* truncate to the current size frees KEEP_SIZE blocks beyond it */
  return truncate(path, st.st_size);
}

int ckpt_fs_commit(const char *dir, const char *tmp_name, const char *final_name, boost_status *err) {
  char a[PATH_MAX], b[PATH_MAX];
  snprintf(a, sizeof a, "%s/%s", dir, tmp_name);
  snprintf(b, sizeof b, "%s/%s", dir, final_name);
  /* never over a file: the same step of an abandoned run is set aside before (ckpt_set_aside_after) */
  if (renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_NOREPLACE) != 0) {
    if (errno != EINVAL && errno != ENOSYS) return fail(err, "cannot rename to", b);
    struct stat st; /* a file system without RENAME_NOREPLACE */
    if (stat(b, &st) == 0) {
      errno = EEXIST;
      return fail(err, "cannot rename to", b);
    }
    if (rename(a, b) != 0) return fail(err, "cannot rename to", b);
  }
  return ckpt_fs_fsync(dir, err) == 0 ? 0 : 1; /* renamed: committed, not yet durable */
}

int ckpt_fs_write_atomic(const char *dir, const char *name, const char *text, boost_status *err) {
  char tmp[PATH_MAX], fin[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s/%s" CKPT_TMP_SUFFIX, dir, name);
  snprintf(fin, sizeof fin, "%s/%s", dir, name);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return fail(err, "cannot create", tmp);
  const size_t n = strlen(text);
  if (write(fd, text, n) != (ssize_t)n || fsync(fd) != 0) {
    int e = errno ? errno : EIO;
    close(fd);
    unlink(tmp);
    errno = e;
    return fail(err, "cannot write", tmp);
  }
  if (close(fd) != 0) {
    unlink(tmp);
    return fail(err, "cannot close", tmp);
  }
  if (rename(tmp, fin) != 0) {
    int e = errno;
    unlink(tmp);
    errno = e;
    return fail(err, "cannot rename to", fin);
  }
  return ckpt_fs_fsync(dir, err);
}

int ckpt_fs_write_latest(const char *dir, const char *name, boost_status *err) {
  char line[PATH_MAX];
  snprintf(line, sizeof line, "%s\n", name);
  return ckpt_fs_write_atomic(dir, CKPT_LATEST, line, err);
}

int ckpt_fs_read_latest(const char *dir, char *name, size_t namelen) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/" CKPT_LATEST, dir);
  FILE *f = fopen(p, "r");
  if (!f) return -1;
  int ok = fgets(name, (int)namelen, f) != NULL;
  fclose(f);
  if (!ok) return -1;
  name[strcspn(name, "\r\n")] = 0;
  return name[0] ? 0 : -1;
}

int ckpt_fs_retain(const char *dir, int64_t step, int keep_last, int keep_every, char *report, size_t reportlen) {
  if (report && reportlen) report[0] = 0;
  int64_t *steps;
  int n;
  if (ckpt_fs_list(dir, &steps, &n, NULL) != 0) return -1;
  int touched = 0, kept = 0;
  char name[64], path[PATH_MAX], latest[PATH_MAX] = "";
  if (ckpt_fs_read_latest(dir, latest, sizeof latest) != 0) latest[0] = 0;
  for (int i = 0; i < n; i++) { /* newest first */
    const int64_t s = steps[i];
    ckpt_file_name(name, sizeof name, s);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!strcmp(name, latest)) { /* never what `latest` names */
      kept += s <= step;
      continue;
    }
    if (s > step) continue; /* an abandoned branch's: set aside before the commit (ckpt_set_aside_after) */
    if (kept < keep_last || s == step) {
      kept++;
      continue;
    }
    if (keep_every > 0 && s % keep_every == 0) continue;
    if (unlink(path) == 0) {
      append(report, reportlen, touched ? ", removed %s" : "removed %s", name);
      touched++;
    }
  }
  free(steps);
  return touched;
}

void ckpt_format_bytes(double b, char *out, size_t n) {
  if (b >= (double)(1 << 30)) boost_msgf(out, n, "%.2f GiB", b / (1 << 30));
  else if (b >= (double)(1 << 20)) boost_msgf(out, n, "%.1f MiB", b / (1 << 20));
  else boost_msgf(out, n, "%.0f KiB", b / 1024);
}
