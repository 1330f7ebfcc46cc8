/* Unit tests of the CPU kernels (kernels/cpu/ops.h), suite ops_fwd: the
 * forward (and, where it has one, the backward) of each op against naive
 * double-precision references, including the blocked and threaded paths of
 * attention and the projection GEMMs. Sizes are small and odd. */
#include "ops_testkit.h"

TestSuite(ops_fwd, .init = two_threads);

/* ====================================================== forward references */

Test(ops_fwd, rmsnorm_vs_naive) {
  rng_seed(31);
  enum { N = 5, C = 37 };
  const float eps = 1e-5f;
  float *x = frand(N * C, -3, 3), *w = frand(C, -2, 2), *out = fnan(N * C), *rstd = fnan(N);
  x[2 * C + 3] = 100.0f; /* one large entry */
  kern_rmsnorm_forward(out, rstd, x, w, N, C, eps);
  double ref_out[N * C], ref_rstd[N];
  for (int n = 0; n < N; n++) {
    double ss = 0;
    for (int j = 0; j < C; j++) ss += (double)x[n * C + j] * x[n * C + j];
    ref_rstd[n] = 1.0 / sqrt(ss / C + eps);
    for (int j = 0; j < C; j++) ref_out[n * C + j] = x[n * C + j] * ref_rstd[n] * w[j];
  }
  assert_close("rmsnorm rstd", rstd, ref_rstd, N, 0, 2e-6);
  assert_close("rmsnorm out", out, ref_out, N * C, 1e-6, 2e-6);
  /* rstd == NULL is allowed in forward and gives the same output */
  float *out2 = fnan(N * C);
  kern_rmsnorm_forward(out2, NULL, x, w, N, C, eps);
  assert_bitwise("rmsnorm out with rstd NULL", out, out2, sizeof(float) * N * C);
  free(x), free(w), free(out), free(rstd), free(out2);
}

Test(ops_fwd, rope_tables_and_naive) {
  enum { B = 2, T = 9, H = 3, hd = 8 };
  const float theta = 10000.0f;
  float cos_t[T * hd / 2], sin_t[T * hd / 2];
  kern_rope_tables(cos_t, sin_t, T, hd, theta);
  for (int t = 0; t < T; t++)
    for (int i = 0; i < hd / 2; i++) {
      double a = t * pow(theta, -2.0 * i / hd);
      cr_assert(fabs(cos_t[t * hd / 2 + i] - cos(a)) <= 1e-7 && fabs(sin_t[t * hd / 2 + i] - sin(a)) <= 1e-7,
                "rope_tables[t=%d][i=%d]: cos %.8g sin %.8g, expected cos %.8g sin %.8g (angle t*theta^(-2i/hd))", t, i,
                cos_t[t * hd / 2 + i], sin_t[t * hd / 2 + i], cos(a), sin(a));
    }
  cr_assert(cos_t[0] == 1.0f && sin_t[0] == 0.0f, "rope at t=0 must be the identity");
  rng_seed(32);
  size_t n = (size_t)B * T * H * hd;
  float *x = frand(n, -1, 1), *y = fnan(n);
  kern_rope_forward(y, x, cos_t, sin_t, B, T, H, hd);
  double *ref = malloc(n * sizeof(double));
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int h = 0; h < H; h++)
        for (int i = 0; i < hd / 2; i++) {
          size_t o = (((size_t)b * T + t) * H + h) * hd + 2 * i;
          double a = t * pow(theta, -2.0 * i / hd);
          /* (x0 + i x1) * e^{i a} on the interleaved pair */
          ref[o] = x[o] * cos(a) - x[o + 1] * sin(a);
          ref[o + 1] = x[o] * sin(a) + x[o + 1] * cos(a);
        }
  assert_close("rope_forward vs complex rotation", y, ref, n, 1e-6, 1e-6);
  /* backward o forward = identity (rotation by -a undoes +a) */
  float *z = fnan(n);
  kern_rope_backward(z, y, cos_t, sin_t, B, T, H, hd);
  for (size_t i = 0; i < n; i++)
    cr_assert(fabs(z[i] - x[i]) <= 1e-6, "rope_backward(kern_rope_forward(x))[%zu] = %.8g, x = %.8g (tol 1e-6)", i, z[i],
              x[i]);
  /* in place (out == in) equals out-of-place, bitwise */
  float *w = fcopy(x, n);
  kern_rope_forward(w, w, cos_t, sin_t, B, T, H, hd);
  assert_bitwise("rope_forward in place", w, y, n * sizeof(float));
  kern_rope_backward(w, w, cos_t, sin_t, B, T, H, hd);
  assert_bitwise("rope_backward in place", w, z, n * sizeof(float));
  free(x), free(y), free(ref), free(z), free(w);
}

