/* Checkpoint session: asynchronous, compressed, sharded writes of a run's
 * whole state into one parallel-HDF5 file per checkpoint, atomic commit,
 * retention, and resume. See docs/CHECKPOINT_FORMAT.md.
 *
 * The run calls, on every rank:
 *   ckpt_open(&settings, grid, store, &hooks, &s, err)
 *                                            (s NULL when nothing is written or read)
 *   ckpt_resume(s, &meta, &state, msg, msglen)
 *                                            once, before the first step
 *   ckpt_before_update(s)                    in every step, before the optimizer
 *                                            changes parameters and moments
 *   ckpt_after_step(s, &meta, &state, force, status, statuslen)
 *                                            after every optimizer step
 *   ckpt_close(s)                            waits for the last commit
 * All calls are collective over grid->world except ckpt_before_update.
 *
 * The package knows nothing of the training side: it takes its settings
 * (ckpt_settings) at open and, at each save, the run's metadata block (the
 * root attributes of ckpt_meta.h the run provides, and its state datasets:
 * the loss and validation histories, the run's starts);
 * tensors are the registry's arenas, moved through its backend
 * (kernels/backend.h) and, between ranks, through the comm layer.
 *
 * One writer thread per rank makes every HDF5 call of the process (HDF5 is
 * not thread-safe), on its own duplicates of the world and data-parallel
 * communicators (MPI_THREAD_MULTIPLE). Switches of the environment:
 *   BOOST_CKPT_SYNC=1              save synchronously (ckpt_after_step returns
 *                                  after the commit): the baseline of bench/
 *   BOOST_CKPT_DIRECT=0            write through HDF5's collective filters
 *   BOOST_CKPT_WRITER_NICE=N       the writer thread's nice value (default 10)
 * and the test switches of ckpt_test_hooks.h (BOOST_CKPT_TEST_*: injected
 * failures, delays). */
#ifndef BOOST_CKPT_H
#define BOOST_CKPT_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt_meta.h"
#include "ckpt_peek.h"
#include "ckpt_remote.h" /* remote level (issue 42) */
#include "grid.h"
#include "status.h"
#include "tensor.h"

/* What the package needs of the run's settings (the run fills it from its
 * config: ckpt.* keys, train.threads, data.seed, its exit statuses). */
typedef struct {
  char dir[CKPT_PATH_MAX];   /* ckpt.dir: where checkpoints are written (empty: none) */
  ckpt_from resume;          /* ckpt.resume */
  int every;                 /* a checkpoint after every `every` steps (0: only forced ones) */
  int keep_last, keep_every; /* retention */
  int keep_set_aside;        /* set-aside branches kept (ckpt_rollback.h; 0: all) */
  int level;                 /* zstd level */
  int timeout;               /* seconds a checkpoint job may run before the watchdog aborts (0: never) */
  int threads;               /* the rank's cores: a save training waits for encodes on all of them */
  /* ckpt.staging_limit: the host memory a rank stages a save in, as bytes or
   * as a percentage of what the rank writes (both 0: all of it). Below that,
   * the writer stages the tensors in turns into a ring it writes out of,
   * and the optimizer step waits until what it overwrites is staged. */
  double staging_limit_bytes, staging_limit_percent;
  int activations;           /* the activations hook adds datasets to every save */
  int64_t data_seed;         /* this run's sample order: a resume from another warns */
  int abort_status;          /* the exit status of the watchdog's abort (the run's "ended unsaved"; 0: 1) */
  int load_abort_status;     /* ... of its abort during the load at start, when nothing was trained (the run's 75; 0:
                                abort_status) */
  /* The local level (ckpt_local.h): a local checkpoint after every
   * `local_every` steps (0: none), or with local_auto after the steps the
   * caller asks for (CKPT_DUE_LOCAL: the trainer's clock), in node-local
   * local_dir (empty: a directory in /dev/shm named after dir). */
  int local_every, local_auto;
  char local_dir[CKPT_PATH_MAX];
  ckpt_remote_settings remote; /* the remote level (ckpt/remote/ckpt_remote.h, issue 42; url "": off) */
} ckpt_settings;

typedef struct ckpt_session ckpt_session;

