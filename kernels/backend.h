/* The backend seam: every piece of math the model and the optimizer run, as
 * one table of functions. The model holds a `const boost_ops *` and calls
 * nothing else numeric, so a second implementation of this table (the CUDA
 * backend, kernels/cuda) plugs in without touching the model.
 *
 * Contracts are those of kernels/cpu/ops.h (shapes, row-major layout,
 * weights [out, in], parameter gradients accumulate, activation gradients
 * assign). Pointers are the backend's memory: host memory for cpu_ops,
 * device memory for a GPU backend. Collectives are not ops: the model calls
 * the comm layer between the pieces (e.g. between gain_sumsq_forward + the
 * A-GEMM and online_rms_forward), so each backend pairs with a comm backend
 * that takes its pointers (MPI for host buffers, NCCL for device buffers).
 * Functions that return a scalar (loss_mean, sum_squares) synchronise. */
#ifndef BOOST_KERNELS_BACKEND_H
#define BOOST_KERNELS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "ops.h"

typedef struct boost_ops {
  const char *name; /* "cpu", "cuda" */
  /* dense algebra */
  void (*gemm)(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
               float beta, float *C, int ldc);
  void (*add_inplace)(float *y, const float *x, size_t n);
  void (*add_forward)(float *out, const float *a, const float *b, size_t n);
  void (*mul_forward)(float *out, const float *a, const float *b, size_t n);
  void (*mul_backward)(float *da, float *db, const float *dout, const float *a, const float *b, size_t n);
  void (*silu_forward)(float *out, const float *x, size_t n);
  void (*silu_backward)(float *dx, const float *dout, const float *x, size_t n);
  void (*linear_forward)(float *out, const float *in, const float *W, int N, int Cin, int Cout);
  void (*linear_backward)(float *din, float *dW, const float *dout, const float *in, const float *W, int N, int Cin,
                          int Cout);
  /* embedding, norms, RoPE, attention */
  void (*embedding_forward)(float *out, const int32_t *tokens, const float *wte, int N, int V, int C);
  void (*embedding_backward)(float *dwte, const float *dout, const int32_t *tokens, int N, int V, int C);
  void (*rmsnorm_forward)(float *out, float *rstd, const float *x, const float *w, int N, int C, float eps);
  void (*rmsnorm_backward)(float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd,
                           int N, int C);
  void (*gain_sumsq_forward)(float *xg, float *ss, const float *x, const float *gain, int N, int C);
  void (*gain_sumsq_backward)(float *dx_acc, float *dgain, const float *dxg, const float *x, const float *gain,
                              const float *dss, int N, int C);
  void (*online_rms_forward)(float *h, float *rstd, const float *ss, int N, int w, float inv_d, float eps);
  void (*online_rms_backward)(float *dh, float *dss, const float *h_scaled, const float *rstd, int N, int w,
                              float inv_d);
  void (*rope_tables)(float *cos_t, float *sin_t, int T, int hd, float theta);
  void (*rope_forward)(float *out, const float *in, const float *cos_t, const float *sin_t, int B, int T, int H,
                       int hd);
  void (*rope_backward)(float *din, const float *dout, const float *cos_t, const float *sin_t, int B, int T, int H,
                        int hd);
  /* attention keeps per-row stats [B,H,T,2] for the backward, no [B,H,T,T] */
  size_t (*attention_scratch_floats)(int B, int T, int H);
  void (*attention_forward)(float *out, float *stats, float *scratch, const float *q, const float *k, const float *v,
                            int B, int T, int H, int hd);
  void (*attention_backward)(float *dq, float *dk, float *dv, float *scratch, const float *dout, const float *q,
                             const float *k, const float *v, const float *stats, int B, int T, int H, int hd);
  /* loss */
  void (*crossentropy_forward)(float *losses, const float *logits, const int32_t *targets, int N, int V);
  void (*crossentropy_backward)(float *dlogits, float *losses, const float *logits, const int32_t *targets, int N,
                                int V, float dloss);
  void (*vocab_ce_max)(float *mx, const float *logits, int N, int V);
  void (*vocab_ce_sums)(float *sums, const float *logits, const float *mx, const int32_t *targets, int v0, int N,
                        int V);
  void (*vocab_ce_losses)(float *losses, const float *sums, const float *mx, int N);
  void (*vocab_ce_backward)(float *logits, const float *sums, const float *mx, const int32_t *targets, int v0, int N,
                            int V, float scale);
  double (*loss_mean)(const float *losses, int N);
  /* optimizer */
  void (*adamw_update)(float *param, const float *grad, float *m, float *v, size_t n, adamw_hparams hp, int t,
                       float grad_scale);
  double (*sum_squares)(const float *x, size_t n);
} boost_ops;

/* The CPU backend: fp32, OpenMP, OpenBLAS (kernels/cpu). */
extern const boost_ops cpu_ops;

#endif
