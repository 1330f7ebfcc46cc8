/* Multi-rank correctness of the parallel trainer (run under mpirun).
 *
 *   parallel_check equiv --data SHARD [--preset P] [--steps N] [--batch B]
 *                        [--tol X] [--set KEY=VALUE]... --layout SPEC... [--repeat SPEC]
 *   parallel_check comm  --data SHARD [--set KEY=VALUE]... --case SPEC...
 *                        [--b B] [--s S] [--max-ratio X]
 *
 * equiv: every rank first trains the single-process reference on
 * MPI_COMM_SELF (the model is tiny), then each layout on the first
 * dp*tp*pp ranks of MPI_COMM_WORLD, with real trainer steps. Each rank
 * compares its own hyperslab (registry offset / local_shape) of every
 * parameter against the reference's global tensor, and the losses step by
 * step. Verdicts are combined with MPI_Allreduce; rank 0 prints one line per
 * check; the exit status is 1 when any check failed.
 *
 *   SPEC = dp=D,tp=T[,pp=P][,mode=M][,accum=A][,zero=Z][,recompute=R]
 *          (defaults pp=1 mode=auto accum=1 zero=0 recompute=none)
 *
 * The global batch is B*A*D sequences in both runs: the layout runs
 * batch_size=B per replica with grad_accum=A; the reference runs it as one
 * micro-batch (batch_size=B*A*D, "ref batch") and, when A*D > 1, also as
 * A*D accumulated micro-batches (batch_size=B, "ref accum"). Samples are
 * assigned by global index, so all of them see the same sequences.
 *
 * Tolerance (fp32): every loss and every parameter element satisfies
 *   |a - b| <= TOL * max(1, |b|),  TOL = 1e-5 (--tol)   (b = reference)
 * and every step's pre-clip gradient norm |a - b| <= TOL * |b| (it checks
 * that tp-replicated tensors are counted once; with the norm under
 * grad_clip a wrong norm would not show in the parameters).
 * Parameters start at ~0.02-0.15 and move ~lr per step, so a wrong
 * gradient shard shows up as ~1e-4..1e-3, far above TOL.
 * Also checked per layout: dp replicas hold bitwise-identical parameters, tp
 * ranks hold bitwise-identical copies of every tp-replicated tensor, the
 * hyperslabs cover every global element (pipeline stages hold disjoint
 * layers), the dp and pp traffic of a step is what check_traffic says, and
 * a layout with zero=1 or recompute != none matches its twin without them
 * (check_twin). --repeat SPEC: that layout run twice gives bitwise-identical
 * losses, parameters and AdamW moments, and prints a digest of them so a
 * script can compare two jobs.
 *
 * comm: for each case (preset=P,mode=M[,recompute=R]) one model_forward and
 * one model_backward of a b x s micro-batch on tp = world size, with
 * counters reset in between; asserts the counted tp all-reduce bytes equal
 * the formulas of docs/PARALLELISM.md exactly (recompute: see
 * check_comm_case), and (--max-ratio) that btp's per-layer bytes are at most
 * X times vanilla's for the same preset. */
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "config.h"
#include "grid.h"
#include "model.h"
#include "tensor.h"
#include "trainer.h"

static double TOL = 1e-5; /* --tol */
#define MAX_SETS 64
#define MAX_SPECS 32

static int g_rank, g_size;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  if (g_rank != 0) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  if (g_rank == 0) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "parallel_check: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
  }
  MPI_Finalize();
  exit(2);
}

/* ---- options ------------------------------------------------------------- */

typedef struct {
  int dp, tp, pp, accum, zero;
  char mode[16], recompute[16];
} layout;

typedef struct {
  const char *data, *preset;
  int steps, batch;
  char *sets[MAX_SETS];
  int nsets;
  layout layouts[MAX_SPECS];
  int nlayouts;
  layout repeat;
  int has_repeat;
  /* comm */
  char cases[MAX_SPECS][3][64]; /* preset, mode, recompute */
  int ncases;
  int b, s;
  double max_ratio;
} options;

static void parse_layout(const char *spec, layout *l) {
  memset(l, 0, sizeof *l);
  l->dp = l->tp = l->pp = l->accum = 1;
  snprintf(l->mode, sizeof l->mode, "auto");
  snprintf(l->recompute, sizeof l->recompute, "none");
  char buf[256];
  snprintf(buf, sizeof buf, "%s", spec);
  char *save = NULL;
  for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    if (!eq) die("bad layout '%s': expected key=value items", spec);
    *eq = '\0';
    const char *k = kv, *v = eq + 1;
    if (!strcmp(k, "dp")) l->dp = atoi(v);
    else if (!strcmp(k, "tp")) l->tp = atoi(v);
    else if (!strcmp(k, "pp")) l->pp = atoi(v);
    else if (!strcmp(k, "accum")) l->accum = atoi(v);
    else if (!strcmp(k, "zero")) l->zero = atoi(v);
    else if (!strcmp(k, "mode")) snprintf(l->mode, sizeof l->mode, "%s", v);
    else if (!strcmp(k, "recompute")) snprintf(l->recompute, sizeof l->recompute, "%s", v);
    else die("bad layout key '%s' in '%s' (dp, tp, pp, mode, accum, zero, recompute)", k, spec);
  }
  if (l->dp < 1 || l->tp < 1 || l->pp < 1 || l->accum < 1) die("bad layout '%s'", spec);
}

