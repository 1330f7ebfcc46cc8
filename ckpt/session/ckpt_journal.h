/* checkpoints.jsonl: rank 0's journal of a checkpoint directory, one JSON
 * object per line -- each save's result (committed or why not, phases,
 * bytes, layout) and, with the local level on, which level each start came
 * from. boost-inspect summary and plot read it. */
#ifndef BOOST_CKPT_JOURNAL_H
#define BOOST_CKPT_JOURNAL_H

#include <stdint.h>
#include <stdio.h>

#include "ckpt_jobs.h"
#include "grid.h"

/* {"start_step", "level" (local, partner, file, fresh), "unix_s", "load_s"} */
void ckpt_journal_start(FILE *log, const char *level, int64_t step, double load_s);
/* One save's result, written by a session of grid's layout (sync_mode: the
 * save ran on the training thread). */
void ckpt_journal_result(FILE *log, const save_result *r, const process_grid *grid, int sync_mode);

#endif
