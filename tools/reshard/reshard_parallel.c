/* boost-reshard's parallel rewrite under mpirun: every tensor split into
 * bands of whole chunk rows, each rank reading, checking and compressing
 * its band and writing it collectively (MPI-IO); the training state and
 * activations then copied by rank 0. */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ckpt_h5.h"
#include "ckpt_hash.h"
#include "h5z_zstd.h"
#include "reshard_rewrite.h"
#include "tool.h"
#include "util.h"

/* This rank's band of one tensor of IN: whole chunk rows of dimension 0,
 * read, checked against IN's checksum (summed over the ranks: the checksum
 * is a sum over elements) and written collectively. Every rank calls this
 * for every tensor in the same order. */
static int copy_tensor_band(rewrite *r, hid_t in_rd, const char *path, const char *name, int bf16, hid_t dxpl) {
  const options *o = r->o;
  hid_t d = H5Dopen2(in_rd, path, H5P_DEFAULT), space = d >= 0 ? H5Dget_space(d) : -1;
  const int ndim = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
  uint64_t stored = 0;
  int ok = ndim >= 1 && ndim <= TENSOR_MAX_DIMS && ckpt_attr_get_u64(d, CKPT_ATTR_CHECKSUM, &stored) == 0;
  hsize_t dims[TENSOR_MAX_DIMS] = {0}, chunk[TENSOR_MAX_DIMS] = {0}, start[TENSOR_MAX_DIMS] = {0}, count[TENSOR_MAX_DIMS] = {0};
  float *buf = NULL;
  size_t n = 0, row = 1;
  if (ok) {
    H5Sget_simple_extent_dims(space, dims, NULL);
    int64_t shape[TENSOR_MAX_DIMS];
    for (int k = 0; k < ndim; k++) shape[k] = (int64_t)dims[k], count[k] = dims[k], row *= k ? (size_t)dims[k] : 1;
    const int idx = registry_find(&r->m->reg, name);
    reshard_aligned_chunk(idx >= 0 ? &r->m->reg.tensors[idx] : NULL, ndim, shape, chunk);
    const hsize_t blocks = dims[0] / chunk[0];
    const hsize_t b0 = blocks * (hsize_t)o->rank / (hsize_t)o->nranks, b1 = blocks * (hsize_t)(o->rank + 1) / (hsize_t)o->nranks;
    start[0] = b0 * chunk[0];
    count[0] = (b1 - b0) * chunk[0];
    n = (size_t)count[0] * row;
    buf = malloc((n ? n : 1) * sizeof *buf);
  }
  uint64_t sums[3] = {0, 0, 0}; /* IN's values, what OUT will hold, the ranks whose read failed */
  if (!ok || !buf) ckpt_h5_fail(&r->err, path);
  else if (n) ok = ckpt_slab_read(r->sr, d, start, count, buf, &sums[0], path, &r->err) == 0;
  ok = ok && buf;
  sums[2] = !ok;
  if (ok) {
    if (bf16) ckpt_round_bf16(buf, n);
    sums[1] = bf16 ? ckpt_hash_run32(buf, n, (uint64_t)start[0] * row) : sums[0];
  }
  MPI_Allreduce(MPI_IN_PLACE, sums, 3, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (ok && sums[2] == 0 && sums[0] != stored) { /* a failed read is reported by its rank */
    boost_err(&r->err, "%s: checksum mismatch in IN (damaged checkpoint)", path);
    ok = 0;
  }
  if (tool_agree(o->nranks, ok, &r->err)) {
    hid_t ftype = bf16 ? ckpt_bf16_type() : H5Tcopy(H5T_IEEE_F32LE);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    H5Pset_create_intermediate_group(lcpl, 1);
    const hsize_t one = 1;
    hid_t ospace = H5Screate_simple(ndim, dims, NULL), mem = n ? H5Screate_simple(ndim, count, NULL) : H5Screate_simple(1, &one, NULL);
    hid_t od = -1;
    ok = h5z_zstd_set_dcpl(dcpl, ndim, chunk, r->level) >= 0 &&
         (od = H5Dcreate2(r->out, path, ftype, ospace, lcpl, dcpl, H5P_DEFAULT)) >= 0;
    if (ok && n == 0) H5Sselect_none(ospace), H5Sselect_none(mem);
    else if (ok) H5Sselect_hyperslab(ospace, H5S_SELECT_SET, start, NULL, count, NULL);
    /* Parallel filtered writes cannot convert types: bf16 goes in as the
     * top halves of the rounded floats, in the file type itself. */
    if (bf16)
      for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &buf[i], sizeof u);
        ((uint16_t *)buf)[i] = (uint16_t)(u >> 16);
      }
    static const float dummy[1] = {0};
    if (ok && H5Dwrite(od, bf16 ? ftype : H5T_NATIVE_FLOAT, mem, ospace, dxpl, n ? (void *)buf : (void *)dummy) < 0) ok = 0;
    if (ok && ckpt_attr_put_u64(od, CKPT_ATTR_CHECKSUM, sums[1]) != 0) ok = 0;
    if (od >= 0 && H5Dclose(od) < 0) ok = 0;
    if (!ok) ckpt_h5_fail(&r->err, path);
    H5Sclose(mem), H5Sclose(ospace), H5Pclose(lcpl), H5Pclose(dcpl), H5Tclose(ftype);
    ok = tool_agree(o->nranks, ok, &r->err);
  } else ok = 0;
  free(buf);
  if (space >= 0) H5Sclose(space);
  if (d >= 0) H5Dclose(d);
  reshard_progress(o, ++r->done, r->total, name);
  return ok ? 0 : -1;
}

