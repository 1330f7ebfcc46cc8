/* Per-element and per-row arithmetic of the CUDA kernels, written in the
 * same operation order as the CPU kernels (kernels/cpu, contracts in
 * ops.h) so that float activations agree with the CPU to the last bits
 * wherever exp/log do not enter (hd_common.h explains BOOST_HD and the
 * rounding rules). With bf16 activations each output is computed in float
 * and rounded once on store. */
#ifndef BOOST_CUDA_HD_OPS_H
#define BOOST_CUDA_HD_OPS_H

#include "hd_common.h"

/* ---- elementwise (elementwise.c) ---------------------------------------- */
BOOST_HD float hd_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
BOOST_HD float hd_silu(float x) { return x * hd_sigmoid(x); }
BOOST_HD float hd_silu_grad(float dout, float x) {
  const float s = hd_sigmoid(x);
  return dout * s * (1.0f + x * (1.0f - s));
}

/* ---- RMSNorm (rmsnorm.c) --------------------------------------------------
 * rstd from the row's sum of squares; out = x * rstd * w; backward with
 * dot = sum g * w * x: dx = rstd * (w g - x k), k = rstd^2 dot / C;
 * dw += g * x * rstd (summed over rows). */
BOOST_HD float hd_rms_rstd(float ss, int C, float eps) { return 1.0f / sqrtf(ss / (float)C + eps); }
BOOST_HD float hd_rms_out(float x, float r, float w) { return x * r * w; }
BOOST_HD float hd_rms_dot_term(float g, float w, float x) { return g * w * x; }
BOOST_HD float hd_rms_k(float r, float dot, int C) { return r * r * dot / (float)C; }
BOOST_HD float hd_rms_dx(float r, float w, float g, float x, float k) { return r * (w * g - x * k); }
BOOST_HD float hd_rms_dw_term(float g, float x, float r) { return g * x * r; }

/* ---- the btp norm pieces (tp_pieces.c) -------------------------------------
 * gain_sumsq: xg = x * gain, ss += x^2; backward dx_acc += dxg gain + 2 x dss,
 * dgain += dxg x. online_rms: rstd = 1/sqrt(ss inv_d + eps), h *= rstd;
 * backward: drstd = sum dh * h_scaled / rstd, dh *= rstd,
 * dss = -0.5 drstd rstd^3 inv_d. */
BOOST_HD float hd_gain_dx(float acc, float dxg, float gain, float x, float dss) {
  return acc + (dxg * gain + 2.0f * x * dss);
}
BOOST_HD float hd_online_rstd(float ss, float inv_d, float eps) { return 1.0f / sqrtf(ss * inv_d + eps); }
BOOST_HD float hd_online_dss(float drstd_sum, float r, float inv_d) {
  const float drstd = drstd_sum / r;
  return -0.5f * drstd * r * r * r * inv_d;
}

/* ---- RoPE (rope.c) ---------------------------------------------------------
 * Pair p of [B, T, H, hd] (elements 2p, 2p + 1): its position t and
 * frequency index i; the rotation by sign * angle. */
BOOST_HD void hd_rope_index(size_t p, int T, int H, int half, int *t, int *i) {
  *i = (int)(p % (size_t)half);
  *t = (int)((p / (size_t)half / (size_t)H) % (size_t)T);
}
BOOST_HD void hd_rope_pair(float x0, float x1, float c, float s, float *y0, float *y1) {
  *y0 = x0 * c - x1 * s;
  *y1 = x0 * s + x1 * c;
}

/* ---- cross-entropy (crossentropy.c, tp_pieces.c) ---------------------------
 * A row's max m and sum s of exp(x - m) come from two block reductions
 * in fixed trees (hd_loss.h). loss = (m - x[target]) + log(s);
 * dlogits = exp(x - m) * (dloss / s) - dloss at the target (one rounding). */
BOOST_HD float hd_ce_loss(float m, float xt, float s) { return (m - xt) + logf(s); }
BOOST_HD float hd_ce_grad(float x, float m, float k, int is_target, float dloss) {
  const float d = expf(x - m) * k;
  return is_target ? d - dloss : d;
}
/* vocab-parallel: loss = log(sum) + max - target logit; backward
 * exp(x - m) * inv * scale, minus scale at the target. */
