/* Causal attention, flash style: the phases of hd_flash.h run by three
 * kernels (forward; backward dQ with the row sums D; backward dK and dV),
 * a __syncthreads() after each phase. With bf16 activations a warp's strip
 * products run on tensor cores (WMMA 16x16x16, bf16 in, float accumulate);
 * with float activations each lane computes its share with fmaf. Memory:
 * the forward keeps stats [B, H, T, 2]; the backward's scratch holds D
 * [B, H, T] floats; no [B, H, T, T] anywhere. Tile sizes (rows a block owns,
 * the inner tile) are the largest whose shared memory fits the device. */
#include <mma.h>

#include "cuda_internal.cuh"

namespace wmma = nvcuda::wmma;

/* C [16, ncols] (float, ldc) = scale * A [16, kdim] . B [ncols, kdim]^T */
__device__ void fa_mma_nt_bf16(float *C, int ldc, const void *A, int lda, const void *B, int ldb, int ncols, int kdim,
                               float scale) {
  const __nv_bfloat16 *a = (const __nv_bfloat16 *)A, *b = (const __nv_bfloat16 *)B;
  for (int nb = 0; nb < ncols; nb += 16) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int kb = 0; kb < kdim; kb += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
      wmma::load_matrix_sync(fa, a + kb, (unsigned)lda);
      wmma::load_matrix_sync(fb, b + (size_t)nb * ldb + kb, (unsigned)ldb);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    for (int i = 0; i < acc.num_elements; i++) acc.x[i] *= scale;
    wmma::store_matrix_sync(C + nb, acc, (unsigned)ldc, wmma::mem_row_major);
  }
}

/* C [16, ncols] (float, ldc) += A [16, kdim] . B [kdim, ncols] */
__device__ void fa_mma_nn_bf16(float *C, int ldc, const void *A, int lda, const void *B, int ldb, int ncols, int kdim) {
  const __nv_bfloat16 *a = (const __nv_bfloat16 *)A, *b = (const __nv_bfloat16 *)B;
  for (int nb = 0; nb < ncols; nb += 16) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(acc, C + nb, (unsigned)ldc, wmma::mem_row_major);
    for (int kb = 0; kb < kdim; kb += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
      wmma::load_matrix_sync(fa, a + kb, (unsigned)lda);
      wmma::load_matrix_sync(fb, b + (size_t)kb * ldb + nb, (unsigned)ldb);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(C + nb, acc, (unsigned)ldc, wmma::mem_row_major);
  }
}

#define BOOST_FA_MMA 1
#include "hd_flash.h"

/* The three kernels are one loop over a block type's phases (hd_flash.h),
 * a barrier after each. Row tiles of the forward and dQ run heaviest first
 * (the causal triangle grows with the row); key tiles of dK/dV the same way
 * (it shrinks with the key). */
__device__ int fa_begin(fa_fwd_blk *c, const fa_args *a, unsigned char *s) {
  return fa_fwd_begin(c, a, s, gridDim.x - 1 - blockIdx.x, blockIdx.y);
}
__device__ int fa_begin(fa_dq_blk *c, const fa_args *a, unsigned char *s) {
  return fa_dq_begin(c, a, s, gridDim.x - 1 - blockIdx.x, blockIdx.y);
}
__device__ int fa_begin(fa_dkv_blk *c, const fa_args *a, unsigned char *s) {
  return fa_dkv_begin(c, a, s, blockIdx.x, blockIdx.y);
}
__device__ void fa_phase(const fa_fwd_blk *c, int ph) { fa_fwd_phase(c, ph, threadIdx.x / 32, threadIdx.x % 32); }
__device__ void fa_phase(const fa_dq_blk *c, int ph) { fa_dq_phase(c, ph, threadIdx.x / 32, threadIdx.x % 32); }
__device__ void fa_phase(const fa_dkv_blk *c, int ph) { fa_dkv_phase(c, ph, threadIdx.x / 32, threadIdx.x % 32); }

template <class Blk, int BF16>
__global__ void fa_kernel(fa_args a) {
  extern __shared__ __align__(128) unsigned char smem[];
  Blk c;
  const int n = fa_begin(&c, &a, smem);
  c.d.bf16 = BF16; /* a constant: the storage branches fold away */
  for (int ph = 0; ph < n; ph++) {
    fa_phase(&c, ph);
    __syncthreads();
  }
}

typedef enum { FA_FWD = 0, FA_DQ, FA_DKV } fa_kind;

static size_t fa_smem(fa_kind k, const fa_dims *d) {
  fa_fwd_blk f;
  fa_dq_blk q;
  fa_dkv_blk v;
  return k == FA_FWD ? fa_fwd_carve(&f, d, NULL) : k == FA_DQ ? fa_dq_carve(&q, d, NULL) : fa_dkv_carve(&v, d, NULL);
}

