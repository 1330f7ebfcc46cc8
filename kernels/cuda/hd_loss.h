/* The phases of the loss kernels (loss.cu): the fused cross-entropy, the
 * vocab-parallel pieces and the loss sum (hd_grid.h explains phases).
 *
 * One block of HD_CE_THREADS per row: a max pass and a sum pass of
 * exp(x - max), each a per-thread strided loop in index order followed by
 * the warp butterfly and the block tree (hd_block_reduce_step); then the
 * loss and, fused, the gradient in place. In place (dlogits == logits): the
 * target logit is read in phase 0, before the barrier that precedes any
 * write, and every other element is read and then written by the same
 * thread. */
#ifndef BOOST_CUDA_HD_LOSS_H
#define BOOST_CUDA_HD_LOSS_H

#include "hd_grid.h"
#include "hd_ops.h"

#define HD_CE_THREADS 512
#define HD_CE_WARPS (HD_CE_THREADS / 32)

typedef struct {
  float f[HD_CE_WARPS];
  double d[HD_CE_WARPS];
  float xt; /* the target logit */
} hd_ce_shared;

typedef struct {
  void *d;                 /* ce: dlogits [N, V] or NULL; vocab_bwd: the logits, overwritten */
  float *losses;           /* [N] (ce: may be NULL) */
  const void *logits;      /* [N, V] */
  const int32_t *targets;  /* [N] */
  float *mx, *sums;        /* vocab: row max [N]; sums [2N] (sum of exp, then the target logit or 0) */
  const float *mx_in, *sums_in;
  int N, V, v0;            /* v0: the first vocab index held here (vocab pieces) */
  float dloss;             /* ce: the gradient's scale; vocab_bwd: scale */
} hd_ce_args;

/* Phases of a row's max then sum of exp(x - max) (ce_kernel; vocab_max_kernel
 * stops after the max): 0 local max; 1..4 the block max; 5 local sum
 * (double); 6..9 the block sum; 10 the row's results. */
#define HD_CE_MAX_DONE (1 + HD_BLOCK_REDUCE_STEPS) /* first phase with the row max */
#define HD_CE_SUM_DONE (HD_CE_MAX_DONE + 1 + HD_BLOCK_REDUCE_STEPS)
#define HD_CE_PHASES (HD_CE_SUM_DONE + 1)
#define HD_VOCAB_MAX_PHASES (HD_CE_MAX_DONE + 1)
#define HD_VOCAB_SUMS_PHASES (1 + HD_BLOCK_REDUCE_STEPS + 1)

BOOST_HD int hd_ce_sync(int ph) {
  if (ph == 0) return HD_WARP_MAX_F;
  if (ph < HD_CE_MAX_DONE) return hd_block_reduce_sync(ph - 1, HD_WARP_MAX_F);
  if (ph == HD_CE_MAX_DONE) return HD_WARP_SUM_D;
  if (ph < HD_CE_SUM_DONE) return hd_block_reduce_sync(ph - HD_CE_MAX_DONE - 1, HD_WARP_SUM_D);
  return HD_SYNC_NONE;
}
BOOST_HD int hd_vocab_max_sync(int ph) { return ph < HD_CE_MAX_DONE ? hd_ce_sync(ph) : HD_SYNC_NONE; }
/* vocab_sums_kernel: the sum of exp alone */
BOOST_HD int hd_vocab_sums_sync(int ph) { return hd_ce_sync(ph + HD_CE_MAX_DONE); }

BOOST_HDI float hd_ce_local_max(const void *x, size_t o, int V, int bf16, hd_ix ix) {
  float m = -INFINITY;
  for (int v = (int)ix.tx; v < V; v += HD_CE_THREADS) {
    const float xv = hd_ld(x, o + v, bf16);
    m = xv > m ? xv : m;
  }
  return m;
}
BOOST_HDI double hd_ce_local_sumexp(const void *x, size_t o, int V, float m, int bf16, hd_ix ix) {
  double s = 0.0;
  for (int v = (int)ix.tx; v < V; v += HD_CE_THREADS) s += (double)expf(hd_ld(x, o + v, bf16) - m);
  return s;
}

/* The row's max then sum of exp (phases 0 .. HD_CE_SUM_DONE - 1); the max
 * stays in keep from phase HD_CE_MAX_DONE on. Returns 0 when ph is past them. */
BOOST_HDI int hd_ce_row_stats(const void *x, size_t o, int V, int bf16, hd_ix ix, int ph, hd_regs *r,
                              hd_ce_shared *sh) {
  if (ph == 0) {
    r->red.f = hd_ce_local_max(x, o, V, bf16, ix);
  } else if (ph < HD_CE_MAX_DONE) {
    hd_block_reduce_step(ph - 1, HD_WARP_MAX_F, ix, &r->red, sh->f, sh->d);
  } else if (ph == HD_CE_MAX_DONE) {
    r->keep = r->red.f;
    r->red.d = hd_ce_local_sumexp(x, o, V, r->keep, bf16, ix);
  } else if (ph < HD_CE_SUM_DONE) {
    hd_block_reduce_step(ph - HD_CE_MAX_DONE - 1, HD_WARP_SUM_D, ix, &r->red, sh->f, sh->d);
  } else {
    return 0;
  }
  return 1;
}

