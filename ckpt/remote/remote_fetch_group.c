/* One download spread over the ranks (remote_fetch_group.h). */
#include "remote_fetch_group.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What rank 0 tells the others before a download; the parts' hashes follow. */
typedef struct fetch_job {
  long long step;
  uint64_t size, part;
  int nparts;
  int ok; /* 0: rank 0 could not make the temporary file: nothing to fetch */
  char tmp[4200];
} fetch_job;

/* Every rank's err: rank who's reason (the first rank that failed),
 * named by rank, after what that rank could not do. */
static int failed_at(MPI_Comm comm, int who, const char *what, boost_status *err) {
  int rank, ranks;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  char why[BOOST_STATUS_MSG] = "";
  if (rank == who) memcpy(why, err->msg, sizeof why);
  MPI_Bcast(why, (int)sizeof why, MPI_CHAR, who, comm);
  why[sizeof why - 1] = 0;
  if (ranks == 1) return -1; /* one process: its own reason says it all */
  return boost_err(err, "rank %d of %d could not %s: %s", who, ranks, what, why);
}

/* The first rank (from 0) where mine is 0; ranks when there is none. */
static int first_without(MPI_Comm comm, int mine) {
  int rank, ranks, who;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  int me = mine ? ranks : rank;
  MPI_Allreduce(&me, &who, 1, MPI_INT, MPI_MIN, comm);
  return who;
}

int remote_fetch_group(s3_client *c, MPI_Comm comm, const remote_ckpt *r, const char *path, int threads,
                       remote_group_result *res, boost_status *err) {
  int rank, ranks;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  memset(res, 0, sizeof *res);
  fetch_job j;
  memset(&j, 0, sizeof j);
  if (rank == 0) {
    j = (fetch_job){.step = r->step, .size = r->size, .part = r->part, .nparts = r->nparts};
    remote_fetch_temp(path, j.tmp, sizeof j.tmp);
    j.ok = remote_fetch_begin(r, j.tmp, err) == 0;
  }
  MPI_Bcast(&j, (int)sizeof j, MPI_BYTE, 0, comm);
  char what[160];
  if (!j.ok) {
    snprintf(what, sizeof what, "make the file for remote step %lld", j.step);
    return failed_at(comm, 0, what, err);
  }
  remote_ckpt mine = {.step = j.step, .size = j.size, .part = j.part, .nparts = j.nparts};
  mine.hashes = rank == 0 ? r->hashes : calloc((size_t)j.nparts, sizeof *mine.hashes);
  int *by_rank = calloc((size_t)ranks, sizeof *by_rank);
  const int have = mine.hashes && by_rank;
  if (!have) boost_err(err, "out of memory for a download of %d parts", j.nparts);
  int who = first_without(comm, have);
  if (who == ranks) {
    MPI_Bcast(mine.hashes, j.nparts, MPI_UINT64_T, 0, comm);
    int fetched = -1;
    if (remote_fetch_share(c, &mine, j.tmp, rank, ranks, threads, &fetched, err)) fetched = -1;
    /* Every rank learns who failed; every rank's file is closed after it. */
    MPI_Allgather(&fetched, 1, MPI_INT, by_rank, 1, MPI_INT, comm);
    for (who = 0; who < ranks && by_rank[who] >= 0; who++) {
    }
  }
  int rc = 0;
  if (who < ranks) {
    if (rank == 0) remote_fetch_end(j.tmp, path, 0, NULL); /* removed: the directory is as it was */
    snprintf(what, sizeof what, "fetch its share of remote step %lld", j.step);
    rc = failed_at(comm, who, what, err);
  } else {
    const int placed = rank != 0 || remote_fetch_end(j.tmp, path, 1, err) == 0;
    snprintf(what, sizeof what, "put the download of remote step %lld in place", j.step);
    if (first_without(comm, placed) == 0) rc = failed_at(comm, 0, what, err);
  }
  if (rc == 0 && rank == 0) {
    res->mib = (double)j.size / 1048576.0;
    res->nparts = j.nparts;
    res->ranks = ranks;
    for (int i = 0; i < ranks && i < 8; i++) res->by_rank[i] = by_rank[i];
  }
  if (rank != 0) free(mine.hashes);
  free(by_rank);
  return rc;
}
