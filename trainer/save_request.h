/* The loop's save requests (ckpt.h: ckpt_submit): whether a save is due
 * after a step, and the request the run builds for it -- the metadata block
 * of every save (the run's root attributes: its state, the LR it records
 * next, its config and layout, its precision), the state datasets, and the
 * bottleneck activations a checkpoint stores, recomputed here with the
 * pipeline and model the loop owns (in the run's precision: float32 or
 * bf16) -- handed over, watched as a checkpoint phase (run_watch.h). The
 * submit gives back the save's staging fence, which the loop waits on
 * before the optimizer changes the arenas. Also what the package is told
 * at open (its settings) and the row of this job's start. */
#ifndef BOOST_SAVE_REQUEST_H
#define BOOST_SAVE_REQUEST_H

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
  char *config, *layout;   /* the run's constant root attributes (JSON) */
  tp_mode mode;            /* the run's tensor-parallel mode (resolved) */
  char tokenizer[64];      /* data_tokenizer_id of the training data ("": none recorded) */
  ckpt_acts_sink *acts;    /* the activations of a file save (NULL: ckpt.activations none, or no model) */
  int fenced;              /* the caller waits on each fence before its update (1 from save_builder_init) */
} save_builder;

/* The checkpoint package's settings from the run's config. */
void trainer_ckpt_settings(const train_config *cfg, ckpt_settings *set);

/* b over the run's pieces (which must outlive the checkpoint session), with
 * its constant root attributes; save_builder_free releases them. m NULL:
 * requests carry no activations. */
void save_builder_init(save_builder *b, const train_config *cfg, const process_grid *grid, comm_ctx *comm, model *m,
                       pipeline *pipe, tp_mode mode);
void save_builder_free(save_builder *b);

/* After st->step's optimizer step: the saves due (force: CKPT_DUE_* bits
 * the loop asks for) requested from ck with the run's metadata block, state
 * and (for a file save) activations; the fence to wait on before the next
 * update. note->msg: the step line's checkpoint state ("-" without ck).
 * Collective over world. */
ckpt_fence save_request_submit(save_builder *b, ckpt_session *ck, const train_state *st, int force,
                               boost_status *note);

/* This job's start appended to st's history of starts (after the resume;
 * the row of /state/run_starts, ckpt_meta.h CKPT_START_COLUMNS: the step,
 * time, tokens and batch it starts from, its layout and precision). Each
 * save then sets its last_step / last_unix_s. */
void trainer_ckpt_note_start(const save_builder *b, train_state *st);

#endif
