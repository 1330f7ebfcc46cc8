/* Token embedding.
 *   forward : out[N,C] = wte[tokens[n], :]   (bf16 copy, 16-byte vectors when
 *             C % 8 == 0 and the pointers are aligned)
 *   backward: dwte[V,C] (fp32) += scatter-add of dout rows, deterministic and
 *             free of float atomics: the (token, position) pairs are stably
 *             radix-sorted by token (CUB), then one block per run of equal
 *             tokens sums its dout rows in position order (fp32) and adds the
 *             sum to the dwte row once.
 * Tokens must be in [0, V) (callers validate, as on the CPU). */
#include <cub/device/device_radix_sort.cuh>

#include "cuda_internal.cuh"

__global__ void embedding_fwd_vec_kernel(gpu_bf16 *out, const int32_t *tokens, const gpu_bf16 *wte, int N, int C8) {
  size_t total = (size_t)N * C8;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    size_t n = idx / C8, c = idx % C8;
    const uint4 *src = reinterpret_cast<const uint4 *>(wte + (size_t)tokens[n] * C8 * 8) + c;
    reinterpret_cast<uint4 *>(out + n * C8 * 8)[c] = __ldg(src);
  }
}

__global__ void embedding_fwd_kernel(gpu_bf16 *out, const int32_t *tokens, const gpu_bf16 *wte, int N, int C) {
  size_t total = (size_t)N * C;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    size_t n = idx / C, c = idx % C;
    out[idx] = wte[(size_t)tokens[n] * C + c];
  }
}

void gpu_embedding_forward(gpu_ctx *ctx, gpu_bf16 *out, const int32_t *tokens, const gpu_bf16 *wte, int N, int V,
                           int C) {
  (void)V;
  if (N <= 0 || C <= 0) return;
  if (C % 8 == 0 && aligned16(out) && aligned16(wte)) {
    int C8 = C / 8;
    embedding_fwd_vec_kernel<<<ew_grid(ctx, (size_t)N * C8, 256), 256, 0, ctx->stream>>>(out, tokens, wte, N, C8);
  } else {
    embedding_fwd_kernel<<<ew_grid(ctx, (size_t)N * C, 256), 256, 0, ctx->stream>>>(out, tokens, wte, N, C);
  }
  LAUNCH_CHECK();
}

__global__ void iota_kernel(int32_t *v, int N) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) v[i] = i;
}

/* block i handles the run of equal sorted tokens that starts at i (if any) */
__global__ void embedding_bwd_runs_kernel(float *dwte, const gpu_bf16 *dout, const uint32_t *keys,
                                          const int32_t *pos, int N, int C) {
  int i = blockIdx.x;
  if (i >= N) return;
  uint32_t tok = keys[i];
  if (i > 0 && keys[i - 1] == tok) return;
  int end = i + 1;
  while (end < N && keys[end] == tok) end++;
  float *drow = dwte + (size_t)tok * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = 0.0f;
    for (int j = i; j < end; j++) acc += bf2f(dout[(size_t)pos[j] * C + c]);
    drow[c] += acc;
  }
}

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

void gpu_embedding_backward(gpu_ctx *ctx, float *dwte, const gpu_bf16 *dout, const int32_t *tokens, int N, int V,
                            int C) {
  if (N <= 0 || C <= 0 || V <= 0) return;
  int bits = 1;
  while (bits < 32 && ((uint64_t)1 << bits) < (uint64_t)V) bits++;
  const uint32_t *keys_in = reinterpret_cast<const uint32_t *>(tokens); /* tokens are >= 0 */
  size_t temp_bytes = 0;
  cudaCheck(cub::DeviceRadixSort::SortPairs(NULL, temp_bytes, keys_in, (uint32_t *)NULL, (const int32_t *)NULL,
                                            (int32_t *)NULL, N, 0, bits, ctx->stream));
  size_t arr = align256((size_t)N * 4);
  char *base = (char *)gpu_scratch(ctx, 3 * arr + align256(temp_bytes));
  uint32_t *keys_out = (uint32_t *)base;
  int32_t *pos_in = (int32_t *)(base + arr);
  int32_t *pos_out = (int32_t *)(base + 2 * arr);
  void *temp = base + 3 * arr;
  iota_kernel<<<cdiv_u((size_t)N, 256), 256, 0, ctx->stream>>>(pos_in, N);
  LAUNCH_CHECK();
  cudaCheck(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, (const int32_t *)pos_in, pos_out, N,
                                            0, bits, ctx->stream));
  int threads = C >= 256 ? 256 : (C >= 128 ? 128 : 64);
  embedding_bwd_runs_kernel<<<N, threads, 0, ctx->stream>>>(dwte, dout, keys_out, pos_out, N, C);
  LAUNCH_CHECK();
}
