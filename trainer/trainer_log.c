/* What a run shows: its start (model, memory, layout, backend), rank 0's
 * line per step, the verdicts every rank reaches, and the metrics file's
 * JSON line (trainer_internal.h). Its lines go through kernels/log.h. */
#include "trainer_internal.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "gemm_peak.h"
#include "log.h"
#include "util.h"
#ifdef BOOST_HAVE_CUDA
#include "cuda_backend.h"
#endif

int fail_all(const process_grid *g, const char *msg) {
  if (g->rank == 0) boost_log_warn("%s", msg);
  return 1;
}

static void format_count(double v, char *out, size_t n) {
  if (v >= 1e9) snprintf(out, n, "%.2fG", v / 1e9);
  else if (v >= 1e6) snprintf(out, n, "%.2fM", v / 1e6);
  else if (v >= 1e3) snprintf(out, n, "%.1fk", v / 1e3);
  else snprintf(out, n, "%.0f", v);
}

double run_mfu(const trainer *t, double gflops) {
  return t->out.peak_flops > 0 ? 100.0 * gflops * 1e9 / t->out.peak_flops : NAN;
}

double peak_rss_mib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0; /* KiB on Linux */
}

void measure_peak(trainer *t) {
  double peak = t->cfg->train.report.peak_tflops * 1e12;
  if (peak <= 0) peak = gemm_peak_flops(t->be, 0, 0.15); /* every rank at once: they share the node as they train */
  comm_control_sum_f64(&t->comm, COMM_WORLD, &peak, 1);
  t->out.peak_flops = peak;
}

void write_metrics(trainer *r, const comm_ctx *comm_counts, const train_state *st, float loss, float val_loss, float lr,
                   double gnorm, double tok_s, double gflops, double dt, const char *ckpt_status) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "step", (double)st->step);
  cJSON_AddNumberToObject(o, "time", boost_unix_s()); /* wall clock, after the checkpoint step */
  cJSON_AddNumberToObject(o, "loss", loss);
  if (!isnan(val_loss)) cJSON_AddNumberToObject(o, "val_loss", val_loss);
  cJSON_AddNumberToObject(o, "lr", lr);
  cJSON_AddNumberToObject(o, "grad_norm", gnorm);
  cJSON_AddNumberToObject(o, "tokens_per_s", tok_s);
  cJSON_AddNumberToObject(o, "gflops", gflops);
  const double mfu = run_mfu(r, gflops);
  if (!isnan(mfu)) cJSON_AddNumberToObject(o, "mfu", mfu);
  cJSON_AddNumberToObject(o, "peak_rss_mib", peak_rss_mib());
  cJSON_AddNumberToObject(o, "step_ms", dt * 1e3);
  cJSON_AddNumberToObject(o, "tokens", st->tokens_seen);
  cJSON_AddStringToObject(o, "ckpt", ckpt_status);
  cJSON *comm = cJSON_AddObjectToObject(o, "comm");
  for (int g = 0; g < COMM_NUM_GROUPS; g++)
    for (int k = 0; k < COMM_NUM_KINDS; k++) {
      const comm_counter *ct = &comm_counts->count[g][k];
      if (!ct->calls) continue;
      char key[64];
      snprintf(key, sizeof key, "%s_%s", comm_group_names[g], comm_kind_names[k]);
      cJSON *e = cJSON_AddObjectToObject(comm, key);
      cJSON_AddNumberToObject(e, "bytes", (double)ct->bytes);
      cJSON_AddNumberToObject(e, "calls", (double)ct->calls);
      cJSON_AddNumberToObject(e, "seconds", ct->seconds);
    }
  char *s = cJSON_PrintUnformatted(o);
  fprintf(r->out.metrics, "%s\n", s);
  fflush(r->out.metrics);
  free(s);
  cJSON_Delete(o);
}

