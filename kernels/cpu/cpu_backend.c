/* The CPU backend (kernels/backend.h): host memory, the ops.h kernels.
 * With act_dtype float every boost_act pointer is a float pointer and each
 * entry below is the ops.h kernel itself; the thread count (OpenMP and
 * OpenBLAS) is the backend's, set at creation. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "blas_select.h"
#include "cpu_backend.h"
#include "gemm_bf16.h"
#include "ops.h"
#include "util.h"

void openblas_set_num_threads(int);

/* ---- memory ------------------------------------------------------------------ */

static void *cpu_alloc(boost_backend *be, size_t bytes) {
  (void)be;
  return boost_try_calloc(bytes ? bytes : 1, 1);
}
static void cpu_free(boost_backend *be, void *p) {
  (void)be;
  boost_free(p);
}

/* Large copies on the training thread use its cores (a synchronous
 * checkpoint's staging); the copy stream (the checkpoint writer) copies on
 * its own thread alone. */
static void copy_parallel(void *dst, const void *src, size_t bytes) {
  const size_t blk = (size_t)1 << 20;
  if (bytes <= 4 * blk || omp_in_parallel()) {
    memcpy(dst, src, bytes);
    return;
  }
  const long nb = (long)((bytes + blk - 1) / blk);
#pragma omp parallel for schedule(static)
  for (long b = 0; b < nb; b++) {
    const size_t o = (size_t)b * blk, k = bytes - o < blk ? bytes - o : blk;
    memcpy((char *)dst + o, (const char *)src + o, k);
  }
}

static void cpu_zero(boost_backend *be, void *p, size_t bytes) {
  (void)be;
  memset(p, 0, bytes);
}
static void cpu_copy(boost_backend *be, void *dst, const void *src, size_t bytes) {
  (void)be;
  copy_parallel(dst, src, bytes);
}
static void cpu_copy2d(boost_backend *be, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                       size_t rows) {
  (void)be;
  for (size_t i = 0; i < rows; i++) memcpy((char *)dst + i * dpitch, (const char *)src + i * spitch, width);
}
static void cpu_download_async(boost_backend *be, void *dst, const void *src, size_t bytes) {
  (void)be;
  memcpy(dst, src, bytes);
}
static void cpu_nothing(boost_backend *be) { (void)be; }
static void *cpu_host_view(boost_backend *be, const void *p) {
  (void)be;
  return (void *)p;
}

static const boost_mem_ops cpu_mem = {
    .alloc = cpu_alloc,
    .free = cpu_free,
    .host_alloc = cpu_alloc,
    .host_free = cpu_free,
    .zero = cpu_zero,
    .copy = cpu_copy,
    .copy2d = cpu_copy2d,
    .upload = cpu_copy,
    .download = cpu_copy,
    .mark = cpu_nothing,
    .download_async = cpu_download_async,
    .copy_sync = cpu_nothing,
    .sync = cpu_nothing,
    .host_view = cpu_host_view,
};

/* ---- the optimizer over whole arenas --------------------------------------- */

boost_optim_plan *cpu_optim_plan_create(boost_backend *be, const boost_segment *segs, int nseg, size_t mom_begin,
                                        size_t mom_end) {
  (void)be;
  boost_optim_plan *p = boost_calloc(1, sizeof *p);
  p->segs = boost_calloc((size_t)(nseg > 0 ? nseg : 1), sizeof *p->segs);
  if (nseg > 0) memcpy(p->segs, segs, (size_t)nseg * sizeof *segs);
  p->nseg = nseg;
  p->mom_begin = mom_begin;
  p->mom_end = mom_end;
  for (int i = 0; i < nseg; i++) BOOST_ASSERT(segs[i].offset >= mom_begin && segs[i].offset + segs[i].n <= mom_end);
  return p;
}

void cpu_optim_plan_free(boost_backend *be, boost_optim_plan *p) {
  (void)be;
  if (!p) return;
  boost_free(p->segs);
  boost_free(p);
}

void cpu_grad_sumsq(boost_backend *be, const boost_optim_plan *p, const float *grads, double *out) {
  (void)be;
  double s = 0.0;
  for (int i = 0; i < p->nseg; i++)
    if (p->segs[i].flags & BOOST_SEG_NORM) s += sum_squares(grads + p->segs[i].offset, p->segs[i].n);
  *out = s;
}

/* The float update of every segment, and with work the bf16 working copy rounded in the same pass. */
void cpu_adamw(const boost_optim_plan *p, float *params, const float *grads, float *m, float *v, uint16_t *work,
               adamw_hparams hp, int t, float grad_scale) {
  const float decay = hp.weight_decay;
  for (int i = 0; i < p->nseg; i++) {
    const boost_segment *s = &p->segs[i];
    hp.weight_decay = (s->flags & BOOST_SEG_DECAY) ? decay : 0.0f;
    const size_t mo = s->offset - p->mom_begin;
    adamw_update_round(params + s->offset, grads + s->offset, m + mo, v + mo, work ? work + s->offset : NULL, s->n, hp,
                       t, grad_scale);
  }
}

