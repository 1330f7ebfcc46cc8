/* The CPU backend's bf16 table (train.precision = bf16, docs/PRECISION.md):
 * activations, activation gradients and working weights are bf16, every
 * sum and statistic is fp32. GEMMs run on bf16 operands with fp32
 * accumulation (gemm_bf16.h). Elementwise ops read bf16, compute in fp32
 * and round once to nearest even on the store. Ops whose fp32 kernels hold
 * the delicate reductions (the norm backwards, attention, the scattered
 * embedding gradient) widen their bf16 operands into host scratch, run the
 * fp32 kernel and round the results: the same arithmetic as fp32 on the
 * rounded inputs. */
#include "cpu_internal.h"

#include <stdlib.h>

#include "attention_bf16.h"
#include "backend.h"
#include "bf16.h"
#include "check.h"
#include "cpu_backend.h"
#include "gemm_bf16.h"
#include "ops.h"

#define BF(p) ((bf16_t *)(p))
#define CBF(p) ((const bf16_t *)(p))

/* src widened into scratch slot `slot` (NULL stays NULL). */
static float *widen(boost_backend *be, int slot, const boost_act *src, size_t n) {
  if (!src) return NULL;
  float *w = cpu_scratch(be, slot, n);
  bf16_to_f32_array(w, CBF(src), n);
  return w;
}

static void narrow(boost_act *dst, const float *src, size_t n) {
  if (dst) bf16_from_f32(BF(dst), src, n);
}

/* ---- dense algebra -------------------------------------------------------------- */

static void b_gemm(boost_backend *be, int ta, int tb, int M, int N, int K, cact *A, int lda, cact *B, int ldb,
                   float beta, boost_act *C, int ldc) {
  (void)be;
  kern_gemm_bf16(ta, tb, M, N, K, CBF(A), lda, CBF(B), ldb, beta, C, ldc, 0);
}
static void b_gemm_acc_f32(boost_backend *be, int ta, int tb, int M, int N, int K, cact *A, int lda, cact *B, int ldb,
                       float *C, int ldc) {
  (void)be;
  kern_gemm_bf16(ta, tb, M, N, K, CBF(A), lda, CBF(B), ldb, 1.0f, C, ldc, 1);
}
static void b_linear_forward(boost_backend *be, boost_act *out, cact *in, cact *W, int N, int Cin, int Cout) {
  (void)be;
  kern_gemm_bf16(0, 1, N, Cout, Cin, CBF(in), Cin, CBF(W), Cin, 0.0f, out, Cout, 0);
}
static void b_linear_backward(boost_backend *be, boost_act *din, float *dW, cact *dout, cact *in, cact *W, int N,
                              int Cin, int Cout) {
  (void)be;
  if (din) kern_gemm_bf16(0, 0, N, Cin, Cout, CBF(dout), Cout, CBF(W), Cin, 0.0f, din, Cin, 0);
  if (dW) kern_gemm_bf16(1, 0, Cout, Cin, N, CBF(dout), Cout, CBF(in), Cin, 1.0f, dW, Cin, 1);
}

/* ---- elementwise: bf16 in, fp32 arithmetic, bf16 out ---------------------------- */

#define EW_LOOP _Pragma("omp parallel for simd schedule(static) if (parallel : n >= BOOST_PAR_MIN)")

