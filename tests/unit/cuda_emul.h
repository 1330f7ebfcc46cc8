/* The CUDA kernels (kernels/cuda/, the .cu files) replayed on the CPU: the same loops
 * over threads, lanes and blocks, the same reduction trees, calling the same
 * hd_*.h arithmetic the kernels call. tests/unit/test_cuda_math.c compares
 * these replays with the CPU kernels. Each function names the kernel it
 * replays; when a kernel changes its loop structure, its replay here must
 * follow. */
#ifndef BOOST_TESTS_CUDA_EMUL_H
#define BOOST_TESTS_CUDA_EMUL_H

#include <stdlib.h>
#include <string.h>

#include "../../kernels/cuda/hd_ops.h"

/* ---- reductions (cuda_internal.cuh) --------------------------------------- */

static inline double emu_butterfly_d(double *v) {
  for (int o = 16; o > 0; o >>= 1) {
    double t[32];
    for (int l = 0; l < 32; l++) t[l] = v[l] + v[l ^ o];
    memcpy(v, t, sizeof t);
  }
  return v[0];
}
static inline float emu_butterfly_max(float *v) {
  for (int o = 16; o > 0; o >>= 1) {
    float t[32];
    for (int l = 0; l < 32; l++) t[l] = fmaxf(v[l], v[l ^ o]);
    memcpy(v, t, sizeof t);
  }
  return v[0];
}
/* block_sum_d<NT>: each warp's butterfly, then warp 0 over the warp sums */
static inline double emu_block_sum_d(const double *per_thread, int nt) {
  double warps[32] = {0};
  for (int w = 0; w < nt / 32; w++) {
    double v[32];
    memcpy(v, per_thread + 32 * w, sizeof v);
    warps[w] = emu_butterfly_d(v);
  }
  return emu_butterfly_d(warps);
}
/* loss.cu block_max */
static inline float emu_block_max(const float *per_thread, int nt) {
  float warps[32];
  for (int l = 0; l < 32; l++) warps[l] = -INFINITY;
  for (int w = 0; w < nt / 32; w++) {
    float v[32];
    memcpy(v, per_thread + 32 * w, sizeof v);
    warps[w] = emu_butterfly_max(v);
  }
  return emu_butterfly_max(warps);
}

/* ---- elementwise.cu: which element each thread of the grid touches ----------- */
/* counts[i] += 1 for every element thread t of `threads` touches (vectors of w, then the tail) */
static inline void emu_ew_cover(int *counts, size_t n, int w, size_t threads, int vec) {
  for (size_t t = 0; t < threads; t++) {
    size_t nv = 0;
    if (vec) {
      nv = hd_vec_end(n, w);
      for (size_t j = t * (size_t)w; j < nv; j += threads * (size_t)w)
        for (int k = 0; k < w; k++) counts[j + (size_t)k]++;
    }
    for (size_t i = nv + t; i < n; i += threads) counts[i]++;
  }
}

/* ---- norms.cu ---------------------------------------------------------------------- */

/* rmsnorm_fwd_kernel */
static inline void emu_rmsnorm_fwd(void *out, float *rstd, const void *x, const void *w, int N, int C, float eps,
                                   int bf16) {
  for (int row = 0; row < N; row++) {
    const size_t o = (size_t)row * C;
    float part[32];
    for (int lane = 0; lane < 32; lane++) {
      float ss = 0.0f;
      for (int c = lane; c < C; c += 32) {
        const float v = hd_ld(x, o + c, bf16);
        ss += v * v;
      }
      part[lane] = ss;
    }
    const float r = hd_rms_rstd(hd_butterfly_sum(part), C, eps);
    if (rstd) rstd[row] = r;
    for (int c = 0; c < C; c++) hd_st(out, o + c, hd_rms_out(hd_ld(x, o + c, bf16), r, hd_ld(w, c, bf16)), bf16);
  }
}

/* rmsnorm_dx_kernel */
static inline void emu_rmsnorm_dx(void *dx, const void *dout, const void *x, const void *w, const float *rstd, int N,
                                  int C, int bf16) {
  for (int row = 0; row < N; row++) {
    const size_t o = (size_t)row * C;
    float part[32];
    for (int lane = 0; lane < 32; lane++) {
      float dot = 0.0f;
      for (int c = lane; c < C; c += 32)
        dot += hd_rms_dot_term(hd_ld(dout, o + c, bf16), hd_ld(w, c, bf16), hd_ld(x, o + c, bf16));
      part[lane] = dot;
    }
    const float r = rstd[row], k = hd_rms_k(r, hd_butterfly_sum(part), C);
    for (int c = 0; c < C; c++)
      hd_st(dx, o + c, hd_rms_dx(r, hd_ld(w, c, bf16), hd_ld(dout, o + c, bf16), hd_ld(x, o + c, bf16), k), bf16);
  }
}

