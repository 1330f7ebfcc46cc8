/* Elementwise ops over flat arrays: add (in place and out of place), mul and
 * its backward, SiLU and its backward, and the precision conversions.
 * Arithmetic in float (hd_ops.h), one rounding per stored act element.
 *
 * One kernel shape for all (hd_elementwise.h: hd_ew_thread): a grid-stride
 * loop over vectors of W elements (16-byte loads: 8 bf16 or 4 floats; W = 8
 * for an op mixing float and bf16 operands) when every pointer is 16-byte
 * aligned, then the n % W tail one element at a time. In place is allowed
 * everywhere: each element is read and then written by the same thread. */
#include "cuda_internal.cuh"
#include "hd_elementwise.h"

template <int OP, int YBF, int XBF, int VEC>
__global__ void ew_kernel(hd_ew_args a) {
  hd_ew_thread(OP, YBF, XBF, VEC, &a, HD_IX_HERE());
}

static bool al(const void *p) { return p == NULL || aligned16(p); }

template <int OP, int YBF, int XBF>
static void ew_launch(boost_backend *be, const hd_ew_args &a, bool vec) {
  if (!a.n) return;
  const size_t W = (size_t)hd_ew_width(YBF, XBF), work = vec ? a.n / W + W : a.n;
  if (vec)
    ew_kernel<OP, YBF, XBF, 1><<<ew_grid(CB(be), work, 256), 256, 0, CB(be)->stream>>>(a);
  else
    ew_kernel<OP, YBF, XBF, 0><<<ew_grid(CB(be), work, 256), 256, 0, CB(be)->stream>>>(a);
  LAUNCH_CHECK();
}

static hd_ew_args ew_args(void *y, void *y2, const void *x0, const void *x1, const void *x2, size_t n) {
  hd_ew_args a;
  a.y = y, a.y2 = y2, a.x0 = x0, a.x1 = x1, a.x2 = x2, a.n = n;
  return a;
}

/* out = f(a, b) (add, mul, the SiLU gradient from dout and x) */
template <int OP>
static void binary(boost_backend *be, void *out, const void *a, const void *b, size_t n) {
  const bool vec = al(out) && al(a) && al(b);
  const hd_ew_args args = ew_args(out, NULL, a, b, NULL, n);
  if (is_bf16(be))
    ew_launch<OP, 1, 1>(be, args, vec);
  else
    ew_launch<OP, 0, 0>(be, args, vec);
}

void cu_add_inplace(boost_backend *be, boost_act *y, cact *x, size_t n) { binary<HD_EW_ADD>(be, y, y, x, n); }
void cu_add_forward(boost_backend *be, boost_act *out, cact *a, cact *b, size_t n) {
  binary<HD_EW_ADD>(be, out, a, b, n);
}
void cu_mul_forward(boost_backend *be, boost_act *out, cact *a, cact *b, size_t n) {
  binary<HD_EW_MUL>(be, out, a, b, n);
}
void cu_silu_backward(boost_backend *be, boost_act *dx, cact *dout, cact *x, size_t n) {
  if (dx) binary<HD_EW_SILU_GRAD>(be, dx, dout, x, n);
}
void cu_silu_forward(boost_backend *be, boost_act *out, cact *x, size_t n) {
  const hd_ew_args args = ew_args(out, NULL, x, NULL, NULL, n);
  if (is_bf16(be))
    ew_launch<HD_EW_SILU, 1, 1>(be, args, al(out) && al(x));
  else
    ew_launch<HD_EW_SILU, 0, 0>(be, args, al(out) && al(x));
}
/* da = dout * b, db = dout * a (NULL skips); everything read before any write */
void cu_mul_backward(boost_backend *be, boost_act *da, boost_act *db, cact *dout, cact *a, cact *b, size_t n) {
  if (!da && !db) return;
  const bool vec = al(da) && al(db) && al(dout) && al(a) && al(b);
  const hd_ew_args args = ew_args(da, db, dout, a, b, n);
  if (is_bf16(be))
    ew_launch<HD_EW_MUL_BWD, 1, 1>(be, args, vec);
  else
    ew_launch<HD_EW_MUL_BWD, 0, 0>(be, args, vec);
}

/* dst (act) <- src (float), rounded; a no-op for float activations in place */
void cu_to_act(boost_backend *be, boost_act *dst, const float *src, size_t n) {
  if (!is_bf16(be)) {
    if ((const void *)dst != (const void *)src) cudaCheck(cudaMemcpyAsync(dst, src, n * 4, cudaMemcpyDeviceToDevice, CB(be)->stream));
    return;
  }
  ew_launch<HD_EW_COPY, 1, 0>(be, ew_args(dst, NULL, src, NULL, NULL, n), al(dst) && al(src));
}

/* dst (float) <- src (act), exact */
void cu_to_f32(boost_backend *be, float *dst, cact *src, size_t n) {
  if (!is_bf16(be)) {
    if ((const void *)dst != (const void *)src) cudaCheck(cudaMemcpyAsync(dst, src, n * 4, cudaMemcpyDeviceToDevice, CB(be)->stream));
    return;
  }
  ew_launch<HD_EW_COPY, 0, 1>(be, ew_args(dst, NULL, src, NULL, NULL, n), al(dst) && al(src));
}
