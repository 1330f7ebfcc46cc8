/* Save/load round trip of the checkpoint session on any layout, and resharding
 * on load: values are a pure function of (tensor name, category, GLOBAL
 * element index), so a checkpoint saved by one dp x tp x pp layout must load
 * bit for bit on another.
 *
 *   ckpt_roundtrip save DIR DP TP PP STEP   fill, save step STEP (forced), close
 *   ckpt_roundtrip load DIR DP TP PP STEP   garbage-fill, resume auto from DIR,
 *                                           expect step STEP, compare every
 *                                           element of params, adam_m, adam_v
 *                                           bitwise, and the training state
 *
 * Tensors: 1-D, 2-D and 3-D, split over tp along every dimension, replicated
 * ones, a wide one whose chunks do not divide it, and one tensor held by every
 * pipeline stage (tied embeddings); with PP > 1 each stage holds a subset.
 * Values include -0.0, NaN payloads and denormals (bitwise comparison).
 * Prints "ok ..." and exits 0, or names the first difference and exits 1. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ckpt.h"
#include "resume_state.h"
#include "save_request.h"
#include "config.h"
#include "grid.h"
#include "tensor.h"
#include "train_state.h"

typedef struct {
  const char *name;
  int ndim;
  int64_t shape[3];
  int split; /* -1 replicated */
  int all_stages;
} spec;

static const spec SPECS[] = {
    {"shared.embed", 2, {40, 24, 0}, 1, 1},
    {"layers.0.attn.q.A", 2, {8, 24, 0}, 1, 0},
    {"layers.0.attn.q.B", 2, {24, 8, 0}, 0, 0},
    {"layers.0.attn_norm", 1, {24, 0, 0}, 0, 0},
    {"layers.0.mlp.qkv.B", 3, {3, 24, 8}, 1, 0},
    {"layers.1.mlp.gate_up.A", 3, {2, 6, 24}, 2, 0},
    {"layers.1.replicated", 2, {7, 9, 0}, -1, 0},
    {"layers.1.wide", 2, {3, 300000, 0}, 1, 0}, /* chunks of 262144 along dim 1 */
    {"final_norm", 1, {24, 0, 0}, -1, 0},
};
#define NSPECS ((int)(sizeof SPECS / sizeof SPECS[0]))

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

