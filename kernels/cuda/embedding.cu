/* Token embedding (embedding.c's contract).
 *   forward : out[N, C] = wte[tokens[n], :] (a copy, no rounding)
 *   backward: dwte[V, C] (float) += the rows of dout, deterministic and
 *             free of float atomics: the (token, position) pairs are stably
 *             radix-sorted by token (CUB), then one block per run of equal
 *             tokens (hd_run_start) sums its rows in position order and adds
 *             the sum to the token's row once.
 * Tokens are in [0, V) (the model checks them on the host before upload). */
#include <cub/device/device_radix_sort.cuh>

#include "cuda_internal.cuh"

template <int BF16>
__global__ void embedding_fwd_kernel(void *out, const int32_t *tokens, const void *wte, int N, int C) {
  const size_t total = (size_t)N * C, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    const size_t n = idx / (size_t)C, c = idx % (size_t)C;
    hd_mv(out, idx, wte, (size_t)tokens[n] * C + c, BF16);
  }
}

void cu_embedding_forward(boost_backend *be, boost_act *out, const int32_t *tokens, cact *wte, int N, int V, int C) {
  (void)V;
  if (N <= 0 || C <= 0) return;
  ACT_LAUNCH(be, embedding_fwd_kernel, ew_grid(CB(be), (size_t)N * C, 256), 256, 0, out, tokens, wte, N, C);
}

__global__ void iota_kernel(int32_t *v, int N) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) v[i] = i;
}

/* block i: the run of equal sorted tokens that starts at i, if one does */
template <int BF16>
__global__ void embedding_bwd_runs_kernel(float *dwte, const void *dout, const uint32_t *keys, const int32_t *pos,
                                          int N, int C) {
  int end = 0;
  const int i = blockIdx.x;
  if (!hd_run_start(keys, i, N, &end)) return;
  float *drow = dwte + (size_t)keys[i] * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = 0.0f;
    for (int j = i; j < end; j++) acc += hd_ld(dout, (size_t)pos[j] * C + c, BF16);
    drow[c] += acc;
  }
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
  iota_kernel<<<cdiv_u((size_t)N, 256), 256, 0, c->stream>>>(pos_in, N);
  LAUNCH_CHECK();
  cudaCheck(cub::DeviceRadixSort::SortPairs(base + 3 * arr, temp_bytes, keys_in, keys_out, (const int32_t *)pos_in,
                                            pos_out, N, 0, bits, c->stream));
  const int threads = C >= 256 ? 256 : (C >= 128 ? 128 : 64);
  ACT_LAUNCH(be, embedding_bwd_runs_kernel, (unsigned)N, threads, 0, dwte, dout, keys_out, pos_out, N, C);
}
