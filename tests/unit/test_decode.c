/* Generation's decode step: the attention_decode op against the full causal
 * attention (fp32 and bf16, the CPU and guarded backends; the CUDA kernel
 * against this op: test_cuda_decode.c), and the model's
 * KV-cache decoding against recomputing the whole sequence (cola and llama
 * shapes): logits within rounding, the same greedy tokens. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "config.h"
#include "model.h"
#include "model_decode.h"
#include "rng.h"

static boost_backend *backend_or_skip(const char *name, boost_dtype dt) {
  boost_status err = {0};
  boost_backend *be = NULL;
  boost_backend_create(name, dt, 2, 0, &be, &err);
  if (!be) cr_skip_test("%s backend: %s", name, err.msg);
  return be;
}

/* n act values (from floats) uploaded to fresh backend memory. */
static boost_act *upload_act(boost_backend *be, const float *x, size_t n) {
  float *f = boost_be_alloc(be, n * sizeof(float), "test");
  boost_act *a = boost_be_alloc(be, boost_act_bytes(be, n), "test");
  be->mem->upload(be, f, x, n * sizeof(float));
  be->ops->to_act(be, a, f, n);
  be->mem->free(be, f);
  return a;
}
static void download_act(boost_backend *be, float *x, const boost_act *a, size_t n) {
  float *f = boost_be_alloc(be, n * sizeof(float), "test");
  be->ops->to_f32(be, f, a, n);
  be->mem->download(be, x, f, n * sizeof(float));
  be->mem->free(be, f);
}

/* Full causal attention of [B, T, H, hd] (RoPE on q and k first) against T
 * decode steps: every output row, and the cached k (rotated) and v rows. */
static void op_case(const char *name, boost_dtype dt, float tol, int OB, int OT, int OH, int OHD) {
  boost_backend *be = backend_or_skip(name, dt);
  const int OC = OH * OHD;
  const size_t n = (size_t)OB * OT * OC;
  float *q = boost_calloc(n, 4), *k = boost_calloc(n, 4), *v = boost_calloc(n, 4);
  for (size_t i = 0; i < n; i++) {
    q[i] = 2.0f * (float)rng_uniform(11, i) - 1.0f;
    k[i] = 2.0f * (float)rng_uniform(12, i) - 1.0f;
    v[i] = 2.0f * (float)rng_uniform(13, i) - 1.0f;
  }
  float *cs = boost_be_alloc(be, 2 * OT * OHD / 2 * sizeof(float), "rope");
  be->ops->rope_tables(be, cs, cs + OT * OHD / 2, OT, OHD, 10000.0f);
  boost_act *Q = upload_act(be, q, n), *K = upload_act(be, k, n), *V = upload_act(be, v, n);
  boost_act *O = boost_be_alloc(be, boost_act_bytes(be, n), "out");
  float *stats = boost_be_alloc(be, (size_t)OB * OH * OT * 2 * sizeof(float), "stats");
  void *scr = boost_be_alloc(be, be->ops->attention_scratch_bytes(be, OB, OT, OH) + 64, "scratch");
  /* decode inputs first: the full path rotates Q and K in place */
  boost_act *kc = boost_be_alloc(be, boost_act_bytes(be, n), "kc"), *vc = boost_be_alloc(be, boost_act_bytes(be, n), "vc");
  boost_act *qs = boost_be_alloc(be, boost_act_bytes(be, OB * OC), "q1"), *ks = boost_be_alloc(be, boost_act_bytes(be, OB * OC), "k1");
  boost_act *vs = boost_be_alloc(be, boost_act_bytes(be, OB * OC), "v1"), *os = boost_be_alloc(be, boost_act_bytes(be, OB * OC), "o1");
  float *dec = boost_calloc(n, 4), *row = boost_calloc(OB * OC, 4);
  for (int t = 0; t < OT; t++) {
    const size_t rb = boost_act_bytes(be, OC);
    be->mem->copy2d(be, qs, rb, boost_act_at(be, Q, (size_t)t * OC), (size_t)OT * rb, rb, OB);
    be->mem->copy2d(be, ks, rb, boost_act_at(be, K, (size_t)t * OC), (size_t)OT * rb, rb, OB);
    be->mem->copy2d(be, vs, rb, boost_act_at(be, V, (size_t)t * OC), (size_t)OT * rb, rb, OB);
    be->ops->attention_decode(be, os, kc, vc, qs, ks, vs, cs, cs + OT * OHD / 2, OB, t, OT, OH, OHD);
    download_act(be, row, os, OB * OC);
    for (int b = 0; b < OB; b++) memcpy(dec + ((size_t)b * OT + t) * OC, row + (size_t)b * OC, OC * 4);
  }
  be->ops->rope_forward(be, Q, Q, cs, cs + OT * OHD / 2, OB, OT, OH, OHD);
  be->ops->rope_forward(be, K, K, cs, cs + OT * OHD / 2, OB, OT, OH, OHD);
  be->ops->attention_forward(be, O, stats, scr, Q, K, V, OB, OT, OH, OHD);
  float *full = boost_calloc(n, 4), *kr = boost_calloc(n, 4), *kcache = boost_calloc(n, 4);
  float *vin = boost_calloc(n, 4), *vcache = boost_calloc(n, 4);
  download_act(be, full, O, n);
  download_act(be, kr, K, n);
  download_act(be, kcache, kc, n);
  download_act(be, vin, V, n);
  download_act(be, vcache, vc, n);
  for (size_t i = 0; i < n; i++) {
    cr_assert(fabsf(dec[i] - full[i]) <= tol, "%s %s: out[%zu] decode %g vs full %g", name,
              boost_dtype_names[dt], i, dec[i], full[i]);
    cr_assert_eq(kcache[i], kr[i], "%s: cached k[%zu] %g is not the rotated k %g", name, i, kcache[i], kr[i]);
    cr_assert_eq(vcache[i], vin[i], "%s: cached v[%zu]", name, i);
  }
  boost_free(q), boost_free(k), boost_free(v), boost_free(dec), boost_free(row), boost_free(full);
  boost_free(kr), boost_free(kcache), boost_free(vin), boost_free(vcache);
  void *mem[] = {cs, Q, K, V, O, stats, scr, kc, vc, qs, ks, vs, os};
  for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++) be->mem->free(be, mem[i]);
  boost_backend_destroy(be);
}