/* colsum: colsum_partial_kernel then colsum_final_kernel */
static inline void emu_colsum(float *out, const void *a, const void *b, const float *rowscale, int N, int C, int bf16) {
  const int rows_per_chunk = N <= 64 * 1024 ? 64 : (N + 1023) / 1024;
  const int P = (N + rows_per_chunk - 1) / rows_per_chunk;
  float *partial = calloc((size_t)P * C, sizeof(float));
  for (int p = 0; p < P; p++)
    for (int c = 0; c < C; c++) {
      const int n1 = N < (p + 1) * rows_per_chunk ? N : (p + 1) * rows_per_chunk;
      float acc = 0.0f;
      for (int n = p * rows_per_chunk; n < n1; n++) {
        const size_t i = (size_t)n * C + c;
        const float av = hd_ld(a, i, bf16), bv = hd_ld(b, i, bf16);
        acc += rowscale ? hd_rms_dw_term(av, bv, rowscale[n]) : av * bv;
      }
      partial[(size_t)p * C + c] = acc;
    }
  for (int c = 0; c < C; c++) {
    float acc = 0.0f;
    for (int p = 0; p < P; p++) acc += partial[(size_t)p * C + c];
    out[c] += acc;
  }
  free(partial);
}

/* gain_sumsq_kernel */
static inline void emu_gain_sumsq(void *xg, float *ss, const void *x, const void *gain, int N, int C, int bf16) {
  for (int row = 0; row < N; row++) {
    const size_t o = (size_t)row * C;
    float part[32];
    for (int lane = 0; lane < 32; lane++) {
      float s = 0.0f;
      for (int c = lane; c < C; c += 32) {
        const float v = hd_ld(x, o + c, bf16);
        s += v * v;
        hd_st(xg, o + c, v * hd_ld(gain, c, bf16), bf16);
      }
      part[lane] = s;
    }
    ss[row] = hd_butterfly_sum(part);
  }
}

/* cu_gain_sumsq_backward: colsum, then gain_dx_kernel */
static inline void emu_gain_bwd(void *dx_acc, float *dgain, const void *dxg, const void *x, const void *gain,
                                const float *dss, int N, int C, int bf16) {
  emu_colsum(dgain, dxg, x, NULL, N, C, bf16);
  for (size_t i = 0; i < (size_t)N * C; i++) {
    const size_t n = i / (size_t)C, c = i % (size_t)C;
    hd_st(dx_acc, i,
          hd_gain_dx(hd_ld(dx_acc, i, bf16), hd_ld(dxg, i, bf16), hd_ld(gain, c, bf16), hd_ld(x, i, bf16), dss[n]),
          bf16);
  }
}

/* online_rms_fwd_kernel, online_rms_bwd_kernel */
static inline void emu_online_fwd(void *h, float *rstd, const float *ss, int N, int w, float inv_d, float eps,
                                  int bf16) {
  for (int row = 0; row < N; row++) {
    const float r = hd_online_rstd(ss[row], inv_d, eps);
    rstd[row] = r;
    for (int c = 0; c < w; c++) hd_st(h, (size_t)row * w + c, hd_ld(h, (size_t)row * w + c, bf16) * r, bf16);
  }
}
static inline void emu_online_bwd(void *dh, float *dss, const void *hs, const float *rstd, int N, int w, float inv_d,
                                  int bf16) {
  for (int row = 0; row < N; row++) {
    const float r = rstd[row];
    const size_t o = (size_t)row * w;
    float part[32];
    for (int lane = 0; lane < 32; lane++) {
      float acc = 0.0f;
      for (int c = lane; c < w; c += 32) {
        const float g = hd_ld(dh, o + c, bf16);
        acc += g * hd_ld(hs, o + c, bf16);
        hd_st(dh, o + c, g * r, bf16);
      }
      part[lane] = acc;
    }
    dss[row] = hd_online_dss(hd_butterfly_sum(part), r, inv_d);
  }
}

