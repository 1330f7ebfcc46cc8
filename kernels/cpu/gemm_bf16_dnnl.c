/* kern_gemm_bf16's oneDNN path (gemm_bf16_internal.h): matmul primitives,
 * one single-threaded primitive per thread's share of C, cached per shape. */
#include "cpu_internal.h" /* first (see there); boost_split, gemm_worth_threads: the fp32 kernels' GEMM split */
#include "gemm_bf16_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "check.h"
#include "gemm_bf16_pack.h"

#ifdef BOOST_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>

#include "dnnl_compat.h"

/* BOOST_GEMM_BF16_PACK=0: oneDNN gets strided operands as they are;
 * =whole: whole operands packed, not the threads' shares of them */
static int pack_strided = 1, pack_shares = 1;

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
  if (gemm_bf16_in_parallel()) return 1;
#endif
  return gemm_worth_threads((double)M * N * K) ? boost_omp_threads() : 1;
}

/* Starts oneDNN and says which implementation a typical shape gets
 * (gemm_bf16_internal.h). */
int gemm_bf16_dnnl_start(int forced, char *why, size_t why_n, char *info, size_t info_n, int *native) {
  const char *pack = getenv("BOOST_GEMM_BF16_PACK");
  pack_strided = !(pack && !strcmp(pack, "0"));
  pack_shares = pack_strided && !(pack && !strcmp(pack, "whole"));
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
  const int native_bf16 = made && gemm_bf16_impl_is_native(has_bf16, impl);
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
  *native = native_bf16;
  snprintf(info, info_n,
           "oneDNN %d.%d.%d matmul %s, ISA %s, %s, a single-threaded primitive per share of %d OpenMP thread(s)",
           v->major, v->minor, v->patch, impl, isa_name(isa),
           native_bf16 ? "bf16 dot-product instructions" : "bf16 emulated by oneDNN (no bf16 instructions)",
           boost_omp_threads());
  return 1;
}

int gemm_bf16_dnnl_run(int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
                       float beta, void *C, int ldc, int c_is_f32) {
  /* strided operands packed dense: oneDNN gives brgemm only dense ones (gemm_bf16_pack.h) */
  gemm_operands o = {A, lda, B, ldb, C, ldc};
  if (pack_strided) gemm_bf16_pack(&o, ta, tb, M, N, K, beta != 0.0f, c_is_f32);
  const prim_key k = {ta, tb, M, N, K, o.lda, o.ldb, o.ldc, beta != 0.0f, c_is_f32 != 0, parts_for(M, N, K), -1};
  int done = 0;
  if (gemm_bf16_in_parallel()) {
    done = run_owned(k, o.A, o.B, o.C);
  } else {
    const prim_entry *e = entry_for(&k);
    if (e->ok) run_shares(e, o.A, o.B, o.C), done = 1;
  }
  if (done) gemm_bf16_unpack(&o, C, ldc, M, N, c_is_f32);
  return done;
}

void gemm_bf16_dnnl_release(void) {
  for (size_t i = 0; i < table_cap; i++) {
    prim_entry *e = &table[i];
    if (!e->used) continue;
    for (int p = 0; p < e->key.parts; p++) part_free(&e->part[p]);
    boost_free(e->part);
  }
  boost_free(table);
  table = NULL;
  table_cap = table_used = 0;
}

#else /* built without oneDNN */

int gemm_bf16_dnnl_start(int forced, char *why, size_t why_n, char *info, size_t info_n, int *native) {
  (void)forced, (void)info, (void)info_n;
  *native = 0;
  snprintf(why, why_n, "built without oneDNN (Debian: libdnnl-dev)");
  return 0;
}

int gemm_bf16_dnnl_run(int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
                       float beta, void *C, int ldc, int c_is_f32) {
  (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)beta, (void)C, (void)ldc,
      (void)c_is_f32;
  return 0;
}

void gemm_bf16_dnnl_release(void) {}

#endif