Test(decode_op, cpu_fp32) { op_case("cpu", BOOST_F32, 2e-6f, 2, 9, 3, 8); }
Test(decode_op, cpu_bf16) { op_case("cpu", BOOST_BF16, 2e-2f, 2, 9, 3, 8); }
Test(decode_op, guarded_fp32) { op_case("guarded", BOOST_F32, 2e-6f, 2, 9, 3, 8); }
Test(decode_op, guarded_bf16) { op_case("guarded", BOOST_BF16, 2e-2f, 2, 9, 3, 8); }
/* long enough for the op's threads (from 2^18 multiply-adds per step) */
Test(decode_op, cpu_fp32_threads) { op_case("cpu", BOOST_F32, 2e-6f, 2, 640, 4, 64); }
Test(decode_op, cpu_bf16_threads) { op_case("cpu", BOOST_BF16, 2e-2f, 2, 640, 4, 64); }
/* three sequences of three heads: split over threads, a thread's run of
 * heads crosses from one sequence into the next (parallel from position 455) */
Test(decode_op, cpu_fp32_threads_split) { op_case("cpu", BOOST_F32, 2e-6f, 3, 512, 3, 64); }

/* ---- the model ------------------------------------------------------------ */

static model_config tiny(const char *lowrank) {
  train_config c;
  config_defaults(&c);
  model_config m = c.model;
  m.vocab = 41;
  m.d_model = 32;
  m.n_layers = 2;
  m.n_heads = 4;
  m.ffn = 48;
  m.rank_attn = 8;
  m.rank_mlp = 12;
  m.seq_len = 16;
  m.init_std = 0.5f; /* logits far from uniform: greedy tokens are decided by clear margins */
  snprintf(m.lowrank, sizeof m.lowrank, "%s", lowrank);
  boost_status err = {0};
  c.model = m;
  cr_assert_eq(config_validate(&c, &err), 0, "%s", err.msg);
  return c.model;
}

static int argmax(const float *x, int n) {
  int b = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[b]) b = i;
  return b;
}

/* Greedy generation of 12 tokens after a 3-token prompt, cached and
 * uncached: the same tokens, logits within tol of the largest logit. A
 * guarded run of the cached decode must equal the CPU's bit for bit.
 * prefill: the prompt's first two tokens enter the cache in one forward
 * (model_prefill) instead of two steps. */