/* The tensors' names of one group of IN, as every rank lists them. */
static int group_names(hid_t in, const char *group, char (**names)[TENSOR_NAME_MAX], int *count, boost_status *err) {
  hid_t g = H5Gopen2(in, group, H5P_DEFAULT);
  H5G_info_t info;
  *names = NULL, *count = 0;
  if (g < 0 || H5Gget_info(g, &info) < 0) {
    if (g >= 0) H5Gclose(g);
    ckpt_h5_fail(err, group);
    return -1;
  }
  *names = calloc(info.nlinks ? info.nlinks : 1, sizeof **names);
  int rc = *names ? 0 : -1;
  for (hsize_t i = 0; rc == 0 && i < info.nlinks; i++)
    if (H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, (*names)[i], TENSOR_NAME_MAX, H5P_DEFAULT) < 0) {
      ckpt_h5_fail(err, group);
      rc = -1;
    }
  *count = (int)info.nlinks;
  H5Gclose(g);
  return rc;
}

int reshard_write_out_parallel(rewrite *r, const char *tmp, tp_mode mode) {
  const options *o = r->o;
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);
  H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
  r->out = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  H5Pclose(fapl);
  if (r->out < 0) ckpt_h5_fail(&r->err, "cannot create the temporary OUT");
  if (!tool_agree(o->nranks, r->out >= 0 && reshard_reserve_out(r, tmp) == 0, &r->err)) {
    if (r->out >= 0) H5Fclose(r->out);
    return -1;
  }
  int ok = tool_agree(o->nranks, reshard_write_root(r, mode) == 0, &r->err);
  hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
  const char *groups[3] = {CKPT_GROUP_MODEL, CKPT_GROUP_ADAM_M, CKPT_GROUP_ADAM_V};
  for (int g = 0; ok && g < (o->no_optim ? 1 : 3); g++) {
    char(*names)[TENSOR_NAME_MAX] = NULL;
    int count = 0;
    ok = tool_agree(o->nranks, group_names(r->in, groups[g], &names, &count, &r->err) == 0, &r->err);
    for (int i = 0; ok && i < count; i++) {
      char path[TENSOR_NAME_MAX + 32];
      snprintf(path, sizeof path, "%s/%s", groups[g], names[i]);
      ok = copy_tensor_band(r, r->in, path, names[i], g == 0 && o->bf16, dxpl) == 0;
    }
    free(names);
  }
  H5Pclose(dxpl);
  if (H5Fclose(r->out) < 0 && ok) {
    ckpt_h5_fail(&r->err, "closing OUT");
    ok = 0;
  }
  ok = tool_agree(o->nranks, ok, &r->err);
  /* The training state and activations as they are: rank 0, serially. */
  if (ok && o->rank == 0) {
    hid_t out = H5Fopen(tmp, H5F_ACC_RDWR, H5P_DEFAULT);
    ok = out >= 0;
    for (const char *g = CKPT_GROUP_STATE; ok && g; g = strcmp(g, CKPT_GROUP_STATE) ? NULL : CKPT_GROUP_ACTS)
      if (H5Lexists(r->in, g, H5P_DEFAULT) > 0 && H5Ocopy(r->in, g, out, g, H5P_DEFAULT, H5P_DEFAULT) < 0) ok = 0;
    if (out >= 0 && H5Fclose(out) < 0) ok = 0;
    if (!ok) ckpt_h5_fail(&r->err, "copying the training state and activations");
  }
  return tool_agree(o->nranks, ok, &r->err) ? 0 : -1;
}

