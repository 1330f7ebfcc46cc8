/* A loaded checkpoint into the run's train_state: the start's resume and
 * the guard's rollback (ckpt.h: ckpt_resume, ckpt_rollback), with the
 * run's own checks of what was loaded. */
#ifndef BOOST_RESUME_STATE_H
#define BOOST_RESUME_STATE_H

#include "ckpt.h"
#include "status.h"
#include "train_state.h"

/* ckpt_resume, then the loaded step, cursor, tokens and histories (loss,
 * validation, starts) into *st. Same returns; note as ckpt_resume's (the
 * account, or failed with why). tokenizer: the training data's
 * (data_tokenizer_id; "": none recorded). */
int trainer_ckpt_resume(ckpt_session *s, train_state *st, const char *tokenizer, boost_status *note);

/* The guard's rollback (ckpt_rollback): the newest committed checkpoint at
 * or before max_step loaded into the arenas and *st, whose guard ledger
 * (events, skipped batches) is kept as it is. Same returns as
 * trainer_ckpt_resume (0: no such checkpoint, nothing loaded). */
int trainer_ckpt_rollback(ckpt_session *s, int64_t max_step, train_state *st, boost_status *note);

#endif
