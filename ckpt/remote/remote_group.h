/* One checkpoint file uploaded by every rank at once (the file is one
 * shared file in ckpt.dir): rank 0 starts the multipart upload and tells
 * the others its id; each rank sends its share of the parts (part i, from
 * 0, is rank i % ranks's; a rank sends its parts over threads connections,
 * one part in memory per connection, so a rank's memory is threads parts
 * whatever the file's size); the ranks agree on the outcome; rank 0 completes the
 * upload (ETags from ListParts) and writes the manifest last, or aborts
 * the upload when any rank failed.
 *
 * Every call is collective over comm, a communicator used by nothing but
 * the ranks' upload threads (MPI_THREAD_MULTIPLE): the training thread
 * never waits on it. */
#ifndef BOOST_REMOTE_GROUP_H
#define BOOST_REMOTE_GROUP_H
#include <mpi.h>

#include "s3_client.h"

#define REMOTE_GROUP_MAX_RANKS 4096

/* What an upload came to, on rank 0. */
typedef struct remote_group_result {
  double mib;     /* the file's size */
  int nparts;     /* parts of the upload */
  int by_rank[8]; /* parts each of the first 8 ranks sent */
  int ranks;      /* ranks that took part */
} remote_group_result;

/* Rank 0: uploads path (the committed file of step) with the other
 * ranks, which are in remote_group_follow. */
int remote_group_lead(s3_client *c, MPI_Comm comm, const char *path, long long step, const char *run_id,
                      int threads, remote_group_result *res, boost_status *err);
/* Ranks but 0: takes part in rank 0's next upload; its step in *step.
 * Returns 1 when rank 0 said stop (remote_group_stop), 0 after an upload
 * (whatever its outcome: rank 0 says it), -1 never. */
int remote_group_follow(s3_client *c, MPI_Comm comm, int threads, long long *step);
/* Rank 0: step is not uploaded (rank 0 could not even start: no link to
 * its file); the other ranks' remote_group_follow returns 0 with that step
 * at once, so their threads do not wait for a round that never comes. */
void remote_group_pass(MPI_Comm comm, long long step);
/* Rank 0: the other ranks' upload threads leave remote_group_follow. */
void remote_group_stop(MPI_Comm comm);
#endif
