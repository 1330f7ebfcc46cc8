/* The direct write path (ckpt_write_path.h) over the direct writer
 * (ckpt_direct.h): rank 0 alone holds the file in HDF5 (through
 * ckpt_vfd.c) and writes its groups, attributes and small datasets; every
 * rank encodes the chunks of its hyperslabs and writes them with pwrite
 * where rank 0 placed them. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ckpt_h5.h"
#include "ckpt_test_hooks.h"
#include "ckpt_vfd.h"
#include "ckpt_write_path.h"
#include "h5z_zstd.h"
#include "util.h"

static void direct_item(ckpt_direct_item *it, int ndim, const int64_t *gshape, const int64_t *chunk, size_t esz,
                        const int64_t *start, const int64_t *count) {
  memset(it, 0, sizeof *it);
  it->ndim = ndim;
  it->esz = esz;
  it->has = start != NULL;
  for (int d = 0; d < ndim; d++) {
    it->gshape[d] = gshape[d];
    it->cd[d] = (hsize_t)chunk[d];
    if (it->has) {
      it->start[d] = start[d];
      it->count[d] = count[d];
      it->has = it->has && count[d] > 0;
    }
  }
}

static int numel_positive(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n > 0;
}

/* Whether this file goes the direct way: every rank's every filtered
 * hyperslab is made of whole chunks. The chunk shapes are chosen so
 * (ckpt_chunk_dims_cut); this checks it, and a big-endian machine or
 * BOOST_CKPT_DIRECT=0 takes the collective path. The filtered datasets are
 * listed for the direct writer in the order ckpt_write_file writes them,
 * and it agrees (collective, one reduction). */
static int direct_prepare(ckpt_file_writer *w, const save_job *j) {
  const ckpt_write_setup *ws = w->ws;
  const ckpt_file_plan *p = ws->plan;
  int ok = ws->direct_write && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__; /* memory bytes are the file's */
  const int n = p->nent * CKPT_NUM_CATEGORIES + j->acts.nact;
  ckpt_direct_item *items = boost_calloc((size_t)(n ? n : 1), sizeof *items);
  int k = 0;
  for (int i = 0; i < p->nent; i++) {
    const ckpt_entry *e = &p->ents[i];
    for (int c = 0; c < CKPT_NUM_CATEGORIES; c++) {
      if (!numel_positive(e->ndim, e->shape)) continue;
      int64_t start[TENSOR_MAX_DIMS], count[TENSOR_MAX_DIMS];
      const int mine = e->stage_off[c] != CKPT_NO_STAGE;
      if (mine) ckpt_band_slab(&ws->st->reg->tensors[e->local], e->r0[c], e->r1[c], start, count);
      direct_item(&items[k], e->ndim, e->shape, e->chunk, sizeof(float), mine ? start : NULL, count);
      if (items[k].has) ok = ok && ckpt_direct_slab_aligned(e->ndim, e->shape, items[k].cd, start, count);
      k++;
    }
  }
  for (int a = 0; a < j->acts.nact; a++) {
    const act_item *it = &j->acts.acts[a];
    if (!numel_positive(it->d.ndim, it->d.shape)) continue;
    direct_item(&items[k], it->d.ndim, it->d.shape, it->chunk, ckpt_act_esize((ckpt_act_type)it->d.type),
                it->has ? it->start : NULL, it->count);
    if (items[k].has) ok = ok && ckpt_direct_slab_aligned(it->d.ndim, it->d.shape, items[k].cd, it->start, it->count);
    k++;
  }
  ok = ckpt_direct_begin(ws->dx, ws->team->comm, ws->level, k, items, ok);
  boost_free(items);
  return ok;
}

/* Rank 0 creates the file through ckpt_vfd.c, then every rank opens its
 * own descriptor. */
static void direct_create(ckpt_file_writer *w, const char *path) {
  const ckpt_team *team = w->ws->team;
  w->holds_file = team->rank == 0;
  w->dxpl = H5Pcreate(H5P_DATASET_XFER);
  if (w->holds_file) {
    hid_t fapl = ckpt_vfd_fapl();
    w->file = fapl < 0 ? -1 : H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (fapl >= 0) H5Pclose(fapl);
    if (w->file < 0) ckpt_wfail(w, "H5Fcreate %s", path);
  }
  if (!ckpt_agree(team, w->ok, w->err.msg, NULL)) {
    w->ok = 0; /* the caller's agreement names the failing rank */
    return;
  }
  w->fd = open(path, O_WRONLY | O_CLOEXEC);
  if (w->fd < 0) {
    boost_err(&w->err, "cannot open %s for writing: %s", path, strerror(errno));
    w->ok = 0;
  }
}