BOOST_HD float hd_vocab_loss(float sum, float mx, float xt) { return logf(sum) + mx - xt; }
BOOST_HD float hd_vocab_grad(float x, float m, float inv, float scale, int is_target) {
  const float d = expf(x - m) * inv * scale;
  return is_target ? d - scale : d;
}

/* ---- AdamW (adamw.c) --------------------------------------------------------
 * Constants computed on the host exactly as the CPU computes them; the
 * element update in the CPU's operation order. */
typedef struct {
  float b1, b2, one_b1, one_b2, inv_bc1, inv_bc2, lr, eps, wd, gs;
} hd_adamw_consts;

BOOST_HD hd_adamw_consts hd_adamw_make(float beta1, float beta2, float lr, float eps, float weight_decay, int t,
                                       float grad_scale) {
  hd_adamw_consts c;
  const float bc1 = (float)(1.0 - pow((double)beta1, (double)t));
  const float bc2 = (float)(1.0 - pow((double)beta2, (double)t));
  c.b1 = beta1;
  c.b2 = beta2;
  c.one_b1 = 1.0f - beta1;
  c.one_b2 = 1.0f - beta2;
  c.inv_bc1 = 1.0f / bc1;
  c.inv_bc2 = 1.0f / bc2;
  c.lr = lr;
  c.eps = eps;
  c.wd = weight_decay;
  c.gs = grad_scale;
  return c;
}

/* One element: m, v updated; returns the new parameter. wd: the segment's
 * decay (0 for segments without BOOST_SEG_DECAY). */
BOOST_HD float hd_adamw(const hd_adamw_consts *c, float wd, float p, float grad, float *m, float *v) {
  const float g = grad * c->gs;
  const float mi = c->b1 * *m + c->one_b1 * g;
  const float vi = c->b2 * *v + c->one_b2 * (g * g);
  *m = mi;
  *v = vi;
  const float mhat = mi * c->inv_bc1;
  const float vhat = vi * c->inv_bc2;
  return p - c->lr * (mhat / (sqrtf(vhat) + c->eps) + wd * p);
}

/* ---- the optimizer's tiles ---------------------------------------------------
 * An optim plan's segments are cut into tiles of at most `tile` floats that
 * never straddle two segments; one GPU block per tile (AdamW), one double
 * partial per tile (the gradient sum of squares, then summed per segment in
 * tile order and over segments in plan order). */
#define HD_OPT_TILE 16384u /* floats per tile */
#define HD_OPT_THREADS 256 /* threads per tile's block */

typedef struct {
  uint64_t start; /* arena offset of the tile's first float */
  uint32_t len, seg;
} hd_tile;

/* Tiles of segments (offset[i], n[i]), written to out (NULL: only counted);
 * seg_first[i] = index of segment i's first tile, seg_first[nseg] = count. */
BOOST_HD size_t hd_tiles_build(const uint64_t *offset, const uint64_t *n, int nseg, uint32_t tile, hd_tile *out,
                               uint32_t *seg_first) {
  size_t k = 0;
  for (int i = 0; i < nseg; i++) {
    if (seg_first) seg_first[i] = (uint32_t)k;
    for (uint64_t o = 0; o < n[i]; o += tile, k++)
      if (out) {
        out[k].start = offset[i] + o;
        out[k].len = (uint32_t)(n[i] - o < tile ? n[i] - o : tile);
        out[k].seg = (uint32_t)i;
      }
  }
  if (seg_first) seg_first[nseg] = (uint32_t)k;
  return k;
}

/* ---- embedding backward ---------------------------------------------------------
 * After a stable sort of (token, position) pairs by token, position i
 * starts a run of equal tokens when it is 0 or its key differs from the
 * previous one; the run ends at *end. The run's rows of dout are summed in
 * position order and added to the token's dwte row once. */
BOOST_HD int hd_run_start(const uint32_t *keys, int i, int N, int *end) {
  if (i > 0 && keys[i - 1] == keys[i]) return 0;
  int e = i + 1;
  while (e < N && keys[e] == keys[i]) e++;
  *end = e;
  return 1;
}

/* ---- the loss sum ------------------------------------------------------------------
 * *acc += (double)(float)(sum / N), the mean summed in double. */
BOOST_HD double hd_loss_add(double acc, double sum, int N) { return acc + (double)(float)(sum / N); }

#endif
