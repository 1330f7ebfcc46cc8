/* The collective write path (ckpt_write_path.h): the file through MPI-IO,
 * every dataset created by every rank, the filters run by HDF5 inside the
 * collective H5Dwrite. Taken with BOOST_CKPT_DIRECT=0, on a big-endian
 * machine, and wherever a chunk would have two writers. */
#include "ckpt_write_path.h"

static int collective_prepare(ckpt_file_writer *w, const save_job *j) {
  (void)w;
  (void)j;
  return 1;
}

static void collective_create(ckpt_file_writer *w, const char *path) {
  w->holds_file = 1;
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_mpio(fapl, w->ws->team->comm, MPI_INFO_NULL);
  H5Pset_coll_metadata_write(fapl, 1);
  H5Pset_all_coll_metadata_ops(fapl, 1);
  /* The 1.10 file format: compact chunk indexes (single chunk, fixed array)
   * instead of one v1 B-tree per dataset; every HDF5 >= 1.10 reads it. */
  H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);
  w->file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  if (w->file < 0) ckpt_wfail(w, "H5Fcreate %s", path);
  H5Pclose(fapl);
  w->dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(w->dxpl, H5FD_MPIO_COLLECTIVE);
}

static void collective_skip(ckpt_file_writer *w) { (void)w; }

static int collective_go_on(ckpt_file_writer *w) { return ckpt_all_true(w->ws->team, w->ok); }

static void collective_finish(ckpt_file_writer *w, const char *path, int go) {
  /* Collective MPI_File_sync of what HDF5 wrote, then close. */
  if (go && H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0) ckpt_wfail(w, "H5Fflush %s", path);
  if (H5Fclose(w->file) < 0) ckpt_wfail(w, "H5Fclose %s", path);
}

const ckpt_write_path ckpt_write_collective = {
    "collective",          collective_prepare, collective_create,  ckpt_write_dataset_h5,
    collective_skip,       collective_go_on,   collective_finish,
};
