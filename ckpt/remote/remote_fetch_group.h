/* One remote checkpoint downloaded by every rank at once into the shared
 * ckpt.dir, the mirror of remote_group.h's upload: rank 0, which read the
 * manifest, makes the temporary file (path.tmp, the file's size) and tells
 * the others the step, the sizes, the temporary's name and every part's
 * XXH3-64; each rank fetches its share of the parts (part i, from 0, is
 * rank i % ranks's, over threads connections of its own, each part checked
 * before it is written at its offset, its writes synced); the ranks agree
 * on the outcome; only when every rank fetched its share does rank 0 rename
 * the file into place (never over an existing file). On any failure the
 * temporary is removed and nothing else in the directory is touched.
 *
 * Collective over comm, on the calling (training) thread at a start. */
#ifndef BOOST_REMOTE_FETCH_GROUP_H
#define BOOST_REMOTE_FETCH_GROUP_H
#include <mpi.h>

#include "remote_group.h"
#include "remote_level.h"

/* Rank 0 passes the checkpoint r (its manifest) and the path it goes to;
 * the others pass NULL for both. 0 on every rank once path is in place, -1
 * on every rank otherwise, with one line in err: the failing rank's
 * reason, named by rank on every rank ("rank 1 of 2 could not fetch its
 * share ...: part 2 does not match ..."). What the download came to in
 * *res on rank 0 (by_rank: the parts each rank fetched). */
int remote_fetch_group(s3_client *c, MPI_Comm comm, const remote_ckpt *r, const char *path, int threads,
                       remote_group_result *res, boost_status *err);
#endif
