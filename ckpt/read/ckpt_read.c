/* Resume (writer thread): the candidates newest first, each read through
 * this layout's plan -- every replica reads its bands, decoded straight
 * into the arenas (or, with ZeRO-1 moment chunks, into the host staging
 * buffer; ckpt_load_stage.c), and hashes what it would write -- and
 * verified against the stored checksums. Only a verified file is trained
 * from (the training thread's ckpt_upload_loaded: the replicas' bands
 * all-gathered, the working copy refreshed); a file that fails is
 * overwritten by the next candidate, or the run stops. Any problem with a file (unreadable,
 * damaged metadata, a missing or misshapen tensor, a checksum mismatch)
 * makes it unusable and the previous one is tried: the model itself was
 * compared with the stored config before this (trainer/resume_plan.c), so
 * a file that does not fit is a damaged file, never "another model". */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "ckpt_fs.h"
#include "ckpt_h5.h"
#include "ckpt_hash.h"
#include "ckpt_internal.h"
#include "ckpt_read.h"
#include "ckpt_test_hooks.h"
#include "log.h"
#include "util.h"

/* One candidate being read. sums/stored: per (tensor, category), then the
 * state datasets. */
typedef struct {
  ckpt_reader *rd;
  hid_t f, dxpl;
  ckpt_chunk_reader *cr; /* the stored chunks, decoded on all of the rank's cores (training waits) */
  load_result *lr;
  uint64_t *stored, *sums;
  size_t nsum;
  int ok;
  boost_status err;
  double needed, decoded; /* bytes of this rank's bands, and of the chunks they touch */
} reader;

/* Bytes of the dataset's chunks a hyperslab touches (what HDF5 decodes). */
static double chunk_bytes(hid_t d, int ndim, const int64_t *start, const int64_t *count) {
  hid_t dcpl = H5Dget_create_plist(d);
  hsize_t c[TENSOR_MAX_DIMS];
  const int chunked = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, ndim, c) == ndim;
  if (dcpl >= 0) H5Pclose(dcpl);
  double bytes = 4.0;
  for (int k = 0; k < ndim; k++) {
    const int64_t ck = chunked ? (int64_t)c[k] : count[k], first = start[k] / ck, last = (start[k] + count[k] - 1) / ck;
    bytes *= (double)(last - first + 1) * (double)ck;
  }
  return bytes;
}

/* 1 when every component of an absolute path exists, 0 when one does not,
 * -1 when HDF5 cannot tell (damaged metadata). */
static int path_exists(hid_t f, const char *path) {
  char p[TENSOR_NAME_MAX + 64];
  boost_msgf(p, sizeof p, "%s", path);
  for (char *c = p + 1;; c++) {
    if (*c == '/' || *c == 0) {
      const char save = *c;
      *c = 0;
      const htri_t e = H5Lexists(f, p, H5P_DEFAULT);
      if (e <= 0) return e < 0 ? -1 : 0;
      if (!save) return 1;
      *c = save;
    }
  }
}

static int open_file(const ckpt_team *team, const char *path, hid_t *f, boost_status *why) {
  boost_status err = {0};
  int ok = 1;
  struct stat stt;
  if (stat(path, &stt) != 0) {
    boost_err(&err, "cannot stat %s: %s", path, strerror(errno));
    ok = 0;
  }
  if (!ckpt_agree(team, ok, err.msg, why)) return -1;
  /* Each rank on its own, read-only through the POSIX driver: every read is
   * independent, and parallel HDF5 refuses the raw chunk reads of
   * ckpt_read_slab_chunks through MPI-IO. */
  *f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (*f < 0) { /* before any other HDF5 call: each one clears the error stack */
    ckpt_h5_fail(&err, "cannot open (truncated or not an HDF5 file)");
    ok = 0;
  }
  if (ckpt_agree(team, ok, err.msg, why)) return 0;
  if (*f >= 0) H5Fclose(*f);
  return -1;
}

/* The root attributes through the schema: a boost checkpoint of a version
 * this build reads, with what a resume needs, and with optimizer state. */
