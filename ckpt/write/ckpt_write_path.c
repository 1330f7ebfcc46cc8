/* What the two write paths share (ckpt_write_path.h): the first failure
 * of a rank, and a dataset written through HDF5's own pipeline. */
#include "ckpt_write_path.h"

#include "ckpt_h5.h"
#include "ckpt_test_hooks.h"
#include "h5z_zstd.h"
#include "tensor.h"
#include "util.h"

void ckpt_wfail(ckpt_file_writer *w, const char *fmt, const char *arg) {
  if (!w->ok) return;
  char what[512];
  boost_msgf(what, sizeof what, fmt, arg);
  ckpt_h5_fail(&w->err, what);
  w->ok = 0;
}

void ckpt_write_dataset_h5(ckpt_file_writer *w, const ckpt_dataset *ds) {
  hsize_t dims[TENSOR_MAX_DIMS], chunk[TENSOR_MAX_DIMS], st[TENSOR_MAX_DIMS], ct[TENSOR_MAX_DIMS];
  const int filtered = ds->chunk != NULL, ndim = ds->ndim;
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) {
    dims[d] = (hsize_t)ds->gshape[d];
    chunk[d] = filtered ? (hsize_t)ds->chunk[d] : 0;
    n *= ds->gshape[d];
  }
  hid_t space = H5Screate_simple(ndim, dims, NULL);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (space < 0 || dcpl < 0) ckpt_wfail(w, "creating the dataspace of %s", ds->path);
  if (filtered && n > 0) {
    if (h5z_zstd_set_dcpl(dcpl, ndim, chunk, w->ws->level) < 0) ckpt_wfail(w, "zstd filter setup for %s", ds->path);
  }
  H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
  hid_t dset = H5Dcreate2(ds->loc, ds->name, ds->ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (dset < 0) {
    ckpt_wfail(w, "H5Dcreate %s", ds->path);
  } else {
    int has = ds->count != NULL && ds->buf != NULL;
    if (has)
      for (int d = 0; d < ndim; d++) has = has && ds->count[d] > 0;
    hid_t mem;
    if (has) {
      for (int d = 0; d < ndim; d++) {
        st[d] = (hsize_t)ds->start[d];
        ct[d] = (hsize_t)ds->count[d];
      }
      H5Sselect_hyperslab(space, H5S_SELECT_SET, st, NULL, ct, NULL);
      mem = H5Screate_simple(ndim, ct, NULL);
    } else {
      hsize_t one = 1;
      H5Sselect_none(space);
      mem = H5Screate_simple(1, &one, NULL);
      H5Sselect_none(mem);
    }
    static const float dummy[1] = {0};
    if (n > 0 && H5Dwrite(dset, ds->mtype, mem, space, w->dxpl, has ? ds->buf : (const void *)dummy) < 0)
      ckpt_wfail(w, "H5Dwrite %s", ds->path);
    H5Sclose(mem);
    if (ds->checksum && ckpt_attr_put_u64(dset, CKPT_ATTR_CHECKSUM, *ds->checksum) < 0)
      ckpt_wfail(w, "checksum attribute of %s", ds->path);
    if (ds->kind >= 0) {
      w->r->raw[ds->kind] += (double)n * (double)H5Tget_size(ds->ftype);
      w->r->stored[ds->kind] += (double)H5Dget_storage_size(dset);
    }
    if (H5Dclose(dset) < 0) ckpt_wfail(w, "H5Dclose %s", ds->path);
  }
  if (dcpl >= 0) H5Pclose(dcpl);
  if (space >= 0) H5Sclose(space);
  ckpt_test_delay();
}
