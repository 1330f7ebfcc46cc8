/* Resume (writer thread): the candidates newest first, each read into the
 * arenas through this layout's plan -- every replica reads its bands and
 * hashes what it would write, the replicas all-gather them -- and verified
 * against the stored checksums; an unusable file is skipped for the
 * previous one. */
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

/* ---- loading (writer thread) ---------------------------------------------- */

/* H5Lexists on every component of an absolute path. */
static int path_exists(hid_t f, const char *path) {
  char p[TENSOR_NAME_MAX + 64];
  boost_msgf(p, sizeof p, "%s", path);
  for (char *c = p + 1;; c++) {
    if (*c == '/' || *c == 0) {
      const char save = *c;
      *c = 0;
      if (H5Lexists(f, p, H5P_DEFAULT) <= 0) return 0;
      if (!save) return 1;
      *c = save;
    }
  }
}

/* Reads one candidate into the arenas. Returns 1 ok, 0 unusable (reason in
 * why), -2 incompatible with this model (fatal). Collective. */
static int try_load(ckpt_session *s, const char *path, load_result *lr, char *why, size_t whylen) {
  const process_grid *g = s->grid;
  tensor_registry *reg = s->reg;
  char err[REASON_MAX] = "";
  int ok = 1, incompatible = 0;
  struct stat stt;
  if (stat(path, &stt) != 0) {
    boost_msgf(err, sizeof err, "cannot stat %s: %s", path, strerror(errno));
    ok = 0;
  }
  if (!ckpt_agree(s, ok, err, why, whylen)) return 0;
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_mpio(fapl, s->comm, MPI_INFO_NULL);
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
  if (f < 0) { /* before any other HDF5 call: each one clears the error stack */
    ckpt_h5_error(err, sizeof err, "cannot open (truncated or not an HDF5 file)");
    ok = 0;
  }
  H5Pclose(fapl);
  if (!ckpt_agree(s, ok, err, why, whylen)) {
    if (f >= 0) H5Fclose(f);
    return 0;
  }
  /* Root attributes. */
  char *fmt = NULL;
  int64_t version = 0;
  if (ckpt_attr_get_str(f, "format", &fmt) < 0 || strcmp(fmt, CKPT_FORMAT_NAME) != 0) {
    ckpt_h5_error(err, sizeof err, "not a boost checkpoint (attribute 'format')");
    ok = 0;
  } else if (ckpt_attr_get_i64(f, "format_version", &version) < 0 || version < 1 || version > CKPT_FORMAT_VERSION) {
    boost_msgf(err, sizeof err, "format_version %lld is not supported (this build reads 1..%d)", (long long)version,
             CKPT_FORMAT_VERSION);
    ok = 0;
  } else if (ckpt_attr_get_i64(f, "step", &lr->step) < 0 || ckpt_attr_get_i64(f, "data_cursor", &lr->data_cursor) < 0 ||
             ckpt_attr_get_f64(f, "tokens_seen", &lr->tokens_seen) < 0) {
    ckpt_h5_error(err, sizeof err, "training state attributes");
    ok = 0;
  }
  free(fmt);
  int64_t seeds[2] = {0, 0};
  if (ok) {
    ckpt_attr_get_i64(f, "data_seed", &seeds[0]);
    ckpt_attr_get_i64(f, "train_seed", &seeds[1]);
  }
  if (!ckpt_agree(s, ok, err, why, whylen)) {
    H5Fclose(f);
    return 0;
  }
  if (seeds[0] != s->cfg.data.seed && s->rank == 0)
    fprintf(stderr, "boost: warning: %s was saved with data.seed=%lld, this run uses %lld: the sample order will not continue the saved run\n",
            path, (long long)seeds[0], (long long)s->cfg.data.seed);

  /* Tensors: everyone opens every dataset (shape check, stored checksum);
   * each replica reads its band of its hyperslab (independent I/O) and the
   * rank that would write it hashes it. */
  const size_t nsum = (size_t)s->nent * CKPT_NUM_CATEGORIES + 1;
  uint64_t *stored = boost_calloc(nsum, sizeof *stored), *sums = boost_calloc(nsum, sizeof *sums);
  hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_INDEPENDENT);
  char dpath[TENSOR_NAME_MAX + 32];
  lr->touched = 1;
  for (int i = 0; i < s->nent && ok && !incompatible; i++) {
    const ckpt_entry *e = &s->ents[i];
    for (int c = 0; c < CKPT_NUM_CATEGORIES && ok && !incompatible; c++) {
      boost_msgf(dpath, sizeof dpath, "%s/%s", ckpt_category_group[c], e->name);
      if (!path_exists(f, dpath)) {
        boost_msgf(err, sizeof err, "tensor %s is missing (a checkpoint of a different model?)", dpath);
        incompatible = 1;
        break;
      }
      hid_t d = H5Dopen2(f, dpath, H5P_DEFAULT);
      hid_t space = d >= 0 ? H5Dget_space(d) : -1;
      hsize_t dims[TENSOR_MAX_DIMS + 1];
      int nd = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
      if (d < 0 || space < 0 || nd < 0 || nd > TENSOR_MAX_DIMS) {
        ckpt_h5_error(err, sizeof err, dpath);
        ok = 0;
      } else {
        H5Sget_simple_extent_dims(space, dims, NULL);
        int same = nd == e->ndim;
        for (int k = 0; same && k < nd; k++) same = (int64_t)dims[k] == e->shape[k];
        if (!same) {
          char a[96] = "", b[96] = "";
          for (int k = 0; k < nd; k++) boost_msgf(a + strlen(a), sizeof a - strlen(a), "%s%llu", k ? "x" : "", (unsigned long long)dims[k]);
          for (int k = 0; k < e->ndim; k++) boost_msgf(b + strlen(b), sizeof b - strlen(b), "%s%lld", k ? "x" : "", (long long)e->shape[k]);
          boost_msgf(err, sizeof err, "tensor %s has shape %s in the checkpoint but %s in this model", dpath, a, b);
          incompatible = 1;
        } else if (ckpt_attr_get_u64(d, CKPT_ATTR_CHECKSUM, &stored[(size_t)i * CKPT_NUM_CATEGORIES + c]) < 0) {
          ckpt_h5_error(err, sizeof err, "checksum attribute missing");
          char tmp[REASON_MAX];
          boost_msgf(tmp, sizeof tmp, "tensor %s: %s", dpath, err);
          boost_msgf(err, sizeof err, "%s", tmp);
          ok = 0;
        } else if (e->local >= 0 && e->r1[c] > e->r0[c]) { /* this replica's band */
          const tensor_desc *t = &reg->tensors[e->local];
          int64_t start[TENSOR_MAX_DIMS], count[TENSOR_MAX_DIMS];
          ckpt_band_slab(t, e->r0[c], e->r1[c], start, count);
          hsize_t st[TENSOR_MAX_DIMS], ct[TENSOR_MAX_DIMS];
          for (int k = 0; k < nd; k++) {
            st[k] = (hsize_t)start[k];
            ct[k] = (hsize_t)count[k];
          }
          hid_t mem = H5Screate_simple(nd, ct, NULL);
          H5Sselect_hyperslab(space, H5S_SELECT_SET, st, NULL, ct, NULL);
          float *dst = registry_data(reg, ckpt_category_arena[c], e->local) + (size_t)e->r0[c] * ckpt_row_floats(t);
          if (H5Dread(d, H5T_NATIVE_FLOAT, mem, space, dxpl, dst) < 0) {
            char what[TENSOR_NAME_MAX + 64];
            boost_msgf(what, sizeof what, "tensor %s: read failed (corrupt data?)", dpath);
            ckpt_h5_error(err, sizeof err, what);
            ok = 0;
          } else if (e->writer_stage == g->pp_rank && e->primary) {
            sums[(size_t)i * CKPT_NUM_CATEGORIES + c] = ckpt_hash_slab32(dst, t->ndim, t->shape, start, count);
          }
          H5Sclose(mem);
        }
      }
      if (space >= 0) H5Sclose(space);
      if (d >= 0) H5Dclose(d);
      if (s->set.delay_ms > 0) ckpt_sleep_ms(s->set.delay_ms);
    }
  }
  /* Loss history: everyone reads it (small). */
  lr->nloss = 0;
  free(lr->losses);
  lr->losses = NULL;
  if (ok && !incompatible) {
    hid_t d = H5Dopen2(f, CKPT_GROUP_STATE "/loss_history", H5P_DEFAULT);
    hid_t space = d >= 0 ? H5Dget_space(d) : -1;
    hssize_t n = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    if (n < 0 || ckpt_attr_get_u64(d, CKPT_ATTR_CHECKSUM, &stored[(size_t)s->nent * CKPT_NUM_CATEGORIES]) < 0) {
      ckpt_h5_error(err, sizeof err, "loss history " CKPT_GROUP_STATE "/loss_history");
      ok = 0;
    } else {
      lr->losses = malloc((size_t)n * sizeof(float) + 4);
      lr->nloss = n;
      if (!lr->losses || (n > 0 && H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, dxpl, lr->losses) < 0)) {
        ckpt_h5_error(err, sizeof err, "tensor " CKPT_GROUP_STATE "/loss_history: read failed (corrupt data?)");
        ok = 0;
      } else if (s->rank == 0) {
        sums[(size_t)s->nent * CKPT_NUM_CATEGORIES] = ckpt_hash_run32(lr->losses, (size_t)n, 0);
      }
    }
    if (space >= 0) H5Sclose(space);
    if (d >= 0) H5Dclose(d);
  }
  H5Pclose(dxpl);
  if (H5Fclose(f) < 0 && ok) {
    ckpt_h5_error(err, sizeof err, "H5Fclose");
    ok = 0;
  }
  /* Incompatibility is fatal on every rank; otherwise agree, then verify. */
  int inc = incompatible;
  MPI_Allreduce(MPI_IN_PLACE, &inc, 1, MPI_INT, MPI_MAX, s->comm);
  int rc = 1;
  if (inc) {
    ckpt_agree(s, !incompatible, err, why, whylen);
    rc = -2;
  } else if (!ckpt_agree(s, ok, err, why, whylen)) {
    rc = 0;
  } else {
    MPI_Allreduce(MPI_IN_PLACE, sums, (int)nsum, MPI_UINT64_T, MPI_SUM, s->comm);
    for (size_t k = 0; k < nsum; k++) {
      if (sums[k] == stored[k]) continue;
      const char *nm = k < (size_t)s->nent * CKPT_NUM_CATEGORIES ? s->ents[k / CKPT_NUM_CATEGORIES].name : "loss_history";
      const char *grp = k < (size_t)s->nent * CKPT_NUM_CATEGORIES ? ckpt_category_group[k % CKPT_NUM_CATEGORIES] : CKPT_GROUP_STATE;
      boost_msgf(why, whylen, "tensor %s/%s: checksum mismatch (stored %016llx, computed %016llx)", grp, nm,
               (unsigned long long)stored[k], (unsigned long long)sums[k]);
      rc = 0;
      break;
    }
  }
  boost_free(stored);
  boost_free(sums);
  if (rc != 1) return rc;
  /* Replicas all-gather their bands. */
  if (g->dp > 1) {
    int *counts = boost_calloc((size_t)g->dp, sizeof *counts), *displs = boost_calloc((size_t)g->dp, sizeof *displs);
    for (int i = 0; i < s->nent; i++) {
      const ckpt_entry *e = &s->ents[i];
      if (e->local < 0) continue;
      const tensor_desc *t = &reg->tensors[e->local];
      const size_t rf = ckpt_row_floats(t);
      BOOST_ASSERT((size_t)t->numel <= (size_t)INT_MAX); /* refused by ckpt_build_table */
      for (int c = 0; c < CKPT_NUM_CATEGORIES; c++) {
        for (int k = 0; k < g->dp; k++) {
          int64_t a, b;
          ckpt_band_of(e, t, c, k, g->dp, &a, &b);
          counts[k] = (int)((size_t)(b - a) * rf);
          displs[k] = (int)((size_t)a * rf);
        }
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, registry_data(reg, ckpt_category_arena[c], e->local), counts, displs,
                       MPI_FLOAT, s->dp_comm);
      }
    }
    boost_free(counts);
    boost_free(displs);
  }
  return 1;
}

