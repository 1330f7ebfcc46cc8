/* Writing a checkpoint file (writer thread): the file's layout, the same
 * through either write path (ckpt_write_path.h) -- the root attributes,
 * the groups, every tensor's band from the stager, the checksums, the
 * training state, the activations. The first failure on any rank stops
 * every rank at the next agreement. */
#include "ckpt_write.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ckpt_fs.h"
#include "ckpt_h5.h"
#include "ckpt_table.h"
#include "ckpt_test_hooks.h"
#include "util.h"

/* One dataset through the file's write path. */
static void write_dataset(ckpt_file_writer *w, hid_t loc, const char *path, const char *name, hid_t ftype, hid_t mtype,
                          int ndim, const int64_t *gshape, const int64_t *chunk, const int64_t *start,
                          const int64_t *count, const void *buf, const uint64_t *checksum, int kind) {
  const ckpt_dataset d = {loc, path, name, ftype, mtype, ndim, gshape, chunk, start, count, buf, checksum, kind};
  w->how->dataset(w, &d);
}

static hid_t make_group(ckpt_file_writer *w, const char *path) {
  if (!w->holds_file) return -1;
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  hid_t gid = H5Gcreate2(w->file, path, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  H5Pclose(lcpl);
  if (gid < 0) ckpt_wfail(w, "H5Gcreate %s", path);
  return gid;
}

/* The run's metadata block with the package's own fields, written through
 * the schema (ckpt_meta.h). */
static void write_root_attrs(ckpt_file_writer *w, const save_job *j) {
  if (!w->holds_file) return;
  ckpt_meta m;
  if (ckpt_meta_copy(&m, &j->meta) != 0) {
    ckpt_wfail(w, "root attributes of %s: out of memory", "the checkpoint");
    ckpt_meta_free(&m);
    return;
  }
  int rc = ckpt_meta_set_str(&m, CKPT_META_F_format, CKPT_FORMAT_NAME);
  rc |= ckpt_meta_set_str(&m, CKPT_META_F_software_version, BOOST_VERSION);
  rc |= ckpt_meta_set_str(&m, CKPT_META_F_checksum_algorithm, CKPT_CHECKSUM_ALGORITHM);
  CKPT_META_SET(&m, package, format_version, CKPT_FORMAT_VERSION);
  CKPT_META_SET(&m, package, n_tensors, w->ws->plan->nent);
  boost_status why = {0};
  if (rc != 0) ckpt_wfail(w, "root attributes of %s: out of memory", "the checkpoint");
  else if (ckpt_meta_write(w->file, &m, &why) != 0 && w->ok) {
    boost_err(&w->err, "%s", why.msg);
    w->ok = 0;
  }
  ckpt_meta_free(&m);
}

double ckpt_raw_bytes(const ckpt_file_plan *p, const save_job *j) {
  double raw = (256 << 10) + ckpt_file_plan_raw_bytes(p) + 2048.0 * CKPT_NUM_CATEGORIES * p->nent;
  for (int a = 0; j && a < j->acts.nact; a++) {
    double n = 1;
    for (int k = 0; k < j->acts.acts[a].d.ndim; k++) n *= (double)j->acts.acts[a].d.shape[k];
    raw += (double)ckpt_act_esize((ckpt_act_type)j->acts.acts[a].d.type) * n + 2048.0;
  }
  for (int k = 0; j && k < CKPT_STATE_NSETS; k++)
    raw += (double)j->state.set[k].rows * ckpt_state_width(k) * (double)ckpt_state_esize(k) + 2048.0;
  return raw;
}

/* The activations' chunk shapes, from where the ranks' hyperslabs meet
 * (collective): each chunk has one writer, like the tensors' (ckpt_table.c). */
static void plan_act_chunks(const ckpt_team *team, save_job *j) {
  if (j->acts.nact == 0) return; /* on every rank: the list is the union of the stages' */
  const int n = 3 * j->acts.nact;
  int64_t *cut = boost_calloc((size_t)(n ? n : 1), sizeof *cut);
  for (int a = 0; a < j->acts.nact; a++) {
    const act_item *it = &j->acts.acts[a];
    if (it->has) ckpt_chunk_cut_add(it->d.ndim, it->d.shape, it->start, it->count, &cut[3 * a]);
  }
  ckpt_allreduce_gcd(cut, n, team->comm);
  for (int a = 0; a < j->acts.nact; a++) {
    act_item *it = &j->acts.acts[a];
    hsize_t ch[3];
    ckpt_chunk_dims_cut(it->d.ndim, it->d.shape, &cut[3 * a], ch);
    for (int d = 0; d < it->d.ndim; d++) it->chunk[d] = (int64_t)ch[d];
  }
  boost_free(cut);
}

/* The stored activations (group /activations), sums[a] the checksum of
 * dataset a; every rank takes part (collective). */
static void write_activations(ckpt_file_writer *w, const save_job *j, const uint64_t *sums) {
  hid_t ga = make_group(w, CKPT_GROUP_ACTS);
  if (ga >= 0) {
    int rc = ckpt_attr_put_str(ga, "mode", ckpt_meta_str(&j->meta, CKPT_META_F_activations));
    rc |= ckpt_attr_put_str(ga, "weights", "recomputed at save time with the weights of this checkpoint");
    rc |= ckpt_attr_put_i64(ga, "micro_batch", j->acts.act_B);
    rc |= ckpt_attr_put_i64(ga, "seq_len", j->acts.act_T);
    if (rc) ckpt_wfail(w, "attributes of %s", CKPT_GROUP_ACTS);
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
      ckpt_wfail(w, "the bfloat16 type of %s", path_ds);
      w->how->skip(w); /* its place in the path's list, passed with this rank's failure */
    } else
      write_dataset(w, ga, path_ds, it->d.name, ft, mt, it->d.ndim, it->d.shape, it->chunk, it->start, it->has ? it->count : NULL,
                    it->has ? j->acts.act_buf + it->off : NULL, &sums[a], SIZE_ACTS);
    if (bf16 >= 0) H5Tclose(bf16);
    go = w->how->go_on(w);
  }
  if (ga >= 0) H5Gclose(ga);
}