static uint64_t hash_name(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* The bit pattern of element g of tensor `name` in category c. */
static uint32_t expected_bits(const char *name, int c, uint64_t g) {
  const uint64_t h = mix(hash_name(name) ^ mix(g * 4 + (uint64_t)c + 1));
  switch (g % 101) {
  case 3: return 0x80000000u;                                  /* -0.0 */
  case 7: return 0x7fc00000u | (uint32_t)(h & 0x3fffff);       /* NaN with payload */
  case 11: return (uint32_t)(h & 0x7fffff) | 1u;               /* denormal */
  default: {
    float v = (float)((double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    uint32_t b;
    memcpy(&b, &v, 4);
    return b;
  }
  }
}

static uint64_t global_index(const tensor_desc *t, size_t j) {
  size_t rem = j;
  uint64_t gi = 0, stride = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    uint64_t coord = rem % (size_t)t->local_shape[d] + (uint64_t)t->offset[d];
    rem /= (size_t)t->local_shape[d];
    gi += coord * stride;
    stride *= (uint64_t)t->shape[d];
  }
  return gi;
}

static const tensor_category CATS[3] = {TENSOR_PARAMS, TENSOR_ADAM_M, TENSOR_ADAM_V};

int main(int argc, char **argv) {
  int provided, rank, size;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 7 || (strcmp(argv[1], "save") && strcmp(argv[1], "load"))) {
    if (rank == 0) fprintf(stderr, "usage: ckpt_roundtrip save|load DIR DP TP PP STEP\n");
    MPI_Finalize();
    return 2;
  }
  const int save = strcmp(argv[1], "save") == 0;
  const int dp = atoi(argv[3]), tp = atoi(argv[4]), pp = atoi(argv[5]);
  const int64_t step = atoll(argv[6]);
  if (provided < MPI_THREAD_MULTIPLE) boost_fail("MPI_THREAD_MULTIPLE not provided");
  process_grid g;
  boost_status err = {0};
  if (grid_init(&g, MPI_COMM_WORLD, dp, tp, pp, &err) != 0) boost_fail("%s", err.msg);

  tensor_registry reg;
  registry_init(&reg, g.tp_rank, g.tp);
  for (int k = 0; k < NSPECS; k++)
    if (SPECS[k].all_stages || k % pp == g.pp_rank) registry_add(&reg, SPECS[k].name, SPECS[k].ndim, SPECS[k].shape, SPECS[k].split, 0);
  boost_backend *be = boost_backend_default();
  tensor_weights w = {0};
  weights_allocate(&w, &reg, be);
  tensor_store store;
  store_init(&store, &reg, &w, be);
  store_allocate(&store, (1u << TENSOR_GRADS) | (1u << TENSOR_ADAM_M) | (1u << TENSOR_ADAM_V));
  for (int c = 0; c < 3; c++) memset(store.arena[CATS[c]], 0xAB, reg.numel * sizeof(float));

  train_config cfg;
  config_defaults(&cfg);
  snprintf(cfg.ckpt.dir, sizeof cfg.ckpt.dir, "%s", argv[2]);
  config_set(&cfg, "ckpt.resume", "auto", &err);
  cfg.ckpt.keep_last = 100;
  cfg.parallel.dp = dp, cfg.parallel.tp = tp, cfg.parallel.pp = pp;

  int bad = 0;
  train_state st;
  train_state_init(&st);
  ckpt_settings set;
  trainer_ckpt_settings(&cfg, &set);
  save_builder saves; /* no model: no activations */
  save_builder_init(&saves, &cfg, &g, NULL, NULL, NULL, TP_NONE);
  saves.fenced = 0; /* nothing waits on the fence here: staged inside the submit */
  if (save) {
    for (int i = 0; i < reg.count; i++) {
      const tensor_desc *t = &reg.tensors[i];
      for (int c = 0; c < 3; c++) {
        uint32_t *p = (uint32_t *)store_data(&store, CATS[c], i);
        for (size_t j = 0; j < t->numel; j++) p[j] = expected_bits(t->name, c, global_index(t, j));
      }
    }
    st.step = step;
    st.data_cursor = step * 100 + 7;
    st.tokens_seen = (double)step * 6400.5;
    for (int64_t i = 0; i < step; i++) train_state_push_loss(&st, 10.0f / (float)(i + 1));
    ckpt_session *s = NULL;
    if (ckpt_open(&set, &g, &store, &s, &err) != 0 || !s) boost_fail("ckpt_open: %s", err.msg);
    boost_status status = {0};
    save_request_submit(&saves, s, &st, CKPT_DUE_FILE, &status);
    if (ckpt_wait(s) != 0) {
      if (rank == 0) fprintf(stderr, "FAIL: the checkpoint of step %lld did not commit\n", (long long)step);
      bad = 1;
    }
    ckpt_stats stats;
    if (ckpt_last_stats(s, &stats) != 0 || !stats.committed || stats.step != step) bad = 1;
    ckpt_close(s);
    if (rank == 0 && !bad) printf("ok save step %lld on dp=%d tp=%d pp=%d\n", (long long)step, dp, tp, pp);
  } else {
    ckpt_session *s = NULL;
    if (ckpt_open(&set, &g, &store, &s, &err) != 0 || !s) boost_fail("ckpt_open: %s", err.msg);
    boost_status note = {0};
    int resumed = trainer_ckpt_resume(s, &st, "", &note) > 0;
    if (rank == 0) printf("resume: %s\n", note.msg);
    if (!resumed || st.step != step) {
      if (rank == 0) fprintf(stderr, "FAIL: expected to resume step %lld, got %s step %lld\n", (long long)step,
                             resumed ? "resumed" : "fresh start", (long long)st.step);
      bad = 1;
    }
    if (st.data_cursor != step * 100 + 7 || st.tokens_seen != (double)step * 6400.5 || st.loss_count != step) {
      if (rank == 0) fprintf(stderr, "FAIL: training state differs (cursor %lld, tokens %.1f, %lld losses)\n",
                             (long long)st.data_cursor, st.tokens_seen, (long long)st.loss_count);
      bad = 1;
    }
    for (int64_t i = 0; i < st.loss_count && !bad; i++)
      if (st.loss_history[i] != 10.0f / (float)(i + 1)) {
        fprintf(stderr, "FAIL: loss %lld differs\n", (long long)i);
        bad = 1;
      }
    for (int i = 0; i < reg.count && !bad; i++) {
      const tensor_desc *t = &reg.tensors[i];
      for (int c = 0; c < 3 && !bad; c++) {
        const uint32_t *p = (const uint32_t *)store_data(&store, CATS[c], i);
        for (size_t j = 0; j < t->numel; j++) {
          const uint64_t gi = global_index(t, j);
          if (p[j] != expected_bits(t->name, c, gi)) {
            fprintf(stderr, "FAIL: rank %d: %s %s element %llu: %08x, expected %08x\n", rank, tensor_category_names[CATS[c]],
                    t->name, (unsigned long long)gi, p[j], expected_bits(t->name, c, gi));
            bad = 1;
            break;
          }
        }
      }
    }
    ckpt_close(s);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !bad) printf("ok load step %lld on dp=%d tp=%d pp=%d: every element equal\n", (long long)step, dp, tp, pp);
  }
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  save_builder_free(&saves);
  train_state_free(&st);
  store_free(&store);
  weights_free(&w, be);
  registry_free(&reg);
  grid_free(&g);
  MPI_Finalize();
  return bad ? 1 : 0;
}
