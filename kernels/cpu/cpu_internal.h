/* Private helpers shared by the CPU kernels (not part of the ops.h contract).
 *
 * boost_expf: a branch-free expf that gcc vectorises inside `#pragma omp simd`
 * loops. glibc's expf only vectorises under -ffast-math (libmvec), and the
 * scalar call costs several times more than the vectorised polynomial on
 * the cross-entropy, softmax and SiLU paths. Cephes-style: x = n*ln2 + r,
 * |r| <= ln2/2, degree-6 polynomial (FMA where available), 2^n built in the
 * exponent bits. Max relative error 1.2e-7 (about 1 ulp) over
 * [-87.33, 88.72]; exp(x) = 0 below -87.33 (no denormal results), +inf
 * above 88.72, NaN propagates.
 *
 * The selects in it only if-convert (vectorise) without -ftrapping-math, so
 * this header turns trapping math off for the rest of the translation unit
 * that includes it (our kernels never read FP exception flags). Results are
 * unchanged: IEEE arithmetic and rounding stay as they are. Include it first.
 * (sqrtf cannot be freed of errno that way -- -fno-math-errno is not honoured
 * by the pragma -- so loops that need a vector sqrt use AVX intrinsics.) */
#ifndef BOOST_KERNELS_CPU_INTERNAL_H
#define BOOST_KERNELS_CPU_INTERNAL_H

#pragma GCC optimize("no-trapping-math")

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

typedef union {
  float f;
  uint32_t u;
} boost_fu32;

/* a*b + c, fused where the target has FMA (ISO C mode never contracts). */
#ifdef __FMA__
#define BOOST_FMA(a, b, c) fmaf(a, b, c)
#else
#define BOOST_FMA(a, b, c) ((a) * (b) + (c))
#endif

/* exp(r) for |r| <= ln2/2 (Cephes expf coefficients) */
static inline float boost_exp_poly(float r) {
  float p = 1.9875691500e-4f;
  p = BOOST_FMA(p, r, 1.3981999507e-3f);
  p = BOOST_FMA(p, r, 8.3334519073e-3f);
  p = BOOST_FMA(p, r, 4.1665795894e-2f);
  p = BOOST_FMA(p, r, 1.6666665459e-1f);
  p = BOOST_FMA(p, r, 5.0000001201e-1f);
  return BOOST_FMA(p * r, r, r) + 1.0f; /* small terms first, then the 1 */
}

static inline float boost_expf(float x) {
  const float lo = -87.33f, hi = 88.72283f;
  float xc = x < lo ? lo : x; /* NaN passes through both compares */
  xc = xc > hi ? hi : xc;
  /* n = round(x/ln2) by the 1.5*2^23 shift: no float->int cast (NaN-safe) */
  const float shift = 0x1.8p23f;
  boost_fu32 k;
  k.f = BOOST_FMA(xc, 1.44269504088896341f, shift);
  float kf = k.f - shift;
  float r = BOOST_FMA(kf, -0.693359375f, xc); /* ln2 split, hi part exact */
  r = BOOST_FMA(kf, 2.12194440e-4f, r);
  float p = boost_exp_poly(r);
  int32_t n = (int32_t)(k.u - 0x4B400000u); /* in [-126, 128] unless x is NaN */
  int32_t n1 = n / 2;
  boost_fu32 s1, s2; /* 2^n as 2^n1 * 2^(n-n1): n may be 128 */
  s1.u = (uint32_t)(n1 + 127) << 23;
  s2.u = (uint32_t)(n - n1 + 127) << 23;
  float y = p * s1.f * s2.f;
  y = x < lo ? 0.0f : y;
  y = x > hi ? INFINITY : y;
  return y;
}

/* exp(x) for x <= 0, as in a softmax after subtracting the row max (x > 0
 * is treated as 0). Cheaper: one scale factor, no overflow handling. Same
 * accuracy, 0 below -87.33, NaN propagates. */
static inline float boost_expf_nonpos(float x) {
  const float lo = -87.33f;
  float xc = x < lo ? lo : x;
  xc = xc > 0.0f ? 0.0f : xc;
  const float shift = 0x1.8p23f;
  boost_fu32 k;
  k.f = BOOST_FMA(xc, 1.44269504088896341f, shift);
  float kf = k.f - shift;
  float r = BOOST_FMA(kf, -0.693359375f, xc);
  r = BOOST_FMA(kf, 2.12194440e-4f, r);
  float p = boost_exp_poly(r);
  boost_fu32 s;
  s.u = (k.u + 127u) << 23; /* low bits of k.u hold n in [-126, 0] */
  float y = p * s.f;
  return x < lo ? 0.0f : y;
}

/* sigmoid via boost_expf; exact limits 0 and 1 for large |x|. */
static inline float boost_sigmoidf(float x) { return 1.0f / (1.0f + boost_expf(-x)); }

static inline int boost_omp_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}
static inline int boost_thread_id(void) {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}
static inline int boost_team_size(void) {
#ifdef _OPENMP
  return omp_get_num_threads();
#else
  return 1;
#endif
}

/* One causal attention row of `len` scores in place: P = softmax(scale *
 * row). write_stats (the forward) computes the row's max logit and 1/sum
 * into st[0..1]; else it reads them (the backward's recomputation) and P
 * comes out bit for bit the forward's. scale = 1 leaves the scores as they
 * are (x * 1.0f is exact). Shared by the fp32 and bf16 attention kernels. */
