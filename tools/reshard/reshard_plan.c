/* boost-reshard --plan: the read amplification of loading a checkpoint as
 * it is on a target layout, per tensor-parallel rank and pipeline stage, and
 * the target layout's registry (shared with the rewrite). */
#include <stdio.h>

#include "check.h"
#include "ckpt_h5.h"
#include "reshard.h"
#include "util.h"

/* The target layout's tensor registry for tp rank 0 of the whole model:
 * names, global shapes and the tensor-parallel split of every tensor. */
int reshard_target_registry(const train_config *cfg, const options *o, model *m, tp_mode *mode, boost_status *err) {
  if (model_check_layout(&cfg->model, o->mode, o->tp, mode, err) != 0) return -1;
  int *per_stage = boost_calloc((size_t)o->pp, sizeof *per_stage);
  const int rc = model_plan_stages(&cfg->model, o->pp, cfg->parallel.stages, cfg->model.seq_len, per_stage, err);
  boost_free(per_stage);
  if (rc != 0) return -1;
  comm_ctx comm;
  comm_init_self(&comm, NULL);
  comm.size[COMM_TP] = o->tp; /* model_init reads the group sizes only */
  model_init(m, &cfg->model, *mode, &(model_options){.comm = &comm, .layout_only = 1});
  return 0;
}

/* Bytes of IN's chunks a hyperslab touches (what a reader decodes). */
static double touched_bytes(hid_t in, const char *path, const tensor_desc *t) {
  hid_t d = H5Dopen2(in, path, H5P_DEFAULT);
  hid_t dcpl = d >= 0 ? H5Dget_create_plist(d) : -1;
  hsize_t c[TENSOR_MAX_DIMS];
  const int chunked = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, t->ndim, c) == t->ndim;
  double bytes = 4.0;
  for (int k = 0; k < t->ndim; k++) {
    const int64_t ck = chunked ? (int64_t)c[k] : t->shape[k];
    const int64_t first = t->offset[k] / ck, last = (t->offset[k] + t->local_shape[k] - 1) / ck;
    bytes *= (double)(last - first + 1) * (double)ck;
  }
  if (dcpl >= 0) H5Pclose(dcpl);
  if (d >= 0) H5Dclose(d);
  return d >= 0 ? bytes : -1.0;
}

int reshard_plan(hid_t in, const train_config *cfg, const options *o, boost_status *err) {
  tp_mode mode;
  model probe;
  if (reshard_target_registry(cfg, o, &probe, &mode, err) != 0) return -1;
  model_free(&probe);
  int *per_stage = boost_calloc((size_t)o->pp, sizeof *per_stage);
  model_plan_stages(&cfg->model, o->pp, cfg->parallel.stages, cfg->model.seq_len, per_stage, err);
  double need_all = 0, read_all = 0;
  if (o->json) printf("{\"layout\":{\"dp\":%d,\"tp\":%d,\"pp\":%d,\"tp_mode\":\"%s\"},\"ranks\":[", o->dp, o->tp, o->pp, tp_mode_names[mode]);
  else printf("plan: reading %s on dp=%d tp=%d pp=%d (%s); per tensor-parallel rank and stage:\n", o->in, o->dp, o->tp, o->pp, tp_mode_names[mode]);
  int first_layer = 0, rc = 0;
  for (int s = 0; s < o->pp && rc == 0; s++) {
    const model_stage stage = {first_layer, per_stage[s], s == 0, s == o->pp - 1};
    first_layer += per_stage[s];
    for (int t = 0; t < o->tp && rc == 0; t++) {
      comm_ctx comm;
      comm_init_self(&comm, NULL);
      comm.size[COMM_TP] = o->tp;
      comm.rank[COMM_TP] = t;
      model m;
      model_init(&m, &cfg->model, mode, &(model_options){.comm = &comm, .stage = &stage, .layout_only = 1});
      double need = 0, got = 0;
      for (int i = 0; i < m.reg.count && rc == 0; i++) {
        const tensor_desc *td = &m.reg.tensors[i];
        for (int c = 0; c < (o->no_optim ? 1 : 3); c++) {
          char path[TENSOR_NAME_MAX + 32];
          const char *grp[3] = {CKPT_GROUP_MODEL, CKPT_GROUP_ADAM_M, CKPT_GROUP_ADAM_V};
          snprintf(path, sizeof path, "%s/%s", grp[c], td->name);
          const double b = touched_bytes(in, path, td);
          if (b < 0) {
            rc = boost_err(err, "%s: %s is not in the checkpoint (another model?)", o->in, path);
            break;
          }
          need += 4.0 * (double)td->numel;
          got += b;
        }
      }
      if (rc == 0 && o->json)
        printf("%s{\"stage\":%d,\"tp_rank\":%d,\"tensors\":%d,\"bytes_needed\":%.0f,\"bytes_decoded\":%.0f,\"amplification\":%.4f}",
               s + t ? "," : "", s, t, m.reg.count, need, got, need > 0 ? got / need : 1.0);
      else if (rc == 0)
        printf("  stage %d tp rank %d: %3d tensors, needs %9.2f MiB, decodes %9.2f MiB of chunks: read amplification %.2fx\n",
               s, t, m.reg.count, need / (1 << 20), got / (1 << 20), need > 0 ? got / need : 1.0);
      need_all += need, read_all += got;
      model_free(&m);
    }
  }
  boost_free(per_stage);
  if (rc != 0) return -1;
  if (o->json) printf("],\"amplification\":%.4f}\n", need_all > 0 ? read_all / need_all : 1.0);
  else
    printf("total: every data-parallel replica needs %.2f MiB and decodes %.2f MiB (%.2fx); boost-reshard to this layout "
           "makes it 1.00x\n", need_all / (1 << 20), read_all / (1 << 20), need_all > 0 ? read_all / need_all : 1.0);
  return 0;
}