static void read_root_attrs(reader *r, const char *path) {
  const ckpt_reader *rd = r->rd;
  load_result *lr = r->lr;
  ckpt_meta_free(&lr->meta);
  boost_status why = {0};
  const char *missing = NULL;
  if (ckpt_meta_read(r->f, &lr->meta, &why) != 0) {
    boost_err(&r->err, "%s", why.msg);
    r->ok = 0;
  } else if ((missing = ckpt_meta_missing(&lr->meta, CKPT_META_RESUME))) {
    boost_err(&r->err, "training state attribute %s missing or unreadable", missing);
    r->ok = 0;
  } else if (ckpt_check_file_step(path, lr->meta.run.step, &why) != 0) {
    boost_err(&r->err, "%s", why.msg);
    r->ok = 0;
  } else if (!strcmp(ckpt_meta_str(&lr->meta, CKPT_META_F_optimizer_state), "absent")) {
    boost_err(&r->err,
               "has no optimizer state (an export written by boost-reshard --no-optimizer): training cannot resume "
               "from it");
    r->ok = 0;
  }
  if (r->ok && lr->meta.run.data_seed != rd->parts.cfg->data_seed && rd->parts.team->rank == 0)
    boost_log_warn("warning: %s was saved with data.seed=%lld, this run uses %lld: the sample order will not "
                   "continue the saved run",
            path, (long long)lr->meta.run.data_seed, (long long)rd->parts.cfg->data_seed);
}

/* The groups' object headers, whole: a damaged header is a damaged file
 * even where the tensors still read (boost-inspect verify agrees). */
static void check_group_headers(reader *r) {
  static const char *groups[] = {"/", CKPT_GROUP_MODEL, "/optim", CKPT_GROUP_ADAM_M, CKPT_GROUP_ADAM_V, CKPT_GROUP_STATE};
  for (size_t i = 0; r->ok && i < sizeof groups / sizeof *groups; i++) {
    H5O_info_t info;
    if (H5Oget_info_by_name2(r->f, groups[i], &info, H5O_INFO_ALL, H5P_DEFAULT) < 0) {
      char what[64];
      boost_msgf(what, sizeof what, "group %s: object header unreadable", groups[i]);
      ckpt_h5_fail(&r->err, what);
      r->ok = 0;
    }
  }
}

static int check_shape(reader *r, hid_t space, const ckpt_entry *e, const char *dpath) {
  hsize_t dims[TENSOR_MAX_DIMS + 1];
  const int nd = H5Sget_simple_extent_ndims(space);
  int same = nd == e->ndim && nd <= TENSOR_MAX_DIMS;
  if (same) H5Sget_simple_extent_dims(space, dims, NULL);
  for (int k = 0; same && k < nd; k++) same = (int64_t)dims[k] == e->shape[k];
  if (same) return 1;
  char want[96] = "";
  for (int k = 0; k < e->ndim; k++)
    boost_msgf(want + strlen(want), sizeof want - strlen(want), "%s%lld", k ? "x" : "", (long long)e->shape[k]);
  boost_err(&r->err, "tensor %s: stored shape differs from %s (damaged file?)", dpath, want);
  r->ok = 0;
  return 0;
}

/* This replica's band of tensor i, category c, where ckpt_load_dst puts it;
 * hashed by the rank that would write it. */