void cpu_loss_accumulate(boost_backend *be, const float *losses, int N, double *acc) {
  (void)be;
  *acc += (double)(float)loss_mean(losses, N);
}

/* ---- float activations: the ops.h kernels --------------------------------- */

#define F(p) ((float *)(p))
#define CF(p) ((const float *)(p))

static void f_gemm(boost_backend *be, int ta, int tb, int M, int N, int K, cact *A, int lda, cact *B, int ldb,
                   float beta, boost_act *C, int ldc) {
  (void)be;
  gemm(ta, tb, M, N, K, CF(A), lda, CF(B), ldb, beta, F(C), ldc);
}
static void f_gemm_acc(boost_backend *be, int ta, int tb, int M, int N, int K, cact *A, int lda, cact *B, int ldb,
                       float *C, int ldc) {
  (void)be;
  gemm(ta, tb, M, N, K, CF(A), lda, CF(B), ldb, 1.0f, C, ldc);
}
static void f_add_inplace(boost_backend *be, boost_act *y, cact *x, size_t n) {
  (void)be;
  add_inplace(F(y), CF(x), n);
}
static void f_add_forward(boost_backend *be, boost_act *out, cact *a, cact *b, size_t n) {
  (void)be;
  add_forward(F(out), CF(a), CF(b), n);
}
static void f_mul_forward(boost_backend *be, boost_act *out, cact *a, cact *b, size_t n) {
  (void)be;
  mul_forward(F(out), CF(a), CF(b), n);
}
static void f_mul_backward(boost_backend *be, boost_act *da, boost_act *db, cact *dout, cact *a, cact *b, size_t n) {
  (void)be;
  mul_backward(F(da), F(db), CF(dout), CF(a), CF(b), n);
}
static void f_silu_forward(boost_backend *be, boost_act *out, cact *x, size_t n) {
  (void)be;
  silu_forward(F(out), CF(x), n);
}
static void f_silu_backward(boost_backend *be, boost_act *dx, cact *dout, cact *x, size_t n) {
  (void)be;
  silu_backward(F(dx), CF(dout), CF(x), n);
}
static void f_linear_forward(boost_backend *be, boost_act *out, cact *in, cact *W, int N, int Cin, int Cout) {
  (void)be;
  linear_forward(F(out), CF(in), CF(W), N, Cin, Cout);
}
static void f_linear_backward(boost_backend *be, boost_act *din, float *dW, cact *dout, cact *in, cact *W, int N,
                              int Cin, int Cout) {
  (void)be;
  linear_backward(F(din), dW, CF(dout), CF(in), CF(W), N, Cin, Cout);
}
static void f_embedding_forward(boost_backend *be, boost_act *out, const int32_t *tok, cact *wte, int N, int V, int C) {
  (void)be;
  embedding_forward(F(out), tok, CF(wte), N, V, C);
}
static void f_embedding_backward(boost_backend *be, float *dwte, cact *dout, const int32_t *tok, int N, int V, int C) {
  (void)be;
  embedding_backward(dwte, CF(dout), tok, N, V, C);
}
static void f_rmsnorm_forward(boost_backend *be, boost_act *out, float *rstd, cact *x, cact *w, int N, int C,
                              float eps) {
  (void)be;
  rmsnorm_forward(F(out), rstd, CF(x), CF(w), N, C, eps);
}
static void f_rmsnorm_backward(boost_backend *be, boost_act *dx, float *dw, cact *dout, cact *x, cact *w,
                               const float *rstd, int N, int C) {
  (void)be;
  rmsnorm_backward(F(dx), dw, CF(dout), CF(x), CF(w), rstd, N, C);
}
static void f_gain_sumsq_forward(boost_backend *be, boost_act *xg, float *ss, cact *x, cact *gain, int N, int C) {
  (void)be;
  gain_sumsq_forward(F(xg), ss, CF(x), CF(gain), N, C);
}
static void f_gain_sumsq_backward(boost_backend *be, boost_act *dx_acc, float *dgain, cact *dxg, cact *x, cact *gain,
                                  const float *dss, int N, int C) {
  (void)be;
  gain_sumsq_backward(F(dx_acc), dgain, CF(dxg), CF(x), CF(gain), dss, N, C);
}
static void f_online_rms_forward(boost_backend *be, boost_act *h, float *rstd, const float *ss, int N, int w,
                                 float inv_d, float eps) {
  (void)be;
  online_rms_forward(F(h), rstd, ss, N, w, inv_d, eps);
}
static void f_online_rms_backward(boost_backend *be, boost_act *dh, float *dss, cact *h_scaled, const float *rstd,
                                  int N, int w, float inv_d) {
  (void)be;
  online_rms_backward(F(dh), dss, CF(h_scaled), rstd, N, w, inv_d);
}
void cpu_rope_tables(boost_backend *be, float *cos_t, float *sin_t, int T, int hd, float theta) {
  (void)be;
  rope_tables(cos_t, sin_t, T, hd, theta);
}
static void f_rope_forward(boost_backend *be, boost_act *out, cact *in, const float *c, const float *s, int B, int T,
                           int H, int hd) {
  (void)be;
  rope_forward(F(out), CF(in), c, s, B, T, H, hd);
}
static void f_rope_backward(boost_backend *be, boost_act *din, cact *dout, const float *c, const float *s, int B,
                            int T, int H, int hd) {
  (void)be;
  rope_backward(F(din), CF(dout), c, s, B, T, H, hd);
}
static size_t f_attention_scratch_bytes(boost_backend *be, int B, int T, int H) {
  (void)be;
  return attention_scratch_floats(B, T, H) * sizeof(float);
}
static void f_attention_forward(boost_backend *be, boost_act *out, float *stats, void *scratch, cact *q, cact *k,
                                cact *v, int B, int T, int H, int hd) {
  (void)be;
  attention_forward(F(out), stats, scratch, CF(q), CF(k), CF(v), B, T, H, hd);
}
static void f_attention_backward(boost_backend *be, boost_act *dq, boost_act *dk, boost_act *dv, void *scratch,
                                 cact *dout, cact *q, cact *k, cact *v, const float *stats, int B, int T, int H,
                                 int hd) {
  (void)be;
  attention_backward(F(dq), F(dk), F(dv), scratch, CF(dout), CF(q), CF(k), CF(v), stats, B, T, H, hd);
}
static void f_crossentropy_forward(boost_backend *be, float *losses, cact *logits, const int32_t *tg, int N, int V) {
  (void)be;
  crossentropy_forward(losses, CF(logits), tg, N, V);
}
static void f_crossentropy_backward(boost_backend *be, boost_act *dlogits, float *losses, cact *logits,
                                    const int32_t *tg, int N, int V, float dloss) {
  (void)be;
  crossentropy_backward(F(dlogits), losses, CF(logits), tg, N, V, dloss);
}
static void f_vocab_ce_max(boost_backend *be, float *mx, cact *logits, int N, int V) {
  (void)be;
  vocab_ce_max(mx, CF(logits), N, V);
}
static void f_vocab_ce_sums(boost_backend *be, float *sums, cact *logits, const float *mx, const int32_t *tg, int v0,
                            int N, int V) {
  (void)be;
  vocab_ce_sums(sums, CF(logits), mx, tg, v0, N, V);
}
void cpu_vocab_ce_losses(boost_backend *be, float *losses, const float *sums, const float *mx, int N) {
  (void)be;
  vocab_ce_losses(losses, sums, mx, N);
}
static void f_vocab_ce_backward(boost_backend *be, boost_act *logits, const float *sums, const float *mx,
                                const int32_t *tg, int v0, int N, int V, float scale) {
  (void)be;
  vocab_ce_backward(F(logits), sums, mx, tg, v0, N, V, scale);
}
static void f_to_act(boost_backend *be, boost_act *dst, const float *src, size_t n) {
  (void)be;
  if ((const void *)dst != (const void *)src) memcpy(dst, src, n * sizeof(float));
}
static void f_to_f32(boost_backend *be, float *dst, cact *src, size_t n) {
  (void)be;
  if ((const void *)dst != (const void *)src) memcpy(dst, src, n * sizeof(float));
}
static void f_adamw(boost_backend *be, const boost_optim_plan *p, float *params, const float *grads, float *m, float *v,
                    boost_act *work, adamw_hparams hp, int t, float grad_scale) {
  (void)be;
  cpu_adamw(p, params, grads, m, v, NULL, hp, t, grad_scale);
  BOOST_ASSERT(!work || (void *)work == (void *)params); /* float: the working copy is the master */
}

