/* The local level's folders as private places (docs/LOCAL.md, "Security").
 * Node memory is shared by every user of the node, and a name under
 * /dev/shm is one anyone can compute, so nothing found there is trusted
 * by its name:
 *
 *   - every folder is opened with O_DIRECTORY|O_NOFOLLOW and checked on the
 *     opened descriptor: a directory, owned by the effective user, no group
 *     or other permission bits (ckpt_private_check). A folder that fails
 *     is refused with one line naming it and what is wrong, never repaired
 *     and never used;
 *   - files are created O_CREAT|O_EXCL|O_NOFOLLOW under a temporary name
 *     and renamed into place; files are read O_NOFOLLOW and only when
 *     regular;
 *   - removal and listing work relative to an opened folder
 *     (openat/unlinkat/fdopendir/renameat/mkdirat) and never follow a link:
 *     a link is removed as a link, whatever it points at.
 *
 * A folder given by path has every component above its last one followed
 * as the kernel does: those are the local root's (checked at the start,
 * inside a private parent for the default root) or the user's own choice.
 * Plain POSIX; every call returns 0 (or an fd) or -1 with err. */
#ifndef BOOST_CKPT_PRIVATE_H
#define BOOST_CKPT_PRIVATE_H

#include <limits.h>
#include <stddef.h>

#include "status.h"

/* What the refusals advise (every line ends with it). */
#define CKPT_PRIVATE_ADVICE "remove it or set another ckpt.local_dir"

/* Checks an opened folder: err "ckpt.local_dir SHOWN: owned by uid U, not
 * by you (uid E): remove it or ..." (or: a mode that lets other users in,
 * not a folder). */
int ckpt_private_check(int fd, const char *shown, boost_status *err);

/* Opens `name` inside dirfd (AT_FDCWD: a path) as a checked private
 * folder; with `create` it is made (mode 0700) first when missing.
 * shown: the path for messages. Returns the fd or -1 with err. */
int ckpt_private_openat(int dirfd, const char *name, const char *shown, int create, boost_status *err);
int ckpt_private_open(const char *path, int create, boost_status *err);

/* The local root, checked (and with `create` made when missing, 0700).
 * The default root (is_default) lies in the per-user parent
 * /dev/shm/boost-<euid>, checked the same way; a user-given root's parents
 * are made as ckpt.dir's are (mkdir -p) and not checked. */
int ckpt_private_root(const char *root, int is_default, int create, boost_status *err);

/* The default root for a hash of the run's ckpt.dir. */
void ckpt_private_default_root(unsigned long long hash, char *out, size_t outlen);

/* Every entry of the checked folder dir whose name starts with prefix
 * checked as a private folder (a link there is refused, not followed). */
int ckpt_private_check_entries(const char *dir, const char *prefix, boost_status *err);

/* A rank's folder of steps (its own, or the partner copies it keeps) made
 * or checked, and every step_* entry in it checked: anything there that is
 * not a private folder of this user refuses the start. */
int ckpt_private_steps_dir(const char *dir, boost_status *err);

/* The checked folder holding path (its last component in *base). */
int ckpt_private_parent(const char *path, const char **base, boost_status *err);

/* A new private folder at path (its parent checked; an old one there is
 * removed first, a link as a link). */
int ckpt_private_mkdir(const char *path, boost_status *err);

/* A file being written: created exclusively as NAME.part in its checked
 * folder, renamed to NAME by ckpt_private_finish. */
typedef struct {
  int dir, fd;
  char name[NAME_MAX + 1];
  char tmp[NAME_MAX + 8];
  char shown[PATH_MAX];
} ckpt_private_file;
int ckpt_private_create(ckpt_private_file *f, const char *path, boost_status *err);
/* ok: fsync, close, rename into place, fsync of the folder; otherwise (or
 * when any of that fails) the temporary removed. Closes everything. */
int ckpt_private_finish(ckpt_private_file *f, int ok, boost_status *err);

/* A regular file of a checked folder opened for reading (never a link). */
int ckpt_private_read_open(const char *path, boost_status *err);

/* Removes `name` in dirfd: a file or link unlinked (a link's target is
 * never touched); a folder only when it passes ckpt_private_check, its
 * entries removed the same way (one level of folders below), then the
 * folder. Returns 0 (also when it was not there) or -1. */
int ckpt_private_remove_at(int in, const char *name, const char *shown);
int ckpt_private_remove(const char *path);

/* renameat(from, to) inside the checked folder dir, then fsync of it. */
int ckpt_private_rename(const char *dir, const char *from, const char *to, boost_status *err);

/* fsync of a checked folder. */
int ckpt_private_fsync_dir(const char *dir, boost_status *err);

#endif
