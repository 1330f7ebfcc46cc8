/* The file's side of the chunk reader (ckpt_chunks_file.h): whether a
 * dataset's chunks can be read and decoded directly, the descriptor under
 * its file, and HDF5's own read of a hyperslab where they cannot. */
#include "ckpt_chunks_file.h"

#include "ckpt_chunks.h"
#include "ckpt_hash.h"
#include "h5z_zstd.h"
#include "tensor.h"

int ckpt_chunks_direct_readable(hid_t ds, int ndim, hsize_t *cdims) {
  hid_t dcpl = H5Dget_create_plist(ds), type = H5Dget_type(ds);
  int ok = dcpl >= 0 && type >= 0 && H5Tequal(type, H5T_IEEE_F32LE) > 0 && H5Pget_layout(dcpl) == H5D_CHUNKED &&
           H5Pget_chunk(dcpl, ndim, cdims) == ndim && H5Pget_nfilters(dcpl) == 2;
  for (unsigned i = 0; ok && i < 2; i++) {
    unsigned flags, cd[8];
    size_t ncd = 8;
    char name[64];
    const H5Z_filter_t id = H5Pget_filter2(dcpl, i, &flags, &ncd, cd, sizeof name, name, NULL);
    ok = id == (i == 0 ? H5Z_FILTER_SHUFFLE : (H5Z_filter_t)H5Z_FILTER_ZSTD);
  }
  if (type >= 0) H5Tclose(type);
  if (dcpl >= 0) H5Pclose(dcpl);
  H5Eclear2(H5E_DEFAULT);
  return ok;
}

int ckpt_chunks_file_fd(hid_t ds, off_t *base) {
  const hid_t fid = H5Iget_file_id(ds);
  const hid_t fapl = fid >= 0 ? H5Fget_access_plist(fid) : -1, fcpl = fid >= 0 ? H5Fget_create_plist(fid) : -1;
  int fd = -1;
  void *handle = NULL;
  hsize_t userblock = 0;
  if (fapl >= 0 && fcpl >= 0 && H5Pget_driver(fapl) == H5FD_SEC2 && H5Pget_userblock(fcpl, &userblock) >= 0 &&
      H5Fget_vfd_handle(fid, fapl, &handle) >= 0 && handle)
    fd = *(int *)handle;
  *base = (off_t)userblock; /* chunk addresses count from the end of the user block */
  if (fcpl >= 0) H5Pclose(fcpl);
  if (fapl >= 0) H5Pclose(fapl);
  if (fid >= 0) H5Fclose(fid);
  H5Eclear2(H5E_DEFAULT);
  return fd;
}

int ckpt_read_slab_hdf5(hid_t ds, hid_t space, int ndim, const int64_t *gshape, const hsize_t *st, const hsize_t *ct,
                        float *dst, uint64_t *sum) {
  hid_t mem = H5Screate_simple(ndim, ct, NULL);
  const int ok = mem >= 0 && H5Sselect_hyperslab(space, H5S_SELECT_SET, st, NULL, ct, NULL) >= 0 &&
                 H5Dread(ds, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, dst) >= 0;
  if (mem >= 0) H5Sclose(mem);
  if (!ok) return -1;
  int64_t start[CKPT_HASH_MAX_DIMS], count[CKPT_HASH_MAX_DIMS];
  for (int d = 0; d < ndim; d++) start[d] = (int64_t)st[d], count[d] = (int64_t)ct[d];
  *sum = ckpt_hash_slab32(dst, ndim, gshape, start, count);
  return 0;
}
