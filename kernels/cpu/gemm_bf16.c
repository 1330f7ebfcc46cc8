/* kern_gemm_bf16 (contract in gemm_bf16.h): oneDNN's matmul primitives, one per
 * thread's share of C, cached per shape, or the fp32 fallback. */
#include "cpu_internal.h" /* first (see there); boost_split, gemm_worth_threads: the fp32 kernels' GEMM split */
#include "gemm_bf16.h"
#include "gemm_bf16_pack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "check.h"
#include "ops.h"

#ifdef BOOST_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>

#include "dnnl_compat.h"
#endif

enum { BACKEND_UNSET, BACKEND_FALLBACK, BACKEND_DNNL };

static int backend = BACKEND_UNSET;
/* BOOST_GEMM_BF16_PACK=0: oneDNN gets strided operands as they are;
 * =whole: whole operands packed, not the threads' shares of them */
static int pack_strided = 1, pack_shares = 1;
static char info_line[512];
static int native_bf16;

/* ---- the fp32 fallback ---------------------------------------------------- */

/* Grow-only scratch (the training thread is the only caller). */
typedef struct {
  float *p;
  size_t n;
} scratch;
static scratch sa, sb, sc;

static float *scratch_get(scratch *s, size_t n) {
  if (n > s->n) {
    boost_free(s->p);
    s->p = boost_calloc(n, sizeof(float));
    s->n = n;
  }
  return s->p;
}

/* rows x cols of a strided bf16 matrix into a dense fp32 one. */
static void widen(float *dst, const bf16_t *src, int rows, int cols, int ld) {
  if (ld == cols) {
    bf16_to_f32_array(dst, src, (size_t)rows * cols);
    return;
  }
#pragma omp parallel for schedule(static) if ((size_t)rows * cols >= BF16_PAR_MIN)
  for (int r = 0; r < rows; r++) bf16_to_f32_array(dst + (size_t)r * cols, src + (size_t)r * ld, (size_t)cols);
}

static void narrow(bf16_t *dst, int ld, const float *src, int rows, int cols) {
  if (ld == cols) {
    bf16_from_f32(dst, src, (size_t)rows * cols);
    return;
  }
#pragma omp parallel for schedule(static) if ((size_t)rows * cols >= BF16_PAR_MIN)
  for (int r = 0; r < rows; r++) bf16_from_f32(dst + (size_t)r * ld, src + (size_t)r * cols, (size_t)cols);
}

/* The inputs widened exactly, the product by the fp32 kern_gemm() (OpenBLAS on
 * our threads), a bf16 output rounded by f32_to_bf16. */
static void fallback_gemm(int ta, int tb, int M, int N, int K, const bf16_t *A, int lda, const bf16_t *B, int ldb,
                          float beta, void *C, int ldc, int c_is_f32) {
  const int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
  float *Af = scratch_get(&sa, (size_t)ar * ac), *Bf = scratch_get(&sb, (size_t)br * bc);
  widen(Af, A, ar, ac, lda);
  widen(Bf, B, br, bc, ldb);
  if (c_is_f32) {
    kern_gemm(ta, tb, M, N, K, Af, ac, Bf, bc, beta, C, ldc);
    return;
  }
  float *Cf = scratch_get(&sc, (size_t)M * N);
  if (beta != 0.0f) widen(Cf, C, M, N, ldc);
  kern_gemm(ta, tb, M, N, K, Af, ac, Bf, bc, beta, Cf, N);
  narrow(C, ldc, Cf, M, N);
}

static int in_parallel(void) {
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return 0;
#endif
}

/* fallback_gemm for a caller inside a parallel region: its own buffers
 * (the shared scratch belongs to the training thread), the serial sgemm. */