static void parse_case(const char *spec, char *preset, char *mode, char *recompute) {
  snprintf(preset, 64, "tiny");
  snprintf(mode, 64, "auto");
  snprintf(recompute, 64, "none");
  char buf[256];
  snprintf(buf, sizeof buf, "%s", spec);
  char *save = NULL;
  for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    if (!eq) die("bad case '%s'", spec);
    *eq = '\0';
    if (!strcmp(kv, "preset")) snprintf(preset, 64, "%s", eq + 1);
    else if (!strcmp(kv, "mode")) snprintf(mode, 64, "%s", eq + 1);
    else if (!strcmp(kv, "recompute")) snprintf(recompute, 64, "%s", eq + 1);
    else die("bad case key '%s' (preset, mode, recompute)", kv);
  }
}

static void format_layout(const layout *l, char *out, size_t n) {
  int k = snprintf(out, n, "dp=%d tp=%d pp=%d mode=%s accum=%d", l->dp, l->tp, l->pp, l->mode, l->accum);
  if (k > 0 && (size_t)k < n && (l->zero || strcmp(l->recompute, "none")))
    snprintf(out + k, n - (size_t)k, " zero=%d recompute=%s", l->zero, l->recompute);
}

/* ---- runs ---------------------------------------------------------------- */

typedef struct {
  train_config cfg; /* the trainer keeps a pointer to it */
  trainer *t;
  float *losses;
  double *gnorms;
  comm_ctx last; /* the counters of the last step */
} run;

/* Build the config of one run: user sets, then what the check fixes. */
static int make_config(const options *o, const char *preset, const layout *l, int batch, int steps, train_config *cfg,
                       char *err, size_t errlen) {
  char fixed[14][CONFIG_STR + 64];
  int nf = 0;
  snprintf(fixed[nf++], sizeof fixed[0], "model.preset=%s", preset);
  snprintf(fixed[nf++], sizeof fixed[0], "data.train=%s", o->data);
  snprintf(fixed[nf++], sizeof fixed[0], "train.batch_size=%d", batch);
  snprintf(fixed[nf++], sizeof fixed[0], "train.grad_accum=%d", l->accum);
  snprintf(fixed[nf++], sizeof fixed[0], "train.steps=%d", steps);
  snprintf(fixed[nf++], sizeof fixed[0], "train.threads=1");
  snprintf(fixed[nf++], sizeof fixed[0], "parallel.dp=%d", l->dp);
  snprintf(fixed[nf++], sizeof fixed[0], "parallel.tp=%d", l->tp);
  snprintf(fixed[nf++], sizeof fixed[0], "parallel.pp=%d", l->pp);
  snprintf(fixed[nf++], sizeof fixed[0], "parallel.tp_mode=%s", l->mode);
  snprintf(fixed[nf++], sizeof fixed[0], "parallel.zero=%d", l->zero);
  snprintf(fixed[nf++], sizeof fixed[0], "parallel.recompute=%s", l->recompute);
  char *sets[MAX_SETS + 14];
  int n = 0;
  sets[n++] = fixed[0]; /* preset first; user keys override the preset, fixed keys override the user */
  for (int i = 0; i < o->nsets; i++) sets[n++] = o->sets[i];
  for (int i = 1; i < nf; i++) sets[n++] = fixed[i];
  return config_resolve(cfg, NULL, n, sets, err, errlen);
}

/* Train `steps` steps on comm; NULL (message on rank 0 of comm) on error. */
static run *train(const options *o, MPI_Comm comm, const layout *l, int batch) {
  run *r = calloc(1, sizeof *r);
  char err[1024];
  int crank;
  MPI_Comm_rank(comm, &crank);
  if (make_config(o, o->preset, l, batch, o->steps, &r->cfg, err, sizeof err) != 0 ||
      !(r->t = trainer_create(&r->cfg, comm, err, sizeof err))) {
    if (crank == 0) fprintf(stderr, "parallel_check: %s\n", err);
    free(r);
    return NULL;
  }
  r->losses = calloc((size_t)o->steps, sizeof *r->losses);
  r->gnorms = calloc((size_t)o->steps, sizeof *r->gnorms);
  comm_ctx *c = trainer_comm(r->t);
  for (int s = 0; s < o->steps; s++) {
    comm_reset_counts(c);
    r->losses[s] = trainer_step(r->t, &r->gnorms[s]);
  }
  r->last = *c;
  return r;
}

static void run_free(run *r) {
  if (!r) return;
  trainer_destroy(r->t);
  free(r->losses);
  free(r->gnorms);
  free(r);
}

