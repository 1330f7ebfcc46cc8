/* boost-reshard: rewrites a checkpoint for a target parallel layout, offline.
 *
 *   boost-reshard IN OUT --layout dp=D,tp=T,pp=P[,mode=M] [--no-optimizer] [--bf16] [--quiet]
 *   boost-reshard IN --plan --layout ... [--json]
 *
 * The tensors of a checkpoint are global logical tensors, so any layout can
 * load any checkpoint as it is; what a layout changes is how well the
 * file's chunks line up with the hyperslabs each rank reads. The rewrite
 * chunks every tensor along the target's tensor-parallel shards (a chunk
 * never straddles two ranks' shards), so each rank decodes only what it
 * needs. Values and checksums do not change: the result is verified --
 * every dataset decoded and its checksum recomputed -- before it is renamed
 * into place. --no-optimizer drops the AdamW moments for export (recorded
 * in the file; training cannot resume from it); --bf16 also stores the
 * weights as bfloat16 (rounded to nearest even; their checksums are
 * recomputed over the rounded values as a float32 reader sees them, so every
 * reader verifies them as before). --plan only prints, for
 * each target tensor-parallel rank and pipeline stage, what it reads of IN
 * and the read amplification (bytes of chunks touched / bytes needed).
 *
 * Under mpirun (N ranks) the rewrite is parallel: every tensor is split
 * into N bands of whole chunk rows, each rank reads, checks and compresses
 * its band and writes it collectively (MPI-IO), so time and memory per rank
 * fall with N; the training state and activations are then copied by rank
 * 0 and every rank verifies a share of the tensors. The file is the same
 * as the serial one's, value for value.
 *
 * Exit status: 0 ok, 1 bad input or checkpoint, 2 usage. */
#include <errno.h>
#include <hdf5.h>
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blas_select.h"
#include "check.h"
#include "ckpt_fs.h"
#include "ckpt_h5.h"
#include "ckpt_hash.h"
#include "ckpt_peek.h"
#include "ckpt_slab.h"
#include "config.h"
#include "h5z_zstd.h"
#include "model.h"
#include "reshard.h"
#include "reshard_rank.h"
#include "reshard_rewrite.h"
#include "resume_plan.h"
#include "tool.h"
#include "util.h"
#include "log.h"


/* Chunk dims of a tensor aligned to its shards: the default rule applied to
 * one shard's shape, with every extent a divisor of the shard's. */
void reshard_aligned_chunk(const tensor_desc *t, int ndim, const int64_t *shape, hsize_t *chunk) {
  int64_t local[TENSOR_MAX_DIMS] = {0};
  for (int d = 0; d < ndim; d++) local[d] = t ? t->local_shape[d] : shape[d];
  ckpt_chunk_dims(ndim, local, chunk);
  for (int d = 0; d < ndim; d++)
    while (local[d] % (int64_t)chunk[d]) chunk[d]--;
}

/* A bar redrawn in place on a terminal; in a batch log (not a TTY) one line
 * per tenth of the tensors, once the run has taken 5 s (short runs stay
 * quiet). */
void reshard_progress(const options *o, size_t done, size_t total, const char *what) {
  if (o->quiet || o->rank != 0) return;
  const int pct = total ? (int)(100 * done / total) : 100;
  if (!isatty(STDERR_FILENO)) {
    static double t0;
    static int last_tenth;
    if (t0 == 0) t0 = boost_now_s();
    const double el = boost_now_s() - t0;
    if (pct / 10 > last_tenth && el >= 5) {
      fprintf(stderr, "boost-reshard: %3d%% (%zu/%zu tensors, %.0f s)\n", pct, done, total, el);
      last_tenth = pct / 10;
    }
    return;
  }
  const int w = 30, k = total ? (int)(w * done / total) : w;
  fprintf(stderr, "\r[%.*s%*s] %3d%% %-40.40s", k, "==============================", w - k, "", pct, what);
  if (done == total) fprintf(stderr, "\n");
}

/* ---- the rewrite ------------------------------------------------------------- */


