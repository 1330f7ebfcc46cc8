#include "guard.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of v[0..n) (reordered). */
static double median(double *v, int64_t n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The robust z-score of x against v[0..n) (scratch reordered): (x - median)
 * over 1.4826 MAD, the MAD floored at 1 % of the median so that a flat
 * window does not turn noise into spikes. */
static double robust_z(double x, double *v, int64_t n, double *scratch) {
  const double med = median(v, n);
  for (int64_t i = 0; i < n; i++) scratch[i] = fabs(v[i] - med);
  double scale = 1.4826 * median(scratch, n);
  if (scale < 0.01 * fabs(med)) scale = 0.01 * fabs(med);
  if (scale < 1e-12) scale = 1e-12;
  return (x - med) / scale;
}

guard_verdict guard_judge(const train_config *cfg, const train_state *st, float loss, double gnorm) {
  guard_verdict v = {0, NAN, NAN};
  if (!isfinite(loss) || !isfinite(gnorm)) {
    v.reasons = GUARD_NONFINITE;
    return v;
  }
  const int64_t W = cfg->train.guard.window;
  const int64_t nl = st->loss_count < W ? st->loss_count : W;
  const int64_t ng = st->grad_norms.rows < W ? st->grad_norms.rows : W;
  const int64_t most = nl > ng ? nl : ng;
  if (most == 0) return v;
  double *win = boost_calloc((size_t)most, sizeof *win), *scratch = boost_calloc((size_t)most, sizeof *scratch);
  double top = -INFINITY;
  for (int64_t i = 0; i < nl; i++) {
    win[i] = st->loss_history[st->loss_count - nl + i];
    if (win[i] > top) top = win[i];
  }
  if (nl > 0 && (double)loss > cfg->train.guard.loss_ratio * top) v.reasons |= GUARD_LOSS_RATIO;
  if (nl >= cfg->train.guard.warmup) {
    v.z_loss = robust_z(loss, win, nl, scratch);
    if (v.z_loss > cfg->train.guard.z_loss) v.reasons |= GUARD_LOSS_Z;
  }
  if (ng >= cfg->train.guard.warmup) {
    memcpy(win, st->grad_norms.v + (st->grad_norms.rows - ng), (size_t)ng * sizeof *win);
    v.z_gnorm = robust_z(gnorm, win, ng, scratch);
    if (v.z_gnorm > cfg->train.guard.z_gnorm) v.reasons |= GUARD_GNORM_Z;
  }
  boost_free(win);
  boost_free(scratch);
  return v;
}

void guard_describe(const guard_verdict *v, float loss, double gnorm, char *out, size_t outlen) {
  size_t used = 0;
  out[0] = 0;
#define PUT(...) used += (size_t)snprintf(out + used, used < outlen ? outlen - used : 0, __VA_ARGS__)
  if (v->reasons & GUARD_NONFINITE) PUT("non-finite %s", isfinite(loss) ? "gradient norm" : "loss");
  if (v->reasons & GUARD_LOSS_RATIO) PUT("%sloss %.4g above train.guard_loss_ratio x the window's largest", used ? ", " : "", loss);
  if (v->reasons & GUARD_LOSS_Z) PUT("%sloss spike (z %.1f)", used ? ", " : "", v->z_loss);
  if (v->reasons & GUARD_GNORM_Z) PUT("%sgradient-norm spike %.4g (z %.1f)", used ? ", " : "", gnorm, v->z_gnorm);
#undef PUT
}

int guard_skip_range(const train_config *cfg, const train_state *st, int64_t batch, int64_t *last, int *reason) {
  for (int i = 0; i < cfg->train.n_skip_ranges; i++)
    if (batch >= cfg->train.skip_ranges[i][0] && batch <= cfg->train.skip_ranges[i][1]) {
      *last = cfg->train.skip_ranges[i][1];
      *reason = GUARD_SKIP_CONFIG;
      return 1;
    }
  for (int64_t i = 0; i < st->skipped.rows; i++) {
    const double *row = st->skipped.v + i * GUARD_SKIP_COLS;
    if ((int)row[2] == GUARD_SKIP_ROLLBACK && batch >= (int64_t)row[0] && batch <= (int64_t)row[1]) {
      *last = (int64_t)row[1];
      *reason = GUARD_SKIP_ROLLBACK;
      return 1;
    }
  }
  return 0;
}

void guard_note_event(train_state *st, int64_t batch, const guard_verdict *v, float loss, double gnorm, int action) {
  const double row[GUARD_EVENT_COLS] = {(double)st->step, (double)batch, (double)v->reasons, (double)loss, gnorm,
                                        (double)action};
  train_rows_push(&st->guard_events, row, GUARD_EVENT_COLS);
}

void guard_note_skip(train_state *st, int64_t first, int64_t last, int reason) {
  for (int64_t i = 0; i < st->skipped.rows; i++) {
    const double *row = st->skipped.v + i * GUARD_SKIP_COLS;
    if ((int64_t)row[0] == first && (int64_t)row[1] == last && (int)row[2] == reason) return;
  }
  const double row[GUARD_SKIP_COLS] = {(double)first, (double)last, (double)reason, (double)st->step};
  train_rows_push(&st->skipped, row, GUARD_SKIP_COLS);
}

void guard_note_replay(train_state *st, int64_t batch, int trigger, int outcome, int rank, int where) {
  const double row[GUARD_REPLAY_COLS] = {(double)st->step, (double)batch, trigger, outcome, rank, where};
  train_rows_push(&st->replays, row, GUARD_REPLAY_COLS);
}

int guard_sdc_count(const train_state *st, int rank) {
  int n = 0;
  for (int64_t i = 0; i < st->replays.rows; i++) {
    const double *row = st->replays.v + i * GUARD_REPLAY_COLS;
    n += (int)row[3] != GUARD_REPLAY_SAME && (int)row[4] == rank;
  }
  return n;
}

int guard_rollbacks(const train_state *st) {
  int64_t flagged, rollbacks;
  guard_count(st->guard_events.v, st->guard_events.rows, st->skipped.v, st->skipped.rows, &flagged, &rollbacks);
  return (int)rollbacks;
}

int guard_recent_flags(const train_state *st, int64_t batch, int window, int64_t *first_step) {
  int64_t after = -1; /* flags at or before the last rollback's window are settled */
  for (int64_t i = 0; i < st->skipped.rows; i++) {
    const double *row = st->skipped.v + i * GUARD_SKIP_COLS;
    if ((int)row[2] == GUARD_SKIP_ROLLBACK && (int64_t)row[1] > after) after = (int64_t)row[1];
  }
  int n = 0;
  *first_step = -1;
  for (int64_t i = 0; i < st->guard_events.rows; i++) {
    const double *row = st->guard_events.v + i * GUARD_EVENT_COLS;
    const int64_t b = (int64_t)row[1];
    if (b <= after || b > batch || b <= batch - window) continue;
    n++;
    if (*first_step < 0 || (int64_t)row[0] < *first_step) *first_step = (int64_t)row[0];
  }
  return n;
}

static int cmp_range(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  return (x[0] > y[0]) - (x[0] < y[0]);
}

void guard_format_skips(const double *skipped, int64_t n, char *out, size_t outlen) {
  out[0] = 0;
  if (n <= 0) return;
  int64_t *r = boost_calloc((size_t)(2 * n), sizeof *r);
  for (int64_t i = 0; i < n; i++) {
    r[2 * i] = (int64_t)skipped[i * GUARD_SKIP_COLS];
    r[2 * i + 1] = (int64_t)skipped[i * GUARD_SKIP_COLS + 1];
  }
  qsort(r, (size_t)n, 2 * sizeof *r, cmp_range);
  size_t used = 0;
  for (int64_t i = 0; i < n && used < outlen;) {
    int64_t a = r[2 * i], b = r[2 * i + 1];
    for (i++; i < n && r[2 * i] <= b + 1; i++)
      if (r[2 * i + 1] > b) b = r[2 * i + 1];
    if (a == b) used += (size_t)snprintf(out + used, outlen - used, "%s%lld", used ? "," : "", (long long)a);
    else used += (size_t)snprintf(out + used, outlen - used, "%s%lld-%lld", used ? "," : "", (long long)a, (long long)b);
  }
  boost_free(r);
}

void guard_count(const double *events, int64_t nevents, const double *skipped, int64_t nskipped, int64_t *flagged,
                 int64_t *rollbacks) {
  (void)events;
  *flagged = nevents;
  *rollbacks = 0;
  for (int64_t i = 0; i < nskipped; i++) *rollbacks += (int)skipped[i * GUARD_SKIP_COLS + 2] == GUARD_SKIP_ROLLBACK;
}

const char *const guard_action_names[3] = {"dropped", "rolled back", "ended the run"};
const char *const guard_replay_outcomes[3] = {"the same bits", "a fault, healed", "a fault, the run ended"};
const char *const guard_where_names[4] = {"", "its own gradients or loss before the data-parallel reduction",
                                          "its gradients after the data-parallel reduction", "the reduced loss or norm"};

void guard_reason_names(unsigned reasons, char *out, size_t outlen) {
  static const char *const names[4] = {"non-finite", "loss spike", "gradient-norm spike", "loss above ratio"};
  size_t used = 0;
  out[0] = 0;
  for (int b = 0; b < 4 && used < outlen; b++)
    if (reasons & (1u << b)) used += (size_t)snprintf(out + used, outlen - used, "%s%s", used ? "+" : "", names[b]);
}
