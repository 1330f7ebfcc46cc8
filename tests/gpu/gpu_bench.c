/* boost-gpu-check's throughput lines (after the op checks pass or fail):
 * the CoLA GEMM set of cola-60m's 8 layers forward and backward, its LM
 * head, and one layer's attention, each the best of 5 timed iterations
 * after a warm-up. */
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "check.h"
#include "cuda_ops.h"
#include "gpu_check.h"

static double elapsed_ms(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0.0f;
  cudaCheck(cudaEventElapsedTime(&ms, a, b));
  return (double)ms;
}

void gpu_bench(void) {
  const int d = 512, L = 8, r = 128, ffn = 1376, V = 32000, Bt = 32, T = 256, H = 8, hd = 64;
  const int N = Bt * T;
  const int wide = ffn > d ? ffn : d;
  gpu_bf16 *x = dev_bf16_empty((size_t)N * wide), *y = dev_bf16_empty((size_t)N * wide);
  gpu_bf16 *dx = dev_bf16_empty((size_t)N * wide), *dy = dev_bf16_empty((size_t)N * wide);
  gpu_bf16 *hpre = dev_bf16_empty((size_t)N * r), *hh = dev_bf16_empty((size_t)N * r);
  gpu_bf16 *scr = dev_bf16_empty((size_t)N * r);
  gpu_bf16 *A = dev_bf16_empty((size_t)r * wide), *Bm = dev_bf16_empty((size_t)wide * r);
  float *dA = dev_f32_empty((size_t)r * wide), *dB = dev_f32_empty((size_t)wide * r);
  /* small random values so the GEMMs do not run on zeros */
  {
    size_t nmax = (size_t)N * wide;
    float *h = hnew(nmax);
    fill(h, nmax, 1.0f, 0.0f);
    float *tmp = dev_f32(h, nmax);
    gpu_f32_to_bf16(&ctx, x, tmp, nmax);
    gpu_f32_to_bf16(&ctx, dy, tmp, nmax);
    gpu_f32_to_bf16(&ctx, A, tmp, (size_t)r * wide);
    gpu_f32_to_bf16(&ctx, Bm, tmp + 7, (size_t)r * wide);
    gpu_free(tmp);
    boost_free(h);
  }
  /* one layer: q, k, v, o (d->r->d), gate, up (d->r->ffn), down (ffn->r->d) */
  const int cin[7] = {d, d, d, d, d, d, ffn};
  const int cout[7] = {d, d, d, d, ffn, ffn, d};
  double flops = 0.0;
  for (int i = 0; i < 7; i++) flops += 6.0 * N * (double)r * (cin[i] + cout[i]); /* fwd 2, bwd 4 */
  flops *= L;
  cudaEvent_t e0, e1;
  cudaCheck(cudaEventCreate(&e0));
  cudaCheck(cudaEventCreate(&e1));
  const int iters = 5;
  double best = 1e30;
  for (int it = 0; it < iters + 1; it++) {
    cudaCheck(cudaEventRecord(e0, ctx.stream));
    for (int l = 0; l < L; l++)
      for (int i = 0; i < 7; i++) gpu_cola_forward(&ctx, y, hpre, hh, x, A, Bm, N, cin[i], r, cout[i]);
    for (int l = 0; l < L; l++)
      for (int i = 6; i >= 0; i--)
        gpu_cola_backward(&ctx, dx, dA, dB, scr, dy, x, hpre, hh, A, Bm, N, cin[i], r, cout[i]);
    cudaCheck(cudaEventRecord(e1, ctx.stream));
    gpu_sync(&ctx);
    if (it > 0) { /* first iteration warms up cuBLAS heuristics */
      double ms = elapsed_ms(e0, e1);
      if (ms < best) best = ms;
    }
  }
  printf("bench cola-60m CoLA GEMM set  N=%d tokens, %d layers x 7 bottlenecks (d=%d r=%d ffn=%d), fwd+bwd: "
         "%.3f ms, %.1f TFLOP/s (GEMM flops %.2f GFLOP, best of %d)\n",
         N, L, d, r, ffn, best, flops / (best * 1e-3) / 1e12, flops / 1e9, iters);

  /* LM head d -> V, forward + backward (din and dW) */
  gpu_bf16 *W = dev_bf16_empty((size_t)V * d), *logits = dev_bf16_empty((size_t)N * V);
  float *dW = dev_f32_empty((size_t)V * d);
  double hflops = 6.0 * N * (double)d * V;
  best = 1e30;
  for (int it = 0; it < iters + 1; it++) {
    cudaCheck(cudaEventRecord(e0, ctx.stream));
    gpu_linear_forward(&ctx, logits, x, W, N, d, V);
    gpu_linear_backward(&ctx, dx, dW, logits, x, W, N, d, V);
    cudaCheck(cudaEventRecord(e1, ctx.stream));
    gpu_sync(&ctx);
    if (it > 0) {
      double ms = elapsed_ms(e0, e1);
      if (ms < best) best = ms;
    }
  }
  printf("bench cola-60m LM head        N=%d, %d->%d, fwd+bwd: %.3f ms, %.1f TFLOP/s\n", N, d, V, best,
         hflops / (best * 1e-3) / 1e12);

  /* attention at the cola-60m shape (informational; O(T^2) memory path) */
  size_t na = (size_t)Bt * H * T * T;
  gpu_bf16 *att = dev_bf16_empty(na);
  float *ascr = dev_f32_empty(na);
  /* q, k, v, out, dq, dk, dv views into the big buffers ([N, d] each) */
  gpu_bf16 *q = x, *k = x + (size_t)N * d / 2, *v = y, *o = dy, *dq = dx;
  best = 1e30;
  for (int it = 0; it < iters + 1; it++) {
    cudaCheck(cudaEventRecord(e0, ctx.stream));
    gpu_attention_forward(&ctx, o, att, ascr, q, k, v, Bt, T, H, hd);
    gpu_attention_backward(&ctx, dq, NULL, NULL, ascr, o, q, k, v, att, Bt, T, H, hd);
    cudaCheck(cudaEventRecord(e1, ctx.stream));
    gpu_sync(&ctx);
    if (it > 0) {
      double ms = elapsed_ms(e0, e1);
      if (ms < best) best = ms;
    }
  }
  printf("bench cola-60m attention      B=%d T=%d H=%d hd=%d, fwd+bwd(dq) one layer: %.3f ms\n", Bt, T, H, hd, best);

  cudaCheck(cudaEventDestroy(e0));
  cudaCheck(cudaEventDestroy(e1));
  gpu_free(x), gpu_free(y), gpu_free(dx), gpu_free(dy), gpu_free(hpre), gpu_free(hh), gpu_free(scr);
  gpu_free(A), gpu_free(Bm), gpu_free(dA), gpu_free(dB), gpu_free(W), gpu_free(logits), gpu_free(dW);
  gpu_free(att), gpu_free(ascr);
}
