/* The CUDA backend's per-thread arithmetic, in functions a C compiler can
 * also build: BOOST_HD is `__host__ __device__` under nvcc and `static
 * inline` otherwise. The kernels (kernels/cuda/ (the .cu files)) call these functions;
 * the CPU-side tests (tests/unit/test_cuda_*.c) run the same functions on
 * the CPU against the CPU kernels (kernels/cpu), so indexing, tails,
 * roundings and the order of in-place updates are checked without a GPU.
 *
 * Arithmetic: the .cu files are built with --fmad=false, so `a * b + c` is
 * two rounded operations on the GPU as it is in ISO C here; where a kernel
 * wants a fused multiply-add it says fmaf(). Division and sqrtf are IEEE on
 * both sides (nvcc's defaults -prec-div/-prec-sqrt). Only expf and logf
 * differ (a few ulp): the tests use tolerances where those enter.
 *
 * Storage: activations are float or bf16 (uint16_t bit patterns); a `bf16`
 * argument says which. Kernels pass a compile-time constant, so the branch
 * folds away on the GPU. */
#ifndef BOOST_CUDA_HD_COMMON_H
#define BOOST_CUDA_HD_COMMON_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define BOOST_HD static inline __host__ __device__
#else
#define BOOST_HD static inline
#endif

BOOST_HD uint32_t hd_f32_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

BOOST_HD float hd_bits_f32(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

/* float -> bf16 bits, rounded to nearest even (ties to the even mantissa);
 * overflow rounds to +-inf as IEEE does; a NaN stays a quiet NaN with its
 * sign. The same rounding as the MPI backend's bf16 sum (trainer/parallel/comm_mpi.c)
 * and the CPU backend. */
BOOST_HD uint16_t hd_bf16_bits(float f) {
  const uint32_t u = hd_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* bf16 bits -> float (exact). */
BOOST_HD float hd_bf16_value(uint16_t h) { return hd_bits_f32((uint32_t)h << 16); }

/* x as stored in bf16 and read back. */
BOOST_HD float hd_round_bf16(float x) { return hd_bf16_value(hd_bf16_bits(x)); }

/* Element i of activation memory p (float, or bf16 when bf16). */
BOOST_HD float hd_ld(const void *p, size_t i, int bf16) {
  return bf16 ? hd_bf16_value(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
BOOST_HD void hd_st(void *p, size_t i, float v, int bf16) {
  if (bf16)
    ((uint16_t *)p)[i] = hd_bf16_bits(v);
  else
    ((float *)p)[i] = v;
}
/* Copies element si of src to di of dst unchanged (same storage). */
BOOST_HD void hd_mv(void *dst, size_t di, const void *src, size_t si, int bf16) {
  if (bf16)
    ((uint16_t *)dst)[di] = ((const uint16_t *)src)[si];
  else
    ((float *)dst)[di] = ((const float *)src)[si];
}
BOOST_HD size_t hd_act_size(int bf16) { return bf16 ? 2 : 4; }

/* ---- grid-stride loops over flat arrays ---------------------------------
 * The end of the whole vectors of w elements in n (hd_elementwise.h's
 * hd_ew_thread: the vectors, then the tail one element at a time). */
BOOST_HD size_t hd_vec_end(size_t n, int w) { return n / (size_t)w * (size_t)w; }

#endif