static void parallel_fallback(int ta, int tb, int M, int N, int K, const bf16_t *A, int lda, const bf16_t *B, int ldb,
                              float beta, void *C, int ldc, int c_is_f32) {
  const int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
  float *Af = boost_calloc((size_t)ar * ac, sizeof(float)), *Bf = boost_calloc((size_t)br * bc, sizeof(float));
  for (int r = 0; r < ar; r++)
    for (int c = 0; c < ac; c++) Af[(size_t)r * ac + c] = bf16_to_f32(A[(size_t)r * lda + c]);
  for (int r = 0; r < br; r++)
    for (int c = 0; c < bc; c++) Bf[(size_t)r * bc + c] = bf16_to_f32(B[(size_t)r * ldb + c]);
  float *Cf = c_is_f32 ? (float *)C : boost_calloc((size_t)M * N, sizeof(float));
  const int cld = c_is_f32 ? ldc : N;
  if (!c_is_f32 && beta != 0.0f)
    for (int r = 0; r < M; r++)
      for (int c = 0; c < N; c++) Cf[(size_t)r * N + c] = bf16_to_f32(((const bf16_t *)C)[(size_t)r * ldc + c]);
  kern_gemm(ta, tb, M, N, K, Af, ac, Bf, bc, beta, Cf, cld); /* serial inside a parallel region (cpu_internal.h) */
  if (!c_is_f32) {
    for (int r = 0; r < M; r++)
      for (int c = 0; c < N; c++) ((bf16_t *)C)[(size_t)r * ldc + c] = f32_to_bf16(Cf[(size_t)r * N + c]);
    boost_free(Cf);
  }
  boost_free(Af);
  boost_free(Bf);
}

/* ---- oneDNN --------------------------------------------------------------- */

#ifdef BOOST_HAVE_DNNL
/* Everything an entry is specialised on; ints only, so memcmp compares.
 * parts: how many OpenMP threads share the product. */
typedef struct {
  int ta, tb, M, N, K, lda, ldb, ldc, beta, c_f32, parts;
  int owner; /* -1: the training thread's; else the OpenMP thread that calls from inside a parallel region */
} prim_key;

/* One thread's share of C, rows [m0, m1) x columns [n0, n1): a
 * single-threaded primitive and its three memory objects (prim NULL: an
 * empty share). */
typedef struct {
  int m0, m1, n0, n1;
  int pack_a, pack_b, pack_c; /* the share's A, B, C strided in the whole: copied dense by the running thread */
  dnnl_primitive_t prim;
  dnnl_memory_t a, b, c;
} prim_part;

typedef struct {
  prim_key key;
  int used;
  int ok;          /* 0: oneDNN refused a share, or offered only its reference loops: the fallback runs the shape */
  prim_part *part; /* key.parts of them */
} prim_entry;

static dnnl_engine_t engine;
static dnnl_stream_t *streams; /* one per share: threads do not share a stream */
static int n_streams;
static prim_entry *table;      /* open addressing, capacity a power of two */
static size_t table_cap, table_used;

