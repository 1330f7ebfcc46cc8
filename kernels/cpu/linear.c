/* Full-rank linear and the CoLA bottleneck. Weights are [out, in].
 *
 * linear:  out[N,Cout] = in[N,Cin] . W[Cout,Cin]^T
 *          din = dout . W (assign, NULL skips); dW += dout^T . in
 * cola:    hpre[N,r] = in . A^T   (A [r, Cin]);  h = silu(hpre)
 *          out[N,Cout] = h . B^T  (B [Cout, r])
 *          dB += dout^T . h;  dh = dout . B;  dhpre = dh * silu'(hpre)
 *          dA += dhpre^T . in; din = dhpre . A (assign, NULL skips)
 * Every GEMM is one cblas_sgemm (OpenBLAS threads it); the SiLU passes are
 * OpenMP over the N*r bottleneck. */
#include "cpu_internal.h"

#include <cblas.h>

#include "ops.h"

void linear_forward(float *out, const float *in, const float *W, int N, int Cin, int Cout) {
  if (N <= 0 || Cout <= 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, Cout, Cin, 1.0f, in, Cin, W, Cin, 0.0f, out, Cout);
}

void linear_backward(float *din, float *dW, const float *dout, const float *in, const float *W, int N, int Cin,
                     int Cout) {
  if (N <= 0 || Cin <= 0 || Cout <= 0) return;
  if (din)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, Cin, Cout, 1.0f, dout, Cout, W, Cin, 0.0f, din, Cin);
  if (dW)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Cout, Cin, N, 1.0f, dout, Cout, in, Cin, 1.0f, dW, Cin);
}

void cola_forward(float *out, float *hpre, float *h, const float *in, const float *A, const float *B, int N, int Cin,
                  int r, int Cout) {
  if (N <= 0 || r <= 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, r, Cin, 1.0f, in, Cin, A, Cin, 0.0f, hpre, r);
  size_t n = (size_t)N * r;
#pragma omp parallel for simd schedule(static) if (n >= BOOST_PAR_MIN)
  for (size_t i = 0; i < n; i++) {
    float x = hpre[i];
    h[i] = x * boost_sigmoidf(x);
  }
  if (Cout > 0)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, Cout, r, 1.0f, h, r, B, r, 0.0f, out, Cout);
}

void cola_backward(float *din, float *dA, float *dB, float *scratch, const float *dout, const float *in,
                   const float *hpre, const float *h, const float *A, const float *B, int N, int Cin, int r,
                   int Cout) {
  if (N <= 0 || r <= 0) return;
  if (dB && Cout > 0)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Cout, r, N, 1.0f, dout, Cout, h, r, 1.0f, dB, r);
  if (!dA && !din) return;
  float *dh = scratch;
  if (Cout > 0)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, r, Cout, 1.0f, dout, Cout, B, r, 0.0f, dh, r);
  else
    memset(dh, 0, (size_t)N * r * sizeof(float));
  size_t n = (size_t)N * r;
#pragma omp parallel for simd schedule(static) if (n >= BOOST_PAR_MIN)
  for (size_t i = 0; i < n; i++) {
    float x = hpre[i];
    float s = boost_sigmoidf(x);
    dh[i] *= s * (1.0f + x * (1.0f - s));
  }
  if (Cin <= 0) return;
  if (dA) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r, Cin, N, 1.0f, dh, r, in, Cin, 1.0f, dA, Cin);
  if (din) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, Cin, r, 1.0f, dh, r, A, Cin, 0.0f, din, Cin);
}
