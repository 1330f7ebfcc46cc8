/* boost-train: trains a CoLA / LLaMA-style model from a config.
 *
 *   boost-train --config FILE [--set section.key=value ...]
 *
 * Under mpirun, world = dp * tp * pp ranks. */
#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blas_select.h"
#include "check.h"
#include "config.h"
#include "data.h"
#include "model.h"
#include "ops.h"
#include "optim.h"

void openblas_set_num_threads(int);

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: boost-train [--config FILE] [--set section.key=value ...] [--print-config] [--help]\n"
          "\n"
          "Trains a LLaMA-style model whose projections are CoLA bottlenecks y = B.silu(A.x)\n"
          "(or full-rank). Run under mpirun for data parallelism (world = parallel.dp).\n"
          "\n"
          "  --config FILE      INI file; sections [model] [data] [train] [parallel] [ckpt]\n"
          "  --set KEY=VALUE    override one key, e.g. --set model.preset=cola-60m\n"
          "  --print-config     print the resolved config and exit\n"
          "  --help             this text\n"
          "\n"
          "Presets: tiny, cola-60m, cola-130m, cola-350m, cola-1b, cola-7b and llama-* twins.\n"
          "Keys:\n");
  for (const char *const *k = config_key_names(); *k; k++) fprintf(f, "  %s\n", *k);
}

typedef struct {
  int rank, world, dp_rank, dp;
} layout;

static void all_fail(const layout *lay, const char *msg) {
  if (lay->rank == 0) fprintf(stderr, "boost-train: %s\n", msg);
  MPI_Finalize();
  exit(1);
}