static void model_case(const char *lowrank, tp_mode mode, boost_dtype dt, float tol, int prefill) {
  model_config cfg = tiny(lowrank);
  boost_backend *be = backend_or_skip("cpu", dt), *gb = backend_or_skip("guarded", dt);
  model m, g;
  model_init(&m, &cfg, mode, &(model_options){.backend = be});
  model_init(&g, &cfg, mode, &(model_options){.backend = gb});
  model_init_params(&m, 3);
  model_init_params(&g, 3);
  boost_status err = {0};
  model_kv_cache kv, kg;
  cr_assert_eq(model_kv_cache_init(&kv, &m, 1, cfg.seq_len, &err), 0, "%s", err.msg);
  cr_assert_eq(model_kv_cache_init(&kg, &g, 1, cfg.seq_len, &err), 0, "%s", err.msg);
  int32_t seq[16] = {1, 7, 30};
  float a[41], b[41], c[41];
  for (int n = 3; n < 15; n++) {
    if (n == 3 && prefill) {
      model_prefill(&kv, seq, 2);
      model_prefill(&kg, seq, 2);
      cr_assert(kv.pos == 2 && kg.pos == 2);
    } else if (n == 3)
      for (int i = 0; i < 2; i++) model_decode_step(&kv, &seq[i], a), model_decode_step(&kg, &seq[i], c);
    model_decode_step(&kv, &seq[n - 1], a);
    model_decode_step(&kg, &seq[n - 1], c);
    model_full_logits(&kv, seq, n, b);
    float big = 0.0f;
    for (int i = 0; i < cfg.vocab; i++) big = fmaxf(big, fabsf(b[i]));
    for (int i = 0; i < cfg.vocab; i++) {
      cr_assert(fabsf(a[i] - b[i]) <= tol * big, "%s %s position %d logit %d: cached %g vs recomputed %g", lowrank,
                boost_dtype_names[dt], n - 1, i, a[i], b[i]);
      cr_assert_eq(a[i], c[i], "guarded decode differs from the CPU's at position %d logit %d", n - 1, i);
    }
    cr_assert_eq(argmax(a, cfg.vocab), argmax(b, cfg.vocab), "%s: greedy token at position %d", lowrank, n - 1);
    seq[n] = argmax(a, cfg.vocab);
  }
  model_kv_cache_free(&kv);
  model_kv_cache_free(&kg);
  model_free(&m);
  model_free(&g);
  boost_backend_destroy(be);
  boost_backend_destroy(gb);
}

Test(decode_model, cola_fp32) { model_case("all", TP_NONE, BOOST_F32, 1e-5f, 0); }
Test(decode_model, cola_btp_fp32) { model_case("all", TP_BTP, BOOST_F32, 1e-5f, 0); }
Test(decode_model, llama_fp32) { model_case("none", TP_NONE, BOOST_F32, 1e-5f, 0); }
Test(decode_model, cola_bf16) { model_case("all", TP_NONE, BOOST_BF16, 3e-2f, 0); }
Test(decode_model, llama_bf16) { model_case("none", TP_NONE, BOOST_BF16, 3e-2f, 0); }
Test(decode_model, prefill_cola_fp32) { model_case("all", TP_NONE, BOOST_F32, 1e-5f, 1); }
Test(decode_model, prefill_cola_btp_fp32) { model_case("all", TP_BTP, BOOST_F32, 1e-5f, 1); }
Test(decode_model, prefill_llama_fp32) { model_case("none", TP_NONE, BOOST_F32, 1e-5f, 1); }
Test(decode_model, prefill_cola_bf16) { model_case("all", TP_NONE, BOOST_BF16, 3e-2f, 1); }
Test(decode_model, prefill_llama_bf16) { model_case("none", TP_NONE, BOOST_BF16, 3e-2f, 1); }

/* A model split over pipeline stages cannot decode: one line says why. */
Test(decode_model, refuses_a_stage) {
  model_config cfg = tiny("all");
  model m;
  const model_stage st = {0, 1, 1, 0};
  model_init(&m, &cfg, TP_NONE, &(model_options){.stage = &st});
  model_kv_cache kv;
  boost_status err = {0};
  cr_assert_eq(model_kv_cache_init(&kv, &m, 1, 8, &err), -1);
  cr_assert(strstr(err.msg, "whole model"), "%s", err.msg);
  model_free(&m);
}
