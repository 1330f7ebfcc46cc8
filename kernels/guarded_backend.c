/* The guarded test backend: another backend's kernels (the CPU's) behind
 * memory the host cannot touch. Every address it hands out carries a tag
 * in bit 62, which makes it non-canonical on x86-64 (and outside every
 * user address space elsewhere): a host read or write through it faults at
 * the line that makes it, as a GPU pointer would be wrong there. Its ops and
 * memory operations strip the tag and call the inner backend; they also
 * refuse (BOOST_ASSERT) an untagged address where backend memory belongs --
 * host tokens handed straight to an op, say -- and a tagged one where host
 * memory belongs. Running the trainer on it and comparing with the CPU
 * backend bit for bit is how the tests know that no host code reads or
 * writes backend memory behind the seam's back. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "device_wait.h"
#include "util.h"

#define GUARD_TAG ((uintptr_t)1 << 62)

typedef struct {
  boost_backend *inner;
} guarded_impl;

static boost_backend *inner_of(boost_backend *be) { return ((guarded_impl *)be->impl)->inner; }

static void *tag(void *p) { return p ? (void *)((uintptr_t)p | GUARD_TAG) : NULL; }

/* Backend memory: tagged (or NULL, for optional arguments). */
static void *untag(const void *p) {
  if (!p) return NULL;
  if (!((uintptr_t)p & GUARD_TAG)) boost_fail("guarded backend: host address %p passed where backend memory belongs", p);
  return (void *)((uintptr_t)p & ~GUARD_TAG);
}

/* Host memory: never tagged. */
static const void *host(const void *p) {
  if ((uintptr_t)p & GUARD_TAG) boost_fail("guarded backend: backend address %p passed where host memory belongs", p);
  return p;
}

#define U(p) untag(p)
#define IN inner_of(be)
#define IOPS (inner_of(be)->ops)
#define IMEM (inner_of(be)->mem)

/* ---- memory ------------------------------------------------------------------ */

static void *g_alloc(boost_backend *be, size_t bytes) { return tag(IMEM->alloc(IN, bytes)); }
static void g_free(boost_backend *be, void *p) {
  if (p) IMEM->free(IN, U(p));
}
static void *g_host_alloc(boost_backend *be, size_t bytes) { return IMEM->host_alloc(IN, bytes); }
static void g_host_free(boost_backend *be, void *p) { IMEM->host_free(IN, (void *)host(p)); }
static void g_zero(boost_backend *be, void *p, size_t bytes) { IMEM->zero(IN, U(p), bytes); }
static void g_copy(boost_backend *be, void *dst, const void *src, size_t bytes) { IMEM->copy(IN, U(dst), U(src), bytes); }
static void g_copy2d(boost_backend *be, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                     size_t rows) {
  IMEM->copy2d(IN, U(dst), dpitch, U(src), spitch, width, rows);
}
static void g_upload(boost_backend *be, void *dst, const void *src, size_t bytes) {
  IMEM->upload(IN, U(dst), host(src), bytes);
}
/* The inner backend's waits complete on return; the guarded backend still
 * goes through the device-wait poll loop the CUDA backend uses, so the CPU
 * tests run it (and its test hook, boost_wait_test_stick, can make the
 * wait never complete). */
static int g_ready(void *ctx, boost_status *err) {
  (void)ctx;
  const int mode = boost_wait_test_stuck();
  if (mode == BOOST_WAIT_TEST_ERROR) return boost_err(err, "the device reports an error (test hook)");
  return mode != BOOST_WAIT_TEST_STUCK;
}
static void g_download(boost_backend *be, void *dst, const void *src, size_t bytes) {
  IMEM->download(IN, (void *)host(dst), U(src), bytes);
  boost_device_wait("device download", g_ready, NULL);
}
static void g_mark(boost_backend *be) { IMEM->mark(IN); }
static void g_download_async(boost_backend *be, void *dst, const void *src, size_t bytes) {
  IMEM->download_async(IN, (void *)host(dst), U(src), bytes);
}
static void g_copy_sync(boost_backend *be) { IMEM->copy_sync(IN); }
static void g_sync(boost_backend *be) {
  IMEM->sync(IN);
  boost_device_wait("device sync", g_ready, NULL);
}
static void *g_host_view(boost_backend *be, const void *p) { return IMEM->host_view(IN, U(p)); }

static const boost_mem_ops guarded_mem = {
    .alloc = g_alloc,
    .free = g_free,
    .host_alloc = g_host_alloc,
    .host_free = g_host_free,
    .zero = g_zero,
    .copy = g_copy,
    .copy2d = g_copy2d,
    .upload = g_upload,
    .download = g_download,
    .mark = g_mark,
    .download_async = g_download_async,
    .copy_sync = g_copy_sync,
    .sync = g_sync,
    .host_view = g_host_view,
};

/* ---- ops: strip the tags, call the inner backend ----------------------------
 * One forwarder per line of the op list: backend memory untagged (and
 * refused untagged), host memory refused tagged, values and the optimizer
 * plan (a host object of the inner backend) passed as they are. */

/* The test hook of device_wait.h: the op fails as a CUDA call that returns
 * an error does (cuda_check: boost_fail, which ends the job). */
static void op_fault(const char *op) {
  if (boost_wait_test_stuck() == BOOST_WAIT_TEST_OP_ERROR)
    boost_fail("guarded backend: the device reports an error in %s (test hook, as a failing CUDA call)", op);
}

#define MEM(p) untag(p)
#define HOST(p) host(p)
#define G_FORWARDER(cpu, ret, name, params, args)                  \
  static ret g_##name params {                                     \
    op_fault(#name);                                               \
    BOOST_OP_RETURN(ret, IOPS->name(IN, BOOST_OP_UNPAREN args)); \
  }
BOOST_OP_LIST(G_FORWARDER)
#define G_ENTRY(cpu, ret, name, params, args) .name = g_##name,
static const boost_ops guarded_ops = {BOOST_OP_LIST(G_ENTRY)};
#undef MEM
#undef HOST

static void guarded_destroy(boost_backend *be) {
  boost_backend_destroy(inner_of(be));
  boost_free(be->impl);
  boost_free(be);
}

boost_backend *guarded_backend_create(boost_backend *inner, boost_status *err) {
  if ((uintptr_t)&guarded_ops & GUARD_TAG) {
    boost_err(err, "the guarded backend needs addresses below bit 62");
    return NULL;
  }
  boost_backend *be = boost_calloc(1, sizeof *be);
  guarded_impl *g = boost_calloc(1, sizeof *g);
  g->inner = inner;
  be->name = "guarded";
  be->act_dtype = inner->act_dtype;
  snprintf(be->info, sizeof be->info, "guarded (test backend: the host cannot touch its memory) over %.120s", inner->info);
  be->mem = &guarded_mem;
  be->ops = &guarded_ops;
  be->impl = g;
  be->destroy = guarded_destroy;
  return be;
}
