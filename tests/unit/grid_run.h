/* A CUDA grid run on the CPU: the kernels' own bodies and phases
 * (kernels/cuda/hd_*.h) called for every block, phase and thread, in that
 * order, with what follows each phase (the kernel's sync function,
 * hd_grid.h) applied between: a barrier needs nothing here (a phase has
 * run for every thread before the next starts); a warp shuffle is
 * emulated on the array of the threads' registers. Shared memory and
 * registers are poisoned (all bits set: NaN) before each block, so a phase
 * that reads what no earlier phase wrote shows up in the results.
 *
 * Nothing here knows a kernel's loops: the tests only say which function
 * to run over which grid (the geometry the .cu launches with). */
#ifndef BOOST_TESTS_GRID_RUN_H
#define BOOST_TESTS_GRID_RUN_H

#include <stdlib.h>
#include <string.h>

#include "../../kernels/cuda/hd_grid.h"

typedef struct {
  unsigned gx, gy, nt;  /* grid (gridDim.x, gridDim.y) and block size */
  int nphases;          /* phases per block (1: a body) */
  int (*sync)(int ph);  /* what follows phase ph; NULL: nothing (a body) */
  size_t shared_bytes;  /* the block's shared memory */
  /* per block, before its phases (NULL: none): may set up per-block state in
   * ctx and return the block's phase count (0: keep nphases) */
  int (*begin)(void *ctx, hd_ix ix, void *shared);
  void (*phase)(void *ctx, hd_ix ix, int ph, hd_regs *r, void *shared);
} grid_kernel;

static inline void grid_butterfly(hd_regs *warp, int op) {
  for (int o = 16; o > 0; o >>= 1) {
    hd_red t[32];
    for (int l = 0; l < 32; l++) {
      const hd_red a = warp[l].red, b = warp[l ^ o].red;
      t[l] = a;
      if (op == HD_WARP_SUM_F) t[l].f = a.f + b.f;
      else if (op == HD_WARP_MAX_F) t[l].f = fmaxf(a.f, b.f);
      else t[l].d = a.d + b.d;
    }
    for (int l = 0; l < 32; l++) warp[l].red = t[l];
  }
}

/* What follows a phase, for the block's threads' registers r[nt]. */
static inline void grid_sync(int s, hd_regs *r, unsigned nt) {
  if (s == HD_SYNC_NONE || s == HD_SYNC_BARRIER) return;
  const unsigned warps = (s & HD_WARP0) ? 1 : nt / 32;
  for (unsigned w = 0; w < warps; w++) grid_butterfly(r + 32 * w, s & HD_WARP_OP);
}

static inline void grid_run(const grid_kernel *k, void *ctx) {
  const size_t sbytes = (k->shared_bytes + 127) / 128 * 128 + 128;
  unsigned char *shared = aligned_alloc(128, sbytes);
  hd_regs *regs = malloc(k->nt * sizeof *regs);
  if (!shared || !regs) abort();
  if (k->sync && k->nt % 32) abort(); /* shuffles need whole warps */
  for (unsigned by = 0; by < k->gy; by++)
    for (unsigned bx = 0; bx < k->gx; bx++) {
      memset(shared, 0xff, sbytes);
      memset(regs, 0xff, k->nt * sizeof *regs);
      const hd_ix b0 = hd_ix_make(bx, by, k->gx, k->gy, 0, k->nt);
      const int got = k->begin ? k->begin(ctx, b0, shared) : 0, n = got ? got : k->nphases;
      for (int ph = 0; ph < n; ph++) {
        for (unsigned tx = 0; tx < k->nt; tx++)
          k->phase(ctx, hd_ix_make(bx, by, k->gx, k->gy, tx, k->nt), ph, &regs[tx], shared);
        if (k->sync) grid_sync(k->sync(ph), regs, k->nt);
      }
    }
  free(shared);
  free(regs);
}

/* A body over a 1-D grid of gx blocks of nt threads (ctx's phase runs with ph = 0). */
static inline void grid_run_body(unsigned gx, unsigned gy, unsigned nt,
                                 void (*phase)(void *ctx, hd_ix ix, int ph, hd_regs *r, void *shared), void *ctx) {
  const grid_kernel k = {gx, gy, nt, 1, NULL, 0, NULL, phase};
  grid_run(&k, ctx);
}

/* Blocks of nt threads that cover `work` items (at least one). */
static inline unsigned grid_blocks(size_t work, unsigned nt) {
  const size_t g = (work + nt - 1) / nt;
  return (unsigned)(g ? g : 1);
}

#endif