/* naive double attention forward and backward (same formulas, no blocking) */
static void attn_ref(double *out, double *att, double *dq, double *dk, double *dv, const float *q, const float *k,
                     const float *v, const float *dout, int B, int T, int H, int hd) {
  int ld = H * hd;
  double scale = 1.0 / sqrt((double)hd);
  double *P = malloc(sizeof(double) * T * T), *dS = malloc(sizeof(double) * T * T);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
#define IX(t, d) (((size_t)b * T + (t)) * ld + (size_t)h * hd + (d))
      for (int i = 0; i < T; i++) {
        double m = -INFINITY, s = 0;
        for (int j = 0; j < T; j++) {
          double acc = 0;
          for (int d = 0; d < hd; d++) acc += (double)q[IX(i, d)] * k[IX(j, d)];
          P[i * T + j] = j <= i ? acc * scale : -INFINITY;
          if (j <= i) m = fmax(m, P[i * T + j]);
        }
        for (int j = 0; j < T; j++) s += (P[i * T + j] = j <= i ? exp(P[i * T + j] - m) : 0.0);
        for (int j = 0; j < T; j++) P[i * T + j] /= s;
        for (int d = 0; d < hd; d++) {
          double acc = 0;
          for (int j = 0; j <= i; j++) acc += P[i * T + j] * v[IX(j, d)];
          out[IX(i, d)] = acc;
        }
      }
      if (att) memcpy(att + ((size_t)b * H + h) * T * T, P, sizeof(double) * T * T);
      if (!dout) continue;
      for (int i = 0; i < T; i++) {
        double rs = 0;
        for (int j = 0; j < T; j++) {
          double dp = 0;
          for (int d = 0; d < hd; d++) dp += (double)dout[IX(i, d)] * v[IX(j, d)];
          dS[i * T + j] = dp;
          rs += dp * P[i * T + j];
        }
        for (int j = 0; j < T; j++) dS[i * T + j] = P[i * T + j] * (dS[i * T + j] - rs);
      }
      for (int t = 0; t < T; t++)
        for (int d = 0; d < hd; d++) {
          double aq = 0, ak = 0, av = 0;
          for (int j = 0; j < T; j++) {
            aq += dS[t * T + j] * k[IX(j, d)];
            ak += dS[j * T + t] * q[IX(j, d)];
            av += P[j * T + t] * dout[IX(j, d)];
          }
          dq[IX(t, d)] = aq * scale;
          dk[IX(t, d)] = ak * scale;
          dv[IX(t, d)] = av;
        }
#undef IX
    }
  free(P), free(dS);
}

