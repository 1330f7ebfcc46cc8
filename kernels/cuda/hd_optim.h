/* The bodies and phases of the optimizer's kernels (optim.cu) over an optim
 * plan's tiles (hd_ops.h: hd_tile, hd_tiles_build; hd_grid.h explains
 * phases).
 *   adamw:      one block of HD_OPT_THREADS per tile, hd_adamw per element;
 *               the bf16 working copy written rounded when act is bf16.
 *   grad_sumsq: one double partial per tile (a block tree), the partials of
 *               each segment in tile order (one block per segment, a block
 *               tree), then the segments in plan order by one thread. */
#ifndef BOOST_CUDA_HD_OPTIM_H
#define BOOST_CUDA_HD_OPTIM_H

#include "hd_grid.h"
#include "hd_ops.h"

/* A segment's flags: the values of backend.h's BOOST_SEG_DECAY and
 * BOOST_SEG_NORM (optim.cu and the tests check they agree). */
#define HD_SEG_DECAY 1u
#define HD_SEG_NORM 2u

typedef struct {
  const hd_tile *tiles;   /* [ntiles] */
  const uint32_t *flags;  /* [nseg] */
  const uint32_t *first;  /* [nseg + 1]: each segment's first tile */
  int nseg;
  const float *grads;
  double *partial;        /* [ntiles]: each tile's sum of squares */
  double *seg_sum;        /* [nseg] */
  double *out;            /* the total */
  float *params, *m, *v;  /* adamw: m, v indexed from mom_begin */
  void *work;             /* adamw with bf16 act: the rounded working copy */
  size_t mom_begin;
  hd_adamw_consts c;
} hd_optim_args;

/* sumsq_tiles_kernel and sumsq_segs_kernel: 0 the thread's sum; 1..4 the
 * block's; 5 thread 0 stores it */
#define HD_SUMSQ_PHASES (1 + HD_BLOCK_REDUCE_STEPS + 1)
BOOST_HD int hd_sumsq_sync(int ph) {
  if (ph == 0) return HD_WARP_SUM_D;
  return ph <= HD_BLOCK_REDUCE_STEPS ? hd_block_reduce_sync(ph - 1, HD_WARP_SUM_D) : HD_SYNC_NONE;
}

/* block k: partial[k] = the sum of squares of tile k's gradients (0 outside the norm) */
BOOST_HDI void hd_sumsq_tiles_phase(const hd_optim_args *a, hd_ix ix, int ph, hd_regs *r, double *sh) {
  if (ph == 0) {
    const hd_tile t = a->tiles[ix.bx];
    double acc = 0.0;
    if (a->flags[t.seg] & HD_SEG_NORM)
      for (uint32_t i = ix.tx; i < t.len; i += HD_OPT_THREADS) {
        const double x = (double)a->grads[t.start + i];
        acc += x * x;
      }
    r->red.d = acc;
  } else if (ph <= HD_BLOCK_REDUCE_STEPS) {
    hd_block_reduce_step(ph - 1, HD_WARP_SUM_D, ix, &r->red, NULL, sh);
  } else if (ix.tx == 0) {
    a->partial[ix.bx] = r->red.d;
  }
}

/* block s: seg_sum[s] = the sum of segment s's tile partials */
BOOST_HDI void hd_sumsq_segs_phase(const hd_optim_args *a, hd_ix ix, int ph, hd_regs *r, double *sh) {
  const int s = (int)ix.bx;
  if (ph == 0) {
    double acc = 0.0;
    for (uint32_t k = a->first[s] + ix.tx; k < a->first[s + 1]; k += HD_OPT_THREADS) acc += a->partial[k];
    r->red.d = acc;
  } else if (ph <= HD_BLOCK_REDUCE_STEPS) {
    hd_block_reduce_step(ph - 1, HD_WARP_SUM_D, ix, &r->red, NULL, sh);
  } else if (ix.tx == 0) {
    a->seg_sum[s] = r->red.d;
  }
}

/* sumsq_total_kernel (one thread): the norm segments' sums in plan order */
BOOST_HDI void hd_sumsq_total_thread(const hd_optim_args *a, hd_ix ix) {
  (void)ix;
  double s = 0.0;
  for (int i = 0; i < a->nseg; i++)
    if (a->flags[i] & HD_SEG_NORM) s += a->seg_sum[i];
  *a->out = s;
}

/* adamw_kernel, block k = tile k */
BOOST_HDI void hd_adamw_block(const hd_optim_args *a, int bf16, hd_ix ix) {
  const hd_tile t = a->tiles[ix.bx];
  const float wd = (a->flags[t.seg] & HD_SEG_DECAY) ? a->c.wd : 0.0f;
  for (uint32_t i = ix.tx; i < t.len; i += HD_OPT_THREADS) {
    const size_t at = t.start + i, mo = at - a->mom_begin;
    float mm = a->m[mo], vv = a->v[mo];
    const float pnew = hd_adamw(&a->c, wd, a->params[at], a->grads[at], &mm, &vv);
    a->m[mo] = mm;
    a->v[mo] = vv;
    a->params[at] = pnew;
    if (bf16) hd_st(a->work, at, pnew, 1);
  }
}

#endif
