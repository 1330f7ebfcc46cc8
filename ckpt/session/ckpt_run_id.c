#include "ckpt_run_id.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "ckpt_fs.h"
#include "comm.h"
#include "ckpt_peek.h"
#include "util.h"

#define MARKER_PREFIX "boost-run-id "

int ckpt_run_id_valid(const char *s) {
  if (!s || strlen(s) != CKPT_RUN_ID_HEX) return 0;
  for (const char *c = s; *c; c++)
    if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f'))) return 0;
  return 1;
}

int ckpt_run_id_new(char *out, boost_status *err) {
  unsigned char b[CKPT_RUN_ID_BYTES];
  size_t got = 0;
  while (got < sizeof b) {
    const ssize_t n = getrandom(b + got, sizeof b - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return boost_err(err, "getrandom: %s", strerror(errno));
    got += (size_t)n;
  }
  ckpt_run_id_from_bytes(b, out);
  return 0;
}

static int nibble(char c) { return c >= 'a' ? c - 'a' + 10 : c - '0'; }

void ckpt_run_id_to_bytes(const char *hex, unsigned char out[CKPT_RUN_ID_BYTES]) {
  memset(out, 0, CKPT_RUN_ID_BYTES);
  if (!ckpt_run_id_valid(hex)) return;
  for (int i = 0; i < CKPT_RUN_ID_BYTES; i++) out[i] = (unsigned char)(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
}

void ckpt_run_id_from_bytes(const unsigned char in[CKPT_RUN_ID_BYTES], char *out) {
  static const char digits[] = "0123456789abcdef";
  int any = 0;
  for (int i = 0; i < CKPT_RUN_ID_BYTES; i++) {
    out[2 * i] = digits[in[i] >> 4], out[2 * i + 1] = digits[in[i] & 15];
    any |= in[i];
  }
  out[any ? CKPT_RUN_ID_HEX : 0] = 0;
}

int ckpt_run_id_read_marker(const char *dir, char *out) {
  out[0] = 0;
  char path[PATH_MAX], buf[64] = "";
  boost_msgf(path, sizeof path, "%s/%s", dir, CKPT_RUN_ID_MARKER);
  const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return 0;
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  const size_t want = strlen(MARKER_PREFIX) + CKPT_RUN_ID_HEX + 1;
  if (n != (ssize_t)want || strncmp(buf, MARKER_PREFIX, strlen(MARKER_PREFIX)) != 0 || buf[want - 1] != '\n') return 0;
  buf[want - 1] = 0;
  if (!ckpt_run_id_valid(buf + strlen(MARKER_PREFIX))) return 0;
  boost_msgf(out, CKPT_RUN_ID_HEX + 1, "%s", buf + strlen(MARKER_PREFIX));
  return 1;
}

int ckpt_run_id_write_marker(const char *dir, const char *id, boost_status *err) {
  char path[PATH_MAX], tmp[PATH_MAX], line[64];
  boost_msgf(path, sizeof path, "%s/%s", dir, CKPT_RUN_ID_MARKER);
  /* one name: rank 0 writes it under the directory's lock (ckpt_fs_lock) */
  boost_msgf(tmp, sizeof tmp, "%s/%s.tmp", dir, CKPT_RUN_ID_MARKER);
  const int n = snprintf(line, sizeof line, MARKER_PREFIX "%s\n", id);
  unlink(tmp); /* a crashed writer's */
  const int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return boost_err(err, "%s: %s", tmp, strerror(errno));
  int ok = write(fd, line, (size_t)n) == n && fsync(fd) == 0;
  const int e = errno;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    const int e2 = ok ? errno : e;
    unlink(tmp);
    return boost_err(err, "%s: %s", path, strerror(e2));
  }
  return ckpt_fs_fsync(dir, err);
}

void ckpt_run_id_expected(const char *dir, const ckpt_meta *newest, char *out) {
  out[0] = 0;
  if (newest && ckpt_meta_has(newest, CKPT_META_F_run_id) && ckpt_run_id_valid(newest->run.run_id))
    boost_msgf(out, CKPT_RUN_ID_HEX + 1, "%s", newest->run.run_id);
  else if (dir && dir[0]) ckpt_run_id_read_marker(dir, out);
}

int64_t ckpt_run_id_newest(MPI_Comm world, const char *dir, const ckpt_from *from, char *expect) {
  int rank;
  MPI_Comm_rank(world, &rank);
  struct {
    int64_t step;
    char id[CKPT_RUN_ID_HEX + 1];
  } got = {-1, ""};
  if (rank == 0) {
    ckpt_peek_info info;
    memset(&info, 0, sizeof info);
    boost_status why = {0};
    const int found = ckpt_peek(dir, from, &info, &why) == 1;
    if (found) got.step = info.meta.run.step;
    ckpt_run_id_expected(dir, found ? &info.meta : NULL, got.id);
    ckpt_peek_free(&info);
  }
  comm_control_bcast(world, COMM_WORLD, "checkpoint agreement", &got, (int)sizeof got, 0);
  memcpy(expect, got.id, sizeof got.id);
  return got.step;
}

void ckpt_run_id_adopt(MPI_Comm comm, const char *dir, const char *candidate, char *out, char *note, size_t notelen) {
  int rank;
  MPI_Comm_rank(comm, &rank);
  char id[CKPT_RUN_ID_HEX + 1] = "";
  if (note && notelen) note[0] = 0;
  if (rank == 0) {
    boost_status err = {0};
    if (ckpt_run_id_valid(candidate)) boost_msgf(id, sizeof id, "%s", candidate);
    else if (ckpt_run_id_new(id, &err) != 0) boost_msgf(note, notelen, "no run identity: %s", err.msg);
    char held[CKPT_RUN_ID_HEX + 1];
    if (id[0] && dir && dir[0] && (!ckpt_run_id_read_marker(dir, held) || strcmp(held, id) != 0) &&
        ckpt_run_id_write_marker(dir, id, &err) != 0)
      boost_msgf(note, notelen, "the run identity's marker was not written (a kill before the first checkpoint file "
                 "then restarts from the file level): %s", err.msg);
  }
  MPI_Bcast(id, (int)sizeof id, MPI_CHAR, 0, comm);
  boost_msgf(out, CKPT_RUN_ID_HEX + 1, "%s", id);
}
