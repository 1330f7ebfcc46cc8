#include "ckpt_private.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_fs.h"
#include "util.h"

/* Names of temporaries: a leftover of a crashed write is removed before the
 * exclusive create, never opened. */
#define PRIVATE_TMP_SUFFIX ".part"

static int refuse(boost_status *err, const char *shown, const char *what) {
  boost_err(err, "ckpt.local_dir %s: %s: " CKPT_PRIVATE_ADVICE, shown, what);
  errno = EACCES; /* never ENOENT: a refused folder is not a missing one */
  return -1;
}

static int check_stat(const struct stat *st, const char *shown, boost_status *err) {
  char what[160];
  if (S_ISLNK(st->st_mode)) return refuse(err, shown, "a symbolic link, not a folder");
  if (!S_ISDIR(st->st_mode)) return refuse(err, shown, "not a folder");
  if (st->st_uid != geteuid()) {
    boost_msgf(what, sizeof what, "owned by uid %u, not by you (uid %u)", (unsigned)st->st_uid, (unsigned)geteuid());
    return refuse(err, shown, what);
  }
  if (st->st_mode & 077) {
    boost_msgf(what, sizeof what, "mode %04o lets other users in (group or other permission bits)",
               (unsigned)(st->st_mode & 07777));
    return refuse(err, shown, what);
  }
  return 0;
}

int ckpt_private_check(int fd, const char *shown, boost_status *err) {
  struct stat st;
  if (fstat(fd, &st) != 0) return boost_err(err, "ckpt.local_dir %s: %s", shown, strerror(errno));
  return check_stat(&st, shown, err);
}

int ckpt_private_openat(int dirfd, const char *name, const char *shown, int create, boost_status *err) {
  if (create && mkdirat(dirfd, name, 0700) != 0 && errno != EEXIST)
    return boost_err(err, "ckpt.local_dir %s: cannot create: %s", shown, strerror(errno));
  const int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    struct stat st; /* why: a link or a file where a folder should be is told as such */
    if ((e == ELOOP || e == ENOTDIR) && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
      return check_stat(&st, shown, err);
    boost_err(err, "ckpt.local_dir %s: %s", shown, strerror(e));
    errno = e; /* ENOENT: callers tell a missing folder from a refused one */
    return -1;
  }
  if (ckpt_private_check(fd, shown, err) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int ckpt_private_open(const char *path, int create, boost_status *err) {
  return ckpt_private_openat(AT_FDCWD, path, path, create, err);
}

void ckpt_private_default_root(unsigned long long hash, char *out, size_t outlen) {
  boost_msgf(out, outlen, "/dev/shm/boost-%u/%016llx", (unsigned)geteuid(), hash);
}

int ckpt_private_root(const char *root_path, int is_default, int create, boost_status *err) {
  char root[PATH_MAX], parent[PATH_MAX];
  boost_msgf(root, sizeof root, "%s", root_path);
  for (size_t n = strlen(root); n > 1 && root[n - 1] == '/';) root[--n] = 0; /* "/x/l/" is the folder l */
  boost_msgf(parent, sizeof parent, "%s", root);
  char *slash = strrchr(parent, '/');
  if (slash && slash != parent) *slash = 0;
  else boost_msgf(parent, sizeof parent, "/");
  if (is_default) { /* the per-user parent: the first place another user could have been before us */
    const int p = ckpt_private_open(parent, create, err);
    if (p < 0) return -1;
    close(p);
  } else if (create) {
    boost_status why = {0};
    if (ckpt_fs_mkdirs(parent, &why) != 0) return boost_err(err, "ckpt.local_dir %s: %s", root, why.msg);
  }
  const int fd = ckpt_private_open(root, create, err);
  if (fd < 0) return -1;
  close(fd);
  return 0;
}

int ckpt_private_check_entries(const char *dir, const char *prefix, boost_status *err) {
  const int fd = ckpt_private_open(dir, 0, err);
  if (fd < 0) return -1;
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return boost_err(err, "ckpt.local_dir %s: %s", dir, strerror(errno));
  }
  int rc = 0;
  for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
    char shown[PATH_MAX];
    struct stat st;
    boost_msgf(shown, sizeof shown, "%s/%s", dir, e->d_name);
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue; /* gone meanwhile */
    rc = check_stat(&st, shown, err);
  }
  closedir(d);
  return rc;
}

int ckpt_private_steps_dir(const char *dir, boost_status *err) {
  const int fd = ckpt_private_open(dir, 1, err);
  if (fd < 0) return -1;
  close(fd);
  return ckpt_private_check_entries(dir, "step_", err);
}

int ckpt_private_parent(const char *path, const char **base, boost_status *err) {
  const char *slash = strrchr(path, '/');
  char dir[PATH_MAX];
  if (!slash) {
    boost_msgf(dir, sizeof dir, ".");
    *base = path;
  } else {
    boost_msgf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    *base = slash + 1;
  }
  return ckpt_private_open(dir, 0, err);
}

