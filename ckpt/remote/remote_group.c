/* One upload spread over the ranks (remote_group.h). */
#include "remote_group.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "remote_level.h"
#include "s3_multipart.h"

/* What rank 0 tells the others before an upload (or that they stop). */
typedef struct group_job {
  long long step; /* -1: stop */
  int ok;         /* 0: rank 0 could not start the upload: nothing to send */
  int pad;
  uint64_t size, part;
  char upload_id[512];
  char path[1100]; /* rank 0's hard link to the committed file, in the shared ckpt.dir */
} group_job;

/* Parts worker w of n sends of nparts. */
static int parts_of(int w, int n, int nparts) { return w < nparts ? (nparts - 1 - w) / n + 1 : 0; }

/* This rank's share: its parts' XXH3-64s into hashes; the parts it sent, or -1. */
static int send_share(s3_client *c, MPI_Comm comm, const group_job *j, int threads, uint64_t *hashes,
                      boost_status *err) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  char key[1024];
  remote_data_key(c, j->step, key, sizeof key);
  const int nparts = s3_part_count(j->size, j->part), n = size * threads;
  const char *fail = getenv("BOOST_S3_TEST_FAIL_RANK"); /* test hook: this rank's share fails */
  if (fail && atoi(fail) == rank) return boost_err(err, "BOOST_S3_TEST_FAIL_RANK=%d: the share of this rank fails", rank);
  if (s3_multipart_send_share(c, key, j->upload_id, j->path, j->size, j->part, rank, size, threads, hashes, err))
    return -1;
  int sent = 0;
  for (int t = 0; t < threads; t++) sent += parts_of(t * size + rank, n, nparts);
  return sent;
}

/* The ranks agree: 1 when every rank sent its share (rank 0 then holds
 * every part's hash); what each rank sent in by_rank (rank 0, size entries). */
static int agree(MPI_Comm comm, int sent, int nparts, uint64_t *hashes, int *by_rank) {
  int rank, ok = sent >= 0, all = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
  if (all) /* each part's hash is non-zero on the one rank that sent it */
    MPI_Reduce(rank == 0 ? MPI_IN_PLACE : hashes, hashes, nparts, MPI_UINT64_T, MPI_BOR, 0, comm);
  MPI_Gather(&sent, 1, MPI_INT, by_rank, 1, MPI_INT, 0, comm);
  return all;
}

int remote_group_lead(s3_client *c, MPI_Comm comm, const char *path, long long step, const char *run_id,
                      int threads, remote_group_result *res, boost_status *err) {
  memset(res, 0, sizeof *res);
  group_job j = {.step = step};
  snprintf(j.path, sizeof j.path, "%s", path);
  char key[1024];
  remote_data_key(c, step, key, sizeof key);
  struct stat sb;
  int rc = stat(path, &sb) ? boost_err(err, "cannot stat %s: %s", path, strerror(errno)) : 0;
  if (rc == 0) {
    j.size = (uint64_t)sb.st_size;
    j.part = remote_part_size(j.size);
    if (!j.part)
      rc = boost_err(err, "%s: %llu bytes is more than S3's 10,000 parts of 5 GiB", path, (unsigned long long)j.size);
  }
  if (rc == 0) rc = s3_multipart_create(c, key, j.upload_id, sizeof j.upload_id, err);
  j.ok = rc == 0;
  MPI_Bcast(&j, (int)sizeof j, MPI_BYTE, 0, comm);
  if (rc) return -1;
  int size;
  MPI_Comm_size(comm, &size);
  const int nparts = s3_part_count(j.size, j.part);
  uint64_t *hashes = calloc((size_t)nparts, sizeof *hashes);
  int *by_rank = calloc((size_t)size, sizeof *by_rank);
  int sent = hashes && by_rank ? send_share(c, comm, &j, threads, hashes, err)
                               : boost_err(err, "out of memory for an upload of %d parts", nparts);
  const int all = agree(comm, sent, nparts, hashes, by_rank);
  if (sent >= 0 && !all) {
    int who = 1;
    while (who < size && by_rank[who] >= 0) who++;
    rc = boost_err(err, "rank %d could not send its parts of %s (its log says why)", who, key);
  } else if (sent < 0) {
    rc = -1;
  }
  if (rc == 0) rc = s3_multipart_complete(c, key, j.upload_id, nparts, err);
  if (rc) s3_multipart_abort(c, key, j.upload_id, NULL); /* best effort: the next start cleans what is left */
  if (rc == 0) rc = remote_put_manifest(c, step, j.size, j.part, hashes, run_id, err);
  if (rc == 0) {
    res->mib = (double)j.size / 1048576.0;
    res->nparts = nparts;
    res->ranks = size;
    for (int r = 0; r < size && r < 8; r++) res->by_rank[r] = by_rank[r];
  }
  free(hashes);
  free(by_rank);
  return rc;
}

int remote_group_follow(s3_client *c, MPI_Comm comm, int threads, long long *step) {
  group_job j;
  MPI_Bcast(&j, (int)sizeof j, MPI_BYTE, 0, comm);
  *step = j.step;
  if (j.step < 0) return 1;
  if (!j.ok) return 0;
  const int nparts = s3_part_count(j.size, j.part);
  uint64_t *hashes = calloc((size_t)nparts, sizeof *hashes);
  boost_status err = {0};
  int sent = hashes ? send_share(c, comm, &j, threads, hashes, &err)
                    : boost_err(&err, "out of memory for an upload of %d parts", nparts);
  if (sent < 0 && !s3_client_cancelled(c)) {
    int rank;
    MPI_Comm_rank(comm, &rank);
    boost_log_warn("remote: rank %d could not send its parts of step %lld: %s", rank, j.step, err.msg);
  }
  agree(comm, sent, nparts, hashes, NULL);
  free(hashes);
  return 0;
}

/* Rank 0: a round with nothing to send (ok = 0) for step, or stop (-1). */
static void announce_no_upload(MPI_Comm comm, long long step) {
  group_job j;
  memset(&j, 0, sizeof j);
  j.step = step;
  MPI_Bcast(&j, (int)sizeof j, MPI_BYTE, 0, comm);
}

void remote_group_pass(MPI_Comm comm, long long step) { announce_no_upload(comm, step); }

void remote_group_stop(MPI_Comm comm) { announce_no_upload(comm, -1); }