/* Space for OUT, reserved on rank 0 right after it is created, so that a
 * full disk fails here with a message (every rank agreeing) and not inside
 * HDF5's writes, which crash or, under MPI-IO, hang the other ranks. */
int reshard_reserve_out(rewrite *r, const char *tmp) {
  if (r->o->rank != 0 || r->reserve_bytes == 0) return 0;
  boost_status why = {0};
  if (ckpt_fs_reserve(tmp, r->reserve_bytes, &why) >= 0) return 0;
  boost_err(&r->err, "%s (OUT %s)", why.msg, r->o->out);
  return -1;
}

/* What OUT will hold, with a margin: IN's size (a third of it without the
 * two AdamW moments, a sixth with bf16 weights too) plus an eighth and
 * 256 KiB, since chunks aligned to smaller shards compress a little worse and
 * index more chunks (+2-3% seen on the tiny model). */
static uint64_t expected_out_bytes(const options *o, const char *in_path) {
  struct stat st;
  if (stat(in_path, &st) != 0) return 0;
  const uint64_t in = (uint64_t)st.st_size, part = o->bf16 ? in / 6 : o->no_optim ? in / 3 : in;
  return part + part / 8 + (256u << 10);
}

/* An attribute of IN the schema does not know (a newer boost's), copied as
 * it is; the schema's own go through ckpt_meta (write_root). */
static herr_t copy_unknown_attr(hid_t loc, const char *name, const H5A_info_t *info, void *op) {
  (void)info;
  if (ckpt_meta_field_index(name) >= 0) return 0;
  hid_t dst = *(hid_t *)op;
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT), type = H5Aget_type(a), space = H5Aget_space(a);
  const size_t n = H5Tget_size(type) * (size_t)H5Sget_simple_extent_npoints(space);
  void *buf = calloc(n ? n : 1, 1);
  herr_t rc = -1;
  if (buf && H5Aread(a, type, buf) >= 0 && !(H5Aexists(dst, name) > 0 && H5Adelete(dst, name) < 0)) {
    hid_t b = H5Acreate2(dst, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    rc = b >= 0 && H5Awrite(b, type, buf) >= 0 ? 0 : -1;
    if (b >= 0) H5Aclose(b);
  }
  if (H5Tis_variable_str(type) > 0) H5Dvlen_reclaim(type, space, H5P_DEFAULT, buf);
  free(buf);
  H5Sclose(space);
  H5Tclose(type);
  H5Aclose(a);
  return rc;
}

/* The group of a tensor's path: "/optim/adam_m/x" -> "/optim/adam_m". */
static const char *path_group(const char *path) {
  static const char *const groups[] = {CKPT_GROUP_ADAM_M, CKPT_GROUP_ADAM_V, CKPT_GROUP_MODEL};
  for (int i = 0; i < 3; i++)
    if (!strncmp(path, groups[i], strlen(groups[i])) && path[strlen(groups[i])] == '/') return groups[i];
  return "";
}

/* One tensor dataset, read whole as float32 and written with aligned chunks,
 * as float32 or (bf16) rounded to bfloat16 with its checksum recomputed. */