/* T > 128 (ATT_BLOCK) exercises the row/column blocking of the kernel. */
static void attention_vs_naive(int B, int T, int H, int hd, uint64_t seed) {
  rng_seed(seed);
  size_t n = (size_t)B * T * H * hd, na = (size_t)B * H * T * T;
  float *q = frand(n, -2, 2), *k = frand(n, -2, 2), *v = frand(n, -1, 1), *dout = frand(n, -1, 1);
  float *out = fnan(n), *att = fnan((size_t)B * H * T * 2), *dq = fnan(n), *dk = fnan(n), *dv = fnan(n);
  float *scratch = fnan(kern_attention_scratch_floats(B, T, H));
  kern_attention_forward(out, att, scratch, q, k, v, B, T, H, hd);
  kern_attention_backward(dq, dk, dv, scratch, dout, q, k, v, att, B, T, H, hd);
  double *rout = malloc(n * sizeof(double)), *ratt = malloc(na * sizeof(double));
  double *rdq = malloc(n * sizeof(double)), *rdk = malloc(n * sizeof(double)), *rdv = malloc(n * sizeof(double));
  attn_ref(rout, ratt, rdq, rdk, rdv, q, k, v, dout, B, T, H, hd);
  /* The row stats rebuild the naive probabilities: P_ij = exp(s_ij - m) / sum
   * with s_ij = scale q_i . k_j in double (rows sum to 1, the masked part
   * is not stored at all). */
  float *prob = fnan(na);
  const int ld = H * hd;
  for (int bh = 0; bh < B * H; bh++) {
    const int b = bh / H, h = bh % H;
    for (int i = 0; i < T; i++) {
      const double m = att[((size_t)bh * T + i) * 2], inv = att[((size_t)bh * T + i) * 2 + 1];
      cr_assert(inv > 0 && inv <= 1, "att stats (bh %d, i %d): 1/sum %g outside (0, 1]", bh, i, inv);
      for (int j = 0; j < T; j++) {
        double sdot = 0;
        for (int e = 0; e < hd; e++)
          sdot += (double)q[((size_t)b * T + i) * ld + h * hd + e] * k[((size_t)b * T + j) * ld + h * hd + e];
        prob[((size_t)bh * T + i) * T + j] = j > i ? 0.0f : (float)(exp(sdot / sqrt((double)hd) - m) * inv);
      }
    }
  }
  /* fp32 softmax/GEMM vs double: tol 1e-5 abs + 1e-4 rel (att, out);
   * backward 1e-5 abs + 1e-3 rel */
  assert_close("attention probabilities from the stats vs naive", prob, ratt, na, 1e-6, 1e-4);
  free(prob);
  assert_close("attention out vs naive", out, rout, n, 1e-5, 1e-4);
  assert_close("attention dq vs naive", dq, rdq, n, 1e-5, 1e-3);
  assert_close("attention dk vs naive", dk, rdk, n, 1e-5, 1e-3);
  assert_close("attention dv vs naive", dv, rdv, n, 1e-5, 1e-3);
  /* NULL gradients skip work without changing the others (every path) */
  float *dq2 = fnan(n), *dk2 = fnan(n), *dv2 = fnan(n);
  kern_attention_backward(dq2, NULL, NULL, scratch, dout, q, k, v, att, B, T, H, hd);
  kern_attention_backward(NULL, dk2, NULL, scratch, dout, q, k, v, att, B, T, H, hd);
  kern_attention_backward(NULL, NULL, dv2, scratch, dout, q, k, v, att, B, T, H, hd);
  assert_bitwise("attention dq alone", dq, dq2, n * sizeof(float));
  assert_bitwise("attention dk alone", dk, dk2, n * sizeof(float));
  assert_bitwise("attention dv alone", dv, dv2, n * sizeof(float));
  free(dq2), free(dk2), free(dv2);
  free(q), free(k), free(v), free(dout), free(out), free(att), free(dq), free(dk), free(dv), free(scratch);
  free(rout), free(ratt), free(rdq), free(rdk), free(rdv);
}

Test(ops_fwd, attention_vs_naive_small) { attention_vs_naive(2, 5, 2, 4, 33); }
Test(ops_fwd, attention_vs_naive_blocked_parallel) { attention_vs_naive(1, 131, 3, 8, 34); }
Test(ops_fwd, attention_vs_naive_blocked_serial) { attention_vs_naive(1, 140, 1, 5, 35); }
/* B*H = 1 but enough work to thread: row/column blocks dealt round-robin */
Test(ops_fwd, attention_vs_naive_one_head_threaded) { attention_vs_naive(1, 300, 1, 9, 37); }