/* ce_kernel, block n = row n: losses[n] (if wanted); with d, d[n] = (softmax - onehot) * dloss */
BOOST_HDI void hd_ce_phase(const hd_ce_args *a, int bf16, hd_ix ix, int ph, hd_regs *r, hd_ce_shared *sh) {
  const int n = (int)ix.bx, V = a->V, tgt = a->targets[n];
  const size_t o = (size_t)n * V;
  if (ph == 0 && ix.tx == 0) sh->xt = hd_ld(a->logits, o + tgt, bf16); /* the max's barriers publish it */
  if (hd_ce_row_stats(a->logits, o, V, bf16, ix, ph, r, sh)) return;
  const float m = r->keep, s = (float)r->red.d;
  if (a->losses && ix.tx == 0) a->losses[n] = hd_ce_loss(m, sh->xt, s);
  if (!a->d) return;
  const float k = a->dloss / s;
  for (int v = (int)ix.tx; v < V; v += HD_CE_THREADS)
    hd_st(a->d, o + v, hd_ce_grad(hd_ld(a->logits, o + v, bf16), m, k, v == tgt, a->dloss), bf16);
}

/* vocab_max_kernel: mx[n] = the row's max */
BOOST_HDI void hd_vocab_max_phase(const hd_ce_args *a, int bf16, hd_ix ix, int ph, hd_regs *r, hd_ce_shared *sh) {
  const size_t o = (size_t)ix.bx * a->V;
  if (ph < HD_CE_MAX_DONE) {
    hd_ce_row_stats(a->logits, o, a->V, bf16, ix, ph, r, sh);
    return;
  }
  if (ix.tx == 0) a->mx[ix.bx] = r->red.f;
}

/* vocab_sums_kernel: sums[n] = sum of exp(x - mx_in[n]); sums[N + n] = the
 * target logit when this rank holds it, else 0 */
BOOST_HDI void hd_vocab_sums_phase(const hd_ce_args *a, int bf16, hd_ix ix, int ph, hd_regs *r, hd_ce_shared *sh) {
  const int n = (int)ix.bx;
  const size_t o = (size_t)n * a->V;
  if (ph == 0) {
    r->red.d = hd_ce_local_sumexp(a->logits, o, a->V, a->mx_in[n], bf16, ix);
  } else if (ph <= HD_BLOCK_REDUCE_STEPS) {
    hd_block_reduce_step(ph - 1, HD_WARP_SUM_D, ix, &r->red, sh->f, sh->d);
  } else if (ix.tx == 0) {
    const int t = a->targets[n] - a->v0;
    a->sums[n] = (float)r->red.d;
    a->sums[a->N + n] = (t >= 0 && t < a->V) ? hd_ld(a->logits, o + t, bf16) : 0.0f;
  }
}

/* vocab_losses_kernel: one thread per row */
BOOST_HDI void hd_vocab_losses_thread(const hd_ce_args *a, hd_ix ix) {
  const int n = (int)hd_gthread(ix);
  if (n < a->N) a->losses[n] = hd_vocab_loss(a->sums_in[n], a->mx_in[n], a->sums_in[a->N + n]);
}

/* vocab_bwd_kernel, block n = row n: the logits (d) become the gradient in place */
BOOST_HDI void hd_vocab_bwd_block(const hd_ce_args *a, int bf16, hd_ix ix) {
  const int n = (int)ix.bx, t = a->targets[n] - a->v0;
  const size_t o = (size_t)n * a->V;
  const float inv = 1.0f / a->sums_in[n], m = a->mx_in[n];
  for (int v = (int)ix.tx; v < a->V; v += HD_CE_THREADS)
    hd_st(a->d, o + v, hd_vocab_grad(hd_ld(a->d, o + v, bf16), m, inv, a->dloss, v == t), bf16);
}

/* ---- the loss sum: one warp; lane l sums l, l + 32, ... in double, then the butterfly ---- */
#define HD_LOSS_PHASES 2
BOOST_HD int hd_loss_sync(int ph) { return ph == 0 ? HD_WARP_SUM_D : HD_SYNC_NONE; }

/* loss_acc_kernel: *acc += the mean of losses [N], summed as above */
BOOST_HDI void hd_loss_acc_phase(const float *losses, int N, double *acc, hd_ix ix, int ph, hd_regs *r) {
  if (ph == 0) {
    double s = 0.0;
    for (int i = (int)ix.tx; i < N; i += 32) s += (double)losses[i];
    r->red.d = s;
    return;
  }
  if (ix.tx == 0) *acc = hd_loss_add(*acc, r->red.d, N);
}

#endif