/* The largest tiles whose shared memory fits (rows, cols). */
static fa_dims fa_pick(const cuda_be *c, fa_kind k, int hd, int bf16) {
  static const int tiles[][2] = {{64, 64}, {32, 64}, {16, 64}, {16, 32}, {16, 16}};
  fa_dims d = fa_dims_make(16, 16, hd, bf16);
  for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
    d = fa_dims_make(tiles[i][0], tiles[i][1], hd, bf16);
    if (fa_smem(k, &d) <= c->smem_optin) return d;
  }
  boost_fail("attention: head dimension %d needs %zu bytes of shared memory per block; the device has %zu", hd,
             fa_smem(k, &d), c->smem_optin);
}

template <class Blk>
static void fa_allow_smem(int lim) {
  cudaCheck(cudaFuncSetAttribute(fa_kernel<Blk, 0>, cudaFuncAttributeMaxDynamicSharedMemorySize, lim));
  cudaCheck(cudaFuncSetAttribute(fa_kernel<Blk, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, lim));
}

void cu_attention_setup(cuda_be *c) {
  fa_allow_smem<fa_fwd_blk>((int)c->smem_optin);
  fa_allow_smem<fa_dq_blk>((int)c->smem_optin);
  fa_allow_smem<fa_dkv_blk>((int)c->smem_optin);
}

/* D: the backward's row sums, [B, H, T] floats */
size_t cu_attention_scratch_bytes(boost_backend *be, int B, int T, int H) {
  (void)be;
  return (size_t)B * H * T * sizeof(float);
}

static fa_args fa_make(boost_backend *be, int B, int T, int H, int hd) {
  fa_args a;
  memset(&a, 0, sizeof a);
  a.B = B, a.T = T, a.H = H;
  a.scale = 1.0f / sqrtf((float)hd);
  a.d = fa_dims_make(16, 16, hd, is_bf16(be));
  return a;
}

static void fa_launch(boost_backend *be, fa_kind k, fa_args a) {
  cuda_be *c = CB(be);
  a.d = fa_pick(c, k, a.d.hd, a.d.bf16);
  /* a block row per (sequence, head): gridDim.y is at most 65535 */
  if ((long long)a.B * a.H > 65535)
    boost_fail("attention: batch x heads = %d x %d = %lld blocks exceed the CUDA grid's y limit 65535: lower "
               "train.batch_size (or raise parallel.tp, which divides the heads)",
               a.B, a.H, (long long)a.B * a.H);
  const dim3 grid(cdiv_u((size_t)a.T, (size_t)a.d.rows), (unsigned)(a.B * a.H));
  const unsigned threads = (unsigned)fa_threads(&a.d);
  const size_t smem = fa_smem(k, &a.d);
  void (*kernel)(fa_args) = k == FA_FWD ? (a.d.bf16 ? fa_kernel<fa_fwd_blk, 1> : fa_kernel<fa_fwd_blk, 0>)
                            : k == FA_DQ ? (a.d.bf16 ? fa_kernel<fa_dq_blk, 1> : fa_kernel<fa_dq_blk, 0>)
                                         : (a.d.bf16 ? fa_kernel<fa_dkv_blk, 1> : fa_kernel<fa_dkv_blk, 0>);
  kernel<<<grid, threads, smem, c->stream>>>(a);
  LAUNCH_CHECK();
}

void cu_attention_forward(boost_backend *be, boost_act *out, float *stats, void *scratch, cact *q, cact *k, cact *v,
                          int B, int T, int H, int hd) {
  (void)scratch;
  if (B <= 0 || T <= 0 || H <= 0 || hd <= 0) return;
  fa_args a = fa_make(be, B, T, H, hd);
  a.q = q, a.k = k, a.v = v, a.out = out, a.stats = stats;
  fa_launch(be, FA_FWD, a);
}

void cu_attention_backward(boost_backend *be, boost_act *dq, boost_act *dk, boost_act *dv, void *scratch, cact *dout,
                           cact *q, cact *k, cact *v, const float *stats, int B, int T, int H, int hd) {
  if (B <= 0 || T <= 0 || H <= 0 || hd <= 0 || (!dq && !dk && !dv)) return;
  fa_args a = fa_make(be, B, T, H, hd);
  a.q = q, a.k = k, a.v = v, a.dout = dout, a.dq = dq, a.dk = dk, a.dv = dv;
  a.stats = (float *)stats, a.D = (float *)scratch;
  a.need_dq = dq != NULL, a.need_dk = dk != NULL, a.need_dv = dv != NULL;
  if (a.need_dq || a.need_dk) fa_launch(be, FA_DQ, a); /* dQ, and D for dK */
  if (a.need_dk || a.need_dv) fa_launch(be, FA_DKV, a);
}
