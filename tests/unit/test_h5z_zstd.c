/* The zstd HDF5 filter (id 32015): round trips through real HDF5 files, the
 * pipeline it sets up, that it compresses, that on-disk corruption makes a
 * read fail, and the frame decoder on hand-made frames.
 *
 * Serial use of the parallel HDF5 library (default file access list). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "h5z_zstd.h"

/* ---------- helpers ---------- */

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t next_u64(void) {
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static void fill_gaussian(float *v, size_t n, float sigma) {
  for (size_t i = 0; i < n; i++) {
    double u1 = ((double)(next_u64() >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (double)(next_u64() >> 11) / 9007199254740992.0;
    v[i] = (float)(sigma * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
  }
}
static void fill_bytes(void *p, size_t n) {
  unsigned char *b = p;
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(next_u64() >> 56);
}

static char tmp_path[64];
static void make_tmp_path(void) {
  strcpy(tmp_path, "/tmp/test_h5z_zstd.XXXXXX");
  int fd = mkstemp(tmp_path);
  cr_assert(fd >= 0, "mkstemp failed");
  close(fd);
}
static void remove_tmp(void) {
  if (tmp_path[0]) unlink(tmp_path);
}

/* Does any entry of the current default error stack contain `needle`? */
struct find_ctx {
  const char *needle;
  int found;
};
static herr_t find_cb(unsigned n, const H5E_error2_t *err, void *data) {
  (void)n;
  struct find_ctx *c = data;
  if (err->desc && strstr(err->desc, c->needle)) c->found = 1;
  return 0;
}
static int error_stack_has(const char *needle) {
  struct find_ctx c = {needle, 0};
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, find_cb, &c);
  return c.found;
}

static void quiet_errors(void) { cr_assert(H5Eset_auto2(H5E_DEFAULT, NULL, NULL) >= 0); }

/* Create file tmp_path with one float dataset "x" (shuffle + zstd). */
static void write_dataset(int ndim, const hsize_t *dims, const hsize_t *chunk, int level, unsigned flags,
                          const float *v) {
  hid_t file = H5Fcreate(tmp_path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  cr_assert(file >= 0, "H5Fcreate %s", tmp_path);
  hid_t space = H5Screate_simple(ndim, dims, NULL);
  cr_assert(space >= 0);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  cr_assert(dcpl >= 0);
  cr_assert(h5z_zstd_set_dcpl_ex(dcpl, ndim, chunk, level, flags) >= 0, "h5z_zstd_set_dcpl_ex");
  hid_t dset = H5Dcreate2(file, "x", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  cr_assert(dset >= 0, "H5Dcreate2");
  cr_assert(H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0, "H5Dwrite");
  cr_assert(H5Dclose(dset) >= 0);
  cr_assert(H5Pclose(dcpl) >= 0);
  cr_assert(H5Sclose(space) >= 0);
  cr_assert(H5Fclose(file) >= 0);
}

static int error_stack_has(const char *needle);

/* Did the last failed read_dataset name the zstd filter on the error stack? */
static int read_error_named_zstd;

/* Read "x" from tmp_path into v; returns H5Dread's status. */
static herr_t read_dataset(float *v, hsize_t *storage) {
  hid_t file = H5Fopen(tmp_path, H5F_ACC_RDONLY, H5P_DEFAULT);
  cr_assert(file >= 0, "H5Fopen %s", tmp_path);
  hid_t dset = H5Dopen2(file, "x", H5P_DEFAULT);
  cr_assert(dset >= 0);
  herr_t st = H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
  read_error_named_zstd = st < 0 && error_stack_has("zstd filter (32015)");
  if (storage) *storage = H5Dget_storage_size(dset);
  cr_assert(H5Dclose(dset) >= 0);
  cr_assert(H5Fclose(file) >= 0);
  return st;
}

static size_t npoints(int ndim, const hsize_t *dims) {
  size_t n = 1;
  for (int d = 0; d < ndim; d++) n *= dims[d];
  return n;
}

static void roundtrip(int ndim, const hsize_t *dims, const hsize_t *chunk, int level, const float *v) {
  size_t n = npoints(ndim, dims);
  write_dataset(ndim, dims, chunk, level, 0, v);
  float *back = malloc(n * sizeof *back);
  cr_assert(back);
  memset(back, 0xAB, n * sizeof *back);
  cr_assert(read_dataset(back, NULL) >= 0, "H5Dread");
  cr_assert(memcmp(v, back, n * sizeof *v) == 0, "data read back differs (ndim %d, level %d)", ndim, level);
  free(back);
}

TestSuite(h5z_zstd, .init = make_tmp_path, .fini = remove_tmp);

/* ---------- registration and dcpl ---------- */

Test(h5z_zstd, register_is_idempotent) {
  cr_assert_eq(h5z_zstd_register(), 0);
  cr_assert_eq(h5z_zstd_register(), 0);
  cr_assert_gt(H5Zfilter_avail(H5Z_FILTER_ZSTD), 0);
  unsigned info = 0;
  cr_assert(H5Zget_filter_info(H5Z_FILTER_ZSTD, &info) >= 0);
  cr_assert(info & H5Z_FILTER_CONFIG_ENCODE_ENABLED);
  cr_assert(info & H5Z_FILTER_CONFIG_DECODE_ENABLED);
}

static void expect_filter(hid_t dcpl, unsigned idx, H5Z_filter_t want, int want_level) {
  unsigned flags = 0, cd[4] = {0};
  size_t ncd = 4;
  char name[64];
  H5Z_filter_t id = H5Pget_filter2(dcpl, idx, &flags, &ncd, cd, sizeof name, name, NULL);
  cr_assert_eq(id, want, "filter %u is %d, expected %d", idx, (int)id, (int)want);
  if (want == H5Z_FILTER_ZSTD) {
    cr_assert_eq(ncd, 1);
    cr_assert_eq((int)cd[0], want_level);
    cr_assert_eq(flags & H5Z_FLAG_OPTIONAL, 0u, "zstd must be a mandatory filter");
  }
}

Test(h5z_zstd, pipeline_is_shuffle_then_zstd_in_file) {
  const hsize_t dims[1] = {1000}, chunk[1] = {256};
  float v[1000];
  fill_gaussian(v, 1000, 1.0f);
  write_dataset(1, dims, chunk, 5, 0, v);

  hid_t file = H5Fopen(tmp_path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t dset = H5Dopen2(file, "x", H5P_DEFAULT);
  hid_t dcpl = H5Dget_create_plist(dset);
  cr_assert(dcpl >= 0);
  cr_assert_eq(H5Pget_layout(dcpl), H5D_CHUNKED);
  hsize_t got[1] = {0};
  cr_assert_eq(H5Pget_chunk(dcpl, 1, got), 1);
  cr_assert_eq(got[0], 256);
  cr_assert_eq(H5Pget_nfilters(dcpl), 2, "no fletcher32 by default");
  expect_filter(dcpl, 0, H5Z_FILTER_SHUFFLE, 0);
  expect_filter(dcpl, 1, H5Z_FILTER_ZSTD, 5);
  H5Pclose(dcpl);
  H5Dclose(dset);
  H5Fclose(file);
}

Test(h5z_zstd, fletcher32_goes_last_and_roundtrips) {
  const hsize_t dims[2] = {50, 30}, chunk[2] = {16, 16};
  float v[1500];
  fill_gaussian(v, 1500, 0.02f);
  write_dataset(2, dims, chunk, 1, H5Z_ZSTD_FLETCHER32, v);
  hid_t file = H5Fopen(tmp_path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t dset = H5Dopen2(file, "x", H5P_DEFAULT);
  hid_t dcpl = H5Dget_create_plist(dset);
  cr_assert_eq(H5Pget_nfilters(dcpl), 3);
  expect_filter(dcpl, 0, H5Z_FILTER_SHUFFLE, 0);
  expect_filter(dcpl, 1, H5Z_FILTER_ZSTD, 1);
  expect_filter(dcpl, 2, H5Z_FILTER_FLETCHER32, 0);
  float back[1500];
  cr_assert(H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, back) >= 0);
  cr_assert(memcmp(v, back, sizeof v) == 0);
  H5Pclose(dcpl);
  H5Dclose(dset);
  H5Fclose(file);
}

Test(h5z_zstd, level_zero_means_default_and_negative_levels_work) {
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  const hsize_t chunk[1] = {64};
  cr_assert(h5z_zstd_set_dcpl(dcpl, 1, chunk, 0) >= 0);
  expect_filter(dcpl, 1, H5Z_FILTER_ZSTD, H5Z_ZSTD_DEFAULT_LEVEL);
  H5Pclose(dcpl);

  const hsize_t dims[1] = {3000}, c2[1] = {700};
  float v[3000];
  fill_gaussian(v, 3000, 1.0f);
  roundtrip(1, dims, c2, -5, v); /* stored as (unsigned)-5, as hdf5plugin does */
}

Test(h5z_zstd, bad_arguments_fail_with_a_message) {
  quiet_errors();
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  const hsize_t chunk[2] = {8, 8}, zero[2] = {8, 0};
  cr_assert_lt(h5z_zstd_set_dcpl(dcpl, 2, chunk, ZSTD_maxCLevel() + 1), 0);
  cr_assert(error_stack_has("zstd level"));
  cr_assert_lt(h5z_zstd_set_dcpl(dcpl, 0, chunk, 3), 0);
  cr_assert(error_stack_has("chunk rank 0"));
  cr_assert_lt(h5z_zstd_set_dcpl(dcpl, 2, NULL, 3), 0);
  cr_assert_lt(h5z_zstd_set_dcpl(dcpl, 2, zero, 3), 0);
  cr_assert(error_stack_has("chunk_dims[1] = 0"));
  cr_assert_lt(h5z_zstd_set_dcpl_ex(dcpl, 2, chunk, 3, 0x80), 0);
  cr_assert(error_stack_has("unknown flags"));
  cr_assert_eq(H5Pget_nfilters(dcpl), 0, "failed calls leave the dcpl alone");
  cr_assert_geq(h5z_zstd_set_dcpl(dcpl, 2, chunk, 3), 0);
  cr_assert_lt(h5z_zstd_set_dcpl(dcpl, 2, chunk, 3), 0, "a dcpl with filters already must be refused");
  cr_assert(error_stack_has("already has 2 filter"));
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  cr_assert_lt(h5z_zstd_set_dcpl(fapl, 2, chunk, 3), 0);
  cr_assert(error_stack_has("H5Pget_nfilters failed"));
  H5Pclose(fapl);
  H5Pclose(dcpl);
}

/* ---------- round trips ---------- */

Test(h5z_zstd, roundtrip_random_2d_edge_chunks) {
  /* 300x77 in 64x32 chunks: neither dimension divides. */
  const hsize_t dims[2] = {300, 77}, chunk[2] = {64, 32};
  size_t n = 300 * 77;
  float *v = malloc(n * sizeof *v);
  fill_gaussian(v, n, 0.02f);
  roundtrip(2, dims, chunk, 3, v);
  roundtrip(2, dims, chunk, 1, v);
  roundtrip(2, dims, chunk, 19, v);
  free(v);
}

Test(h5z_zstd, roundtrip_structured_3d_and_special_values) {
  const hsize_t dims[3] = {7, 9, 11}, chunk[3] = {2, 4, 5};
  size_t n = 7 * 9 * 11;
  float v[7 * 9 * 11];
  for (size_t i = 0; i < n; i++) v[i] = (float)(i % 97) * 0.125f - 3.0f;
  /* Special bit patterns must survive bit for bit. */
  uint32_t specials[] = {0x7fc00001u, 0xffc12345u, 0x7f800000u, 0xff800000u, 0x80000000u,
                         0x00000001u, 0x007fffffu, 0x7f7fffffu};
  for (size_t k = 0; k < sizeof specials / sizeof *specials; k++) memcpy(&v[k * 37], &specials[k], 4);
  roundtrip(3, dims, chunk, 3, v);
}

Test(h5z_zstd, roundtrip_1d_random_bytes_and_partial_read) {
  /* Incompressible bytes (zstd stores raw blocks) across uneven chunks. */
  const hsize_t dims[1] = {100000}, chunk[1] = {33333};
  float *v = malloc(100000 * sizeof *v);
  fill_bytes(v, 100000 * sizeof *v);
  roundtrip(1, dims, chunk, 3, v);

  /* A hyperslab crossing chunk boundaries. */
  hid_t file = H5Fopen(tmp_path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t dset = H5Dopen2(file, "x", H5P_DEFAULT);
  hid_t fs = H5Dget_space(dset);
  hsize_t start[1] = {33000}, count[1] = {34000};
  cr_assert(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) >= 0);
  hid_t ms = H5Screate_simple(1, count, NULL);
  float *part = malloc(34000 * sizeof *part);
  cr_assert(H5Dread(dset, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, part) >= 0);
  cr_assert(memcmp(part, v + 33000, 34000 * sizeof *part) == 0);
  free(part);
  H5Sclose(ms);
  H5Sclose(fs);
  H5Dclose(dset);
  H5Fclose(file);
  free(v);
}

/* ---------- compression happens ---------- */

Test(h5z_zstd, storage_is_smaller_than_raw) {
  const hsize_t dims[2] = {512, 256}, chunk[2] = {128, 256};
  size_t n = 512 * 256;
  float *v = malloc(n * sizeof *v), *back = malloc(n * sizeof *v);
  hsize_t stored = 0;

  for (size_t i = 0; i < n; i++) v[i] = (float)(i % 1000) * 0.5f; /* few distinct values */
  write_dataset(2, dims, chunk, 3, 0, v);
  cr_assert(read_dataset(back, &stored) >= 0);
  cr_assert(memcmp(v, back, n * sizeof *v) == 0);
  cr_assert_lt(stored, n * sizeof(float) / 20, "periodic data: %llu stored of %zu raw",
               (unsigned long long)stored, n * sizeof(float));

  for (size_t i = 0; i < n; i++) v[i] = (float)sin((double)i * 0.001) * 4.0f; /* smooth, full mantissas */
  write_dataset(2, dims, chunk, 3, 0, v);
  cr_assert(read_dataset(back, &stored) >= 0);
  cr_assert(memcmp(v, back, n * sizeof *v) == 0);
  cr_assert_lt(stored, n * sizeof(float) * 3 / 4, "smooth data: %llu stored of %zu raw",
               (unsigned long long)stored, n * sizeof(float));

  fill_gaussian(v, n, 1.0f); /* ~1.1x in 128 KiB chunks, from the exponent bytes */
  write_dataset(2, dims, chunk, 3, 0, v);
  cr_assert(read_dataset(back, &stored) >= 0);
  cr_assert(memcmp(v, back, n * sizeof *v) == 0);
  cr_assert_lt((double)stored, (double)(n * sizeof(float)) / 1.05, "gaussian: %llu stored of %zu raw",
               (unsigned long long)stored, n * sizeof(float));
  free(v);
  free(back);
}

/* ---------- corruption on disk ---------- */

/* Write a dataset, flip `len` bytes at `where` (a fraction of chunk 0's
 * stored bytes) in the file on disk, and return whether reading fails. */
static int corrupt_and_read(const float *v, size_t n, const hsize_t *dims, const hsize_t *chunk, double where,
                            size_t len, unsigned flags) {
  write_dataset(2, dims, chunk, 3, flags, v);
  hid_t file = H5Fopen(tmp_path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t dset = H5Dopen2(file, "x", H5P_DEFAULT);
  hsize_t nchunks = 0, offset[2], size = 0;
  haddr_t addr = 0;
  unsigned mask = 0;
  hid_t fs = H5Dget_space(dset);
  cr_assert(H5Dget_num_chunks(dset, fs, &nchunks) >= 0 && nchunks > 1);
  cr_assert(H5Dget_chunk_info(dset, fs, 0, offset, &mask, &addr, &size) >= 0);
  cr_assert(addr != HADDR_UNDEF && size > 16);
  H5Sclose(fs);
  cr_assert_eq(mask, 0u, "all filters applied to chunk 0");
  H5Dclose(dset);
  H5Fclose(file);

  hsize_t at = addr + (hsize_t)(where * (double)size);
  if (at + len > addr + size) at = addr + size - len;
  int fd = open(tmp_path, O_RDWR);
  cr_assert(fd >= 0);
  unsigned char b[16];
  cr_assert(len <= sizeof b);
  cr_assert_eq(pread(fd, b, len, (off_t)at), (ssize_t)len);
  for (size_t i = 0; i < len; i++) b[i] ^= 0x5a;
  cr_assert_eq(pwrite(fd, b, len, (off_t)at), (ssize_t)len);
  close(fd);

  float *back = malloc(n * sizeof *back);
  quiet_errors();
  herr_t st = read_dataset(back, NULL);
  int failed = st < 0;
  if (!failed) cr_assert(memcmp(v, back, n * sizeof *v) != 0, "the flip did not reach the data?");
  free(back);
  return failed;
}

Test(h5z_zstd, corrupt_chunk_fails_read_everywhere_in_the_frame) {
  /* Our frames carry zstd's XXH64 content checksum, so a flip anywhere in a
   * chunk -- header, entropy-coded exponents or raw mantissa bytes -- fails
   * the read instead of returning wrong numbers. */
  const hsize_t dims[2] = {256, 128}, chunk[2] = {64, 128};
  size_t n = 256 * 128;
  float *v = malloc(n * sizeof *v);
  fill_gaussian(v, n, 0.02f);
  const double where[] = {0.0, 0.002, 0.1, 0.25, 0.5, 0.75, 0.9, 0.999, 1.0};
  for (size_t k = 0; k < sizeof where / sizeof *where; k++) {
    for (size_t len = 1; len <= 4; len *= 4) {
      cr_assert(corrupt_and_read(v, n, dims, chunk, where[k], len, 0), "flip of %zu byte(s) at %.3f of chunk 0 "
                "was not detected", len, where[k]);
      cr_assert(read_error_named_zstd, "the error names the zstd filter");
    }
  }
  /* Structured data: the same. */
  for (size_t i = 0; i < n; i++) v[i] = (float)(i % 1000) * 0.5f;
  for (size_t k = 0; k < sizeof where / sizeof *where; k++)
    cr_assert(corrupt_and_read(v, n, dims, chunk, where[k], 1, 0), "structured: flip at %.3f undetected",
              where[k]);
  free(v);
}

Test(h5z_zstd, corrupt_chunk_with_fletcher32_fails_in_fletcher32) {
  const hsize_t dims[2] = {256, 128}, chunk[2] = {64, 128};
  size_t n = 256 * 128;
  float *v = malloc(n * sizeof *v);
  fill_gaussian(v, n, 1.0f);
  cr_assert(corrupt_and_read(v, n, dims, chunk, 0.5, 1, H5Z_ZSTD_FLETCHER32));
  free(v);
}

/* ---------- the frame decoder, directly ---------- */

static void *h5dup(const void *p, size_t n) {
  void *q = H5allocate_memory(n, 0);
  cr_assert(q);
  memcpy(q, p, n);
  return q;
}

/* Decode `frame` with the filter; returns the decoded size (0 on failure),
 * output in *out (H5free_memory it). */
static size_t decode(const void *frame, size_t n, void **out) {
  void *buf = h5dup(frame, n);
  size_t buf_size = n;
  size_t r = h5z_zstd_filter(H5Z_FLAG_REVERSE, 0, NULL, n, &buf_size, &buf);
  if (r == 0) cr_assert_eq(buf_size, n, "failure leaves the buffer alone");
  *out = buf;
  return r;
}

Test(h5z_zstd, encoder_writes_a_plain_zstd_frame_with_size_and_checksum) {
  enum { N = 100000 };
  static float v[N];
  fill_gaussian(v, N, 1.0f);
  void *buf = h5dup(v, sizeof v);
  size_t buf_size = sizeof v;
  unsigned cd[1] = {3};
  size_t c = h5z_zstd_filter(0, 1, cd, sizeof v, &buf_size, &buf);
  cr_assert_gt(c, 0);
  cr_assert_leq(c, buf_size);
  const unsigned char *f = buf;
  cr_assert(f[0] == 0x28 && f[1] == 0xb5 && f[2] == 0x2f && f[3] == 0xfd, "zstd magic");
  cr_assert(f[4] & 0x04, "content checksum flag set");
  cr_assert_eq(ZSTD_getFrameContentSize(buf, c), sizeof v);
  cr_assert_eq(ZSTD_findFrameCompressedSize(buf, c), c, "exactly one frame");
  /* Any zstd decoder reads it (here: libzstd's one-shot API). */
  void *plain = malloc(sizeof v);
  cr_assert_eq(ZSTD_decompress(plain, sizeof v, buf, c), sizeof v);
  cr_assert(memcmp(plain, v, sizeof v) == 0);
  free(plain);
  /* And the filter reads it back. */
  size_t d = h5z_zstd_filter(H5Z_FLAG_REVERSE, 1, cd, c, &buf_size, &buf);
  cr_assert_eq(d, sizeof v);
  cr_assert(memcmp(buf, v, sizeof v) == 0);
  H5free_memory(buf);
}

Test(h5z_zstd, levels_from_cd_values) {
  enum { N = 20000 };
  static float v[N];
  fill_gaussian(v, N, 1.0f);
  unsigned cds[][1] = {{1}, {(unsigned)-7}, {1000}, {0}};
  for (int k = -1; k < 4; k++) {
    void *buf = h5dup(v, sizeof v);
    size_t buf_size = sizeof v;
    size_t c = h5z_zstd_filter(0, k < 0 ? 0 : 1, k < 0 ? NULL : cds[k], sizeof v, &buf_size, &buf);
    cr_assert_gt(c, 0, "cd case %d", k);
    cr_assert_eq(h5z_zstd_filter(H5Z_FLAG_REVERSE, 0, NULL, c, &buf_size, &buf), sizeof v);
    cr_assert(memcmp(buf, v, sizeof v) == 0);
    H5free_memory(buf);
  }
}

/* A frame without content size, as a streaming writer makes it. */
static size_t stream_frame(void *dst, size_t cap, const void *src, size_t n, int checksum) {
  ZSTD_CCtx *c = ZSTD_createCCtx();
  cr_assert(!ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0)));
  cr_assert(!ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, checksum)));
  ZSTD_inBuffer in = {src, n, 0};
  ZSTD_outBuffer out = {dst, cap, 0};
  size_t r;
  do {
    r = ZSTD_compressStream2(c, &out, &in, ZSTD_e_end);
    cr_assert(!ZSTD_isError(r));
  } while (r != 0);
  ZSTD_freeCCtx(c);
  cr_assert_eq(ZSTD_getFrameContentSize(dst, out.pos), ZSTD_CONTENTSIZE_UNKNOWN);
  return out.pos;
}

Test(h5z_zstd, decodes_frames_without_content_size_and_concatenated_frames) {
  /* 4 MiB of near-zeros: the frame is tiny, so the output buffer must grow
   * many times past its first guess. */
  size_t n = 4u << 20;
  unsigned char *src = calloc(n, 1);
  src[12345] = 7;
  src[n - 1] = 9;
  size_t cap = ZSTD_compressBound(n) * 2 + 64;
  unsigned char *fr = malloc(cap);
  size_t a = stream_frame(fr, cap, src, n, 0);
  void *out;
  cr_assert_eq(decode(fr, a, &out), n);
  cr_assert(memcmp(out, src, n) == 0);
  H5free_memory(out);

  /* frame with size + frame without size + plain ZSTD_compress frame */
  unsigned char part[3000];
  fill_bytes(part, sizeof part);
  size_t p = 0;
  p += ZSTD_compress(fr + p, cap - p, part, 1000, 3);
  p += stream_frame(fr + p, cap - p, part + 1000, 1000, 1);
  p += ZSTD_compress(fr + p, cap - p, part + 2000, 1000, 1);
  cr_assert_eq(decode(fr, p, &out), 3000);
  cr_assert(memcmp(out, part, 3000) == 0);
  H5free_memory(out);

  /* all three with known sizes (the one-shot path) */
  p = 0;
  for (int k = 0; k < 3; k++) p += ZSTD_compress(fr + p, cap - p, part + 1000 * k, 1000, 3);
  cr_assert_eq(decode(fr, p, &out), 3000);
  cr_assert(memcmp(out, part, 3000) == 0);
  H5free_memory(out);
  free(fr);
  free(src);
}

Test(h5z_zstd, rejects_garbage_truncation_and_absurd_sizes) {
  quiet_errors();
  unsigned char part[5000];
  fill_gaussian((float *)part, sizeof part / 4, 1.0f);
  unsigned char fr[6000];
  void *out;

  size_t a = ZSTD_compress(fr, sizeof fr, part, sizeof part, 3);
  cr_assert(!ZSTD_isError(a));
  for (size_t cut = 1; cut < a; cut += a / 7) {
    cr_assert_eq(decode(fr, a - cut, &out), 0, "truncated by %zu", cut);
    H5free_memory(out);
  }

  size_t s = stream_frame(fr, sizeof fr, part, sizeof part, 0);
  cr_assert_eq(decode(fr, s - 3, &out), 0, "truncated streamed frame");
  H5free_memory(out);

  unsigned char junk[100];
  fill_bytes(junk, sizeof junk);
  cr_assert_eq(decode(junk, sizeof junk, &out), 0);
  cr_assert(error_stack_has("not a valid sequence of zstd frames"));
  H5free_memory(out);

  /* A valid frame followed by junk. */
  memcpy(fr + a, junk, 10);
  cr_assert_eq(decode(fr, a + 10, &out), 0);
  H5free_memory(out);

  /* Header claiming 2^40 bytes (FCS field of 8 bytes), then one empty raw
   * last block: refused before any allocation. */
  unsigned char big[] = {0x28, 0xb5, 0x2f, 0xfd, 0xc0, 0x50, 0, 0, 0, 0, 0, 1, 0, 0, 0x01, 0x00, 0x00};
  cr_assert_eq(ZSTD_getFrameContentSize(big, sizeof big), 1ull << 40);
  cr_assert_eq(decode(big, sizeof big, &out), 0);
  cr_assert(error_stack_has("more than 4294967295"));
  H5free_memory(out);

  void *empty = H5allocate_memory(1, 0);
  size_t bs = 1;
  cr_assert_eq(h5z_zstd_filter(H5Z_FLAG_REVERSE, 0, NULL, 0, &bs, &empty), 0);
  H5free_memory(empty);
}

Test(h5z_zstd, without_a_frame_checksum_raw_bytes_are_not_verified) {
  /* The truth about frames written without a checksum (ZSTD_compress, as the
   * community plugin and hdf5plugin write them): zstd stores incompressible
   * bytes as a raw block, and a flipped byte there decodes "successfully"
   * into a wrong value. Our encoder always sets the checksum flag; for
   * foreign files the checkpoint's per-tensor checksums are what catch it. */
  unsigned char src[20000], fr[21000];
  fill_bytes(src, sizeof src);
  size_t a = ZSTD_compress(fr, sizeof fr, src, sizeof src, 3);
  cr_assert(!ZSTD_isError(a));
  fr[a / 2] ^= 0x01;
  void *out;
  cr_assert_eq(decode(fr, a, &out), sizeof src, "zstd cannot see this flip");
  size_t diff = 0;
  for (size_t i = 0; i < sizeof src; i++) diff += ((unsigned char *)out)[i] != src[i];
  cr_assert_eq(diff, 1);
  H5free_memory(out);

  /* The same flip with the checksum flag (what our encoder writes) fails. */
  void *buf = h5dup(src, sizeof src);
  size_t bs = sizeof src;
  size_t c = h5z_zstd_filter(0, 0, NULL, sizeof src, &bs, &buf);
  cr_assert_gt(c, 0);
  ((unsigned char *)buf)[c / 2] ^= 0x01;
  quiet_errors();
  cr_assert_eq(h5z_zstd_filter(H5Z_FLAG_REVERSE, 0, NULL, c, &bs, &buf), 0);
  cr_assert(error_stack_has("corrupt chunk"));
  H5free_memory(buf);
}
