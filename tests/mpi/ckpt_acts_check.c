/* Checks that a checkpoint's stored weights reproduce its stored activations
 * (ckpt.activations=sample|all): loads the weights through the checkpoint
 * session (ckpt.resume=PATH), runs the forward pass on the stored tokens and
 * compares every stored bottleneck activation h (and hpre, layer inputs when
 * present) with what the model computes.
 *
 *   ckpt_acts_check CHECKPOINT [--set key=value ...]
 *
 * The --set options describe the model (the same as the run that saved it).
 * Runs on one process (a single replica, no tp/pp: any layout's checkpoint
 * loads). Prints the largest difference per dataset; exits 0 when every
 * dataset matches within 1e-5 relative to its largest magnitude, else 1. */
#include <hdf5.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ckpt.h"
#include "resume_state.h"
#include "save_request.h"
#include "ckpt_h5.h"
#include "config.h"
#include "grid.h"
#include "h5z_zstd.h"
#include "model_train.h"
#include "train_state.h"

static float *read_f32(hid_t f, const char *path, hsize_t *dims, int *nd) {
  hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
  if (d < 0) return NULL;
  hid_t sp = H5Dget_space(d);
  *nd = H5Sget_simple_extent_ndims(sp);
  H5Sget_simple_extent_dims(sp, dims, NULL);
  hssize_t n = H5Sget_simple_extent_npoints(sp);
  float *v = malloc((size_t)n * sizeof *v + 4);
  if (H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0) boost_fail("cannot read %s", path);
  H5Sclose(sp);
  H5Dclose(d);
  return v;
}

