/* The chunk reader (ckpt/read/ckpt_chunks.c): hyperslabs of a shuffle + zstd
 * dataset read through it equal the written values and their checksum
 * terms equal ckpt_hash_slab32's -- whole, edge and interior slabs, on one
 * and on several threads, synchronous and with several slabs in flight --
 * and a damaged chunk fails its own slab only.
 *
 * Serial use of the parallel HDF5 library (default file access list). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_hash.h"
#include "ckpt_chunks.h"
#include "ckpt_internal.h"
#include "h5z_zstd.h"

enum { R = 37, C = 50 }; /* chunks of 8 x 16: partial chunks on both edges */
static const hsize_t dims[2] = {R, C}, chunk[2] = {8, 16};
static const int64_t gshape[2] = {R, C};
static float values[R * C];
static char path[64];

static void make_file(void) {
  cr_assert_eq(h5z_zstd_register(), 0);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  strcpy(path, "/tmp/test_ckpt_chunks.XXXXXX");
  const int fd = mkstemp(path);
  cr_assert(fd >= 0);
  close(fd);
  uint64_t s = 7;
  for (int i = 0; i < R * C; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    values[i] = (float)(int64_t)(s >> 40) / 1024.0f;
  }
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), space = H5Screate_simple(2, dims, NULL);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  cr_assert(f >= 0 && space >= 0 && dcpl >= 0);
  cr_assert(h5z_zstd_set_dcpl_ex(dcpl, 2, chunk, 1, 0) >= 0);
  for (int k = 0; k < 2; k++) {
    hid_t d = H5Dcreate2(f, k ? "y" : "x", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    cr_assert(d >= 0);
    cr_assert(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0);
    H5Dclose(d);
  }
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(f);
}
static void remove_file(void) { unlink(path); }
TestSuite(ckpt_chunks, .init = make_file, .fini = remove_file);

/* The slab [st, st + ct) of `values`, row-major. */
static float *expected(const hsize_t *st, const hsize_t *ct) {
  float *e = malloc(ct[0] * ct[1] * sizeof *e);
  for (hsize_t r = 0; r < ct[0]; r++) memcpy(e + r * ct[1], values + (st[0] + r) * C + st[1], ct[1] * sizeof *e);
  return e;
}

static const hsize_t slabs[][4] = {
    /* st0, st1, ct0, ct1 */
    {0, 0, R, C},   /* whole */
    {5, 0, 24, C},  /* a band of rows (a load's and a read-back's) */
    {3, 7, 17, 34}, /* interior, cutting chunks on every side */
    {36, 49, 1, 1}, /* the last element, in a partial chunk */
    {8, 16, 8, 16}, /* exactly one interior chunk */
};

static void check_slab(int threads, int async) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(f, "x", H5P_DEFAULT);
  cr_assert(f >= 0 && d >= 0);
  ckpt_chunk_reader *cr = ckpt_chunk_reader_new(threads);
  enum { N = sizeof slabs / sizeof slabs[0] };
  float *got[N];
  uint64_t sum[N];
  boost_status err = {0};
  for (int k = 0; k < N; k++) {
    const hsize_t st[2] = {slabs[k][0], slabs[k][1]}, ct[2] = {slabs[k][2], slabs[k][3]};
    got[k] = calloc(ct[0] * ct[1], sizeof(float));
    const int rc = async ? ckpt_read_slab_chunks_async(cr, d, 2, gshape, st, ct, got[k], &sum[k], "x", &err)
                         : ckpt_read_slab_chunks(cr, d, 2, gshape, st, ct, got[k], &sum[k], "x", &err);
    cr_assert_eq(rc, 1, "slab %d: rc %d (%s)", k, rc, err.msg);
  }
  if (async) cr_assert_eq(ckpt_chunk_reader_wait(cr, &err), 0, "%s", err.msg);
  for (int k = 0; k < N; k++) {
    const hsize_t st[2] = {slabs[k][0], slabs[k][1]}, ct[2] = {slabs[k][2], slabs[k][3]};
    const int64_t off[2] = {(int64_t)st[0], (int64_t)st[1]}, cnt[2] = {(int64_t)ct[0], (int64_t)ct[1]};
    float *e = expected(st, ct);
    cr_assert(memcmp(e, got[k], ct[0] * ct[1] * sizeof *e) == 0, "slab %d (threads %d, async %d): values differ", k,
              threads, async);
    cr_assert_eq(sum[k], ckpt_hash_slab32(e, 2, gshape, off, cnt), "slab %d: checksum terms differ", k);
    free(e);
    free(got[k]);
  }
  ckpt_chunk_reader_free(cr);
  H5Dclose(d);
  H5Fclose(f);
}

Test(ckpt_chunks, slabs_on_one_thread) { check_slab(1, 0); }
Test(ckpt_chunks, slabs_on_three_threads) { check_slab(3, 0); }
Test(ckpt_chunks, slabs_in_flight_together) {
  check_slab(1, 1);
  check_slab(3, 1);
}

/* A stored chunk of "x" replaced by bytes that are no zstd frame: the slab
 * that touches it fails naming it, the next slab (of "y") reads. */
Test(ckpt_chunks, damaged_chunk_fails_its_slab_only) {
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), d = H5Dopen2(f, "x", H5P_DEFAULT);
  cr_assert(f >= 0 && d >= 0);
  unsigned char junk[300];
  for (int i = 0; i < 300; i++) junk[i] = (unsigned char)(i * 37 + 11);
  const hsize_t at[2] = {8, 16};
  cr_assert(H5Dwrite_chunk(d, H5P_DEFAULT, 0, at, sizeof junk, junk) >= 0);
  H5Dclose(d);
  H5Fclose(f);
  f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t x = H5Dopen2(f, "x", H5P_DEFAULT), y = H5Dopen2(f, "y", H5P_DEFAULT);
  ckpt_chunk_reader *cr = ckpt_chunk_reader_new(2);
  float *buf = calloc(R * C, sizeof *buf);
  uint64_t sum = 0;
  boost_status err = {0};
  const hsize_t st[2] = {0, 0};
  cr_assert_eq(ckpt_read_slab_chunks(cr, x, 2, gshape, st, dims, buf, &sum, "tensor x", &err), -1);
  cr_assert(strstr(err.msg, "tensor x: a stored chunk does not decode"), "error: %s", err.msg);
  err = (boost_status){0};
  cr_assert_eq(ckpt_read_slab_chunks(cr, y, 2, gshape, st, dims, buf, &sum, "tensor y", &err), 1,
               "the slab after a damaged one: %s", err.msg);
  cr_assert(memcmp(buf, values, sizeof values) == 0);
  free(buf);
  ckpt_chunk_reader_free(cr);
  H5Dclose(x);
  H5Dclose(y);
  H5Fclose(f);
}
