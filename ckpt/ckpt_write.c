/* Writing a checkpoint file (writer thread), in one of two ways with the
 * same result:
 *  - direct (ckpt_direct.h), when every chunk of the file comes from one
 *    rank -- on every layout, since the chunk shapes follow the ranks'
 *    hyperslabs (ckpt_chunk_dims_cut; the tensors' in ckpt_table.c, the
 *    activations' here): rank 0 alone holds the file in HDF5, every rank
 *    encodes its own chunks and writes them where rank 0 placed them;
 *  - collective (BOOST_CKPT_DIRECT=0, a big-endian machine): every rank
 *    creates every dataset; ranks with data select their hyperslab, the
 *    others nothing (filtered parallel writes are collective), and HDF5 runs
 *    the filters.
 * The first failure on any rank stops every rank at the next agreement. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ckpt_direct.h"
#include "ckpt_fs.h"
#include "ckpt_h5.h"
#include "ckpt_internal.h"
#include "ckpt_vfd.h"
#include "h5z_zstd.h"

typedef struct {
  ckpt_session *s;
  hid_t file, dxpl; /* file: rank 0's only when direct */
  int ok;           /* this rank has not failed yet */
  char err[REASON_MAX];
  save_result *r;
  int direct, fd; /* the direct writer: this rank's descriptor */
  int next_item;  /* direct: the next dataset of ckpt_direct_begin's list */
  int placed_ok;  /* direct: the verdict of the last placement of chunks */
} writer;

/* After a dataset: whether every rank goes on. Direct: the verdict of the
 * writer's last placement, which every rank learnt at the same dataset (no
 * collective per dataset); collective: an agreement. */
static int go_on(writer *w) { return w->direct ? w->placed_ok : ckpt_all_true(w->s, w->ok); }

static void wfail(writer *w, const char *fmt, const char *arg) {
  if (!w->ok) return;
  char what[512];
  boost_msgf(what, sizeof what, fmt, arg);
  ckpt_h5_error(w->err, sizeof w->err, what);
  w->ok = 0;
}

/* One filtered dataset through the direct writer: rank 0 creates it, every
 * rank encodes its chunks; the writer places them with other datasets'
 * (ckpt_direct.h) and closes the dataset then. */