static uint64_t key_hash(const prim_key *k) {
  const unsigned char *p = (const unsigned char *)k;
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < sizeof *k; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static prim_entry *slot_for(prim_entry *tab, size_t cap, const prim_key *k) {
  size_t i = (size_t)key_hash(k) & (cap - 1);
  while (tab[i].used && memcmp(&tab[i].key, k, sizeof *k) != 0) i = (i + 1) & (cap - 1);
  return &tab[i];
}

static void table_grow(void) {
  const size_t cap = table_cap ? 2 * table_cap : 64;
  prim_entry *tab = boost_calloc(cap, sizeof *tab);
  for (size_t i = 0; i < table_cap; i++)
    if (table[i].used) *slot_for(tab, cap, &table[i].key) = table[i];
  boost_free(table);
  table = tab;
  table_cap = cap;
}

/* A 2-D memory descriptor of a row-major matrix seen as rows x cols, stored
 * transposed or not with row stride ld: transposes are strides, no copies. */
static dnnl_status_t matrix_md(boost_dnnl_md *md, int rows, int cols, int trans, int ld, dnnl_data_type_t t) {
  return boost_dnnl_md_strided(md, rows, cols, trans ? 1 : ld, trans ? ld : 1, t);
}

static void part_free(prim_part *q) {
  if (q->prim) dnnl_primitive_destroy(q->prim);
  if (q->a) dnnl_memory_destroy(q->a);
  if (q->b) dnnl_memory_destroy(q->b);
  if (q->c) dnnl_memory_destroy(q->c);
  q->prim = NULL;
  q->a = q->b = q->c = NULL;
}

/* The single-threaded primitive of share q of key k; 0 when oneDNN does not
 * take it (or only with its reference loops). impl (optional) receives the
 * implementation's name. */
static int part_create(const prim_key *k, prim_part *q, char *impl, size_t impl_n) {
  const int m = q->m1 - q->m0, n = q->n1 - q->n0;
  boost_dnnl_md a_md = {0}, b_md = {0}, c_md = {0};
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t ops = NULL;
  dnnl_primitive_desc_t pd = NULL;
  int ok = matrix_md(&a_md, m, k->K, k->ta, q->pack_a ? m : k->lda, dnnl_bf16) == dnnl_success &&
           matrix_md(&b_md, k->K, n, k->tb, q->pack_b ? n : k->ldb, dnnl_bf16) == dnnl_success &&
           matrix_md(&c_md, m, n, 0, q->pack_c ? n : k->ldc, k->c_f32 ? dnnl_f32 : dnnl_bf16) == dnnl_success &&
           dnnl_primitive_attr_create(&attr) == dnnl_success;
  /* beta = 1 is oneDNN's "sum" post-op: C = acc + C in fp32, then stored */
  if (ok && k->beta)
    ok = dnnl_post_ops_create(&ops) == dnnl_success && boost_dnnl_append_sum_1(ops) == dnnl_success &&
         dnnl_primitive_attr_set_post_ops(attr, ops) == dnnl_success;
  /* oneDNN sizes its work split by omp_get_max_threads() at creation: one
   * thread here, since our threads each run a share (measured: on the LM
   * head 7-20% faster than oneDNN threading one primitive itself, the same
   * elsewhere; and one join per product instead of oneDNN's barriers, which
   * a busy machine punishes). */
#ifdef _OPENMP
  const int saved = omp_get_max_threads();
  if (saved != 1) omp_set_num_threads(1);
#endif
  ok = ok && boost_dnnl_matmul_pd(&pd, engine, a_md, b_md, c_md, attr) == dnnl_success;
  const char *name = NULL;
  if (ok && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) != dnnl_success) name = NULL;
  if (impl) snprintf(impl, impl_n, "%s", name ? name : "none");
  /* oneDNN's reference loops ("ref:any") are slower than the fallback */
  ok = ok && name && strncmp(name, "ref", 3) != 0;
  ok = ok && dnnl_primitive_create(&q->prim, pd) == dnnl_success;
#ifdef _OPENMP
  if (saved != 1) omp_set_num_threads(saved);
#endif
  ok = ok && boost_dnnl_md_memory(&q->a, &a_md, engine, DNNL_MEMORY_NONE) == dnnl_success &&
       boost_dnnl_md_memory(&q->b, &b_md, engine, DNNL_MEMORY_NONE) == dnnl_success &&
       boost_dnnl_md_memory(&q->c, &c_md, engine, DNNL_MEMORY_NONE) == dnnl_success;
  if (!ok) part_free(q);
  boost_dnnl_md_release(a_md), boost_dnnl_md_release(b_md), boost_dnnl_md_release(c_md);
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (ops) dnnl_post_ops_destroy(ops);
  if (attr) dnnl_primitive_attr_destroy(attr);
  return ok;
}

/* Share p of k->parts: C split by rows when M >= N, else by columns, on
 * multiples of 16, as the fp32 kernels split their GEMMs (cpu_internal.h). */
static void part_bounds(const prim_key *k, int p, prim_part *q) {
  q->m0 = 0, q->m1 = k->M, q->n0 = 0, q->n1 = k->N;
  if (k->M >= k->N) boost_split(k->M, k->parts, p, 16, &q->m0, &q->m1);
  else boost_split(k->N, k->parts, p, 16, &q->n0, &q->n1);
  /* a column share of a stored matrix is strided: only a transposed A
   * (stored K x M) is cut by columns in a row split, B (not transposed,
   * stored K x N) and C in a column split (measured: the TN weight
   * gradients and the wide NT/NN products moved from gemm:jit to brgemm,
   * docs/PERFORMANCE.md) */
  const int rows_cut = q->m1 - q->m0 != k->M, cols_cut = q->n1 - q->n0 != k->N;
  q->pack_a = pack_shares && k->ta && rows_cut;
  q->pack_b = pack_shares && !k->tb && cols_cut;
  q->pack_c = pack_shares && cols_cut;
}

static void entry_create(prim_entry *e) {
  const prim_key *k = &e->key;
  e->part = boost_calloc((size_t)k->parts, sizeof *e->part);
  e->ok = 1;
  for (int p = 0; p < k->parts && e->ok; p++) {
    prim_part *q = &e->part[p];
    part_bounds(k, p, q);
    if (q->m1 > q->m0 && q->n1 > q->n0) e->ok = part_create(k, q, NULL, 0);
  }
  if (!e->ok)
    for (int p = 0; p < k->parts; p++) part_free(&e->part[p]);
  while (n_streams < k->parts) {
    streams = boost_realloc(streams, (size_t)n_streams + 1, sizeof *streams);
    if (dnnl_stream_create(&streams[n_streams], engine, dnnl_stream_default_flags) != dnnl_success)
      boost_fail("oneDNN cannot create a stream");
    n_streams++;
  }
}

