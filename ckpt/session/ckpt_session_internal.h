/* What the checkpoint session's files share (ckpt_session.c: open, saves,
 * waits and close; ckpt_session_resume.c: the start's choice of level and
 * the guard's rollback) and no other module sees. */
#ifndef BOOST_CKPT_SESSION_INTERNAL_H
#define BOOST_CKPT_SESSION_INTERNAL_H

#include <stdio.h>

#include "ckpt.h"
#include "ckpt_agree.h"
#include "ckpt_local.h"
#include "ckpt_plan.h"
#include "ckpt_read.h"
#include "ckpt_run_id.h"
#include "ckpt_save.h"
#include "ckpt_stage.h"
#include "ckpt_worker.h"

/* The production switches of the environment, read at open (the test
 * switches are ckpt_test_hooks.h's). */
typedef struct {
  int sync_mode;    /* BOOST_CKPT_SYNC=1: save synchronously, the baseline of bench/ */
  int writer_nice;  /* BOOST_CKPT_WRITER_NICE (default 10) */
  int direct_write; /* BOOST_CKPT_DIRECT (default 1): 0 always writes through HDF5's collective filters */
} ckpt_env;

/* What the training thread knows of the saves so far. */
typedef struct {
  int fenced; /* the caller's last request was fenced (ckpt_save_request.fenced): so is ckpt_wait's catch-up */
  int attempted, last_ok;
  int64_t last_staged_step, last_committed_step;
  save_result last_done; /* for ckpt_last_stats */
  const char *start_level; /* where the start came from (ckpt_start_level) */
} ckpt_outcome;

struct ckpt_session {
  ckpt_settings cfg;
  ckpt_env set;
  const process_grid *grid;
  tensor_store *store;
  int read_only; /* no ckpt.dir: only a resume from a PATH */
  int lock_fd;   /* rank 0: the directory's lock (ckpt_fs_lock), -1 elsewhere */
  ckpt_team team;   /* the writer thread's duplicate of the world */
  MPI_Comm dp_comm; /* ... and of the data-parallel group (the stager's data plane) */
  ckpt_file_plan plan;
  ckpt_stager stager;
  ckpt_worker worker;
  ckpt_writer writer;
  ckpt_reader reader;
  ckpt_outcome out;
  FILE *log;             /* rank 0: <dir>/checkpoints.jsonl */
  char open_note[512];
  struct {               /* the levels beside the files (C11 anonymous: s->local, s->remote) */
    ckpt_local *local;   /* the local level (NULL: off) */
    ckpt_remote *remote; /* the remote level (NULL: off) */
  };
  /* in_rollback: ckpt_resume for the guard's rollback, not a start; run_id: the run's identity (ckpt_run_id.h) */
  /* remote_step: the step this start downloaded from the remote level (-1: none) */
  struct { int in_rollback; char run_id[CKPT_RUN_ID_HEX + 1]; int64_t remote_step; } start;
  /* Resumed from the local level, newer than the newest file: the next
   * step's checkpoint is forced, or, when the run ends without one, this
   * restored state's (kept here) is saved by ckpt_wait. */
  struct {
    int pending;
    ckpt_meta meta;
    ckpt_state state;
  } catch_up;
};

#endif
