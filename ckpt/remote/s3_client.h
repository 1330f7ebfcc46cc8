/* A small S3 client for the remote checkpoint level (docs/CHECKPOINT_FORMAT.md,
 * "The remote level").
 *
 * HTTP, TLS and request signing come from libcurl (Debian's
 * libcurl4-openssl-dev): CURLOPT_AWS_SIGV4 signs every request with AWS
 * Signature Version 4, one easy handle per client keeps its HTTP/1.1
 * connection alive between requests, and ranged GETs are a header. The
 * client only adds what libcurl leaves to its caller: where a bucket lives
 * (path-style URLs on a custom endpoint, virtual-hosted ones on AWS), the
 * canonical query string (sorted, percent-encoded: libcurl 7.88 signs the
 * query as given), credentials found the way the AWS tools find them, and
 * retries.
 *
 * Credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and
 * AWS_SESSION_TOKEN) from the environment, else the profile AWS_PROFILE
 * (or "default") of the shared credentials file AWS_SHARED_CREDENTIALS_FILE
 * (or ~/.aws/credentials). They live only in the client's memory: never in
 * a message, a log line or a checkpoint.
 *
 * Retries: a request that fails with a connection error, a timeout, HTTP
 * 500/502/503/504 or an S3 error code SlowDown / InternalError /
 * RequestTimeout is sent again after an exponential backoff with jitter
 * (base BOOST_S3_BACKOFF_MS, default 200 ms, doubling up to 8 s, the wait
 * drawn from [half, full]), at most BOOST_S3_TRIES times (default 10, about
 * 40 s of waiting in all). Other answers (403, 404, ...) fail at once with
 * one line naming the request and S3's error code.
 *
 * A client is used by one thread at a time; threads open one each
 * (s3_client_dup). */
#ifndef BOOST_S3_CLIENT_H
#define BOOST_S3_CLIENT_H
#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct s3_client s3_client;

/* Where the remote level lives and how to reach it. */
typedef struct s3_config {
  const char *url;      /* s3://BUCKET[/PREFIX] */
  const char *endpoint; /* http(s)://host[:port] of an S3-compatible store, or NULL/"" for AWS */
  const char *region;   /* NULL/"": AWS_REGION, AWS_DEFAULT_REGION, else us-east-1 */
} s3_config;

/* A growable response body (XML answers) or, with fixed set, a caller's
 * buffer of cap bytes that a ranged GET fills. */
typedef struct s3_buf {
  char *data;
  size_t len, cap;
  int fixed;
} s3_buf;

/* One request. query is canonical already (s3_query_add builds it) or NULL;
 * body/body_len the payload (NULL for none); range "bytes=A-B" or NULL. */
typedef struct s3_req {
  const char *method;
  const char *key; /* object key under the bucket (not yet percent-encoded); NULL for the bucket */
  const char *query;
  const void *body;
  size_t body_len;
  const char *range;
} s3_req;

/* What came back: status and the two headers the level needs. */
typedef struct s3_resp {
  long http;
  char etag[80];
  int64_t content_length;
} s3_resp;

/* Parses cfg->url ("s3://BUCKET/PREFIX"), finds the credentials and makes a
 * client. Fails with one line for a bad URL, a bad endpoint or no
 * credentials. */
int s3_client_open(s3_client **out, const s3_config *cfg, boost_status *err);
/* Another client with the same settings (for another thread). */
int s3_client_dup(s3_client **out, const s3_client *c, boost_status *err);
void s3_client_close(s3_client *c);
/* Cancellation: once *flag is non-zero, the transfer in progress stops
 * (libcurl's progress callback), no retry is made and requests fail at
 * once ("cancelled"). Copies made by s3_client_dup share the flag. */
void s3_client_set_cancel(s3_client *c, const volatile int *flag);
int s3_client_cancelled(const s3_client *c);
/* The key prefix of the url, "" or ending in '/' ("runs/a/"). */
const char *s3_client_prefix(const s3_client *c);
/* "s3://BUCKET/PREFIX" as configured (no secret in it). */
const char *s3_client_url(const s3_client *c);

/* Sends req, retrying as above; 0 with a 2xx answer (resp filled, body in
 * out when given), -1 with one line otherwise. An answer of 404 fills
 * resp->http and fails with "... not found" so callers can tell it apart.
 * On failure a growable out is freed. */
int s3_request(s3_client *c, const s3_req *req, s3_buf *out, s3_resp *resp, boost_status *err);

/* Appends "name=value" (value percent-encoded) to a query kept in sorted
 * order by the caller: names must be added in ascending order. */
void s3_query_add(char *q, size_t cap, const char *name, const char *value);

/* The text of <tag>...</tag> at or after *from in xml (unescaped: &amp;,
 * &lt;, &gt;, &quot;, &#34;), into out; the position after it in *from.
 * 0 when found. */
int s3_xml_next(const char *xml, const char **from, const char *tag, char *out, size_t cap);

/* The next whole <tag>...</tag> element at or after *at, raw, into out
 * (its fields come in any order: read them from out); *at moves past it.
 * 0 when found and it fits, -1 when there is none, -2 when it is there but
 * unclosed or longer than cap (a caller must not take that for the end). */
int s3_xml_element(const char **at, const char *tag, char *out, size_t cap);

void s3_buf_free(s3_buf *b);
#endif