static prim_entry *entry_for(const prim_key *k) {
  if ((table_used + 1) * 4 > table_cap * 3) table_grow();
  prim_entry *e = slot_for(table, table_cap, k);
  if (!e->used) {
    memset(e, 0, sizeof *e);
    e->key = *k;
    e->used = 1;
    table_used++;
    entry_create(e);
  }
  return e;
}

/* A call from inside a parallel region: the calling thread's own entry (its
 * primitive and memory objects are used by no other thread), looked up and
 * created under a lock since the table is shared; the stream too is the
 * thread's. 0 when oneDNN does not take the shape. */
static int run_owned(prim_key k, const bf16_t *A, const bf16_t *B, void *C);
static int run_part(const prim_part *q, dnnl_stream_t st) {
  if (!q->prim) return 1;
  const dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, q->a}, {DNNL_ARG_WEIGHTS, q->b}, {DNNL_ARG_DST, q->c}};
  return dnnl_primitive_execute(q->prim, st, 3, args) == dnnl_success && dnnl_stream_wait(st) == dnnl_success;
}

/* Share q of product k on the calling thread: its operands located (and
 * copied dense where the share is strided), the primitive run, a packed C
 * copied back. */
static int run_share(const prim_key *k, const prim_part *q, dnnl_stream_t st, const bf16_t *A, const bf16_t *B,
                     void *C) {
  if (!q->prim) return 1;
  const size_t esize = k->c_f32 ? sizeof(float) : sizeof(bf16_t);
  const int m = q->m1 - q->m0, n = q->n1 - q->n0;
  const bf16_t *a = A + (size_t)q->m0 * (k->ta ? 1 : (size_t)k->lda);
  const bf16_t *b = B + (size_t)q->n0 * (k->tb ? (size_t)k->ldb : 1);
  char *c = (char *)C + esize * ((size_t)q->m0 * k->ldc + q->n0);
  void *cd = c;
  if (q->pack_a) a = gemm_bf16_share_dense(0, a, k->K, m, k->lda, sizeof(bf16_t), 1);
  if (q->pack_b) b = gemm_bf16_share_dense(1, b, k->K, n, k->ldb, sizeof(bf16_t), 1);
  if (q->pack_c) cd = gemm_bf16_share_dense(2, c, m, n, k->ldc, esize, k->beta); /* the sum post-op reads it */
  /* oneDNN only reads the inputs; its handles are untyped */
  dnnl_memory_set_data_handle(q->a, (void *)(uintptr_t)a);
  dnnl_memory_set_data_handle(q->b, (void *)(uintptr_t)b);
  dnnl_memory_set_data_handle(q->c, cd);
  const int ok = run_part(q, st);
  if (q->pack_c) gemm_bf16_copy_rows(c, (size_t)k->ldc, cd, (size_t)n, m, n, esize);
  return ok;
}

/* Every share of the product on its own thread (one share: the caller's). */
static void run_shares(const prim_entry *e, const bf16_t *A, const bf16_t *B, void *C) {
  const prim_key *k = &e->key;
  int ok = 1;
  if (k->parts == 1) {
    ok = run_share(k, &e->part[0], streams[0], A, B, C);
  } else {
#pragma omp parallel num_threads(k->parts) reduction(&& : ok)
    { /* a smaller team than asked for still runs every share */
      for (int p = boost_thread_id(); p < k->parts; p += boost_team_size())
        ok = run_share(k, &e->part[p], streams[p], A, B, C) && ok;
    }
  }
  if (!ok)
    boost_fail("oneDNN matmul failed (%s%s %dx%dx%d)", k->ta ? "T" : "N", k->tb ? "T" : "N", k->M, k->N, k->K);
}