static void b_add_inplace(boost_backend *be, boost_act *y, cact *x, size_t n) {
  (void)be;
  bf16_t *Y = BF(y);
  const bf16_t *X = CBF(x);
  EW_LOOP
  for (size_t i = 0; i < n; i++) Y[i] = f32_to_bf16(bf16_to_f32(Y[i]) + bf16_to_f32(X[i]));
}
static void b_add_forward(boost_backend *be, boost_act *out, cact *a, cact *b, size_t n) {
  (void)be;
  bf16_t *O = BF(out);
  const bf16_t *A = CBF(a), *B = CBF(b);
  EW_LOOP
  for (size_t i = 0; i < n; i++) O[i] = f32_to_bf16(bf16_to_f32(A[i]) + bf16_to_f32(B[i]));
}
static void b_mul_forward(boost_backend *be, boost_act *out, cact *a, cact *b, size_t n) {
  (void)be;
  bf16_t *O = BF(out);
  const bf16_t *A = CBF(a), *B = CBF(b);
  EW_LOOP
  for (size_t i = 0; i < n; i++) O[i] = f32_to_bf16(bf16_to_f32(A[i]) * bf16_to_f32(B[i]));
}
static void b_mul_backward(boost_backend *be, boost_act *da, boost_act *db, cact *dout, cact *a, cact *b, size_t n) {
  (void)be;
  bf16_t *DA = BF(da), *DB = BF(db);
  const bf16_t *G = CBF(dout), *A = CBF(a), *B = CBF(b);
  if (da && db) {
    EW_LOOP
    for (size_t i = 0; i < n; i++) {
      const float g = bf16_to_f32(G[i]), ai = bf16_to_f32(A[i]), bi = bf16_to_f32(B[i]); /* outputs may alias */
      DA[i] = f32_to_bf16(g * bi);
      DB[i] = f32_to_bf16(g * ai);
    }
  } else if (da) {
    EW_LOOP
    for (size_t i = 0; i < n; i++) DA[i] = f32_to_bf16(bf16_to_f32(G[i]) * bf16_to_f32(B[i]));
  } else if (db) {
    EW_LOOP
    for (size_t i = 0; i < n; i++) DB[i] = f32_to_bf16(bf16_to_f32(G[i]) * bf16_to_f32(A[i]));
  }
}
static void b_silu_forward(boost_backend *be, boost_act *out, cact *x, size_t n) {
  (void)be;
  bf16_t *O = BF(out);
  const bf16_t *X = CBF(x);
  EW_LOOP
  for (size_t i = 0; i < n; i++) {
    const float xi = bf16_to_f32(X[i]);
    O[i] = f32_to_bf16(xi * boost_sigmoidf(xi));
  }
}
static void b_silu_backward(boost_backend *be, boost_act *dx, cact *dout, cact *x, size_t n) {
  (void)be;
  if (!dx) return;
  bf16_t *D = BF(dx);
  const bf16_t *G = CBF(dout), *X = CBF(x);
  EW_LOOP
  for (size_t i = 0; i < n; i++) {
    const float xi = bf16_to_f32(X[i]), s = boost_sigmoidf(xi);
    D[i] = f32_to_bf16(bf16_to_f32(G[i]) * s * (1.0f + xi * (1.0f - s)));
  }
}

/* ---- embedding, norms, RoPE --------------------------------------------------- */

static void b_embedding_forward(boost_backend *be, boost_act *out, const int32_t *tok, cact *wte, int N, int V, int C) {
  (void)be, (void)V;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= BOOST_PAR_MIN)
  for (int n = 0; n < N; n++) memcpy(BF(out) + (size_t)n * C, CBF(wte) + (size_t)tok[n] * C, (size_t)C * sizeof(bf16_t));
}
static void b_embedding_backward(boost_backend *be, float *dwte, cact *dout, const int32_t *tok, int N, int V, int C) {
  kern_embedding_backward(dwte, widen(be, 0, dout, (size_t)N * C), tok, N, V, C);
}

static void b_rmsnorm_forward(boost_backend *be, boost_act *out, float *rstd, cact *x, cact *w, int N, int C,
                              float eps) {
  (void)be;
#pragma omp parallel for schedule(static) if (N * (size_t)C >= BOOST_PAR_MIN)
  for (int n = 0; n < N; n++) {
    const bf16_t *xr = CBF(x) + (size_t)n * C;
    bf16_t *o = BF(out) + (size_t)n * C;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int c = 0; c < C; c++) ss += bf16_to_f32(xr[c]) * bf16_to_f32(xr[c]);
    const float r = 1.0f / sqrtf(ss / (float)C + eps);
    if (rstd) rstd[n] = r;
#pragma omp simd
    for (int c = 0; c < C; c++) o[c] = f32_to_bf16(bf16_to_f32(xr[c]) * r * bf16_to_f32(CBF(w)[c]));
  }
}
static void b_rmsnorm_backward(boost_backend *be, boost_act *dx, float *dw, cact *dout, cact *x, cact *w,
                               const float *rstd, int N, int C) {
  const size_t n = (size_t)N * C;
  float *dx32 = dx ? cpu_scratch(be, 3, n) : NULL;
  kern_rmsnorm_backward(dx32, dw, widen(be, 0, dout, n), widen(be, 1, x, n), widen(be, 2, w, (size_t)C), rstd, N, C);
  narrow(dx, dx32, n);
}
static void b_gain_sumsq_forward(boost_backend *be, boost_act *xg, float *ss, cact *x, cact *gain, int N, int C) {
  const size_t n = (size_t)N * C;
  float *xg32 = cpu_scratch(be, 2, n);
  kern_gain_sumsq_forward(xg32, ss, widen(be, 0, x, n), widen(be, 1, gain, (size_t)C), N, C);
  narrow(xg, xg32, n);
}
static void b_gain_sumsq_backward(boost_backend *be, boost_act *dx_acc, float *dgain, cact *dxg, cact *x, cact *gain,
                                  const float *dss, int N, int C) {
  const size_t n = (size_t)N * C;
  float *acc = widen(be, 3, dx_acc, n);
  kern_gain_sumsq_backward(acc, dgain, widen(be, 0, dxg, n), widen(be, 1, x, n), widen(be, 2, gain, (size_t)C), dss, N, C);
  narrow(dx_acc, acc, n);
}
static void b_online_rms_forward(boost_backend *be, boost_act *h, float *rstd, const float *ss, int N, int w,
                                 float inv_d, float eps) {
  const size_t n = (size_t)N * w;
  float *h32 = widen(be, 0, h, n);
  kern_online_rms_forward(h32, rstd, ss, N, w, inv_d, eps);
  narrow(h, h32, n);
}
static void b_online_rms_backward(boost_backend *be, boost_act *dh, float *dss, cact *h_scaled, const float *rstd,
                                  int N, int w, float inv_d) {
  const size_t n = (size_t)N * w;
  float *dh32 = widen(be, 0, dh, n);
  kern_online_rms_backward(dh32, dss, widen(be, 1, h_scaled, n), rstd, N, w, inv_d);
  narrow(dh, dh32, n);
}