/* Activations a checkpoint stores (ckpt.activations): the trainer's hook
 * adds datasets to a sink; every rank adds the same names in the same order
 * (its pipeline stage's), each with the global shape, this rank's hyperslab
 * and its data, which is copied. CKPT_ACT_BF16 data are bfloat16 bit
 * patterns (uint16_t, the top half of a float32), stored as the bfloat16
 * file type of ckpt_h5.h and checksummed as the float32 values they widen
 * to. */
typedef enum { CKPT_ACT_F32 = 0, CKPT_ACT_I32, CKPT_ACT_I64, CKPT_ACT_BF16 } ckpt_act_type;
/* Bytes per element of an activation type. */
size_t ckpt_act_esize(ckpt_act_type type);
typedef struct ckpt_acts_sink ckpt_acts_sink;
void ckpt_acts_add(ckpt_acts_sink *sink, const char *name, ckpt_act_type type, int ndim, const int64_t *shape,
                   const int64_t *start, const int64_t *count, int has, const void *data);
/* The micro-batch the activations belong to (attributes of the group). */
void ckpt_acts_set_batch(ckpt_acts_sink *sink, int B, int T);

/* What the checkpoint package asks of the run, at a step boundary when a
 * checkpoint is due (collective over world; may be NULL). ZeRO-1 moment
 * chunks (tensor_store.mom_*) are exchanged with the replicas writing
 * them by the package itself. */
typedef struct {
  void *ctx;
  /* Recompute and add the activations the run stores (settings.activations:
   * the last micro-batch of the step, with the weights being saved). */
  void (*activations)(void *ctx, ckpt_acts_sink *sink);
} ckpt_hooks;

/* Removes temporaries a crash left in set->dir, starts the writer thread;
 * the session into *out. store: the tensors to save and load (parameters
 * and both AdamW moment arenas allocated, in store->be's memory: a training
 * state's store). 0 with *out NULL when no checkpoint is written or read
 * (no dir and no resume PATH; with a PATH and no dir the session reads
 * only); -1 with err, the same on every rank, on an unusable directory or
 * too little host memory for staging. */
int ckpt_open(const ckpt_settings *set, const process_grid *grid, tensor_store *store, const ckpt_hooks *hooks,
              ckpt_session **out, boost_status *err);

/* Applies set->resume (auto | none | PATH). With auto and the local level
 * on, first the newest local step every rank holds whole (ckpt_local.h)
 * when it is not older than the newest checkpoint file: msg then begins
 * "resumed from the local level". Otherwise: loads parameters and AdamW
 * moments into the arenas, the root attributes into *meta (ckpt_meta_free)
 * and the state datasets (ckpt_meta.h, CKPT_STATE_SETS) into *state
 * (malloc'd: ckpt_state_free; a set the file lacks is empty). Returns 1 when
 * resumed, 0 for a fresh start (meta absent, state empty), -1 on a fatal
 * problem; msg gets a one-line account for the log (what was loaded or
 * skipped and why). auto: the newest committed checkpoint in dir whose
 * checksums verify (bad ones are reported on stderr and skipped). PATH: that
 * file (or the newest good one in that directory); a bad file is fatal. A
 * file that fails may have been decoded into part of the arenas: the next
 * candidate overwrites all of them, and when none verifies this returns -1,
 * so training never starts from a file that did not verify, and 0 (a fresh
 * start) only where no checkpoint was read. */
int ckpt_resume(ckpt_session *s, ckpt_meta *meta, ckpt_state *state, char *msg, size_t msglen);

/* Where the session's start came from (after ckpt_resume): "fresh",
 * "local", "partner" (the local level, some ranks from partner copies) or
 * "file"; NULL s: "fresh". */
const char *ckpt_start_level(const ckpt_session *s);

/* The step guard's rollback (trainer/guard.h): waits for the checkpoint in
 * flight, sets aside every committed checkpoint of ckpt.dir newer than
 * max_step (one set-aside branch, *.h5.superseded.N, kept for a person up
 * to ckpt.keep_set_aside branches: ckpt_rollback.h; `latest` then names the
 * newest left; msg ends with what was set aside), and loads the newest one
 * left that verifies, as ckpt_resume with ckpt.resume=auto. Returns 1 when
 * loaded, 0 when none is left (nothing loaded: the caller starts over),
 * -1 when none that is left verifies. Collective over world. */