/* The training state's datasets (ckpt_meta.h, CKPT_STATE_SETS), small and
 * contiguous, from rank 0's copy; sums[k] the checksum of set k. A table
 * gets its `columns` attribute. */
static void write_state(ckpt_file_writer *w, const save_job *j, const uint64_t *sums) {
  hid_t gs = make_group(w, CKPT_GROUP_STATE);
  for (int k = 0; k < CKPT_STATE_NSETS; k++) {
    const ckpt_state_desc *d = &ckpt_state_sets[k];
    const int f32 = d->type == CKPT_META_T_F32, ndim = d->cols > 0 ? 2 : 1;
    const int64_t shape[2] = {j->state.set[k].rows, d->cols}, zero[2] = {0, 0};
    char path_ds[96];
    boost_msgf(path_ds, sizeof path_ds, CKPT_GROUP_STATE "/%s", d->name);
    write_dataset(w, gs, path_ds, d->name, f32 ? H5T_IEEE_F32LE : H5T_IEEE_F64LE, f32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE,
                  ndim, shape, NULL, zero, w->ws->team->rank == 0 ? shape : NULL, j->state.set[k].data, &sums[k], -1);
    if (d->cols > 0 && gs >= 0) { /* every rank that holds the file (collective metadata) */
      char cols[512];
      ckpt_state_columns(k, cols, sizeof cols);
      hid_t ds = H5Dopen2(gs, d->name, H5P_DEFAULT);
      if (ds < 0 || ckpt_attr_put_str(ds, "columns", cols) < 0) ckpt_wfail(w, "the columns attribute of %s", path_ds);
      if (ds >= 0) H5Dclose(ds);
    }
  }
  if (gs >= 0) H5Gclose(gs);
}

/* Every checksum summed over the ranks (nsum of them), the tensors' --
 * taken as each band was staged -- put on their datasets (by the ranks
 * that hold the file). */
static void put_tensor_sums(ckpt_file_writer *w, const hid_t *groups, uint64_t *sums, size_t nsum) {
  const ckpt_file_plan *p = w->ws->plan;
  const size_t n = (size_t)p->nent * CKPT_NUM_CATEGORIES;
  memcpy(sums, ckpt_ring_sums(w->ws->st), n * sizeof *sums);
  comm_control(w->ws->team->comm, COMM_WORLD, "checkpoint checksums", sums, (int)nsum, MPI_UINT64_T, MPI_SUM);
  if (!w->holds_file) return;
  for (size_t k = 0; k < n && w->ok; k++) {
    const ckpt_entry *e = &p->ents[k / CKPT_NUM_CATEGORIES];
    const hid_t d = H5Dopen2(groups[k % CKPT_NUM_CATEGORIES], e->name, H5P_DEFAULT);
    if (d < 0 || ckpt_attr_put_u64(d, CKPT_ATTR_CHECKSUM, sums[k]) < 0) ckpt_wfail(w, "checksum attribute of %s", e->name);
    if (d >= 0) H5Dclose(d);
  }
}

