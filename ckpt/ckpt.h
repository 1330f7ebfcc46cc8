/* Checkpoint session: asynchronous, compressed, sharded writes of a run's
 * whole state into one parallel-HDF5 file per checkpoint, atomic commit,
 * retention, and resume. See docs/CHECKPOINT_FORMAT.md.
 *
 * The run calls, on every rank:
 *   ckpt_open(&settings, grid, store, &s, err)
 *                                            (s NULL when nothing is written or read)
 *   ckpt_resume(s, &meta, &state, &note)     once, before the first step
 *   ckpt_fence_wait(fence, t0, t1)           in every step, before the optimizer
 *   (or ckpt_fence_wait_all(fence))          changes tensors [t0, t1) of the arenas
 *   fence = ckpt_submit(s, &request, &note)  after every optimizer step (ckpt_due
 *                                            and ckpt_due_local say whether it saves)
 *   ckpt_close(s)                            waits for the last commit
 * All calls are collective over grid->world except the fence waits.
 *
 * The package knows nothing of the training side and never calls it: it
 * takes its settings (ckpt_settings) at open and, at each save, a request
 * the run built (ckpt_save_request: the root attributes of ckpt_meta.h the
 * run provides, its state datasets -- the loss and validation histories,
 * the run's starts -- and the activations it recomputed); tensors are the
 * registry's arenas, moved through its backend (kernels/backend.h) and,
 * between ranks, through the comm layer. What a save still reads of the
 * arenas after the submit returns is its staging fence.
 *
 * One writer thread per rank makes every HDF5 call of the process (HDF5 is
 * not thread-safe), on its own duplicates of the world and data-parallel
 * communicators (MPI_THREAD_MULTIPLE). Switches of the environment:
 *   BOOST_CKPT_SYNC=1              save synchronously (ckpt_submit returns
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
#include "ckpt_remote.h"
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
  int activations;           /* the run's requests carry activations (ckpt_save_request.acts) */
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
  ckpt_remote_settings remote; /* the remote level (ckpt/remote/ckpt_remote.h; url "": off) */
} ckpt_settings;

typedef struct ckpt_session ckpt_session;

/* Activations a checkpoint stores (ckpt.activations): the run recomputes
 * them and adds datasets to a set its save request carries; every rank adds
 * the same names in the same order (its pipeline stage's), each with the
 * global shape, this rank's hyperslab and its data, which is copied. CKPT_ACT_BF16 data are bfloat16 bit
 * patterns (uint16_t, the top half of a float32), stored as the bfloat16
 * file type of ckpt_h5.h and checksummed as the float32 values they widen
 * to. */
typedef enum { CKPT_ACT_F32 = 0, CKPT_ACT_I32, CKPT_ACT_I64, CKPT_ACT_BF16 } ckpt_act_type;
/* Bytes per element of an activation type. */
size_t ckpt_act_esize(ckpt_act_type type);
typedef struct ckpt_acts_sink ckpt_acts_sink;
/* An empty set (ckpt_acts_delete frees it and what it holds). */
ckpt_acts_sink *ckpt_acts_new(void);
void ckpt_acts_delete(ckpt_acts_sink *sink);
void ckpt_acts_add(ckpt_acts_sink *sink, const char *name, ckpt_act_type type, int ndim, const int64_t *shape,
                   const int64_t *start, const int64_t *count, int has, const void *data);
/* The micro-batch the activations belong to (attributes of the group). */
void ckpt_acts_set_batch(ckpt_acts_sink *sink, int B, int T);

/* Removes temporaries a crash left in set->dir, starts the writer thread;
 * the session into *out. store: the tensors to save and load (parameters
 * and both AdamW moment arenas allocated, in store->be's memory: a training
 * state's store). 0 with *out NULL when no checkpoint is written or read
 * (no dir and no resume PATH; with a PATH and no dir the session reads
 * only); -1 with err, the same on every rank, on an unusable directory or
 * too little host memory for staging. */
int ckpt_open(const ckpt_settings *set, const process_grid *grid, tensor_store *store, ckpt_session **out,
              boost_status *err);

