/* What a training run is, beyond its tensors: where it stands and how it got
 * there. Checkpoints store it; a resumed run continues from it bitwise
 * identically, and its histories go on from where the checkpoint left them. */
#ifndef BOOST_TRAIN_STATE_H
#define BOOST_TRAIN_STATE_H

#include <stdint.h>

/* Rows of a fixed number of columns (doubles), grown as needed. */
typedef struct {
  double *v;
  int64_t rows, cap;
} train_rows;

typedef struct {
  int64_t step;          /* optimizer steps completed (the LR schedule position) */
  int64_t data_cursor;   /* global index of the next training sample */
  double tokens_seen;
  float *loss_history;   /* training loss of each completed step, identical on every rank */
  int64_t loss_count, loss_capacity;
  train_rows val_history; /* [step, validation loss] of every validation, identical on every rank */
  train_rows starts;      /* one row per start of the run (its columns: trainer/save_request.c) */
  train_rows grad_norms;  /* pre-clip gradient norm of each completed step (one column; older files: fewer) */
  /* The step guard's ledger (trainer/guard.h): every flagged step, every range
   * of batches passed over. Kept whole across rollbacks: a rollback reloads
   * the other state, never these. */
  train_rows guard_events; /* GUARD_EVENT_COLS columns */
  train_rows skipped;      /* GUARD_SKIP_COLS columns */
  train_rows replays;      /* GUARD_REPLAY_COLS columns */
  /* The last micro-batch this rank ran forward (for activation checkpoints). */
  const int32_t *last_tokens;
  int last_B, last_T;
} train_state;

#define TRAIN_VAL_COLS 2
/* guard_events: step (the accepted steps before it), batch (global index),
 * reason (GUARD_* bits of trainer/guard.h), loss, grad_norm, action (0 dropped,
 * 1 it triggered a rollback, 2 the run ended on it). */
#define GUARD_EVENT_COLS 6
/* skipped: first batch, last batch, reason (0 train.skip_batches, 1 a
 * rollback's window, 2 a flagged step's batch), step it happened at. */
#define GUARD_SKIP_COLS 4
/* replays: step (accepted steps before it), batch, trigger (0
 * train.replay_every, 1 a flagged step), outcome (0 the same bits: the
 * result is real; 1 a rank differed once: healed from two replays that
 * agree; 2 the job ended on it), rank (the rank named; -1 none), where
 * (0 nowhere, 1 the rank's own gradients or loss before the data-parallel
 * reduction, 2 its gradients after it, 3 the reduced loss or norm). */
#define GUARD_REPLAY_COLS 6

void train_state_init(train_state *st);
void train_state_free(train_state *st);
void train_state_push_loss(train_state *st, float loss);
/* The validation loss of the step st->step. */
void train_state_push_val(train_state *st, float loss);
/* A row of `cols` values appended to r. */
void train_rows_push(train_rows *r, const double *row, int cols);

#endif
