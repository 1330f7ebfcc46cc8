/* The remote checkpoint level: checkpoint files in an object store
 * (docs/CHECKPOINT_FORMAT.md, "The remote level").
 *
 * Under ckpt.remote = s3://BUCKET/PREFIX a checkpoint of step N is two
 * objects:
 *   PREFIX/step_<N, 12 digits>/ckpt.h5        the checkpoint file, byte for byte
 *   PREFIX/step_<N, 12 digits>/manifest.json  written LAST, after every part
 * The manifest holds the format ("boost-remote 1"), the step, the file's
 * size, the part size and each part's XXH3-64, and the run's identity.
 * Committed means: the manifest exists. A reader never takes a ckpt.h5
 * without its manifest; retention deletes the manifest first, so a half
 * deleted checkpoint is never taken either. */
#ifndef BOOST_REMOTE_LEVEL_H
#define BOOST_REMOTE_LEVEL_H
#include <stdint.h>

#include "s3_client.h"

/* What a manifest says. */
typedef struct remote_ckpt {
  long long step;
  uint64_t size, part;
  int nparts;
  uint64_t *hashes; /* nparts XXH3-64s (remote_ckpt_free) */
  char run_id[40];
} remote_ckpt;

void remote_ckpt_free(remote_ckpt *r);

/* Uploads the committed checkpoint file path of step as the step's data
 * object (multipart, threads connections), then its manifest. 0 once the
 * manifest is written; on failure the upload is aborted and nothing counts. */
int remote_push(s3_client *c, const char *path, long long step, const char *run_id, int threads,
                boost_status *err);
/* The pieces of remote_push for an upload shared by ranks (remote_group.h):
 * the data object's key of step, the part size for a file of size bytes
 * (BOOST_S3_PART_MIB, default 16 MiB, within S3's limits; 0: too large),
 * and the manifest, written once every part is in. */
void remote_data_key(s3_client *c, long long step, char *out, size_t cap);
uint64_t remote_part_size(uint64_t size);
int remote_put_manifest(s3_client *c, long long step, uint64_t size, uint64_t part, const uint64_t *hashes,
                        const char *run_id, boost_status *err);
/* The newest committed remote checkpoint into out: 1 when there is one, 0
 * when there is none, -1 with err. */
int remote_newest(s3_client *c, remote_ckpt *out, boost_status *err);
/* The manifest of a committed step into out; -1 with err when the step
 * has none (not committed) or it does not parse. */
int remote_manifest(s3_client *c, long long step, remote_ckpt *out, boost_status *err);
/* Downloads r into path in this process (remote_fetch_share of rank 0 of 1
 * between remote_fetch_begin and remote_fetch_end). */
int remote_fetch(s3_client *c, const remote_ckpt *r, const char *path, int threads, boost_status *err);
/* The pieces of remote_fetch for a download shared by ranks
 * (remote_fetch_group.h): the temporary of path (path.tmp, which a start
 * of the file level removes should a download be killed), made r->size
 * bytes by one process (remote_fetch_begin) before the ranks write their
 * shares into it (remote_fetch_share: part i, from 0, is rank i % ranks's,
 * each checked against the manifest's XXH3-64 before it is written; the
 * parts fetched in *fetched), then renamed to path, never over an existing
 * file, and the directory synced (remote_fetch_end with ok; without ok, or
 * when that fails, the temporary is removed: -1). */
void remote_fetch_temp(const char *path, char *tmp, size_t cap);
int remote_fetch_begin(const remote_ckpt *r, const char *tmp, boost_status *err);
int remote_fetch_share(s3_client *c, const remote_ckpt *r, const char *tmp, int rank, int ranks, int threads,
                       int *fetched, boost_status *err);
int remote_fetch_end(const char *tmp, const char *path, int ok, boost_status *err);
/* Keeps the keep newest committed checkpoints and deletes the rest (keep <= 0: all kept). */
int remote_retain(s3_client *c, int keep, boost_status *err);
/* Aborts every multipart upload left under the prefix (a run killed while
 * uploading leaves one); the number aborted in *n. Call at a start, before
 * any upload of this run. */
int remote_clean_orphans(s3_client *c, int *n, boost_status *err);
#endif