static int copy_tensor(rewrite *r, const char *path, const char *name, int bf16) {
  hid_t d = H5Dopen2(r->in, path, H5P_DEFAULT), space = d >= 0 ? H5Dget_space(d) : -1;
  int ndim = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
  if (ndim < 1 || ndim > TENSOR_MAX_DIMS) {
    ckpt_h5_fail(&r->err, path);
    return -1;
  }
  hsize_t dims[TENSOR_MAX_DIMS], chunk[TENSOR_MAX_DIMS];
  int64_t shape[TENSOR_MAX_DIMS];
  H5Sget_simple_extent_dims(space, dims, NULL);
  size_t n = 1;
  for (int k = 0; k < ndim; k++) n *= (size_t)dims[k];
  float *buf = malloc((n ? n : 1) * sizeof *buf);
  uint64_t sum = 0, got = 0;
  int ok = buf && ckpt_attr_get_u64(d, CKPT_ATTR_CHECKSUM, &sum) == 0;
  if (!ok) ckpt_h5_fail(&r->err, path);
  else ok = ckpt_slab_read(r->sr, d, NULL, NULL, buf, &got, path, &r->err) == 0;
  if (ok && got != sum) {
    boost_err(&r->err, "%s: checksum mismatch in IN (damaged checkpoint)", path);
    ok = 0;
  }
  /* --rank: the tensor in its new shape, and a checksum of what OUT holds */
  const size_t n_in = n;
  if (ok && reshard_rank_tensor(r->ranks, path_group(path), name, &buf, &n, ndim, dims, &r->err) != 0) ok = 0;
  if (ok && n != n_in) {
    sum = ckpt_hash_run32(buf, n, 0);
    H5Sclose(space);
    space = H5Screate_simple(ndim, dims, NULL);
  }
  for (int k = 0; k < ndim; k++) shape[k] = (int64_t)dims[k];
  const int idx = registry_find(&r->m->reg, name);
  reshard_aligned_chunk(idx >= 0 ? &r->m->reg.tensors[idx] : NULL, ndim, shape, chunk);
  if (ok && bf16) {
    ckpt_round_bf16(buf, n);
    sum = ckpt_hash_run32(buf, n, 0);
  }
  if (ok) {
    hid_t ftype = bf16 ? ckpt_bf16_type() : H5Tcopy(H5T_IEEE_F32LE);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t o = -1;
    ok = h5z_zstd_set_dcpl(dcpl, ndim, chunk, r->level) >= 0 &&
         (o = H5Dcreate2(r->out, path, ftype, space, lcpl, dcpl, H5P_DEFAULT)) >= 0 &&
         H5Dwrite(o, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0 &&
         ckpt_attr_put_u64(o, CKPT_ATTR_CHECKSUM, sum) == 0;
    if (!ok) ckpt_h5_fail(&r->err, path);
    if (o >= 0) H5Dclose(o);
    H5Pclose(lcpl);
    H5Pclose(dcpl);
    if (ftype >= 0) H5Tclose(ftype);
  }
  free(buf);
  H5Sclose(space);
  H5Dclose(d);
  reshard_progress(r->o, ++r->done, r->total, name);
  return ok ? 0 : -1;
}

static int copy_group_tensors(rewrite *r, const char *group, int bf16) {
  hid_t g = H5Gopen2(r->in, group, H5P_DEFAULT);
  H5G_info_t info;
  if (g < 0 || H5Gget_info(g, &info) < 0) {
    ckpt_h5_fail(&r->err, group);
    return -1;
  }
  int rc = 0;
  for (hsize_t i = 0; rc == 0 && i < info.nlinks; i++) {
    char name[TENSOR_NAME_MAX], path[TENSOR_NAME_MAX + 32];
    if (H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT) < 0) {
      ckpt_h5_fail(&r->err, group);
      rc = -1;
      break;
    }
    snprintf(path, sizeof path, "%s/%s", group, name);
    rc = copy_tensor(r, path, name, bf16);
  }
  H5Gclose(g);
  return rc;
}

/* OUT's root attributes: IN's, through the schema (and those it does not
 * know, as they are), with the target layout, where the file came from and
 * what it holds. Under mpirun every rank writes the same (collective). */
