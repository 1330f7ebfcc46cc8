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
static int g_ready(void *ctx, char *err, size_t errlen) {
  (void)ctx;
  const int mode = boost_wait_test_stuck();
  if (mode == BOOST_WAIT_TEST_ERROR) return boost_err(err, errlen, "the device reports an error (test hook)");
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

/* ---- ops: strip the tags, call the inner backend ---------------------------- */

static void g_gemm(boost_backend *be, int ta, int tb, int M, int N, int K, cact *A, int lda, cact *B, int ldb,
                   float beta, boost_act *C, int ldc) {
  IOPS->gemm(IN, ta, tb, M, N, K, U(A), lda, U(B), ldb, beta, U(C), ldc);
}
static void g_gemm_acc(boost_backend *be, int ta, int tb, int M, int N, int K, cact *A, int lda, cact *B, int ldb,
                       float *C, int ldc) {
  IOPS->gemm_acc_f32(IN, ta, tb, M, N, K, U(A), lda, U(B), ldb, U(C), ldc);
}
static void g_add_inplace(boost_backend *be, boost_act *y, cact *x, size_t n) { IOPS->add_inplace(IN, U(y), U(x), n); }
static void g_add_forward(boost_backend *be, boost_act *out, cact *a, cact *b, size_t n) {
  IOPS->add_forward(IN, U(out), U(a), U(b), n);
}
static void g_mul_forward(boost_backend *be, boost_act *out, cact *a, cact *b, size_t n) {
  IOPS->mul_forward(IN, U(out), U(a), U(b), n);
}
static void g_mul_backward(boost_backend *be, boost_act *da, boost_act *db, cact *dout, cact *a, cact *b, size_t n) {
  IOPS->mul_backward(IN, U(da), U(db), U(dout), U(a), U(b), n);
}
static void g_silu_forward(boost_backend *be, boost_act *out, cact *x, size_t n) {
  IOPS->silu_forward(IN, U(out), U(x), n);
}
static void g_silu_backward(boost_backend *be, boost_act *dx, cact *dout, cact *x, size_t n) {
  IOPS->silu_backward(IN, U(dx), U(dout), U(x), n);
}
static void g_linear_forward(boost_backend *be, boost_act *out, cact *in, cact *W, int N, int Cin, int Cout) {
  IOPS->linear_forward(IN, U(out), U(in), U(W), N, Cin, Cout);
}
static void g_linear_backward(boost_backend *be, boost_act *din, float *dW, cact *dout, cact *in, cact *W, int N,
                              int Cin, int Cout) {
  IOPS->linear_backward(IN, U(din), U(dW), U(dout), U(in), U(W), N, Cin, Cout);
}
static void g_embedding_forward(boost_backend *be, boost_act *out, const int32_t *tok, cact *wte, int N, int V, int C) {
  IOPS->embedding_forward(IN, U(out), U(tok), U(wte), N, V, C);
}
static void g_embedding_backward(boost_backend *be, float *dwte, cact *dout, const int32_t *tok, int N, int V, int C) {
  IOPS->embedding_backward(IN, U(dwte), U(dout), U(tok), N, V, C);
}
static void g_rmsnorm_forward(boost_backend *be, boost_act *out, float *rstd, cact *x, cact *w, int N, int C,
                              float eps) {
  IOPS->rmsnorm_forward(IN, U(out), U(rstd), U(x), U(w), N, C, eps);
}
static void g_rmsnorm_backward(boost_backend *be, boost_act *dx, float *dw, cact *dout, cact *x, cact *w,
                               const float *rstd, int N, int C) {
  IOPS->rmsnorm_backward(IN, U(dx), U(dw), U(dout), U(x), U(w), U(rstd), N, C);
}
static void g_gain_sumsq_forward(boost_backend *be, boost_act *xg, float *ss, cact *x, cact *gain, int N, int C) {
  IOPS->gain_sumsq_forward(IN, U(xg), U(ss), U(x), U(gain), N, C);
}
static void g_gain_sumsq_backward(boost_backend *be, boost_act *dx_acc, float *dgain, cact *dxg, cact *x, cact *gain,
                                  const float *dss, int N, int C) {
  IOPS->gain_sumsq_backward(IN, U(dx_acc), U(dgain), U(dxg), U(x), U(gain), U(dss), N, C);
}
static void g_online_rms_forward(boost_backend *be, boost_act *h, float *rstd, const float *ss, int N, int w,
                                 float inv_d, float eps) {
  IOPS->online_rms_forward(IN, U(h), U(rstd), U(ss), N, w, inv_d, eps);
}
static void g_online_rms_backward(boost_backend *be, boost_act *dh, float *dss, cact *h_scaled, const float *rstd,
                                  int N, int w, float inv_d) {
  IOPS->online_rms_backward(IN, U(dh), U(dss), U(h_scaled), U(rstd), N, w, inv_d);
}
static void g_rope_tables(boost_backend *be, float *cos_t, float *sin_t, int T, int hd, float theta) {
  IOPS->rope_tables(IN, U(cos_t), U(sin_t), T, hd, theta);
}
static void g_rope_forward(boost_backend *be, boost_act *out, cact *in, const float *c, const float *s, int B, int T,
                           int H, int hd) {
  IOPS->rope_forward(IN, U(out), U(in), U(c), U(s), B, T, H, hd);
}
static void g_rope_backward(boost_backend *be, boost_act *din, cact *dout, const float *c, const float *s, int B,
                            int T, int H, int hd) {
  IOPS->rope_backward(IN, U(din), U(dout), U(c), U(s), B, T, H, hd);
}
static size_t g_attention_scratch_bytes(boost_backend *be, int B, int T, int H) {
  return IOPS->attention_scratch_bytes(IN, B, T, H);
}
static void g_attention_forward(boost_backend *be, boost_act *out, float *stats, void *scratch, cact *q, cact *k,
                                cact *v, int B, int T, int H, int hd) {
  IOPS->attention_forward(IN, U(out), U(stats), U(scratch), U(q), U(k), U(v), B, T, H, hd);
}
static void g_attention_backward(boost_backend *be, boost_act *dq, boost_act *dk, boost_act *dv, void *scratch,
                                 cact *dout, cact *q, cact *k, cact *v, const float *stats, int B, int T, int H,
                                 int hd) {
  IOPS->attention_backward(IN, U(dq), U(dk), U(dv), U(scratch), U(dout), U(q), U(k), U(v), U(stats), B, T, H, hd);
}
static void g_attention_decode(boost_backend *be, boost_act *out, boost_act *kc, boost_act *vc, cact *q, cact *k,
                               cact *v, const float *c, const float *s, int B, int pos, int max_T, int H, int hd) {
  IOPS->attention_decode(IN, U(out), U(kc), U(vc), U(q), U(k), U(v), U(c), U(s), B, pos, max_T, H, hd);
}
static void g_crossentropy_forward(boost_backend *be, float *losses, cact *logits, const int32_t *tg, int N, int V) {
  IOPS->crossentropy_forward(IN, U(losses), U(logits), U(tg), N, V);
}
static void g_crossentropy_backward(boost_backend *be, boost_act *dlogits, float *losses, cact *logits,
                                    const int32_t *tg, int N, int V, float dloss) {
  IOPS->crossentropy_backward(IN, U(dlogits), U(losses), U(logits), U(tg), N, V, dloss);
}
static void g_vocab_ce_max(boost_backend *be, float *mx, cact *logits, int N, int V) {
  IOPS->vocab_ce_max(IN, U(mx), U(logits), N, V);
}
static void g_vocab_ce_sums(boost_backend *be, float *sums, cact *logits, const float *mx, const int32_t *tg, int v0,
                            int N, int V) {
  IOPS->vocab_ce_sums(IN, U(sums), U(logits), U(mx), U(tg), v0, N, V);
}
static void g_vocab_ce_losses(boost_backend *be, float *losses, const float *sums, const float *mx, int N) {
  IOPS->vocab_ce_losses(IN, U(losses), U(sums), U(mx), N);
}
static void g_vocab_ce_backward(boost_backend *be, boost_act *logits, const float *sums, const float *mx,
                                const int32_t *tg, int v0, int N, int V, float scale) {
  IOPS->vocab_ce_backward(IN, U(logits), U(sums), U(mx), U(tg), v0, N, V, scale);
}
static void g_loss_accumulate(boost_backend *be, const float *losses, int N, double *acc) {
  IOPS->loss_accumulate(IN, U(losses), N, U(acc));
}
static void g_to_act(boost_backend *be, boost_act *dst, const float *src, size_t n) { IOPS->to_act(IN, U(dst), U(src), n); }
static void g_to_f32(boost_backend *be, float *dst, cact *src, size_t n) { IOPS->to_f32(IN, U(dst), U(src), n); }
/* The plan is a host object of the inner backend (segment offsets, no memory). */
static boost_optim_plan *g_plan_create(boost_backend *be, const boost_segment *segs, int nseg, size_t mom_begin,
                                       size_t mom_end) {
  return IOPS->optim_plan_create(IN, host(segs), nseg, mom_begin, mom_end);
}
static void g_plan_free(boost_backend *be, boost_optim_plan *p) { IOPS->optim_plan_free(IN, p); }
static void g_grad_sumsq(boost_backend *be, const boost_optim_plan *p, const float *grads, double *out) {
  IOPS->grad_sumsq(IN, p, U(grads), U(out));
}
static void g_adamw(boost_backend *be, const boost_optim_plan *p, float *params, const float *grads, float *m, float *v,
                    boost_act *work, adamw_hparams hp, int t, float grad_scale) {
  IOPS->adamw(IN, p, U(params), U(grads), U(m), U(v), U(work), hp, t, grad_scale);
}

static const boost_ops guarded_ops = {
    .gemm = g_gemm,
    .gemm_acc_f32 = g_gemm_acc,
    .add_inplace = g_add_inplace,
    .add_forward = g_add_forward,
    .mul_forward = g_mul_forward,
    .mul_backward = g_mul_backward,
    .silu_forward = g_silu_forward,
    .silu_backward = g_silu_backward,
    .linear_forward = g_linear_forward,
    .linear_backward = g_linear_backward,
    .embedding_forward = g_embedding_forward,
    .embedding_backward = g_embedding_backward,
    .rmsnorm_forward = g_rmsnorm_forward,
    .rmsnorm_backward = g_rmsnorm_backward,
    .gain_sumsq_forward = g_gain_sumsq_forward,
    .gain_sumsq_backward = g_gain_sumsq_backward,
    .online_rms_forward = g_online_rms_forward,
    .online_rms_backward = g_online_rms_backward,
    .rope_tables = g_rope_tables,
    .rope_forward = g_rope_forward,
    .rope_backward = g_rope_backward,
    .attention_scratch_bytes = g_attention_scratch_bytes,
    .attention_forward = g_attention_forward,
    .attention_backward = g_attention_backward,
    .attention_decode = g_attention_decode,
    .crossentropy_forward = g_crossentropy_forward,
    .crossentropy_backward = g_crossentropy_backward,
    .vocab_ce_max = g_vocab_ce_max,
    .vocab_ce_sums = g_vocab_ce_sums,
    .vocab_ce_losses = g_vocab_ce_losses,
    .vocab_ce_backward = g_vocab_ce_backward,
    .loss_accumulate = g_loss_accumulate,
    .to_act = g_to_act,
    .to_f32 = g_to_f32,
    .optim_plan_create = g_plan_create,
    .optim_plan_free = g_plan_free,
    .grad_sumsq = g_grad_sumsq,
    .adamw = g_adamw,
};

static void guarded_destroy(boost_backend *be) {
  boost_backend_destroy(inner_of(be));
  boost_free(be->impl);
  boost_free(be);
}

boost_backend *guarded_backend_create(boost_backend *inner, char *err, size_t errlen) {
  if ((uintptr_t)&guarded_ops & GUARD_TAG) {
    boost_err(err, errlen, "the guarded backend needs addresses below bit 62");
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
