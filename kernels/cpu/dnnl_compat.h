/* The few oneDNN calls whose form changed between the 2.x API (Debian 12's
 * libdnnl-dev, 2.6) and 3.x (the AMX kernels for every layout of the
 * step's bf16 shapes; PyPI's onednn-devel-cpu-gomp): 3.x made memory
 * descriptors opaque objects that are created and destroyed, and folded
 * the operation descriptor into the primitive descriptor's creation. Used
 * by gemm_bf16.c and the bench programs that build matmul primitives, so
 * every one of them builds against either. Include after
 * <oneapi/dnnl/dnnl.h>. */
#ifndef BOOST_DNNL_COMPAT_H
#define BOOST_DNNL_COMPAT_H

/* 3.x: a pointer, NULL until created; 2.x: a value with nothing to free.
 * boost_dnnl_md_memory takes what dnnl_memory_create takes. */
typedef dnnl_memory_desc_t boost_dnnl_md;

/* A 2-D descriptor of rows x cols elements of type t at the given strides. */
static inline dnnl_status_t boost_dnnl_md_strided(boost_dnnl_md *md, int rows, int cols, long row_stride, long col_stride,
                                            dnnl_data_type_t t) {
  const dnnl_dims_t dims = {rows, cols}, strides = {row_stride, col_stride};
#if DNNL_VERSION_MAJOR >= 3
  *md = NULL;
  return dnnl_memory_desc_create_with_strides(md, 2, dims, t, strides);
#else
  return dnnl_memory_desc_init_by_strides(md, 2, dims, t, strides);
#endif
}

static inline void boost_dnnl_md_release(boost_dnnl_md md) {
#if DNNL_VERSION_MAJOR >= 3
  if (md) dnnl_memory_desc_destroy(md);
#else
  (void)md;
#endif
}

static inline dnnl_status_t boost_dnnl_md_memory(dnnl_memory_t *mem, const boost_dnnl_md *md, dnnl_engine_t engine,
                                           void *handle) {
#if DNNL_VERSION_MAJOR >= 3
  return dnnl_memory_create(mem, *md, engine, handle);
#else
  return dnnl_memory_create(mem, md, engine, handle);
#endif
}

/* C = A B (no bias) with attr's post-ops. */
static inline dnnl_status_t boost_dnnl_matmul_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t engine, boost_dnnl_md a, boost_dnnl_md b,
                                           boost_dnnl_md c, dnnl_primitive_attr_t attr) {
#if DNNL_VERSION_MAJOR >= 3
  return dnnl_matmul_primitive_desc_create(pd, engine, a, b, NULL, c, attr);
#else
  dnnl_matmul_desc_t desc;
  const dnnl_status_t st = dnnl_matmul_desc_init(&desc, &a, &b, NULL, &c);
  return st == dnnl_success ? dnnl_primitive_desc_create(pd, &desc, attr, engine, NULL) : st;
#endif
}

/* The "sum" post-op with scale 1: C = A B + C, accumulated in fp32. */
static inline dnnl_status_t boost_dnnl_append_sum_1(dnnl_post_ops_t ops) {
#if DNNL_VERSION_MAJOR >= 3
  return dnnl_post_ops_append_sum(ops, 1.0f, 0, dnnl_data_type_undef);
#else
  return dnnl_post_ops_append_sum(ops, 1.0f);
#endif
}

#endif
