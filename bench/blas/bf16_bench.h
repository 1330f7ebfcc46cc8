/* bf16-shapes' tables and measuring helpers (bf16_shapes.c has the
 * candidates and the program): the step's GEMM shapes per configuration,
 * the machine's load while a row ran, and operands in every type. */
#ifndef BOOST_BENCH_BF16_BENCH_H
#define BOOST_BENCH_BF16_BENCH_H

#include <stddef.h>

#include "bf16.h"

typedef struct {
  const char *name;
  int d, r, ffn, layers, vocab;
} model_dims;

enum { BATCH = 4 };

typedef struct {
  int ta, tb, M, N, K, lda, ldb, ldc, beta;
  int act; /* output is an activation (bf16 in the step) rather than a weight gradient or the logits */
} shape;

typedef struct {
  shape s;
  char roles[160];
} shape_row;

typedef struct {
  char name[32];
  int rows[64], counts[64], n; /* shape index, calls per step */
} config;

typedef struct {
  long long all, self;
  double t;
} load_mark;

/* Operands of one shape in every type the candidates read. */
typedef struct {
  const shape *s;
  size_t a_n, b_n, c_n;
  float *A, *B, *C;
  bf16_t *A16, *B16, *C16;
  float *Cf; /* fp32 output of the bf16 candidates */
} operands;

extern shape_row g_shapes[512];
extern int g_nshapes;
extern config g_configs[16];
extern int g_nconfigs;

/* Adds the configurations of a list "MODEL:T,...,square"; -1 when malformed. */
int parse_configs(const char *list);
double now_s(void);
double flops(const shape *s);
void load_start(load_mark *m);
/* Cores other processes kept busy since the mark (-1 when unknown). */
double load_other(const load_mark *m);
/* Waits up to max_s for a half-second window with less than 0.1 core of
 * other load. */
void wait_idle(double max_s);
/* Zero-filled, never NULL. */
void *xmalloc(size_t bytes);
void operands_init(operands *o, const shape *s);
void operands_free(operands *o);

#endif