int reshard_write_root(rewrite *r, tp_mode mode) {
  const options *o = r->o;
  ckpt_meta m;
  boost_status why = {0};
  int ok = ckpt_meta_read(r->in, &m, &why) == 0 && m.run.layout; /* ckpt_peek checked both */
  ok = ok && H5Aiterate2(r->in, H5_INDEX_NAME, H5_ITER_INC, NULL, copy_unknown_attr, &r->out) >= 0;
  ckpt_layout lay = {o->dp * o->tp * o->pp, o->dp, o->tp, o->pp, 0, ""};
  snprintf(lay.tp_mode, sizeof lay.tp_mode, "%s", tp_mode_names[mode]);
  char *target = ckpt_layout_json(&lay);
  ok = ok && target && ckpt_meta_set_str(&m, CKPT_META_F_resharded_from, m.run.layout) == 0 &&
       ckpt_meta_set_str(&m, CKPT_META_F_layout, target) == 0 &&
       ckpt_meta_set_str(&m, CKPT_META_F_optimizer_state, o->no_optim ? "absent" : "present") == 0 &&
       ckpt_meta_set_str(&m, CKPT_META_F_weights_dtype, o->bf16 ? "bf16" : "f32") == 0 &&
       (!r->config || ckpt_meta_set_str(&m, CKPT_META_F_config, r->config) == 0);
  /* The global batch is the run's, not the layout's: kept as it is, and
   * recorded from the layout that ran IN's config when IN is older. */
  if (ok && !ckpt_meta_has(&m, CKPT_META_F_global_batch) && r->global_batch > 0)
    CKPT_META_SET(&m, run, global_batch, r->global_batch);
  if (!ok) ckpt_h5_fail(&r->err, "root attributes");
  else if (ckpt_meta_write(r->out, &m, &r->err) != 0) ok = 0;
  free(target);
  ckpt_meta_free(&m);
  return ok ? 0 : -1;
}

/* Root attributes (the target layout, where the file came from, what it
 * holds), the training state and activations as they are, the tensors
 * re-chunked. */
static int write_out(rewrite *r, const char *tmp, tp_mode mode) {
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);
  r->out = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  H5Pclose(fapl);
  if (r->out < 0) {
    ckpt_h5_fail(&r->err, "cannot create the temporary OUT");
    return -1;
  }
  if (reshard_reserve_out(r, tmp) != 0) {
    H5Fclose(r->out);
    return -1;
  }
  int rc = reshard_write_root(r, mode);
  if (rc == 0) rc = copy_group_tensors(r, CKPT_GROUP_MODEL, r->o->bf16);
  if (rc == 0 && !r->o->no_optim) rc = copy_group_tensors(r, CKPT_GROUP_ADAM_M, 0);
  if (rc == 0 && !r->o->no_optim) rc = copy_group_tensors(r, CKPT_GROUP_ADAM_V, 0);
  for (const char *g = CKPT_GROUP_STATE; rc == 0 && g; g = strcmp(g, CKPT_GROUP_STATE) ? NULL : CKPT_GROUP_ACTS)
    if (r->ranks && !strcmp(g, CKPT_GROUP_ACTS)) rc = reshard_rank_copy_acts(r->in, r->out, &r->err);
    else if (H5Lexists(r->in, g, H5P_DEFAULT) > 0 && H5Ocopy(r->in, g, r->out, g, H5P_DEFAULT, H5P_DEFAULT) < 0) {
      ckpt_h5_fail(&r->err, g);
      rc = -1;
    }
  if (H5Fclose(r->out) < 0 && rc == 0) {
    ckpt_h5_fail(&r->err, "closing OUT");
    rc = -1;
  }
  return rc;
}

/* Every tensor of OUT decoded and checked against its checksum (under
 * mpirun each rank checks every nranks-th tensor). */
static int verify_out(const char *path, const options *o, ckpt_slab_reader *sr, boost_status *err) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    ckpt_h5_fail(err, "re-opening OUT");
    return -1;
  }
  int rc = 0;
  const char *groups[] = {CKPT_GROUP_MODEL, CKPT_GROUP_ADAM_M, CKPT_GROUP_ADAM_V};
  for (int k = 0; rc == 0 && k < 3; k++) {
    if (H5Lexists(f, groups[k] + 1, H5P_DEFAULT) <= 0 && k > 0) continue;
    hid_t g = H5Gopen2(f, groups[k], H5P_DEFAULT);
    H5G_info_t info;
    if (g < 0 || H5Gget_info(g, &info) < 0) rc = boost_err(err, "OUT: group %s unreadable", groups[k]);
    for (hsize_t i = 0; rc == 0 && i < info.nlinks; i++) {
      if ((int)(i % (hsize_t)o->nranks) != o->rank) continue;
      char name[TENSOR_NAME_MAX];
      H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT);
      hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
      uint64_t sum = 0, got = 0;
      boost_status why = {0};
      if (d < 0 || ckpt_slab_read(sr, d, NULL, NULL, NULL, &got, name, &why) != 0 ||
          ckpt_attr_get_u64(d, CKPT_ATTR_CHECKSUM, &sum) != 0 || got != sum)
        rc = boost_err(err, "OUT: %s/%s does not verify", groups[k], name);
      if (d >= 0) H5Dclose(d);
    }
    if (g >= 0) H5Gclose(g);
  }
  /* The training state and activations were copied as they are: damage in
   * IN there would be damage in OUT. */
  boost_status why = {0};
  for (const char *g = CKPT_GROUP_STATE; rc == 0 && o->rank == 0 && g; g = strcmp(g, CKPT_GROUP_STATE) ? NULL : CKPT_GROUP_ACTS)
    if (H5Lexists(f, g, H5P_DEFAULT) > 0 && ckpt_check_group(f, g, &why) != 0)
      rc = boost_err(err, "%s (copied from IN as it is: IN is damaged there)", why.msg);
  H5Fclose(f);
  return rc;
}

