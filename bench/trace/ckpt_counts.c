/* LD_PRELOAD library that counts, per process, the MPI calls and the file
 * system operations a program makes (bench/bench_ckpt_scale.sh): every
 * collective (by name), point-to-point messages, MPI-IO opens, and the
 * POSIX file opens and metadata operations (stat, rename, unlink, mkdir,
 * fsync, truncate, allocate). At MPI_Finalize each rank writes one JSON
 * object to $BOOST_COUNTS_DIR/rank<R>.json. Counting only: every call goes
 * on to the real one (PMPI_* for MPI, the next definition for libc). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define COUNTERS(X)                                                                                                    \
  X(MPI_Allreduce) X(MPI_Reduce) X(MPI_Bcast) X(MPI_Barrier) X(MPI_Gather) X(MPI_Gatherv) X(MPI_Allgather)            \
  X(MPI_Allgatherv) X(MPI_Scatter) X(MPI_Scatterv) X(MPI_Alltoall) X(MPI_Alltoallv) X(MPI_Exscan) X(MPI_Scan)          \
  X(MPI_Reduce_scatter) X(MPI_Iallreduce) X(MPI_Ibcast) X(MPI_Ibarrier) X(MPI_Comm_dup) X(MPI_Comm_split)              \
  X(MPI_Comm_free) X(MPI_File_open) X(MPI_File_close) X(MPI_File_sync) X(MPI_File_set_size) X(MPI_Send) X(MPI_Isend)  \
  X(MPI_Recv) X(MPI_Irecv) X(open) X(stat) X(rename) X(unlink) X(mkdir) X(fsync) X(truncate) X(allocate)

enum {
#define ENUM(n) C_##n,
  COUNTERS(ENUM)
#undef ENUM
      C_COUNT
};
static const char *const names[] = {
#define NAME(n) #n,
    COUNTERS(NAME)
#undef NAME
};
static atomic_long counts[C_COUNT];
#define COUNT(n) atomic_fetch_add_explicit(&counts[C_##n], 1, memory_order_relaxed)

/* ---- MPI: interposed over the profiling interface ------------------------ */
int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  COUNT(MPI_Allreduce);
  return PMPI_Allreduce(s, r, n, t, op, c);
}
int MPI_Reduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c) {
  COUNT(MPI_Reduce);
  return PMPI_Reduce(s, r, n, t, op, root, c);
}
int MPI_Bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c) {
  COUNT(MPI_Bcast);
  return PMPI_Bcast(b, n, t, root, c);
}
int MPI_Barrier(MPI_Comm c) {
  COUNT(MPI_Barrier);
  return PMPI_Barrier(c);
}
int MPI_Gather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, int root, MPI_Comm c) {
  COUNT(MPI_Gather);
  return PMPI_Gather(s, sn, st, r, rn, rt, root, c);
}
int MPI_Gatherv(const void *s, int sn, MPI_Datatype st, void *r, const int *rn, const int *d, MPI_Datatype rt, int root,
                MPI_Comm c) {
  COUNT(MPI_Gatherv);
  return PMPI_Gatherv(s, sn, st, r, rn, d, rt, root, c);
}
int MPI_Allgather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c) {
  COUNT(MPI_Allgather);
  return PMPI_Allgather(s, sn, st, r, rn, rt, c);
}
int MPI_Allgatherv(const void *s, int sn, MPI_Datatype st, void *r, const int *rn, const int *d, MPI_Datatype rt,
                   MPI_Comm c) {
  COUNT(MPI_Allgatherv);
  return PMPI_Allgatherv(s, sn, st, r, rn, d, rt, c);
}
int MPI_Scatter(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, int root, MPI_Comm c) {
  COUNT(MPI_Scatter);
  return PMPI_Scatter(s, sn, st, r, rn, rt, root, c);
}
int MPI_Scatterv(const void *s, const int *sn, const int *d, MPI_Datatype st, void *r, int rn, MPI_Datatype rt,
                 int root, MPI_Comm c) {
  COUNT(MPI_Scatterv);
  return PMPI_Scatterv(s, sn, d, st, r, rn, rt, root, c);
}
int MPI_Alltoall(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c) {
  COUNT(MPI_Alltoall);
  return PMPI_Alltoall(s, sn, st, r, rn, rt, c);
}
int MPI_Alltoallv(const void *s, const int *sn, const int *sd, MPI_Datatype st, void *r, const int *rn, const int *rd,
                  MPI_Datatype rt, MPI_Comm c) {
  COUNT(MPI_Alltoallv);
  return PMPI_Alltoallv(s, sn, sd, st, r, rn, rd, rt, c);
}
int MPI_Exscan(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  COUNT(MPI_Exscan);
  return PMPI_Exscan(s, r, n, t, op, c);
}
int MPI_Scan(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  COUNT(MPI_Scan);
  return PMPI_Scan(s, r, n, t, op, c);
}
int MPI_Reduce_scatter(const void *s, void *r, const int *rn, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  COUNT(MPI_Reduce_scatter);
  return PMPI_Reduce_scatter(s, r, rn, t, op, c);
}
int MPI_Iallreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request *q) {
  COUNT(MPI_Iallreduce);
  return PMPI_Iallreduce(s, r, n, t, op, c, q);
}
int MPI_Ibcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *q) {
  COUNT(MPI_Ibcast);
  return PMPI_Ibcast(b, n, t, root, c, q);
}
int MPI_Ibarrier(MPI_Comm c, MPI_Request *q) {
  COUNT(MPI_Ibarrier);
  return PMPI_Ibarrier(c, q);
}
int MPI_Comm_dup(MPI_Comm c, MPI_Comm *n) {
  COUNT(MPI_Comm_dup);
  return PMPI_Comm_dup(c, n);
}
int MPI_Comm_split(MPI_Comm c, int color, int key, MPI_Comm *n) {
  COUNT(MPI_Comm_split);
  return PMPI_Comm_split(c, color, key, n);
}
int MPI_Comm_free(MPI_Comm *c) {
  COUNT(MPI_Comm_free);
  return PMPI_Comm_free(c);
}
int MPI_File_open(MPI_Comm c, const char *name, int mode, MPI_Info info, MPI_File *f) {
  COUNT(MPI_File_open);
  return PMPI_File_open(c, name, mode, info, f);
}
int MPI_File_close(MPI_File *f) {
  COUNT(MPI_File_close);
  return PMPI_File_close(f);
}
int MPI_File_sync(MPI_File f) {
  COUNT(MPI_File_sync);
  return PMPI_File_sync(f);
}
int MPI_File_set_size(MPI_File f, MPI_Offset size) {
  COUNT(MPI_File_set_size);
  return PMPI_File_set_size(f, size);
}
int MPI_Send(const void *b, int n, MPI_Datatype t, int dst, int tag, MPI_Comm c) {
  COUNT(MPI_Send);
  return PMPI_Send(b, n, t, dst, tag, c);
}
int MPI_Isend(const void *b, int n, MPI_Datatype t, int dst, int tag, MPI_Comm c, MPI_Request *q) {
  COUNT(MPI_Isend);
  return PMPI_Isend(b, n, t, dst, tag, c, q);
}
int MPI_Recv(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Status *st) {
  COUNT(MPI_Recv);
  return PMPI_Recv(b, n, t, src, tag, c, st);
}
int MPI_Irecv(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Request *q) {
  COUNT(MPI_Irecv);
  return PMPI_Irecv(b, n, t, src, tag, c, q);
}

