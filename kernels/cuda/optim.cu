/* The optimizer over whole arenas: an optim plan's segments cut into tiles
 * that never straddle two segments (hd_tiles_build), uploaded once at
 * optim_plan_create with each segment's flags and a buffer for the partial
 * sums, so a step allocates nothing.
 *   adamw:      one block per tile; hd_adamw per element (the CPU's operation
 *               order: float masters and moments agree with the CPU bit for
 *               bit), the working copy written rounded when act is bf16.
 *   grad_sumsq: one double partial per tile (a fixed block tree), the
 *               partials of each segment summed in tile order (one block per
 *               segment, a fixed tree), then the segments in plan order by
 *               one thread: deterministic for a given plan, on the device,
 *               one double written, nothing read back. */
#include "cuda_internal.cuh"

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

__global__ void __launch_bounds__(OPT_THREADS)
    sumsq_tiles_kernel(double *partial, const hd_tile *tiles, const uint32_t *flags, const float *g) {
  __shared__ double sh[OPT_THREADS / 32];
  const hd_tile t = tiles[blockIdx.x];
  double acc = 0.0;
  if (flags[t.seg] & BOOST_SEG_NORM)
    for (uint32_t i = threadIdx.x; i < t.len; i += OPT_THREADS) {
      const double x = (double)g[t.start + i];
      acc += x * x;
    }
  acc = block_sum_d<OPT_THREADS>(acc, sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void __launch_bounds__(OPT_THREADS)
    sumsq_segs_kernel(double *seg_sum, const double *partial, const uint32_t *first) {
  __shared__ double sh[OPT_THREADS / 32];
  const int s = blockIdx.x;
  double acc = 0.0;
  for (uint32_t k = first[s] + threadIdx.x; k < first[s + 1]; k += OPT_THREADS) acc += partial[k];
  acc = block_sum_d<OPT_THREADS>(acc, sh);
  if (threadIdx.x == 0) seg_sum[s] = acc;
}

__global__ void sumsq_total_kernel(double *out, const double *seg_sum, const uint32_t *flags, int nseg) {
  double s = 0.0;
  for (int i = 0; i < nseg; i++)
    if (flags[i] & BOOST_SEG_NORM) s += seg_sum[i];
  *out = s;
}

void cu_grad_sumsq(boost_backend *be, const boost_optim_plan *p, const float *grads, double *out) {
  cudaStream_t st = CB(be)->stream;
  if (p->ntiles) {
    sumsq_tiles_kernel<<<(unsigned)p->ntiles, OPT_THREADS, 0, st>>>(p->partial, p->tiles, p->flags, grads);
    LAUNCH_CHECK();
  }
  if (p->nseg > 0) {
    sumsq_segs_kernel<<<(unsigned)p->nseg, OPT_THREADS, 0, st>>>(p->partial + p->ntiles, p->partial, p->seg_first);
    LAUNCH_CHECK();
  }
  sumsq_total_kernel<<<1, 1, 0, st>>>(out, p->partial + p->ntiles, p->flags, p->nseg);
  LAUNCH_CHECK();
}

/* ---- AdamW ------------------------------------------------------------------------- */

template <int BF16>
__global__ void __launch_bounds__(OPT_THREADS)
    adamw_kernel(const hd_tile *tiles, const uint32_t *flags, float *params, const float *grads, float *m, float *v,
                 void *work, size_t mom_begin, hd_adamw_consts c) {
  const hd_tile t = tiles[blockIdx.x];
  const float wd = (flags[t.seg] & BOOST_SEG_DECAY) ? c.wd : 0.0f;
  for (uint32_t i = threadIdx.x; i < t.len; i += OPT_THREADS) {
    const size_t a = t.start + i, mo = a - mom_begin;
    float mm = m[mo], vv = v[mo];
    const float pnew = hd_adamw(&c, wd, params[a], grads[a], &mm, &vv);
    m[mo] = mm;
    v[mo] = vv;
    params[a] = pnew;
    if (BF16) hd_st(work, a, pnew, 1);
  }
}

void cu_adamw(boost_backend *be, const boost_optim_plan *p, float *params, const float *grads, float *m, float *v,
              boost_act *work, adamw_hparams hp, int t, float grad_scale) {
  if (!p->ntiles) return;
  const hd_adamw_consts c = hd_adamw_make(hp.beta1, hp.beta2, hp.lr, hp.eps, hp.weight_decay, t, grad_scale);
  if (is_bf16(be)) {
    BOOST_ASSERT(work);
    adamw_kernel<1><<<(unsigned)p->ntiles, OPT_THREADS, 0, CB(be)->stream>>>(p->tiles, p->flags, params, grads, m, v,
                                                                           work, p->mom_begin, c);
  } else {
    adamw_kernel<0><<<(unsigned)p->ntiles, OPT_THREADS, 0, CB(be)->stream>>>(p->tiles, p->flags, params, grads, m, v,
                                                                           NULL, p->mom_begin, c);
  }
  LAUNCH_CHECK();
}