static void write_dataset_direct(writer *w, hid_t loc, const char *path, const char *name, hid_t ftype, int ndim,
                                 const int64_t *gshape, const hsize_t *chunk, const void *buf,
                                 const uint64_t *checksum, int kind) {
  ckpt_session *s = w->s;
  hsize_t dims[TENSOR_MAX_DIMS];
  double raw = (double)H5Tget_size(ftype);
  for (int d = 0; d < ndim; d++) {
    dims[d] = (hsize_t)gshape[d];
    raw *= (double)gshape[d];
  }
  hid_t dset = -1;
  if (s->rank == 0) {
    hid_t space = H5Screate_simple(ndim, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (space < 0 || dcpl < 0 || h5z_zstd_set_dcpl(dcpl, ndim, chunk, s->cfg.level) < 0 ||
        H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0 ||
        (dset = H5Dcreate2(loc, name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT)) < 0)
      wfail(w, "H5Dcreate %s", path);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    if (dset >= 0 && checksum && ckpt_attr_put_u64(dset, CKPT_ATTR_CHECKSUM, *checksum) < 0)
      wfail(w, "checksum attribute of %s", path);
  }
  /* All of the rank's cores while training waits for this save (a final
   * save, synchronous saves); one beside training otherwise. */
  const int threads = ckpt_work_threads(s);
  double *stored = kind >= 0 && s->rank == 0 ? &w->r->stored[kind] : NULL;
  w->placed_ok = ckpt_direct_add(s->direct, w->next_item++, w->fd, dset, buf, stored, threads, w->ok);
  if (kind >= 0 && s->rank == 0) w->r->raw[kind] += raw;
  ckpt_test_delay();
}

/* One dataset, collectively: every rank creates it; ranks with data select
 * their hyperslab (start/count over the global shape), the others nothing.
 * chunk64: the chunk shape of a filtered dataset (NULL: contiguous, no
 * filters); checksum NULL: its attribute comes later (put_tensor_sums). */
static void write_dataset(writer *w, hid_t loc, const char *path, const char *name, hid_t ftype, hid_t mtype,
                          int ndim, const int64_t *gshape, const int64_t *chunk64, const int64_t *start,
                          const int64_t *count, const void *buf, const uint64_t *checksum, int kind) {
  ckpt_session *s = w->s;
  hsize_t dims[TENSOR_MAX_DIMS], chunk[TENSOR_MAX_DIMS], st[TENSOR_MAX_DIMS], ct[TENSOR_MAX_DIMS];
  const int filtered = chunk64 != NULL;
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) {
    dims[d] = (hsize_t)gshape[d];
    chunk[d] = filtered ? (hsize_t)chunk64[d] : 0;
    n *= gshape[d];
  }
  if (w->direct && (filtered && n > 0)) {
    write_dataset_direct(w, loc, path, name, ftype, ndim, gshape, chunk, count != NULL ? buf : NULL, checksum, kind);
    return;
  }
  if (w->direct && s->rank != 0) { /* rank 0 writes the small unfiltered ones from its data */
    ckpt_test_delay();
    return;
  }
  hid_t space = H5Screate_simple(ndim, dims, NULL);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (space < 0 || dcpl < 0) wfail(w, "creating the dataspace of %s", path);
  if (filtered && n > 0) {
    if (h5z_zstd_set_dcpl(dcpl, ndim, chunk, s->cfg.level) < 0) wfail(w, "zstd filter setup for %s", path);
  }
  H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
  hid_t dset = H5Dcreate2(loc, name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (dset < 0) {
    wfail(w, "H5Dcreate %s", path);
  } else {
    int has = count != NULL && buf != NULL;
    if (has)
      for (int d = 0; d < ndim; d++) has = has && count[d] > 0;
    hid_t mem;
    if (has) {
      for (int d = 0; d < ndim; d++) {
        st[d] = (hsize_t)start[d];
        ct[d] = (hsize_t)count[d];
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
    if (n > 0 && H5Dwrite(dset, mtype, mem, space, w->dxpl, has ? buf : (const void *)dummy) < 0)
      wfail(w, "H5Dwrite %s", path);
    H5Sclose(mem);
    if (checksum && ckpt_attr_put_u64(dset, CKPT_ATTR_CHECKSUM, *checksum) < 0) wfail(w, "checksum attribute of %s", path);
    if (kind >= 0) {
      w->r->raw[kind] += (double)n * (double)H5Tget_size(ftype);
      w->r->stored[kind] += (double)H5Dget_storage_size(dset);
    }
    if (H5Dclose(dset) < 0) wfail(w, "H5Dclose %s", path);
  }
  if (dcpl >= 0) H5Pclose(dcpl);
  if (space >= 0) H5Sclose(space);
  ckpt_test_delay();
}

static hid_t make_group(writer *w, const char *path) {
  if (w->direct && w->s->rank != 0) return -1;
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  hid_t gid = H5Gcreate2(w->file, path, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  H5Pclose(lcpl);
  if (gid < 0) wfail(w, "H5Gcreate %s", path);
  return gid;
}

/* The run's metadata block with the package's own fields, written through
 * the schema (ckpt_meta.h). */
static void write_root_attrs(writer *w, const save_job *j) {
  ckpt_session *s = w->s;
  if (w->direct && s->rank != 0) return;
  ckpt_meta m;
  if (ckpt_meta_copy(&m, &j->meta) != 0) {
    wfail(w, "root attributes of %s: out of memory", "the checkpoint");
    ckpt_meta_free(&m);
    return;
  }
  int rc = ckpt_meta_set_str(&m, CKPT_META_F_format, CKPT_FORMAT_NAME);
  rc |= ckpt_meta_set_str(&m, CKPT_META_F_software_version, BOOST_VERSION);
  rc |= ckpt_meta_set_str(&m, CKPT_META_F_checksum_algorithm, CKPT_CHECKSUM_ALGORITHM);
  CKPT_META_SET(&m, format_version, CKPT_FORMAT_VERSION);
  CKPT_META_SET(&m, n_tensors, s->nent);
  char why[REASON_MAX];
  if (rc != 0) wfail(w, "root attributes of %s: out of memory", "the checkpoint");
  else if (ckpt_meta_write(w->file, &m, why, sizeof why) != 0 && w->ok) {
    boost_msgf(w->err, sizeof w->err, "%s", why);
    w->ok = 0;
  }
  ckpt_meta_free(&m);
}

double ckpt_raw_bytes(const ckpt_session *s, const save_job *j) {
  double raw = 256 << 10;
  for (int i = 0; i < s->nent; i++)
    raw += CKPT_NUM_CATEGORIES * (4.0 * (double)ckpt_entry_numel(&s->ents[i]) + 2048.0);
  for (int a = 0; j && a < j->acts.nact; a++) {
    double n = 1;
    for (int k = 0; k < j->acts.acts[a].d.ndim; k++) n *= (double)j->acts.acts[a].d.shape[k];
    raw += (double)ckpt_act_esize((ckpt_act_type)j->acts.acts[a].d.type) * n + 2048.0;
  }
  for (int k = 0; j && k < CKPT_STATE_NSETS; k++)
    raw += (double)j->state.set[k].rows * ckpt_state_width(k) * (double)ckpt_state_esize(k) + 2048.0;
  return raw;
}

/* After the first checkpoint of this run the previous file's size, scaled
 * by how much more raw data this one holds, plus 10%; before it the raw
 * size (compression only ever shrinks it, shuffle + zstd by 1.1-1.3x). */
double ckpt_expected_file_bytes(const ckpt_session *s, const save_job *j) {
  const double raw = ckpt_raw_bytes(s, j);
  if (s->prev_file_bytes <= 0 || s->prev_raw_bytes <= 0) return 1.01 * raw;
  return 1.10 * s->prev_file_bytes * (raw / s->prev_raw_bytes) + (256 << 10);
}

/* The activations' chunk shapes, from where the ranks' hyperslabs meet
 * (collective): each chunk has one writer, like the tensors' (ckpt_table.c). */
static void plan_act_chunks(ckpt_session *s, save_job *j) {
  if (j->acts.nact == 0) return; /* on every rank: the list is the union of the stages' */
  const int n = 3 * j->acts.nact;
  int64_t *cut = boost_calloc((size_t)(n ? n : 1), sizeof *cut);
  for (int a = 0; a < j->acts.nact; a++) {
    const act_item *it = &j->acts.acts[a];
    if (it->has) ckpt_chunk_cut_add(it->d.ndim, it->d.shape, it->start, it->count, &cut[3 * a]);
  }
  ckpt_allreduce_gcd(cut, n, s->comm);
  for (int a = 0; a < j->acts.nact; a++) {
    act_item *it = &j->acts.acts[a];
    hsize_t ch[3];
    ckpt_chunk_dims_cut(it->d.ndim, it->d.shape, &cut[3 * a], ch);
    for (int d = 0; d < it->d.ndim; d++) it->chunk[d] = (int64_t)ch[d];
  }
  boost_free(cut);
}

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

/* Whether this file goes through the direct writer: every rank's every
 * filtered hyperslab is made of whole chunks. The chunk shapes are chosen
 * so (ckpt_chunk_dims_cut); this checks it, and a big-endian machine or
 * BOOST_CKPT_DIRECT=0 takes the collective writer. The filtered datasets
 * are listed for the direct writer in the order ckpt_write_file writes
 * them, and it agrees (collective, one reduction). */
static int direct_possible(ckpt_session *s, const save_job *j) {
  int ok = s->set.direct_write && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__; /* memory bytes are the file's */
  const int n = s->nent * CKPT_NUM_CATEGORIES + j->acts.nact;
  ckpt_direct_item *items = boost_calloc((size_t)(n ? n : 1), sizeof *items);
  int k = 0;
  for (int i = 0; i < s->nent; i++) {
    const ckpt_entry *e = &s->ents[i];
    for (int c = 0; c < CKPT_NUM_CATEGORIES; c++) {
      if (!numel_positive(e->ndim, e->shape)) continue;
      int64_t start[TENSOR_MAX_DIMS], count[TENSOR_MAX_DIMS];
      const int mine = e->stage_off[c] != CKPT_NO_STAGE;
      if (mine) ckpt_band_slab(&s->reg->tensors[e->local], e->r0[c], e->r1[c], start, count);
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
  ok = ckpt_direct_begin(s->direct, s->comm, s->cfg.level, k, items, ok);
  boost_free(items);
  return ok;
}

/* Creates the file: collectively through MPI-IO, or (direct) on rank 0
 * through ckpt_vfd.c, then every rank opens its own descriptor. */
static void create_file(writer *w, const char *path, char *err, size_t errlen) {
  ckpt_session *s = w->s;
  if (w->direct) {
    if (s->rank == 0) {
      hid_t fapl = ckpt_vfd_fapl();
      w->file = fapl < 0 ? -1 : H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
      if (fapl >= 0) H5Pclose(fapl);
      if (w->file < 0) wfail(w, "H5Fcreate %s", path);
    }
    if (!ckpt_agree(s, w->ok, w->err, err, errlen)) return;
    w->fd = open(path, O_WRONLY | O_CLOEXEC);
    if (w->fd < 0) {
      boost_msgf(w->err, sizeof w->err, "cannot open %s for writing: %s", path, strerror(errno));
      w->ok = 0;
    }
    return;
  }
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_mpio(fapl, s->comm, MPI_INFO_NULL);
  H5Pset_coll_metadata_write(fapl, 1);
  H5Pset_all_coll_metadata_ops(fapl, 1);
  /* The 1.10 file format: compact chunk indexes (single chunk, fixed array)
   * instead of one v1 B-tree per dataset; every HDF5 >= 1.10 reads it. */
  H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);
  w->file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  if (w->file < 0) wfail(w, "H5Fcreate %s", path);
  H5Pclose(fapl);
}

/* The stored activations (group /activations), sums[a] the checksum of
 * dataset a; every rank takes part (collective). */
static void write_activations(writer *w, const save_job *j, const uint64_t *sums) {
  hid_t ga = make_group(w, CKPT_GROUP_ACTS);
  if (ga >= 0) {
    int rc = ckpt_attr_put_str(ga, "mode", ckpt_meta_str(&j->meta, CKPT_META_F_activations));
    rc |= ckpt_attr_put_str(ga, "weights", "recomputed at save time with the weights of this checkpoint");
    rc |= ckpt_attr_put_i64(ga, "micro_batch", j->acts.act_B);
    rc |= ckpt_attr_put_i64(ga, "seq_len", j->acts.act_T);
    if (rc) wfail(w, "attributes of %s", CKPT_GROUP_ACTS);
  }
  char path_ds[ACT_NAME_MAX + 32];
  int go = 1;
  for (int a = 0; go && a < j->acts.nact; a++) {
    const act_item *it = &j->acts.acts[a];
    /* bf16 goes in as its file type (the bits as they are: parallel
     * filtered writes cannot convert types) */
    const hid_t bf16 = it->d.type == CKPT_ACT_BF16 ? ckpt_bf16_type() : -1;
    hid_t ft = it->d.type == CKPT_ACT_F32 ? H5T_IEEE_F32LE : it->d.type == CKPT_ACT_I32 ? H5T_STD_I32LE : H5T_STD_I64LE;
    hid_t mt = it->d.type == CKPT_ACT_F32 ? H5T_NATIVE_FLOAT : it->d.type == CKPT_ACT_I32 ? H5T_NATIVE_INT32 : H5T_NATIVE_INT64;
    if (it->d.type == CKPT_ACT_BF16) ft = mt = bf16;
    boost_msgf(path_ds, sizeof path_ds, CKPT_GROUP_ACTS "/%s", it->d.name);
    if (it->d.type == CKPT_ACT_BF16 && bf16 < 0) {
      wfail(w, "the bfloat16 type of %s", path_ds);
      if (w->direct) /* its place in the direct writer's list, passed with this rank's failure */
        w->placed_ok = ckpt_direct_add(w->s->direct, w->next_item++, w->fd, -1, NULL, NULL, 1, 0);
    } else
      write_dataset(w, ga, path_ds, it->d.name, ft, mt, it->d.ndim, it->d.shape, it->chunk, it->start, it->has ? it->count : NULL,
                    it->has ? j->acts.act_buf + it->off : NULL, &sums[a], SIZE_ACTS);
    if (bf16 >= 0) H5Tclose(bf16);
    go = go_on(w);
  }
  if (ga >= 0) H5Gclose(ga);
}

/* The training state's datasets (ckpt_meta.h, CKPT_STATE_SETS), small and
 * contiguous, from rank 0's copy; sums[k] the checksum of set k. A table
 * gets its `columns` attribute. */
static void write_state(writer *w, const save_job *j, const uint64_t *sums) {
  ckpt_session *s = w->s;
  hid_t gs = make_group(w, CKPT_GROUP_STATE);
  for (int k = 0; k < CKPT_STATE_NSETS; k++) {
    const ckpt_state_desc *d = &ckpt_state_sets[k];
    const int f32 = d->type == CKPT_META_T_F32, ndim = d->cols > 0 ? 2 : 1;
    const int64_t shape[2] = {j->state.set[k].rows, d->cols}, zero[2] = {0, 0};
    char path_ds[96];
    boost_msgf(path_ds, sizeof path_ds, CKPT_GROUP_STATE "/%s", d->name);
    write_dataset(w, gs, path_ds, d->name, f32 ? H5T_IEEE_F32LE : H5T_IEEE_F64LE, f32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE,
                  ndim, shape, NULL, zero, s->rank == 0 ? shape : NULL, j->state.set[k].data, &sums[k], -1);
    if (d->cols > 0 && gs >= 0) { /* every rank that holds the file (collective metadata) */
      char cols[512];
      ckpt_state_columns(k, cols, sizeof cols);
      hid_t ds = H5Dopen2(gs, d->name, H5P_DEFAULT);
      if (ds < 0 || ckpt_attr_put_str(ds, "columns", cols) < 0) wfail(w, "the columns attribute of %s", path_ds);
      if (ds >= 0) H5Dclose(ds);
    }
  }
  if (gs >= 0) H5Gclose(gs);
}

/* Every checksum summed over the ranks (nsum of them), the tensors' --
 * taken as each band was staged -- put on their datasets (rank 0 alone
 * when direct). */
static void put_tensor_sums(writer *w, const hid_t *groups, uint64_t *sums, size_t nsum) {
  ckpt_session *s = w->s;
  const size_t n = (size_t)s->nent * CKPT_NUM_CATEGORIES;
  memcpy(sums, s->item_sum, n * sizeof *sums);
  comm_control(s->comm, COMM_WORLD, "checkpoint checksums", sums, (int)nsum, MPI_UINT64_T, MPI_SUM);
  if (w->direct && s->rank != 0) return;
  for (size_t k = 0; k < n && w->ok; k++) {
    const ckpt_entry *e = &s->ents[k / CKPT_NUM_CATEGORIES];
    const hid_t d = H5Dopen2(groups[k % CKPT_NUM_CATEGORIES], e->name, H5P_DEFAULT);
    if (d < 0 || ckpt_attr_put_u64(d, CKPT_ATTR_CHECKSUM, sums[k]) < 0)
      wfail(w, "checksum attribute of %s", e->name);
    if (d >= 0) H5Dclose(d);
  }
}

/* Rank 0 of the direct writer: a write of the file that its driver gave up
 * on (ckpt_vfd_failed) fails the checkpoint. */
static void vfd_failure(writer *w, const char *path) {
  const int e = w->file >= 0 ? ckpt_vfd_failed() : 0;
  if (!e || !w->ok) return;
  boost_msgf(w->err, sizeof w->err, "%s: writing the file's metadata: %s", path, strerror(e));
  w->ok = 0;
}

/* Writes the whole file; returns this rank's ok. */
int ckpt_write_file(ckpt_session *s, save_job *j, const char *path, uint64_t *sums, save_result *r,
                      char *err, size_t errlen) {
  writer w = {s, -1, -1, 1, "", r, 0, -1, 0, 1};
  const tensor_registry *reg = s->reg;
  plan_act_chunks(s, j);
  w.direct = direct_possible(s, j);
  r->direct = w.direct;
  create_file(&w, path, err, errlen);
  if (!ckpt_agree(s, w.ok, w.err, err, errlen)) {
    if (w.file >= 0) H5Fclose(w.file);
    if (w.fd >= 0) close(w.fd);
    return 0;
  }
  /* Reserve the file's expected size so that a full disk fails here, on
   * every rank at once, not in the middle of collective writes. */
  if (s->rank == 0 && !ckpt_test_hooks_now()->no_reserve) {
    char rerr[512];
    if (ckpt_fs_reserve(path, (uint64_t)ckpt_expected_file_bytes(s, j), rerr, sizeof rerr) < 0) {
      boost_msgf(w.err, sizeof w.err, "%s", rerr);
      w.ok = 0;
    }
  }
  int go = ckpt_agree(s, w.ok, w.err, err, errlen);
  w.dxpl = H5Pcreate(H5P_DATASET_XFER);
  if (!w.direct) H5Pset_dxpl_mpio(w.dxpl, H5FD_MPIO_COLLECTIVE);
  if (go) {
    write_root_attrs(&w, j);
    hid_t groups[CKPT_NUM_CATEGORIES];
    for (int c = 0; c < CKPT_NUM_CATEGORIES; c++) groups[c] = make_group(&w, ckpt_category_group[c]);
    go = ckpt_all_true(s, w.ok);
    char path_ds[TENSOR_NAME_MAX + 32];
    for (int i = 0; go && i < s->nent; i++) {
      const ckpt_entry *e = &s->ents[i];
      for (int c = 0; go && c < CKPT_NUM_CATEGORIES; c++) {
        const int mine = e->stage_off[c] != CKPT_NO_STAGE;
        int64_t start[TENSOR_MAX_DIMS], count[TENSOR_MAX_DIMS];
        if (mine) ckpt_band_slab(&reg->tensors[e->local], e->r0[c], e->r1[c], start, count);
        boost_msgf(path_ds, sizeof path_ds, "%s/%s", ckpt_category_group[c], e->name);
        write_dataset(&w, groups[c], path_ds, e->name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, e->ndim, e->shape, e->chunk,
                      mine ? start : NULL, mine ? count : NULL, mine ? ckpt_ring_take(s, i, c) : NULL, NULL,
                      c == CKPT_PARAMS ? SIZE_WEIGHTS : SIZE_MOMENTS);
        if (mine) ckpt_ring_release(s, i, c);
        go = go_on(&w); /* stop everywhere at the first failure */
      }
    }
    if (go) put_tensor_sums(&w, groups, sums, (size_t)s->nent * CKPT_NUM_CATEGORIES + CKPT_STATE_NSETS + (size_t)j->acts.nact);
    for (int c = 0; c < CKPT_NUM_CATEGORIES; c++)
      if (groups[c] >= 0) H5Gclose(groups[c]);
    if (go) write_state(&w, j, sums + (size_t)s->nent * CKPT_NUM_CATEGORIES);
    go = go && go_on(&w);
    if (go && j->acts.nact > 0) write_activations(&w, j, sums + (size_t)s->nent * CKPT_NUM_CATEGORIES + CKPT_STATE_NSETS);
  }
  H5Pclose(w.dxpl);
  if (w.direct) {
    char why[512];
    if (!ckpt_direct_end(s->direct, w.ok, why, sizeof why) && w.ok) {
      boost_msgf(w.err, sizeof w.err, "%s: %s", path, why);
      w.ok = 0;
    }
    if (w.fd >= 0 && close(w.fd) != 0) {
      boost_msgf(w.err, sizeof w.err, "closing %s: %s", path, strerror(errno));
      w.ok = 0;
    }
    vfd_failure(&w, path);
    /* every rank's chunks are in before rank 0 writes the metadata */
    go = ckpt_all_true(s, w.ok) && go;
    if (w.file >= 0 && !w.ok) ckpt_vfd_abandon(); /* failed: release it without writing more */
    if (w.file >= 0 && H5Fclose(w.file) < 0) {
      wfail(&w, "H5Fclose %s", path);
      ckpt_vfd_abandon();
      H5Fclose(w.file);
    }
    vfd_failure(&w, path); /* the metadata written at close */
    comm_control_bcast(s->comm, COMM_WORLD, "checkpoint agreement", r->raw, (int)sizeof r->raw, 0);
    comm_control_bcast(s->comm, COMM_WORLD, "checkpoint agreement", r->stored, (int)sizeof r->stored, 0);
  } else {
    /* Collective MPI_File_sync of what HDF5 wrote, then close. */
    if (go && H5Fflush(w.file, H5F_SCOPE_GLOBAL) < 0) wfail(&w, "H5Fflush %s", path);
    if (H5Fclose(w.file) < 0) wfail(&w, "H5Fclose %s", path);
  }
  if (!w.ok) boost_msgf(err, errlen, "%s", w.err);
  return w.ok;
}

