/* Set-aside branches (ckpt_rollback.c): the committed checkpoints of an
 * abandoned branch -- newer than the step the guard rolls back to, or than
 * the first step a run commits after resuming from an older checkpoint or
 * with ckpt.resume=none -- are renamed, never overwritten:
 *
 *   step_00000008.h5  ->  step_00000008.h5.superseded.3
 *
 * 3 being the branch's number: one more than the highest in the folder
 * (1 for the first), so every branch's files keep their own names. An
 * older boost wrote step_XXXXXXXX.h5.superseded: that is branch 0, older
 * than every numbered one. Neither name is a checkpoint to any reader
 * (ckpt_parse_file_name takes only step_XXXXXXXX.h5).
 *
 * A set-aside survives a kill -9 at any point: it writes its intent
 * (set_aside.pending: the branch and the step) before the first rename and
 * removes it after `latest` names the newest checkpoint left; the next start
 * finishes an intent it finds (ckpt_set_aside_recover), so a relaunch never
 * resumes half of an abandoned branch. ckpt.keep_set_aside bounds the
 * branches kept: a set-aside that makes more removes the oldest ones. */
#ifndef BOOST_CKPT_ROLLBACK_H
#define BOOST_CKPT_ROLLBACK_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define CKPT_SET_ASIDE_PENDING "set_aside.pending"

/* step_XXXXXXXX.h5.superseded.BRANCH (BRANCH 0: the old unnumbered name). */
void ckpt_set_aside_name(char *out, size_t outlen, int64_t step, int branch);
/* The step of a set-aside file's name (branch in *branch), or -1 when the
 * name is not one (a checkpoint, a temporary, anything else). */
int64_t ckpt_parse_set_aside_name(const char *name, int *branch);

/* One branch: its number, its files' steps (oldest first), their bytes. */
typedef struct {
  int branch;
  int nsteps;
  int64_t *steps;
  double bytes;
} ckpt_branch;

/* The set-aside branches of dir, oldest first (malloc'd; *n may be 0). */
int ckpt_branches_list(const char *dir, ckpt_branch **out, int *n, boost_status *err);
void ckpt_branches_free(ckpt_branch *b, int n);

/* Rank 0: every committed checkpoint of dir newer than after_step becomes
 * one new branch, `latest` names the newest checkpoint left (removed when
 * none is left), then branches beyond keep (0: no bound) are removed, oldest
 * first (a removal that fails is said in note, not an error). note (when not
 * NULL) says what it did in one line, "" when nothing was newer. Returns the
 * number of files set aside, or -1 with err. */
int ckpt_set_aside_after(const char *dir, int64_t after_step, int keep, char *note, size_t notelen,
                         boost_status *err);

/* At the start, with dir locked: finishes a set-aside a crash interrupted
 * (set_aside.pending). 0: none pending; 1: finished (note says what);
 * -1: the intent cannot be read or carried out (err names the file). */
int ckpt_set_aside_recover(const char *dir, char *note, size_t notelen, boost_status *err);

/* Removes the oldest branches of dir beyond keep (0: none removed); note
 * lists them. Returns how many branches were removed, or -1. */
int ckpt_branches_bound(const char *dir, int keep, char *note, size_t notelen, boost_status *err);

#endif
