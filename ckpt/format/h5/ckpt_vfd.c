/* See ckpt_vfd.h. A minimal POSIX driver: pread/pwrite on one descriptor,
 * the end of allocation kept in memory, the file cut to it on close. */
#include "ckpt_vfd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
  H5FD_t pub; /* first: HDF5 casts between the two */
  int fd;
  haddr_t eoa, eof;
  dev_t dev;
  ino_t ino;
} vfd_file;

static int abandoned;
static int write_errno; /* the first failed write or truncation of the open file (0: none) */

void ckpt_vfd_abandon(void) { abandoned = 1; }

int ckpt_vfd_failed(void) { return write_errno; }

/* A write the file system refused (ENOSPC, EIO): the file is lost, and HDF5
 * does not survive a metadata flush that fails mid-operation (its close can
 * crash afterwards), so the driver remembers the error, gives the file up
 * and tells HDF5 the write succeeded; the writer reports the error. */
static herr_t give_up(void) {
  if (!write_errno) write_errno = errno ? errno : EIO;
  abandoned = 1;
  return 0;
}

static struct {
  int armed, dropped;
  size_t size;
  haddr_t addr;
} drop;

void ckpt_vfd_drop_next_raw(size_t size) {
  drop.armed = 1;
  drop.dropped = 0;
  drop.size = size;
  drop.addr = HADDR_UNDEF;
}

int ckpt_vfd_dropped(haddr_t *addr) {
  const int ok = drop.dropped;
  *addr = drop.addr;
  drop.armed = drop.dropped = 0;
  return ok;
}

static herr_t vfd_fail(const char *func, const char *what) {
  H5Epush2(H5E_DEFAULT, __FILE__, func, __LINE__, H5E_ERR_CLS, H5E_VFL, H5E_CANTOPENFILE, "ckpt driver: %s: %s", what,
           strerror(errno));
  return -1;
}

static H5FD_t *vfd_open(const char *name, unsigned flags, hid_t fapl, haddr_t maxaddr) {
  (void)fapl;
  (void)maxaddr;
  int oflags = (flags & H5F_ACC_RDWR) ? O_RDWR : O_RDONLY;
  if (flags & H5F_ACC_TRUNC) oflags |= O_TRUNC;
  if (flags & H5F_ACC_CREAT) oflags |= O_CREAT;
  if (flags & H5F_ACC_EXCL) oflags |= O_EXCL;
  abandoned = 0;
  write_errno = 0;
  const int fd = open(name, oflags | O_CLOEXEC, 0666);
  if (fd < 0) {
    vfd_fail(__func__, "open");
    return NULL;
  }
  struct stat st;
  vfd_file *f = calloc(1, sizeof *f);
  if (!f || fstat(fd, &st) != 0) {
    vfd_fail(__func__, f ? "fstat" : "out of memory");
    free(f);
    close(fd);
    return NULL;
  }
  f->fd = fd;
  f->eof = (haddr_t)st.st_size;
  f->dev = st.st_dev;
  f->ino = st.st_ino;
  return &f->pub;
}

static herr_t vfd_close(H5FD_t *file) {
  vfd_file *f = (vfd_file *)file;
  const int rc = close(f->fd);
  free(f);
  return rc == 0 ? 0 : vfd_fail(__func__, "close");
}

static int vfd_cmp(const H5FD_t *a, const H5FD_t *b) {
  const vfd_file *x = (const vfd_file *)a, *y = (const vfd_file *)b;
  if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
  if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
  return 0;
}

/* Aggregation only: no metadata accumulator and no data sieving (see the
 * header for why). */
static herr_t vfd_query(const H5FD_t *file, unsigned long *flags) {
  (void)file;
  *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_AGGREGATE_SMALLDATA;
  return 0;
}

static haddr_t vfd_get_eoa(const H5FD_t *file, H5FD_mem_t type) {
  (void)type;
  return ((const vfd_file *)file)->eoa;
}

static herr_t vfd_set_eoa(H5FD_t *file, H5FD_mem_t type, haddr_t addr) {
  (void)type;
  ((vfd_file *)file)->eoa = addr;
  return 0;
}

static haddr_t vfd_get_eof(const H5FD_t *file, H5FD_mem_t type) {
  (void)type;
  return ((const vfd_file *)file)->eof;
}

static herr_t vfd_get_handle(H5FD_t *file, hid_t fapl, void **handle) {
  (void)fapl;
  *handle = &((vfd_file *)file)->fd;
  return 0;
}

static herr_t vfd_read(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, void *buf) {
  (void)type;
  (void)dxpl;
  vfd_file *f = (vfd_file *)file;
  unsigned char *p = buf;
  while (size > 0) {
    const ssize_t n = pread(f->fd, p, size, (off_t)addr);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return vfd_fail(__func__, "pread");
    if (n == 0) { /* past the end: zeros, as every HDF5 driver reads them */
      memset(p, 0, size);
      break;
    }
    p += n;
    addr += (haddr_t)n;
    size -= (size_t)n;
  }
  return 0;
}

static herr_t vfd_write(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, const void *buf) {
  (void)dxpl;
  vfd_file *f = (vfd_file *)file;
  const haddr_t end = addr + size;
  if (abandoned) return 0;
  if (drop.armed && type == H5FD_MEM_DRAW && size == drop.size) {
    drop.armed = 0;
    drop.dropped = 1;
    drop.addr = addr;
  } else {
    const unsigned char *p = buf;
    while (size > 0) {
      const ssize_t n = pwrite(f->fd, p, size, (off_t)addr);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return give_up();
      p += n;
      addr += (haddr_t)n;
      size -= (size_t)n;
    }
  }
  if (end > f->eof) f->eof = end;
  return 0;
}

static herr_t vfd_truncate(H5FD_t *file, hid_t dxpl, hbool_t closing) {
  (void)dxpl;
  (void)closing;
  vfd_file *f = (vfd_file *)file;
  if (abandoned) return 0;
  struct stat st;
  if (fstat(f->fd, &st) != 0) return vfd_fail(__func__, "fstat");
  if ((haddr_t)st.st_size != f->eoa && ftruncate(f->fd, (off_t)f->eoa) != 0) return give_up();
  f->eof = f->eoa;
  return 0;
}

static const H5FD_class_t vfd_class = {
    .name = "boost_ckpt_direct",
    .maxaddr = (haddr_t)INT64_MAX,
    .fc_degree = H5F_CLOSE_WEAK,
    .open = vfd_open,
    .close = vfd_close,
    .cmp = vfd_cmp,
    .query = vfd_query,
    .get_eoa = vfd_get_eoa,
    .set_eoa = vfd_set_eoa,
    .get_eof = vfd_get_eof,
    .get_handle = vfd_get_handle,
    .read = vfd_read,
    .write = vfd_write,
    .truncate = vfd_truncate,
    .fl_map = H5FD_FLMAP_DICHOTOMY,
};

hid_t ckpt_vfd_fapl(void) {
  static hid_t driver = -1;
  if (driver < 0) driver = H5FDregister(&vfd_class);
  if (driver < 0) return -1;
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl < 0) return -1;
  if (H5Pset_driver(fapl, driver, NULL) < 0 || H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110) < 0) {
    H5Pclose(fapl);
    return -1;
  }
  return fapl;
}
