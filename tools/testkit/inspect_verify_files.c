/* Runs the checkpoint verifier (the code of `boost-inspect verify`) on files.
 *
 *   inspect_verify_files FILE|DIR...
 *       every file (a directory: every file in it) read into memory and
 *       verified as an in-memory image; one line per file. Exit 0 unless a
 *       file cannot be read: the point is that nothing crashes (the fuzz
 *       corpus regression test).
 *   inspect_verify_files --flip FILE META_STRIDE DATA_STRIDE
 *       flips one bit per trial (bit off%8 of byte off) at every META_STRIDE-th
 *       byte outside the raw data chunks (HDF5 metadata, free space) and every
 *       DATA_STRIDE-th byte of the file, verifying each in a forked child.
 *       A trial passes when the verifier reports a problem, or reports none
 *       and reads content identical to the original (same datasets, values and
 *       attributes: equal digests). Exit 1 when any trial fails or crashes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job_abort.h"
#include "inspect.h"
#include "log.h"

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  unsigned char *buf = NULL;
  size_t cap = 0;
  *len = 0;
  for (;;) {
    if (*len == cap) {
      cap = cap ? 2 * cap : 1 << 16;
      unsigned char *nb = realloc(buf, cap);
      if (!nb) break;
      buf = nb;
    }
    size_t got = fread(buf + *len, 1, cap - *len, f);
    if (!got) break;
    *len += got;
  }
  fclose(f);
  return buf ? buf : malloc(1);
}

static int verify_path(const char *path) {
  size_t len;
  unsigned char *buf = slurp(path, &len);
  if (!buf) {
    fprintf(stderr, "cannot read %s\n", path);
    return 1;
  }
  int rc = ins_verify_image(buf, len, NULL);
  printf("%s: %s\n", path, rc ? "problem reported" : "ok");
  free(buf);
  return 0;
}

/* Marks the bytes of raw data (chunks, contiguous data) in mask; -1 (the
 * reason printed) when the file does not open. */
static int mark_raw(const char *path, unsigned char *mask, size_t len) {
  ckr_ckpt c;
  boost_status err = {0};
  if (ckr_open(path, &c, &err) != 0) {
    fprintf(stderr, "%s\n", err.msg);
    return -1;
  }
  for (int i = 0; i < c.n; i++) {
    hid_t d = H5Dopen2(c.f, c.d[i].path, H5P_DEFAULT), sp = H5Dget_space(d);
    hsize_t nchunks = 0;
    haddr_t off = H5Dget_offset(d);
    if (off != HADDR_UNDEF) {
      for (hsize_t b = 0; b < H5Dget_storage_size(d) && off + b < len; b++) mask[off + b] = 1;
    } else if (H5Dget_num_chunks(d, sp, &nchunks) >= 0) {
      for (hsize_t k = 0; k < nchunks; k++) {
        haddr_t addr;
        hsize_t size;
        unsigned fm;
        if (H5Dget_chunk_info(d, sp, k, NULL, &fm, &addr, &size) < 0) continue;
        for (hsize_t b = 0; b < size && addr + b < len; b++) mask[addr + b] = 1;
      }
    }
    H5Sclose(sp);
    H5Dclose(d);
  }
  ckr_close(&c);
  return 0;
}

static int flip_sweep(const char *path, long meta_stride, long data_stride) {
  size_t len;
  unsigned char *buf = slurp(path, &len), *raw = calloc(len + 1, 1);
  uint64_t want;
  if (!buf || ins_verify_image(buf, len, &want) != 0) {
    fprintf(stderr, "%s does not verify before any flip\n", path);
    return 1;
  }
  if (mark_raw(path, raw, len) != 0) {
    free(buf);
    free(raw);
    return 1;
  }
  size_t nraw = 0;
  for (size_t i = 0; i < len; i++) nraw += raw[i];
  long trials = 0, detected = 0, same = 0, bad = 0, crashed = 0, meta_seen = 0;
  for (size_t off = 0; off < len; off++) {
    int take = (long)off % data_stride == 0;
    if (!raw[off]) take |= meta_seen++ % meta_stride == 0;
    if (!take) continue;
    trials++;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      buf[off] ^= (unsigned char)(1u << (off % 8));
      uint64_t got = 0;
      int rc = ins_verify_image(buf, len, &got);
      job_exit_now(rc ? 10 : got == want ? 11 : 12);
    }
    int st;
    waitpid(pid, &st, 0);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (code == 10) detected++;
    else if (code == 11) same++;
    else if (code == 12) bad++, printf("FAIL offset %zu (%s): verify says ok but the content differs\n", off, raw[off] ? "data" : "metadata");
    else crashed++, printf("FAIL offset %zu (%s): crashed (%s %d)\n", off, raw[off] ? "data" : "metadata", WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : code);
  }
  printf("flip sweep %s: %zu bytes (%zu raw data, %zu metadata/free), %ld trials: %ld reported, %ld ok with identical content, %ld ok with different content, %ld crashed\n",
         path, len, nraw, len - nraw, trials, detected, same, bad, crashed);
  free(buf);
  free(raw);
  return bad || crashed ? 1 : 0;
}

int main(int argc, char **argv) {
  boost_log_program("inspect_verify_files"); /* first: every warning of the process carries this name */
  if (argc == 5 && !strcmp(argv[1], "--flip")) return flip_sweep(argv[2], atol(argv[3]) > 0 ? atol(argv[3]) : 1, atol(argv[4]) > 0 ? atol(argv[4]) : 64);
  int rc = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
      DIR *d = opendir(argv[i]);
      struct dirent *e;
      while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
        rc |= verify_path(p);
      }
      if (d) closedir(d);
    } else rc |= verify_path(argv[i]);
  }
  return rc;
}
