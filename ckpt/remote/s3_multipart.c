/* Multipart upload and parallel ranged download of one file (s3_multipart.h). */
#include "s3_multipart.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

uint64_t s3_part_size(uint64_t size, uint64_t wanted) {
  uint64_t p = wanted ? wanted : 16ull << 20;
  if (p < S3_PART_MIN) p = S3_PART_MIN;
  uint64_t need = (size + S3_PARTS_MAX - 1) / S3_PARTS_MAX;
  if (p < need) p = need;
  p = (p + (1ull << 20) - 1) & ~((1ull << 20) - 1);
  if (p > S3_PART_MAX) p = S3_PART_MAX;
  return (size + p - 1) / p > S3_PARTS_MAX ? 0 : p;
}

int s3_part_count(uint64_t size, uint64_t part) { return size ? (int)((size + part - 1) / part) : 1; }

static void upload_query(char *q, size_t cap, const char *upload_id, int part_no) {
  q[0] = 0;
  if (part_no > 0) {
    char num[16];
    snprintf(num, sizeof num, "%d", part_no);
    s3_query_add(q, cap, "partNumber", num);
  }
  s3_query_add(q, cap, "uploadId", upload_id);
}

int s3_multipart_create(s3_client *c, const char *key, char *upload_id, size_t cap, boost_status *err) {
  s3_buf out = {0};
  s3_req req = {.method = "POST", .key = key, .query = "uploads="};
  int rc = s3_request(c, &req, &out, NULL, err);
  if (rc == 0 && (!out.data || s3_xml_next(out.data, NULL, "UploadId", upload_id, cap) || !upload_id[0]))
    rc = boost_err(err, "remote %s: CreateMultipartUpload %s answered without an UploadId", s3_client_url(c), key);
  s3_buf_free(&out);
  return rc;
}

