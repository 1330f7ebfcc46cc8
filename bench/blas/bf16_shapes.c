/* bf16-shapes: the training step's GEMMs in fp32 and bf16, library by
 * library, interleaved shape by shape: which library should run boost's
 * bf16 GEMMs, and how much faster than today's fp32 are they?
 *
 *   bf16-shapes [--threads N] [--configs LIST] [--min-ms MS] [--rounds R]
 *               [--wait-idle S] [--list] [--overhead-only]
 *
 * Shapes: every GEMM one training step of a CoLA model makes (model_proj.c's
 * projection groups forward and backward, model_head.c's LM head), B = 4,
 * for each MODEL:T in LIST (default cola-60m:256,cola-60m:1024,
 * cola-130m:256,cola-130m:1024,square; "square" is 2048^3, "tiny" the
 * test preset). Candidates, per shape, in a rotating order each round:
 *
 *   openblas      fp32, boost's kern_gemm() (OpenBLAS serial inside our OpenMP
 *                 threads, C split by rows or columns) -- today's path
 *   onednn-f32    oneDNN matmul, fp32
 *   onednn-bf16   oneDNN matmul, bf16 inputs, fp32 output
 *   onednn-b16o   oneDNN matmul, bf16 inputs and output (shapes whose
 *                 output is an activation or its gradient)
 *   onednn-split  (N >= 2 threads) bf16 as the step wants its output, on
 *                 boost's split: one single-threaded primitive per part
 *                 (what gemm_bf16 does; against onednn-bf16/-b16o, where
 *                 oneDNN threads one primitive itself)
 *   libxsmm       libxsmm 1.17 bf16 kernel (fp32 output) over the whole
 *                 matrix, per thread part; operands packed to its VNNI
 *                 layout beforehand and that packing NOT timed (an upper
 *                 bound for it)
 *   gemm_bf16     boost's kern_gemm_bf16(), output as the step wants it
 *
 * oneDNN threads itself over the process's OpenMP pool (the same GNU
 * OpenMP runtime); --threads N sets that pool and OpenBLAS's count, as
 * boost-train's train.threads does. Prints markdown tables: GFLOP/s per
 * shape (median over R rounds of >= MS ms each) with each candidate's ratio
 * to openblas, the implementation oneDNN chose (its ISA), the one-off
 * creation cost, then per configuration the step's GEMM time at those rates
 * (shape rates times calls per step), and the per-call overhead of a cached
 * primitive. */
#include "cpu_internal.h" /* first (see there): boost_split, the kernels' split of a GEMM over threads */

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bf16.h"
#include "bf16_bench.h"
#include "check.h"
#include "gemm_bf16.h"
#include "ops.h"

#ifdef BOOST_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>

#include "dnnl_compat.h"
#endif
#ifdef BOOST_HAVE_LIBXSMM
#include <libxsmm.h>
#endif

void openblas_set_num_threads(int);
char *openblas_get_corename(void);

/* ---- candidates ------------------------------------------------------------- */

enum { C_OPENBLAS, C_DNNL_F32, C_DNNL_BF16, C_DNNL_B16O, C_DNNL_SPLIT, C_XSMM, C_GEMM_BF16, N_CAND };
static const char *const CAND_NAMES[N_CAND] = {"openblas", "onednn-f32", "onednn-bf16", "onednn-b16o",
                                               "onednn-split", "libxsmm", "gemm_bf16"};
static int g_threads = 1;

typedef struct {
  int ok;            /* measured for this shape */
  char impl[64];     /* implementation (ISA) */
  double create_ms;  /* one-off creation */
  void *state;       /* candidate's own */
} cand_state;

#ifdef BOOST_HAVE_DNNL
static dnnl_engine_t g_engine;
static dnnl_stream_t g_streams[4]; /* one per thread: threads do not share a stream */

typedef struct {
  dnnl_primitive_t p;
  dnnl_memory_t a, b, c;
} mm_prim;

