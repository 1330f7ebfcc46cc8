/* The CUDA decode kernel (attention_decode.cu) run on the CPU: hd_decode.h's
 * phases over the whole grid (grid_run.h: barriers between phases, the
 * block max and sum's warp shuffles emulated, shared memory and the score
 * scratch poisoned), against the CPU backend's attention_decode op: the
 * same inputs decoded step by step from an empty cache, every step's
 * output within rounding, both caches bit for bit. Lengths pos + 1 run
 * from 1 to past 2 * HD_DEC_THREADS, so every thread count per loop and a
 * partial last stride occur; head dims past 2 * HD_DEC_THREADS stride the
 * append and output loops too. test_decode.c checks the CPU op against the
 * full attention. */
#include "cuda_testkit.h"

#include "../../kernels/cuda/hd_decode.h"
#include "backend.h"

TestSuite(cuda_decode, .init = two_threads);

typedef struct {
  hd_decode_args a;
  int bf16;
} decode_ctx;

/* The shared memory of decode_kernel: red (static), then qs (dynamic). */
static void decode_ph(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  const decode_ctx *k = c;
  hd_decode_phase(&k->a, k->bf16, ix, ph, r, (float *)sh, (float *)sh + HD_DEC_WARPS);
}

/* One decode step as attention_decode.cu launches it: a block per (sequence, head). */
static void run_decode_kernel(decode_ctx *c, int B) {
  const grid_kernel k = {(unsigned)(B * c->a.H), 1, HD_DEC_THREADS, HD_DEC_PHASES, hd_decode_sync,
                         (HD_DEC_WARPS + (size_t)c->a.hd) * sizeof(float), NULL, decode_ph};
  grid_run(&k, c);
}

/* T steps of B sequences of H heads of hd: the kernel's phases and the CPU
 * op, each on its own caches, from the same q, k, v. */
static void decode_case(int B, int T, int H, int hd, int bf16) {
  boost_status err = {0};
  boost_backend *be = NULL;
  boost_backend_create("cpu", bf16 ? BOOST_BF16 : BOOST_F32, 2, 0, &be, &err);
  cr_assert_not_null(be, "cpu backend: %s", err.msg);
  rng_seed(700 + (uint64_t)(T * 31 + H * 7 + hd + bf16));
  const int C = H * hd;
  const size_t step = (size_t)B * C, cache = (size_t)B * T * C, es = bf16 ? 2 : 4;
  float *qf = frand(step * T, -1, 1), *kf = frand(step * T, -1, 1), *vf = frand(step * T, -1, 1);
  void *q = act_of(qf, step * T, bf16), *k = act_of(kf, step * T, bf16), *v = act_of(vf, step * T, bf16);
  float *cs = falloc((size_t)T * hd);
  be->ops->rope_tables(be, cs, cs + (size_t)T * hd / 2, T, hd, 10000.0f);
  /* the caches start poisoned: a row a step should write and does not shows */
  char *kc = malloc(cache * es), *vc = malloc(cache * es), *kc2 = malloc(cache * es), *vc2 = malloc(cache * es);
  char *out = malloc(step * es), *out2 = malloc(step * es);
  cr_assert(kc && vc && kc2 && vc2 && out && out2);
  memset(kc, 0xff, cache * es), memset(vc, 0xff, cache * es), memset(kc2, 0xff, cache * es);
  memset(vc2, 0xff, cache * es);
  float *scores = fnan((size_t)B * H * T);
  decode_ctx c = {.bf16 = bf16};
  c.a = (hd_decode_args){.out = out2, .kc = kc2, .vc = vc2, .cos_t = cs, .sin_t = cs + (size_t)T * hd / 2,
                         .scores = scores, .H = H, .max_T = T, .hd = hd, .scale = 1.0f / sqrtf((float)hd)};
  for (int pos = 0; pos < T; pos++) {
    const size_t o = (size_t)pos * step * es;
    be->ops->attention_decode(be, (boost_act *)out, (boost_act *)kc, (boost_act *)vc, (cact *)((char *)q + o),
                              (cact *)((char *)k + o), (cact *)((char *)v + o), cs, cs + (size_t)T * hd / 2, B, pos,
                              T, H, hd);
    c.a.q = (char *)q + o, c.a.k = (char *)k + o, c.a.v = (char *)v + o, c.a.pos = pos;
    memset(out2, 0xff, step * es);
    for (size_t i = 0; i < (size_t)B * H * (pos + 1); i++) scores[i] = NAN;
    run_decode_kernel(&c, B);
    for (size_t i = 0; i < step; i++) {
      const float got = hd_ld(out2, i, bf16), want = hd_ld(out, i, bf16);
      cr_assert(fabsf(got - want) <= (bf16 ? 1e-2f : 2e-6f + 1e-5f * fabsf(want)),
                "%s B%d H%d hd%d pos %d: out[%zu] (sequence %zu, head %zu, dim %zu) kernel %.9g, CPU op %.9g",
                bf16 ? "bf16" : "fp32", B, H, hd, pos, i, i / C, i % C / hd, i % hd, got, want);
    }
  }
  for (size_t i = 0; i < cache; i++) {
    cr_assert(!memcmp(kc2 + i * es, kc + i * es, es), "%s T%d: k cache [%zu] kernel %g, CPU op %g",
              bf16 ? "bf16" : "fp32", T, i, hd_ld(kc2, i, bf16), hd_ld(kc, i, bf16));
    cr_assert(!memcmp(vc2 + i * es, vc + i * es, es), "%s T%d: v cache [%zu] kernel %g, CPU op %g",
              bf16 ? "bf16" : "fp32", T, i, hd_ld(vc2, i, bf16), hd_ld(vc, i, bf16));
  }
  free(qf), free(kf), free(vf), free(q), free(k), free(v), free(cs), free(scores);
  free(kc), free(vc), free(kc2), free(vc2), free(out), free(out2);
  boost_backend_destroy(be);
}

/* lengths 1 .. 300: under, at and past one and two strides of the block */
Test(cuda_decode, fp32_matches_cpu_op) {
  decode_case(2, 300, 3, 16, 0);
  decode_case(1, 5, 2, 272, 0); /* 136 pairs, 272 outputs: two strides in the append and output loops */
}
Test(cuda_decode, bf16_matches_cpu_op) {
  decode_case(2, 300, 3, 16, 1);
  decode_case(1, 5, 2, 272, 1);
}