static int read_at(int fd, char *buf, size_t len, uint64_t off, const char *path, boost_status *err) {
  size_t got = 0;
  while (got < len) {
    ssize_t r = pread(fd, buf + got, len - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return boost_err(err, "cannot read %s at byte %llu: %s", path, (unsigned long long)(off + got),
                                 r < 0 ? strerror(errno) : "file shorter than expected");
    got += (size_t)r;
  }
  return 0;
}

/* Test hook: BOOST_S3_TEST_PART_DELAY_MS slows every part sent or fetched,
 * so the fault tests (tests/mpi/remote_faults.sh, remote_kill9.sh,
 * remote_fetch_ranks.sh) can kill the server, the uploader or the ranks
 * downloading in the middle of a transfer. */
static void test_part_delay(const s3_client *c) {
  const char *v = getenv("BOOST_S3_TEST_PART_DELAY_MS");
  long ms = v ? atol(v) : 0;
  for (ms = ms < 60000 ? ms : 0; ms > 0 && !s3_client_cancelled(c); ms -= 50) usleep(50000);
}

int s3_multipart_send(s3_client *c, const char *key, const char *upload_id, const char *path, uint64_t size,
                      uint64_t part, int w, int n, uint64_t *hashes, boost_status *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return boost_err(err, "cannot open %s: %s", path, strerror(errno));
  int nparts = s3_part_count(size, part), rc = 0;
  char *buf = malloc(part < size ? part : (size ? size : 1));
  if (!buf) rc = boost_err(err, "out of memory for a %llu-byte upload part", (unsigned long long)part);
  for (int p = w; rc == 0 && p < nparts; p += n) {
    uint64_t off = (uint64_t)p * part, len = size - off < part ? size - off : part;
    if (read_at(fd, buf, len, off, path, err)) {
      rc = -1;
      break;
    }
    hashes[p] = XXH3_64bits(buf, len);
    test_part_delay(c);
    char q[1024];
    upload_query(q, sizeof q, upload_id, p + 1);
    s3_req req = {.method = "PUT", .key = key, .query = q, .body = buf, .body_len = len};
    rc = s3_request(c, &req, NULL, NULL, err);
  }
  free(buf);
  close(fd);
  return rc;
}

/* The <Part> list of CompleteMultipartUpload from ListParts, page after page. */
static int collect_etags(s3_client *c, const char *key, const char *upload_id, int nparts, char *xml, size_t cap,
                         boost_status *err) {
  size_t n = (size_t)snprintf(xml, cap, "<CompleteMultipartUpload>");
  int seen = 0;
  char marker[16] = "0";
  for (;;) {
    char q[1024] = "";
    s3_query_add(q, sizeof q, "part-number-marker", marker);
    s3_query_add(q, sizeof q, "uploadId", upload_id);
    s3_buf out = {0};
    s3_req req = {.method = "GET", .key = key, .query = q};
    if (s3_request(c, &req, &out, NULL, err)) return -1;
    const char *at = out.data;
    char num[16], etag[96], trunc[16] = "false";
    char one[2048];
    while (!s3_xml_element(&at, "Part", one, sizeof one)) {
      if (s3_xml_next(one, NULL, "PartNumber", num, sizeof num) || s3_xml_next(one, NULL, "ETag", etag, sizeof etag))
        break;
      if (++seen > nparts) break;
      n += (size_t)snprintf(xml + n, n < cap ? cap - n : 0,
                            "<Part><PartNumber>%s</PartNumber><ETag>%s</ETag></Part>", num, etag);
      snprintf(marker, sizeof marker, "%s", num);
    }
    s3_xml_next(out.data, NULL, "IsTruncated", trunc, sizeof trunc);
    s3_buf_free(&out);
    if (strcmp(trunc, "true") != 0) break;
  }
  n += (size_t)snprintf(xml + n, n < cap ? cap - n : 0, "</CompleteMultipartUpload>");
  if (seen != nparts)
    return boost_err(err, "remote %s: upload of %s holds %d parts, %d were sent", s3_client_url(c), key, seen, nparts);
  if (n >= cap) return boost_err(err, "remote %s: the part list of %s is too long", s3_client_url(c), key);
  return 0;
}

int s3_multipart_complete(s3_client *c, const char *key, const char *upload_id, int nparts, boost_status *err) {
  size_t cap = 128 + (size_t)nparts * 160;
  char *xml = malloc(cap);
  if (!xml) return boost_err(err, "out of memory for the part list of %s", key);
  int rc = collect_etags(c, key, upload_id, nparts, xml, cap, err);
  if (rc == 0) {
    char q[1024];
    upload_query(q, sizeof q, upload_id, 0);
    s3_buf out = {0};
    s3_req req = {.method = "POST", .key = key, .query = q, .body = xml, .body_len = strlen(xml)};
    rc = s3_request(c, &req, &out, NULL, err);
    /* S3 may answer 200 and put the failure in the body. */
    char code[64];
    if (rc == 0 && out.data && strstr(out.data, "<Error>") && !s3_xml_next(out.data, NULL, "Code", code, sizeof code))
      rc = boost_err(err, "remote %s: CompleteMultipartUpload %s: %s", s3_client_url(c), key, code);
    s3_buf_free(&out);
  }
  free(xml);
  return rc;
}

int s3_multipart_abort(s3_client *c, const char *key, const char *upload_id, boost_status *err) {
  char q[1024];
  upload_query(q, sizeof q, upload_id, 0);
  s3_req req = {.method = "DELETE", .key = key, .query = q};
  return s3_request(c, &req, NULL, NULL, err);
}

/* One thread's share of an upload or a download. */
typedef struct transfer_job {
  s3_client *c;
  const char *key, *upload_id, *path;
  uint64_t size, part;
  uint64_t *hashes;
  const uint64_t *want;
  int fd, w, n;
  int fixed_share; /* w and n are set by the caller (a share of a job spread over ranks) */
  int rank, ranks; /* otherwise: this process's share of a job spread over ranks (ranks 0: one process) */
  int done;        /* parts this job fetched */
  boost_status st;
} transfer_job;

static void *send_thread(void *arg) {
  transfer_job *j = arg;
  s3_multipart_send(j->c, j->key, j->upload_id, j->path, j->size, j->part, j->w, j->n, j->hashes, &j->st);
  return NULL;
}

/* Runs fn on threads jobs (job 0 on the caller's client, the others on
 * copies of it); the first failure in err. */
static int run_jobs(transfer_job *jobs, int threads, void *(*fn)(void *), boost_status *err) {
  pthread_t tid[64];
  int started[64] = {0}, rc = 0;
  for (int t = 1; t < threads; t++)
    if (s3_client_dup(&jobs[t].c, jobs[0].c, &jobs[t].st)) {
      if (jobs[0].fixed_share) { /* the parts are dealt: each share needs its connection */
        for (int u = 1; u < t; u++) s3_client_close(jobs[u].c);
        return boost_status_take(err, &jobs[t].st);
      }
      threads = t; /* fewer connections: the others take the parts */
      break;
    }
  if (!jobs[0].fixed_share) /* this process's parts (every ranks-th from rank) dealt over the connections it got */
    for (int t = 0; t < threads; t++) {
      const int ranks = jobs[t].ranks > 0 ? jobs[t].ranks : 1;
      jobs[t].w = t * ranks + jobs[t].rank;
      jobs[t].n = threads * ranks;
    }
  for (int t = 1; t < threads; t++) started[t] = pthread_create(&tid[t], NULL, fn, &jobs[t]) == 0;
  fn(&jobs[0]);
  for (int t = 1; t < threads; t++) {
    if (started[t]) pthread_join(tid[t], NULL);
    else fn(&jobs[t]);
    s3_client_close(jobs[t].c);
  }
  for (int t = 0; t < threads && rc == 0; t++) rc = boost_status_take(err, &jobs[t].st);
  return rc;
}

static int clamp_threads(int threads, int nparts) {
  if (threads < 1) threads = 1;
  if (threads > 64) threads = 64;
  return threads > nparts ? nparts : threads;
}

int s3_upload_file(s3_client *c, const char *path, const char *key, uint64_t part, int threads, uint64_t *size_out,
                   uint64_t **hashes_out, boost_status *err) {
  struct stat sb;
  if (stat(path, &sb)) return boost_err(err, "cannot stat %s: %s", path, strerror(errno));
  uint64_t size = (uint64_t)sb.st_size;
  if (!part) return boost_err(err, "%s: %llu bytes is more than S3's 10,000 parts of 5 GiB", path,
                              (unsigned long long)size);
  int nparts = s3_part_count(size, part);
  uint64_t *hashes = calloc((size_t)nparts, sizeof *hashes);
  transfer_job *jobs = calloc(64, sizeof *jobs);
  char upload_id[512];
  int rc = (!hashes || !jobs) ? boost_err(err, "out of memory for an upload of %d parts", nparts) : 0;
  if (rc == 0) rc = s3_multipart_create(c, key, upload_id, sizeof upload_id, err);
  if (rc == 0) {
    threads = clamp_threads(threads, nparts);
    for (int t = 0; t < threads; t++)
      jobs[t] = (transfer_job){.c = c, .key = key, .upload_id = upload_id, .path = path, .size = size,
                               .part = part, .hashes = hashes, .w = t, .n = threads};
    rc = run_jobs(jobs, threads, send_thread, err);
    if (rc == 0) rc = s3_multipart_complete(c, key, upload_id, nparts, err);
    if (rc) s3_multipart_abort(c, key, upload_id, NULL); /* best effort: a start cleans what is left */
  }
  free(jobs);
  if (rc) {
    free(hashes);
    return -1;
  }
  *size_out = size;
  *hashes_out = hashes;
  return 0;
}

int s3_multipart_send_share(s3_client *c, const char *key, const char *upload_id, const char *path, uint64_t size,
                            uint64_t part, int rank, int ranks, int threads, uint64_t *hashes, boost_status *err) {
  transfer_job jobs[64];
  for (int t = 0; t < threads; t++)
    jobs[t] = (transfer_job){.c = c, .key = key, .upload_id = upload_id, .path = path, .size = size, .part = part,
                             .hashes = hashes, .w = t * ranks + rank, .n = ranks * threads, .fixed_share = 1};
  return run_jobs(jobs, threads, send_thread, err);
}

static int write_at(int fd, const char *buf, size_t len, uint64_t off, const char *path, boost_status *err) {
  size_t put = 0;
  while (put < len) {
    ssize_t r = pwrite(fd, buf + put, len - put, (off_t)(off + put));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return boost_err(err, "cannot write %s: %s", path, strerror(errno));
    put += (size_t)r;
  }
  return 0;
}

static void *fetch_thread(void *arg) {
  transfer_job *j = arg;
  int nparts = s3_part_count(j->size, j->part);
  s3_buf buf = {.data = malloc(j->part + 1), .cap = j->part + 1, .fixed = 1};
  if (!buf.data) {
    boost_err(&j->st, "out of memory for a %llu-byte download part", (unsigned long long)j->part);
    return NULL;
  }
  for (int p = j->w; p < nparts && !j->st.failed && j->size; p += j->n) {
    uint64_t off = (uint64_t)p * j->part, len = j->size - off < j->part ? j->size - off : j->part;
    char range[64];
    snprintf(range, sizeof range, "bytes=%llu-%llu", (unsigned long long)off, (unsigned long long)(off + len - 1));
    buf.len = 0;
    test_part_delay(j->c);
    s3_req req = {.method = "GET", .key = j->key, .range = range};
    if (s3_request(j->c, &req, &buf, NULL, &j->st)) break;
    if (buf.len != len)
      boost_err(&j->st, "remote %s: %s part %d: %zu bytes came, %llu expected", s3_client_url(j->c), j->key, p + 1,
                buf.len, (unsigned long long)len);
    else if (j->want && XXH3_64bits(buf.data, len) != j->want[p])
      boost_err(&j->st, "remote %s: %s part %d does not match its checksum in the manifest", s3_client_url(j->c),
                j->key, p + 1);
    else if (write_at(j->fd, buf.data, len, off, j->path, &j->st) == 0)
      j->done++;
  }
  free(buf.data);
  return NULL;
}

int s3_download_create(const char *path, uint64_t size, boost_status *err) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return boost_err(err, "cannot create %s: %s", path, strerror(errno));
  int rc = ftruncate(fd, (off_t)size) ? boost_err(err, "cannot size %s: %s", path, strerror(errno)) : 0;
  close(fd);
  return rc;
}