/* A filtered dataset: rank 0 creates it, every rank encodes its chunks;
 * the writer places them with other datasets' (ckpt_direct.h) and closes
 * the dataset then. The small unfiltered ones rank 0 writes from its data. */
static void direct_dataset(ckpt_file_writer *w, const ckpt_dataset *ds) {
  const ckpt_write_setup *ws = w->ws;
  hsize_t dims[TENSOR_MAX_DIMS], chunk[TENSOR_MAX_DIMS];
  double raw = (double)H5Tget_size(ds->ftype);
  for (int d = 0; d < ds->ndim; d++) {
    dims[d] = (hsize_t)ds->gshape[d];
    chunk[d] = ds->chunk ? (hsize_t)ds->chunk[d] : 0;
    raw *= (double)ds->gshape[d];
  }
  if (!ds->chunk || raw <= 0) {
    if (w->holds_file) ckpt_write_dataset_h5(w, ds);
    else ckpt_test_delay();
    return;
  }
  hid_t dset = -1;
  if (w->holds_file) {
    hid_t space = H5Screate_simple(ds->ndim, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (space < 0 || dcpl < 0 || h5z_zstd_set_dcpl(dcpl, ds->ndim, chunk, ws->level) < 0 ||
        H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0 ||
        (dset = H5Dcreate2(ds->loc, ds->name, ds->ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT)) < 0)
      ckpt_wfail(w, "H5Dcreate %s", ds->path);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    if (dset >= 0 && ds->checksum && ckpt_attr_put_u64(dset, CKPT_ATTR_CHECKSUM, *ds->checksum) < 0)
      ckpt_wfail(w, "checksum attribute of %s", ds->path);
  }
  /* All of the rank's cores while training waits for this save (a final
   * save, synchronous saves); one beside training otherwise. */
  const int threads = ckpt_worker_threads(ws->pace);
  double *stored = ds->kind >= 0 && w->holds_file ? &w->r->stored[ds->kind] : NULL;
  const void *buf = ds->count != NULL ? ds->buf : NULL;
  w->placed_ok = ckpt_direct_add(ws->dx, w->next_item++, w->fd, dset, buf, stored, threads, w->ok);
  if (ds->kind >= 0 && w->holds_file) w->r->raw[ds->kind] += raw;
  ckpt_test_delay();
}

static void direct_skip(ckpt_file_writer *w) {
  w->placed_ok = ckpt_direct_add(w->ws->dx, w->next_item++, w->fd, -1, NULL, NULL, 1, 0);
}

/* The verdict of the writer's last placement, which every rank learnt at
 * the same dataset (no collective per dataset). */
static int direct_go_on(ckpt_file_writer *w) { return w->placed_ok; }

/* Rank 0: a write of the file that its driver gave up on (ckpt_vfd_failed)
 * fails the checkpoint. */
static void vfd_failure(ckpt_file_writer *w, const char *path) {
  const int e = w->file >= 0 ? ckpt_vfd_failed() : 0;
  if (!e || !w->ok) return;
  boost_err(&w->err, "%s: writing the file's metadata: %s", path, strerror(e));
  w->ok = 0;
}

static void direct_finish(ckpt_file_writer *w, const char *path, int go) {
  (void)go;
  boost_status why = {0};
  if (!ckpt_direct_end(w->ws->dx, w->ok, &why) && w->ok) {
    boost_err(&w->err, "%s: %s", path, why.msg);
    w->ok = 0;
  }
  if (w->fd >= 0 && close(w->fd) != 0) {
    boost_err(&w->err, "closing %s: %s", path, strerror(errno));
    w->ok = 0;
  }
  w->fd = -1;
  vfd_failure(w, path);
  /* every rank's chunks are in before rank 0 writes the metadata */
  ckpt_all_true(w->ws->team, w->ok);
  if (w->file >= 0 && !w->ok) ckpt_vfd_abandon(); /* failed: release it without writing more */
  if (w->file >= 0 && H5Fclose(w->file) < 0) {
    ckpt_wfail(w, "H5Fclose %s", path);
    ckpt_vfd_abandon();
    H5Fclose(w->file);
  }
  vfd_failure(w, path); /* the metadata written at close */
  comm_control_bcast(w->ws->team->comm, COMM_WORLD, "checkpoint agreement", w->r->raw, (int)sizeof w->r->raw, 0);
  comm_control_bcast(w->ws->team->comm, COMM_WORLD, "checkpoint agreement", w->r->stored, (int)sizeof w->r->stored, 0);
}

const ckpt_write_path ckpt_write_direct = {
    "direct", direct_prepare, direct_create, direct_dataset, direct_skip, direct_go_on, direct_finish,
};