/* Applies set->resume (auto | none | PATH). With auto and the local level
 * on, first the newest local step every rank holds whole (ckpt_local.h)
 * when it is not older than the newest checkpoint file: note->msg then
 * begins "resumed from the local level". Otherwise: loads parameters and AdamW
 * moments into the arenas, the root attributes into *meta (ckpt_meta_free)
 * and the state datasets (ckpt_meta.h, CKPT_STATE_SETS) into *state
 * (malloc'd: ckpt_state_free; a set the file lacks is empty). Returns 1 when
 * resumed, 0 for a fresh start (meta absent, state empty), -1 on a fatal
 * problem (note failed, saying why); otherwise note->msg gets a one-line
 * account for the log (what was loaded or skipped and why), note->failed
 * stays 0. auto: the newest committed checkpoint in dir whose checksums
 * verify (bad ones are reported as warnings, kernels/log.h, and skipped). PATH: that
 * file (or the newest good one in that directory); a bad file is fatal. A
 * file that fails may have been decoded into part of the arenas: the next
 * candidate overwrites all of them, and when none verifies this returns -1,
 * so training never starts from a file that did not verify, and 0 (a fresh
 * start) only where no checkpoint was read. */
int ckpt_resume(ckpt_session *s, ckpt_meta *meta, ckpt_state *state, boost_status *note);

/* Where the session's start came from (after ckpt_resume): "fresh",
 * "local", "partner" (the local level, some ranks from partner copies) or
 * "file"; NULL s: "fresh". */
const char *ckpt_start_level(const ckpt_session *s);

/* The step guard's rollback (trainer/guard.h): waits for the checkpoint in
 * flight, sets aside every committed checkpoint of ckpt.dir newer than
 * max_step (one set-aside branch, *.h5.superseded.N, kept for a person up
 * to ckpt.keep_set_aside branches: ckpt_rollback.h; `latest` then names the
 * newest left; note->msg ends with what was set aside), and loads the
 * newest one left that verifies, as ckpt_resume with ckpt.resume=auto.
 * Returns 1 when loaded, 0 when none is left (nothing loaded: the caller
 * starts over), -1 (note failed) when none that is left verifies.
 * Collective over world. */
int ckpt_rollback(ckpt_session *s, int64_t max_step, ckpt_meta *meta, ckpt_state *state, boost_status *note);

/* What a save still reads of the arenas after ckpt_submit returned: its
 * staging fence. Staging is deferred: the writer thread copies parameters
 * and moments (the backend's copy stream, from the state at the step
 * boundary; the local level's thread likewise) while the next
 * forward/backward runs, which change them only at the optimizer step. The
 * caller waits on the fence right before it changes registry tensors
 * [t0, t1): it returns at once unless their copy is still running, and the
 * time it waits counts as the checkpoint's stall. A fence of no session
 * (s NULL) is passed at once. */
typedef struct {
  ckpt_session *s;
  int64_t step; /* the step whose save it fences (-1: none staged by that submit) */
} ckpt_fence;
/* The fence before any save (nothing staged yet). */
ckpt_fence ckpt_fence_start(ckpt_session *s);
void ckpt_fence_wait(ckpt_fence f, int t0, int t1);
/* The fence over every tensor: before an update of the arenas whole. */
void ckpt_fence_wait_all(ckpt_fence f);

/* Whether ckpt.staging_limit is below what this rank writes: the writer
 * then stages in turns, and a caller that updates the arenas in parts
 * (optim_parts) waits on the fence before each part for its tensors only,
 * so that the update of the first tensors runs while the writer still
 * stages the last ones. */
int ckpt_staging_bounded(const ckpt_session *s);

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

/* A save the run asks for at a step boundary: what it is, not how to make
 * it (the run builds it; the package only copies it). */
typedef struct {
  const ckpt_meta *meta;   /* the run's metadata block (the CKPT_META_RUN fields of ckpt_meta.h; copied) */
  const ckpt_state *state; /* the state datasets (copied) */
  /* The activations the run recomputed for a file save (settings.activations:
   * the last micro-batch of the step, with the weights being saved; every
   * rank passes one when ckpt_due says a file is saved, NULL otherwise).
   * The save takes what it holds and leaves it empty. */
  ckpt_acts_sink *acts;
  int force;  /* CKPT_DUE_* bits: a file and/or a local checkpoint asked for */
  int fenced; /* the caller waits on the returned fence before it changes the arenas: staging may be deferred
                 (0: staged before ckpt_submit returns) */
  double build_s; /* seconds the run spent building it (the activations' recompute): counted in the save's stall */
} ckpt_save_request;

/* Starts the saves of req->meta->run.step that are due (ckpt_due,
 * ckpt_due_local); returns after staging, with the fence the caller waits
 * on before it next changes the arenas. note->msg gets a short state for
 * the step's log line ("-", "step 40 staged, stall 1 ms", "step 20
 * committed 1.2 s 3.4 MiB 1.18x", ...); note->failed stays 0: a save that
 * fails is reported there and in its warning line, and training goes on.
 * If the previous checkpoint is still being written, waits for it first and
 * reports the wait. NULL s: note "-" and a passed fence. */
ckpt_fence ckpt_submit(ckpt_session *s, const ckpt_save_request *req, boost_status *note);

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
