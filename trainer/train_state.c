#include "train_state.h"

#include <string.h>

#include "check.h"

void train_state_init(train_state *st) { memset(st, 0, sizeof *st); }

void train_state_free(train_state *st) {
  free(st->loss_history);
  memset(st, 0, sizeof *st);
}

void train_state_push_loss(train_state *st, float loss) {
  if (st->loss_count == st->loss_capacity) {
    st->loss_capacity = st->loss_capacity ? 2 * st->loss_capacity : 1024;
    st->loss_history = boost_realloc(st->loss_history, (size_t)st->loss_capacity, sizeof *st->loss_history);
  }
  st->loss_history[st->loss_count++] = loss;
}
