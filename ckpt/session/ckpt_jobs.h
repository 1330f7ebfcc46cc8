/* The jobs the session hands to the writer thread and what comes back: a
 * save (its metadata, state and activations, copied at the step boundary)
 * and its result, a load's result, and the parts a job works with.
 * Types only. */
#ifndef BOOST_CKPT_JOBS_H
#define BOOST_CKPT_JOBS_H

#include <limits.h>
#include <stdint.h>

#include "ckpt_acts.h"
#include "ckpt_agree.h"
#include "ckpt_internal.h"
#include "ckpt_meta.h"
#include "ckpt_plan.h"
#include "ckpt_stage.h"
#include "ckpt_worker.h"

/* What the writer and the reader work with, lent by the session: its
 * settings, the plan, the stager, the ranks that agree, and the writer
 * thread's hand-over (how many threads a job may use now). */
typedef struct {
  const ckpt_settings *cfg;
  const ckpt_file_plan *plan;
  ckpt_stager *st;
  const ckpt_team *team;
  ckpt_worker *pace;
} ckpt_job_parts;

/* Size classes reported in logs and benchmarks. */
typedef enum { SIZE_WEIGHTS = 0, SIZE_MOMENTS, SIZE_ACTS, SIZE_NUM_CLASSES } size_class;

typedef struct {
  int64_t step;
  ckpt_meta meta; /* the root attributes: the run's block, then the package's fields */
  ckpt_state state; /* the run's state datasets (a copy) */
  int deferred;                /* the writer copies parameters and moments from the live arenas */
  int oom;                     /* no memory for the copy of the metadata or state: the checkpoint fails */
  double stall_s, wait_prev_s; /* measured by the training thread */
  ckpt_acts_sink acts;
} save_job;

typedef struct {
  int64_t step;
  int ok, valid;
  boost_status reason; /* why it failed (the writer thread's, handed over with the result) */
  double write_s, write_cpu_s, stall_s, wait_prev_s, update_wait_s;
  /* write_s by phase: checksums + shuffle/zstd + HDF5/MPI-IO writes into the
   * file system; fsync; the read-back verification; rename and retention */
  double encode_s, fsync_s, verify_s, commit_s;
  double raw[SIZE_NUM_CLASSES], stored[SIZE_NUM_CLASSES], file_bytes;
  int direct; /* written by the direct path (ckpt_write_path.h), not HDF5's collective filtered writes */
  char retention[512];
  int latest_ok;
} save_result;

/* A load's outcome, in the shape of save_result: a status and a
 * boost_status (failed with why when status is -1; otherwise its message is
 * the one-line account of what was loaded or why nothing was). */
typedef struct {
  int status; /* 1 read and verified (into the arenas, or host staging), 0 nothing loaded, -1 fatal */
  boost_status reason;
  char path[PATH_MAX + 64], skipped[1536]; /* what was loaded; what was passed over, with why */
  double t0;                               /* when the load started */
  ckpt_meta meta;                          /* the loaded file's root attributes */
  ckpt_state state;                        /* its state datasets */
  double bytes_needed, bytes_decoded; /* over all ranks: their bands, and the chunks those touch */
} load_result;

#endif