static void read_band(reader *r, hid_t d, hid_t space, int i, int c, const char *dpath) {
  const ckpt_reader *rd = r->rd;
  const ckpt_entry *e = &rd->parts.plan->ents[i];
  const tensor_desc *t = &rd->parts.st->reg->tensors[e->local];
  int64_t start[TENSOR_MAX_DIMS], count[TENSOR_MAX_DIMS];
  ckpt_band_slab(t, e->r0[c], e->r1[c], start, count);
  hsize_t st[TENSOR_MAX_DIMS], ct[TENSOR_MAX_DIMS];
  for (int k = 0; k < t->ndim; k++) st[k] = (hsize_t)start[k], ct[k] = (hsize_t)count[k];
  float *dst = ckpt_load_dst(rd->parts.st, r->cr, i, c, &r->err);
  if (!dst) {
    r->ok = 0;
    return;
  }
  const int hashes = e->writer_stage == rd->parts.plan->pp_rank && e->primary;
  char what[TENSOR_NAME_MAX + 64];
  boost_msgf(what, sizeof what, "tensor %s", dpath);
  /* decoded while the next tensors are opened and read; the sum lands when it is */
  const int direct = ckpt_read_slab_chunks_async(r->cr, d, t->ndim, t->shape, st, ct, dst,
                                                 hashes ? &r->sums[(size_t)i * CKPT_NUM_CATEGORIES + c] : NULL, what,
                                                 &r->err);
  if (direct < 0) {
    r->ok = 0;
  } else if (direct == 0) { /* another pipeline: through HDF5's filters */
    hid_t mem = H5Screate_simple(t->ndim, ct, NULL);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, st, NULL, ct, NULL);
    if (H5Dread(d, H5T_NATIVE_FLOAT, mem, space, r->dxpl, dst) < 0) {
      boost_msgf(what, sizeof what, "tensor %s: read failed (corrupt data?)", dpath);
      ckpt_h5_fail(&r->err, what);
      r->ok = 0;
    } else if (hashes) {
      r->sums[(size_t)i * CKPT_NUM_CATEGORIES + c] = ckpt_hash_slab32(dst, t->ndim, t->shape, start, count);
    }
    H5Sclose(mem);
  }
  r->needed += 4.0 * (double)(e->r1[c] - e->r0[c]) * (double)ckpt_row_floats(t);
  r->decoded += chunk_bytes(d, t->ndim, start, count);
}

/* Every rank opens every dataset (shape, stored checksum); each replica
 * reads its band of its hyperslab (independent I/O). */
static void read_tensor(reader *r, int i, int c) {
  const ckpt_entry *e = &r->rd->parts.plan->ents[i];
  char dpath[TENSOR_NAME_MAX + 32];
  boost_msgf(dpath, sizeof dpath, "%s/%s", ckpt_category_group[c], e->name);
  const int exists = path_exists(r->f, dpath);
  if (exists <= 0) {
    if (exists < 0) ckpt_h5_fail(&r->err, dpath);
    else boost_err(&r->err, "tensor %s is missing (damaged file?)", dpath);
    r->ok = 0;
    return;
  }
  hid_t d = H5Dopen2(r->f, dpath, H5P_DEFAULT);
  hid_t space = d >= 0 ? H5Dget_space(d) : -1;
  H5O_info_t info; /* the whole object header, as boost-inspect verify reads it */
  if (d < 0 || space < 0 || H5Oget_info2(d, &info, H5O_INFO_ALL) < 0) {
    ckpt_h5_fail(&r->err, dpath);
    r->ok = 0;
  } else if (check_shape(r, space, e, dpath)) {
    if (ckpt_attr_get_u64(d, CKPT_ATTR_CHECKSUM, &r->stored[(size_t)i * CKPT_NUM_CATEGORIES + c]) < 0) {
      ckpt_h5_fail(&r->err, dpath);
      boost_status_append(&r->err, " (checksum attribute)");
      r->ok = 0;
    } else if (e->local >= 0 && e->r1[c] > e->r0[c]) {
      read_band(r, d, space, i, c, dpath);
    }
  }
  if (space >= 0) H5Sclose(space);
  if (d >= 0) H5Dclose(d);
  ckpt_test_delay();
}

/* The state datasets (ckpt_meta.h CKPT_STATE_SETS): everyone reads them
 * (small), rank 0's hash counts. */
static void read_state(reader *r) {
  const size_t base = r->nsum - CKPT_STATE_NSETS;
  for (int k = 0; k < CKPT_STATE_NSETS && r->ok; k++) {
    uint64_t sum = 0;
    if (ckpt_state_read(r->f, r->dxpl, k, &r->lr->state.set[k], &r->stored[base + k], &sum, &r->err))
      r->ok = 0;
    if (r->rd->parts.team->rank == 0) r->sums[base + k] = sum;
  }
}

/* Stored activations are not needed to resume, so damage there does not
 * make the file unusable; but it is damage, and boost-inspect verify reports
 * it, so the loader says so too (rank 0 decodes the group and checks every
 * checksum; the activations are a small sample next to the weights). */
static void check_stored_acts(reader *r, const char *path) {
  if (r->rd->parts.team->rank != 0 || H5Lexists(r->f, CKPT_GROUP_ACTS, H5P_DEFAULT) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return;
  }
  boost_status what = {0};
  if (ckpt_check_group(r->f, CKPT_GROUP_ACTS, &what) != 0)
    boost_log_warn("warning: %s: stored activations damaged (%s); training does not use them, so it resumes from "
                   "this file",
            path, what.msg);
}

