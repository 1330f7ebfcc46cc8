/* The CPU backend (kernels/backend.h): host memory, the ops.h kernels.
 * With act_dtype float every boost_act pointer is a float pointer and each
 * entry below forwards to its ops.h kernel (kern_<op>); the thread count (OpenMP and
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
    if (p->segs[i].flags & BOOST_SEG_NORM) s += kern_sum_squares(grads + p->segs[i].offset, p->segs[i].n);
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
    kern_adamw_update_round(params + s->offset, grads + s->offset, m + mo, v + mo, work ? work + s->offset : NULL, s->n, hp,
                       t, grad_scale);
  }
}

void cpu_loss_accumulate(boost_backend *be, const float *losses, int N, double *acc) {
  (void)be;
  *acc += (double)(float)kern_loss_mean(losses, N);
}

/* Entries that touch no act memory: one for both tables. */
void cpu_rope_tables(boost_backend *be, float *cos_t, float *sin_t, int T, int hd, float theta) {
  (void)be;
  kern_rope_tables(cos_t, sin_t, T, hd, theta);
}
void cpu_vocab_ce_losses(boost_backend *be, float *losses, const float *sums, const float *mx, int N) {
  (void)be;
  kern_vocab_ce_losses(losses, sums, mx, N);
}

/* ---- float activations: the ops.h kernels ---------------------------------
 * Every RAW line of the op list is its ops.h kernel kern_<name> called with the entry's
 * arguments (act pointers are float pointers here); the OWN lines are
 * written below, the ANY lines (cpu_<name>) serve both tables. */

#define MEM(p) ((void *)(p))
#define HOST(p) (p)
#define CPU_RAW_F32(name, params, args) \
  static void f_##name params {         \
    (void)be;                           \
    kern_##name args;                   \
  }
#define CPU_OWN_F32(name, params, args)
#define CPU_ANY_F32(name, params, args)
#define CPU_F32_WRAPPER(cpu, ret, name, params, args) CPU_##cpu##_F32(name, params, args)
BOOST_OP_LIST(CPU_F32_WRAPPER)
#undef MEM
#undef HOST

static void f_gemm_acc_f32(boost_backend *be, int ta, int tb, int M, int N, int K, cact *A, int lda, cact *B, int ldb,
                           float *C, int ldc) {
  (void)be;
  kern_gemm(ta, tb, M, N, K, (const float *)A, lda, (const float *)B, ldb, 1.0f, C, ldc);
}
static size_t f_attention_scratch_bytes(boost_backend *be, int B, int T, int H) {
  (void)be;
  return kern_attention_scratch_floats(B, T, H) * sizeof(float);
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

#define CPU_F32_ENTRY(cpu, ret, name, params, args) .name = CPU_ENTRY_##cpu(f, name),
static const boost_ops cpu_f32_ops = {BOOST_OP_LIST(CPU_F32_ENTRY)};

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

boost_backend *cpu_backend_create(boost_dtype act_dtype, int threads, boost_status *err) {
  const boost_ops *ops = act_dtype == BOOST_F32 ? &cpu_f32_ops : cpu_bf16_ops();
  if (!ops) {
    boost_err(err, "the CPU backend has no %s kernels in this build", boost_dtype_names[act_dtype]);
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