static const boost_ops cpu_f32_ops = {
    .gemm = f_gemm,
    .gemm_acc_f32 = f_gemm_acc,
    .add_inplace = f_add_inplace,
    .add_forward = f_add_forward,
    .mul_forward = f_mul_forward,
    .mul_backward = f_mul_backward,
    .silu_forward = f_silu_forward,
    .silu_backward = f_silu_backward,
    .linear_forward = f_linear_forward,
    .linear_backward = f_linear_backward,
    .embedding_forward = f_embedding_forward,
    .embedding_backward = f_embedding_backward,
    .rmsnorm_forward = f_rmsnorm_forward,
    .rmsnorm_backward = f_rmsnorm_backward,
    .gain_sumsq_forward = f_gain_sumsq_forward,
    .gain_sumsq_backward = f_gain_sumsq_backward,
    .online_rms_forward = f_online_rms_forward,
    .online_rms_backward = f_online_rms_backward,
    .rope_tables = cpu_rope_tables,
    .rope_forward = f_rope_forward,
    .rope_backward = f_rope_backward,
    .attention_scratch_bytes = f_attention_scratch_bytes,
    .attention_forward = f_attention_forward,
    .attention_backward = f_attention_backward,
    .attention_decode = cpu_attention_decode,
    .crossentropy_forward = f_crossentropy_forward,
    .crossentropy_backward = f_crossentropy_backward,
    .vocab_ce_max = f_vocab_ce_max,
    .vocab_ce_sums = f_vocab_ce_sums,
    .vocab_ce_losses = cpu_vocab_ce_losses,
    .vocab_ce_backward = f_vocab_ce_backward,
    .loss_accumulate = cpu_loss_accumulate,
    .to_act = f_to_act,
    .to_f32 = f_to_f32,
    .optim_plan_create = cpu_optim_plan_create,
    .optim_plan_free = cpu_optim_plan_free,
    .grad_sumsq = cpu_grad_sumsq,
    .adamw = f_adamw,
};

