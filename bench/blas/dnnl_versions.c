/* dnnl-versions: one oneDNN's bf16 matmul on the training step's shapes,
 * built once per library (bench/bench_onednn_versions.sh builds it against
 * Debian's oneDNN 2.x and against PyPI's onednn-devel-cpu-gomp 3.x and
 * runs the two side by side): which oneDNN should run gemm_bf16?
 *
 *   dnnl-versions [--threads N] [--min-ms MS] [--rounds R]
 *
 * Each shape runs as gemm_bf16 runs it: C split over N threads by rows
 * (M >= N) or columns, one single-threaded primitive per share, created
 * once and reused; bf16 A and B with the step's layouts (NT forward, NN
 * activation gradients, TN weight gradients over the tokens with an fp32 C
 * and beta = 1), bf16 C except for weight gradients. Shapes: cola-60m and
 * llama-60m at B = 4, T = 256 (1024 tokens; d 512, r 128, ffn 1376, vocab
 * 32000) and attention's per-head blocks (T = 256, hd 64, 128-row blocks,
 * one call each, single-threaded). Prints one line per shape: GFLOP/s
 * (median over R rounds of >= MS ms), the implementation oneDNN chose. Plain
 * C against oneDNN's C API only; no boost library. */
#include <oneapi/dnnl/dnnl.h>

#include "dnnl_compat.h" /* kernels/cpu: the calls whose form differs between 2.x and 3.x */

#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  const char *what;
  int ta, tb, M, N, K, c_f32, block; /* block: attention's, one thread, one call */
} shape;

static const shape shapes[] = {
    {"qkv A fwd", 0, 1, 1024, 384, 512, 0, 0},       {"proj B fwd", 0, 1, 1024, 512, 128, 0, 0},
    {"down A fwd", 0, 1, 1024, 128, 1376, 0, 0},     {"up B fwd", 0, 1, 1024, 1376, 128, 0, 0},
    {"LM head fwd", 0, 1, 1024, 32000, 512, 0, 0},   {"llama q fwd", 0, 1, 1024, 512, 512, 0, 0},
    {"llama up fwd", 0, 1, 1024, 1376, 512, 0, 0},   {"llama down fwd", 0, 1, 1024, 512, 1376, 0, 0},
    {"qkv A dx", 0, 0, 1024, 512, 384, 0, 0},        {"proj B dx", 0, 0, 1024, 128, 512, 0, 0},
    {"LM head dx", 0, 0, 1024, 512, 32000, 0, 0},    {"llama up dx", 0, 0, 1024, 512, 1376, 0, 0},
    {"qkv A dW", 1, 0, 384, 512, 1024, 1, 0},        {"proj B dW", 1, 0, 512, 128, 1024, 1, 0},
    {"up B dW", 1, 0, 1376, 128, 1024, 1, 0},        {"LM head dW", 1, 0, 32000, 512, 1024, 1, 0},
    {"llama q dW", 1, 0, 512, 512, 1024, 1, 0},      {"llama up dW", 1, 0, 1376, 512, 1024, 1, 0},
    {"att QK^T block", 0, 1, 128, 256, 64, 1, 1},    {"att PV block", 0, 0, 128, 64, 256, 0, 1},
    {"att dV=P^T dO", 1, 0, 128, 64, 256, 0, 1},     {"att dS K block", 0, 0, 128, 64, 256, 0, 1},
};

static dnnl_engine_t engine;
static dnnl_stream_t streams[64];

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void check(dnnl_status_t s, const char *what) {
  if (s != dnnl_success) {
    fprintf(stderr, "dnnl-versions: %s failed (status %d)\n", what, (int)s);
    exit(1);
  }
}

typedef struct {
  dnnl_primitive_t prim;
  dnnl_memory_t a, b, c;
  char impl[96];
} part;

/* One single-threaded primitive for rows [m0,m1) x cols [n0,n1) of s. */
static void part_make(const shape *s, int m, int n, int lda, int ldb, int ldc, part *p) {
  const dnnl_data_type_t ct = s->c_f32 ? dnnl_f32 : dnnl_bf16;
  const dnnl_dims_t ad = {m, s->K}, as = {s->ta ? 1 : lda, s->ta ? lda : 1};
  const dnnl_dims_t bd = {s->K, n}, bs = {s->tb ? 1 : ldb, s->tb ? ldb : 1};
  const dnnl_dims_t cd = {m, n}, cs = {ldc, 1};
  dnnl_primitive_attr_t attr;
  dnnl_post_ops_t ops;
  check(dnnl_primitive_attr_create(&attr), "attr");
  check(dnnl_post_ops_create(&ops), "post-ops");
  if (s->c_f32 && !s->block) { /* a weight gradient accumulates: beta = 1 */
    check(boost_dnnl_append_sum_1(ops), "sum post-op");
    check(dnnl_primitive_attr_set_post_ops(attr, ops), "set post-ops");
  }
  dnnl_primitive_desc_t pd;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  boost_dnnl_md amd, bmd, cmd;
  check(boost_dnnl_md_strided(&amd, ad[0], ad[1], as[0], as[1], dnnl_bf16), "A md");
  check(boost_dnnl_md_strided(&bmd, bd[0], bd[1], bs[0], bs[1], dnnl_bf16), "B md");
  check(boost_dnnl_md_strided(&cmd, cd[0], cd[1], cs[0], cs[1], ct), "C md");
  check(boost_dnnl_matmul_pd(&pd, engine, amd, bmd, cmd, attr), "matmul pd");
  check(boost_dnnl_md_memory(&p->a, &amd, engine, DNNL_MEMORY_NONE), "A");
  check(boost_dnnl_md_memory(&p->b, &bmd, engine, DNNL_MEMORY_NONE), "B");
  check(boost_dnnl_md_memory(&p->c, &cmd, engine, DNNL_MEMORY_NONE), "C");
  boost_dnnl_md_release(amd), boost_dnnl_md_release(bmd), boost_dnnl_md_release(cmd);
  const char *impl = "?";
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
  snprintf(p->impl, sizeof p->impl, "%s", impl);
  check(dnnl_primitive_create(&p->prim, pd), "primitive");
  omp_set_num_threads(saved);
  dnnl_primitive_desc_destroy(pd);
  dnnl_post_ops_destroy(ops);
  dnnl_primitive_attr_destroy(attr);
}

