/* Causal multi-head attention, one (batch, head) at a time.
 *
 * q, k, v, out, dq, dk, dv: [B, T, H, hd] (token stride ld = H*hd), so the
 * (b, h) slice starts at b*T*ld + h*hd with leading dimension ld.
 * att, scratch: [B, H, T, T].  scale = 1/sqrt(hd).
 *   forward : S = scale Q K^T; P = softmax over j <= i (j > i exactly 0);
 *             O = P V
 *   backward: dP = dO V^T; dS = P * (dP - rowsum(dP * P));
 *             dQ = scale dS K; dK = scale dS^T Q; dV = P^T dO
 * Causality is used to skip work: rows go in blocks of ATT_BLOCK and each
 * block only multiplies against keys 0..end of block (about half the GEMM
 * flops of the full T x T product for long T).
 *
 * Threads: with B*H >= threads, OpenMP runs the (b, h) slices in parallel
 * (static schedule) and every sgemm inside runs single-threaded; otherwise
 * the slices run one after another and OpenBLAS threads each sgemm. Either
 * way every output element is computed by one fixed sequence of operations:
 * deterministic. */
#include "cpu_internal.h"

#include <cblas.h>

#include "ops.h"

#define ATT_BLOCK 64

static void attn_forward_bh(float *O, float *P, const float *Q, const float *K, const float *V, int T, int hd, int ld,
                            float scale) {
  for (int i0 = 0; i0 < T; i0 += ATT_BLOCK) {
    int i1 = i0 + ATT_BLOCK < T ? i0 + ATT_BLOCK : T;
    int mb = i1 - i0;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mb, i1, hd, scale, Q + (size_t)i0 * ld, ld, K, ld, 0.0f,
                P + (size_t)i0 * T, T);
    for (int i = i0; i < i1; i++) {
      float *row = P + (size_t)i * T;
      int len = i + 1;
      float m = -INFINITY;
#pragma omp simd reduction(max : m)
      for (int j = 0; j < len; j++) m = row[j] > m ? row[j] : m;
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < len; j++) {
        float e = boost_expf(row[j] - m);
        row[j] = e;
        sum += e;
      }
      float inv = 1.0f / sum;
#pragma omp simd
      for (int j = 0; j < len; j++) row[j] *= inv;
      for (int j = len; j < T; j++) row[j] = 0.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mb, hd, i1, 1.0f, P + (size_t)i0 * T, T, V, ld, 0.0f,
                O + (size_t)i0 * ld, ld);
  }
}

static void attn_backward_bh(float *dQ, float *dK, float *dV, float *D, const float *dO, const float *Q,
                             const float *K, const float *V, const float *P, int T, int hd, int ld, float scale) {
  if (dQ || dK) {
    for (int i0 = 0; i0 < T; i0 += ATT_BLOCK) {
      int i1 = i0 + ATT_BLOCK < T ? i0 + ATT_BLOCK : T;
      int mb = i1 - i0;
      /* dP[i0:i1, 0:i1] = dO[i0:i1] V[0:i1]^T */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mb, i1, hd, 1.0f, dO + (size_t)i0 * ld, ld, V, ld, 0.0f,
                  D + (size_t)i0 * T, T);
      for (int i = i0; i < i1; i++) {
        float *d = D + (size_t)i * T;
        const float *p = P + (size_t)i * T;
        int len = i + 1;
        float rs = 0.0f;
#pragma omp simd reduction(+ : rs)
        for (int j = 0; j < len; j++) rs += d[j] * p[j];
#pragma omp simd
        for (int j = 0; j < len; j++) d[j] = p[j] * (d[j] - rs);
        for (int j = len; j < T; j++) d[j] = 0.0f; /* dS is exactly causal too */
      }
      /* dQ[i0:i1] = scale dS[i0:i1, 0:i1] K[0:i1] */
      if (dQ)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mb, hd, i1, scale, D + (size_t)i0 * T, T, K, ld, 0.0f,
                    dQ + (size_t)i0 * ld, ld);
    }
  }
  for (int j0 = 0; j0 < T; j0 += ATT_BLOCK) {
    int j1 = j0 + ATT_BLOCK < T ? j0 + ATT_BLOCK : T;
    int nb = j1 - j0;
    /* rows i < j0 of columns j0:j1 are zero: contract over i in [j0, T) */
    if (dV)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nb, hd, T - j0, 1.0f, P + (size_t)j0 * T + j0, T,
                  dO + (size_t)j0 * ld, ld, 0.0f, dV + (size_t)j0 * ld, ld);
    if (dK)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nb, hd, T - j0, scale, D + (size_t)j0 * T + j0, T,
                  Q + (size_t)j0 * ld, ld, 0.0f, dK + (size_t)j0 * ld, ld);
  }
}

/* Parallelise over (b, h) only when there are enough slices for every
 * thread; then OpenBLAS must not thread inside (oversubscription). */
static int attn_slices_parallel(int BH) {
  int nt = boost_omp_threads();
  return nt > 1 && BH >= nt;
}

void attention_forward(float *out, float *att, const float *q, const float *k, const float *v, int B, int T, int H,
                       int hd) {
  if (B <= 0 || T <= 0 || H <= 0 || hd <= 0) return;
  const int ld = H * hd;
  const float scale = 1.0f / sqrtf((float)hd);
  const int BH = B * H;
  int par = attn_slices_parallel(BH);
  int blas_nt = 0;
  if (par) {
    blas_nt = openblas_get_num_threads();
    openblas_set_num_threads(1);
  }
#pragma omp parallel for schedule(static) if (par)
  for (int bh = 0; bh < BH; bh++) {
    int b = bh / H, h = bh % H;
    size_t off = (size_t)b * T * ld + (size_t)h * hd;
    attn_forward_bh(out + off, att + (size_t)bh * T * T, q + off, k + off, v + off, T, hd, ld, scale);
  }
  if (par) openblas_set_num_threads(blas_nt);
}

void attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout, const float *q,
                        const float *k, const float *v, const float *att, int B, int T, int H, int hd) {
  if (B <= 0 || T <= 0 || H <= 0 || hd <= 0) return;
  if (!dq && !dk && !dv) return;
  const int ld = H * hd;
  const float scale = 1.0f / sqrtf((float)hd);
  const int BH = B * H;
  int par = attn_slices_parallel(BH);
  int blas_nt = 0;
  if (par) {
    blas_nt = openblas_get_num_threads();
    openblas_set_num_threads(1);
  }
#pragma omp parallel for schedule(static) if (par)
  for (int bh = 0; bh < BH; bh++) {
    int b = bh / H, h = bh % H;
    size_t off = (size_t)b * T * ld + (size_t)h * hd;
    attn_backward_bh(dq ? dq + off : NULL, dk ? dk + off : NULL, dv ? dv + off : NULL, scratch + (size_t)bh * T * T,
                     dout + off, q + off, k + off, v + off, att + (size_t)bh * T * T, T, hd, ld, scale);
  }
  if (par) openblas_set_num_threads(blas_nt);
}
