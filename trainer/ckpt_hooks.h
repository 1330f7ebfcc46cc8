/* What the run gives the checkpoint package (ckpt.h): its settings from the
 * run's config, the metadata block of every save (the run's root
 * attributes: its state, the LR it records next, its config and layout,
 * its precision), the recompute of the bottleneck activations a checkpoint
 * stores (in the run's precision: float32 or bf16), and a
 * loaded checkpoint's state back into the run's train_state. */
#ifndef BOOST_CKPT_HOOKS_H
#define BOOST_CKPT_HOOKS_H

#include "ckpt.h"
#include "comm.h"
#include "config.h"
#include "grid.h"
#include "model.h"
#include "pipeline.h"
#include "train_state.h"

typedef struct {
  const train_config *cfg;
  const process_grid *grid;
  comm_ctx *comm;
  model *m;                /* NULL: no activations to recompute */
  pipeline *pipe;
  const train_state *st;   /* the run's state (its last micro-batch, for the activations) */
  char *config, *layout;   /* the run's constant root attributes (JSON) */
  tp_mode mode;            /* the run's tensor-parallel mode (resolved) */
  char tokenizer[64];      /* data_tokenizer_id of the training data ("": none recorded) */
} trainer_ckpt_ctx;

/* The checkpoint package's settings from the run's config. */
void trainer_ckpt_settings(const train_config *cfg, ckpt_settings *set);

/* ctx over the run's pieces (which must outlive the checkpoint session),
 * with its constant root attributes; trainer_ckpt_ctx_free releases them. */
void trainer_ckpt_ctx_init(trainer_ckpt_ctx *ctx, const train_config *cfg, const process_grid *grid, comm_ctx *comm,
                           model *m, pipeline *pipe, const train_state *st, tp_mode mode);
void trainer_ckpt_ctx_free(trainer_ckpt_ctx *ctx);

/* Hooks over ctx. */
ckpt_hooks trainer_ckpt_hooks(trainer_ckpt_ctx *ctx);

/* ckpt_after_step with the run's metadata block for st. */
void trainer_ckpt_after_step(const trainer_ckpt_ctx *ctx, ckpt_session *s, const train_state *st, int force,
                             char *status, size_t statuslen);

/* ckpt_resume, then the loaded step, cursor, tokens and histories (loss,
 * validation, starts) into *st. Same returns. */
int trainer_ckpt_resume(ckpt_session *s, train_state *st, const char *tokenizer, char *msg, size_t msglen);

/* The guard's rollback (ckpt_rollback): the newest committed checkpoint at
 * or before max_step loaded into the arenas and *st, whose guard ledger
 * (events, skipped batches) is kept as it is. Same returns as
 * trainer_ckpt_resume (0: no such checkpoint, nothing loaded). */
int trainer_ckpt_rollback(ckpt_session *s, int64_t max_step, train_state *st, char *msg, size_t msglen);

/* This job's start appended to st's history of starts (after the resume;
 * the row of /state/run_starts, ckpt_meta.h CKPT_START_COLUMNS: the step,
 * time, tokens and batch it starts from, its layout and precision). Each
 * save then sets its last_step / last_unix_s. */
void trainer_ckpt_note_start(const trainer_ckpt_ctx *ctx, train_state *st);

#endif
