/* S3 requests over libcurl: URLs, credentials, signing, retries (s3_client.h). */
#include "s3_client.h"

#include <curl/curl.h>
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct s3_client {
  CURL *curl;
  char url[1024];      /* s3://bucket/prefix as given */
  char bucket[256];
  char prefix[768];    /* "" or ending in '/' */
  char base[1024];     /* endpoint URL up to the key: ".../bucket/" */
  char endpoint[512];
  char region[64];
  char sigv4[128];     /* "aws:amz:REGION:s3" */
  char key_id[256];
  char secret[256];
  char token[2048];
  const volatile int *cancel; /* s3_client_set_cancel */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static void copy(char *dst, size_t cap, const char *src) { snprintf(dst, cap, "%s", src ? src : ""); }
static int empty(const char *s) { return !s || !*s; }

/* The profile's two keys (and token) from the shared credentials file. */
typedef struct cred_scan {
  const char *profile;
  s3_client *c;
} cred_scan;

static int cred_handler(void *user, const char *section, const char *name, const char *value) {
  cred_scan *s = user;
  if (strcmp(section, s->profile) != 0) return 1;
  if (!strcmp(name, "aws_access_key_id")) copy(s->c->key_id, sizeof s->c->key_id, value);
  else if (!strcmp(name, "aws_secret_access_key")) copy(s->c->secret, sizeof s->c->secret, value);
  else if (!strcmp(name, "aws_session_token")) copy(s->c->token, sizeof s->c->token, value);
  return 1;
}

static int find_credentials(s3_client *c, boost_status *err) {
  const char *id = getenv("AWS_ACCESS_KEY_ID"), *secret = getenv("AWS_SECRET_ACCESS_KEY");
  if (!empty(id) && !empty(secret)) {
    copy(c->key_id, sizeof c->key_id, id);
    copy(c->secret, sizeof c->secret, secret);
    copy(c->token, sizeof c->token, getenv("AWS_SESSION_TOKEN"));
    return 0;
  }
  char path[1024];
  const char *file = getenv("AWS_SHARED_CREDENTIALS_FILE"), *home = getenv("HOME");
  if (!empty(file)) copy(path, sizeof path, file);
  else snprintf(path, sizeof path, "%s/.aws/credentials", empty(home) ? "." : home);
  const char *profile = getenv("AWS_PROFILE");
  cred_scan scan = {empty(profile) ? "default" : profile, c};
  FILE *f = fopen(path, "r");
  if (f) {
    ini_parse_file(f, cred_handler, &scan);
    fclose(f);
  }
  if (empty(c->key_id) || empty(c->secret))
    return boost_err(err,
                     "remote %s: no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or profile [%s] "
                     "in %s (AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE choose others)",
                     c->url, scan.profile, path);
  return 0;
}

/* Percent-encodes s into out (RFC 3986 unreserved kept; '/' kept when slash). */
static void encode(char *out, size_t cap, const char *s, int slash) {
  size_t n = strlen(out);
  for (; *s && n + 4 < cap; s++) {
    unsigned char ch = (unsigned char)*s;
    if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~' || (slash && ch == '/')) out[n++] = (char)ch;
    else n += (size_t)snprintf(out + n, cap - n, "%%%02X", ch);
  }
  out[n] = 0;
}

void s3_query_add(char *q, size_t cap, const char *name, const char *value) {
  size_t n = strlen(q);
  snprintf(q + n, cap - n, "%s%s=", n ? "&" : "", name);
  encode(q, cap, value ? value : "", 0);
}

static int parse_url(s3_client *c, const s3_config *cfg, boost_status *err) {
  const char *u = cfg->url;
  if (empty(u) || strncmp(u, "s3://", 5) != 0)
    return boost_err(err, "ckpt.remote = '%s' is not an s3://BUCKET/PREFIX URL", u ? u : "");
  copy(c->url, sizeof c->url, u);
  const char *b = u + 5, *slash = strchr(b, '/');
  size_t blen = slash ? (size_t)(slash - b) : strlen(b);
  if (blen < 3 || blen > 63)
    return boost_err(err, "ckpt.remote = '%s': the bucket name must have 3 to 63 characters", u);
  for (size_t i = 0; i < blen; i++)
    if (!(islower((unsigned char)b[i]) || isdigit((unsigned char)b[i]) || b[i] == '-' || b[i] == '.'))
      return boost_err(err, "ckpt.remote = '%s': a bucket name has only a-z, 0-9, '-' and '.'", u);
  memcpy(c->bucket, b, blen);
  c->bucket[blen] = 0;
  const char *p = slash ? slash + 1 : "";
  while (*p == '/') p++;
  copy(c->prefix, sizeof c->prefix, p);
  size_t plen = strlen(c->prefix);
  if (plen && c->prefix[plen - 1] != '/' && plen + 1 < sizeof c->prefix) strcat(c->prefix, "/");

  const char *region = !empty(cfg->region) ? cfg->region : getenv("AWS_REGION");
  if (empty(region)) region = getenv("AWS_DEFAULT_REGION");
  copy(c->region, sizeof c->region, empty(region) ? "us-east-1" : region);
  for (const char *r = c->region; *r; r++)
    if (!(isalnum((unsigned char)*r) || *r == '-'))
      return boost_err(err, "ckpt.remote_region = '%s' is not a region name (like us-east-1)", c->region);
  snprintf(c->sigv4, sizeof c->sigv4, "aws:amz:%s:s3", c->region);

  const char *ep = !empty(cfg->endpoint) ? cfg->endpoint : getenv("AWS_ENDPOINT_URL_S3");
  if (empty(ep)) ep = getenv("AWS_ENDPOINT_URL");
  if (!empty(ep)) {
    if (strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0)
      return boost_err(err, "ckpt.remote_endpoint = '%s' is not an http:// or https:// URL", ep);
    copy(c->endpoint, sizeof c->endpoint, ep);
    size_t el = strlen(c->endpoint);
    while (el && c->endpoint[el - 1] == '/') c->endpoint[--el] = 0;
    snprintf(c->base, sizeof c->base, "%s/%s/", c->endpoint, c->bucket); /* path style */
  } else {
    snprintf(c->base, sizeof c->base, "https://%s.s3.%s.amazonaws.com/", c->bucket, c->region);
  }
  return 0;
}

static int client_handle(s3_client *c, boost_status *err) {
  pthread_once(&curl_once, curl_init_once);
  c->curl = curl_easy_init();
  if (!c->curl) return boost_err(err, "remote %s: libcurl could not make a handle", c->url);
  return 0;
}

int s3_client_open(s3_client **out, const s3_config *cfg, boost_status *err) {
  *out = NULL;
  s3_client *c = calloc(1, sizeof *c);
  if (!c) return boost_err(err, "out of memory for the S3 client");
  if (parse_url(c, cfg, err) || find_credentials(c, err) || client_handle(c, err)) {
    s3_client_close(c);
    return -1;
  }
  *out = c;
  return 0;
}

int s3_client_dup(s3_client **out, const s3_client *src, boost_status *err) {
  *out = NULL;
  s3_client *c = malloc(sizeof *c);
  if (!c) return boost_err(err, "out of memory for the S3 client");
  memcpy(c, src, sizeof *c);
  if (client_handle(c, err)) {
    c->curl = NULL;
    s3_client_close(c);
    return -1;
  }
  *out = c;
  return 0;
}

void s3_client_close(s3_client *c) {
  if (!c) return;
  if (c->curl) curl_easy_cleanup(c->curl);
  /* The secret leaves no copy in freed memory. */
  memset(c->secret, 0, sizeof c->secret);
  memset(c->token, 0, sizeof c->token);
  free(c);
}

void s3_client_set_cancel(s3_client *c, const volatile int *flag) { c->cancel = flag; }
int s3_client_cancelled(const s3_client *c) { return c->cancel && *c->cancel; }

/* libcurl asks this while a transfer runs: non-zero stops it. */
static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
  (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
  return s3_client_cancelled(user);
}

const char *s3_client_prefix(const s3_client *c) { return c->prefix; }
const char *s3_client_url(const s3_client *c) { return c->url; }

void s3_buf_free(s3_buf *b) {
  if (!b->fixed) free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

static size_t on_body(char *p, size_t size, size_t n, void *user) {
  s3_buf *b = user;
  size_t len = size * n;
  if (b->len + len + 1 > b->cap) {
    if (b->fixed) return 0; /* longer than the range asked for: fail the transfer */
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + len + 1) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) return 0;
    b->data = d, b->cap = cap;
  }
  memcpy(b->data + b->len, p, len);
  b->len += len;
  if (!b->fixed) b->data[b->len] = 0;
  return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *user) {
  s3_resp *r = user;
  size_t len = size * n;
  if (len > 5 && !strncasecmp(p, "ETag:", 5)) {
    const char *v = p + 5;
    while (*v == ' ') v++;
    size_t vl = len - (size_t)(v - p);
    while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n')) vl--;
    if (vl >= sizeof r->etag) vl = sizeof r->etag - 1;
    memcpy(r->etag, v, vl);
    r->etag[vl] = 0;
  } else if (len > 15 && !strncasecmp(p, "Content-Length:", 15)) {
    r->content_length = strtoll(p + 15, NULL, 10);
  }
  return len;
}

