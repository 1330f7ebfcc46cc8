/* Full-rank linear and the CoLA bottleneck. Weights are [out, in].
 *
 * linear:  out[N,Cout] = in[N,Cin] . W[Cout,Cin]^T
 *          din = dout . W (assign, NULL skips); dW += dout^T . in
 * cola:    hpre[N,r] = in . A^T   (A [r, Cin]);  h = silu(hpre)
 *          out[N,Cout] = h . B^T  (B [Cout, r])
 *          dB += dout^T . h;  dh = dout . B;  dhpre = dh * silu'(hpre)
 *          dA += dhpre^T . in; din = dhpre . A (assign, NULL skips)
 *
 * Threading (see cpu_internal.h): one OpenMP region per call, OpenBLAS
 * single-threaded inside. The CoLA forward gives each thread a block of
 * tokens and runs A-GEMM -> SiLU -> B-GEMM on it with no barrier (the
 * bottleneck block stays in cache); the backward does the token-parallel
 * part (dh, SiLU', din) and dB together, then one barrier, then dA. Weight
 * gradients are split over their rows/columns, never over tokens, so each
 * element is one sgemm: deterministic for a given thread count. */
#include "cpu_internal.h"

#include "ops.h"

/* The plain GEMM the model's projection groups are made of. Split over our
 * OpenMP threads by rows or columns of C (sgemm_slice), OpenBLAS serial
 * inside: on the bottleneck shapes (K or N = r) OpenBLAS's own threading ran
 * at 60-120 GFLOP/s on two cores where two independent slices run at
 * 150-190 (docs/PERFORMANCE.md). */
void gemm(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
          float *C, int ldc) {
  if (M <= 0 || N <= 0) return;
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  int saved = blas_serial_begin();
#pragma omp parallel if (gemm_worth_threads((double)M * N * K))
  sgemm_slice(boost_thread_id(), boost_team_size(), ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
  blas_serial_end(saved);
}

void linear_forward(float *out, const float *in, const float *W, int N, int Cin, int Cout) {
  if (N <= 0 || Cout <= 0) return;
  int saved = blas_serial_begin();
  int par = gemm_worth_threads((double)N * Cin * Cout);
#pragma omp parallel if (par)
  sgemm_slice(boost_thread_id(), boost_team_size(), CblasNoTrans, CblasTrans, N, Cout, Cin, 1.0f, in, Cin, W, Cin, 0.0f,
              out, Cout);
  blas_serial_end(saved);
}

void linear_backward(float *din, float *dW, const float *dout, const float *in, const float *W, int N, int Cin,
                     int Cout) {
  if (N <= 0 || Cin <= 0 || Cout <= 0) return;
  int saved = blas_serial_begin();
  int par = gemm_worth_threads((double)N * Cin * Cout * ((din != NULL) + (dW != NULL)));
#pragma omp parallel if (par)
  {
    int t = boost_thread_id(), nt = boost_team_size();
    if (din) sgemm_slice(t, nt, CblasNoTrans, CblasNoTrans, N, Cin, Cout, 1.0f, dout, Cout, W, Cin, 0.0f, din, Cin);
    if (dW) sgemm_slice(t, nt, CblasTrans, CblasNoTrans, Cout, Cin, N, 1.0f, dout, Cout, in, Cin, 1.0f, dW, Cin);
  }
  blas_serial_end(saved);
}

static inline void silu_rows(float *h, const float *hpre, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; i++) {
    float x = hpre[i];
    h[i] = x * boost_sigmoidf(x);
  }
}

/* dh *= silu'(hpre) = s (1 + x (1 - s)) */
static inline void silu_grad_rows(float *dh, const float *hpre, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; i++) {
    float x = hpre[i];
    float s = boost_sigmoidf(x);
    dh[i] *= s * (1.0f + x * (1.0f - s));
  }
}

void cola_forward(float *out, float *hpre, float *h, const float *in, const float *A, const float *B, int N, int Cin,
                  int r, int Cout) {
  if (N <= 0 || r <= 0) return;
  int saved = blas_serial_begin();
  int par = gemm_worth_threads((double)N * r * ((double)Cin + Cout));
#pragma omp parallel if (par)
  {
    int n0, n1;
    boost_split(N, boost_team_size(), boost_thread_id(), 4, &n0, &n1);
    int nb = n1 - n0;
    if (nb > 0) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nb, r, Cin, 1.0f, in + (size_t)n0 * Cin, Cin, A, Cin, 0.0f,
                  hpre + (size_t)n0 * r, r);
      silu_rows(h + (size_t)n0 * r, hpre + (size_t)n0 * r, (size_t)nb * r);
      if (Cout > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nb, Cout, r, 1.0f, h + (size_t)n0 * r, r, B, r, 0.0f,
                    out + (size_t)n0 * Cout, Cout);
    }
  }
  blas_serial_end(saved);
}

void cola_backward(float *din, float *dA, float *dB, float *scratch, const float *dout, const float *in,
                   const float *hpre, const float *h, const float *A, const float *B, int N, int Cin, int r, int Cout) {
  if (N <= 0 || r <= 0) return;
  const int need_dh = dA != NULL || din != NULL;
  float *dh = scratch;
  int saved = blas_serial_begin();
  double work = (double)N * r * ((double)Cout * (1 + need_dh) + (double)Cin * ((dA != NULL) + (din != NULL)));
  int par = gemm_worth_threads(work);
#pragma omp parallel if (par)
  {
    int t = boost_thread_id(), nt = boost_team_size();
    if (need_dh) {
      int n0, n1;
      boost_split(N, nt, t, 4, &n0, &n1);
      int nb = n1 - n0;
      if (nb > 0) {
        float *dhb = dh + (size_t)n0 * r;
        if (Cout > 0)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nb, r, Cout, 1.0f, dout + (size_t)n0 * Cout, Cout, B,
                      r, 0.0f, dhb, r);
        else
          memset(dhb, 0, (size_t)nb * r * sizeof(float));
        silu_grad_rows(dhb, hpre + (size_t)n0 * r, (size_t)nb * r);
        if (din && Cin > 0)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nb, Cin, r, 1.0f, dhb, r, A, Cin, 0.0f,
                      din + (size_t)n0 * Cin, Cin);
      }
    }
    if (dB && Cout > 0) sgemm_slice(t, nt, CblasTrans, CblasNoTrans, Cout, r, N, 1.0f, dout, Cout, h, r, 1.0f, dB, r);
    if (dA && Cin > 0) {
#pragma omp barrier
      sgemm_slice(t, nt, CblasTrans, CblasNoTrans, r, Cin, N, 1.0f, dh, r, in, Cin, 1.0f, dA, Cin);
    }
  }
  blas_serial_end(saved);
}