/* Every tensor's band from the stager, in the plan's file order. */
static int write_tensors(ckpt_file_writer *w, const hid_t *groups) {
  const ckpt_file_plan *p = w->ws->plan;
  ckpt_stager *st = w->ws->st;
  char path_ds[TENSOR_NAME_MAX + 32];
  int go = 1;
  for (int i = 0; go && i < p->nent; i++) {
    const ckpt_entry *e = &p->ents[i];
    for (int c = 0; go && c < CKPT_NUM_CATEGORIES; c++) {
      const int mine = e->stage_off[c] != CKPT_NO_STAGE;
      int64_t start[TENSOR_MAX_DIMS], count[TENSOR_MAX_DIMS];
      if (mine) ckpt_band_slab(&st->reg->tensors[e->local], e->r0[c], e->r1[c], start, count);
      boost_msgf(path_ds, sizeof path_ds, "%s/%s", ckpt_category_group[c], e->name);
      write_dataset(w, groups[c], path_ds, e->name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, e->ndim, e->shape, e->chunk,
                    mine ? start : NULL, mine ? count : NULL, mine ? ckpt_ring_take(st, i, c) : NULL, NULL,
                    c == CKPT_PARAMS ? SIZE_WEIGHTS : SIZE_MOMENTS);
      if (mine) ckpt_ring_release(st, i, c);
      go = w->how->go_on(w); /* stop everywhere at the first failure */
    }
  }
  return go;
}

int ckpt_write_file(const ckpt_write_setup *ws, save_job *j, const char *path, uint64_t *sums, save_result *r,
                    boost_status *err) {
  ckpt_file_writer w = {.ws = ws, .file = -1, .dxpl = -1, .ok = 1, .r = r, .fd = -1, .placed_ok = 1};
  const ckpt_team *team = ws->team;
  const size_t ntensor = (size_t)ws->plan->nent * CKPT_NUM_CATEGORIES;
  plan_act_chunks(team, j);
  w.how = ckpt_write_direct.prepare(&w, j) ? &ckpt_write_direct : &ckpt_write_collective;
  r->direct = w.how == &ckpt_write_direct;
  w.how->create(&w, path);
  if (!ckpt_agree(team, w.ok, w.err.msg, err)) {
    if (w.dxpl >= 0) H5Pclose(w.dxpl);
    if (w.file >= 0) H5Fclose(w.file);
    if (w.fd >= 0) close(w.fd);
    return 0;
  }
  /* Reserve the file's expected size so that a full disk fails here, on
   * every rank at once, not in the middle of collective writes. */
  if (team->rank == 0 && ws->reserve_bytes > 0) {
    boost_status rerr = {0};
    if (ckpt_fs_reserve(path, (uint64_t)ws->reserve_bytes, &rerr) < 0) {
      boost_err(&w.err, "%s", rerr.msg);
      w.ok = 0;
    }
  }
  int go = ckpt_agree(team, w.ok, w.err.msg, err);
  if (go) {
    write_root_attrs(&w, j);
    hid_t groups[CKPT_NUM_CATEGORIES];
    for (int c = 0; c < CKPT_NUM_CATEGORIES; c++) groups[c] = make_group(&w, ckpt_category_group[c]);
    go = ckpt_all_true(team, w.ok) && write_tensors(&w, groups);
    if (go) put_tensor_sums(&w, groups, sums, ntensor + CKPT_STATE_NSETS + (size_t)j->acts.nact);
    for (int c = 0; c < CKPT_NUM_CATEGORIES; c++)
      if (groups[c] >= 0) H5Gclose(groups[c]);
    if (go) write_state(&w, j, sums + ntensor);
    go = go && w.how->go_on(&w);
    if (go && j->acts.nact > 0) write_activations(&w, j, sums + ntensor + CKPT_STATE_NSETS);
  }
  H5Pclose(w.dxpl);
  w.how->finish(&w, path, go);
  if (!w.ok) boost_err(err, "%s", w.err.msg);
  return w.ok;
}