static int run_owned(prim_key k, const bf16_t *A, const bf16_t *B, void *C) {
  k.owner = boost_thread_id();
  prim_part *q = NULL;
  dnnl_stream_t st = NULL;
  int ok;
#pragma omp critical(gemm_bf16_table)
  {
    const prim_entry *e = entry_for(&k);
    ok = e->ok;
    q = e->part; /* entries move when the table grows; their parts do not */
    while (n_streams <= k.owner) {
      streams = boost_realloc(streams, (size_t)n_streams + 1, sizeof *streams);
      if (dnnl_stream_create(&streams[n_streams], engine, dnnl_stream_default_flags) != dnnl_success)
        boost_fail("oneDNN cannot create a stream");
      n_streams++;
    }
    st = streams[k.owner];
  }
  if (!ok) return 0;
  if (!q->prim) return 1; /* an empty share */
  dnnl_memory_set_data_handle(q->a, (void *)(uintptr_t)A); /* one share: the whole product */
  dnnl_memory_set_data_handle(q->b, (void *)(uintptr_t)B);
  dnnl_memory_set_data_handle(q->c, C);
  if (!run_part(q, st))
    boost_fail("oneDNN matmul failed (%s%s %dx%dx%d)", k.ta ? "T" : "N", k.tb ? "T" : "N", k.M, k.N, k.K);
  return 1;
}

static const char *isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
  case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
  case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
  case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
  case dnnl_cpu_isa_avx512_core: return "avx512_core";
  case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
  case dnnl_cpu_isa_avx2: return "avx2";
  default: return "older than avx2";
  }
}

/* Threads a product of M x N x K is shared by: every OpenMP thread when
 * it is big enough to pay for them (the fp32 kernels' rule), one inside a
 * parallel region. */
static int parts_for(int M, int N, int K) {
#ifdef _OPENMP
  if (omp_in_parallel()) return 1;
#endif
  return gemm_worth_threads((double)M * N * K) ? boost_omp_threads() : 1;
}

/* Starts oneDNN and says which implementation a typical shape gets. 0 when
 * oneDNN cannot run here. */
static int dnnl_start(int forced, char *why, size_t why_n) {
  if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) {
    snprintf(why, why_n, "oneDNN could not create a CPU engine");
    return 0;
  }
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  const unsigned bf16_bits = (unsigned)dnnl_cpu_isa_avx512_core_bf16; /* ISA values are nested bit sets */
  const int has_bf16 = ((unsigned)isa & bf16_bits) == bf16_bits;
  /* the implementation a bottleneck-sized share gets: the ISA it names is
   * the one that runs */
  const prim_key pk = {0, 1, 256, 128, 512, 512, 512, 128, 0, 0, 1, -1};
  prim_part probe = {.m0 = 0, .m1 = 256, .n0 = 0, .n1 = 128};
  char impl[128] = "?";
  const int made = part_create(&pk, &probe, impl, sizeof impl);
  part_free(&probe);
  const dnnl_version_t *v = dnnl_version();
  native_bf16 = made && has_bf16 && (strstr(impl, "bf16") || strstr(impl, "amx"));
  if (!made) {
    snprintf(why, why_n, "oneDNN %d.%d.%d has no fast bf16 matmul on this CPU (ISA %s)", v->major, v->minor, v->patch,
             isa_name(isa));
    return 0;
  }
  if (!native_bf16 && !forced) {
    snprintf(why, why_n, "no bf16 dot-product instructions (oneDNN %d.%d.%d sees ISA %s, matmul %s)", v->major,
             v->minor, v->patch, isa_name(isa), impl);
    return 0;
  }
  snprintf(info_line, sizeof info_line,
           "oneDNN %d.%d.%d matmul %s, ISA %s, %s, a single-threaded primitive per share of %d OpenMP thread(s)",
           v->major, v->minor, v->patch, impl, isa_name(isa),
           native_bf16 ? "bf16 dot-product instructions" : "bf16 emulated by oneDNN (no bf16 instructions)",
           boost_omp_threads());
  return 1;
}
#endif

/* ---- choice and entry point ---------------------------------------------- */

static void choose_backend(void) {
  const char *env = getenv("BOOST_GEMM_BF16");
  const int want_fallback = env && !strcmp(env, "fallback"), forced = env && !strcmp(env, "onednn");
  const char *pack = getenv("BOOST_GEMM_BF16_PACK");
  pack_strided = !(pack && !strcmp(pack, "0"));
  pack_shares = pack_strided && !(pack && !strcmp(pack, "whole"));
  char why[256] = "";
#ifdef BOOST_HAVE_DNNL
  if (!want_fallback && dnnl_start(forced, why, sizeof why)) {
    backend = BACKEND_DNNL;
    return;
  }
#else
  (void)forced;
  snprintf(why, sizeof why, "built without oneDNN (Debian: libdnnl-dev)");
#endif
  if (want_fallback) snprintf(why, sizeof why, "BOOST_GEMM_BF16=fallback");
  backend = BACKEND_FALLBACK;
  native_bf16 = 0;
  snprintf(info_line, sizeof info_line,
           "fp32 fallback: bf16 inputs widened to fp32, OpenBLAS sgemm, bf16 outputs rounded to nearest even "
           "(emulated, no bf16 instructions: %s)",
           why);
}