/* ---- rope.cu ---------------------------------------------------------------------- */
static inline void emu_rope(void *out, const void *in, const float *cos_t, const float *sin_t, int B, int T, int H,
                            int hd, float sign, int bf16) {
  const int half = hd / 2;
  const size_t npairs = (size_t)B * T * H * half;
  for (size_t p = 0; p < npairs; p++) {
    int t, i;
    hd_rope_index(p, T, H, half, &t, &i);
    const float c = cos_t[(size_t)t * half + i], s = sign * sin_t[(size_t)t * half + i];
    float y0, y1;
    hd_rope_pair(hd_ld(in, 2 * p, bf16), hd_ld(in, 2 * p + 1, bf16), c, s, &y0, &y1);
    hd_st(out, 2 * p, y0, bf16);
    hd_st(out, 2 * p + 1, y1, bf16);
  }
}

/* ---- loss.cu (CE_THREADS = 512) ------------------------------------------------------ */
#define EMU_CE_THREADS 512

static inline float emu_row_max(const void *x, size_t o, int V, int bf16) {
  float m[EMU_CE_THREADS];
  for (int t = 0; t < EMU_CE_THREADS; t++) {
    m[t] = -INFINITY;
    for (int v = t; v < V; v += EMU_CE_THREADS) {
      const float xv = hd_ld(x, o + v, bf16);
      m[t] = xv > m[t] ? xv : m[t];
    }
  }
  return emu_block_max(m, EMU_CE_THREADS);
}
static inline double emu_row_sumexp(const void *x, size_t o, int V, float m, int bf16) {
  double s[EMU_CE_THREADS];
  for (int t = 0; t < EMU_CE_THREADS; t++) {
    s[t] = 0.0;
    for (int v = t; v < V; v += EMU_CE_THREADS) s[t] += (double)expf(hd_ld(x, o + v, bf16) - m);
  }
  return emu_block_sum_d(s, EMU_CE_THREADS);
}
/* ce_kernel: d NULL for the forward */
static inline void emu_ce(void *d, float *losses, const void *logits, const int32_t *targets, int N, int V, float dloss,
                          int bf16) {
  for (int n = 0; n < N; n++) {
    const size_t o = (size_t)n * V;
    const float xt = hd_ld(logits, o + targets[n], bf16), m = emu_row_max(logits, o, V, bf16);
    const float s = (float)emu_row_sumexp(logits, o, V, m, bf16);
    if (losses) losses[n] = hd_ce_loss(m, xt, s);
    if (!d) continue;
    const float k = dloss / s;
    for (int v = 0; v < V; v++) hd_st(d, o + v, hd_ce_grad(hd_ld(logits, o + v, bf16), m, k, v == targets[n], dloss), bf16);
  }
}
/* vocab_max_kernel, vocab_sums_kernel, vocab_losses_kernel, vocab_bwd_kernel */
static inline void emu_vocab(float *mx, float *sums, float *losses, void *logits, const int32_t *targets, int v0, int N,
                             int V, float scale, int bf16) {
  for (int n = 0; n < N; n++) mx[n] = emu_row_max(logits, (size_t)n * V, V, bf16);
  for (int n = 0; n < N; n++) {
    const int t = targets[n] - v0;
    sums[n] = (float)emu_row_sumexp(logits, (size_t)n * V, V, mx[n], bf16);
    sums[N + n] = (t >= 0 && t < V) ? hd_ld(logits, (size_t)n * V + t, bf16) : 0.0f;
  }
  for (int n = 0; n < N; n++) losses[n] = hd_vocab_loss(sums[n], mx[n], sums[N + n]);
  for (int n = 0; n < N; n++) {
    const float inv = 1.0f / sums[n];
    for (int v = 0; v < V; v++)
      hd_st(logits, (size_t)n * V + v,
            hd_vocab_grad(hd_ld(logits, (size_t)n * V + v, bf16), mx[n], inv, scale, v == targets[n] - v0), bf16);
  }
}
/* loss_acc_kernel */
static inline void emu_loss_acc(const float *losses, int N, double *acc) {
  double s[32];
  for (int l = 0; l < 32; l++) {
    s[l] = 0.0;
    for (int i = l; i < N; i += 32) s[l] += (double)losses[i];
  }
  *acc = hd_loss_add(*acc, emu_butterfly_d(s), N);
}

#endif