int s3_download_share(s3_client *c, const char *key, uint64_t size, uint64_t part, const uint64_t *hashes,
                      const char *path, int rank, int ranks, int threads, int *fetched, boost_status *err) {
  *fetched = 0;
  if (part < 1) return boost_err(err, "remote %s: %s: part size 0", s3_client_url(c), key);
  if (ranks < 1 || rank < 0 || rank >= ranks) return boost_err(err, "download share %d of %d ranks", rank, ranks);
  const int nparts = s3_part_count(size, part);
  const int mine = rank < nparts ? (nparts - 1 - rank) / ranks + 1 : 0; /* parts rank, rank + ranks, ... */
  if (!size || !mine) return 0;
  int fd = open(path, O_WRONLY | O_CLOEXEC); /* made and sized by s3_download_create */
  if (fd < 0) return boost_err(err, "cannot open %s: %s", path, strerror(errno));
  threads = clamp_threads(threads, mine);
  transfer_job *jobs = calloc(64, sizeof *jobs);
  int rc = jobs ? 0 : boost_err(err, "out of memory for a download");
  if (rc == 0) {
    for (int t = 0; t < threads; t++)
      jobs[t] = (transfer_job){.c = c, .key = key, .path = path, .size = size, .part = part, .want = hashes,
                               .fd = fd, .rank = rank, .ranks = ranks};
    rc = run_jobs(jobs, threads, fetch_thread, err);
    for (int t = 0; t < threads; t++) *fetched += jobs[t].done;
  }
  /* Each writer syncs its own parts: on a shared file system, what one
   * client wrote is not another's to flush. */
  if (rc == 0 && fsync(fd)) rc = boost_err(err, "cannot sync %s: %s", path, strerror(errno));
  free(jobs);
  close(fd);
  return rc;
}
