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

/* y = y + x (add_inplace) and out = a + b (add_forward) */
template <int BF16>
struct AddOp {
  static constexpr int W = BF16 ? 8 : 4;
  void *out;
  const void *a, *b;
  template <int V>
  __device__ void run(size_t i) const {
    float x[V], y[V];
    ldw<V>(x, a, i, BF16);
    ldw<V>(y, b, i, BF16);
#pragma unroll
    for (int k = 0; k < V; k++) x[k] = x[k] + y[k];
    stw<V>(out, i, x, BF16);
  }
};

template <int BF16>
struct MulOp {
  static constexpr int W = BF16 ? 8 : 4;
  void *out;
  const void *a, *b;
  template <int V>
  __device__ void run(size_t i) const {
    float x[V], y[V];
    ldw<V>(x, a, i, BF16);
    ldw<V>(y, b, i, BF16);
#pragma unroll
    for (int k = 0; k < V; k++) x[k] = x[k] * y[k];
    stw<V>(out, i, x, BF16);
  }
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

template <int BF16>
struct SiluOp {
  static constexpr int W = BF16 ? 8 : 4;
  void *out;
  const void *x;
  template <int V>
  __device__ void run(size_t i) const {
    float v[V];
    ldw<V>(v, x, i, BF16);
#pragma unroll
    for (int k = 0; k < V; k++) v[k] = hd_silu(v[k]);
    stw<V>(out, i, v, BF16);
  }
};

template <int BF16>
struct SiluBwdOp {
  static constexpr int W = BF16 ? 8 : 4;
  void *dx;
  const void *dout, *x;
  template <int V>
  __device__ void run(size_t i) const {
    float g[V], v[V];
    ldw<V>(g, dout, i, BF16);
    ldw<V>(v, x, i, BF16);
#pragma unroll
    for (int k = 0; k < V; k++) g[k] = hd_silu_grad(g[k], v[k]);
    stw<V>(dx, i, g, BF16);
  }
};

/* dst (storage DST_BF16) <- src (storage SRC_BF16): rounding when narrowing */
template <int DST_BF16, int SRC_BF16>
struct ConvOp {
  static constexpr int W = 8;
  void *dst;
  const void *src;
  template <int V>
  __device__ void run(size_t i) const {
    float v[V];
    ldw<V>(v, src, i, SRC_BF16);
    stw<V>(dst, i, v, DST_BF16);
  }
};

#define EW_DISPATCH(be, OP, n, vec, ...)          \
  do {                                            \
    if (is_bf16(be))                              \
      ew_launch(be, OP<1>{__VA_ARGS__}, n, vec); \
    else                                          \
      ew_launch(be, OP<0>{__VA_ARGS__}, n, vec); \
  } while (0)

void cu_add_inplace(boost_backend *be, boost_act *y, cact *x, size_t n) {
  EW_DISPATCH(be, AddOp, n, al(y) && al(x), y, y, x);
}
void cu_add_forward(boost_backend *be, boost_act *out, cact *a, cact *b, size_t n) {
  EW_DISPATCH(be, AddOp, n, al(out) && al(a) && al(b), out, a, b);
}
void cu_mul_forward(boost_backend *be, boost_act *out, cact *a, cact *b, size_t n) {
  EW_DISPATCH(be, MulOp, n, al(out) && al(a) && al(b), out, a, b);
}
void cu_mul_backward(boost_backend *be, boost_act *da, boost_act *db, cact *dout, cact *a, cact *b, size_t n) {
  if (!da && !db) return;
  EW_DISPATCH(be, MulBwdOp, n, al(da) && al(db) && al(dout) && al(a) && al(b), da, db, dout, a, b);
}
void cu_silu_forward(boost_backend *be, boost_act *out, cact *x, size_t n) {
  EW_DISPATCH(be, SiluOp, n, al(out) && al(x), out, x);
}
void cu_silu_backward(boost_backend *be, boost_act *dx, cact *dout, cact *x, size_t n) {
  if (!dx) return;
  EW_DISPATCH(be, SiluBwdOp, n, al(dx) && al(dout) && al(x), dx, dout, x);
}

/* dst (act) <- src (float), rounded; a no-op for float activations in place */
void cu_to_act(boost_backend *be, boost_act *dst, const float *src, size_t n) {
  if (!is_bf16(be)) {
    if ((const void *)dst != (const void *)src) cudaCheck(cudaMemcpyAsync(dst, src, n * 4, cudaMemcpyDeviceToDevice, CB(be)->stream));
    return;
  }
  ew_launch(be, ConvOp<1, 0>{dst, src}, n, al(dst) && al(src));
}

/* dst (float) <- src (act), exact */
void cu_to_f32(boost_backend *be, float *dst, cact *src, size_t n) {
  if (!is_bf16(be)) {
    if ((const void *)dst != (const void *)src) cudaCheck(cudaMemcpyAsync(dst, src, n * 4, cudaMemcpyDeviceToDevice, CB(be)->stream));
    return;
  }
  ew_launch(be, ConvOp<0, 1>{dst, src}, n, al(dst) && al(src));
}