/* Compares n values; prints and returns 1 when they differ beyond tolerance. */
static int compare(const char *name, const float *stored, const float *mine, size_t n, int *bitwise) {
  double maxabs = 0, maxdiff = 0;
  for (size_t i = 0; i < n; i++) {
    if (fabs(stored[i]) > maxabs) maxabs = fabs(stored[i]);
    double dd = fabs((double)stored[i] - (double)mine[i]);
    if (!(dd <= maxdiff)) maxdiff = dd; /* NaN counts */
  }
  if (memcmp(stored, mine, n * sizeof(float)) != 0) *bitwise = 0;
  const int bad = !(maxdiff <= 1e-5 * (maxabs > 1 ? maxabs : 1));
  printf("%-32s %8zu values  max |diff| %.3g  (max |h| %.3g)%s\n", name, n, maxdiff, maxabs, bad ? "  MISMATCH" : "");
  return bad;
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (argc < 2) boost_fail("usage: ckpt_acts_check CHECKPOINT [--set key=value ...]");
  const char *path = argv[1];
  char **sets = calloc((size_t)argc, sizeof *sets);
  int nsets = 0;
  for (int i = 2; i + 1 < argc; i += 2)
    if (!strcmp(argv[i], "--set")) sets[nsets++] = argv[i + 1];
  train_config cfg;
  boost_status err = {0};
  if (config_resolve(&cfg, NULL, nsets, sets, &err) != 0) boost_fail("%s", err.msg);
  free(sets);
  cfg.parallel.dp = cfg.parallel.tp = cfg.parallel.pp = 1;
  snprintf(cfg.ckpt.dir, sizeof cfg.ckpt.dir, "%s", path);
  char *slash = strrchr(cfg.ckpt.dir, '/');
  if (slash) *slash = 0;
  else snprintf(cfg.ckpt.dir, sizeof cfg.ckpt.dir, ".");
  if (config_set(&cfg, "ckpt.resume", path, &err) != 0) boost_fail("%s", err.msg);
  cfg.ckpt.activations = ACTS_NONE;

  process_grid g;
  if (grid_init(&g, MPI_COMM_WORLD, 1, 1, 1, &err) != 0) boost_fail("%s", err.msg);
  tp_mode mode;
  if (model_check_layout(&cfg.model, cfg.parallel.tp_mode, 1, &mode, &err) != 0) boost_fail("%s", err.msg);
  model m;
  model_acts acts = {0};
  model_train ts;
  model_init(&m, &cfg.model, mode, NULL);
  model_train_init(&ts, &m, &(model_train_options){.with_optimizer = 1});
  train_state st;
  train_state_init(&st);
  ckpt_settings set;
  trainer_ckpt_settings(&cfg, &set);
  ckpt_session *s = NULL;
  if (ckpt_open(&set, &g, &ts.store, &s, &err) != 0 || !s) boost_fail("ckpt_open: %s", err.msg);
  boost_status note = {0};
  if (trainer_ckpt_resume(s, &st, "", &note) <= 0) boost_fail("did not load %s: %s", path, note.msg);
  ckpt_close(s); /* the writer thread is gone: this thread may call HDF5 now */
  printf("loaded: %s\n", note.msg);

  ckpt_h5_quiet();
  if (h5z_zstd_register() < 0) boost_fail("cannot register the zstd filter");
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) boost_fail("cannot open %s", path);
  hid_t td = H5Dopen2(f, CKPT_GROUP_ACTS "/tokens", H5P_DEFAULT);
  if (td < 0) boost_fail("%s has no " CKPT_GROUP_ACTS "/tokens (saved with ckpt.activations=none?)", path);
  hsize_t tdims[2];
  hid_t tsp = H5Dget_space(td);
  H5Sget_simple_extent_dims(tsp, tdims, NULL);
  const int B = (int)tdims[0], T = (int)tdims[1];
  int32_t *tokens = malloc(sizeof *tokens * (size_t)B * T);
  if (H5Dread(td, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, tokens) < 0) boost_fail("cannot read the tokens");
  H5Sclose(tsp);
  H5Dclose(td);
  if (T != cfg.model.seq_len) boost_fail("stored micro-batch has T=%d, the model seq_len %d", T, cfg.model.seq_len);

  model_alloc_acts(&m, &acts, B, T, 1, RECOMPUTE_NONE);
  model_use_acts(&acts, 0);
  model_forward(&m, &acts, tokens, NULL, B, T);
  /* the default CPU backend: its activations are host memory, read in place */

  const size_t N = (size_t)B * T;
  int bad = 0, checked = 0, bitwise = 1;
  char name[256];
  for (int l = 0; l < m.nl; l++) {
    hsize_t dims[4];
    int nd;
    snprintf(name, sizeof name, CKPT_GROUP_ACTS "/layers.%d.input", l);
    if (H5Lexists(f, name, H5P_DEFAULT) > 0) {
      float *v = read_f32(f, name, dims, &nd);
      if (!v || dims[0] != N) boost_fail("%s: unexpected shape", name);
      bad |= compare(name + strlen(CKPT_GROUP_ACTS) + 1, v, (const float *)acts.cur->resid[l], N * (size_t)m.d_res, &bitwise);
      checked++;
      free(v);
    }
    for (int gi = 0; gi < m.layers[l].ngroups; gi++) {
      const proj_group *pg = &m.layers[l].groups[gi];
      if (!pg->lowrank) continue;
      const char *blk = pg->kinds[0] <= PROJ_O ? "attn" : "mlp";
      for (int which = 0; which < 2; which++) {
        snprintf(name, sizeof name, CKPT_GROUP_ACTS "/layers.%d.%s.%s.%s", l, blk, model_group_name(pg), which ? "hpre" : "h");
        if (H5Lexists(f, name, H5P_DEFAULT) <= 0) {
          if (!which) {
            printf("%s: missing\n", name);
            bad = 1;
          }
          continue;
        }
        float *v = read_f32(f, name, dims, &nd);
        if (!v || nd != 3 || dims[0] != N || (int)dims[1] != pg->nproj || (int)dims[2] != pg->r) boost_fail("%s: unexpected shape", name);
        bad |= compare(name + strlen(CKPT_GROUP_ACTS) + 1, v, (const float *)(which ? acts.cur->acts[l].hpre[gi] : acts.cur->acts[l].h[gi]), N * (size_t)pg->nproj * pg->r, &bitwise);
        checked++;
        free(v);
      }
    }
  }
  H5Fclose(f);
  if (!checked) {
    printf("no activation datasets checked\n");
    bad = 1;
  }
  printf("%s: %d datasets, the stored weights reproduce the stored activations%s\n", bad ? "FAIL" : "ok", checked,
         bad ? " NOT" : bitwise ? " bit for bit" : " (within 1e-5)");
  free(tokens);
  train_state_free(&st);
  model_acts_free(&m, &acts);
  model_train_free(&ts);
  model_free(&m);
  grid_free(&g);
  MPI_Finalize();
  return bad ? 1 : 0;
}
