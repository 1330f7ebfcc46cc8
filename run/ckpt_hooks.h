/* What the trainer gives the checkpoint package (ckpt.h's ckpt_hooks): the
 * recompute of the bottleneck activations a checkpoint stores. */
#ifndef BOOST_CKPT_HOOKS_H
#define BOOST_CKPT_HOOKS_H

#include "ckpt.h"
#include "comm.h"
#include "config.h"
#include "grid.h"
#include "model.h"
#include "pipeline.h"

typedef struct {
  const train_config *cfg;
  const process_grid *grid;
  comm_ctx *comm;
  model *m;
  pipeline *pipe;
} trainer_ckpt_ctx;

/* Hooks over ctx (which must outlive the checkpoint session). */
ckpt_hooks trainer_ckpt_hooks(trainer_ckpt_ctx *ctx);

#endif