/* Sizes above the threading threshold: GEMMs split over OpenMP threads by
 * rows (M >= N) or columns. Forward and both gradients vs naive double
 * loops; fp32 sums of <= 300 terms: tol 1e-5 abs + 1e-4 rel. */
static void linear_threaded(int N, int Cin, int Cout, uint64_t seed) {
  rng_seed(seed);
  float *in = frand((size_t)N * Cin, -1, 1), *dy = frand((size_t)N * Cout, -1, 1);
  float *W = frand((size_t)Cout * Cin, -0.5f, 0.5f);
  float *out = fnan((size_t)N * Cout), *din = fnan((size_t)N * Cin), *dW = calloc((size_t)Cout * Cin, sizeof(float));
  double *ro = malloc(sizeof(double) * N * Cout), *rdin = malloc(sizeof(double) * N * Cin);
  double *rdW = calloc((size_t)Cout * Cin, sizeof(double));
  /* linear: out = in W^T, din = dy W, dW = dy^T in */
  kern_linear_forward(out, in, W, N, Cin, Cout);
  kern_linear_backward(din, dW, dy, in, W, N, Cin, Cout);
  for (int n = 0; n < N; n++) {
    for (int o = 0; o < Cout; o++) {
      double acc = 0;
      for (int i = 0; i < Cin; i++) acc += (double)in[(size_t)n * Cin + i] * W[(size_t)o * Cin + i];
      ro[(size_t)n * Cout + o] = acc;
    }
    for (int i = 0; i < Cin; i++) {
      double acc = 0;
      for (int o = 0; o < Cout; o++) acc += (double)dy[(size_t)n * Cout + o] * W[(size_t)o * Cin + i];
      rdin[(size_t)n * Cin + i] = acc;
    }
    for (int o = 0; o < Cout; o++)
      for (int i = 0; i < Cin; i++)
        rdW[(size_t)o * Cin + i] += (double)dy[(size_t)n * Cout + o] * in[(size_t)n * Cin + i];
  }
  assert_close("linear out (threaded)", out, ro, (size_t)N * Cout, 1e-5, 1e-4);
  assert_close("linear din (threaded)", din, rdin, (size_t)N * Cin, 1e-5, 1e-4);
  assert_close("linear dW (threaded)", dW, rdW, (size_t)Cout * Cin, 1e-5, 1e-4);
  free(in), free(dy), free(W), free(out), free(din), free(dW), free(ro), free(rdin), free(rdW);
}
/* many tokens: row splits */
Test(ops_fwd, linear_threaded_tall) { linear_threaded(301, 67, 45, 38); }
/* few tokens, wide output: column splits */
Test(ops_fwd, linear_threaded_wide) { linear_threaded(37, 131, 299, 39); }

Test(ops_fwd, attention_first_token_copies_v) {
  /* token 0 attends only to itself: out[b,0,h,:] = v[b,0,h,:] exactly-ish */
  rng_seed(36);
  enum { B = 2, T = 3, H = 2, hd = 4 };
  size_t n = (size_t)B * T * H * hd;
  float *q = frand(n, -3, 3), *k = frand(n, -3, 3), *v = frand(n, -1, 1), *out = fnan(n), *att = fnan(B * H * T * 2);
  float *scr = fnan(kern_attention_scratch_floats(B, T, H));
  kern_attention_forward(out, att, scr, q, k, v, B, T, H, hd);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      cr_assert(att[(size_t)(b * H + h) * T * 2 + 1] == 1.0f, "att[b%d,h%d] row 0: 1/sum must be exactly 1", b, h);
      for (int d = 0; d < hd; d++) {
        size_t o = ((size_t)b * T * H + h) * hd + d;
        cr_assert(fabs(out[o] - v[o]) <= 1e-6, "attention out at t=0 (b%d h%d d%d) = %g, expected v = %g", b, h, d,
                  out[o], v[o]);
      }
    }
  free(q), free(k), free(v), free(out), free(att), free(scr);
}