/* References on MPI_COMM_SELF, cached by (global batch, style). */
typedef struct {
  int global, accum_style;
  run *r;
} ref_entry;
static ref_entry refs[16];
static int nrefs;

static run *reference(const options *o, int global, int accum_style) {
  for (int i = 0; i < nrefs; i++)
    if (refs[i].global == global && refs[i].accum_style == accum_style) return refs[i].r;
  layout single;
  parse_layout("dp=1,tp=1", &single);
  single.accum = accum_style ? global / o->batch : 1;
  run *r = train(o, MPI_COMM_SELF, &single, accum_style ? o->batch : global);
  if (!r) die("the single-process reference run failed");
  refs[nrefs++] = (ref_entry){global, accum_style, r};
  return r;
}

/* ---- comparisons --------------------------------------------------------- */

typedef struct {
  double loss_err, gnorm_rel, param_err; /* worst |a-b|/max(1,|b|) */
  char worst_tensor[TENSOR_NAME_MAX];
  int64_t covered;   /* global elements owned by this rank (dp_rank 0 only, replicated: tp_rank 0) */
  int64_t mismatch;  /* structural problems (missing tensor, shape) */
} cmp_result;

/* This rank's hyperslab of every parameter against the reference. */
static void compare_params(const model *par, const model *ref, int owner, cmp_result *c) {
  for (int i = 0; i < par->reg.count; i++) {
    const tensor_desc *t = &par->reg.tensors[i];
    const int j = registry_find(&ref->reg, t->name);
    if (j < 0) {
      fprintf(stderr, "parallel_check: rank %d: tensor %s is not in the reference\n", g_rank, t->name);
      c->mismatch++;
      continue;
    }
    const tensor_desc *rt = &ref->reg.tensors[j];
    int same = rt->ndim == t->ndim;
    for (int d = 0; same && d < t->ndim; d++) same = rt->shape[d] == t->shape[d];
    if (!same) {
      fprintf(stderr, "parallel_check: rank %d: tensor %s has another global shape than the reference\n", g_rank,
              t->name);
      c->mismatch++;
      continue;
    }
    const float *a = registry_data(&par->reg, TENSOR_PARAMS, i), *b = registry_data(&ref->reg, TENSOR_PARAMS, j);
    int64_t idx[TENSOR_MAX_DIMS] = {0};
    for (size_t k = 0; k < t->numel; k++) {
      int64_t g = 0;
      for (int d = 0; d < t->ndim; d++) g = g * t->shape[d] + t->offset[d] + idx[d];
      const double bv = b[g], e = fabs((double)a[k] - bv) / fmax(1.0, fabs(bv));
      if (!(e <= c->param_err)) { /* also catches NaN */
        c->param_err = isnan(e) ? INFINITY : e;
        snprintf(c->worst_tensor, sizeof c->worst_tensor, "%s", t->name);
      }
      for (int d = t->ndim - 1; d >= 0; d--) {
        if (++idx[d] < t->local_shape[d]) break;
        idx[d] = 0;
      }
    }
    if (owner && (t->split_dim >= 0 || par->tp_rank == 0)) c->covered += (int64_t)t->numel;
  }
}

static void compare_losses(const run *a, const run *b, int steps, cmp_result *c) {
  for (int s = 0; s < steps; s++) {
    double e = fabs((double)a->losses[s] - b->losses[s]) / fmax(1.0, fabs((double)b->losses[s]));
    if (!(e <= c->loss_err)) c->loss_err = isnan(e) ? INFINITY : e;
    e = fabs(a->gnorms[s] - b->gnorms[s]) / fmax(1e-30, fabs(b->gnorms[s]));
    if (!(e <= c->gnorm_rel)) c->gnorm_rel = isnan(e) ? INFINITY : e;
  }
}

