/* The optimizer over whole arenas: an optim plan's segments cut into tiles
 * that never straddle two segments (hd_tiles_build), uploaded once at
 * optim_plan_create with each segment's flags and a buffer for the partial
 * sums, so a step allocates nothing. The kernels' bodies and phases are in
 * hd_optim.h.
 *   adamw:      one block per tile; hd_adamw per element (the CPU's operation
 *               order: float masters and moments agree with the CPU bit for
 *               bit), the working copy written rounded when act is bf16.
 *   grad_sumsq: one double partial per tile (a fixed block tree), the
 *               partials of each segment summed in tile order (one block per
 *               segment, a fixed tree), then the segments in plan order by
 *               one thread: deterministic for a given plan, on the device,
 *               one double written, nothing read back. */
#include "cuda_internal.cuh"
#include "hd_optim.h"

#define OPT_TILE HD_OPT_TILE
#define OPT_THREADS HD_OPT_THREADS

struct boost_optim_plan {
  int nseg;
  size_t ntiles, mom_begin, mom_end;
  hd_tile *tiles;      /* device [ntiles] */
  uint32_t *seg_first; /* device [nseg + 1]: each segment's first tile */
  uint32_t *flags;     /* device [nseg] */
  double *partial;     /* device [ntiles + nseg]: tile sums, then segment sums */
};

boost_optim_plan *cu_optim_plan_create(boost_backend *be, const boost_segment *segs, int nseg, size_t mom_begin,
                                       size_t mom_end) {
  boost_optim_plan *p = (boost_optim_plan *)boost_calloc(1, sizeof *p);
  p->nseg = nseg;
  p->mom_begin = mom_begin;
  p->mom_end = mom_end;
  const size_t ns = (size_t)(nseg > 0 ? nseg : 1);
  uint64_t *off = (uint64_t *)boost_calloc(ns, sizeof *off), *len = (uint64_t *)boost_calloc(ns, sizeof *len);
  uint32_t *flags = (uint32_t *)boost_calloc(ns, sizeof *flags), *first = (uint32_t *)boost_calloc(ns + 1, 4);
  for (int i = 0; i < nseg; i++) {
    BOOST_ASSERT(segs[i].offset >= mom_begin && segs[i].offset + segs[i].n <= mom_end);
    off[i] = segs[i].offset, len[i] = segs[i].n, flags[i] = segs[i].flags;
  }
  p->ntiles = hd_tiles_build(off, len, nseg, OPT_TILE, NULL, NULL);
  hd_tile *tiles = (hd_tile *)boost_calloc(p->ntiles ? p->ntiles : 1, sizeof *tiles);
  hd_tiles_build(off, len, nseg, OPT_TILE, tiles, first);
  p->tiles = (hd_tile *)boost_be_alloc(be, (p->ntiles ? p->ntiles : 1) * sizeof *tiles, "the optimizer's tiles");
  p->seg_first = (uint32_t *)boost_be_alloc(be, (ns + 1) * 4, "the optimizer's segments");
  p->flags = (uint32_t *)boost_be_alloc(be, ns * 4, "the optimizer's segments");
  p->partial = (double *)boost_be_alloc(be, (p->ntiles + ns) * sizeof(double), "the gradient norm's partials");
  be->mem->upload(be, p->tiles, tiles, p->ntiles * sizeof *tiles);
  be->mem->upload(be, p->seg_first, first, (ns + 1) * 4);
  be->mem->upload(be, p->flags, flags, ns * 4);
  boost_free(tiles), boost_free(off), boost_free(len), boost_free(flags), boost_free(first);
  return p;
}

void cu_optim_plan_free(boost_backend *be, boost_optim_plan *p) {
  if (!p) return;
  be->mem->free(be, p->tiles);
  be->mem->free(be, p->seg_first);
  be->mem->free(be, p->flags);
  be->mem->free(be, p->partial);
  boost_free(p);
}

/* ---- gradient sum of squares ------------------------------------------------------ */

static_assert(HD_SEG_DECAY == BOOST_SEG_DECAY && HD_SEG_NORM == BOOST_SEG_NORM, "hd_optim.h's segment flags");

static hd_optim_args optim_args(const boost_optim_plan *p) {
  hd_optim_args a;
  memset(&a, 0, sizeof a);
  a.tiles = p->tiles, a.flags = p->flags, a.first = p->seg_first, a.nseg = p->nseg;
  a.partial = p->partial, a.seg_sum = p->partial + p->ntiles, a.mom_begin = p->mom_begin;
  return a;
}

__global__ void __launch_bounds__(OPT_THREADS) sumsq_tiles_kernel(hd_optim_args a) {
  __shared__ double sh[OPT_THREADS / 32];
  hd_regs r;
  RUN_PHASES(HD_SUMSQ_PHASES, hd_sumsq_sync, r, hd_sumsq_tiles_phase(&a, HD_IX_HERE(), ph, &r, sh));
}

__global__ void __launch_bounds__(OPT_THREADS) sumsq_segs_kernel(hd_optim_args a) {
  __shared__ double sh[OPT_THREADS / 32];
  hd_regs r;
  RUN_PHASES(HD_SUMSQ_PHASES, hd_sumsq_sync, r, hd_sumsq_segs_phase(&a, HD_IX_HERE(), ph, &r, sh));
}

__global__ void sumsq_total_kernel(hd_optim_args a) { hd_sumsq_total_thread(&a, HD_IX_HERE()); }

void cu_grad_sumsq(boost_backend *be, const boost_optim_plan *p, const float *grads, double *out) {
  cudaStream_t st = CB(be)->stream;
  hd_optim_args a = optim_args(p);
  a.grads = grads, a.out = out;
  if (p->ntiles) {
    sumsq_tiles_kernel<<<(unsigned)p->ntiles, OPT_THREADS, 0, st>>>(a);
    LAUNCH_CHECK();
  }
  if (p->nseg > 0) {
    sumsq_segs_kernel<<<(unsigned)p->nseg, OPT_THREADS, 0, st>>>(a);
    LAUNCH_CHECK();
  }
  sumsq_total_kernel<<<1, 1, 0, st>>>(a);
  LAUNCH_CHECK();
}

/* ---- AdamW ------------------------------------------------------------------------- */

template <int BF16>
__global__ void __launch_bounds__(OPT_THREADS) adamw_kernel(hd_optim_args a) {
  hd_adamw_block(&a, BF16, HD_IX_HERE());
}

void cu_adamw(boost_backend *be, const boost_optim_plan *p, float *params, const float *grads, float *m, float *v,
              boost_act *work, adamw_hparams hp, int t, float grad_scale) {
  if (!p->ntiles) return;
  hd_optim_args a = optim_args(p);
  a.params = params, a.grads = grads, a.m = m, a.v = v, a.work = work;
  a.c = hd_adamw_make(hp.beta1, hp.beta2, hp.lr, hp.eps, hp.weight_decay, t, grad_scale);
  if (is_bf16(be)) {
    BOOST_ASSERT(work);
    adamw_kernel<1><<<(unsigned)p->ntiles, OPT_THREADS, 0, CB(be)->stream>>>(a);
  } else {
    a.work = NULL;
    adamw_kernel<0><<<(unsigned)p->ntiles, OPT_THREADS, 0, CB(be)->stream>>>(a);
  }
  LAUNCH_CHECK();
}