/* One row against a weight matrix, C[1,N] = A[1,K] . B[N,K]^T (+ C): a
 * decode step's products, which read every weight once and so run at the
 * speed memory delivers B. The matmul primitive reached less than half of
 * that at M = 1, and a loop widening B to fp32 element by element about
 * 10 GB/s on one Zen 4 core (bf16 decode 1.1x fp32 where its bytes allow
 * 2x): with AVX512_BF16 each 64-byte line of B is one VDPBF16PS, the
 * instruction the primitive itself runs. Products exact, summed in fp32
 * (the dot-product instruction's denormal flush, as in the contract), C
 * rounded to bf16. Split by groups of rows of B over the threads when the
 * product pays for them; each element is one fixed sum: the same bits for
 * any thread count (the sum's grouping follows B's offset from a 64-byte
 * boundary, which a model's arena fixes). */
#if defined(__AVX512BF16__)
/* rows (1..4) rows of B, row stride ldb, against a: acc[r] = a . B[r]. */
static inline void dot_rows(int rows, int K, const uint16_t *a, const uint16_t *b, int ldb, float *acc) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  const uint16_t *b1 = b + (rows > 1 ? ldb : 0), *b2 = b + (rows > 2 ? 2 * ldb : 0), *b3 = b + (rows > 3 ? 3 * ldb : 0);
  /* The rows' first elements up to a 64-byte boundary, when every row has
   * the same offset from one (ldb a multiple of 32), as one masked step:
   * the loop's full loads then each read one cache line (unaligned, every
   * load read two and the loop ran at ~55 % of the fp32 loop's bytes per
   * second). A model's rows never need it: the trainer's arena starts
   * every tensor on a 64-byte line of the working copy too (tensor.c).
   * Kept all the same: without these lines GCC 12 scheduled the loop
   * below so that it streamed 15-17 GB/s instead of 24-28 on one Zen 4
   * core (llama-60m decode, binaries alternated, the step not taken in
   * either; docs/PERFORMANCE.md). */
  int k = ldb % 32 == 0 ? (int)((64 - ((uintptr_t)b & 63)) & 63) / 2 : 0;
  if (k > K) k = K;
  if (k > 0) {
    const __mmask32 m = (__mmask32)((1ull << k) - 1);
    const __m512bh av = (__m512bh)_mm512_maskz_loadu_epi16(m, a);
    s0 = _mm512_dpbf16_ps(s0, av, (__m512bh)_mm512_maskz_loadu_epi16(m, b));
    if (rows > 1) s1 = _mm512_dpbf16_ps(s1, av, (__m512bh)_mm512_maskz_loadu_epi16(m, b1));
    if (rows > 2) s2 = _mm512_dpbf16_ps(s2, av, (__m512bh)_mm512_maskz_loadu_epi16(m, b2));
    if (rows > 3) s3 = _mm512_dpbf16_ps(s3, av, (__m512bh)_mm512_maskz_loadu_epi16(m, b3));
  }
  /* Where the rows are one block (ldb = K: a model's weights), the block
   * 16 rows ahead is prefetched in address order, four lines per step: the
   * hardware prefetcher follows four interleaved row streams badly. On one
   * Zen 4 core, 80 MB of weights: 9.5 GB/s without, 10.9 prefetching the
   * next group's same columns, 13-17 in address order 16 rows ahead (32
   * rows: 5-10 % less), as fast as row_gemv.h's fp32 loop per byte measured
   * in the same process. */
  const char *ahead = rows == 4 && ldb == K ? (const char *)(b + (size_t)16 * ldb) : NULL;
  for (; k + 32 <= K; k += 32) {
    if (ahead)
      for (int line = 0; line < 4; line++) _mm_prefetch(ahead + (size_t)k * 8 + 64 * line, _MM_HINT_T0);
    const __m512bh av = (__m512bh)_mm512_loadu_si512(a + k);
    s0 = _mm512_dpbf16_ps(s0, av, (__m512bh)_mm512_loadu_si512(b + k));
    if (rows > 1) s1 = _mm512_dpbf16_ps(s1, av, (__m512bh)_mm512_loadu_si512(b1 + k));
    if (rows > 2) s2 = _mm512_dpbf16_ps(s2, av, (__m512bh)_mm512_loadu_si512(b2 + k));
    if (rows > 3) s3 = _mm512_dpbf16_ps(s3, av, (__m512bh)_mm512_loadu_si512(b3 + k));
  }
  if (k < K) { /* the tail, zeros past K on both sides */
    const __mmask32 m = (__mmask32)((1ull << (K - k)) - 1);
    const __m512bh av = (__m512bh)_mm512_maskz_loadu_epi16(m, a + k);
    s0 = _mm512_dpbf16_ps(s0, av, (__m512bh)_mm512_maskz_loadu_epi16(m, b + k));
    if (rows > 1) s1 = _mm512_dpbf16_ps(s1, av, (__m512bh)_mm512_maskz_loadu_epi16(m, b1 + k));
    if (rows > 2) s2 = _mm512_dpbf16_ps(s2, av, (__m512bh)_mm512_maskz_loadu_epi16(m, b2 + k));
    if (rows > 3) s3 = _mm512_dpbf16_ps(s3, av, (__m512bh)_mm512_maskz_loadu_epi16(m, b3 + k));
  }
  /* The four sums in one tree (the rows past `rows` sum zeros): halves
   * added, then pairwise across the rows. A group of four bf16 rows of 512
   * is 16 steps of the loop, half an fp32 group's: four separate
   * reductions and roundings were ~12 % of the kernel's time (perf). */
  const __m256 h0 = _mm256_add_ps(_mm512_castps512_ps256(s0), _mm512_extractf32x8_ps(s0, 1));
  const __m256 h1 = _mm256_add_ps(_mm512_castps512_ps256(s1), _mm512_extractf32x8_ps(s1, 1));
  const __m256 h2 = _mm256_add_ps(_mm512_castps512_ps256(s2), _mm512_extractf32x8_ps(s2, 1));
  const __m256 h3 = _mm256_add_ps(_mm512_castps512_ps256(s3), _mm512_extractf32x8_ps(s3, 1));
  const __m256 q = _mm256_hadd_ps(_mm256_hadd_ps(h0, h1), _mm256_hadd_ps(h2, h3));
  _mm_storeu_ps(acc, _mm_add_ps(_mm256_castps256_ps128(q), _mm256_extractf128_ps(q, 1)));
}

