/* How a kernel body sees its place in the grid, and how its phases are
 * separated, in code that nvcc compiles for the device and a C compiler
 * compiles for the CPU-side tests (hd_common.h explains BOOST_HD).
 *
 * Every CUDA kernel of the backend (the .cu files) is written as
 *   - a body: a function of its block and thread indices (hd_ix), or
 *   - phases: functions of (hd_ix, phase, registers, shared memory) whose
 *     boundaries are block barriers or warp shuffles, each kernel saying
 *     which one follows each phase (an HD_SYNC_* value).
 * The __global__ wrapper in the .cu only builds the hd_ix from blockIdx,
 * gridDim, threadIdx and blockDim and runs the phases with the barrier or
 * shuffle after each (cuda_internal.cuh: RUN_PHASES). tests/unit/grid_run.h
 * runs the same functions over a whole grid on the CPU, thread by thread,
 * phase by phase, shuffles emulated on arrays of the threads' registers.
 *
 * A thread's values that outlive a phase live in hd_regs (registers on the
 * GPU); a shuffle combines the `red` field of the 32 lanes of each warp
 * with the xor butterfly (offsets 16, 8, 4, 2, 1), every lane getting the
 * same bits. */
#ifndef BOOST_CUDA_HD_GRID_H
#define BOOST_CUDA_HD_GRID_H

#include "hd_common.h"

/* Bodies and phases: forced inline on the GPU so the compile-time
 * arguments (storage type, op, phase) fold away as in a template. */
#if defined(__CUDACC__)
#define BOOST_HDI static __forceinline__ __host__ __device__
#else
#define BOOST_HDI static inline
#endif

typedef struct {
  unsigned bx, by; /* blockIdx */
  unsigned gx, gy; /* gridDim */
  unsigned tx, nt; /* threadIdx.x, blockDim.x (all blocks are 1-D) */
} hd_ix;

BOOST_HD hd_ix hd_ix_make(unsigned bx, unsigned by, unsigned gx, unsigned gy, unsigned tx, unsigned nt) {
  hd_ix ix;
  ix.bx = bx, ix.by = by, ix.gx = gx, ix.gy = gy, ix.tx = tx, ix.nt = nt;
  return ix;
}
#if defined(__CUDACC__)
#define HD_IX_HERE() hd_ix_make(blockIdx.x, blockIdx.y, gridDim.x, gridDim.y, threadIdx.x, blockDim.x)
#endif

/* The thread's index over a 1-D grid and the grid's thread count (the
 * start and stride of a grid-stride loop). */
BOOST_HD size_t hd_gthread(hd_ix ix) { return (size_t)ix.bx * ix.nt + ix.tx; }
BOOST_HD size_t hd_gthreads(hd_ix ix) { return (size_t)ix.gx * ix.nt; }
BOOST_HD int hd_warp(hd_ix ix) { return (int)(ix.tx / 32); }
BOOST_HD int hd_lane(hd_ix ix) { return (int)(ix.tx % 32); }

/* A thread's values carried from one phase to the next. */
typedef struct {
  float f;  /* shuffled by HD_WARP_SUM_F and HD_WARP_MAX_F */
  double d; /* shuffled by HD_WARP_SUM_D */
} hd_red;
typedef struct {
  hd_red red;
  float keep; /* a result a later phase still needs (a row max) */
} hd_regs;

/* What follows a phase. */
enum {
  HD_SYNC_NONE = 0,
  HD_SYNC_BARRIER = 1, /* __syncthreads() */
  HD_WARP_SUM_F = 2,   /* red.f = the warp's sum (butterfly) */
  HD_WARP_SUM_D = 3,   /* red.d = the warp's sum */
  HD_WARP_MAX_F = 4,   /* red.f = the warp's max */
  HD_WARP_OP = 7,      /* the shuffle's kind */
  HD_WARP0 = 8         /* flag: only warp 0 (threads 0..31) shuffles */
};

