/* What a training run is, beyond its tensors: where it stands. Checkpoints
 * store it; a resumed run continues from it bitwise identically. */
#ifndef BOOST_TRAIN_STATE_H
#define BOOST_TRAIN_STATE_H

#include <stdint.h>

typedef struct {
  int64_t step;          /* optimizer steps completed (the LR schedule position) */
  int64_t data_cursor;   /* global index of the next training sample */
  double tokens_seen;
  float *loss_history;   /* training loss of each completed step, identical on every rank */
  int64_t loss_count, loss_capacity;
  /* The last micro-batch this rank ran forward (for activation checkpoints). */
  const int32_t *last_tokens;
  int last_B, last_T;
} train_state;

void train_state_init(train_state *st);
void train_state_free(train_state *st);
void train_state_push_loss(train_state *st, float loss);

#endif