/* Every element was hashed by exactly one rank: the sums over ranks are the
 * layout-independent checksums. Returns 1, or 0 naming the first mismatch. */
static int verify_checksums(reader *r, boost_status *why) {
  const ckpt_file_plan *p = r->rd->parts.plan;
  comm_control(r->rd->parts.team->comm, COMM_WORLD, "checkpoint checksums", r->sums, (int)r->nsum, MPI_UINT64_T, MPI_SUM);
  const size_t ntensor = (size_t)p->nent * CKPT_NUM_CATEGORIES;
  for (size_t k = 0; k < r->nsum; k++) {
    if (r->sums[k] == r->stored[k]) continue;
    const char *nm = k < ntensor ? p->ents[k / CKPT_NUM_CATEGORIES].name : ckpt_state_sets[k - ntensor].name;
    const char *grp = k < ntensor ? ckpt_category_group[k % CKPT_NUM_CATEGORIES] : CKPT_GROUP_STATE;
    boost_err(why, "tensor %s/%s: checksum mismatch (stored %016llx, computed %016llx)", grp, nm,
               (unsigned long long)r->stored[k], (unsigned long long)r->sums[k]);
    return 0;
  }
  return 1;
}

/* Reads one candidate (into the arenas, or host staging) and verifies it. Returns 1
 * ok, 0 unusable (reason in why). Collective. */
static int try_load(ckpt_reader *rd, const char *path, boost_status *why) {
  load_result *lr = &rd->res;
  const ckpt_team *team = rd->parts.team;
  reader r = {.rd = rd, .lr = lr, .ok = 1};
  if (open_file(team, path, &r.f, why) != 0) return 0;
  read_root_attrs(&r, path);
  if (r.ok) check_group_headers(&r);
  if (!ckpt_agree(team, r.ok, r.err.msg, why)) {
    H5Fclose(r.f);
    return 0;
  }
  r.nsum = (size_t)rd->parts.plan->nent * CKPT_NUM_CATEGORIES + CKPT_STATE_NSETS;
  r.stored = boost_calloc(r.nsum, sizeof *r.stored);
  r.sums = boost_calloc(r.nsum, sizeof *r.sums);
  r.dxpl = H5Pcreate(H5P_DATASET_XFER);
  r.cr = ckpt_chunk_reader_new(ckpt_worker_threads(rd->parts.pace));
  ckpt_load_begin(rd->parts.st);
  for (int i = 0; i < rd->parts.plan->nent && r.ok; i++)
    for (int c = 0; c < CKPT_NUM_CATEGORIES && r.ok; c++) read_tensor(&r, i, c);
  if (r.ok && ckpt_load_flush(rd->parts.st, r.cr, &r.err) != 0) r.ok = 0; /* the last bands decoded (and uploaded) */
  ckpt_chunk_reader_free(r.cr);
  ckpt_state_free(&lr->state);
  if (r.ok) read_state(&r);
  if (r.ok) check_stored_acts(&r, path);
  H5Pclose(r.dxpl);
  if (H5Fclose(r.f) < 0 && r.ok) {
    ckpt_h5_fail(&r.err, "H5Fclose");
    r.ok = 0;
  }
  int rc = ckpt_agree(team, r.ok, r.err.msg, why) && verify_checksums(&r, why);
  boost_free(r.stored);
  boost_free(r.sums);
  double io[2] = {r.needed, r.decoded};
  comm_control(team->comm, COMM_WORLD, "checkpoint agreement", io, 2, MPI_DOUBLE, MPI_SUM);
  lr->bytes_needed = io[0];
  lr->bytes_decoded = io[1];
  return rc;
}

/* Candidates newest first (rank 0 lists; everyone gets the same list). */
static int list_candidates(const ckpt_team *team, const char *dir, int64_t **steps) {
  int n = 0;
  *steps = NULL;
  boost_status err = {0};
  if (team->rank == 0 && ckpt_fs_list(dir, steps, &n, &err) != 0) n = 0;
  comm_control_bcast(team->comm, COMM_WORLD, "checkpoint agreement", &n, (int)sizeof n, 0);
  if (team->rank != 0) *steps = n ? boost_calloc((size_t)n, sizeof **steps) : NULL;
  if (n) comm_control_bcast(team->comm, COMM_WORLD, "checkpoint agreement", *steps, n * (int)sizeof **steps, 0);
  return n;
}