int ckpt_rollback(ckpt_session *s, int64_t max_step, ckpt_meta *meta, ckpt_state *state, char *msg, size_t msglen);

/* Staging is deferred: after ckpt_after_step stages a checkpoint, the writer
 * thread copies parameters and moments (the backend's copy stream, from the
 * state at the step boundary) while the next forward/backward runs (they
 * change only at the optimizer step). Call this right before every
 * optimizer step; it returns at once unless that copy is still running, and
 * the time it waits counts as the checkpoint's stall. A caller that never
 * calls it gets synchronous staging inside ckpt_after_step. NULL s is fine. */
void ckpt_before_update(ckpt_session *s);

/* Whether ckpt.staging_limit is below what this rank writes: the writer
 * then stages in turns, and a caller that updates the arenas in parts
 * (optimizer_step_parts) waits before each part with
 * ckpt_before_update_tensors instead of ckpt_before_update: for registry
 * tensors [t0, t1) only, so that the update of the first tensors runs while
 * the writer still stages the last ones. */
int ckpt_staging_bounded(const ckpt_session *s);
void ckpt_before_update_tensors(ckpt_session *s, int t0, int t1);

/* Whether this session writes checkpoints (settings.dir set); without a dir
 * a session only resumes from a resume PATH. */
int ckpt_writes(const ckpt_session *s);

/* The bits of a caller's `force`: a checkpoint file (the last step, a
 * preemption, the clock) and a local checkpoint (the local level's clock,
 * ckpt.local_every = auto). 1 is CKPT_DUE_FILE: a plain flag works. */
enum { CKPT_DUE_FILE = 1, CKPT_DUE_LOCAL = 2 };

/* Whether the checkpoint package saves after `step` (settings.every, or
 * force & CKPT_DUE_FILE). */
int ckpt_due(const ckpt_session *s, int64_t step, int force);

/* Whether the local level saves after `step` (settings.local_every, or
 * force & CKPT_DUE_LOCAL). */
int ckpt_due_local(const ckpt_session *s, int64_t step, int force);

/* The newest local save whose cost to training is known: its step and the
 * seconds training waited for it (-1: none yet). */
int64_t ckpt_local_cost(const ckpt_session *s, double *stall_s);

/* Starts a checkpoint of meta->run.step when one is due (ckpt_due); returns
 * immediately after staging. meta: the run's metadata block (the
 * CKPT_META_RUN fields of ckpt_meta.h; copied), state: the state datasets
 * (copied). status gets a short state for the step's log line
 * ("-", "step 40 staged, stall 1 ms", "step 20 committed 1.2 s 3.4 MiB
 * 1.18x", ...). If the previous checkpoint is still being written, waits for
 * it first and reports the wait. */
void ckpt_after_step(ckpt_session *s, const ckpt_meta *meta, const ckpt_state *state, int force,
                     char *status, size_t statuslen);

/* Waits for the checkpoint in flight to commit (or fail). Returns 0 when the
 * last checkpoint attempted committed (or none was attempted), -1 if not. */
int ckpt_wait(ckpt_session *s);

/* The step of the newest checkpoint this session committed or resumed from
 * (-1: none). */
int64_t ckpt_last_committed(const ckpt_session *s);
/* The run's identity (32 hex digits, ckpt_run_id.h) once ckpt_resume has
 * set it, for the root attribute run_id of every save; NULL before, or
 * without a session. */
const char *ckpt_run_identity(const ckpt_session *s);

/* ckpt_wait, then stops the writer thread and frees the session. */
void ckpt_close(ckpt_session *s);

/* Statistics of the last checkpoint whose outcome is known (for benchmarks
 * and tests). Returns 0, or -1 when none finished yet. */
typedef struct {
  long long step;
  int committed;
  double stall_s;       /* training blocked: staging + waiting for the deferred copy */
  double wait_prev_s;   /* waiting for the previous checkpoint before staging */
  double write_s;       /* writer: copy, checksums, write, commit */
  double raw_bytes[3];  /* weights, moments, activations (uncompressed) */
  double stored_bytes[3];
  double file_bytes;
} ckpt_stats;
int ckpt_last_stats(const ckpt_session *s, ckpt_stats *out);

#endif
