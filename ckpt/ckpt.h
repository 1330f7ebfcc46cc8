/* Checkpoint session: asynchronous, compressed, sharded writes of a run's
 * whole state into one parallel-HDF5 file per checkpoint, atomic commit,
 * retention, and resume. See docs/CHECKPOINT_FORMAT.md.
 *
 * The trainer calls, on every rank:
 *   s = ckpt_open(cfg, grid, model)          (NULL when ckpt.dir is empty)
 *   ckpt_resume(s, &state, ...)              once, before the first step
 *   ckpt_after_step(s, &state, force, ...)   after every optimizer step
 *   ckpt_close(s)                            waits for the last commit
 * All calls are collective over grid->world. */
#ifndef BOOST_CKPT_H
#define BOOST_CKPT_H

#include <stddef.h>

#include "config.h"
#include "grid.h"
#include "model.h"
#include "train_state.h"

typedef struct ckpt_session ckpt_session;

/* Removes temporaries a crash left in cfg->ckpt.dir, starts the writer
 * thread. Fatal (boost_fail on every rank) when the directory is unusable. */
ckpt_session *ckpt_open(const train_config *cfg, const process_grid *grid, model *m);

/* Applies cfg->ckpt.resume (auto | none | PATH): loads parameters, AdamW
 * moments and *st. Returns 1 when resumed, 0 for a fresh start; msg gets a
 * one-line account for the log (what was loaded or skipped and why). */
int ckpt_resume(ckpt_session *s, train_state *st, char *msg, size_t msglen);

/* Starts a checkpoint when one is due (ckpt.every) or force is set; returns
 * immediately after staging. status gets a short state for the step's log
 * line ("-", "staged step 40", "committed step 20 (1.2 s, 1.18x)", ...). */
void ckpt_after_step(ckpt_session *s, const train_state *st, int force, char *status, size_t statuslen);

/* Waits for the checkpoint in flight to commit (or fail). Returns 0 when the
 * last checkpoint attempted committed (or none was attempted), -1 if not. */
int ckpt_wait(ckpt_session *s);

/* ckpt_wait, then stops the writer thread and frees the session. */
void ckpt_close(ckpt_session *s);

#endif
