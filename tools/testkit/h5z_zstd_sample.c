/* h5z_zstd_sample: test utility and benchmark for the zstd HDF5 filter.
 *
 *   h5z_zstd_sample write FILE.h5 RAWDIR
 *       Writes /ramp (float32 [100,37], chunks [16,10], shuffle+zstd -3) and
 *       /gauss (float32 [5000], chunks [1024], shuffle+zstd -1) with the
 *       in-process filter, and their raw little-endian values to
 *       RAWDIR/ramp.f32 and RAWDIR/gauss.f32.
 *       ramp[i][j] = (i*37 + j) * 0.25 - 100 (exact in float32).
 *   h5z_zstd_sample read FILE.h5 DATASET OUT.f32
 *       With plugin loading disabled (only the in-process filter can decode),
 *       checks that DATASET's pipeline has filter 32015, reads it as native
 *       float32 and writes the raw values to OUT.f32.
 *   h5z_zstd_sample bench DIR [MIB [CHUNK_KIB]]
 *       MIB (default 64) of Gaussian float32 through HDF5 (in-memory core
 *       driver, one thread): shuffle+zstd -1/-3, zstd -1/-3 alone, shuffle
 *       alone, no filter; prints ratio and write/read MB/s (1 MB = 1e6 bytes of raw input).
 *       Leaves the raw bytes in DIR/gauss.f32 for comparison with `zstd`.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "h5z_zstd.h"
#include "log.h"

static void die(const char *fmt, const char *arg) {
  fprintf(stderr, "h5z_zstd_sample: ");
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  H5Eprint2(H5E_DEFAULT, stderr);
  exit(1);
}

static void write_raw(const char *path, const float *v, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) die("cannot create %s", path);
  if (fwrite(v, sizeof *v, n, f) != n || fclose(f) != 0) die("cannot write %s", path);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t splitmix64(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static void gaussian(float *v, size_t n, float sigma) {
  for (size_t i = 0; i < n; i += 2) {
    double u1 = ((double)(splitmix64() >> 11) + 1.0) / 9007199254740993.0; /* (0,1] */
    double u2 = (double)(splitmix64() >> 11) / 9007199254740992.0;
    double r = sqrt(-2.0 * log(u1));
    v[i] = (float)(sigma * r * cos(2.0 * M_PI * u2));
    if (i + 1 < n) v[i + 1] = (float)(sigma * r * sin(2.0 * M_PI * u2));
  }
}

static void write_dataset(hid_t file, const char *name, int ndim, const hsize_t *dims, const hsize_t *chunk,
                          int level, const float *v) {
  hid_t space = H5Screate_simple(ndim, dims, NULL);
  if (space < 0) die("H5Screate_simple for %s failed", name);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (dcpl < 0) die("H5Pcreate for %s failed", name);
  if (h5z_zstd_set_dcpl(dcpl, ndim, chunk, level) < 0) die("h5z_zstd_set_dcpl for %s failed", name);
  hid_t dset = H5Dcreate2(file, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (dset < 0) die("H5Dcreate2 %s failed", name);
  if (H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0) die("H5Dwrite %s failed", name);
  if (H5Dclose(dset) < 0 || H5Pclose(dcpl) < 0 || H5Sclose(space) < 0) die("closing %s failed", name);
}

static int cmd_write(const char *path, const char *rawdir) {
  char raw[4096];
  hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) die("H5Fcreate %s failed", path);

  enum { R = 100, C = 37, G = 5000 };
  static float ramp[R * C], gauss[G];
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) ramp[i * C + j] = (float)(i * C + j) * 0.25f - 100.0f;
  const hsize_t rdims[2] = {R, C}, rchunk[2] = {16, 10};
  write_dataset(file, "ramp", 2, rdims, rchunk, 3, ramp);

  gaussian(gauss, G, 1.0f);
  const hsize_t gdims[1] = {G}, gchunk[1] = {1024};
  write_dataset(file, "gauss", 1, gdims, gchunk, 1, gauss);
  if (H5Fclose(file) < 0) die("H5Fclose %s failed", path);

  snprintf(raw, sizeof raw, "%s/ramp.f32", rawdir);
  write_raw(raw, ramp, R * C);
  snprintf(raw, sizeof raw, "%s/gauss.f32", rawdir);
  write_raw(raw, gauss, G);
  return 0;
}