static inline void attn_softmax_row(float *row, int len, float scale, float *st, int write_stats) {
  float m, inv;
  if (write_stats) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < len; j++) mx = row[j] > mx ? row[j] : mx;
    m = scale * mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < len; j++) {
      const float e = boost_expf_nonpos(scale * row[j] - m);
      row[j] = e;
      sum += e;
    }
    inv = 1.0f / sum;
    st[0] = m;
    st[1] = inv;
#pragma omp simd
    for (int j = 0; j < len; j++) row[j] *= inv;
  } else {
    m = st[0];
    inv = st[1];
#pragma omp simd
    for (int j = 0; j < len; j++) row[j] = boost_expf_nonpos(scale * row[j] - m) * inv;
  }
}

/* Elementwise loops below this size stay on one thread (fork/join costs
 * more than the work). Does not affect results: elementwise ops are exact.
 * On a combined `parallel for simd` the condition goes in `if (parallel :
 * ...)`: a bare `if` applies to the simd part too (OpenMP 5.0), and GCC
 * then ran every loop below this size scalar -- a decode step's SiLU, 8 x
 * 1376 elements on llama-60m, at ~5 ns an element. */
#define BOOST_PAR_MIN 16384

/* ---- GEMMs: our OpenMP threads own the cores ----------------------------
 * Every kernel splits its GEMMs over OpenMP threads (the output by rows or
 * columns, never along K, so each output element comes from one sgemm call:
 * deterministic for a given thread count) and calls sgemm from inside its
 * parallel region, where OpenBLAS must run single-threaded:
 *  - OpenBLAS's OpenMP build (what the build links when installed) does that
 *    by itself inside a parallel region. Its openblas_set_num_threads() also
 *    sets the OpenMP thread count and reallocates per-thread buffers, so it
 *    must not be touched.
 *  - The pthread build has its own pool; letting it thread GEMMs while our
 *    OpenMP threads run makes two pools of spinning threads fight over the
 *    cores (measured 1.7x slower on mid-size CoLA GEMMs, far worse under
 *    load). So around each kernel it is set to one thread and restored. */
#include <cblas.h>

#include "row_gemv.h"

/* GEMMs with fewer multiply-adds than this run on the calling thread. */
#define BOOST_GEMM_PAR_MIN (1 << 18)

static inline int blas_serial_begin(void) {
  if (openblas_get_parallel() != OPENBLAS_THREAD) return 0; /* OpenMP or sequential build */
  int n = openblas_get_num_threads();
  if (n > 1) openblas_set_num_threads(1);
  return n;
}
static inline void blas_serial_end(int saved) {
  if (saved > 1) openblas_set_num_threads(saved);
}

/* Part p of `parts` of [0, L), boundaries on multiples of `align`. */
static inline void boost_split(int L, int parts, int p, int align, int *l0, int *l1) {
  int ch = (L + parts - 1) / parts;
  ch = (ch + align - 1) / align * align;
  long a = (long)p * ch, b = a + ch;
  *l0 = a < L ? (int)a : L;
  *l1 = b < L ? (int)b : L;
}

/* Thread t of nt computes its slice of C = alpha op(A) op(B) + beta C
 * (row-major, op(A) M x K, op(B) K x N): rows of C when M >= N, else
 * columns (so the bigger operand is the one that gets split). */
static inline void sgemm_slice(int t, int nt, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                               const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  int a0, a1;
  if (M >= N) {
    boost_split(M, nt, t, 16, &a0, &a1);
    if (a1 <= a0 || N <= 0) return;
    const float *As = ta == CblasNoTrans ? A + (size_t)a0 * lda : A + a0;
    cblas_sgemm(CblasRowMajor, ta, tb, a1 - a0, N, K, alpha, As, lda, B, ldb, beta, C + (size_t)a0 * ldc, ldc);
  } else {
    boost_split(N, nt, t, 16, &a0, &a1);
    if (a1 <= a0 || M <= 0) return;
    const float *Bs = tb == CblasNoTrans ? B + a0 : B + (size_t)a0 * ldb;
    if (M == 1) { /* one row (a decode step): our row kernel or sgemv, which stream B where sgemm ran at a tenth */
      const int incA = ta == CblasNoTrans ? 1 : lda;
      if (tb == CblasTrans && incA == 1 && alpha == 1.0f && (beta == 0.0f || beta == 1.0f) &&
          row_gemv_f32(a1 - a0, K, A, Bs, ldb, beta, C + a0))
        return;
      if (beta == 0.0f) memset(C + a0, 0, (size_t)(a1 - a0) * sizeof *C); /* beta 0 ignores C, NaN included */
      if (tb == CblasTrans)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, a1 - a0, K, alpha, Bs, ldb, A, incA, beta, C + a0, 1);
      else
        cblas_sgemv(CblasRowMajor, CblasTrans, K, a1 - a0, alpha, Bs, ldb, A, incA, beta, C + a0, 1);
      return;
    }
    cblas_sgemm(CblasRowMajor, ta, tb, M, a1 - a0, K, alpha, A, lda, Bs, ldb, beta, C + a0, ldc);
  }
}

static inline int gemm_worth_threads(double mnk) { return boost_omp_threads() > 1 && mnk >= BOOST_GEMM_PAR_MIN; }

#endif
