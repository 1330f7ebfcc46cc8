/* Full-rank linear and the CoLA bottleneck on cuBLAS (bf16 x bf16, fp32
 * accumulation). Weights are [out, in].
 *
 * linear:  out[N,Cout] = in[N,Cin] . W[Cout,Cin]^T             (bf16 out)
 *          din = dout . W (bf16, assign, NULL skips)
 *          dW += dout^T . in (fp32 written by the GEMM with beta = 1)
 * cola:    hpre[N,r] = in . A^T (A [r, Cin]);  h = silu(hpre)  (both bf16)
 *          out[N,Cout] = h . B^T (B [Cout, r])
 *          dB += dout^T . h;  dh = dout . B (bf16 scratch);
 *          dhpre = dh * silu'(hpre) (in place in scratch);
 *          dA += dhpre^T . in;  din = dhpre . A */
#include "cuda_internal.cuh"

void gpu_linear_forward(gpu_ctx *ctx, gpu_bf16 *out, const gpu_bf16 *in, const gpu_bf16 *W, int N, int Cin,
                        int Cout) {
  if (N <= 0 || Cout <= 0) return;
  gpu_gemm(ctx, 0, 1, N, Cout, Cin, 1.0f, in, Cin, W, Cin, 0.0f, out, 0, Cout);
}

void gpu_linear_backward(gpu_ctx *ctx, gpu_bf16 *din, float *dW, const gpu_bf16 *dout, const gpu_bf16 *in,
                         const gpu_bf16 *W, int N, int Cin, int Cout) {
  if (N <= 0 || Cin <= 0 || Cout <= 0) return;
  if (din) gpu_gemm(ctx, 0, 0, N, Cin, Cout, 1.0f, dout, Cout, W, Cin, 0.0f, din, 0, Cin);
  if (dW) gpu_gemm(ctx, 1, 0, Cout, Cin, N, 1.0f, dout, Cout, in, Cin, 1.0f, dW, 1, Cin);
}

void gpu_cola_forward(gpu_ctx *ctx, gpu_bf16 *out, gpu_bf16 *hpre, gpu_bf16 *h, const gpu_bf16 *in,
                      const gpu_bf16 *A, const gpu_bf16 *B, int N, int Cin, int r, int Cout) {
  if (N <= 0 || r <= 0) return;
  gpu_gemm(ctx, 0, 1, N, r, Cin, 1.0f, in, Cin, A, Cin, 0.0f, hpre, 0, r);
  gpu_silu_forward(ctx, h, hpre, (size_t)N * r);
  if (Cout > 0) gpu_gemm(ctx, 0, 1, N, Cout, r, 1.0f, h, r, B, r, 0.0f, out, 0, Cout);
}

void gpu_cola_backward(gpu_ctx *ctx, gpu_bf16 *din, float *dA, float *dB, gpu_bf16 *scratch, const gpu_bf16 *dout,
                       const gpu_bf16 *in, const gpu_bf16 *hpre, const gpu_bf16 *h, const gpu_bf16 *A,
                       const gpu_bf16 *B, int N, int Cin, int r, int Cout) {
  if (N <= 0 || r <= 0) return;
  if (dB && Cout > 0) gpu_gemm(ctx, 1, 0, Cout, r, N, 1.0f, dout, Cout, h, r, 1.0f, dB, 1, r);
  if (!dA && !din) return;
  gpu_bf16 *dh = scratch;
  if (Cout > 0)
    gpu_gemm(ctx, 0, 0, N, r, Cout, 1.0f, dout, Cout, B, r, 0.0f, dh, 0, r);
  else
    gpu_zero(ctx, dh, (size_t)N * r * sizeof(gpu_bf16));
  gpu_silu_backward(ctx, dh, dh, hpre, (size_t)N * r);
  if (Cin <= 0) return;
  if (dA) gpu_gemm(ctx, 1, 0, r, Cin, N, 1.0f, dh, r, in, Cin, 1.0f, dA, 1, Cin);
  if (din) gpu_gemm(ctx, 0, 0, N, Cin, r, 1.0f, dh, r, A, Cin, 0.0f, din, 0, Cin);
}