/* One matmul primitive for rows [m0, m1) or columns [n0, n1) of a shape
 * (the whole shape when they span it): C = op(A) op(B) (+ C when beta). */
static int mm_make(mm_prim *g, const shape *s, int m0, int m1, int n0, int n1, dnnl_data_type_t in,
                     dnnl_data_type_t out, const void *A, const void *B, void *C, char *impl, size_t impl_n) {
  const size_t ein = in == dnnl_f32 ? 4 : 2, eout = out == dnnl_f32 ? 4 : 2;
  const dnnl_dims_t ad = {m1 - m0, s->K}, as = {s->ta ? 1 : s->lda, s->ta ? s->lda : 1};
  const dnnl_dims_t bd = {s->K, n1 - n0}, bs = {s->tb ? 1 : s->ldb, s->tb ? s->ldb : 1};
  const dnnl_dims_t cd = {m1 - m0, n1 - n0}, cs = {s->ldc, 1};
  boost_dnnl_md amd = {0}, bmd = {0}, cmd = {0};
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t po = NULL;
  dnnl_primitive_desc_t pd = NULL;
  int ok = boost_dnnl_md_strided(&amd, ad[0], ad[1], as[0], as[1], in) == dnnl_success &&
           boost_dnnl_md_strided(&bmd, bd[0], bd[1], bs[0], bs[1], in) == dnnl_success &&
           boost_dnnl_md_strided(&cmd, cd[0], cd[1], cs[0], cs[1], out) == dnnl_success &&
           dnnl_primitive_attr_create(&attr) == dnnl_success;
  if (ok && s->beta)
    ok = dnnl_post_ops_create(&po) == dnnl_success && boost_dnnl_append_sum_1(po) == dnnl_success &&
         dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
  ok = ok && boost_dnnl_matmul_pd(&pd, g_engine, amd, bmd, cmd, attr) == dnnl_success;
  const char *name = "?";
  if (ok) dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name);
  if (impl) snprintf(impl, impl_n, "%s", ok ? name : "none");
  ok = ok && dnnl_primitive_create(&g->p, pd) == dnnl_success;
  /* the part's first element: row m0 of op(A), column n0 of op(B) */
  const char *a0 = (const char *)A + ein * (size_t)m0 * (s->ta ? 1 : (size_t)s->lda);
  const char *b0 = (const char *)B + ein * (size_t)n0 * (s->tb ? (size_t)s->ldb : 1);
  char *c0 = (char *)C + eout * ((size_t)m0 * s->ldc + n0);
  ok = ok && boost_dnnl_md_memory(&g->a, &amd, g_engine, (void *)(uintptr_t)a0) == dnnl_success &&
       boost_dnnl_md_memory(&g->b, &bmd, g_engine, (void *)(uintptr_t)b0) == dnnl_success &&
       boost_dnnl_md_memory(&g->c, &cmd, g_engine, c0) == dnnl_success;
  boost_dnnl_md_release(amd), boost_dnnl_md_release(bmd), boost_dnnl_md_release(cmd);
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (po) dnnl_post_ops_destroy(po);
  if (attr) dnnl_primitive_attr_destroy(attr);
  return ok;
}

static void mm_run(const mm_prim *g, int t) {
  const dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, g->a}, {DNNL_ARG_WEIGHTS, g->b}, {DNNL_ARG_DST, g->c}};
  if (dnnl_primitive_execute(g->p, g_streams[t], 3, args) != dnnl_success ||
      dnnl_stream_wait(g_streams[t]) != dnnl_success)
    boost_fail("bf16-shapes: oneDNN matmul failed");
}

static void mm_free(mm_prim *g) {
  if (g->p) dnnl_primitive_destroy(g->p);
  if (g->a) dnnl_memory_destroy(g->a);
  if (g->b) dnnl_memory_destroy(g->b);
  if (g->c) dnnl_memory_destroy(g->c);
}
#endif