int MPI_Finalize(void) {
  const char *dir = getenv("BOOST_COUNTS_DIR");
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (dir && *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.json", dir, rank);
    FILE *f = fopen(path, "w");
    if (f) {
      fprintf(f, "{\"rank\": %d", rank);
      for (int i = 0; i < C_COUNT; i++) fprintf(f, ", \"%s\": %ld", names[i], atomic_load(&counts[i]));
      fprintf(f, "}\n");
      fclose(f);
    }
  }
  return PMPI_Finalize();
}

/* ---- the C library: the next definition, found once ---------------------- */
#define NEXT(ret, name, args)                                                                                          \
  static ret(*next_##name) args;                                                                                       \
  if (!next_##name) next_##name = (ret(*) args)dlsym(RTLD_NEXT, #name)

static mode_t open_mode(int flags, va_list ap) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}
int open(const char *p, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t m = open_mode(flags, ap);
  va_end(ap);
  NEXT(int, open, (const char *, int, ...));
  COUNT(open);
  return next_open(p, flags, m);
}
int open64(const char *p, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t m = open_mode(flags, ap);
  va_end(ap);
  NEXT(int, open64, (const char *, int, ...));
  COUNT(open);
  return next_open64(p, flags, m);
}
int openat(int d, const char *p, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t m = open_mode(flags, ap);
  va_end(ap);
  NEXT(int, openat, (int, const char *, int, ...));
  COUNT(open);
  return next_openat(d, p, flags, m);
}
FILE *fopen(const char *p, const char *m) {
  NEXT(FILE *, fopen, (const char *, const char *));
  COUNT(open);
  return next_fopen(p, m);
}
FILE *fopen64(const char *p, const char *m) {
  NEXT(FILE *, fopen64, (const char *, const char *));
  COUNT(open);
  return next_fopen64(p, m);
}
int stat(const char *p, struct stat *b) {
  NEXT(int, stat, (const char *, struct stat *));
  COUNT(stat);
  return next_stat(p, b);
}
int lstat(const char *p, struct stat *b) {
  NEXT(int, lstat, (const char *, struct stat *));
  COUNT(stat);
  return next_lstat(p, b);
}
int fstatat(int d, const char *p, struct stat *b, int fl) {
  NEXT(int, fstatat, (int, const char *, struct stat *, int));
  COUNT(stat);
  return next_fstatat(d, p, b, fl);
}
int access(const char *p, int mode) {
  NEXT(int, access, (const char *, int));
  COUNT(stat);
  return next_access(p, mode);
}
int rename(const char *a, const char *b) {
  NEXT(int, rename, (const char *, const char *));
  COUNT(rename);
  return next_rename(a, b);
}
int renameat(int da, const char *a, int db, const char *b) {
  NEXT(int, renameat, (int, const char *, int, const char *));
  COUNT(rename);
  return next_renameat(da, a, db, b);
}
int unlink(const char *p) {
  NEXT(int, unlink, (const char *));
  COUNT(unlink);
  return next_unlink(p);
}
int unlinkat(int d, const char *p, int fl) {
  NEXT(int, unlinkat, (int, const char *, int));
  COUNT(unlink);
  return next_unlinkat(d, p, fl);
}
int mkdir(const char *p, mode_t m) {
  NEXT(int, mkdir, (const char *, mode_t));
  COUNT(mkdir);
  return next_mkdir(p, m);
}
int fsync(int fd) {
  NEXT(int, fsync, (int));
  COUNT(fsync);
  return next_fsync(fd);
}
int fdatasync(int fd) {
  NEXT(int, fdatasync, (int));
  COUNT(fsync);
  return next_fdatasync(fd);
}
int ftruncate(int fd, off_t len) {
  NEXT(int, ftruncate, (int, off_t));
  COUNT(truncate);
  return next_ftruncate(fd, len);
}
int posix_fallocate(int fd, off_t off, off_t len) {
  NEXT(int, posix_fallocate, (int, off_t, off_t));
  COUNT(allocate);
  return next_posix_fallocate(fd, off, len);
}
int fallocate(int fd, int mode, off_t off, off_t len) {
  NEXT(int, fallocate, (int, int, off_t, off_t));
  COUNT(allocate);
  return next_fallocate(fd, mode, off, len);
}