/* sign = +1 rotates by +angle, -1 by -angle; in place allowed. */
static void rope_rotate_bf16(bf16_t *out, const bf16_t *in, const float *cos_t, const float *sin_t, int B, int T,
                             int H, int hd, float sign) {
  const int half = hd / 2, BT = B * T;
#pragma omp parallel for schedule(static) if (BT * (size_t)H * hd >= BOOST_PAR_MIN)
  for (int bt = 0; bt < BT; bt++) {
    const float *c = cos_t + (size_t)(bt % T) * half, *s = sin_t + (size_t)(bt % T) * half;
    for (int h = 0; h < H; h++) {
      const size_t base = ((size_t)bt * H + h) * hd;
#pragma omp simd
      for (int i = 0; i < half; i++) {
        const float x0 = bf16_to_f32(in[base + 2 * i]), x1 = bf16_to_f32(in[base + 2 * i + 1]);
        const float ci = c[i], si = sign * s[i];
        out[base + 2 * i] = f32_to_bf16(x0 * ci - x1 * si);
        out[base + 2 * i + 1] = f32_to_bf16(x0 * si + x1 * ci);
      }
    }
  }
}
static void b_rope_forward(boost_backend *be, boost_act *out, cact *in, const float *c, const float *s, int B, int T,
                           int H, int hd) {
  (void)be;
  rope_rotate_bf16(BF(out), CBF(in), c, s, B, T, H, hd, 1.0f);
}
static void b_rope_backward(boost_backend *be, boost_act *din, cact *dout, const float *c, const float *s, int B,
                            int T, int H, int hd) {
  (void)be;
  rope_rotate_bf16(BF(din), CBF(dout), c, s, B, T, H, hd, -1.0f);
}

/* ---- attention: bf16 GEMMs (attention_bf16.h) where they run on bf16 ---------------
 * ---- instructions, else the fp32 kernel on widened q, k, v --------------------------- */

static size_t b_attention_scratch_bytes(boost_backend *be, int B, int T, int H) {
  (void)be;
  const size_t f32 = kern_attention_scratch_floats(B, T, H) * sizeof(float);
  const size_t b16 = attention_bf16_applies(B, H) ? (size_t)boost_omp_threads() * attention_bf16_scratch_bytes(T) : 0;
  return f32 > b16 ? f32 : b16;
}
static void b_attention_forward(boost_backend *be, boost_act *out, float *stats, void *scratch, cact *q, cact *k,
                                cact *v, int B, int T, int H, int hd) {
  if (attention_bf16_applies(B, H)) {
    kern_attention_bf16_forward(BF(out), stats, scratch, CBF(q), CBF(k), CBF(v), B, T, H, hd);
    return;
  }
  const size_t n = (size_t)B * T * H * hd;
  float *o32 = cpu_scratch(be, 3, n);
  kern_attention_forward(o32, stats, scratch, widen(be, 0, q, n), widen(be, 1, k, n), widen(be, 2, v, n), B, T, H, hd);
  narrow(out, o32, n);
}
static void b_attention_backward(boost_backend *be, boost_act *dq, boost_act *dk, boost_act *dv, void *scratch,
                                 cact *dout, cact *q, cact *k, cact *v, const float *stats, int B, int T, int H,
                                 int hd) {
  if (attention_bf16_applies(B, H)) {
    kern_attention_bf16_backward(dq ? BF(dq) : NULL, dk ? BF(dk) : NULL, dv ? BF(dv) : NULL, scratch, CBF(dout), CBF(q),
                            CBF(k), CBF(v), stats, B, T, H, hd);
    return;
  }
  const size_t n = (size_t)B * T * H * hd;
  float *dq32 = dq ? cpu_scratch(be, 4, n) : NULL, *dk32 = dk ? cpu_scratch(be, 5, n) : NULL,
        *dv32 = dv ? cpu_scratch(be, 6, n) : NULL;
  kern_attention_backward(dq32, dk32, dv32, scratch, widen(be, 3, dout, n), widen(be, 0, q, n), widen(be, 1, k, n),
                     widen(be, 2, v, n), stats, B, T, H, hd);
  narrow(dq, dq32, n);
  narrow(dk, dk32, n);
  narrow(dv, dv32, n);
}

