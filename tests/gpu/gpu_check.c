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
 * ops are checked by test-backend-ops' harness (tests/backend_ops). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cuda_backend.h"
#include "gpu_check.h"

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
  boost_backend *be = g->be;
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

/* backend: "cuda", or "guarded" for --self-test; -1 when it cannot start */
static int run_act(const char *backend, boost_dtype act, int device, int small, boost_backend *cpu) {
  boost_status err = {0};
  char desc[256] = "";
  gcheck g = {.ref = cpu, .bf16 = act == BOOST_BF16, .small = small};
  boost_backend_create(backend, act, 0, device, &g.be, &err);
  if (!g.be) {
    printf("FAIL %s\n", err.msg);
    return -1;
  }
  cuda_backend_describe(g.be, desc, sizeof desc);
  printf("== %s: %s\n", backend, desc);
  check_memory(&g);
  bops_run(g.be, cpu, small); /* every op: test-backend-ops' harness */
  g.be->mem->sync(g.be);
  boost_backend_destroy(g.be);
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
  if (self) bench = 0, acts &= 1; /* float: the harness itself (test-backend-ops runs the guarded bf16 backend) */
  if (!self && cuda_device_count() == 0) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  const char *dev = getenv("BOOST_GPU_DEVICE");
  const int device = dev ? atoi(dev) : 0;
  boost_status err = {0};
  if (probe) { /* is a GPU usable: the backend starts, or says why not */
    boost_backend *be = NULL;
    boost_backend_create("cuda", BOOST_BF16, 0, device, &be, &err);
    if (!be) return printf("%s\n", err.msg), 77;
    cuda_backend_describe(be, err.msg, sizeof err.msg);
    printf("%s\n", err.msg);
    boost_backend_destroy(be);
    return 0;
  }
  boost_backend *cpu = NULL;
  boost_backend_create("cpu", BOOST_F32, 0, 0, &cpu, &err);
  if (!cpu) return fprintf(stderr, "boost-gpu-check: %s\n", err.msg), 1;
  const char *backend = self ? "guarded" : "cuda";
  if ((acts & 1) && run_act(backend, BOOST_F32, device, small, cpu) < 0) return 1;
  if ((acts & 2) && run_act(backend, BOOST_BF16, device, small, cpu) < 0) return 1;
  int n_checks, n_failed;
  g_totals(&n_checks, &n_failed);
  printf("gpu_check: %d checks, %d failed\n", n_checks, n_failed);
  if (bench && !small) {
    gcheck g = {.ref = cpu, .bf16 = 1};
    boost_backend_create("cuda", BOOST_BF16, 0, device, &g.be, &err);
    if (g.be) gpu_bench(&g);
    boost_backend_destroy(g.be);
  }
  boost_backend_destroy(cpu);
  return n_failed ? 1 : 0;
}
