/* The writer: one save job on the writer thread -- the stager's bands and
 * the job's copies written into a temporary file through ckpt_write.h,
 * fsynced, read back and verified, then committed (every rank agrees, rank
 * 0 renames it into place, points `latest` at it, applies retention). */
#ifndef BOOST_CKPT_SAVE_H
#define BOOST_CKPT_SAVE_H

#include "ckpt.h"
#include "ckpt_agree.h"
#include "ckpt_direct.h"
#include "ckpt_jobs.h"
#include "ckpt_plan.h"
#include "ckpt_stage.h"
#include "ckpt_worker.h"

typedef struct {
  ckpt_job_parts parts;
  ckpt_direct *dx;  /* the direct path's scratch, kept across saves */
  int direct_write; /* BOOST_CKPT_DIRECT */
  double prev_file_bytes, prev_raw_bytes; /* the last committed file, for the next reservation */
  save_job job;     /* filled by the training thread before the hand-over */
  save_result res;  /* filled by the writer thread; the session takes it once the job is done */
} ckpt_writer;

/* The save of w->job into w->res (writer thread; collective). */
void ckpt_do_save(ckpt_writer *w);
void ckpt_writer_free(ckpt_writer *w);

#endif
