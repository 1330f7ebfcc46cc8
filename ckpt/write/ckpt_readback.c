/* The read-back verification of a written checkpoint, before its commit:
 * every rank reads back, decodes and hashes the bands it wrote, so a
 * checkpoint counts only once it has been read back verified (retention,
 * which runs after the commit, deletes nothing before that).
 *
 * The file is closed by the collective write by then, so each rank opens it
 * on its own (read-only, POSIX driver) and reads the stored chunks of its
 * bands directly through the chunk reader (ckpt_chunks.c: raw chunk reads,
 * which parallel HDF5 refuses through MPI-IO): one zstd decode per chunk,
 * the byte unshuffle and the checksum terms of the chunk's elements while
 * it is in cache, on all of the rank's threads, with no trip through
 * HDF5's filter pipeline, chunk cache and copies (that path was a quarter
 * of a cola-60m save). A dataset whose pipeline is not the one we
 * write (shuffle, then zstd; element type float32 little-endian), or a chunk
 * stored with a filter skipped, is read through H5Dread instead. Either way
 * the hyperslab goes through the same element-sum checksum as the written
 * data, so a difference anywhere (metadata, chunk index, compressed bytes,
 * zstd frame checksum, values) fails the save. */
#include <string.h>

#include "check.h"
#include "ckpt_h5.h"
#include "ckpt_hash.h"
#include "ckpt_internal.h"
#include "ckpt_readback.h"
#include "ckpt_test_hooks.h"
#include "util.h"

int ckpt_readback(const ckpt_team *team, const ckpt_file_plan *p, ckpt_stager *stager, int threads, const char *path,
                  const uint64_t *sums, boost_status *err) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  int ok = f >= 0;
  if (!ok) ckpt_h5_fail(err, "read-back: cannot open the written file");
  /* Into the staging buffer: its contents are written and hashed, and the
   * writer owns it until this job ends. A fresh buffer of that size cost
   * more in first-touch page faults (~1.2 s for cola-60m's 513 MB) than
   * the decoding itself. */
  float *buf = stager->stage;
  const size_t n = (size_t)p->nent * CKPT_NUM_CATEGORIES;
  uint64_t *got = boost_try_calloc(n ? n : 1, sizeof *got);
  if (!got && ok) {
    boost_err(err, "read-back: out of memory (%zu checksums)", n);
    ok = 0;
  }
  ckpt_chunk_reader *cr = ckpt_chunk_reader_new(threads);
  char dpath[TENSOR_NAME_MAX + 48];
  /* Every rank opens every dataset, in the same order (as a load does); the
   * ranks that wrote a band read it back. */
  for (size_t k = 0; f >= 0 && got && k < n; k++) {
    const ckpt_entry *e = &p->ents[k / CKPT_NUM_CATEGORIES];
    const int c = (int)(k % CKPT_NUM_CATEGORIES);
    boost_msgf(dpath, sizeof dpath, "read-back of %s/%s", ckpt_category_group[c], e->name);
    hid_t ds = H5Dopen2(f, dpath + strlen("read-back of "), H5P_DEFAULT), space = ds >= 0 ? H5Dget_space(ds) : -1;
    if (space < 0 && ok) {
      ckpt_h5_fail(err, dpath);
      ok = 0;
    }
    if (ok && e->stage_off[c] != CKPT_NO_STAGE) {
      const tensor_desc *t = &stager->reg->tensors[e->local];
      int64_t start[TENSOR_MAX_DIMS], count[TENSOR_MAX_DIMS];
      hsize_t st[TENSOR_MAX_DIMS], ct[TENSOR_MAX_DIMS];
      ckpt_band_slab(t, e->r0[c], e->r1[c], start, count);
      for (int d = 0; d < t->ndim; d++) st[d] = (hsize_t)start[d], ct[d] = (hsize_t)count[d];
      int rc = !ckpt_test_hooks_now()->readback_hdf5 && H5Sget_simple_extent_ndims(space) == t->ndim
                   ? ckpt_read_slab_chunks_async(cr, ds, t->ndim, t->shape, st, ct, NULL, &got[k], dpath, err)
                   : 0;
      if (rc == 0) { /* another pipeline: through HDF5, into the staging buffer (a ring: each band at its start) */
        float *dst = ckpt_stager_bounded(stager) ? buf : buf + e->stage_off[c];
        rc = ckpt_read_slab_hdf5(ds, space, t->ndim, t->shape, st, ct, dst, &got[k]) == 0 ? 1 : -1;
        if (rc < 0) ckpt_h5_fail(err, dpath);
      }
      ok = rc > 0;
    }
    if (space >= 0) H5Sclose(space);
    if (ds >= 0) H5Dclose(ds);
  }
  if (ok && ckpt_chunk_reader_wait(cr, err) != 0) ok = 0; /* the last slabs' decoding */
  ckpt_chunk_reader_free(cr);
  if (f >= 0 && H5Fclose(f) < 0 && ok) {
    ckpt_h5_fail(err, "read-back: closing the written file");
    ok = 0;
  }
  int all_ok = ckpt_all_true(team, ok);
  if (all_ok) { /* every rank has its sums here */
    MPI_Allreduce(MPI_IN_PLACE, got, (int)(n ? n : 1), MPI_UINT64_T, MPI_SUM, team->comm);
    for (size_t k = 0; k < n && all_ok; k++)
      if (got[k] != sums[k]) {
        boost_err(err, "read-back: %s/%s does not match what was written", ckpt_category_group[k % CKPT_NUM_CATEGORIES],
                   p->ents[k / CKPT_NUM_CATEGORIES].name);
        ok = all_ok = 0;
      }
  }
  boost_free(got);
  return ok;
}
