#include "train_state.h"

#include <string.h>

#include "check.h"

void train_state_init(train_state *st) { memset(st, 0, sizeof *st); }

void train_state_free(train_state *st) {
  free(st->loss_history);
  free(st->val_history.v);
  free(st->starts.v);
  free(st->grad_norms.v);
  free(st->guard_events.v);
  free(st->skipped.v);
  free(st->replays.v);
  memset(st, 0, sizeof *st);
}

void train_state_push_loss(train_state *st, float loss) {
  if (st->loss_count == st->loss_capacity) {
    st->loss_capacity = st->loss_capacity ? 2 * st->loss_capacity : 1024;
    st->loss_history = boost_realloc(st->loss_history, (size_t)st->loss_capacity, sizeof *st->loss_history);
  }
  st->loss_history[st->loss_count++] = loss;
}

void train_rows_push(train_rows *r, const double *row, int cols) {
  if (r->rows == r->cap) {
    r->cap = r->cap ? 2 * r->cap : 16;
    r->v = boost_realloc(r->v, (size_t)(r->cap * cols), sizeof *r->v);
  }
  memcpy(r->v + (size_t)(r->rows++ * cols), row, (size_t)cols * sizeof *row);
}

void train_state_push_val(train_state *st, float loss) {
  const double row[TRAIN_VAL_COLS] = {(double)st->step, (double)loss};
  train_rows_push(&st->val_history, row, TRAIN_VAL_COLS);
}