int s3_xml_next(const char *xml, const char **from, const char *tag, char *out, size_t cap) {
  char open[96], close[96];
  snprintf(open, sizeof open, "<%s>", tag);
  snprintf(close, sizeof close, "</%s>", tag);
  const char *s = strstr(from && *from ? *from : xml, open);
  if (!s) return -1;
  s += strlen(open);
  const char *e = strstr(s, close);
  if (!e) return -1;
  static const struct { const char *esc; char ch; } ents[] = {
      {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&#34;", '"'}, {"&apos;", '\''}, {"&#39;", '\''}};
  size_t n = 0;
  for (const char *p = s; p < e && n + 1 < cap;) {
    size_t k = 0;
    for (; k < sizeof ents / sizeof ents[0]; k++)
      if (!strncmp(p, ents[k].esc, strlen(ents[k].esc))) break;
    if (k < sizeof ents / sizeof ents[0]) out[n++] = ents[k].ch, p += strlen(ents[k].esc);
    else out[n++] = *p++;
  }
  out[n] = 0;
  if (from) *from = e + strlen(close);
  return 0;
}

int s3_xml_element(const char **at, const char *tag, char *out, size_t cap) {
  char open[96], close[96];
  snprintf(open, sizeof open, "<%s>", tag);
  snprintf(close, sizeof close, "</%s>", tag);
  const char *s = *at ? strstr(*at, open) : NULL, *e = s ? strstr(s, close) : NULL;
  if (!s) return -1;
  if (!e || (size_t)(e - s) >= cap) return -2; /* there, but unclosed or too long */
  memcpy(out, s, (size_t)(e - s));
  out[e - s] = 0;
  *at = e + strlen(close);
  return 0;
}

/* Whether a failed try is worth another: connection trouble, timeouts, the
 * server's 5xx and S3's "slow down" / "internal error" answers. */
static int retryable(CURLcode cc, long http, const char *code) {
  if (cc != CURLE_OK)
    return cc == CURLE_COULDNT_CONNECT || cc == CURLE_OPERATION_TIMEDOUT || cc == CURLE_RECV_ERROR ||
           cc == CURLE_SEND_ERROR || cc == CURLE_GOT_NOTHING || cc == CURLE_PARTIAL_FILE ||
           cc == CURLE_COULDNT_RESOLVE_HOST || cc == CURLE_SSL_CONNECT_ERROR;
  if (http == 500 || http == 502 || http == 503 || http == 504) return 1;
  return !strcmp(code, "SlowDown") || !strcmp(code, "InternalError") || !strcmp(code, "RequestTimeout");
}

static long env_long(const char *name, long dflt, long lo, long hi) {
  const char *v = getenv(name);
  if (empty(v)) return dflt;
  char *end;
  long x = strtol(v, &end, 10);
  return (*end || x < lo || x > hi) ? dflt : x;
}

/* Exponential backoff with jitter: the wait for try t (0-based) is drawn
 * from [half, full] of min(base * 2^t, 8 s), so ranks that failed together
 * do not come back together. */
static void backoff(const s3_client *c, int t, unsigned *seed) {
  long base = env_long("BOOST_S3_BACKOFF_MS", 200, 1, 60000);
  long full = base;
  for (int i = 0; i < t && full < 8000; i++) full *= 2;
  if (full > 8000) full = 8000;
  long ms = full / 2 + (long)(rand_r(seed) % (unsigned)(full / 2 + 1));
  for (; ms > 0 && !s3_client_cancelled(c); ms -= 50) { /* in 50 ms slices: a cancel is seen soon */
    struct timespec ts = {0, (ms < 50 ? ms : 50) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
  }
}

static int one_try(s3_client *c, const s3_req *req, const char *url, s3_buf *out, s3_resp *resp, char *code,
                   size_t code_cap, CURLcode *cc) {
  CURL *h = c->curl;
  curl_easy_reset(h);
  /* No "Expect:" to switch 100-continue off: libcurl 7.88 would sign the
   * removed header and the signature would not match. */
  struct curl_slist *hdr = NULL;
  char tok[2100];
  hdr = curl_slist_append(hdr, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
  /* Needed, not decoration: POSTFIELDS labels the body form data, and moto
   * 5.2.5 then parses it as a form: a PUT stores an empty object and a
   * CreateMultipartUpload answers 500 (tests/mpi/remote_store_moto.sh). */
  hdr = curl_slist_append(hdr, "Content-Type: application/octet-stream");
  if (c->token[0]) {
    snprintf(tok, sizeof tok, "x-amz-security-token: %s", c->token);
    hdr = curl_slist_append(hdr, tok);
  }
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_AWS_SIGV4, c->sigv4);
  curl_easy_setopt(h, CURLOPT_USERNAME, c->key_id);
  curl_easy_setopt(h, CURLOPT_PASSWORD, c->secret);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, env_long("BOOST_S3_CONNECT_TIMEOUT_S", 10, 1, 600));
  /* A transfer slower than 1 KiB/s for 30 s is stalled: abandon and retry. */
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, env_long("BOOST_S3_STALL_S", 30, 1, 3600));
  if (!strcmp(req->method, "HEAD")) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  else if (strcmp(req->method, "GET")) curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
  if (strcmp(req->method, "GET") && strcmp(req->method, "HEAD") && strcmp(req->method, "DELETE")) {
    /* The body goes as POSTFIELDS under the custom method: libcurl sends
     * it with a Content-Length and may send it again on a retry. */
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body_len ? req->body : "");
  }
  if (req->range) curl_easy_setopt(h, CURLOPT_RANGE, req->range + strlen("bytes="));
  s3_buf err_body = {0};
  s3_buf *sink = out ? out : &err_body;
  size_t len0 = sink->len;
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, sink);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, resp);
  *cc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->http);
  curl_slist_free_all(hdr);
  code[0] = 0;
  if (*cc == CURLE_OK && resp->http >= 300 && sink->data) {
    const char *from = sink->data + len0;
    if (s3_xml_next(sink->data, &from, "Code", code, code_cap)) code[0] = 0;
  }
  if (*cc != CURLE_OK || resp->http >= 300) sink->len = len0; /* a failed try leaves no bytes behind */
  s3_buf_free(&err_body);
  return *cc == CURLE_OK && resp->http >= 200 && resp->http < 300 ? 0 : -1;
}