/* ---- cross-entropy: one bf16 row at a time, widened into a row of the thread's --- */

static inline float row_max_f(const float *x, int V) {
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int v = 0; v < V; v++) m = x[v] > m ? x[v] : m;
  return m;
}

static void b_crossentropy_forward(boost_backend *be, float *losses, cact *logits, const int32_t *tg, int N, int V) {
  (void)be;
#pragma omp parallel if (N * (size_t)V >= BOOST_PAR_MIN)
  {
    float *x = boost_calloc((size_t)V, sizeof *x);
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
      bf16_to_f32_array(x, CBF(logits) + (size_t)n * V, (size_t)V);
      const float m = row_max_f(x, V);
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int v = 0; v < V; v++) sum += boost_expf_nonpos(x[v] - m);
      losses[n] = (m - x[tg[n]]) + logf(sum);
    }
    boost_free(x);
  }
}
static void b_crossentropy_backward(boost_backend *be, boost_act *dlogits, float *losses, cact *logits,
                                    const int32_t *tg, int N, int V, float dloss) {
  (void)be;
#pragma omp parallel if (N * (size_t)V >= BOOST_PAR_MIN)
  {
    float *x = boost_calloc((size_t)V, sizeof *x);
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
      bf16_to_f32_array(x, CBF(logits) + (size_t)n * V, (size_t)V); /* before dlogits (may alias) is written */
      const int t = tg[n];
      const float xt = x[t], m = row_max_f(x, V);
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int v = 0; v < V; v++) {
        const float e = boost_expf_nonpos(x[v] - m);
        x[v] = e;
        sum += e;
      }
      const float k = dloss / sum;
      bf16_t *d = BF(dlogits) + (size_t)n * V;
#pragma omp simd
      for (int v = 0; v < V; v++) d[v] = f32_to_bf16(x[v] * k);
      d[t] = f32_to_bf16(x[t] * k - dloss);
      if (losses) losses[n] = (m - xt) + logf(sum);
    }
    boost_free(x);
  }
}
static void b_vocab_ce_max(boost_backend *be, float *mx, cact *logits, int N, int V) {
  (void)be;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    float m = -INFINITY;
    for (int v = 0; v < V; v++) m = fmaxf(m, bf16_to_f32(CBF(logits)[(size_t)n * V + v]));
    mx[n] = m;
  }
}
static void b_vocab_ce_sums(boost_backend *be, float *sums, cact *logits, const float *mx, const int32_t *tg, int v0,
                            int N, int V) {
  (void)be;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const bf16_t *row = CBF(logits) + (size_t)n * V;
    double s = 0.0;
    for (int v = 0; v < V; v++) s += expf(bf16_to_f32(row[v]) - mx[n]);
    const int t = tg[n] - v0;
    sums[n] = (float)s;
    sums[N + n] = (t >= 0 && t < V) ? bf16_to_f32(row[t]) : 0.0f;
  }
}
static void b_vocab_ce_backward(boost_backend *be, boost_act *logits, const float *sums, const float *mx,
                                const int32_t *tg, int v0, int N, int V, float scale) {
  (void)be;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    bf16_t *row = BF(logits) + (size_t)n * V;
    const float inv = 1.0f / sums[n], m = mx[n];
    const int t = tg[n] - v0;
    for (int v = 0; v < V; v++) {
      float g = expf(bf16_to_f32(row[v]) - m) * inv * scale;
      if (v == t) g -= scale;
      row[v] = f32_to_bf16(g);
    }
  }
}

/* ---- precision and the optimizer ----------------------------------------------- */

static void b_to_act(boost_backend *be, boost_act *dst, const float *src, size_t n) {
  (void)be;
  bf16_from_f32(BF(dst), src, n);
}
static void b_to_f32(boost_backend *be, float *dst, cact *src, size_t n) {
  (void)be;
  bf16_to_f32_array(dst, CBF(src), n);
}
static void b_adamw(boost_backend *be, const boost_optim_plan *p, float *params, const float *grads, float *m,
                    float *v, boost_act *work, adamw_hparams hp, int t, float grad_scale) {
  (void)be;
  BOOST_ASSERT(work);
  cpu_adamw(p, params, grads, m, v, BF(work), hp, t, grad_scale); /* the working copy rounded in the same pass */
}

#define CPU_BF16_ENTRY(cpu, ret, name, params, args) .name = CPU_ENTRY_##cpu(b, name),
static const boost_ops cpu_bf16_table = {BOOST_OP_LIST(CPU_BF16_ENTRY)};

const boost_ops *cpu_bf16_ops(void) { return &cpu_bf16_table; }
