/* Multipart upload of one file and ranged, parallel download (S3 API:
 * CreateMultipartUpload, UploadPart, ListParts, CompleteMultipartUpload,
 * AbortMultipartUpload; GET with Range), plus listing (ListObjectsV2 and
 * ListMultipartUploads, following continuation tokens and markers past a
 * page of 1,000) and deletes.
 *
 * A file is cut into parts of s3_part_size bytes (5 MiB to 5 GiB, at most
 * 10,000 parts, S3's limits). Workers (threads of one process, or ranks of
 * a job: worker w of n sends parts w+1, w+1+n, ...) each hold one part in
 * memory at a time, so a worker's memory is one part, whatever the file's
 * size. Each part's XXH3-64 is computed as it is sent and goes into the
 * remote manifest; the download checks every part against it. A download
 * is spread the same way: part i (from 0) is rank i % ranks's, each rank
 * writing its parts at their offsets in one file made beforehand.
 *
 * The finisher learns the parts' ETags from ListParts rather than from the
 * workers, so workers on other ranks hand over nothing but "done". */
#ifndef BOOST_S3_MULTIPART_H
#define BOOST_S3_MULTIPART_H
#include <stdint.h>

#include "s3_client.h"

#define S3_PART_MIN (5ull << 20)
#define S3_PART_MAX (5ull << 30)
#define S3_PARTS_MAX 10000

/* The part size for a file of size bytes: wanted (0: 16 MiB) raised to
 * S3_PART_MIN and to what keeps the count at most S3_PARTS_MAX, rounded up
 * to a MiB; 0 when even 5 GiB parts would need more than 10,000. */
uint64_t s3_part_size(uint64_t size, uint64_t wanted);
/* Parts for a file of size bytes (at least 1: an empty file is one empty part). */
int s3_part_count(uint64_t size, uint64_t part);

int s3_multipart_create(s3_client *c, const char *key, char *upload_id, size_t cap, boost_status *err);
/* Sends the parts of path that belong to worker w of n, recording each
 * part's XXH3-64 in hashes[part-1]. */
int s3_multipart_send(s3_client *c, const char *key, const char *upload_id, const char *path, uint64_t size,
                      uint64_t part, int w, int n, uint64_t *hashes, boost_status *err);
/* Rank rank's share of an upload spread over ranks ranks, on threads
 * connections (1 to 64; the same on every rank): part i (from 0) is rank
 * i % ranks's, so even a file of few parts is spread over the ranks. */
int s3_multipart_send_share(s3_client *c, const char *key, const char *upload_id, const char *path, uint64_t size,
                            uint64_t part, int rank, int ranks, int threads, uint64_t *hashes, boost_status *err);
/* Completes the upload of nparts parts (ETags from ListParts). */
int s3_multipart_complete(s3_client *c, const char *key, const char *upload_id, int nparts, boost_status *err);
int s3_multipart_abort(s3_client *c, const char *key, const char *upload_id, boost_status *err);

/* The whole upload in this process with threads workers (each its own
 * connection): create, send, complete; aborted on failure. */
int s3_upload_file(s3_client *c, const char *path, const char *key, uint64_t part, int threads, uint64_t *size_out,
                   uint64_t **hashes_out, boost_status *err);
/* A download spread over ranks, the mirror of an upload's shares: one
 * process makes path, size bytes (s3_download_create), before the others
 * open it; then each rank fetches its share of key's parts into it
 * (s3_download_share: part i, from 0, is rank i % ranks's, threads ranged
 * GETs at once, part i checked against hashes[i] (NULL: no check) before it
 * is written at its offset, the parts it fetched in *fetched; its writes
 * synced before it returns). */
int s3_download_create(const char *path, uint64_t size, boost_status *err);
int s3_download_share(s3_client *c, const char *key, uint64_t size, uint64_t part, const uint64_t *hashes,
                      const char *path, int rank, int ranks, int threads, int *fetched, boost_status *err);

/* Small objects. */
int s3_put(s3_client *c, const char *key, const void *data, size_t len, boost_status *err);
int s3_get(s3_client *c, const char *key, s3_buf *out, boost_status *err);
int s3_delete(s3_client *c, const char *key, boost_status *err);

/* Calls each(key, size, user) for every object under prefix, page after
 * page (max-keys BOOST_S3_LIST_MAX, default 1000); each returning
 * non-zero stops. */
typedef int (*s3_object_fn)(const char *key, uint64_t size, void *user);
int s3_list(s3_client *c, const char *prefix, s3_object_fn each, void *user, boost_status *err);
/* Calls each(key, upload_id, user) for every multipart upload in progress under prefix. */
typedef int (*s3_upload_fn)(const char *key, const char *upload_id, void *user);
int s3_list_uploads(s3_client *c, const char *prefix, s3_upload_fn each, void *user, boost_status *err);
#endif
