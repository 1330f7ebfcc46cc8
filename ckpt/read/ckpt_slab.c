/* Hyperslabs of checkpoint tensors read on every core (ckpt_slab.h): the
 * chunk reader of ckpt_chunks.c, with H5Dread for what it does not take. */
#include "ckpt_slab.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ckpt_h5.h"
#include "ckpt_hash.h"
#include "ckpt_chunks.h"
#include "ckpt_internal.h"
#include "tensor.h"
#include "util.h"

struct ckpt_slab_reader {
  ckpt_chunk_reader *cr;
  float *scratch; /* a slab read through H5Dread when the caller wants only its checksum */
  size_t scratch_cap;
  int hdf5_only; /* BOOST_CKPT_SLAB_HDF5=1: every read through H5Dread (tests compare the two paths) */
};

ckpt_slab_reader *ckpt_slab_reader_new(int threads) {
  ckpt_slab_reader *r = boost_try_calloc(1, sizeof *r);
  if (!r) return NULL;
  r->cr = ckpt_chunk_reader_new(threads > 0 ? threads : omp_get_max_threads());
  const char *env = getenv("BOOST_CKPT_SLAB_HDF5");
  r->hdf5_only = env && !strcmp(env, "1");
  return r;
}

void ckpt_slab_reader_free(ckpt_slab_reader *r) {
  if (!r) return;
  ckpt_chunk_reader_free(r->cr);
  boost_free(r->scratch);
  boost_free(r);
}

/* The slab through HDF5's filter pipeline (one thread), then hashed. */
static int read_hdf5(ckpt_slab_reader *r, hid_t ds, hid_t space, int ndim, const int64_t *gshape, const hsize_t *st,
                     const hsize_t *ct, size_t n, float *dst, uint64_t *sum, const char *what, boost_status *err) {
  if (!dst && n > r->scratch_cap) {
    boost_free(r->scratch);
    r->scratch = boost_try_calloc(n, sizeof *r->scratch);
    r->scratch_cap = r->scratch ? n : 0;
    if (!r->scratch) return boost_err(err, "%s: out of memory (%.1f MiB)", what, 4.0 * (double)n / (1 << 20));
  }
  float *buf = dst ? dst : r->scratch;
  if (ckpt_read_slab_hdf5(ds, space, ndim, gshape, st, ct, buf, sum) != 0) {
    char w[640];
    boost_msgf(w, sizeof w, "%s: read failed (corrupt data?)", what);
    ckpt_h5_fail(err, w);
    return -1;
  }
  return 0;
}

int ckpt_slab_read(ckpt_slab_reader *r, hid_t ds, const hsize_t *start, const hsize_t *count, float *dst,
                   uint64_t *sum, const char *what, boost_status *err) {
  *sum = 0;
  hid_t space = H5Dget_space(ds);
  const int ndim = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
  hsize_t dims[CKPT_HASH_MAX_DIMS], st[CKPT_HASH_MAX_DIMS], ct[CKPT_HASH_MAX_DIMS];
  if (ndim < 1 || ndim > CKPT_HASH_MAX_DIMS || H5Sget_simple_extent_dims(space, dims, NULL) != ndim) {
    if (space >= 0) H5Sclose(space);
    char w[640];
    boost_msgf(w, sizeof w, "%s: unreadable dataspace or not 1 to %d dimensions", what, CKPT_HASH_MAX_DIMS);
    ckpt_h5_fail(err, w);
    return -1;
  }
  int64_t gshape[CKPT_HASH_MAX_DIMS];
  size_t n = 1;
  double elems = 1; /* a damaged dataspace must not overflow n */
  for (int d = 0; d < ndim; d++) elems *= (double)(start ? count[d] : dims[d]);
  if (elems * 4 > 64e9) {
    H5Sclose(space);
    return boost_err(err, "%s: implausible size (%.0f elements)", what, elems);
  }
  for (int d = 0; d < ndim; d++) {
    gshape[d] = (int64_t)dims[d];
    st[d] = start ? start[d] : 0;
    ct[d] = start ? count[d] : dims[d];
    if (st[d] + ct[d] > dims[d] || st[d] + ct[d] < st[d]) {
      H5Sclose(space);
      return boost_err(err, "%s: hyperslab outside the dataset's shape", what);
    }
    n *= (size_t)ct[d];
  }
  int rc = 0;
  if (n > 0) {
    if (ndim <= TENSOR_MAX_DIMS && !r->hdf5_only)
      rc = ckpt_read_slab_chunks(r->cr, ds, ndim, gshape, st, ct, dst, sum, what, err);
    if (rc == 0) rc = read_hdf5(r, ds, space, ndim, gshape, st, ct, n, dst, sum, what, err) == 0 ? 1 : -1;
  }
  H5Sclose(space);
  return rc < 0 ? -1 : 0;
}
