/* The remote level inside a checkpoint session (docs/CHECKPOINT_FORMAT.md,
 * "The remote level"): what ckpt_session calls at three places.
 *
 *   ckpt_remote_open       at ckpt_open, collective: rank 0 reaches the
 *                          store (a wrong credential or a missing bucket
 *                          refuses the start: the run asked for a level it
 *                          would silently not have) and aborts this
 *                          prefix's orphaned multipart uploads
 *   ckpt_remote_fetch      at ckpt_resume, collective: when the newest
 *                          committed remote checkpoint (rank 0 reads the
 *                          manifests) is newer than the newest file in
 *                          ckpt.dir, every rank downloads its share of the
 *                          parts there (remote_fetch_group.h: ranged GETs
 *                          in parallel, every part checked; rank 0 renames
 *                          the file into place once all agree) and the run
 *                          resumes from it as from a file, on any layout
 *   ckpt_remote_committed  every rank, after a checkpoint file commits: every
 *                          `every`-th one is uploaded by the ranks' background
 *                          threads while training goes on, each rank sending
 *                          its share of the parts (remote_group.h) over the
 *                          threads' own communicator. It holds no collective
 *                          of the training thread;
 *                          a failure is a warning and the run trains on
 *                          (the remote level is behind, and the log says
 *                          so); the next commit tries again
 *   ckpt_remote_close      at ckpt_close: hands over the last committed file
 *                          when ckpt.remote_every passed it over, waits up
 *                          to grace_s for the upload in flight and says
 *                          whether it made it
 *
 * The file is uploaded through a hard link (.remote-upload-step_N.h5 in
 * ckpt.dir) so that the file level's retention may delete the file while
 * it is being sent. */
#ifndef BOOST_CKPT_REMOTE_H
#define BOOST_CKPT_REMOTE_H
#include <mpi.h>
#include <stdint.h>

#include "status.h"

typedef struct ckpt_remote_settings {
  char url[512];      /* ckpt.remote: s3://BUCKET/PREFIX ("": no remote level) */
  char endpoint[256]; /* ckpt.remote_endpoint ("": AWS) */
  char region[64];    /* ckpt.remote_region ("": AWS_REGION, else us-east-1) */
  int every;          /* ckpt.remote_every: every Nth committed file (default 1) */
  int keep;           /* ckpt.remote_keep: newest kept (default 2; 0: all) */
  int grace_s;        /* ckpt.remote_grace: seconds ckpt_close waits for the upload in flight (default 60) */
} ckpt_remote_settings;

typedef struct ckpt_remote ckpt_remote;

/* NULL in *out when set->url is empty. Collective over world. dir: ckpt.dir
 * (upload links a killed run left there are removed). */
int ckpt_remote_open(ckpt_remote **out, const ckpt_remote_settings *set, const char *dir, MPI_Comm world,
                     boost_status *err);
/* Collective. Downloads the newest remote checkpoint into dir (shared by
 * the ranks) when it is newer than file_step, each rank fetching its share,
 * and points dir's latest at it; its step in *fetched (-1: nothing
 * fetched). On failure every rank returns -1 with one line naming the rank
 * that failed and why, and dir is as it was. */
int ckpt_remote_fetch(ckpt_remote *r, MPI_Comm world, const char *dir, int64_t file_step, int64_t *fetched,
                      boost_status *err);
/* Every rank: dir/step_N.h5 of step committed; run_id the run's identity. */
void ckpt_remote_committed(ckpt_remote *r, const char *dir, int64_t step, const char *run_id);
/* Waits for the upload in flight (at most the grace period), stops the
 * thread, frees r. NULL is fine. */
void ckpt_remote_close(ckpt_remote *r);
/* The newest committed remote step known to rank 0: the store's at the
 * start, then each one this run uploaded (-1: none). */
int64_t ckpt_remote_uploaded(const ckpt_remote *r);
#endif