/* boost's split of C over threads (cpu_internal.h's sgemm_slice): rows when
 * M >= N, else columns, in parts aligned to 16 -- gemm_bf16's too. */
static void split_part(const shape *s, int t, int nt, int *m0, int *m1, int *n0, int *n1) {
  *m0 = 0, *m1 = s->M, *n0 = 0, *n1 = s->N;
  if (s->M >= s->N) boost_split(s->M, nt, t, 16, m0, m1);
  else boost_split(s->N, nt, t, 16, n0, n1);
}

#ifdef BOOST_HAVE_LIBXSMM
/* libxsmm is column-major: C^T (N x M) = op(B)^T (N x K) . op(A)^T (K x M).
 * Its bf16 kernels want the first factor in VNNI pairs: [K/2][N][2]. Each
 * thread's part is the rows [m0, m1) of C, i.e. columns of C^T. */
typedef struct {
  bf16_t *vnni; /* op(B)^T packed */
  bf16_t *at;   /* op(A) row-major, dense (a copy when trans_a) */
  int lda_at;
  libxsmm_bsmmfunction k[2];
  int parts[3];
} xsmm_gemm;

static int xsmm_make(xsmm_gemm *x, const operands *o, char *impl, size_t impl_n) {
  const shape *s = o->s;
  if (s->K % 2) return 0;
  x->vnni = xmalloc((size_t)s->K * s->N * 2);
  for (int k = 0; k < s->K; k++)
    for (int n = 0; n < s->N; n++) {
      const bf16_t v = s->tb ? o->B16[(size_t)n * s->ldb + k] : o->B16[(size_t)k * s->ldb + n];
      x->vnni[((size_t)(k / 2) * s->N + n) * 2 + (k % 2)] = v;
    }
  if (s->ta) {
    x->at = xmalloc((size_t)s->M * s->K * 2);
    for (int m = 0; m < s->M; m++)
      for (int k = 0; k < s->K; k++) x->at[(size_t)m * s->K + k] = o->A16[(size_t)k * s->lda + m];
    x->lda_at = s->K;
  } else {
    x->lda_at = s->lda;
  }
  const int nt = g_threads > 2 ? 2 : g_threads;
  const float alpha = 1.0f, beta = (float)s->beta;
  const int flags = LIBXSMM_GEMM_FLAG_VNNI_A;
  x->parts[0] = 0;
  for (int t = 0; t < nt; t++) {
    int m0, m1, n0, n1;
    shape rows = *s;
    rows.N = 1; /* split by rows of C always: columns of C^T */
    split_part(&rows, t, nt, &m0, &m1, &n0, &n1);
    x->parts[t + 1] = m1;
    const libxsmm_blasint m = s->N, n = m1 - m0, k = s->K, la = s->N, lb = x->lda_at, lc = s->ldc;
    x->k[t] = n > 0 ? libxsmm_bsmmdispatch(m, n, k, &la, &lb, &lc, &alpha, &beta, &flags, NULL) : NULL;
    if (n > 0 && !x->k[t]) return 0;
  }
  if (nt == 1) x->parts[2] = s->M, x->k[1] = NULL;
  snprintf(impl, impl_n, "%s", libxsmm_get_target_arch());
  return 1;
}

static void xsmm_run(const xsmm_gemm *x, const operands *o, int nt) {
  const bf16_t *at = x->at ? x->at : o->A16;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const int t = omp_get_thread_num();
    if (t < 2 && x->k[t]) {
      const int m0 = x->parts[t];
      x->k[t](x->vnni, at + (size_t)m0 * x->lda_at, o->Cf + (size_t)m0 * o->s->ldc);
    }
  }
}

static void xsmm_free(xsmm_gemm *x) {
  boost_free(x->vnni);
  boost_free(x->at);
}
#endif

