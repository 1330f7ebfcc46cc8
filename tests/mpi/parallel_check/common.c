/* What every check of parallel_check shares: printing and verdicts,
 * layout specs, and the training runs the checks compare. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel_check.h"

double TOL = 1e-5;
int g_rank, g_size;
int n_failed;

void say(const char *fmt, ...) {
  if (g_rank != 0) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
}

void die(const char *fmt, ...) {
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

/* the verdict is the worst of every rank's ok */
void verdict(int ok, const char *fmt, ...) {
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
MPI_Comm first_ranks(int n) {
  MPI_Comm c;
  MPI_Comm_split(MPI_COMM_WORLD, g_rank < n ? 0 : MPI_UNDEFINED, g_rank, &c);
  return c;
}

/* ---- layouts ------------------------------------------------------------- */

void parse_layout(const char *spec, layout *l) {
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

void parse_case(const char *spec, char *preset, char *mode, char *recompute) {
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

void format_layout(const layout *l, char *out, size_t n) {
  int k = snprintf(out, n, "dp=%d tp=%d pp=%d mode=%s accum=%d", l->dp, l->tp, l->pp, l->mode, l->accum);
  if (k > 0 && (size_t)k < n && (l->zero || strcmp(l->recompute, "none")))
    snprintf(out + k, n - (size_t)k, " zero=%d recompute=%s", l->zero, l->recompute);
}

/* ---- runs ---------------------------------------------------------------- */


/* Build the config of one run: user sets, then what the check fixes. */
int make_config(const options *o, const char *preset, const layout *l, int batch, int steps, train_config *cfg,
                       boost_status *err) {
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
  /* The loop's guard and validation are off and its step lines few unless
   * the user sets them: the checks compare the steps themselves (a flagged
   * step would be dropped in one layout and not another; validation adds
   * traffic and time; a run logs its last step only). */
  char quiet[3][64] = {"train.guard=off", "train.val_batches=0", "train.log_every=1000000000"};
  char *sets[MAX_SETS + 16];
  int n = 0;
  sets[n++] = fixed[0]; /* preset first; user keys override the preset, fixed keys override the user */
  sets[n++] = quiet[0];
  sets[n++] = quiet[1];
  sets[n++] = quiet[2];
  for (int i = 0; i < o->nsets; i++) sets[n++] = o->sets[i];
  for (int i = 1; i < nf; i++) sets[n++] = fixed[i];
  return config_resolve(cfg, NULL, n, sets, err);
}

/* Train `steps` steps on comm through the training loop (trainer_train);
 * NULL (message on rank 0 of comm) on error. */
run *train(const options *o, MPI_Comm comm, const layout *l, int batch) {
  run *r = calloc(1, sizeof *r);
  boost_status err = {0};
  int crank;
  MPI_Comm_rank(comm, &crank);
  if (make_config(o, o->preset, l, batch, o->steps, &r->cfg, &err) != 0 ||
      trainer_create(&r->cfg, comm, &r->t, &err) != 0) {
    if (crank == 0) fprintf(stderr, "parallel_check: %s\n", err.msg);
    free(r);
    return NULL;
  }
  const int status = trainer_train(r->t);
  const train_state *st = trainer_state(r->t);
  if (status != 0 || st->loss_count != o->steps || st->grad_norms.rows != o->steps) {
    if (crank == 0)
      fprintf(stderr, "parallel_check: the loop ended with status %d after %lld of %d steps\n", status,
              (long long)st->loss_count, o->steps);
    run_free(r);
    return NULL;
  }
  r->losses = calloc((size_t)o->steps, sizeof *r->losses);
  r->gnorms = calloc((size_t)o->steps, sizeof *r->gnorms);
  for (int s = 0; s < o->steps; s++) {
    r->losses[s] = st->loss_history[s];
    r->gnorms[s] = st->grad_norms.v[s];
  }
  r->last = *trainer_step_comm(r->t);
  return r;
}

void run_free(run *r) {
  if (!r) return;
  trainer_destroy(r->t);
  free(r->losses);
  free(r->gnorms);
  free(r);
}