int s3_request(s3_client *c, const s3_req *req, s3_buf *out, s3_resp *resp, boost_status *err) {
  char url[4096];
  snprintf(url, sizeof url, "%s", c->base);
  if (req->key) encode(url, sizeof url, req->key, 1);
  if (req->query && *req->query) {
    size_t n = strlen(url);
    snprintf(url + n, sizeof url - n, "?%s", req->query);
  }
  int tries = (int)env_long("BOOST_S3_TRIES", 10, 1, 100);
  unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid() ^ (unsigned)(uintptr_t)c;
  char code[128];
  CURLcode cc = CURLE_OK;
  s3_resp local;
  if (!resp) resp = &local;
  for (int t = 0;; t++) {
    memset(resp, 0, sizeof *resp);
    resp->content_length = -1;
    if (s3_client_cancelled(c)) {
      cc = CURLE_ABORTED_BY_CALLBACK;
      break;
    }
    if (one_try(c, req, url, out, resp, code, sizeof code, &cc) == 0) return 0;
    if (t + 1 >= tries || !retryable(cc, resp->http, code) || s3_client_cancelled(c)) break;
    backoff(c, t, &seed);
  }
  if (out && !out->fixed) s3_buf_free(out); /* a failure hands back no body */
  const char *what = req->key ? req->key : "(bucket)";
  if (cc == CURLE_ABORTED_BY_CALLBACK)
    return boost_err(err, "remote %s: %s %s: cancelled (the run is ending)", c->url, req->method, what);
  if (cc != CURLE_OK)
    return boost_err(err, "remote %s: %s %s: %s (after %d tries)", c->url, req->method, what, curl_easy_strerror(cc),
                     tries);
  if (!strcmp(code, "NoSuchBucket"))
    return boost_err(err, "remote %s: bucket '%s' does not exist at %s (create it, or fix ckpt.remote)", c->url,
                     c->bucket, c->endpoint[0] ? c->endpoint : "AWS");
  if (!strcmp(code, "InvalidAccessKeyId") || !strcmp(code, "SignatureDoesNotMatch") || resp->http == 403)
    return boost_err(err, "remote %s: %s %s: access denied (HTTP %ld %s): check the credentials", c->url,
                     req->method, what, resp->http, code[0] ? code : "Forbidden");
  if (resp->http == 404)
    return boost_err(err, "remote %s: %s %s: not found (HTTP 404 %s)", c->url, req->method, what, code);
  return boost_err(err, "remote %s: %s %s: HTTP %ld %s", c->url, req->method, what, resp->http,
                   code[0] ? code : "");
}
