/* Elementwise ops over flat arrays: add (in place and out of place), mul and
 * its backward, SiLU and its backward, and the precision conversions.
 * Arithmetic in float (hd_ops.h), one rounding per stored act element.
 *
 * One kernel shape for all: a grid-stride loop over vectors of W elements
 * (16-byte loads: 8 bf16 or 4 floats; W = 8 for an op mixing float and bf16
 * operands) when every pointer is 16-byte aligned, then the n % W tail one
 * element at a time (hd_vec_end). In place is allowed everywhere: each
 * element is read and then written by the same thread, plain loads. */
#include "cuda_internal.cuh"

template <class Op, int VEC>
__global__ void ew_kernel(Op op, size_t n) {
  constexpr int W = Op::W;
  const size_t stride = (size_t)gridDim.x * blockDim.x, t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t nv = 0;
  if constexpr (VEC != 0) {
    nv = hd_vec_end(n, W);
    for (size_t j = t * W; j < nv; j += stride * W) op.template run<W>(j);
  }
  for (size_t i = nv + t; i < n; i += stride) op.template run<1>(i);
}

static bool al(const void *p) { return p == NULL || aligned16(p); }

template <class Op>
static void ew_launch(boost_backend *be, const Op &op, size_t n, bool vec) {
  if (!n) return;
  const size_t work = vec ? n / Op::W + Op::W : n;
  if (vec)
    ew_kernel<Op, 1><<<ew_grid(CB(be), work, 256), 256, 0, CB(be)->stream>>>(op, n);
  else
    ew_kernel<Op, 0><<<ew_grid(CB(be), work, 256), 256, 0, CB(be)->stream>>>(op, n);
  LAUNCH_CHECK();
}

/* out = f(a, b) (add, mul, the SiLU gradient from dout and x) */
template <int BF16, class F>
struct BinaryOp {
  static constexpr int W = BF16 ? 8 : 4;
  void *out;
  const void *a, *b;
  template <int V>
  __device__ void run(size_t i) const {
    float x[V], y[V];
    ldw<V>(x, a, i, BF16);
    ldw<V>(y, b, i, BF16);
#pragma unroll
    for (int k = 0; k < V; k++) x[k] = F()(x[k], y[k]);
    stw<V>(out, i, x, BF16);
  }
};
struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Mul {
  __device__ float operator()(float a, float b) const { return a * b; }
};
struct SiluGrad {
  __device__ float operator()(float dout, float x) const { return hd_silu_grad(dout, x); }
};

/* dst = f(src), each in its own storage (SiLU; the precision conversions) */
template <int DST_BF16, int SRC_BF16, class F>
struct UnaryOp {
  static constexpr int W = DST_BF16 || SRC_BF16 ? 8 : 4;
  void *dst;
  const void *src;
  template <int V>
  __device__ void run(size_t i) const {
    float v[V];
    ldw<V>(v, src, i, SRC_BF16);
#pragma unroll
    for (int k = 0; k < V; k++) v[k] = F()(v[k]);
    stw<V>(dst, i, v, DST_BF16);
  }
};
struct Silu {
  __device__ float operator()(float x) const { return hd_silu(x); }
};
struct Same {
  __device__ float operator()(float x) const { return x; }
};

/* da = dout * b, db = dout * a (NULL skips); everything read before any write */
template <int BF16>
struct MulBwdOp {
  static constexpr int W = BF16 ? 8 : 4;
  void *da, *db;
  const void *dout, *a, *b;
  template <int V>
  __device__ void run(size_t i) const {
    float g[V], x[V], y[V], r[V];
    ldw<V>(g, dout, i, BF16);
    if (db) ldw<V>(x, a, i, BF16);
    if (da) ldw<V>(y, b, i, BF16);
    if (da) {
#pragma unroll
      for (int k = 0; k < V; k++) r[k] = g[k] * y[k];
      stw<V>(da, i, r, BF16);
    }
    if (db) {
#pragma unroll
      for (int k = 0; k < V; k++) r[k] = g[k] * x[k];
      stw<V>(db, i, r, BF16);
    }
  }
};

template <class F>
static void binary(boost_backend *be, void *out, const void *a, const void *b, size_t n) {
  const bool vec = al(out) && al(a) && al(b);
  if (is_bf16(be))
    ew_launch(be, BinaryOp<1, F>{out, a, b}, n, vec);
  else
    ew_launch(be, BinaryOp<0, F>{out, a, b}, n, vec);
}

void cu_add_inplace(boost_backend *be, boost_act *y, cact *x, size_t n) { binary<Add>(be, y, y, x, n); }
void cu_add_forward(boost_backend *be, boost_act *out, cact *a, cact *b, size_t n) { binary<Add>(be, out, a, b, n); }
void cu_mul_forward(boost_backend *be, boost_act *out, cact *a, cact *b, size_t n) { binary<Mul>(be, out, a, b, n); }
void cu_silu_backward(boost_backend *be, boost_act *dx, cact *dout, cact *x, size_t n) {
  if (dx) binary<SiluGrad>(be, dx, dout, x, n);
}
void cu_silu_forward(boost_backend *be, boost_act *out, cact *x, size_t n) {
  if (is_bf16(be))
    ew_launch(be, UnaryOp<1, 1, Silu>{out, x}, n, al(out) && al(x));
  else
    ew_launch(be, UnaryOp<0, 0, Silu>{out, x}, n, al(out) && al(x));
}
void cu_mul_backward(boost_backend *be, boost_act *da, boost_act *db, cact *dout, cact *a, cact *b, size_t n) {
  if (!da && !db) return;
  const bool vec = al(da) && al(db) && al(dout) && al(a) && al(b);
  if (is_bf16(be))
    ew_launch(be, MulBwdOp<1>{da, db, dout, a, b}, n, vec);
  else
    ew_launch(be, MulBwdOp<0>{da, db, dout, a, b}, n, vec);
}

/* dst (act) <- src (float), rounded; a no-op for float activations in place */
void cu_to_act(boost_backend *be, boost_act *dst, const float *src, size_t n) {
  if (!is_bf16(be)) {
    if ((const void *)dst != (const void *)src) cudaCheck(cudaMemcpyAsync(dst, src, n * 4, cudaMemcpyDeviceToDevice, CB(be)->stream));
    return;
  }
  ew_launch(be, UnaryOp<1, 0, Same>{dst, src}, n, al(dst) && al(src));
}

/* dst (float) <- src (act), exact */
void cu_to_f32(boost_backend *be, float *dst, cact *src, size_t n) {
  if (!is_bf16(be)) {
    if ((const void *)dst != (const void *)src) cudaCheck(cudaMemcpyAsync(dst, src, n * 4, cudaMemcpyDeviceToDevice, CB(be)->stream));
    return;
  }
  ew_launch(be, UnaryOp<0, 1, Same>{dst, src}, n, al(dst) && al(src));
}