typedef struct {
#ifdef BOOST_HAVE_DNNL
  mm_prim g[4]; /* per thread part for the split candidate */
  int parts;
#endif
#ifdef BOOST_HAVE_LIBXSMM
  xsmm_gemm x;
#endif
  int dummy;
} cand_data;

/* Prepares candidate c for shape o->s (creation timed); 0 when it does not
 * apply or the library refuses. */
static int cand_prepare(int c, const operands *o, cand_state *st) {
  const shape *s = o->s;
  cand_data *d = xmalloc(sizeof *d);
  st->state = d;
  st->impl[0] = '\0';
  const double t0 = now_s();
  int ok = 0;
  switch (c) {
  case C_OPENBLAS:
    snprintf(st->impl, sizeof st->impl, "%s", openblas_get_corename());
    ok = 1;
    break;
#ifdef BOOST_HAVE_DNNL
  case C_DNNL_F32:
    ok = mm_make(&d->g[0], s, 0, s->M, 0, s->N, dnnl_f32, dnnl_f32, o->A, o->B, o->C, st->impl, sizeof st->impl);
    break;
  case C_DNNL_BF16:
    ok = mm_make(&d->g[0], s, 0, s->M, 0, s->N, dnnl_bf16, dnnl_f32, o->A16, o->B16, o->Cf, st->impl,
                   sizeof st->impl);
    break;
  case C_DNNL_B16O:
    ok = s->act && mm_make(&d->g[0], s, 0, s->M, 0, s->N, dnnl_bf16, dnnl_bf16, o->A16, o->B16, o->C16, st->impl,
                             sizeof st->impl);
    break;
  case C_DNNL_SPLIT: {
    if (g_threads < 2 || g_threads > 4) break;
    /* single-threaded primitives: made with one OpenMP thread, run inside
     * our parallel region (where oneDNN does not fork) */
    omp_set_num_threads(1);
    ok = 1;
    d->parts = g_threads;
    for (int t = 0; t < g_threads && ok; t++) {
      int m0, m1, n0, n1;
      split_part(s, t, g_threads, &m0, &m1, &n0, &n1);
      if (m1 <= m0 || n1 <= n0) continue;
      ok = mm_make(&d->g[t], s, m0, m1, n0, n1, dnnl_bf16, s->act ? dnnl_bf16 : dnnl_f32, o->A16, o->B16,
                     s->act ? (void *)o->C16 : (void *)o->Cf, st->impl, sizeof st->impl);
    }
    omp_set_num_threads(g_threads);
    break;
  }
#endif
#ifdef BOOST_HAVE_LIBXSMM
  case C_XSMM:
    ok = g_threads <= 2 && xsmm_make(&d->x, o, st->impl, sizeof st->impl);
    break;
#endif
  case C_GEMM_BF16: {
    /* creation = the first call less the second (the same product, cached) */
    double first = 0, second = 0;
    for (int k = 0; k < 2; k++) {
      const double t = now_s();
      kern_gemm_bf16(s->ta, s->tb, s->M, s->N, s->K, o->A16, s->lda, o->B16, s->ldb, (float)s->beta,
                s->act ? (void *)o->C16 : o->Cf, s->ldc, !s->act);
      *(k ? &second : &first) = now_s() - t;
    }
    snprintf(st->impl, sizeof st->impl, "%s", gemm_bf16_native() ? "native" : "fallback");
    st->create_ms = (first - second) * 1e3;
    st->ok = 1;
    return 1;
  }
  default: break;
  }
  st->create_ms = (now_s() - t0) * 1e3;
  st->ok = ok;
  return ok;
}

