/* boost-gpu-check: every entry of the CUDA backend (kernels/backend.h's
 * "cuda": memory operations and ops) against the CPU backend, for float and
 * for bf16 activations; then throughput lines (gpu_bench.c).
 *
 *   boost-gpu-check [--small] [--no-bench] [--act f32|bf16|both] [--probe]
 *
 * --small: small shapes only (what compute-sanitizer runs); --probe: only
 * whether a GPU is usable (the device line, or 77 and why not); --self-test:
 * the harness itself, with the guarded test backend (the CPU's kernels behind
 * memory the host cannot touch, f32) in the GPU's place: every check must
 * pass, and a check that touched device memory from the host would fault
 * (ctest gpu_check_selftest, on every machine). Exit: 0 every
 * check passed; 1 a mismatch or an error; 77 "SKIP: no CUDA device" where
 * no GPU is usable (ctest reports the test skipped). BOOST_GPU_DEVICE picks
 * the device (default 0). The harness is here with the memory checks; the
 * ops are in gpu_check_ops.c and gpu_check_attn.c. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cuda_backend.h"
#include "gpu_check.h"
#include "hd_common.h"

static int n_checks, n_failed;

/* ---- host data (xorshift64*, fixed seed) ------------------------------------------ */
static uint64_t rng = 0x2545F4914F6CDD1Dull;
static double u01(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (double)((rng * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}
void g_fill(float *x, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)u01();
}
float *g_new(size_t n) { return boost_calloc(n ? n : 1, sizeof(float)); }
float *g_rand(size_t n, float lo, float hi) {
  float *x = g_new(n);
  g_fill(x, n, lo, hi);
  return x;
}
int32_t *g_tokens(size_t n, int V) {
  int32_t *t = boost_calloc(n ? n : 1, sizeof *t);
  for (size_t i = 0; i < n; i++) t[i] = (int32_t)(u01() * V) % V;
  return t;
}

/* ---- device data -------------------------------------------------------------------- */
void *g_act_empty(gcheck *g, size_t n) { return boost_be_alloc(g->gpu, boost_act_bytes(g->gpu, n), "a check buffer"); }
void *g_act(gcheck *g, float *h, size_t n) {
  void *host = boost_calloc(n ? n : 1, 4), *d = g_act_empty(g, n);
  for (size_t i = 0; i < n; i++) {
    hd_st(host, i, h[i], g->bf16);
    h[i] = hd_ld(host, i, g->bf16);
  }
  g->gpu->mem->upload(g->gpu, d, host, boost_act_bytes(g->gpu, n));
  boost_free(host);
  return d;
}
float *g_f32(gcheck *g, const float *h, size_t n) {
  float *d = boost_be_alloc(g->gpu, n * 4 + 4, "a check buffer");
  g->gpu->mem->upload(g->gpu, d, h, n * 4);
  return d;
}
int32_t *g_i32(gcheck *g, const int32_t *h, size_t n) {
  int32_t *d = boost_be_alloc(g->gpu, n * 4 + 4, "a check buffer");
  g->gpu->mem->upload(g->gpu, d, h, n * 4);
  return d;
}
void g_read_act(gcheck *g, float *out, const void *dev, size_t n) {
  void *host = boost_calloc(n ? n : 1, 4);
  g->gpu->mem->download(g->gpu, host, dev, boost_act_bytes(g->gpu, n));
  for (size_t i = 0; i < n; i++) out[i] = hd_ld(host, i, g->bf16);
  boost_free(host);
}
void g_read_f32(gcheck *g, float *out, const float *dev, size_t n) { g->gpu->mem->download(g->gpu, out, dev, n * 4); }
void g_free(gcheck *g, const void *dev) { g->gpu->mem->free(g->gpu, (void *)dev); }

/* ---- verdicts -------------------------------------------------------------------------- */
static const char *act_name(const gcheck *g) { return g->bf16 ? "bf16" : "f32 "; }

void g_cmp(gcheck *g, const char *what, const float *got, const float *want, size_t n, double tol) {
  double num = 0, den = 0, maxe = 0, maxw = 0;
  int finite = 1;
  for (size_t i = 0; i < n; i++) {
    const double e = fabs((double)got[i] - (double)want[i]);
    finite &= isfinite(got[i]) == isfinite(want[i]);
    num += e * e, den += (double)want[i] * want[i];
    maxe = e > maxe ? e : maxe;
    maxw = fabs(want[i]) > maxw ? fabs(want[i]) : maxw;
  }
  const double rel = den > 0 ? sqrt(num / den) : sqrt(num), mx = maxw > 0 ? maxe / maxw : maxe;
  const int ok = finite && rel <= tol && !isnan(rel);
  n_checks++;
  n_failed += !ok;
  printf("%s %s %-42s rel_l2 %.2e (max %.2e) tol %.0e%s\n", ok ? "ok  " : "FAIL", act_name(g), what, rel, mx, tol,
         finite ? "" : " (non-finite)");
}
void g_cmp_act(gcheck *g, const char *what, const void *dev, const float *want, size_t n, double tol) {
  float *got = g_new(n);
  g_read_act(g, got, dev, n);
  g_cmp(g, what, got, want, n, tol);
  boost_free(got);
}
void g_cmp_f32(gcheck *g, const char *what, const float *dev, const float *want, size_t n, double tol) {
  float *got = g_new(n);
  g_read_f32(g, got, dev, n);
  g_cmp(g, what, got, want, n, tol);
  boost_free(got);
}
void g_same(gcheck *g, const char *what, const void *a, const void *b, size_t bytes) {
  g_true(g, what, memcmp(a, b, bytes) == 0);
}
void g_true(gcheck *g, const char *what, int ok) {
  n_checks++;
  n_failed += !ok;
  printf("%s %s %s\n", ok ? "ok  " : "FAIL", act_name(g), what);
}

/* ---- memory operations ---------------------------------------------------------------- */

typedef struct {
  boost_backend *be;
  void *host;
  const void *dev;
  size_t bytes;
} stager;

/* what the checkpoint writer's thread does: mark, copy, wait */
static void *stage_thread(void *arg) {
  stager *s = arg;
  s->be->mem->mark(s->be);
  s->be->mem->download_async(s->be, s->host, s->dev, s->bytes);
  s->be->mem->copy_sync(s->be);
  return NULL;
}

static void check_memory(gcheck *g) {
  boost_backend *be = g->gpu;
  const size_t n = g->small ? 1000 : (1u << 22) + 3, bytes = n * 4;
  float *a = g_rand(n, -1, 1), *b = g_rand(n, -1, 1), *h = g_new(n);
  float *d = boost_be_alloc(be, bytes, "a check buffer"), *e = boost_be_alloc(be, bytes, "a check buffer");
  be->mem->download(be, h, d, bytes);
  int zero = 1;
  for (size_t i = 0; i < n; i++) zero &= h[i] == 0.0f;
  g_true(g, "alloc: zero-filled", zero);
  be->mem->upload(be, d, a, bytes);
  be->mem->download(be, h, d, bytes);
  g_same(g, "upload, download: round trip", h, a, bytes);
  be->mem->copy(be, e, d, bytes);
  be->mem->zero(be, d + 10, 40);
  be->mem->download(be, h, d, bytes);
  g_true(g, "zero: the range and nothing else", h[9] == a[9] && h[10] == 0 && h[19] == 0 && h[20] == a[20]);
  be->mem->download(be, h, e, bytes);
  g_same(g, "copy", h, a, bytes);
  /* 2-D: 7 rows of 5 floats from pitch 11 to pitch 6 */
  be->mem->zero(be, e, bytes);
  be->mem->copy2d(be, e, 6 * 4, d + 100, 11 * 4, 5 * 4, 7);
  be->mem->download(be, h, e, 42 * 4);
  int ok2d = 1;
  for (int r = 0; r < 7; r++)
    for (int c = 0; c < 6; c++) ok2d &= h[r * 6 + c] == (c < 5 ? a[100 + r * 11 + c] : 0.0f);
  g_true(g, "copy2d: pitches and width", ok2d);
  /* pinned host memory: zeroed; an upload from it may be reused at once */
  float *pin = be->mem->host_alloc(be, bytes);
  int pz = pin != NULL;
  for (size_t i = 0; pin && i < n; i++) pz &= pin[i] == 0.0f;
  g_true(g, "host_alloc: pinned, zero-filled", pz);
  memcpy(pin, b, bytes);
  be->mem->upload(be, e, pin, bytes);
  memset(pin, 0, bytes);
  be->mem->download(be, h, e, bytes);
  g_same(g, "upload from pinned memory: src reusable on return", h, b, bytes);
  /* the copy stream from another thread: after the compute stream's
   * queued work (a copy of b over d), before nothing later is needed */
  be->mem->copy(be, d, e, bytes);
  stager s = {be, pin, d, bytes};
  pthread_t th;
  pthread_create(&th, NULL, stage_thread, &s);
  pthread_join(th, NULL);
  g_same(g, "mark, download_async, copy_sync (writer thread)", pin, b, bytes);
  /* pageable host memory goes through the backend's pinned chunks (several,
   * and a partial one, at the full size): the source reusable on return,
   * the copy stream's path too */
  float *pg = g_new(n);
  memcpy(pg, a, bytes);
  be->mem->upload(be, d, pg, bytes);
  memset(pg, 0, bytes);
  be->mem->download(be, h, d, bytes);
  g_same(g, "upload from pageable memory: src reusable on return", h, a, bytes);
  stager sp = {be, pg, d, bytes};
  pthread_create(&th, NULL, stage_thread, &sp);
  pthread_join(th, NULL);
  g_same(g, "download_async into pageable memory (writer thread)", pg, a, bytes);
  boost_free(pg);
  be->mem->sync(be);
  if (!strcmp(be->name, "cuda")) g_true(g, "host_view: NULL (device memory)", be->mem->host_view(be, d) == NULL);
  be->mem->host_free(be, pin);
  g_free(g, d), g_free(g, e);
  boost_free(a), boost_free(b), boost_free(h);
}

/* ---- main ------------------------------------------------------------------------------ */

/* backend: "cuda", or "guarded" for --self-test */
static int run_act(const char *backend, boost_dtype act, int device, int small, boost_backend *cpu) {
  char err[512] = "", desc[256] = "";
  gcheck g = {.cpu = cpu, .bf16 = act == BOOST_BF16, .small = small};
  g.gpu = boost_backend_create(backend, act, 0, device, err, sizeof err);
  if (!g.gpu) {
    printf("FAIL %s\n", err);
    return 1;
  }
  g.tol_f32 = g.bf16 ? 2e-3 : 2e-5;
  g.tol_act = g.bf16 ? 1e-2 : 2e-5;
  g.tol_chain = g.bf16 ? 3e-2 : 5e-5;
  cuda_backend_describe(g.gpu, desc, sizeof desc);
  printf("== %s: %s\n", backend, desc);
  check_memory(&g);
  check_dense(&g);
  check_elementwise(&g);
  check_norms(&g);
  check_embedding_rope(&g);
  check_loss(&g);
  check_optimizer(&g);
  check_attention(&g);
  g.gpu->mem->sync(g.gpu);
  boost_backend_destroy(g.gpu);
  return 0;
}

int main(int argc, char **argv) {
  int small = 0, bench = 1, acts = 3, probe = 0, self = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--small")) small = 1;
    else if (!strcmp(argv[i], "--self-test")) self = 1;
    else if (!strcmp(argv[i], "--probe")) probe = 1;
    else if (!strcmp(argv[i], "--no-bench")) bench = 0;
    else if (!strcmp(argv[i], "--act") && i + 1 < argc) {
      const char *a = argv[++i];
      acts = !strcmp(a, "f32") ? 1 : !strcmp(a, "bf16") ? 2 : !strcmp(a, "both") ? 3 : 0;
      if (!acts) return fprintf(stderr, "boost-gpu-check: --act f32, bf16 or both\n"), 2;
    } else {
      fprintf(stderr, "usage: boost-gpu-check [--small] [--no-bench] [--act f32|bf16|both] [--probe] [--self-test]\n");
      return 2;
    }
  }
  if (self) bench = 0, acts &= 1; /* the guarded backend has the CPU's float kernels only */
  if (!self && cuda_device_count() == 0) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  const char *dev = getenv("BOOST_GPU_DEVICE");
  const int device = dev ? atoi(dev) : 0;
  char err[512];
  if (probe) { /* is a GPU usable: the backend starts, or says why not */
    boost_backend *be = boost_backend_create("cuda", BOOST_BF16, 0, device, err, sizeof err);
    if (!be) return printf("%s\n", err), 77;
    cuda_backend_describe(be, err, sizeof err);
    printf("%s\n", err);
    boost_backend_destroy(be);
    return 0;
  }
  boost_backend *cpu = boost_backend_create("cpu", BOOST_F32, 0, 0, err, sizeof err);
  if (!cpu) return fprintf(stderr, "boost-gpu-check: %s\n", err), 1;
  const char *backend = self ? "guarded" : "cuda";
  if ((acts & 1) && run_act(backend, BOOST_F32, device, small, cpu)) return 1;
  if ((acts & 2) && run_act(backend, BOOST_BF16, device, small, cpu)) return 1;
  printf("gpu_check: %d checks, %d failed\n", n_checks, n_failed);
  if (bench && !small) {
    gcheck g = {.cpu = cpu, .bf16 = 1};
    g.gpu = boost_backend_create("cuda", BOOST_BF16, 0, device, err, sizeof err);
    if (g.gpu) gpu_bench(&g);
    boost_backend_destroy(g.gpu);
  }
  boost_backend_destroy(cpu);
  return n_failed ? 1 : 0;
}