static int cmd_read(const char *path, const char *name, const char *out) {
  /* Prove the in-process filter does the work: no plugin may be loaded. */
  if (H5PLset_loading_state(0) < 0) die("H5PLset_loading_state(0) failed%s", "");
  if (h5z_zstd_register() < 0) die("h5z_zstd_register failed%s", "");
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) die("H5Fopen %s failed", path);
  hid_t dset = H5Dopen2(file, name, H5P_DEFAULT);
  if (dset < 0) die("H5Dopen2 %s failed", name);
  hid_t dcpl = H5Dget_create_plist(dset);
  if (dcpl < 0) die("H5Dget_create_plist %s failed", name);
  int nf = H5Pget_nfilters(dcpl), found = 0;
  if (nf < 0) die("H5Pget_nfilters %s failed", name);
  for (int i = 0; i < nf; i++) {
    unsigned flags, cd[8];
    size_t ncd = 8;
    char fname[128];
    H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &ncd, cd, sizeof fname, fname, NULL);
    if (id < 0) die("H5Pget_filter2 %s failed", name);
    printf("filter %d: id %d%s", i, (int)id, ncd ? " cd_values" : "");
    for (size_t k = 0; k < ncd && k < 8; k++) printf(" %u", cd[k]);
    printf("\n");
    if (id == H5Z_FILTER_ZSTD) found = 1;
  }
  if (!found) die("dataset %s does not use filter 32015", name);
  hid_t space = H5Dget_space(dset);
  hssize_t n = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
  if (n < 0) die("H5Dget_space %s failed", name);
  float *v = malloc((size_t)n * sizeof *v + 1);
  if (!v) die("out of memory reading %s", name);
  if (H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0) die("H5Dread %s failed", name);
  write_raw(out, v, (size_t)n);
  free(v);
  if (H5Sclose(space) < 0 || H5Pclose(dcpl) < 0 || H5Dclose(dset) < 0 || H5Fclose(file) < 0)
    die("closing %s failed", path);
  printf("read %lld values of %s through the in-process filter\n", (long long)n, name);
  return 0;
}

/* Process CPU time: on a shared 2-core machine it measures the work, not the
 * neighbours (the bench is single-threaded, so this is one core's speed). */
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { PIPE_NONE = 0, PIPE_SHUFFLE = 1, PIPE_ZSTD = 2 };