static void cand_run(int c, const operands *o, cand_state *st) {
  const shape *s = o->s;
  cand_data *d = st->state;
  (void)d;
  switch (c) {
  case C_OPENBLAS:
    kern_gemm(s->ta, s->tb, s->M, s->N, s->K, o->A, s->lda, o->B, s->ldb, (float)s->beta, o->C, s->ldc);
    break;
#ifdef BOOST_HAVE_DNNL
  case C_DNNL_F32:
  case C_DNNL_BF16:
  case C_DNNL_B16O: mm_run(&d->g[0], 0); break;
  case C_DNNL_SPLIT:
#pragma omp parallel num_threads(d->parts)
    {
      const int t = omp_get_thread_num();
      if (t < d->parts && d->g[t].p) mm_run(&d->g[t], t);
    }
    break;
#endif
#ifdef BOOST_HAVE_LIBXSMM
  case C_XSMM: xsmm_run(&d->x, o, g_threads); break;
#endif
  case C_GEMM_BF16:
    kern_gemm_bf16(s->ta, s->tb, s->M, s->N, s->K, o->A16, s->lda, o->B16, s->ldb, (float)s->beta,
              s->act ? (void *)o->C16 : o->Cf, s->ldc, !s->act);
    break;
  default: break;
  }
}

static void cand_free(int c, cand_state *st) {
  cand_data *d = st->state;
  if (!d) return;
#ifdef BOOST_HAVE_DNNL
  for (int t = 0; t < 4; t++) mm_free(&d->g[t]);
#endif
#ifdef BOOST_HAVE_LIBXSMM
  if (c == C_XSMM) xsmm_free(&d->x);
#endif
  (void)c;
  boost_free(d);
  st->state = NULL;
}

/* GFLOP/s of calls for at least min_s (at least one call: a warm-up call
 * ran when the candidate was prepared). */
