/* Elementwise ops over flat bf16 arrays, fp32 math, one rounding per output.
 *   silu: out = x * sigmoid(x);  dx = dout * s * (1 + x (1 - s))
 *   mul : out = a * b;           da = dout * b, db = dout * a (NULL skips)
 *   add : out = a + b
 * Every thread handles 8 elements with 16-byte loads/stores when all
 * pointers are 16-byte aligned (grid-stride), the tail (n % 8) one at a
 * time. In-place use is allowed: each element is read before it is written,
 * by the same thread (so plain loads, not the read-only path). */
#include "cuda_internal.cuh"

template <int W>
__device__ __forceinline__ void ldv(float *f, const gpu_bf16 *p) {
  if constexpr (W == 8)
    load8_rw(f, p);
  else
    f[0] = bf2f(*p);
}
template <int W>
__device__ __forceinline__ void stv(gpu_bf16 *p, const float *f) {
  if constexpr (W == 8)
    store8(p, f);
  else
    *p = f2bf(f[0]);
}

template <class Op>
__global__ void ew_kernel(Op op, size_t n, int vec) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t n8 = vec ? n / 8 * 8 : 0;
  for (size_t j = t * 8; j < n8; j += stride * 8) op.template apply<8>(j);
  for (size_t i = n8 + t; i < n; i += stride) op.template apply<1>(i);
}

template <class Op>
static void ew_launch(gpu_ctx *ctx, const Op &op, size_t n, bool vec) {
  if (!n) return;
  size_t work = vec ? n / 8 + 8 : n;
  ew_kernel<Op><<<ew_grid(ctx, work, 256), 256, 0, ctx->stream>>>(op, n, vec ? 1 : 0);
  LAUNCH_CHECK();
}

static inline bool al(const void *p) { return p == NULL || aligned16(p); }

struct SiluFwd {
  gpu_bf16 *out;
  const gpu_bf16 *x;
  template <int W>
  __device__ void apply(size_t i) const {
    float v[W];
    ldv<W>(v, x + i);
#pragma unroll
    for (int k = 0; k < W; k++) v[k] = v[k] * sigmoidf_dev(v[k]);
    stv<W>(out + i, v);
  }
};

struct SiluBwd {
  gpu_bf16 *dx;
  const gpu_bf16 *dout, *x;
  template <int W>
  __device__ void apply(size_t i) const {
    float g[W], v[W];
    ldv<W>(g, dout + i);
    ldv<W>(v, x + i);
#pragma unroll
    for (int k = 0; k < W; k++) {
      float s = sigmoidf_dev(v[k]);
      g[k] = g[k] * s * (1.0f + v[k] * (1.0f - s));
    }
    stv<W>(dx + i, g);
  }
};

struct MulFwd {
  gpu_bf16 *out;
  const gpu_bf16 *a, *b;
  template <int W>
  __device__ void apply(size_t i) const {
    float x[W], y[W];
    ldv<W>(x, a + i);
    ldv<W>(y, b + i);
#pragma unroll
    for (int k = 0; k < W; k++) x[k] *= y[k];
    stv<W>(out + i, x);
  }
};

struct MulBwd {
  gpu_bf16 *da, *db;
  const gpu_bf16 *dout, *a, *b;
  template <int W>
  __device__ void apply(size_t i) const {
    float g[W], x[W], y[W], r[W];
    ldv<W>(g, dout + i); /* read everything first: da/db may alias inputs */
    if (db) ldv<W>(x, a + i);
    if (da) ldv<W>(y, b + i);
    if (da) {
#pragma unroll
      for (int k = 0; k < W; k++) r[k] = g[k] * y[k];
      stv<W>(da + i, r);
    }
    if (db) {
#pragma unroll
      for (int k = 0; k < W; k++) r[k] = g[k] * x[k];
      stv<W>(db + i, r);
    }
  }
};

struct AddFwd {
  gpu_bf16 *out;
  const gpu_bf16 *a, *b;
  template <int W>
  __device__ void apply(size_t i) const {
    float x[W], y[W];
    ldv<W>(x, a + i);
    ldv<W>(y, b + i);
#pragma unroll
    for (int k = 0; k < W; k++) x[k] += y[k];
    stv<W>(out + i, x);
  }
};

void gpu_silu_forward(gpu_ctx *ctx, gpu_bf16 *out, const gpu_bf16 *x, size_t n) {
  ew_launch(ctx, SiluFwd{out, x}, n, al(out) && al(x));
}

void gpu_silu_backward(gpu_ctx *ctx, gpu_bf16 *dx, const gpu_bf16 *dout, const gpu_bf16 *x, size_t n) {
  if (!dx) return;
  ew_launch(ctx, SiluBwd{dx, dout, x}, n, al(dx) && al(dout) && al(x));
}

void gpu_mul_forward(gpu_ctx *ctx, gpu_bf16 *out, const gpu_bf16 *a, const gpu_bf16 *b, size_t n) {
  ew_launch(ctx, MulFwd{out, a, b}, n, al(out) && al(a) && al(b));
}

void gpu_mul_backward(gpu_ctx *ctx, gpu_bf16 *da, gpu_bf16 *db, const gpu_bf16 *dout, const gpu_bf16 *a,
                      const gpu_bf16 *b, size_t n) {
  if (!da && !db) return;
  ew_launch(ctx, MulBwd{da, db, dout, a, b}, n, al(da) && al(db) && al(dout) && al(a) && al(b));
}

void gpu_add_forward(gpu_ctx *ctx, gpu_bf16 *out, const gpu_bf16 *a, const gpu_bf16 *b, size_t n) {
  ew_launch(ctx, AddFwd{out, a, b}, n, al(out) && al(a) && al(b));
}
