/* Drives the remote level for tests/mpi/remote_s3.sh against a real
 * S3-compatible server: one subcommand per call, one line per answer.
 *
 *   remote_check URL push FILE STEP [THREADS]   upload a checkpoint file, manifest last
 *   remote_check URL newest                     "newest STEP SIZE PARTS RUN" or "newest none"
 *   remote_check URL fetch DEST [THREADS]       download the newest, verified
 *   remote_check URL retain KEEP                keep the KEEP newest
 *   remote_check URL orphans                    "orphans N" (aborted)
 *   remote_check URL start-upload KEY           begin a multipart upload and leave it
 *   remote_check URL count PREFIX               "count N" objects under PREFIX (paged listing)
 *   remote_check URL put KEY FILE               one small object
 *   remote_check URL get KEY FILE               one small object into FILE
 *   remote_check URL mkbucket                   create the bucket (test set-up)
 *
 * The endpoint comes from BOOST_S3_ENDPOINT, credentials as the AWS tools
 * find them. Exit 0, or 1 with the library's one line on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "remote_level.h"
#include "s3_multipart.h"

static int count_one(const char *key, uint64_t size, void *user) {
  (void)key, (void)size;
  (*(long *)user)++;
  return 0;
}

static int run(s3_client *c, int argc, char **argv, boost_status *err) {
  const char *cmd = argv[2];
  int threads = 4;
  if (!strcmp(cmd, "push") && argc >= 5) {
    if (argc > 5) threads = atoi(argv[5]);
    if (remote_push(c, argv[3], atoll(argv[4]), "00112233445566778899aabbccddeeff", threads, err)) return -1;
    printf("pushed %s\n", argv[4]);
  } else if (!strcmp(cmd, "newest") || (!strcmp(cmd, "fetch") && argc >= 4)) {
    remote_ckpt r;
    int got = remote_newest(c, &r, err);
    if (got < 0) return -1;
    if (!got) {
      printf("newest none\n");
      return 0;
    }
    if (argc > 4) threads = atoi(argv[4]);
    int rc = !strcmp(cmd, "fetch") ? remote_fetch(c, &r, argv[3], threads, err) : 0;
    if (rc == 0) printf("newest %lld %llu %d %s\n", r.step, (unsigned long long)r.size, r.nparts, r.run_id);
    remote_ckpt_free(&r);
    return rc;
  } else if (!strcmp(cmd, "retain") && argc >= 4) {
    return remote_retain(c, atoi(argv[3]), err);
  } else if (!strcmp(cmd, "orphans")) {
    int n;
    if (remote_clean_orphans(c, &n, err)) return -1;
    printf("orphans %d\n", n);
  } else if (!strcmp(cmd, "start-upload") && argc >= 4) {
    char id[512];
    if (s3_multipart_create(c, argv[3], id, sizeof id, err)) return -1;
    printf("started\n");
  } else if (!strcmp(cmd, "count") && argc >= 4) {
    long n = 0;
    if (s3_list(c, argv[3], count_one, &n, err)) return -1;
    printf("count %ld\n", n);
  } else if (!strcmp(cmd, "put") && argc >= 5) {
    FILE *f = fopen(argv[4], "rb");
    if (!f) return boost_err(err, "cannot open %s", argv[4]);
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return s3_put(c, argv[3], buf, n, err);
  } else if (!strcmp(cmd, "get") && argc >= 5) {
    s3_buf got = {0};
    if (s3_get(c, argv[3], &got, err)) return -1;
    FILE *f = fopen(argv[4], "wb");
    int ok = f && fwrite(got.data ? got.data : "", 1, got.len, f) == got.len;
    if (f && fclose(f)) ok = 0;
    s3_buf_free(&got);
    if (!ok) return boost_err(err, "cannot write %s", argv[4]);
  } else if (!strcmp(cmd, "mkbucket")) {
    s3_req req = {.method = "PUT"};
    return s3_request(c, &req, NULL, NULL, err);
  } else {
    return boost_err(err, "usage: remote_check s3://BUCKET/PREFIX push|newest|fetch|retain|orphans|... (see the source)");
  }
  return 0;
}

int main(int argc, char **argv) {
  boost_log_program("remote_check");
  boost_status err = {0};
  if (argc < 3) {
    fprintf(stderr, "usage: remote_check s3://BUCKET/PREFIX COMMAND ...\n");
    return 2;
  }
  s3_config cfg = {.url = argv[1], .endpoint = getenv("BOOST_S3_ENDPOINT"), .region = getenv("BOOST_S3_REGION")};
  s3_client *c = NULL;
  int rc = s3_client_open(&c, &cfg, &err) || run(c, argc, argv, &err);
  s3_client_close(c);
  if (rc) fprintf(stderr, "remote_check: %s\n", err.msg);
  return rc ? 1 : 0;
}
