/* The step's GEMM shapes, the load meter and the operands of bf16-shapes
 * (bf16_bench.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bf16_bench.h"
#include "check.h"

static const model_dims MODELS[] = {
    {"tiny", 64, 16, 176, 4, 320},
    {"cola-60m", 512, 128, 1376, 8, 32000},
    {"cola-130m", 768, 256, 2048, 12, 32000},
};

shape_row g_shapes[512];
int g_nshapes;
config g_configs[16];
int g_nconfigs;

static int shape_index(const shape *s, const char *role) {
  for (int i = 0; i < g_nshapes; i++)
    if (!memcmp(&g_shapes[i].s, s, sizeof *s)) {
      const size_t l = strlen(g_shapes[i].roles);
      if (!strstr(g_shapes[i].roles, role) && l + strlen(role) + 3 < sizeof g_shapes[i].roles)
        snprintf(g_shapes[i].roles + l, sizeof g_shapes[i].roles - l, "; %s", role);
      return i;
    }
  BOOST_ASSERT(g_nshapes < (int)(sizeof g_shapes / sizeof g_shapes[0]));
  g_shapes[g_nshapes].s = *s;
  snprintf(g_shapes[g_nshapes].roles, sizeof g_shapes[0].roles, "%s", role);
  return g_nshapes++;
}

static void add_call(config *c, const char *cfg, const char *role, shape s, int count) {
  char full[96];
  snprintf(full, sizeof full, "%s %s", cfg, role);
  const int idx = shape_index(&s, full);
  for (int i = 0; i < c->n; i++)
    if (c->rows[i] == idx) {
      c->counts[i] += count;
      return;
    }
  BOOST_ASSERT(c->n < 64);
  c->rows[c->n] = idx;
  c->counts[c->n++] = count;
}

/* The calls of model_proj.c (every projection low-rank, tp = 1: lda/ldb/ldc
 * as the trainer passes them, grouped q/k/v and gate/up) and model_head.c. */
static void add_model(const model_dims *m, int T) {
  config *c = &g_configs[g_nconfigs++];
  snprintf(c->name, sizeof c->name, "%s T%d", m->name, T);
  const int N = BATCH * T, d = m->d, r = m->r, f = m->ffn, L = m->layers, V = m->vocab;
  char tag[48];
  snprintf(tag, sizeof tag, "%s:%d", m->name, T);
#define CALL(role, ta, tb, M_, N_, K_, lda, ldb, ldc, beta, act, count) \
  add_call(c, tag, role, (shape){ta, tb, M_, N_, K_, lda, ldb, ldc, beta, act}, count)
  /* forward: H = X A^T (one GEMM per group), out_j = h_j B_j^T */
  CALL("qkv A fwd", 0, 1, N, 3 * r, d, d, d, 3 * r, 0, 1, L);
  CALL("q,k,v B fwd", 0, 1, N, d, r, 3 * r, r, d, 0, 1, 3 * L);
  CALL("o A fwd", 0, 1, N, r, d, d, d, r, 0, 1, L);
  CALL("o,down B fwd", 0, 1, N, d, r, r, r, d, 0, 1, 2 * L);
  CALL("gate/up A fwd", 0, 1, N, 2 * r, d, d, d, 2 * r, 0, 1, L);
  CALL("gate,up B fwd", 0, 1, N, f, r, 2 * r, r, f, 0, 1, 2 * L);
  CALL("down A fwd", 0, 1, N, r, f, f, f, r, 0, 1, L);
  /* backward of the B's: dB += dout^T h_j (TN), dh_j = dout B_j (NN) */
  CALL("q,k,v dB", 1, 0, d, r, N, d, 3 * r, r, 1, 0, 3 * L);
  CALL("q,k,v dh", 0, 0, N, r, d, d, r, 3 * r, 0, 1, 3 * L);
  CALL("o,down dB", 1, 0, d, r, N, d, r, r, 1, 0, 2 * L);
  CALL("o,down dh", 0, 0, N, r, d, d, r, r, 0, 1, 2 * L);
  CALL("gate,up dB", 1, 0, f, r, N, f, 2 * r, r, 1, 0, 2 * L);
  CALL("gate,up dh", 0, 0, N, r, f, f, r, 2 * r, 0, 1, 2 * L);
  /* backward of the A's: dA += dH^T X (TN), dX = dH A (NN) */
  CALL("qkv dA", 1, 0, 3 * r, d, N, 3 * r, d, d, 1, 0, L);
  CALL("qkv dX", 0, 0, N, d, 3 * r, 3 * r, d, d, 0, 1, L);
  CALL("o dA", 1, 0, r, d, N, r, d, d, 1, 0, L);
  CALL("o dX", 0, 0, N, d, r, r, d, d, 0, 1, L);
  CALL("gate/up dA", 1, 0, 2 * r, d, N, 2 * r, d, d, 1, 0, L);
  CALL("gate/up dX", 0, 0, N, d, 2 * r, 2 * r, d, d, 0, 1, L);
  CALL("down dA", 1, 0, r, f, N, r, f, f, 1, 0, L);
  CALL("down dX", 0, 0, N, f, r, r, f, f, 0, 1, L);
  /* LM head: logits (fp32 for the softmax), its input and weight gradients */
  CALL("head fwd", 0, 1, N, V, d, d, d, V, 0, 0, 1);
  CALL("head dX", 0, 0, N, d, V, V, d, d, 0, 1, 1);
  CALL("head dW", 1, 0, V, d, N, V, d, d, 1, 0, 1);
#undef CALL
}