/* ---- the object ---------------------------------------------------------------- */

typedef struct {
  float *scratch[CPU_SCRATCH_SLOTS];
  size_t cap[CPU_SCRATCH_SLOTS];
} cpu_impl;

float *cpu_scratch(boost_backend *be, int slot, size_t n) {
  cpu_impl *c = be->impl;
  BOOST_ASSERT(slot >= 0 && slot < CPU_SCRATCH_SLOTS);
  if (n > c->cap[slot]) {
    boost_free(c->scratch[slot]);
    c->scratch[slot] = boost_calloc(n, sizeof(float));
    c->cap[slot] = n;
  }
  return c->scratch[slot];
}

static void cpu_destroy(boost_backend *be) {
  cpu_impl *c = be->impl;
  for (int i = 0; i < CPU_SCRATCH_SLOTS; i++) boost_free(c->scratch[i]);
  boost_free(c);
  boost_free(be);
}

/* The bf16 table as cpu_bf16.c writes it, with the float table's entry
 * wherever it leaves one out: an op that reads the act type itself
 * (attention_decode) or touches no act memory is written once and
 * registered once, in cpu_f32_ops. boost_ops holds function pointers only. */
typedef void (*cpu_any_fn)(void);
typedef union {
  boost_ops ops;
  cpu_any_fn fn[sizeof(boost_ops) / sizeof(cpu_any_fn)];
} cpu_ops_slots;
_Static_assert(sizeof(boost_ops) % sizeof(cpu_any_fn) == 0, "boost_ops holds function pointers only");

static const boost_ops *cpu_bf16_table_with_defaults(void) {
  static cpu_ops_slots merged;
  static int done;
  const boost_ops *own = cpu_bf16_ops();
  if (!own) return NULL;
  if (!done) {
    cpu_ops_slots o = {.ops = *own}, f = {.ops = cpu_f32_ops};
    for (size_t i = 0; i < sizeof o.fn / sizeof o.fn[0]; i++)
      if (!o.fn[i]) o.fn[i] = f.fn[i];
    merged = o;
    done = 1;
  }
  return &merged.ops;
}

boost_backend *cpu_backend_create(boost_dtype act_dtype, int threads, char *err, size_t errlen) {
  const boost_ops *ops = act_dtype == BOOST_F32 ? &cpu_f32_ops : cpu_bf16_table_with_defaults();
  if (!ops) {
    boost_err(err, errlen, "the CPU backend has no %s kernels in this build", boost_dtype_names[act_dtype]);
    return NULL;
  }
  if (threads > 0) {
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
  }
  boost_backend *be = boost_calloc(1, sizeof *be);
  be->name = "cpu";
  be->act_dtype = act_dtype;
  be->mem = &cpu_mem;
  be->ops = ops;
  be->impl = boost_calloc(1, sizeof(cpu_impl));
  if (act_dtype == BOOST_F32) {
    snprintf(be->info, sizeof be->info, "cpu, fp32: OpenBLAS sgemm (%s kernels)", blas_core_name());
  } else {
    char g[128];
    gemm_bf16_info(g, sizeof g);
    snprintf(be->info, sizeof be->info, "cpu, bf16 over fp32 masters: GEMMs %s", g);
  }
  be->destroy = cpu_destroy;
  return be;
}
