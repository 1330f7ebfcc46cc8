/* What the GPU check's files share (tests/gpu/gpu_check.c: the harness, the
 * memory operations and main; gpu_check_ops.c: every op of the seam;
 * gpu_bench.c: throughput lines). Every check runs an entry of the CUDA
 * backend and the same entry of the CPU backend (float) on the same inputs
 * -- for bf16 activations, inputs rounded to bf16 first, so both sides see
 * identical values -- and prints one line:
 *   ok|FAIL <act> <what> rel_l2 <e> (max <m>) tol <t>
 * with rel_l2 = ||gpu - cpu|| / ||cpu|| and max = max|gpu - cpu| / max|cpu|. */
#ifndef BOOST_TEST_GPU_CHECK_H
#define BOOST_TEST_GPU_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

typedef struct {
  boost_backend *gpu, *cpu;
  int bf16;
  int small; /* --small: shapes for compute-sanitizer */
  /* tolerances: float results (statistics, parameter gradients), act
   * results of one rounding, act results of several */
  double tol_f32, tol_act, tol_chain;
} gcheck;

/* ---- host data ---- */
void g_fill(float *x, size_t n, float lo, float hi); /* fixed-seed uniform */
float *g_new(size_t n);                              /* zeroed host floats */
float *g_rand(size_t n, float lo, float hi);
int32_t *g_tokens(size_t n, int V);

/* ---- device data ---- */
/* act copy of h on the GPU (h becomes the stored values: rounded for bf16) */
void *g_act(gcheck *g, float *h, size_t n);
float *g_f32(gcheck *g, const float *h, size_t n);
int32_t *g_i32(gcheck *g, const int32_t *h, size_t n);
void *g_act_empty(gcheck *g, size_t n);
/* downloads into host floats (act converted exactly) */
void g_read_act(gcheck *g, float *out, const void *dev, size_t n);
void g_read_f32(gcheck *g, float *out, const float *dev, size_t n);
void g_free(gcheck *g, const void *dev);

/* ---- verdicts (counted; main's exit status) ---- */
void g_cmp(gcheck *g, const char *what, const float *got, const float *want, size_t n, double tol);
/* got (act, on the GPU) against want (host floats) */
void g_cmp_act(gcheck *g, const char *what, const void *dev, const float *want, size_t n, double tol);
void g_cmp_f32(gcheck *g, const char *what, const float *dev, const float *want, size_t n, double tol);
void g_same(gcheck *g, const char *what, const void *a, const void *b, size_t bytes); /* bitwise */
void g_true(gcheck *g, const char *what, int ok);

/* gpu_check_ops.c, gpu_check_attn.c */
void check_dense(gcheck *g);
void check_elementwise(gcheck *g);
void check_norms(gcheck *g);
void check_embedding_rope(gcheck *g);
void check_loss(gcheck *g);
void check_optimizer(gcheck *g);
void check_attention(gcheck *g);
/* gpu_bench.c */
void gpu_bench(gcheck *g);

#endif
