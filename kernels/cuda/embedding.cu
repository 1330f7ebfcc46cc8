/* Token embedding (embedding.c's contract).
 *   forward : out[N, C] = wte[tokens[n], :] (a copy, no rounding)
 *   backward: dwte[V, C] (float) += the rows of dout, deterministic and
 *             free of float atomics: the (token, position) pairs are stably
 *             radix-sorted by token (CUB), then one block per run of equal
 *             tokens sums its rows in position order and adds the sum to
 *             the token's row once (hd_elementwise.h: the bodies).
 * Tokens are in [0, V) (the model checks them on the host before upload). */
#include <cub/device/device_radix_sort.cuh>

#include "cuda_internal.cuh"
#include "hd_elementwise.h"

static hd_emb_args emb_args(int N, int C) {
  hd_emb_args a;
  memset(&a, 0, sizeof a);
  a.N = N, a.C = C;
  return a;
}

template <int BF16>
__global__ void embedding_fwd_kernel(hd_emb_args a) {
  hd_embedding_fwd_thread(&a, BF16, HD_IX_HERE());
}

void cu_embedding_forward(boost_backend *be, boost_act *out, const int32_t *tokens, cact *wte, int N, int V, int C) {
  (void)V;
  if (N <= 0 || C <= 0) return;
  hd_emb_args a = emb_args(N, C);
  a.out = out, a.tokens = tokens, a.wte = wte;
  ACT_LAUNCH(be, embedding_fwd_kernel, ew_grid(CB(be), (size_t)N * C, 256), 256, 0, a);
}

__global__ void iota_kernel(hd_emb_args a) { hd_iota_thread(&a, HD_IX_HERE()); }

template <int BF16>
__global__ void embedding_bwd_runs_kernel(hd_emb_args a) {
  hd_embedding_runs_block(&a, BF16, HD_IX_HERE());
}

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

void cu_embedding_backward(boost_backend *be, float *dwte, cact *dout, const int32_t *tokens, int N, int V, int C) {
  if (N <= 0 || C <= 0 || V <= 0) return;
  cuda_be *c = CB(be);
  int bits = 1;
  while (bits < 32 && ((uint64_t)1 << bits) < (uint64_t)V) bits++;
  const uint32_t *keys_in = reinterpret_cast<const uint32_t *>(tokens); /* tokens are >= 0 */
  size_t temp_bytes = 0;
  cudaCheck(cub::DeviceRadixSort::SortPairs(NULL, temp_bytes, keys_in, (uint32_t *)NULL, (const int32_t *)NULL,
                                            (int32_t *)NULL, N, 0, bits, c->stream));
  const size_t arr = align256((size_t)N * 4);
  char *base = (char *)cuda_scratch(c, 3 * arr + align256(temp_bytes));
  uint32_t *keys_out = (uint32_t *)base;
  int32_t *pos_in = (int32_t *)(base + arr), *pos_out = (int32_t *)(base + 2 * arr);
  hd_emb_args a = emb_args(N, C);
  a.iota = pos_in;
  iota_kernel<<<cdiv_u((size_t)N, 256), 256, 0, c->stream>>>(a);
  LAUNCH_CHECK();
  cudaCheck(cub::DeviceRadixSort::SortPairs(base + 3 * arr, temp_bytes, keys_in, keys_out, (const int32_t *)pos_in,
                                            pos_out, N, 0, bits, c->stream));
  const int threads = C >= 256 ? 256 : (C >= 128 ? 128 : 64);
  a.dwte = dwte, a.dout = dout, a.keys = keys_out, a.pos = pos_out;
  ACT_LAUNCH(be, embedding_bwd_runs_kernel, (unsigned)N, threads, 0, a);
}
