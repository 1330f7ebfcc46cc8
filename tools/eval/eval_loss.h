/* boost-eval's measurements on token data: the loss of a checkpoint's model
 * (ckpt_model.h) over windows of a token split, batch by batch, and over the
 * batch a checkpoint stores (/activations/tokens). Shared with boost-reshard
 * --rank, which reports the loss change a rank change makes on that batch.
 *
 * A batch's result is its mean next-token loss (nats) as model_forward
 * returns it, and its weight: the share of a full batch's rows it holds
 * (1 for a full batch). The loss over many batches is sum(w * mean) / sum(w)
 * summed in batch order, so it does not depend on which process computed
 * which batch; over full batches it is the training log's own formula for
 * `val` (sum of the batch means / batches). */
#ifndef BOOST_EVAL_LOSS_H
#define BOOST_EVAL_LOSS_H

#include <stddef.h>
#include <stdint.h>

#include "data.h"
#include "ckpt_reader.h"
#include "model.h"
#include "status.h"

/* Which windows of a split make the batches: batch b holds windows
 * b*B .. b*B+B-1. With wrap (the trainer's validation rule) every batch is
 * full and window indices run modulo the split's windows; without it the
 * last batch holds what is left (fewer rows, a weight below 1). */
typedef struct {
  const data_split *split;
  int B, T;
  int64_t batches;
  int wrap;
} eval_batches;

/* Batches b = first, first + stride, ... of the plan, each forward of m's
 * weights in activation state r;
 * mean[b] and weight[b] set for those (the rest untouched). tick (may be
 * NULL) is called after each batch. */
void eval_run_batches(const model *m, model_acts *r, const eval_batches *p, int64_t first, int64_t stride, double *mean, double *weight,
                      void (*tick)(void *), void *tick_ctx);

/* sum(weight * mean) / sum(weight) in batch order (NaN when no weight). */
double eval_combine(const double *mean, const double *weight, int64_t n);

/* The per-token losses (nats) of r's last forward, n = B*T values. */
void eval_token_losses(const model *m, const model_acts *r, float *out, size_t n);

/* The mean next-token loss of the model on the checkpoint's stored batch:
 * inputs are the stored tokens [nseq, T]; the targets of a window are not
 * stored, so each position's target is the next stored token of its
 * sequence (T-1 targets per sequence, the last position is not scored).
 * Returns 0 with *loss and *tokens (targets scored), or -1 with one line. */
int eval_stored_batch(const ckr_ckpt *c, const model *m, model_acts *r, double *loss, int64_t *tokens,
                      boost_status *err);

#endif