void ckpt_load_report(ckpt_reader *rd) {
  load_result *lr = &rd->res;
  const double bytes = ckpt_file_plan_raw_bytes(rd->parts.plan);
  char b[32], nb[32], db[32];
  ckpt_format_bytes(bytes, b, sizeof b);
  ckpt_format_bytes(lr->bytes_needed, nb, sizeof nb);
  ckpt_format_bytes(lr->bytes_decoded, db, sizeof db);
  boost_msgf(lr->reason.msg, sizeof lr->reason.msg,
             "resumed from %s (step %lld, %s of tensors verified and loaded in %.2f s; the ranks read %s, decoding "
             "%s of chunks: %.2fx)%s%s",
             lr->path, (long long)lr->meta.run.step, b, boost_now_s() - lr->t0, nb, db,
             lr->bytes_needed > 0 ? lr->bytes_decoded / lr->bytes_needed : 1.0, lr->skipped[0] ? "; skipped " : "",
             lr->skipped);
}

void ckpt_do_load(ckpt_reader *rd) {
  load_result *lr = &rd->res;
  const ckpt_settings *cfg = rd->parts.cfg;
  lr->t0 = boost_now_s();
  char dir[PATH_MAX], single[PATH_MAX] = "";
  boost_msgf(dir, sizeof dir, "%s", cfg->dir);
  if (cfg->resume.kind == CKPT_FROM_PATH) {
    const char *resume = cfg->resume.path;
    struct stat st;
    if (stat(resume, &st) == 0 && S_ISDIR(st.st_mode)) boost_msgf(dir, sizeof dir, "%s", resume);
    else boost_msgf(single, sizeof single, "%s", resume);
  }
  int64_t *steps = NULL;
  const int n = single[0] ? 1 : list_candidates(rd->parts.team, dir, &steps);
  char *skipped = lr->skipped, *path = lr->path;
  boost_status why = {0};
  const size_t pathlen = sizeof lr->path, skippedlen = sizeof lr->skipped;
  skipped[0] = 0;
  lr->status = 0;
  lr->reason = (boost_status){0};
  for (int k = 0; k < n && lr->status == 0; k++) {
    char name[64];
    ckpt_file_name(name, sizeof name, single[0] ? 0 : steps[k]);
    boost_msgf(path, pathlen, "%s", single[0] ? single : dir);
    if (!single[0]) boost_msgf(path + strlen(path), pathlen - strlen(path), "/%s", name);
    why = (boost_status){0};
    if (try_load(rd, path, &why)) {
      lr->status = 1; /* ckpt_load_report says so once the arenas hold it */
      break;
    }
    if (rd->parts.team->rank == 0 && !single[0] && k + 1 < n) {
      boost_log_warn("checkpoint %s is unusable: %s; trying the previous one", path, why.msg);
    }
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const size_t used = strlen(skipped);
    boost_msgf(skipped + used, skippedlen - used, "%s%s (%.200s)", used ? ", " : "", base, why.msg);
  }
  if (lr->status == 0 && single[0]) {
    lr->status = -1;
    boost_err(&lr->reason, "cannot resume from %s: %s", single, why.msg);
  } else if (lr->status == 0 && n > 0) { /* never a silent fresh start over checkpoints that exist */
    lr->status = -1;
    boost_err(&lr->reason,
              "no usable checkpoint in %s: %s. Fix or move them, or set ckpt.resume=none to start over (the files "
              "are kept)",
              dir, skipped);
  } else if (lr->status == 0) {
    boost_msgf(lr->reason.msg, sizeof lr->reason.msg, "fresh start (no checkpoint in %s)", dir);
  }
  ckpt_load_end(rd->parts.st);
  free(steps);
}

void ckpt_reader_free(ckpt_reader *rd) {
  ckpt_state_free(&rd->res.state);
  ckpt_meta_free(&rd->res.meta);
}