/* C[0..4) = bf16(acc (+ C)): the conversion instruction, whose rounding
 * f32_to_bf16 follows bit for bit (bf16.h). */
static inline void store_four(const float *acc, float beta, uint16_t *C) {
  __m128 v = _mm_loadu_ps(acc);
  if (beta != 0.0f)
    v = _mm_add_ps(v, _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i *)C)), 16)));
  _mm_storel_epi64((__m128i *)C, (__m128i)_mm_cvtneps_pbh(v));
}
#else
/* The same without the instruction: B widened in the loop, a widened
 * once by the caller (af). */
static inline void dot_rows(int rows, int K, const float *af, const uint16_t *b, int ldb, float *acc) {
  if (rows == 4) { /* four independent sums, each a[k] loaded once */
    const uint16_t *b0 = b, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
    for (int k = 0; k < K; k++) {
      s0 += af[k] * bf16_to_f32(b0[k]);
      s1 += af[k] * bf16_to_f32(b1[k]);
      s2 += af[k] * bf16_to_f32(b2[k]);
      s3 += af[k] * bf16_to_f32(b3[k]);
    }
    acc[0] = s0, acc[1] = s1, acc[2] = s2, acc[3] = s3;
    return;
  }
  for (int r = 0; r < rows; r++) {
    const uint16_t *br = b + (size_t)r * ldb;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int k = 0; k < K; k++) s += af[k] * bf16_to_f32(br[k]);
    acc[r] = s;
  }
}
#endif