/* ---- main ---------------------------------------------------------------------- */

static int run(const options *o_in, boost_status *err) {
  const options *o = o_in;
  ckpt_peek_info info;
  ckpt_from from = {CKPT_FROM_PATH, ""};
  boost_msgf(from.path, sizeof from.path, "%s", o->in);
  const int found = ckpt_peek("", &from, &info, err) == 1;
  if (!found && !err->failed) boost_err(err, "%s: no committed checkpoint there", o->in);
  if (o->nranks > 1 ? !tool_agree(o->nranks, found, err) : !found) {
    if (found) ckpt_peek_free(&info);
    return -1;
  }
  train_config cfg;
  config_defaults(&cfg);
  int rc = config_from_json(&cfg, info.meta.run.config, NULL, err);
  hid_t in = rc == 0 ? H5Fopen(info.path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
  if (rc == 0 && in < 0) rc = boost_err(err, "%s: cannot open", info.path);
  options eff = *o; /* a checkpoint without moments stays without them */
  if (!strcmp(ckpt_meta_str(&info.meta, CKPT_META_F_optimizer_state), "absent")) eff.no_optim = 1;
  /* and bf16 weights stay bf16: float32 would only pretend to more precision */
  if (!strcmp(ckpt_meta_str(&info.meta, CKPT_META_F_weights_dtype), "bf16")) eff.bf16 = eff.no_optim = 1;
  /* --rank without --layout keeps IN's layout */
  ckpt_layout lay;
  if (!o->have_layout && ckpt_layout_parse(info.meta.run.layout, &lay) == 0) {
    eff.dp = lay.dp, eff.tp = lay.tp, eff.pp = lay.pp;
    eff.mode = !strcmp(lay.tp_mode, "vanilla") ? TP_VANILLA : !strcmp(lay.tp_mode, "megatron") ? TP_MEGATRON
             : !strcmp(lay.tp_mode, "btp") ? TP_BTP : TP_AUTO;
  }
  o = &eff;
  train_config cfg_in = cfg; /* IN's own, when --rank makes cfg OUT's */
  rank_change *ranks = NULL;
  char *out_config = NULL;
  if (rc == 0 && (o->rank_attn || o->rank_mlp)) {
    if (reshard_rank_plan(in, &cfg_in, o, &cfg, &ranks, err) != 0) rc = -1;
    else out_config = config_to_json(&cfg);
  }
  if (rc == 0 && o->plan) rc = reshard_plan(in, &cfg, o, err);
  if (o->nranks > 1 && !tool_agree(o->nranks, rc == 0, err)) rc = -1;
  if (rc == 0 && !o->plan) {
    const char *inputs[] = {info.path, o->in};
    boost_status out_err = {0};
    if (o->rank == 0 && boost_check_output(o->out, inputs, 2, &out_err) != 0) rc = boost_err(err, "%s", out_err.msg);
    if (o->nranks > 1 && !tool_agree(o->nranks, rc == 0, err)) rc = -1;
  }
  if (rc == 0 && !o->plan) {
    model m;
    tp_mode mode;
    rc = reshard_target_registry(&cfg, o, &m, &mode, err);
    if (rc == 0) {
      char tmp[PATH_MAX + 8];
      snprintf(tmp, sizeof tmp, "%s.tmp", o->out);
      rewrite r = {.in = in, .m = &m, .o = o, .level = cfg.ckpt.level, .reserve_bytes = expected_out_bytes(o, info.path),
                   .global_batch = resume_global_batch(&info.meta, &cfg_in), .ranks = ranks, .config = out_config,
                   .sr = ckpt_slab_reader_new(tool_threads_per_rank(o->nranks))};
      r.total = (size_t)m.reg.count * (o->no_optim ? 1 : 3);
      if (o->rank == 0) tool_tmp_arm(tmp);
      if (!r.sr) rc = boost_err(&r.err, "out of memory (the chunk reader)");
      if (o->nranks > 1 && !tool_agree(o->nranks, rc == 0, &r.err)) rc = -1;
      if (rc == 0) rc = o->nranks > 1 ? reshard_write_out_parallel(&r, tmp, mode) : write_out(&r, tmp, mode);
      if (rc != 0) boost_err(err, "%s", r.err.msg);
      if (rc == 0 && ranks) rc = reshard_rank_finish(ranks, info.path, tmp, o, err);
      if (rc == 0) rc = verify_out(tmp, o, r.sr, err);
      ckpt_slab_reader_free(r.sr);
      if (o->nranks > 1 && !tool_agree(o->nranks, rc == 0, err)) rc = -1;
      if (rc == 0 && o->rank == 0) ckpt_fs_trim(tmp); /* the reservation's blocks past the end */
      if (rc == 0 && o->rank == 0 && (boost_fsync_path(tmp) != 0 || rename(tmp, o->out) != 0))
        rc = boost_err(err, "cannot commit %s: %s", o->out, strerror(errno));
      if (rc == 0 && o->rank == 0) boost_fsync_parent(o->out);
      if (o->nranks > 1 && !tool_agree(o->nranks, rc == 0, err)) rc = -1;
      if (rc != 0 && o->rank == 0) unlink(tmp);
      tool_tmp_disarm();
      if (rc == 0 && !o->quiet && o->rank == 0)
        printf("wrote %s: step %lld for dp=%d tp=%d pp=%d (%s)%s, every tensor verified%s\n", o->out,
               (long long)info.meta.run.step, o->dp, o->tp, o->pp, tp_mode_names[mode],
               o->bf16 ? ", bf16 weights, no optimizer state" : o->no_optim ? ", no optimizer state" : "",
               o->nranks > 1 ? " (parallel rewrite)" : "");
      model_free(&m);
    }
  }
  if (in >= 0) H5Fclose(in);
  ckpt_peek_free(&info);
  reshard_rank_free(ranks);
  free(out_config);
  return rc;
}

int main(int argc, char **argv) {
  boost_log_program("boost-reshard"); /* first: every warning of the process carries this name */
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return reshard_usage(stdout, 0);
  options o;
  boost_status err = {0};
  int rank, nranks;
  const int mpi = tool_mpi_start(&argc, &argv, &rank, &nranks);
  if (tool_remote_args("boost-reshard", argc, argv)) return 1; /* s3:// checkpoints */
  int rc = reshard_parse_args(argc, argv, &o, &err) != 0 ? 2 : 0;
  o.rank = rank, o.nranks = nranks;
  if (rc == 0 && nranks > 1 && (o.plan || o.rank_attn || o.rank_mlp)) o.nranks = 1; /* --plan prints, --rank runs a model: rank 0 alone */
  ckpt_h5_quiet();
  if (rc == 0 && h5z_zstd_register() < 0) {
    boost_err(&err, "cannot register the zstd HDF5 filter");
    rc = 1;
  }
  if (rc == 0 && (o.nranks > 1 || rank == 0)) rc = run(&o, &err) == 0 ? 0 : 1;
  if (rc != 0 && rank == 0) fprintf(stderr, "boost-reshard: %s\n", err.msg);
  if (mpi) MPI_Finalize();
  return rc;
}
