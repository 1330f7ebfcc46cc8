/* test-backend-ops: every op of the seam (kernels/op_list.h) on a backend
 * under test against the CPU backend with float activations (the
 * reference), in the manner of ggml's test-backend-ops. Each check runs the
 * same entry on both backends with the same inputs -- for bf16 activations,
 * inputs rounded to bf16 first, so both sides see identical values -- and
 * prints one line:
 *   ok|FAIL <act> <what> rel_l2 <e> (max <m>) tol <t>
 * with rel_l2 = ||got - ref|| / ||ref|| and max = max|got - ref| / max|ref|
 * (tests/gpu/gpu_plan.py forwards the lines that start with FAIL). The
 * bounds are per precision (docs/PRECISION.md): bops_run sets them.
 *
 * Shapes: fixed cases that reach each kernel's paths (the large ones only
 * without --small), and shapes drawn at random from the run's seed.
 * Coverage: a check records the op it runs on the backend under test; an op
 * of the list that no check ran is a failure. Gradients: on float backends
 * each backward is also checked against central finite differences of its
 * forward (bops_grad.c). */
#ifndef BOOST_TESTS_BACKEND_OPS_H
#define BOOST_TESTS_BACKEND_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

typedef struct {
  boost_backend *be;  /* under test */
  boost_backend *ref; /* the CPU backend, float activations */
  int bf16;
  int small; /* small shapes only (compute-sanitizer, ctest) */
  /* bounds: float results (statistics, parameter gradients), act results
   * of one rounding, act results of several */
  double tol_f32, tol_act, tol_chain;
  unsigned char covered[BOOST_OP_COUNT];
} gcheck;

/* An op on the reference (side 0, host memory) or the backend under test
 * (side 1), which counts for the coverage: CALL is the expression (its
 * value is the op's), RUN the statement. */
#define BOPS_SIDE(side) ((side) ? g->be : g->ref)
#define CALL(side, op, ...) \
  ((void)((side) && (g->covered[BOOST_OP_##op] = 1)), BOPS_SIDE(side)->ops->op(BOPS_SIDE(side), __VA_ARGS__))
#define RUN(side, op, ...)        \
  do {                            \
    CALL(side, op, __VA_ARGS__);  \
  } while (0)

/* ---- host data ---- */
void g_seed(uint64_t seed);
void g_fill(float *x, size_t n, float lo, float hi); /* seeded uniform */
float *g_new(size_t n);                              /* zeroed host floats */
float *g_rand(size_t n, float lo, float hi);
int32_t *g_tokens(size_t n, int V);
int g_dim(int lo, int hi); /* a random shape dimension in [lo, hi] */
float g_round_act(const gcheck *g, float x); /* x as the act type stores it */

/* ---- backend data ---- */
/* act copy of h (h becomes the stored values: rounded for bf16) */
void *g_act(gcheck *g, float *h, size_t n);
float *g_f32(gcheck *g, const float *h, size_t n);
int32_t *g_i32(gcheck *g, const int32_t *h, size_t n);
void *g_act_empty(gcheck *g, size_t n);
/* downloads into host floats (act converted exactly) */
void g_read_act(gcheck *g, float *out, const void *dev, size_t n);
void g_read_f32(gcheck *g, float *out, const float *dev, size_t n);
void g_free(gcheck *g, const void *dev);

/* ---- verdicts (counted) ---- */
void g_cmp(gcheck *g, const char *what, const float *got, const float *want, size_t n, double tol);
/* got (act, backend memory) against want (host floats) */
void g_cmp_act(gcheck *g, const char *what, const void *dev, const float *want, size_t n, double tol);
void g_cmp_f32(gcheck *g, const char *what, const float *dev, const float *want, size_t n, double tol);
void g_same(gcheck *g, const char *what, const void *a, const void *b, size_t bytes); /* bitwise */
void g_true(gcheck *g, const char *what, int ok);
/* checks and failures so far, over every run */
void g_totals(int *checks, int *failed);

/* bops_ops.c, bops_attn.c, bops_grad.c */
void check_dense(gcheck *g);
void check_elementwise(gcheck *g);
void check_norms(gcheck *g);
void check_embedding_rope(gcheck *g);
void check_loss(gcheck *g);
void check_optimizer(gcheck *g);
void check_attention(gcheck *g);
void check_gradients(gcheck *g);

/* Every op of be (act type from be) against ref: the bounds of be's
 * precision, every check, the coverage. Returns the failures of this run. */
int bops_run(boost_backend *be, boost_backend *ref, int small);

#endif
