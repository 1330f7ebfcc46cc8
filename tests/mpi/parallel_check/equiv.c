/* parallel_check equiv: each layout against the single-process reference
 * (parameters, losses, gradient norms), dp/tp consistency, coverage, dp and
 * pp traffic, ZeRO/recompute twins; --repeat: two runs bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grid.h"
#include "model.h"
#include "parallel_check.h"
#include "tensor.h"

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
    const float *a = tensor_at(&par->reg, par->w.params, i), *b = tensor_at(&ref->reg, ref->w.params, j);
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
  int ok = same_as_root(g->dp_comm, m->w.params, m->reg.numel);
  for (int i = 0; i < m->reg.count; i++)
    if (m->reg.tensors[i].split_dim < 0)
      ok &= same_as_root(g->tp_comm, tensor_at(&m->reg, m->w.params, i), m->reg.tensors[i].numel);
  return ok;
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
    const uint64_t act = (uint64_t)o->batch * (uint64_t)trainer_acts(r->t)->T * (uint64_t)m->d_res * sizeof(float);
    const int neighbours = (g->pp_rank > 0) + (g->pp_rank < g->pp - 1);
    want[3] = (uint64_t)neighbours * 2 * (uint64_t)l->accum * act;
  }
  int ok = 1;
  for (int k = 0; k < 4; k++) ok &= got[k] == want[k];
  /* ZeRO-1 keeps 1/dp of each moment arena per replica */
  size_t mom = 0, mom_want = 0;
  if (r) {
    const tensor_store *st = &trainer_train_state(r->t)->store;
    mom = st->mom_end - st->mom_begin;
    mom_want = l->zero ? st->reg->numel / (size_t)l->dp : st->reg->numel;
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
        const float *x = tensor_at(&ma->reg, ma->w.params, i), *y = tensor_at(&mb->reg, mb->w.params, i);
        for (size_t k = 0; k < t->numel; k++) {
          const double e = fabs((double)x[k] - y[k]) / fmax(1.0, fabs((double)y[k]));
          if (!(e <= c.param_err)) {
            c.param_err = isnan(e) ? INFINITY : e;
            snprintf(c.worst_tensor, sizeof c.worst_tensor, "%s", t->name);
          }
        }
      }
      bitwise = memcmp(r->losses, b->losses, (size_t)o->steps * sizeof(float)) == 0 &&
                memcmp(ma->w.params, mb->w.params, ma->reg.numel * sizeof(float)) == 0;
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

/* The layout's text into ls and its rank count; 0 (a failed verdict
 * named `what`) when the world is too small for it. Collective. */
static int layout_ranks(const options *o, const layout *l, const char *what, char *ls, size_t lsn) {
  format_layout(l, ls, lsn);
  const int n = l->dp * l->tp * l->pp;
  if (n <= g_size) return n;
  verdict(0, "%s %s %s: needs %d ranks, have %d", what, o->preset, ls, n, g_size);
  return 0;
}

void check_layout(const options *o, const layout *l) {
  char ls[128];
  const int n = layout_ranks(o, l, "equiv", ls, sizeof ls);
  if (!n) return;
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
static size_t arena_floats(const tensor_store *st, int cat) {
  return cat == TENSOR_ADAM_M || cat == TENSOR_ADAM_V ? st->mom_end - st->mom_begin : st->reg->numel;
}

static int bitwise_equal_runs(const run *a, const run *b, int steps) {
  if (memcmp(a->losses, b->losses, (size_t)steps * sizeof(float)) != 0) return 0;
  const tensor_store *ma = &trainer_train_state(a->t)->store, *mb = &trainer_train_state(b->t)->store;
  if (ma->reg->numel != mb->reg->numel) return 0;
  for (int cat = TENSOR_PARAMS; cat < TENSOR_NUM_CATEGORIES; cat++) {
    if (cat == TENSOR_GRADS) continue;
    if (arena_floats(ma, cat) != arena_floats(mb, cat) ||
        memcmp(ma->arena[cat], mb->arena[cat], arena_floats(ma, cat) * sizeof(float)) != 0)
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
  const tensor_store *st = &trainer_train_state(r->t)->store;
  for (int cat = TENSOR_PARAMS; cat < TENSOR_NUM_CATEGORIES; cat++)
    if (cat != TENSOR_GRADS) FNV(st->arena[cat], arena_floats(st, cat) * sizeof(float));
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

void check_repeat(const options *o, const layout *l) {
  char ls[128];
  const int n = layout_ranks(o, l, "bitwise", ls, sizeof ls);
  if (!n) return;
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

void free_references(void) {
  for (int i = 0; i < nrefs; i++) run_free(refs[i].r);
  nrefs = 0;
}