/* ---- a block reduction in phases --------------------------------------------
 * After a phase that leaves each thread's value in red (followed by the
 * warp shuffle `op`), four steps combine the warps' results in warp 0 the
 * same way and give every thread the block's result in red:
 *   step 0: lane 0 of each warp publishes its warp's value; barrier
 *   step 1: warp 0 takes them (the identity past the block's warps); warp 0 shuffles
 *   step 2: thread 0 publishes the result; barrier
 *   step 3: every thread reads it; barrier (the shared slots may be reused)
 * shf / shd: nt / 32 slots of shared memory (floats for the float kinds,
 * doubles for HD_WARP_SUM_D). */
#define HD_BLOCK_REDUCE_STEPS 4
BOOST_HD int hd_block_reduce_sync(int step, int op) {
  return step == 1 ? (HD_WARP0 | op) : HD_SYNC_BARRIER;
}
BOOST_HDI void hd_block_reduce_step(int step, int op, hd_ix ix, hd_red *r, float *shf, double *shd) {
  const int w = hd_warp(ix), nw = (int)(ix.nt / 32), dbl = op == HD_WARP_SUM_D;
  if (step == 0) {
    if (hd_lane(ix) == 0) {
      if (dbl)
        shd[w] = r->d;
      else
        shf[w] = r->f;
    }
  } else if (step == 1) {
    if (dbl)
      r->d = (int)ix.tx < nw ? shd[ix.tx] : 0.0;
    else
      r->f = (int)ix.tx < nw ? shf[ix.tx] : (op == HD_WARP_MAX_F ? -INFINITY : 0.0f);
  } else if (step == 2) {
    if (ix.tx == 0) {
      if (dbl)
        shd[0] = r->d;
      else
        shf[0] = r->f;
    }
  } else {
    if (dbl)
      r->d = shd[0];
    else
      r->f = shf[0];
  }
}

/* ---- W elements of activation memory at once ---------------------------------
 * On the GPU one 16-byte load or store per 4 floats or 8 bf16 (i must be
 * 16-byte aligned when w > 1); elsewhere element by element. */
BOOST_HDI void hd_ldw(float *f, const void *p, size_t i, int w, int bf16) {
#if defined(__CUDA_ARCH__)
  if (w > 1 && bf16) {
#pragma unroll
    for (int k = 0; k < w; k += 8) {
      const uint4 u = *reinterpret_cast<const uint4 *>((const uint16_t *)p + i + k);
      const uint32_t q4[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int q = 0; q < 4; q++) {
        f[k + 2 * q] = hd_bf16_value((uint16_t)(q4[q] & 0xffffu));
        f[k + 2 * q + 1] = hd_bf16_value((uint16_t)(q4[q] >> 16));
      }
    }
    return;
  }
  if (w > 1) {
#pragma unroll
    for (int k = 0; k < w; k += 4) {
      const float4 v = *reinterpret_cast<const float4 *>((const float *)p + i + k);
      f[k] = v.x, f[k + 1] = v.y, f[k + 2] = v.z, f[k + 3] = v.w;
    }
    return;
  }
#endif
  for (int k = 0; k < w; k++) f[k] = hd_ld(p, i + (size_t)k, bf16);
}
BOOST_HDI void hd_stw(void *p, size_t i, const float *f, int w, int bf16) {
#if defined(__CUDA_ARCH__)
  if (w > 1 && bf16) {
#pragma unroll
    for (int k = 0; k < w; k += 8) {
      uint32_t q4[4];
#pragma unroll
      for (int q = 0; q < 4; q++)
        q4[q] = (uint32_t)hd_bf16_bits(f[k + 2 * q]) | ((uint32_t)hd_bf16_bits(f[k + 2 * q + 1]) << 16);
      *reinterpret_cast<uint4 *>((uint16_t *)p + i + k) = make_uint4(q4[0], q4[1], q4[2], q4[3]);
    }
    return;
  }
  if (w > 1) {
#pragma unroll
    for (int k = 0; k < w; k += 4)
      *reinterpret_cast<float4 *>((float *)p + i + k) = make_float4(f[k], f[k + 1], f[k + 2], f[k + 3]);
    return;
  }
#endif
  for (int k = 0; k < w; k++) hd_st(p, i + (size_t)k, f[k], bf16);
}

#endif