static void part_run(part *p, dnnl_stream_t st) {
  const dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, p->a}, {DNNL_ARG_WEIGHTS, p->b}, {DNNL_ARG_DST, p->c}};
  check(dnnl_primitive_execute(p->prim, st, 3, args), "execute");
  check(dnnl_stream_wait(st), "wait");
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int threads = 2, rounds = 5;
  double min_ms = 150;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--min-ms") && i + 1 < argc) min_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--help")) {
      printf("usage: dnnl-versions [--threads N] [--min-ms MS] [--rounds R]\n"
             "one oneDNN's bf16 matmul on the training step's shapes (see the source's top)\n");
      return 0;
    } else {
      fprintf(stderr, "dnnl-versions: unknown argument %s (--help)\n", argv[i]);
      return 2;
    }
  }
  if (threads < 1 || threads > 64 || rounds < 1 || min_ms <= 0) {
    fprintf(stderr, "dnnl-versions: --threads 1..64, --rounds >= 1, --min-ms > 0\n");
    return 2;
  }
  omp_set_num_threads(threads);
  check(dnnl_engine_create(&engine, dnnl_cpu, 0), "engine");
  for (int t = 0; t < threads; t++) check(dnnl_stream_create(&streams[t], engine, dnnl_stream_default_flags), "stream");
  const dnnl_version_t *v = dnnl_version();
  printf("oneDNN %d.%d.%d, %d thread(s), one single-threaded primitive per share\n", v->major, v->minor, v->patch,
         threads);
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const shape *s = &shapes[si];
    const int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N, ldc = s->N;
    const size_t asz = (size_t)s->M * s->K, bsz = (size_t)s->K * s->N, csz = (size_t)s->M * s->N;
    uint16_t *A = malloc(asz * 2), *B = malloc(bsz * 2);
    float *C = calloc(csz, 4);
    for (size_t i = 0; i < asz; i++) A[i] = 0x3f80 ^ (uint16_t)(i & 0x7f);
    for (size_t i = 0; i < bsz; i++) B[i] = 0x3c00 ^ (uint16_t)(i & 0x7f);
    const int nparts = s->block ? 1 : threads;
    part P[64];
    for (int t = 0; t < nparts; t++) { /* rows when M >= N, else columns, on multiples of 16 */
      const int L = s->M >= s->N ? s->M : s->N, ch = ((L + nparts - 1) / nparts + 15) / 16 * 16;
      const int l0 = t * ch < L ? t * ch : L, l1 = (t + 1) * ch < L ? (t + 1) * ch : L;
      const int m = s->M >= s->N ? l1 - l0 : s->M, n = s->M >= s->N ? s->N : l1 - l0;
      memset(&P[t], 0, sizeof P[t]);
      if (m <= 0 || n <= 0) continue;
      part_make(s, m, n, lda, ldb, ldc, &P[t]);
      const size_t ao = s->M >= s->N ? (size_t)l0 * (s->ta ? 1 : lda) : 0;
      const size_t bo = s->M >= s->N ? 0 : (size_t)l0 * (s->tb ? ldb : 1);
      const size_t co = s->M >= s->N ? (size_t)l0 * ldc : (size_t)l0;
      dnnl_memory_set_data_handle(P[t].a, A + ao);
      dnnl_memory_set_data_handle(P[t].b, B + bo);
      dnnl_memory_set_data_handle(P[t].c, s->c_f32 ? (void *)(C + co) : (void *)((uint16_t *)C + co));
    }
    double rate[64];
    for (int r = 0; r < rounds; r++) {
      long calls = 0;
      const double t0 = now();
      double t1;
      do {
        if (nparts == 1) part_run(&P[0], streams[0]);
        else {
#pragma omp parallel num_threads(nparts)
          {
            const int t = omp_get_thread_num();
            if (P[t].prim) part_run(&P[t], streams[t]);
          }
        }
        calls++;
        t1 = now();
      } while ((t1 - t0) * 1e3 < min_ms);
      rate[r] = 2.0 * s->M * s->N * s->K * calls / (t1 - t0) / 1e9;
    }
    qsort(rate, (size_t)rounds, sizeof rate[0], cmp_double);
    printf("%-16s %s%s %5dx%5dx%5d %-4s %8.1f GFLOP/s  %s\n", s->what, s->ta ? "T" : "N", s->tb ? "T" : "N", s->M,
           s->N, s->K, s->c_f32 ? "f32" : "bf16", rate[rounds / 2], P[0].impl);
    for (int t = 0; t < nparts; t++)
      if (P[t].prim) {
        dnnl_primitive_destroy(P[t].prim);
        dnnl_memory_destroy(P[t].a), dnnl_memory_destroy(P[t].b), dnnl_memory_destroy(P[t].c);
      }
    free(A), free(B), free(C);
  }
  return 0;
}
