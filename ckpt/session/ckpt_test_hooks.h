/* The checkpoint package's fault injection and test switches, kept out of
 * the production structs: one process-wide set, read from the environment
 * when a session opens (ckpt_test_hooks_from_env), or put in place by a
 * test (ckpt_test_hooks_set). Production code only reads it (ckpt_test_hooks),
 * at the few points a test needs to break:
 *   BOOST_CKPT_TEST_DELAY_MS=N     the writer and the reader sleep N ms after each dataset
 *   BOOST_CKPT_TEST_FAIL=STEP[:RANK]  STEP's checkpoint fails with an injected I/O error on RANK (all when omitted)
 *   BOOST_CKPT_TEST_FLIP_AFTER_WRITE=STEP  a byte in the middle of STEP's file is flipped before its read-back
 *   BOOST_CKPT_TEST_DIRSYNC_FAIL=STEP  the directory fsync after STEP's rename reports failure (the file is in place)
 *   BOOST_CKPT_TEST_NO_RESERVE=1   no disk reservation before writing
 *   BOOST_CKPT_TEST_READBACK_HDF5=1  the read-back goes through H5Dread (the path for other pipelines)
 *   BOOST_CKPT_TEST_LOAD_RING=1    a load goes through the staging ring even into host memory
 *   BOOST_CKPT_TEST_SET_ASIDE_KILL=K  the process kills itself (SIGKILL) at point K of a set-aside
 *                                  (ckpt_rollback.h; the points below)
 *   BOOST_TRAIN_TEST_STOP_IN=PHASE[:RANK]  the rank (every rank when omitted) stops itself (SIGSTOP)
 *                                  on entering PHASE of a job's end: last-step, final-save, local-commit,
 *                                  end-agreement, finalize, finalized (after MPI_Finalize returned: no
 *                                  rank can see it) (ckpt_test_stop_in; the trainer calls it too) */
#ifndef BOOST_CKPT_TEST_HOOKS_H
#define BOOST_CKPT_TEST_HOOKS_H

#include <stdint.h>

typedef struct {
  int delay_ms;
  int no_reserve;
  int64_t fail_step; /* -1: none */
  int fail_rank;     /* -1: every rank */
  int64_t flip_step;
  int64_t dirsync_fail_step;
  int readback_hdf5;
  int load_ring;
  int set_aside_kill; /* 0: off; else the CKPT_ASIDE_AT_* point */
} ckpt_test_hooks;

/* The points of a set-aside (ckpt_rollback.c) a kill -9 can meet, in order. */
enum {
  CKPT_ASIDE_AT_INTENT = 1,       /* set_aside.pending written, nothing renamed */
  CKPT_ASIDE_AT_FIRST_RENAME = 2, /* the first file renamed, the others not */
  CKPT_ASIDE_AT_RENAMED = 3,      /* every file renamed, `latest` not updated */
  CKPT_ASIDE_AT_LATEST = 4,       /* `latest` updated, the intent not removed */
  CKPT_ASIDE_AT_DONE = 5,         /* the intent removed, the bound not applied */
  CKPT_ASIDE_AT_BOUND = 6,        /* the first file of the oldest branch removed */
  CKPT_ASIDE_POINTS = 6
};

/* The switches in force (all off unless a test set them). */
const ckpt_test_hooks *ckpt_test_hooks_now(void);
/* Reads them from the environment (ckpt_open, before any thread starts). */
void ckpt_test_hooks_from_env(void);
/* Test only: puts h in force (NULL: all off). */
void ckpt_test_hooks_set(const ckpt_test_hooks *h);
/* An integer switch of the environment (dflt when unset or not a number). */
int64_t ckpt_env_int(const char *name, int64_t dflt);
/* Whether STEP's checkpoint fails with an injected error on this rank. */
int ckpt_test_fails(int64_t step, int rank);
/* SIGKILL to this process when the set-aside kill point is `point`. */
void ckpt_test_set_aside_point(int point);
/* The delay after a dataset, when one is set. */
void ckpt_test_delay(void);
/* BOOST_TRAIN_TEST_STOP_IN names this phase (and this rank, or none): the
 * process stops itself with SIGSTOP, as a stopped or swapped-out rank
 * would, so a test can check that the others end the job. */
void ckpt_test_stop_in(const char *phase, int rank);

#endif
