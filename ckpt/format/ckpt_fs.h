/* Checkpoint directory: committed files step_XXXXXXXX.h5, temporaries
 * (*.h5.tmp, latest.tmp), the `latest` pointer, fsync, retention.
 * Plain POSIX; every function returns 0 or -1 with errno-based text. */
#ifndef BOOST_CKPT_FS_H
#define BOOST_CKPT_FS_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define CKPT_LATEST "latest"
#define CKPT_TMP_SUFFIX ".tmp"
#define CKPT_SUPERSEDED_SUFFIX ".superseded" /* step_X.h5.superseded.N: set aside (ckpt_rollback.h) */

/* mkdir -p. */
/* A size for people: "812 KiB", "1.2 MiB", "3.40 GiB". */
void ckpt_format_bytes(double b, char *out, size_t n);

int ckpt_fs_mkdirs(const char *dir, boost_status *err);

/* Steps of the committed checkpoints in dir, newest first (malloc'd; *n may
 * be 0 with *steps NULL). */
int ckpt_fs_list(const char *dir, int64_t **steps, int *n, boost_status *err);

/* One job per directory: an exclusive flock on DIR/.lock, held until
 * ckpt_fs_unlock (or the process ends, whatever way it ends). The file
 * names the holder (host, pid, start time) for the message another job
 * gets. Returns the lock's fd, or -1 with err (held by another job, or the
 * file system refuses). */
#define CKPT_LOCK ".lock"
int ckpt_fs_lock(const char *dir, boost_status *err);
void ckpt_fs_unlock(int fd);

/* Removes *.h5.tmp and latest.tmp left by a crash; returns how many (or -1),
 * their names listed in `removed`. */
int ckpt_fs_clean_temporaries(const char *dir, char *removed, size_t removedlen);

/* open(path) + fsync + close; dirs too. */
int ckpt_fs_fsync(const char *path, boost_status *err);

/* Reserves `bytes` of disk for a file without changing its size (fallocate
 * KEEP_SIZE). Returns 0, -1 with errno ENOSPC/EIO/..., or 1 when the file
 * system cannot reserve (then only the free space is checked, statvfs). */
int ckpt_fs_reserve(const char *path, uint64_t bytes, boost_status *err);

/* Frees blocks beyond the file's size (after a reservation). */
int ckpt_fs_trim(const char *path);

/* rename(tmp, final) + fsync(dir): 0, -1 (not renamed), or 1 when renamed
 * but the directory fsync failed (err says so; the file is in place). An
 * existing final file is never replaced (-1, EEXIST): the same step of an
 * abandoned run is set aside first (ckpt_set_aside_after, ckpt_rollback.h). */
int ckpt_fs_commit(const char *dir, const char *tmp_name, const char *final_name, boost_status *err);

/* Atomically writes dir/name with text: name.tmp, fsync, rename, fsync dir. */
int ckpt_fs_write_atomic(const char *dir, const char *name, const char *text, boost_status *err);
/* Atomically points `latest` at name: write latest.tmp, fsync, rename, fsync dir. */
int ckpt_fs_write_latest(const char *dir, const char *name, boost_status *err);
/* Reads `latest` (one line); -1 when absent or unreadable. */
int ckpt_fs_read_latest(const char *dir, char *name, size_t namelen);

/* After committing `step`: keeps the newest keep_last checkpoints with
 * step <= `step` and those whose step is a multiple of keep_every (> 0),
 * deletes the others; checkpoints NEWER than `step` belong to an abandoned
 * run and are left alone (the writer sets them aside before the commit,
 * ckpt_rollback.h). The file `latest` names is never touched.
 * Describes what it did in report. Returns the number of files touched. */
int ckpt_fs_retain(const char *dir, int64_t step, int keep_last, int keep_every, char *report, size_t reportlen);

#endif