static double time_candidate(int c, const operands *o, cand_state *st, double min_s) {
  long calls = 0;
  const double t0 = now_s();
  double dt;
  do {
    cand_run(c, o, st);
    calls++;
    dt = now_s() - t0;
  } while (dt < min_s);
  return flops(o->s) * calls / dt / 1e9;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* ---- the run ----------------------------------------------------------------- */

typedef struct {
  double gflops[N_CAND]; /* median; 0 = not measured */
  double create_ms[N_CAND];
  char impl[N_CAND][64];
  double other_load; /* cores busy with other processes while the rounds ran */
} result;

static result g_results[512];

static void measure_shape(int i, int rounds, double min_s) {
  const shape *s = &g_shapes[i].s;
  operands o;
  operands_init(&o, s);
  cand_state st[N_CAND];
  memset(st, 0, sizeof st);
  result *r = &g_results[i];
  for (int c = 0; c < N_CAND; c++) {
    cand_prepare(c, &o, &st[c]);
    r->create_ms[c] = st[c].create_ms;
    snprintf(r->impl[c], sizeof r->impl[c], "%s", st[c].impl);
    if (st[c].ok) cand_run(c, &o, &st[c]); /* warm: first-touch of C, packing buffers */
  }
  double g[N_CAND][32];
  load_mark lm;
  load_start(&lm);
  for (int k = 0; k < rounds; k++)
    for (int j = 0; j < N_CAND; j++) {
      const int c = (j + k) % N_CAND; /* rotate: no candidate always runs first */
      if (st[c].ok) g[c][k] = time_candidate(c, &o, &st[c], min_s);
    }
  r->other_load = load_other(&lm);
  for (int c = 0; c < N_CAND; c++) {
    r->gflops[c] = 0.0;
    if (!st[c].ok) continue;
    qsort(g[c], (size_t)rounds, sizeof g[c][0], cmp_double);
    r->gflops[c] = rounds % 2 ? g[c][rounds / 2] : 0.5 * (g[c][rounds / 2 - 1] + g[c][rounds / 2]);
    cand_free(c, &st[c]);
  }
  operands_free(&o);
}

/* The shape table, a row as soon as its shape is measured (a long run
 * stopped early keeps what it measured). */
static void print_shape_header(void) {
  printf("\n| shape (op M N K beta; lda ldb ldc) | out | calls in | ");
  for (int c = 0; c < N_CAND; c++) printf("%s GFLOP/s | ", CAND_NAMES[c]);
  for (int c = 1; c < N_CAND; c++) printf("%s/openblas | ", CAND_NAMES[c]);
  printf("onednn-f32 impl | onednn-bf16 impl | create ms (onednn-bf16) | other load |\n|---|---|---|");
  for (int c = 0; c < 2 * N_CAND - 1; c++) printf("---:|");
  printf("---|---|---:|---:|\n");
}

static void print_shape_row(int i) {
  const shape *s = &g_shapes[i].s;
  const result *r = &g_results[i];
  printf("| %c%c %d %d %d %d; %d %d %d | %s | %s | ", s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->M, s->N, s->K, s->beta,
         s->lda, s->ldb, s->ldc, s->act ? "act" : "f32", g_shapes[i].roles);
  for (int c = 0; c < N_CAND; c++)
    if (r->gflops[c] > 0) printf("%.1f | ", r->gflops[c]);
    else printf("- | ");
  for (int c = 1; c < N_CAND; c++)
    if (r->gflops[c] > 0 && r->gflops[0] > 0) printf("%.2fx | ", r->gflops[c] / r->gflops[0]);
    else printf("- | ");
  printf("%s | %s | %.2f | %.2f |\n", r->impl[C_DNNL_F32][0] ? r->impl[C_DNNL_F32] : "-",
         r->impl[C_DNNL_BF16][0] ? r->impl[C_DNNL_BF16] : "-", r->create_ms[C_DNNL_BF16], r->other_load);
  fflush(stdout);
}

/* Per configuration: the step's GEMM time if every call ran at the shape's
 * rate. "bf16 as the step" = bf16 output for activations, fp32 otherwise. */
static void print_step_table(void) {
  printf("\n| config | GEMM GFLOP per step | openblas ms | onednn-f32 | onednn-bf16 (f32 out) | "
         "onednn bf16 as the step | onednn-split | libxsmm | gemm_bf16 | most other load |\n"
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int k = 0; k < g_nconfigs; k++) {
    const config *cf = &g_configs[k];
    double gfl = 0, ms[N_CAND + 1] = {0}, load = 0;
    int missing[N_CAND + 1] = {0};
    for (int j = 0; j < cf->n; j++) {
      const int i = cf->rows[j];
      const result *r = &g_results[i];
      const double f = flops(&g_shapes[i].s) * cf->counts[j] / 1e9;
      gfl += f;
      if (r->other_load > load) load = r->other_load;
      for (int c = 0; c < N_CAND; c++) {
        if (r->gflops[c] > 0) ms[c] += f / r->gflops[c] * 1e3;
        else missing[c] = 1;
      }
      const int step_c = g_shapes[i].s.act && r->gflops[C_DNNL_B16O] > 0 ? C_DNNL_B16O : C_DNNL_BF16;
      if (r->gflops[step_c] > 0) ms[N_CAND] += f / r->gflops[step_c] * 1e3;
      else missing[N_CAND] = 1;
    }
    printf("| %s | %.1f | %.1f |", cf->name, gfl, missing[0] ? 0.0 : ms[0]);
    const int cols[] = {C_DNNL_F32, C_DNNL_BF16, N_CAND, C_DNNL_SPLIT, C_XSMM, C_GEMM_BF16};
    for (size_t j = 0; j < sizeof cols / sizeof cols[0]; j++) {
      const int c = cols[j];
      if (missing[c] || missing[0]) printf(" - |");
      else printf(" %.1f (%.2fx) |", ms[c], ms[0] / ms[c]);
    }
    printf(" %.2f |\n", load);
  }
}

/* Per-call cost of a cached primitive: a 16 x 16 x 16 product, where the
 * arithmetic is nothing and the call is everything. */
static void print_overhead(void) {
  const shape s = {0, 1, 16, 16, 16, 16, 16, 16, 0, 1};
  operands o;
  operands_init(&o, &s);
  printf("\n| per call, 16x16x16 (cached) | microseconds |\n|---|---:|\n");
  for (int c = 0; c < N_CAND; c++) {
    if (c == C_DNNL_SPLIT || c == C_XSMM) continue;
    cand_state st = {0};
    if (!cand_prepare(c, &o, &st)) {
      cand_free(c, &st);
      continue;
    }
    cand_run(c, &o, &st);
    double best = 1e9;
    for (int k = 0; k < 5; k++) {
      const int n = 20000;
      const double t0 = now_s();
      for (int j = 0; j < n; j++) cand_run(c, &o, &st);
      const double us = (now_s() - t0) / n * 1e6;
      if (us < best) best = us;
    }
    printf("| %s | %.2f |\n", CAND_NAMES[c], best);
    cand_free(c, &st);
  }
  operands_free(&o);
}

static void print_creation_summary(void) {
  double v[512];
  int n = 0;
  for (int i = 0; i < g_nshapes; i++)
    if (g_results[i].gflops[C_DNNL_BF16] > 0) v[n++] = g_results[i].create_ms[C_DNNL_BF16];
  if (!n) return;
  qsort(v, (size_t)n, sizeof v[0], cmp_double);
  double gb[512];
  int m = 0;
  for (int i = 0; i < g_nshapes; i++)
    if (g_results[i].gflops[C_GEMM_BF16] > 0) gb[m++] = g_results[i].create_ms[C_GEMM_BF16];
  qsort(gb, (size_t)m, sizeof gb[0], cmp_double);
  printf("\nprimitive creation, onednn-bf16 (first of its shape, JIT): median %.2f ms, min %.2f, max %.2f over %d "
         "shapes\n",
         v[n / 2], v[0], v[n - 1], n);
  if (m)
    printf("gemm_bf16, first call of a shape less the second (oneDNN's own primitive cache already holds the shape "
           "here): median %.2f ms, max %.2f\n",
           gb[m / 2], gb[m - 1]);
}

static void usage(FILE *f) {
  fprintf(f, "usage: bf16-shapes [--threads N] [--configs LIST] [--min-ms MS] [--rounds R] [--wait-idle S] [--list]\n"
             "                   [--overhead-only]\n"
             "the training step's GEMMs: OpenBLAS fp32 (boost's gemm) against oneDNN fp32/bf16, libxsmm bf16 and\n"
             "boost's gemm_bf16; LIST: MODEL:T,... (MODEL tiny, cola-60m, cola-130m; B = 4) and/or square\n"
             "(default cola-60m:256,cola-60m:1024,cola-130m:256,cola-130m:1024,square); MS per timing (100),\n"
             "R rounds, median reported (3); N OpenMP threads (1); before each shape wait up to S s for\n"
             "less than 0.1 core of other load (0: do not wait)\n");
}

/* A number in [lo, hi] (whole when integer) or one line naming what the
 * option wants; nonzero then. */
static int number_arg(const char *opt, const char *s, double lo, double hi, int integer, double *out,
                      const char *want) {
  char *end = NULL;
  const double v = strtod(s, &end);
  if (end == s || *end || !(v >= lo && v <= hi) || (integer && v != (double)(long)v)) {
    fprintf(stderr, "bf16-shapes: %s wants %s, got '%s'\n", opt, want, s);
    return -1;
  }
  *out = v;
  return 0;
}

int main(int argc, char **argv) {
  double min_ms = 100;
  int rounds = 3, list = 0, overhead_only = 0;
  double wait_s = 0;
  const char *configs = "cola-60m:256,cola-60m:1024,cola-130m:256,cola-130m:1024,square";
  for (int i = 1; i < argc; i++) {
    const int has_value = i + 1 < argc;
    double v;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--list")) {
      list = 1;
    } else if (!strcmp(argv[i], "--overhead-only")) {
      overhead_only = 1;
    } else if (!strcmp(argv[i], "--configs") && has_value) {
      configs = argv[++i];
    } else if (!strcmp(argv[i], "--threads") && has_value) {
      if (number_arg(argv[i], argv[i + 1], 1, 4, 1, &v, "1 to 4")) return 2;
      g_threads = (int)v, i++;
    } else if (!strcmp(argv[i], "--rounds") && has_value) {
      if (number_arg(argv[i], argv[i + 1], 1, 31, 1, &v, "1 to 31")) return 2;
      rounds = (int)v, i++;
    } else if (!strcmp(argv[i], "--wait-idle") && has_value) {
      if (number_arg(argv[i], argv[i + 1], 0, 3600, 0, &wait_s, "seconds in [0, 3600]")) return 2;
      i++;
    } else if (!strcmp(argv[i], "--min-ms") && has_value) {
      if (number_arg(argv[i], argv[i + 1], 1e-9, 60000, 0, &min_ms, "a number of milliseconds in (0, 60000]")) return 2;
      i++;
    } else {
      fprintf(stderr, "bf16-shapes: unknown argument '%s' (see --help)\n", argv[i]);
      return 2;
    }
  }
  if (parse_configs(configs) != 0) {
    fprintf(stderr,
            "bf16-shapes: --configs wants MODEL:T,... (MODEL tiny, cola-60m or cola-130m) or square, got '%s'\n",
            configs);
    return 2;
  }
  if (list) {
    for (int i = 0; i < g_nshapes; i++) {
      const shape *s = &g_shapes[i].s;
      printf("%c%c %d %d %d %d; %d %d %d | %s\n", s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->M, s->N, s->K, s->beta,
             s->lda, s->ldb, s->ldc, g_shapes[i].roles);
    }
    return 0;
  }
  /* as boost-train does with train.threads */
  omp_set_num_threads(g_threads);
  openblas_set_num_threads(g_threads);
#ifdef BOOST_HAVE_DNNL
  if (dnnl_engine_create(&g_engine, dnnl_cpu, 0) != dnnl_success)
    boost_fail("bf16-shapes: oneDNN cannot create a CPU engine");
  for (int t = 0; t < 4; t++)
    if (dnnl_stream_create(&g_streams[t], g_engine, dnnl_stream_default_flags) != dnnl_success)
      boost_fail("bf16-shapes: oneDNN cannot create a stream");
  const dnnl_version_t *v = dnnl_version();
  printf("oneDNN %d.%d.%d (CPU runtime %s), effective ISA 0x%x\n", v->major, v->minor, v->patch,
         v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "not OpenMP", (unsigned)dnnl_get_effective_cpu_isa());
#else
  printf("oneDNN: not built in\n");
#endif
#ifdef BOOST_HAVE_LIBXSMM
  libxsmm_init();
  printf("libxsmm %s, target %s\n", LIBXSMM_CONFIG_VERSION, libxsmm_get_target_arch());
#else
  printf("libxsmm: not built in\n");
#endif
  char info[512];
  gemm_bf16_info(info, sizeof info);
  printf("OpenBLAS core %s; threads %d; gemm_bf16: %s\n", openblas_get_corename(), g_threads, info);
  fflush(stdout);
  if (!overhead_only) {
    print_shape_header();
    for (int i = 0; i < g_nshapes; i++) {
      if (wait_s > 0) wait_idle(wait_s);
      measure_shape(i, rounds, min_ms / 1e3);
      print_shape_row(i);
      fprintf(stderr, "bf16-shapes: %d/%d shapes\r", i + 1, g_nshapes);
    }
    fprintf(stderr, "\n");
    print_step_table();
    print_creation_summary();
  }
  print_overhead();
  return 0;
}