/* Sum gradients over data-parallel ranks. */
static void allreduce_grads(model *m, const layout *lay) {
  if (lay->dp == 1) return;
  float *g = m->reg.arena[TENSOR_GRADS];
  size_t n = m->reg.numel;
  const size_t chunk = (size_t)1 << 28;
  for (size_t off = 0; off < n; off += chunk) {
    int cnt = (int)((n - off) < chunk ? (n - off) : chunk);
    MPI_Allreduce(MPI_IN_PLACE, g + off, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
}

static float evaluate(model *m, const data_split *val, int batches, int B, int T, const layout *lay, int32_t *in,
                      int32_t *tg) {
  int64_t n = data_split_num_samples(val);
  if (n <= 0 || batches <= 0) return NAN;
  double sum = 0.0;
  int count = 0;
  for (int b = lay->dp_rank; b < batches; b += lay->dp) {
    for (int i = 0; i < B; i++) {
      int64_t idx = ((int64_t)b * B + i) % n;
      data_get_window(val, idx, in + (size_t)i * T, tg + (size_t)i * T);
    }
    sum += model_forward(m, in, tg, B, T);
    count++;
  }
  double tot[2] = {sum, (double)count};
  MPI_Allreduce(MPI_IN_PLACE, tot, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return (float)(tot[0] / tot[1]);
}

static void format_count(double v, char *out, size_t n) {
  if (v >= 1e9) snprintf(out, n, "%.2fG", v / 1e9);
  else if (v >= 1e6) snprintf(out, n, "%.2fM", v / 1e6);
  else if (v >= 1e3) snprintf(out, n, "%.1fk", v / 1e3);
  else snprintf(out, n, "%.0f", v);
}

int main(int argc, char **argv) {
  const char *config_path = NULL;
  char **sets = calloc((size_t)argc, sizeof *sets);
  int nsets = 0, print_only = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--config") && i + 1 < argc) {
      if (config_path) { fprintf(stderr, "boost-train: --config given twice\n"); return 2; }
      config_path = argv[++i];
    } else if (!strcmp(argv[i], "--set") && i + 1 < argc) {
      sets[nsets++] = argv[++i];
    } else if (!strcmp(argv[i], "--print-config")) {
      print_only = 1;
    } else {
      fprintf(stderr, "boost-train: unknown or incomplete argument '%s' (see --help)\n", argv[i]);
      return 2;
    }
  }

  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  layout lay = {0};
  MPI_Comm_rank(MPI_COMM_WORLD, &lay.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &lay.world);

  train_config cfg;
  char err[1024];
  if (config_resolve(&cfg, config_path, nsets, sets, err, sizeof err) != 0) all_fail(&lay, err);
  if (lay.rank == 0) {
    printf("boost-train %s | %d rank(s) | OpenBLAS core %s\n", BOOST_VERSION, lay.world, blas_core_name());
    config_print(&cfg, "  ");
  }
  if (print_only) { MPI_Finalize(); return 0; }

  /* Layout: data parallelism only (tensor/pipeline parallelism: parallel.*). */
  if (cfg.parallel.tp != 1 || cfg.parallel.pp != 1)
    all_fail(&lay, "parallel.tp and parallel.pp > 1 are not supported by this build yet");
  if (cfg.parallel.dp * cfg.parallel.tp * cfg.parallel.pp != lay.world) {
    if (cfg.parallel.dp == 1 && cfg.parallel.tp == 1 && cfg.parallel.pp == 1) {
      cfg.parallel.dp = lay.world; /* plain `mpirun -n K` means data parallel */
    } else {
      snprintf(err, sizeof err, "layout dp*tp*pp = %d*%d*%d = %d does not match the %d MPI ranks", cfg.parallel.dp,
               cfg.parallel.tp, cfg.parallel.pp, cfg.parallel.dp * cfg.parallel.tp * cfg.parallel.pp, lay.world);
      all_fail(&lay, err);
    }
  }
  lay.dp = cfg.parallel.dp;
  lay.dp_rank = lay.rank;

  int threads = cfg.train.threads;
  if (threads <= 0) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    threads = (int)(cores / lay.world);
    if (threads < 1) threads = 1;
  }
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);

  /* Data */
  if (!cfg.data.train[0]) all_fail(&lay, "data.train is not set: give a token shard made by boost-data");
  data_source *train_src = data_open(cfg.data.train, err, sizeof err);
  if (!train_src) all_fail(&lay, err);
  data_source *val_src = NULL;
  const int T = cfg.model.seq_len, B = cfg.train.batch_size;
  data_split train_split, val_split;
  memset(&val_split, 0, sizeof val_split);
  if (cfg.data.val[0]) {
    val_src = data_open(cfg.data.val, err, sizeof err);
    if (!val_src) all_fail(&lay, err);
    if (data_split_make(train_src, 0.0, T, &train_split, NULL, err, sizeof err) != 0) all_fail(&lay, err);
    if (data_split_make(val_src, 0.0, T, &val_split, NULL, err, sizeof err) != 0) all_fail(&lay, err);
  } else if (data_split_make(train_src, cfg.data.val_fraction, T, &train_split, cfg.data.val_fraction > 0 ? &val_split : NULL,
                             err, sizeof err) != 0) {
    all_fail(&lay, err);
  }
  int data_vocab = data_vocab_size(train_src);
  if (val_src && data_vocab_size(val_src) > data_vocab) data_vocab = data_vocab_size(val_src);
  if (data_vocab > cfg.model.vocab) {
    snprintf(err, sizeof err, "the data's vocabulary (%d) exceeds model.vocab (%d)", data_vocab, cfg.model.vocab);
    all_fail(&lay, err);
  }

  /* Model */
  model m;
  model_init(&m, &cfg.model, 1);
  model_init_params(&m, (uint64_t)cfg.train.seed);
  model_alloc_acts(&m, B, T);
  const int64_t global_batch = (int64_t)B * cfg.train.grad_accum * lay.dp;
  const double flops_per_token = model_flops_per_token(&cfg.model, T);
  if (lay.rank == 0) {
    char np[32];
    format_count((double)model_num_params(&m), np, sizeof np);
    printf("model %s: %s parameters, d=%d layers=%d heads=%d ffn=%d ranks attn/mlp=%d/%d lowrank=%s\n",
           cfg.model.preset, np, cfg.model.d_model, cfg.model.n_layers, cfg.model.n_heads, cfg.model.ffn,
           cfg.model.rank_attn, cfg.model.rank_mlp, cfg.model.lowrank);
    registry_print_memory(&m.reg, "  memory ");
    printf("  memory %-8s %9.2f MiB  (micro-batch %d x %d)\n", "acts", (double)m.act_numel * 4 / (1 << 20), B, T);
    printf("data: %lld train samples, %lld validation samples of %d tokens; global batch %lld sequences "
           "(%d x %d accum x %d dp), %d threads/rank\n",
           (long long)data_split_num_samples(&train_split), (long long)data_split_num_samples(&val_split), T,
           (long long)global_batch, B, cfg.train.grad_accum, lay.dp, threads);
    fflush(stdout);
  }

  FILE *metrics = NULL;
  if (lay.rank == 0 && cfg.train.metrics[0]) {
    metrics = fopen(cfg.train.metrics, "a");
    if (!metrics) {
      snprintf(err, sizeof err, "cannot open train.metrics %s: %s", cfg.train.metrics, strerror(errno));
      all_fail(&lay, err);
    }
  }

  int32_t *in = boost_calloc((size_t)B * T, sizeof *in), *tg = boost_calloc((size_t)B * T, sizeof *tg);
  const float scale = 1.0f / ((float)B * T * cfg.train.grad_accum * lay.dp);
  double tokens_seen = 0;
  float last_loss = NAN;
  double t_start = now_s();
  for (int step = 0; step < cfg.train.steps; step++) {
    double t0 = now_s();
    model_zero_grads(&m);
    double loss_sum = 0.0;
    for (int micro = 0; micro < cfg.train.grad_accum; micro++) {
      for (int b = 0; b < B; b++) {
        int64_t idx = (int64_t)step * global_batch + ((int64_t)micro * lay.dp + lay.dp_rank) * B + b;
        data_get_sample(&train_split, (uint64_t)cfg.data.seed, idx, in + (size_t)b * T, tg + (size_t)b * T);
      }
      loss_sum += model_forward(&m, in, tg, B, T);
      model_backward(&m, in, tg, B, T, scale);
    }
    allreduce_grads(&m, &lay);
    double red[2] = {loss_sum, grad_norm_local_sumsq(&m)};
    if (lay.dp > 1) MPI_Allreduce(MPI_IN_PLACE, red, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    float loss = (float)(red[0] / (cfg.train.grad_accum * lay.dp));
    double gnorm = sqrt(red[1]);
    float lr = lr_at(&cfg, step);
    optimizer_step(&m, &cfg, lr, step + 1, clip_scale(gnorm, cfg.train.grad_clip));
    double dt = now_s() - t0;
    tokens_seen += (double)global_batch * T;
    double tok_s = (double)global_batch * T / dt, gflops = flops_per_token * global_batch * T / dt / 1e9;
    last_loss = loss;
    if (!isfinite(loss)) all_fail(&lay, "loss is not finite: lower train.lr or check the data");

    int last = step + 1 == cfg.train.steps;
    float val_loss = NAN;
    if (cfg.train.val_batches > 0 && ((cfg.train.val_every > 0 && (step + 1) % cfg.train.val_every == 0) || last))
      val_loss = evaluate(&m, &val_split, cfg.train.val_batches, B, T, &lay, in, tg);
    if (lay.rank == 0) {
      if ((step + 1) % cfg.train.log_every == 0 || last || !isnan(val_loss)) {
        char tok[32];
        format_count(tok_s, tok, sizeof tok);
        printf("step %5d/%d | loss %.4f | lr %.2e | gnorm %.3f | %s tok/s | %.1f GFLOP/s | %.0f ms", step + 1,
               cfg.train.steps, loss, lr, gnorm, tok, gflops, dt * 1e3);
        if (!isnan(val_loss)) printf(" | val %.4f", val_loss);
        printf(" | ckpt -\n");
        fflush(stdout);
      }
      if (metrics) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "step", step + 1);
        cJSON_AddNumberToObject(o, "loss", loss);
        if (!isnan(val_loss)) cJSON_AddNumberToObject(o, "val_loss", val_loss);
        cJSON_AddNumberToObject(o, "lr", lr);
        cJSON_AddNumberToObject(o, "grad_norm", gnorm);
        cJSON_AddNumberToObject(o, "tokens_per_s", tok_s);
        cJSON_AddNumberToObject(o, "gflops", gflops);
        cJSON_AddNumberToObject(o, "step_ms", dt * 1e3);
        cJSON_AddNumberToObject(o, "tokens", tokens_seen);
        char *s = cJSON_PrintUnformatted(o);
        fprintf(metrics, "%s\n", s);
        fflush(metrics);
        free(s);
        cJSON_Delete(o);
      }
    }
  }
  if (lay.rank == 0)
    printf("done: %d steps, %.0f tokens in %.1f s, final loss %.4f\n", cfg.train.steps, tokens_seen,
           now_s() - t_start, last_loss);
  if (metrics) fclose(metrics);
  boost_free(in);
  boost_free(tg);
  model_free(&m);
  data_close(train_src);
  if (val_src) data_close(val_src);
  free(sets);
  MPI_Finalize();
  return 0;
}