/* Worst-of over world (ranks outside a layout pass zeros). */
static void reduce_result(cmp_result *c) {
  double mx[3] = {c->loss_err, c->gnorm_rel, c->param_err};
  MPI_Allreduce(MPI_IN_PLACE, mx, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  /* the rank holding the worst element names its tensor */
  struct {
    double v;
    int rank;
  } in = {c->param_err, g_rank}, out;
  MPI_Allreduce(&in, &out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
  MPI_Bcast(c->worst_tensor, TENSOR_NAME_MAX, MPI_CHAR, out.rank, MPI_COMM_WORLD);
  int64_t sm[2] = {c->covered, c->mismatch};
  MPI_Allreduce(MPI_IN_PLACE, sm, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  c->loss_err = mx[0], c->gnorm_rel = mx[1], c->param_err = mx[2];
  c->covered = sm[0], c->mismatch = sm[1];
}

static int all_ok(int ok) {
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return ok;
}

/* Bitwise agreement of a buffer with the root of comm; 1 when identical. */
static int same_as_root(MPI_Comm comm, const float *buf, size_t n) {
  int size;
  MPI_Comm_size(comm, &size);
  if (size == 1 || n == 0) return 1;
  float *root = malloc(n * sizeof *root);
  memcpy(root, buf, n * sizeof *root);
  MPI_Bcast(root, (int)n, MPI_FLOAT, 0, comm);
  int ok = memcmp(root, buf, n * sizeof *root) == 0;
  free(root);
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
  return ok;
}

/* dp replicas bitwise equal; tp-replicated tensors bitwise equal over tp. */
static int replicas_consistent(trainer *t) {
  const process_grid *g = trainer_grid(t);
  const model *m = trainer_model(t);
  int ok = same_as_root(g->dp_comm, m->reg.arena[TENSOR_PARAMS], m->reg.numel);
  for (int i = 0; i < m->reg.count; i++)
    if (m->reg.tensors[i].split_dim < 0)
      ok &= same_as_root(g->tp_comm, registry_data(&m->reg, TENSOR_PARAMS, i), m->reg.tensors[i].numel);
  return ok;
}

static int n_failed;

static void verdict(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Collective over world: the verdict is the worst of every rank's ok. */
static void verdict(int ok, const char *fmt, ...) {
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!ok) n_failed++;
  if (g_rank != 0) return;
  va_list ap;
  va_start(ap, fmt);
  printf("%s ", ok ? "PASS" : "FAIL");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
}

/* Sub-communicator of the first n world ranks (MPI_COMM_NULL elsewhere). */
static MPI_Comm first_ranks(int n) {
  MPI_Comm c;
  MPI_Comm_split(MPI_COMM_WORLD, g_rank < n ? 0 : MPI_UNDEFINED, g_rank, &c);
  return c;
}

/* The data-parallel and pipeline traffic of the last step (bytes):
 *   dp, without ZeRO: one all-reduce of the local gradient arena (numel * 4);
 *   dp, ZeRO-1: reduce-scatter of the arena (counted numel * 4) and
 *     all-gather of this rank's parameter chunk (numel / dp * 4);
 *   pp: each stage boundary carries, per micro-batch, the [B*T, d_res]
 *     activation forward and its gradient backward; a rank counts what it
 *     sends and receives: 2 * M * B*T*d_res * 4 per neighbouring stage. */
static void check_traffic(const options *o, const layout *l, const char *ls, const run *r) {
  uint64_t got[4] = {0, 0, 0, 0}, want[4] = {0, 0, 0, 0}; /* dp allreduce, reduce_scatter, allgather; pp */
  if (r) {
    const model *m = trainer_model(r->t);
    const process_grid *g = trainer_grid(r->t);
    const uint64_t arena = (uint64_t)m->reg.numel * sizeof(float);
    got[0] = r->last.count[COMM_DP][COMM_ALLREDUCE].bytes;
    got[1] = r->last.count[COMM_DP][COMM_REDUCE_SCATTER].bytes;
    got[2] = r->last.count[COMM_DP][COMM_ALLGATHER].bytes;
    got[3] = r->last.count[COMM_PP][COMM_SENDRECV].bytes;
    if (l->dp > 1 && !l->zero) want[0] = arena;
    if (l->dp > 1 && l->zero) want[1] = arena, want[2] = arena / (uint64_t)l->dp;
    const uint64_t act = (uint64_t)o->batch * (uint64_t)m->T * (uint64_t)m->d_res * sizeof(float);
    const int neighbours = (g->pp_rank > 0) + (g->pp_rank < g->pp - 1);
    want[3] = (uint64_t)neighbours * 2 * (uint64_t)l->accum * act;
  }
  int ok = 1;
  for (int k = 0; k < 4; k++) ok &= got[k] == want[k];
  /* ZeRO-1 keeps 1/dp of each moment arena per replica */
  size_t mom = 0, mom_want = 0;
  if (r) {
    const tensor_registry *reg = &trainer_model(r->t)->reg;
    mom = reg->mom_end - reg->mom_begin;
    mom_want = l->zero ? reg->numel / (size_t)l->dp : reg->numel;
  }
  verdict(mom == mom_want, "moment memory %s %s (rank 0): %zu floats per moment arena (want %zu%s)", o->preset, ls, mom,
          mom_want, l->zero ? ", 1/dp of the arena" : "");
  verdict(ok,
          "traffic %s %s (rank 0): dp all-reduce %llu (want %llu), reduce-scatter %llu (want %llu), all-gather %llu "
          "(want %llu), pp send+recv %llu (want %llu) bytes/step",
          o->preset, ls, (unsigned long long)got[0], (unsigned long long)want[0], (unsigned long long)got[1],
          (unsigned long long)want[1], (unsigned long long)got[2], (unsigned long long)want[2],
          (unsigned long long)got[3], (unsigned long long)want[3]);
}

/* A layout with ZeRO-1 or activation recompute against the same layout
 * without them (same sharding): losses and every local parameter within
 * TOL. Recompute alone re-runs the same operations on the same inputs, so it
 * must be bitwise identical; with ZeRO-1 (reduce-scatter instead of
 * all-reduce) bitwise equality is reported, not required. */
static void check_twin(const options *o, const layout *l, const char *ls, const run *r, MPI_Comm comm) {
  layout base = *l;
  base.zero = 0;
  snprintf(base.recompute, sizeof base.recompute, "none");
  cmp_result c = {0};
  int created = 1, bitwise = 1;
  if (comm != MPI_COMM_NULL) {
    run *b = train(o, comm, &base, o->batch); /* collective over comm only */
    created = b != NULL;
    if (b && r) {
      compare_losses(r, b, o->steps, &c);
      const model *ma = trainer_model(r->t), *mb = trainer_model(b->t);
      for (int i = 0; i < ma->reg.count; i++) {
        const tensor_desc *t = &ma->reg.tensors[i];
        const float *x = registry_data(&ma->reg, TENSOR_PARAMS, i), *y = registry_data(&mb->reg, TENSOR_PARAMS, i);
        for (size_t k = 0; k < t->numel; k++) {
          const double e = fabs((double)x[k] - y[k]) / fmax(1.0, fabs((double)y[k]));
          if (!(e <= c.param_err)) {
            c.param_err = isnan(e) ? INFINITY : e;
            snprintf(c.worst_tensor, sizeof c.worst_tensor, "%s", t->name);
          }
        }
      }
      bitwise = memcmp(r->losses, b->losses, (size_t)o->steps * sizeof(float)) == 0 &&
                memcmp(ma->reg.arena[TENSOR_PARAMS], mb->reg.arena[TENSOR_PARAMS], ma->reg.numel * sizeof(float)) == 0;
    }
    run_free(b);
  }
  reduce_result(&c);
  bitwise = all_ok(bitwise);
  created = all_ok(created);
  const int need_bitwise = !l->zero;
  verdict(created && c.loss_err <= TOL && c.gnorm_rel <= TOL && c.param_err <= TOL && (bitwise || !need_bitwise),
          "twin %s %s vs zero=0 recompute=none: losses max err %.2e, grad norms max rel err %.2e, params max err "
          "%.2e (%s), %s",
          o->preset, ls, c.loss_err, c.gnorm_rel, c.param_err, c.worst_tensor[0] ? c.worst_tensor : "-",
          bitwise ? "bitwise identical" : need_bitwise ? "NOT bitwise identical (required)" : "not bitwise identical");
}

static void check_layout(const options *o, const layout *l) {
  char ls[128];
  format_layout(l, ls, sizeof ls);
  const int n = l->dp * l->tp * l->pp;
  if (n > g_size) {
    verdict(0, "equiv %s %s: needs %d ranks, have %d", o->preset, ls, n, g_size);
    return;
  }
  const int global = o->batch * l->accum * l->dp;
  run *ref_batch = reference(o, global, 0), *ref_accum = global > o->batch ? reference(o, global, 1) : NULL;
  const int64_t total = model_num_params(trainer_model(ref_batch->t));

  MPI_Comm comm = first_ranks(n);
  run *r = NULL;
  int created = 1;
  if (comm != MPI_COMM_NULL) created = (r = train(o, comm, l, o->batch)) != NULL;
  if (!all_ok(created)) {
    verdict(0, "equiv %s %s: the parallel run could not start (message above)", o->preset, ls);
    if (r) run_free(r);
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    return;
  }
  for (int k = 0; k < (ref_accum ? 2 : 1); k++) {
    const run *ref = k ? ref_accum : ref_batch;
    cmp_result c = {0};
    if (r) {
      const process_grid *g = trainer_grid(r->t);
      compare_losses(r, ref, o->steps, &c);
      compare_params(trainer_model(r->t), trainer_model(ref->t), g->dp_rank == 0, &c);
    }
    reduce_result(&c);
    const int ok =
        c.loss_err <= TOL && c.gnorm_rel <= TOL && c.param_err <= TOL && c.mismatch == 0 && c.covered == total;
    verdict(ok,
            "equiv %s %s vs ref %s (batch %d x accum %d): %d losses max err %.2e, grad norms max rel err %.2e, "
            "params max err %.2e (%s), %lld/%lld elements covered (tol %.0e)",
            o->preset, ls, k ? "accum" : "batch", k ? o->batch : global, k ? global / o->batch : 1, o->steps,
            c.loss_err, c.gnorm_rel, c.param_err, c.worst_tensor[0] ? c.worst_tensor : "-", (long long)c.covered,
            (long long)total, TOL);
  }
  /* Replica consistency. */
  verdict(r ? replicas_consistent(r->t) : 1,
          "replicas %s %s: dp replicas and tp-replicated tensors bitwise identical", o->preset, ls);
  check_traffic(o, l, ls, r);
  if (l->zero || strcmp(l->recompute, "none")) check_twin(o, l, ls, r, comm);
  run_free(r);
  if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
}

/* Floats of one arena (ZeRO-1 moment arenas hold one chunk). */
static size_t arena_floats(const tensor_registry *reg, int cat) {
  return cat == TENSOR_ADAM_M || cat == TENSOR_ADAM_V ? reg->mom_end - reg->mom_begin : reg->numel;
}

static int bitwise_equal_runs(const run *a, const run *b, int steps) {
  if (memcmp(a->losses, b->losses, (size_t)steps * sizeof(float)) != 0) return 0;
  const model *ma = trainer_model(a->t), *mb = trainer_model(b->t);
  if (ma->reg.numel != mb->reg.numel) return 0;
  for (int cat = TENSOR_PARAMS; cat < TENSOR_NUM_CATEGORIES; cat++) {
    if (cat == TENSOR_GRADS) continue;
    if (arena_floats(&ma->reg, cat) != arena_floats(&mb->reg, cat) ||
        memcmp(ma->reg.arena[cat], mb->reg.arena[cat], arena_floats(&ma->reg, cat) * sizeof(float)) != 0)
      return 0;
  }
  return 1;
}

/* FNV-1a over this run's losses, parameters and AdamW moments, combined
 * over the ranks of comm in rank order (same value on every rank of comm). */
static uint64_t run_digest(const run *r, int steps, MPI_Comm comm) {
  uint64_t h = 1469598103934665603ull;
#define FNV(ptr, bytes)                                                       \
  do {                                                                        \
    const unsigned char *p_ = (const unsigned char *)(ptr);                   \
    for (size_t i_ = 0; i_ < (bytes); i_++) h = (h ^ p_[i_]) * 1099511628211ull; \
  } while (0)
  FNV(r->losses, (size_t)steps * sizeof(float));
  const model *m = trainer_model(r->t);
  for (int cat = TENSOR_PARAMS; cat < TENSOR_NUM_CATEGORIES; cat++)
    if (cat != TENSOR_GRADS) FNV(m->reg.arena[cat], arena_floats(&m->reg, cat) * sizeof(float));
  int size;
  MPI_Comm_size(comm, &size);
  uint64_t *all = malloc((size_t)size * sizeof *all), out = 1469598103934665603ull;
  MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, comm);
  h = out;
  FNV(all, (size_t)size * sizeof *all);
#undef FNV
  free(all);
  return h;
}

static void check_repeat(const options *o, const layout *l) {
  char ls[128];
  format_layout(l, ls, sizeof ls);
  const int n = l->dp * l->tp * l->pp;
  if (n > g_size) {
    verdict(0, "bitwise %s %s: needs %d ranks, have %d", o->preset, ls, n, g_size);
    return;
  }
  MPI_Comm comm = first_ranks(n);
  int ok = 1;
  uint64_t digest = 0;
  if (comm != MPI_COMM_NULL) {
    run *a = train(o, comm, l, o->batch);
    run *b = a ? train(o, comm, l, o->batch) : NULL;
    ok = a && b && bitwise_equal_runs(a, b, o->steps);
    if (a) digest = run_digest(a, o->steps, comm);
    run_free(a);
    run_free(b);
    MPI_Comm_free(&comm);
  }
  /* The digest lets a script compare runs across processes too. */
  verdict(ok, "bitwise %s %s: two runs give identical losses, parameters and AdamW moments (digest %016llx)", o->preset,
          ls, (unsigned long long)digest);
}

/* ---- communication volume ------------------------------------------------ */

typedef struct {
  uint64_t fwd, bwd; /* per layer, bytes */
} layer_bytes;

/* Expected tp all-reduce floats (see docs/PARALLELISM.md). N = b*s. */
static void expected_floats(const model *m, uint64_t N, uint64_t *fwd_layer, uint64_t *bwd_layer, uint64_t *fwd_head,
                            uint64_t *bwd_head) {
  const model_config *c = &m->cfg;
  const uint64_t d = (uint64_t)c->d_model, F = (uint64_t)c->ffn, ra = (uint64_t)c->rank_attn,
                 rm = (uint64_t)c->rank_mlp;
  switch (m->mode) {
  case TP_BTP: /* q,k,v,o at r_attn; gate,up,down at r_mlp; 2 fused norm scalars */
    *fwd_layer = N * (4 * ra + 3 * rm) + 2 * N;
    *bwd_layer = N * (4 * ra + 3 * rm);
    break;
  case TP_VANILLA: /* fwd: every projection's full-width output; bwd: each group's input gradient */
    *fwd_layer = N * (5 * d + 2 * F);
    *bwd_layer = N * (3 * d + F);
    break;
  case TP_MEGATRON: /* fwd: o and down outputs; bwd: qkv's and gate/up's input gradients */
    *fwd_layer = 2 * N * d;
    *bwd_layer = 2 * N * d;
    break;
  default: *fwd_layer = *bwd_layer = 0;
  }
  /* head: parallel cross-entropy (max; sum of exp and target logit) forward,
   * the replicated final-norm output's gradient backward */
  *fwd_head = 3 * N;
  *bwd_head = N * d;
}

typedef struct {
  char preset[64];
  int mode, recompute;
  double fwd_layer, bwd_layer;
} comm_record;

static void check_comm_case(const options *o, const char *preset, const char *mode, const char *recompute,
                            comm_record *rec) {
  train_config *cfg = calloc(1, sizeof *cfg);
  char err[1024], what[160];
  const int rc = strcmp(recompute, "none") != 0;
  snprintf(what, sizeof what, "comm %s mode=%s%s%s tp=%d b=%d s=%d", preset, mode, rc ? " recompute=" : "",
           rc ? recompute : "", g_size, o->b, o->s);
  options oo = *o;
  char seq[64];
  snprintf(seq, sizeof seq, "model.seq_len=%d", o->s);
  oo.sets[oo.nsets++] = seq;
  trainer *t = NULL;
  layout l;
  parse_layout("dp=1", &l);
  l.tp = g_size;
  snprintf(l.mode, sizeof l.mode, "%s", mode);
  snprintf(l.recompute, sizeof l.recompute, "%s", recompute);
  if (make_config(&oo, preset, &l, o->b, 1, cfg, err, sizeof err) != 0 ||
      !(t = trainer_create(cfg, MPI_COMM_WORLD, err, sizeof err))) {
    verdict(0, "%s: cannot start: %s", what, err);
    free(cfg);
    return;
  }
  model *m = trainer_model(t);
  comm_ctx *c = trainer_comm(t);
  const int B = o->b, T = o->s, N = B * T, L = m->cfg.n_layers;
  int32_t *tok = malloc((size_t)N * sizeof *tok), *tgt = malloc((size_t)N * sizeof *tgt);
  for (int i = 0; i < N; i++) tok[i] = (i * 37 + 11) % 257, tgt[i] = (i * 53 + 7) % 257;

  comm_reset_counts(c);
  model_forward(m, tok, tgt, B, T);
  const comm_ctx fwd = *c;
  comm_reset_counts(c);
  model_backward(m, tok, tgt, B, T, 1.0f / N);
  const comm_ctx bwd = *c;

  uint64_t fl, bl, fh, bh;
  expected_floats(m, (uint64_t)N, &fl, &bl, &fh, &bh);
  /* Recompute re-runs each layer's forward in backward: full repeats its
   * collectives; lowrank reuses the saved bottleneck, which under btp skips
   * the A GEMM and its all-reduce (no extra collective at all), while
   * vanilla still all-reduces the B outputs and full-rank layers have no
   * bottleneck to reuse. */
  const uint64_t bl_none = bl;
  if (m->recompute == RECOMPUTE_FULL || (m->recompute == RECOMPUTE_LOWRANK && m->mode != TP_BTP)) bl += fl;
  const uint64_t f_got = fwd.count[COMM_TP][COMM_ALLREDUCE].bytes, b_got = bwd.count[COMM_TP][COMM_ALLREDUCE].bytes;
  const double f_layer = ((double)f_got - 4.0 * fh) / L, b_layer = ((double)b_got - 4.0 * bh) / L;
  verdict(f_got == 4 * (L * fl + fh),
          "%s forward: tp all-reduce %llu bytes = %d layers x %.0f + head %llu; want per layer %llu (%s)", what,
          (unsigned long long)f_got, L, f_layer, (unsigned long long)(4 * fh), (unsigned long long)(4 * fl),
          m->mode == TP_BTP       ? "4 B x (7 b s r + 2 b s)"
          : m->mode == TP_VANILLA ? "4 B x b s (5d + 2 ffn)"
                                  : "4 B x 2 b s d");
  verdict(b_got == 4 * (L * bl + bh),
          "%s backward: tp all-reduce %llu bytes = %d layers x %.0f + head %llu; want per layer %llu (%s)", what,
          (unsigned long long)b_got, L, b_layer, (unsigned long long)(4 * bh), (unsigned long long)(4 * bl),
          bl != bl_none           ? "the forward's again (recompute) + the backward's"
          : m->mode == TP_BTP     ? "4 B x 7 b s r"
          : m->mode == TP_VANILLA ? "4 B x b s (3d + ffn)"
                                  : "4 B x 2 b s d");
  /* btp: one collective per norm+projection group (4 per layer) plus the
   * head's two; the head input gathered once (bytes = this rank's shard). */
  const uint64_t gat = fwd.count[COMM_TP][COMM_ALLGATHER].bytes, calls = fwd.count[COMM_TP][COMM_ALLREDUCE].calls,
                 bcalls = bwd.count[COMM_TP][COMM_ALLREDUCE].calls;
  const uint64_t gat_want = m->mode == TP_BTP ? 4ull * N * (uint64_t)(m->cfg.d_model / g_size) : 0;
  int ok = gat == gat_want && gat + bwd.count[COMM_TP][COMM_ALLGATHER].bytes == gat_want;
  const int btp_plain = m->mode == TP_BTP && m->recompute != RECOMPUTE_FULL;
  if (m->mode == TP_BTP) ok &= calls == 4ull * L + 2;
  if (btp_plain) ok &= bcalls == 4ull * L + 1;
  uint64_t other = 0;
  for (int g = COMM_DP; g < COMM_NUM_GROUPS; g++)
    for (int k = 0; k < COMM_NUM_KINDS; k++) other += fwd.count[g][k].bytes + bwd.count[g][k].bytes;
  for (int k = COMM_ALLGATHER + 1; k < COMM_NUM_KINDS; k++)
    other += fwd.count[COMM_TP][k].bytes + bwd.count[COMM_TP][k].bytes;
  ok &= other == 0;
  verdict(ok,
          "%s: all-gather %llu bytes (want %llu), all-reduce calls forward %llu%s backward %llu%s, %llu bytes "
          "elsewhere (want 0); activations kept %.1f KiB/layer",
          what, (unsigned long long)gat, (unsigned long long)gat_want, (unsigned long long)calls,
          m->mode == TP_BTP ? " (want 4/layer + 2)" : "", (unsigned long long)bcalls,
          btp_plain ? " (want 4/layer + 1)" : "", (unsigned long long)other, (double)m->act_bytes_per_layer / 1024);
  snprintf(rec->preset, sizeof rec->preset, "%s", preset);
  rec->mode = m->mode;
  rec->recompute = m->recompute;
  rec->fwd_layer = f_layer;
  rec->bwd_layer = b_layer;
  free(tok);
  free(tgt);
  trainer_destroy(t);
  free(cfg);
}

static void check_comm(const options *o) {
  comm_record rec[MAX_SPECS];
  for (int i = 0; i < o->ncases; i++) check_comm_case(o, o->cases[i][0], o->cases[i][1], o->cases[i][2], &rec[i]);
  if (o->max_ratio <= 0) return;
  for (int i = 0; i < o->ncases; i++)
    for (int j = 0; j < o->ncases; j++) {
      if (rec[i].mode != TP_BTP || rec[j].mode != TP_VANILLA || strcmp(rec[i].preset, rec[j].preset) ||
          rec[i].recompute != RECOMPUTE_NONE || rec[j].recompute != RECOMPUTE_NONE)
        continue;
      const double rf = rec[i].fwd_layer / rec[j].fwd_layer, rb = rec[i].bwd_layer / rec[j].bwd_layer,
                   rt = (rec[i].fwd_layer + rec[i].bwd_layer) / (rec[j].fwd_layer + rec[j].bwd_layer);
      verdict(rf <= o->max_ratio && rt <= o->max_ratio,
              "ratio %s btp/vanilla per layer: forward %.3f, forward+backward %.3f (want <= %.2f); backward alone %.3f",
              rec[i].preset, rf, rt, o->max_ratio, rb);
    }
}

/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (argc < 2) die("usage: parallel_check equiv|comm --data SHARD ... (see the source)");
  const char *cmd = argv[1];
  options o = {.preset = "tiny", .steps = 6, .batch = 2, .b = 1, .s = 8};
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) die("missing value after %s", a);
    i++;
    if (!strcmp(a, "--data")) o.data = v;
    else if (!strcmp(a, "--preset")) o.preset = v;
    else if (!strcmp(a, "--steps")) o.steps = atoi(v);
    else if (!strcmp(a, "--batch")) o.batch = atoi(v);
    else if (!strcmp(a, "--b")) o.b = atoi(v);
    else if (!strcmp(a, "--s")) o.s = atoi(v);
    else if (!strcmp(a, "--max-ratio")) o.max_ratio = atof(v);
    else if (!strcmp(a, "--tol")) TOL = atof(v);
    else if (!strcmp(a, "--set") && o.nsets < MAX_SETS - 1) o.sets[o.nsets++] = argv[i];
    else if (!strcmp(a, "--layout") && o.nlayouts < MAX_SPECS) parse_layout(v, &o.layouts[o.nlayouts++]);
    else if (!strcmp(a, "--repeat")) parse_layout(v, &o.repeat), o.has_repeat = 1;
    else if (!strcmp(a, "--case") && o.ncases < MAX_SPECS) {
      parse_case(v, o.cases[o.ncases][0], o.cases[o.ncases][1], o.cases[o.ncases][2]);
      o.ncases++;
    } else die("unknown argument %s", a);
  }
  if (!o.data) die("--data SHARD is required");
  if (o.steps < 1 || o.batch < 1 || o.b < 1 || o.s < 1) die("bad --steps/--batch/--b/--s");

  if (!strcmp(cmd, "equiv")) {
    if (!o.nlayouts && !o.has_repeat) die("equiv needs --layout or --repeat");
    for (int i = 0; i < o.nlayouts; i++) check_layout(&o, &o.layouts[i]);
    if (o.has_repeat) check_repeat(&o, &o.repeat);
    for (int i = 0; i < nrefs; i++) run_free(refs[i].r);
  } else if (!strcmp(cmd, "comm")) {
    if (!o.ncases) die("comm needs --case");
    check_comm(&o);
  } else {
    die("unknown command '%s' (equiv, comm)", cmd);
  }
  say("%s: %d check(s) failed\n", n_failed ? "FAILED" : "OK", n_failed);
  MPI_Finalize();
  return n_failed ? 1 : 0;
}