void ckpt_do_load(ckpt_session *s, load_result *lr) {
  const double t0 = boost_now_s();
  const char *resume = s->cfg.ckpt.resume;
  char dir[PATH_MAX], single[PATH_MAX] = "";
  boost_msgf(dir, sizeof dir, "%s", s->set.dir);
  int explicit_path = strcmp(resume, "auto") != 0;
  if (explicit_path) {
    struct stat st;
    if (stat(resume, &st) == 0 && S_ISDIR(st.st_mode)) boost_msgf(dir, sizeof dir, "%s", resume);
    else boost_msgf(single, sizeof single, "%s", resume);
  }
  /* Candidates, newest first (rank 0 lists; everyone gets the same list). */
  int64_t *steps = NULL;
  int n = 0;
  if (!single[0]) {
    char err[512];
    if (s->rank == 0 && ckpt_fs_list(dir, &steps, &n, err, sizeof err) != 0) n = 0;
    MPI_Bcast(&n, 1, MPI_INT, 0, s->comm);
    if (s->rank != 0) steps = n ? boost_calloc((size_t)n, sizeof *steps) : NULL;
    if (n) MPI_Bcast(steps, n, MPI_INT64_T, 0, s->comm);
  } else {
    n = 1;
  }
  char skipped[1024] = "", why[REASON_MAX], path[PATH_MAX + 64];
  lr->status = 0;
  lr->touched = 0;
  for (int k = 0; k < n; k++) {
    if (single[0]) {
      boost_msgf(path, sizeof path, "%s", single);
    } else {
      char name[64];
      ckpt_file_name(name, sizeof name, steps[k]);
      boost_msgf(path, sizeof path, "%s/%s", dir, name);
    }
    why[0] = 0;
    int rc = try_load(s, path, lr, why, sizeof why);
    if (rc == 1) {
      lr->status = 1;
      const double dt = boost_now_s() - t0;
      double bytes = 0;
      for (int i = 0; i < s->nent; i++) bytes += 4.0 * CKPT_NUM_CATEGORIES * (double)ckpt_entry_numel(&s->ents[i]);
      char b[32];
      ckpt_format_bytes(bytes, b, sizeof b);
      boost_msgf(lr->msg, sizeof lr->msg, "resumed from %s (step %lld, %s of tensors verified and loaded in %.2f s)%s%s", path,
               (long long)lr->step, b, dt, skipped[0] ? "; skipped " : "", skipped);
      break;
    }
    if (rc == -2 || single[0]) {
      lr->status = -1;
      boost_msgf(lr->msg, sizeof lr->msg, "cannot resume from %s: %s", path, why);
      break;
    }
    if (s->rank == 0) {
      fprintf(stderr, "boost: checkpoint %s is unusable: %s; trying the previous one\n", path, why);
      fflush(stderr);
    }
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t used = strlen(skipped);
    boost_msgf(skipped + used, sizeof skipped - used, "%s%s (%.200s)", used ? ", " : "", base, why);
  }
  if (lr->status == 0) {
    if (n == 0) boost_msgf(lr->msg, sizeof lr->msg, "fresh start (no checkpoint in %s)", dir);
    else boost_msgf(lr->msg, sizeof lr->msg, "fresh start: no usable checkpoint in %s; skipped %s", dir, skipped);
  }
  free(steps);
}