void print_start(const trainer *r, const train_state *st, int threads) {
  const train_config *cfg = r->cfg;
  char np[32];
  format_count((double)model_num_params(&r->m), np, sizeof np);
  boost_log_info("model %s: %s parameters, d=%d layers=%d heads=%d ffn=%d ranks attn/mlp=%d/%d lowrank=%s",
                 cfg->model.preset, np, cfg->model.d_model, cfg->model.n_layers, cfg->model.n_heads, cfg->model.ffn,
                 cfg->model.rank_attn, cfg->model.rank_mlp, cfg->model.lowrank);
  store_print_memory(&r->mt.store, "  memory ");
  boost_log_info("  memory %-8s %9.2f MiB  (micro-batch %d x %d, %d in flight; %.2f MiB per layer kept with "
                 "recompute=%s)",
                 "acts", (double)r->acts.act_bytes / (1 << 20), r->data.B, r->data.T, r->acts.nsets,
                 (double)r->acts.act_bytes_per_layer / (1 << 20), recompute_names[r->acts.recompute]);
  if (r->grid.pp > 1) {
    char layers[512] = "";
    for (int k = 0; k < r->grid.pp; k++) {
      const size_t used = strlen(layers);
      if (used + 16 >= sizeof layers) { /* thousands of stages: the list is cut, not overrun */
        snprintf(layers + used, sizeof layers - used, ",...");
        break;
      }
      snprintf(layers + used, sizeof layers - used, "%s%d", k ? "," : "", r->par.layers_per_stage[k]);
    }
    const int M = cfg->train.grad_accum, P = r->grid.pp;
    boost_log_info("pipeline: %d stages with %s layers, 1F1B over %d micro-batches, bubble fraction (P-1)/(M+P-1) = %.3f",
                   P, layers, M, (double)(P - 1) / (M + P - 1));
  }
  boost_log_info("backend: %s", r->be->info);
  boost_log_info("peak for MFU: %.3f TFLOP/s over %d rank%s (%s)", r->out.peak_flops / 1e12, r->grid.world_size,
                 r->grid.world_size == 1 ? "" : "s",
                 cfg->train.report.peak_tflops > 0 ? "train.peak_tflops" : "each rank's backend GEMM measured at start");
#ifdef BOOST_HAVE_CUDA
  if (cuda_backend_device(r->be) >= 0) {
    char dev[256];
    cuda_backend_describe(r->be, dev, sizeof dev);
    boost_log_info("device: %s (rank 0; communication %s)", dev, r->comm.ops->name);
  }
#endif
  const trainer_data *d = &r->data;
  boost_log_info("layout dp=%d tp=%d (%s) pp=%d | data: %lld train / %lld validation samples of %d tokens | global "
                 "batch %lld sequences (%d x %d accum x %d dp) | %d threads/rank | from step %lld",
                 r->grid.dp, r->grid.tp, tp_mode_names[r->par.mode], r->grid.pp,
                 (long long)data_split_num_samples(&d->train), (long long)data_split_num_samples(&d->val), d->T,
                 (long long)d->global_batch, d->B, cfg->train.grad_accum, r->grid.dp, threads, (long long)st->step);
}

/* Rank 0's line for a step. */
void log_step(const trainer *t, const comm_ctx *step_comm, float loss, float val_loss, float lr, double gnorm,
              double tok_s, double gflops, double dt, const char *ckpt_status) {
  char tok[32], val[32] = "", comm[512] = "";
  format_count(tok_s, tok, sizeof tok);
  if (!isnan(val_loss)) snprintf(val, sizeof val, " | val %.4f", val_loss);
  if (t->grid.world_size > 1) {
    char cs[256];
    comm_format_counts(step_comm, cs, sizeof cs);
    snprintf(comm, sizeof comm, " | comm %s", cs);
  }
  boost_log_info("step %5lld/%d | loss %.4f | lr %.2e | gnorm %.3f | %s tok/s | %.1f GFLOP/s | MFU %.1f%% | %.0f ms%s%s"
                 " | ckpt %s",
                 (long long)t->st.step, t->cfg->train.steps, loss, lr, gnorm, tok, gflops, run_mfu(t, gflops), dt * 1e3,
                 val, comm, ckpt_status);
}