int ckpt_private_mkdir(const char *path, boost_status *err) {
  const char *base;
  const int dir = ckpt_private_parent(path, &base, err);
  if (dir < 0) return -1;
  ckpt_private_remove_at(dir, base, path); /* a crashed save's */
  int rc = 0;
  if (mkdirat(dir, base, 0700) != 0) rc = boost_err(err, "ckpt.local_dir %s: cannot create: %s", path, strerror(errno));
  else {
    const int fd = ckpt_private_openat(dir, base, path, 0, err); /* 0700 under any umask, but checked all the same */
    if (fd < 0) rc = -1;
    else close(fd);
  }
  close(dir);
  return rc;
}

int ckpt_private_create(ckpt_private_file *f, const char *path, boost_status *err) {
  const char *base;
  f->fd = -1;
  boost_msgf(f->shown, sizeof f->shown, "%s", path);
  f->dir = ckpt_private_parent(path, &base, err);
  if (f->dir < 0) return -1;
  boost_msgf(f->name, sizeof f->name, "%s", base);
  boost_msgf(f->tmp, sizeof f->tmp, "%s" PRIVATE_TMP_SUFFIX, base);
  unlinkat(f->dir, f->tmp, 0); /* a crashed write's (a link is removed as a link) */
  f->fd = openat(f->dir, f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (f->fd < 0) {
    const int e = errno;
    close(f->dir);
    f->dir = -1;
    return boost_err(err, "%s" PRIVATE_TMP_SUFFIX ": %s", path, strerror(e));
  }
  return 0;
}

int ckpt_private_finish(ckpt_private_file *f, int ok, boost_status *err) {
  if (f->fd < 0) return -1;
  int e = ok ? 0 : errno; /* the caller's failed write */
  if (ok && fsync(f->fd) != 0) ok = 0, e = errno;
  if (close(f->fd) != 0 && ok) ok = 0, e = errno;
  f->fd = -1;
  if (ok && renameat(f->dir, f->tmp, f->dir, f->name) != 0) ok = 0, e = errno;
  if (ok && fsync(f->dir) != 0) ok = 0, e = errno;
  if (!ok) unlinkat(f->dir, f->tmp, 0);
  close(f->dir);
  f->dir = -1;
  if (!ok) return boost_err(err, "%s: %s", f->shown, strerror(e ? e : EIO));
  return 0;
}

int ckpt_private_read_open(const char *path, boost_status *err) {
  const char *base;
  const int dir = ckpt_private_parent(path, &base, err);
  if (dir < 0) return -1;
  const int fd = openat(dir, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC); /* a FIFO must not block */
  const int e = errno;
  close(dir);
  if (fd < 0) return boost_err(err, "%s: %s", path, e == ELOOP ? "a symbolic link, not a file" : strerror(e));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return boost_err(err, "%s: not a regular file", path);
  }
  fcntl(fd, F_SETFL, 0);
  return fd;
}

/* remove_at with a bound on the folders' depth (a step folder holds files;
 * one level more is tolerated, nothing deeper is walked). */
static int remove_at(int in, const char *name, const char *shown, int depth) {
  struct stat st;
  if (fstatat(in, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT ? 0 : -1;
  if (!S_ISDIR(st.st_mode)) return unlinkat(in, name, 0) == 0 || errno == ENOENT ? 0 : -1;
  if (depth > 1) return -1;
  boost_status why = {0};
  const int fd = ckpt_private_openat(in, name, shown, 0, &why);
  if (fd < 0) return -1; /* not ours, or opened to others: left as it is */
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return -1;
  }
  int rc = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char sub[PATH_MAX];
    boost_msgf(sub, sizeof sub, "%s/%s", shown, e->d_name);
    if (remove_at(dirfd(d), e->d_name, sub, depth + 1) != 0) rc = -1;
  }
  closedir(d);
  if (unlinkat(in, name, AT_REMOVEDIR) != 0 && errno != ENOENT) rc = -1;
  return rc;
}

int ckpt_private_remove_at(int in, const char *name, const char *shown) { return remove_at(in, name, shown, 0); }

int ckpt_private_remove(const char *path) {
  const char *base;
  boost_status why = {0};
  const int dir = ckpt_private_parent(path, &base, &why);
  if (dir < 0) return errno == ENOENT ? 0 : -1; /* nothing there to remove */
  const int rc = ckpt_private_remove_at(dir, base, path);
  close(dir);
  return rc;
}

int ckpt_private_rename(const char *dir, const char *from, const char *to, boost_status *err) {
  const int fd = ckpt_private_open(dir, 0, err);
  if (fd < 0) return -1;
  int rc = 0;
  if (renameat(fd, from, fd, to) != 0) rc = boost_err(err, "rename %s/%s: %s", dir, from, strerror(errno));
  else if (fsync(fd) != 0) rc = boost_err(err, "fsync %s: %s", dir, strerror(errno));
  close(fd);
  return rc;
}

int ckpt_private_fsync_dir(const char *dir, boost_status *err) {
  const int fd = ckpt_private_open(dir, 0, err);
  if (fd < 0) return -1;
  const int rc = fsync(fd) == 0 ? 0 : boost_err(err, "fsync %s: %s", dir, strerror(errno));
  close(fd);
  return rc;
}