static void add_square(void) {
  config *c = &g_configs[g_nconfigs++];
  snprintf(c->name, sizeof c->name, "2048^3");
  add_call(c, "square", "2048^3", (shape){0, 0, 2048, 2048, 2048, 2048, 2048, 2048, 0, 1}, 1);
}

int parse_configs(const char *list) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", list);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (g_nconfigs >= (int)(sizeof g_configs / sizeof g_configs[0])) return -1;
    if (!strcmp(tok, "square")) {
      add_square();
      continue;
    }
    char *colon = strchr(tok, ':');
    if (!colon) return -1;
    *colon = '\0';
    char *end = NULL;
    const long T = strtol(colon + 1, &end, 10);
    if (*end || T < 1 || T > 65536) return -1;
    const model_dims *m = NULL;
    for (size_t i = 0; i < sizeof MODELS / sizeof MODELS[0]; i++)
      if (!strcmp(MODELS[i].name, tok)) m = &MODELS[i];
    if (!m) return -1;
    add_model(m, (int)T);
  }
  return g_nconfigs > 0 ? 0 : -1;
}

/* ---- timing ----------------------------------------------------------------- */

double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double flops(const shape *s) { return 2.0 * s->M * s->N * s->K; }

/* CPU time of every process (from /proc/stat) and of this one, in clock
 * ticks: their difference over an interval is what others kept busy. On
 * the shared 2-core machines a second process on a core wrecks 2-thread
 * GEMMs (threads wait for a preempted partner), so every row says how
 * loaded the machine was while it ran. */
static int cpu_ticks(long long *all, long long *self) {
  long long v[8] = {0};
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return -1;
  const int n = fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                       &v[6], &v[7]);
  fclose(f);
  if (n != 8) return -1;
  *all = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]; /* user nice system irq softirq steal */
  f = fopen("/proc/self/stat", "r");
  if (!f) return -1;
  char buf[1024];
  const size_t len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[len] = '\0';
  const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
  unsigned long long ut = 0, st = 0;
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) return -1;
  *self = (long long)(ut + st);
  return 0;
}


void load_start(load_mark *m) {
  if (cpu_ticks(&m->all, &m->self) != 0) m->all = -1;
  m->t = now_s();
}

/* Cores other processes kept busy since the mark (-1 when unknown). */
double load_other(const load_mark *m) {
  long long all, self;
  const double dt = now_s() - m->t;
  if (m->all < 0 || cpu_ticks(&all, &self) != 0 || dt <= 0) return -1;
  const double other = (double)((all - m->all) - (self - m->self)) / (double)sysconf(_SC_CLK_TCK) / dt;
  return other > 0 ? other : 0;
}

/* Waits up to max_s for a half-second window with less than 0.1 core of
 * other load. */
void wait_idle(double max_s) {
  const double t0 = now_s();
  while (now_s() - t0 < max_s) {
    load_mark m;
    load_start(&m);
    const struct timespec half = {0, 500000000};
    nanosleep(&half, NULL);
    const double o = load_other(&m);
    if (o >= 0 && o < 0.1) return;
  }
}


void *xmalloc(size_t bytes) { return boost_calloc(bytes ? bytes : 1, 1); }

void operands_init(operands *o, const shape *s) {
  o->s = s;
  o->a_n = (size_t)(s->ta ? s->K : s->M) * s->lda;
  o->b_n = (size_t)(s->tb ? s->N : s->K) * s->ldb;
  o->c_n = (size_t)s->M * s->ldc;
  o->A = xmalloc(o->a_n * 4);
  o->B = xmalloc(o->b_n * 4);
  o->C = xmalloc(o->c_n * 4);
  o->Cf = xmalloc(o->c_n * 4);
  o->A16 = xmalloc(o->a_n * 2);
  o->B16 = xmalloc(o->b_n * 2);
  o->C16 = xmalloc(o->c_n * 2);
  /* small periodic values: no denormals, no overflow however often beta = 1 adds */
  for (size_t i = 0; i < o->a_n; i++) o->A[i] = (float)(i % 7) * 0.01f - 0.03f;
  for (size_t i = 0; i < o->b_n; i++) o->B[i] = (float)(i % 5) * 0.01f - 0.02f;
  bf16_from_f32(o->A16, o->A, o->a_n);
  bf16_from_f32(o->B16, o->B, o->b_n);
}

void operands_free(operands *o) {
  boost_free(o->A);
  boost_free(o->B);
  boost_free(o->C);
  boost_free(o->Cf);
  boost_free(o->A16);
  boost_free(o->B16);
  boost_free(o->C16);
}