static void row_times_bt(int N, int K, const uint16_t *A, const uint16_t *B, int ldb, float beta, uint16_t *C) {
#if defined(__AVX512BF16__)
  const uint16_t *a = A;
#else
  float *a = boost_calloc((size_t)K, sizeof *a); /* A widened once: the loop converts only B */
  for (int k = 0; k < K; k++) a[k] = bf16_to_f32(A[k]);
#endif
  const int groups = (N + 3) / 4;
#pragma omp parallel for schedule(static) if (gemm_worth_threads((double)N * K))
  for (int gi = 0; gi < groups; gi++) {
    const int n0 = 4 * gi, rows = N - n0 < 4 ? N - n0 : 4;
    float acc[4];
    if (rows == 4) { /* the common case, specialised */
      dot_rows(4, K, a, B + (size_t)n0 * ldb, ldb, acc);
#if defined(__AVX512BF16__)
      store_four(acc, beta, C + n0);
      continue;
#endif
    } else
      dot_rows(rows, K, a, B + (size_t)n0 * ldb, ldb, acc);
    for (int r = 0; r < rows; r++)
      C[n0 + r] = f32_to_bf16(beta != 0.0f ? bf16_to_f32(C[n0 + r]) + acc[r] : acc[r]);
  }
#if !defined(__AVX512BF16__)
  boost_free(a);
#endif
}

void kern_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
               float beta, void *C, int ldc, int c_is_f32) {
  BOOST_ASSERT((trans_a == 0 || trans_a == 1) && (trans_b == 0 || trans_b == 1));
  BOOST_ASSERT(M >= 0 && N >= 0 && K >= 0 && (beta == 0.0f || beta == 1.0f));
  if (M == 0 || N == 0) return;
  BOOST_ASSERT(ldc >= N && lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && lda >= 1 && ldb >= 1);
  if (backend == BACKEND_UNSET) {
#pragma omp critical(gemm_bf16_table)
    if (backend == BACKEND_UNSET) choose_backend();
  }
  if (K == 0) { /* an empty sum: C = beta C */
    if (beta == 0.0f)
      for (int i = 0; i < M; i++)
        memset((char *)C + (size_t)i * ldc * (c_is_f32 ? 4 : 2), 0, (size_t)N * (c_is_f32 ? 4 : 2));
    return;
  }
  if (M == 1 && !trans_a && trans_b && !c_is_f32 && !in_parallel()) {
    row_times_bt(N, K, A, B, ldb, beta, C);
    return;
  }
#ifdef BOOST_HAVE_DNNL
  if (backend == BACKEND_DNNL) {
    /* strided operands packed dense: oneDNN gives brgemm only dense ones (gemm_bf16_pack.h) */
    gemm_operands o = {A, lda, B, ldb, C, ldc};
    if (pack_strided) gemm_bf16_pack(&o, trans_a, trans_b, M, N, K, beta != 0.0f, c_is_f32);
    const prim_key k = {trans_a,  trans_b, M, N, K, o.lda, o.ldb, o.ldc, beta != 0.0f, c_is_f32 != 0,
                        parts_for(M, N, K), -1};
    int done = 0;
    if (in_parallel()) {
      done = run_owned(k, o.A, o.B, o.C);
    } else {
      const prim_entry *e = entry_for(&k);
      if (e->ok) run_shares(e, o.A, o.B, o.C), done = 1;
    }
    if (done) {
      gemm_bf16_unpack(&o, C, ldc, M, N, c_is_f32);
      return;
    }
  }
#endif
  if (in_parallel()) {
    parallel_fallback(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc, c_is_f32);
    return;
  }
  fallback_gemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc, c_is_f32);
}

void gemm_bf16_info(char *buf, size_t n) {
  if (!buf || n == 0) return;
  if (backend == BACKEND_UNSET) choose_backend();
  snprintf(buf, n, "%s; conversions %s", info_line, bf16_convert_path());
}

int gemm_bf16_native(void) {
  if (backend == BACKEND_UNSET) choose_backend();
  return native_bf16;
}

void gemm_bf16_release(void) {
#ifdef BOOST_HAVE_DNNL
  for (size_t i = 0; i < table_cap; i++) {
    prim_entry *e = &table[i];
    if (!e->used) continue;
    for (int p = 0; p < e->key.parts; p++) part_free(&e->part[p]);
    boost_free(e->part);
  }
  boost_free(table);
  table = NULL;
  table_cap = table_used = 0;
#endif
  gemm_bf16_pack_release();
  boost_free(sa.p);
  boost_free(sb.p);
  boost_free(sc.p);
  sa = sb = sc = (scratch){NULL, 0};
}
