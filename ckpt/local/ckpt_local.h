/* The local level: every ckpt.local_every steps each rank writes what its
 * layout holds -- its parameter and AdamW moment arenas as they are, and
 * the run's metadata block and state datasets -- to node-local storage
 * (ckpt.local_dir, by default a directory in /dev/shm named after the
 * run's ckpt.dir), with a checksum per part, and the step counts only once
 * every rank has written and renamed its own (docs/CHECKPOINT_FORMAT.md,
 * "The local level"). A restart on the same layout resumes from the newest
 * step every rank holds whole, when it is not older than the newest HDF5
 * checkpoint; anything else goes through the file.
 *
 * Every call is collective over the world and runs on the training thread
 * (the local level makes no HDF5 call, so it never meets the writer
 * thread). */
#ifndef BOOST_CKPT_LOCAL_H
#define BOOST_CKPT_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "status.h"

typedef struct ckpt_local ckpt_local;

/* The ranks of one node: MPI's shared-memory split, or, with the
 * environment's BOOST_RANKS_PER_NODE=K, world ranks [0, K), [K, 2K), ...
 * (tests on one machine). node_id: the node's lowest world rank. */
typedef struct {
  MPI_Comm comm;
  int rank, size, node_id;
} ckpt_node;
int ckpt_node_split(MPI_Comm world, ckpt_node *out);

/* The local level into *out: 0 with *out NULL when the level is off
 * (ckpt.local_every 0, or no ckpt.dir); -1 with err, the same on every
 * rank, when ckpt.local_dir cannot be made or the node has no room for two
 * copies of its ranks' state (err gives the size needed). note: what it
 * holds and uses, for the start's log. */
int ckpt_local_open(const ckpt_settings *cfg, const process_grid *grid, tensor_store *store, char *note,
                    size_t notelen, ckpt_local **out, boost_status *err);
void ckpt_local_close(ckpt_local *L);

/* Before the model is built (rank 0 alone, no MPI): the metadata block of
 * the newest local step of the run run_id (ckpt_run_id.h; "": none) rank 0
 * holds in its own directory under the settings' local directory (checked
 * against its checksum, its state part agreeing with its manifest), for
 * the resume plan's checks (docs/LOCAL.md). 1 with *meta (ckpt_meta_free),
 * 0 when there is none; *where names the step's directory. */
int ckpt_local_peek(const ckpt_settings *cfg, const char *run_id, ckpt_meta *meta, char *where, size_t wherelen);

/* The run's identity (32 hex digits, ckpt_run_id.h): written into every
 * manifest from now on; a restore, the census and every removal take only
 * the steps that carry it (another run's are passed over and left alone).
 * Every rank the same, before ckpt_local_restore and the first save. */
void ckpt_local_set_run(ckpt_local *L, const char *run_id);

/* Whether a local checkpoint of `step` is due: every `local_every` steps,
 * or when asked (ckpt.local_every = auto: the caller's clock). */
int ckpt_local_due(const ckpt_local *L, int64_t step, int asked);
/* The newest save whose outcome was collected (-1: none) and what it cost
 * training in seconds: its call and the optimizer's waits for it. */
int64_t ckpt_local_last_stall(const ckpt_local *L, double *stall_s);

/* A local checkpoint of meta->run.step from the arenas at the step boundary.
 * Where the arenas are host memory it runs on the local writer thread
 * while training goes on (the previous one waited for first): the caller
 * calls ckpt_local_before_update before the optimizer changes the arenas;
 * note->msg tells the previous save's outcome for the step line ("local
 * step 11 3.1 ms", "local step 11 FAILED": the step before it stays the
 * newest, one warning line on rank 0 says why). Otherwise (device memory,
 * BOOST_CKPT_SYNC=1) it runs here and note->msg tells this one's. Returns
 * -1 (note failed) only when an inline save failed. */
int ckpt_local_save(ckpt_local *L, const ckpt_meta *meta, const ckpt_state *state, boost_status *note);
/* Until the save in flight no longer reads the arenas (NULL L: nothing). */
void ckpt_local_before_update(ckpt_local *L);
/* Until the save in flight is committed or failed; its outcome as above. */
void ckpt_local_wait(ckpt_local *L, boost_status *note);

/* The newest step every rank holds, verified, loaded into the arenas and
 * *meta / *state (rank 0's metadata block), provided it is not older than
 * file_step (the newest HDF5 checkpoint, -1: none). Returns 1 when loaded,
 * 0 otherwise (msg says why when a local step was there: another layout, a
 * damaged part named by its path; the arenas are then zeroed, so nothing
 * half-loaded is trained from). */
int ckpt_local_restore(ckpt_local *L, int64_t file_step, ckpt_meta *meta, ckpt_state *state, char *msg,
                       size_t msglen);

/* After a start: every local step but `keep` (-1: all) removed. */
void ckpt_local_keep_only(ckpt_local *L, int64_t keep);
/* The guard's rollback: local steps newer than max_step removed (an
 * abandoned branch must never be resumed). */
void ckpt_local_drop_newer(ckpt_local *L, int64_t max_step);

/* At the end of a run whose newest checkpoint file (file_step) is as new
 * as the local level: the local steps and this rank's directory removed
 * (node memory is not left holding a copy of what the file holds), and
 * ckpt.local_dir too once empty. */
void ckpt_local_retire(ckpt_local *L, int64_t file_step);

/* How many ranks the last restore took from partner copies. */
int ckpt_local_restored_from_partner(const ckpt_local *L);

/* The newest committed local step (-1: none) and its save's seconds. */
int64_t ckpt_local_last(const ckpt_local *L);
double ckpt_local_last_seconds(const ckpt_local *L);

#endif