/* One variant: write then read back through an in-memory HDF5 file. */
static void bench_one(const char *label, const float *v, float *back, size_t n, hsize_t chunk, int pipe,
                      int level, int reps) {
  double best_w = 1e30, best_r = 1e30;
  hsize_t stored = 0;
  for (int rep = 0; rep < reps; rep++) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fapl_core(fapl, 64u << 20, 0) < 0) die("core driver setup failed%s", "");
    hid_t file = H5Fcreate("bench-in-memory.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (file < 0) die("H5Fcreate (core) failed%s", "");
    hsize_t dims[1] = {n};
    hid_t space = H5Screate_simple(1, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (space < 0 || dcpl < 0) die("H5Screate/H5Pcreate failed%s", "");
    if (pipe == (PIPE_SHUFFLE | PIPE_ZSTD)) {
      if (h5z_zstd_set_dcpl(dcpl, 1, &chunk, level) < 0) die("h5z_zstd_set_dcpl failed%s", "");
    } else {
      unsigned cd[1] = {(unsigned)level};
      if (h5z_zstd_register() < 0 || H5Pset_chunk(dcpl, 1, &chunk) < 0) die("H5Pset_chunk failed%s", "");
      if ((pipe & PIPE_SHUFFLE) && H5Pset_shuffle(dcpl) < 0) die("H5Pset_shuffle failed%s", "");
      if ((pipe & PIPE_ZSTD) && H5Pset_filter(dcpl, H5Z_FILTER_ZSTD, H5Z_FLAG_MANDATORY, 1, cd) < 0)
        die("H5Pset_filter failed%s", "");
    }
    if (H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0) die("H5Pset_fill_time failed%s", "");
    double t0 = now();
    hid_t dset = H5Dcreate2(file, "x", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (dset < 0 || H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
      die("bench write failed%s", "");
    if (H5Dclose(dset) < 0) die("H5Dclose failed%s", "");
    double t1 = now();
    dset = H5Dopen2(file, "x", H5P_DEFAULT);
    if (dset < 0 || H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, back) < 0)
      die("bench read failed%s", "");
    double t2 = now();
    stored = H5Dget_storage_size(dset);
    if (H5Dclose(dset) < 0 || H5Pclose(dcpl) < 0 || H5Sclose(space) < 0 || H5Fclose(file) < 0 ||
        H5Pclose(fapl) < 0)
      die("bench close failed%s", "");
    if (memcmp(v, back, n * sizeof *v) != 0) die("bench %s: data read back differs", label);
    if (t1 - t0 < best_w) best_w = t1 - t0;
    if (t2 - t1 < best_r) best_r = t2 - t1;
  }
  double raw = (double)(n * sizeof *v);
  printf("%-22s ratio %.4f  write %7.1f MB/s  read %7.1f MB/s\n", label, raw / (double)stored,
         raw / best_w / 1e6, raw / best_r / 1e6);
}

static int cmd_bench(const char *dir, size_t mib, size_t chunk_kib) {
  size_t n = mib * (1u << 20) / sizeof(float);
  hsize_t chunk = chunk_kib * 1024 / sizeof(float);
  float *v = malloc(n * sizeof *v), *back = malloc(n * sizeof *v);
  if (!v || !back) die("out of memory%s", "");
  gaussian(v, n, 1.0f);
  char raw[4096];
  snprintf(raw, sizeof raw, "%s/gauss.f32", dir);
  write_raw(raw, v, n);
  printf("%zu MiB Gaussian float32 (sigma 1), chunks of %zu KiB, HDF5 core driver, CPU time, best of 3\n", mib,
         chunk_kib);
  bench_one("shuffle + zstd -1", v, back, n, chunk, PIPE_SHUFFLE | PIPE_ZSTD, 1, 3);
  bench_one("shuffle + zstd -3", v, back, n, chunk, PIPE_SHUFFLE | PIPE_ZSTD, 3, 3);
  bench_one("zstd -1 (no shuffle)", v, back, n, chunk, PIPE_ZSTD, 1, 3);
  bench_one("zstd -3 (no shuffle)", v, back, n, chunk, PIPE_ZSTD, 3, 3);
  bench_one("shuffle only", v, back, n, chunk, PIPE_SHUFFLE, 0, 3);
  bench_one("chunked, no filter", v, back, n, chunk, PIPE_NONE, 0, 3);
  printf("raw bytes left in %s\n", raw);
  free(v);
  free(back);
  return 0;
}

int main(int argc, char **argv) {
  boost_log_program("h5z_zstd_sample"); /* first: every warning of the process carries this name */
  if (argc == 4 && strcmp(argv[1], "write") == 0) return cmd_write(argv[2], argv[3]);
  if (argc == 5 && strcmp(argv[1], "read") == 0) return cmd_read(argv[2], argv[3], argv[4]);
  if (argc >= 3 && argc <= 5 && strcmp(argv[1], "bench") == 0) {
    long mib = argc >= 4 ? strtol(argv[3], NULL, 10) : 64;
    long kib = argc >= 5 ? strtol(argv[4], NULL, 10) : 1024;
    if (mib <= 0 || mib > 4096 || kib <= 0 || kib > 1024 * 1024) die("bad size %s", argc >= 4 ? argv[3] : "");
    return cmd_bench(argv[2], (size_t)mib, (size_t)kib);
  }
  fprintf(stderr,
          "usage: h5z_zstd_sample write FILE.h5 RAWDIR\n"
          "       h5z_zstd_sample read FILE.h5 DATASET OUT.f32\n"
          "       h5z_zstd_sample bench DIR [MIB [CHUNK_KIB]]\n");
  return 2;
}
