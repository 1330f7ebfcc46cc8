/* s3:// checkpoints for the tools (boost-inspect, boost-reshard, boost-eval,
 * boost-generate, boost-export): an argument
 *   s3://BUCKET/PREFIX                       the newest committed checkpoint there
 *   s3://BUCKET/PREFIX/step_<N>[/ckpt.h5]    that committed step
 * is downloaded (ranged GETs, every part checked against the manifest)
 * into a private temporary directory (mkdtemp under TMPDIR, mode 0700) as
 * step_<N, 8 digits>.h5, and the argument is replaced by that path. The
 * endpoint and region come from AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL and
 * AWS_REGION, the credentials as for the remote level. */
#ifndef BOOST_REMOTE_PATH_H
#define BOOST_REMOTE_PATH_H
#include <stddef.h>

#include "status.h"

/* Replaces each s3:// argument of argv[1..argc) by its downloaded copy's
 * path (malloc'd; the old pointer is left alone). tmpdir receives the
 * directory to remove afterwards ("" when nothing was downloaded). */
int remote_path_args(int argc, char **argv, char *tmpdir, size_t cap, boost_status *err);
/* Removes the files remote_path_args downloaded and their directory. */
void remote_path_cleanup(const char *tmpdir);
#endif
