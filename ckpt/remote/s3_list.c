/* Small objects, deletes and listings that go past one page (s3_multipart.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3_multipart.h"

int s3_put(s3_client *c, const char *key, const void *data, size_t len, boost_status *err) {
  s3_req req = {.method = "PUT", .key = key, .body = data, .body_len = len};
  return s3_request(c, &req, NULL, NULL, err);
}

int s3_get(s3_client *c, const char *key, s3_buf *out, boost_status *err) {
  s3_req req = {.method = "GET", .key = key};
  return s3_request(c, &req, out, NULL, err);
}

int s3_delete(s3_client *c, const char *key, boost_status *err) {
  s3_req req = {.method = "DELETE", .key = key};
  return s3_request(c, &req, NULL, NULL, err);
}

static const char *page_size(void) {
  const char *v = getenv("BOOST_S3_LIST_MAX");
  return v && atoi(v) >= 1 && atoi(v) <= 1000 ? v : "1000";
}

/* The next <tag> element of a listing page into one: 1 when there is one,
 * 0 at the page's end, -1 (err) when one is there but unreadable, so that
 * a key is never dropped in silence. */
static int next_entry(s3_client *c, const char **at, const char *tag, char *one, size_t cap, boost_status *err) {
  int rc = s3_xml_element(at, tag, one, cap);
  if (rc == -1) return 0;
  if (rc) return boost_err(err, "remote %s: a listing's <%s> is unclosed or longer than %zu bytes", s3_client_url(c),
                           tag, cap - 1);
  return 1;
}

static int no_field(s3_client *c, const char *tag, const char *fields, boost_status *err) {
  return boost_err(err, "remote %s: a listing's <%s> has no %s", s3_client_url(c), tag, fields);
}

/* ListObjectsV2: one page per request; NextContinuationToken leads to the
 * next while IsTruncated is true (a store answers at most 1,000 keys). */
int s3_list(s3_client *c, const char *prefix, s3_object_fn each, void *user, boost_status *err) {
  char token[2048] = "";
  for (;;) {
    char q[4096] = "";
    if (token[0]) s3_query_add(q, sizeof q, "continuation-token", token);
    s3_query_add(q, sizeof q, "list-type", "2");
    s3_query_add(q, sizeof q, "max-keys", page_size());
    s3_query_add(q, sizeof q, "prefix", prefix);
    s3_buf out = {0};
    s3_req req = {.method = "GET", .query = q};
    if (s3_request(c, &req, &out, NULL, err)) return -1;
    const char *at = out.data ? out.data : "";
    /* A key has up to 1,024 bytes, its element (escaped: &amp;, &#34;) several times that. */
    char key[1025], size[32], trunc[16] = "false";
    int stop = 0, got = 0;
    char one[8192];
    while (!stop && (got = next_entry(c, &at, "Contents", one, sizeof one, err)) > 0) {
      if (s3_xml_next(one, NULL, "Key", key, sizeof key) || s3_xml_next(one, NULL, "Size", size, sizeof size)) {
        got = no_field(c, "Contents", "<Key> or <Size>", err);
        break;
      }
      stop = each(key, strtoull(size, NULL, 10), user);
    }
    if (got < 0) {
      s3_buf_free(&out);
      return -1;
    }
    s3_xml_next(out.data ? out.data : "", NULL, "IsTruncated", trunc, sizeof trunc);
    token[0] = 0;
    if (!stop && !strcmp(trunc, "true") &&
        s3_xml_next(out.data, NULL, "NextContinuationToken", token, sizeof token)) {
      s3_buf_free(&out);
      return boost_err(err, "remote %s: a truncated listing came without NextContinuationToken", s3_client_url(c));
    }
    s3_buf_free(&out);
    if (stop || !token[0]) return 0;
  }
}

/* ListMultipartUploads: pages follow NextKeyMarker / NextUploadIdMarker. */
int s3_list_uploads(s3_client *c, const char *prefix, s3_upload_fn each, void *user, boost_status *err) {
  char key_marker[1025] = "", id_marker[1024] = "";
  for (;;) {
    char q[4096] = "";
    if (key_marker[0]) s3_query_add(q, sizeof q, "key-marker", key_marker);
    s3_query_add(q, sizeof q, "max-uploads", page_size());
    s3_query_add(q, sizeof q, "prefix", prefix);
    if (id_marker[0]) s3_query_add(q, sizeof q, "upload-id-marker", id_marker);
    s3_query_add(q, sizeof q, "uploads", "");
    s3_buf out = {0};
    s3_req req = {.method = "GET", .query = q};
    if (s3_request(c, &req, &out, NULL, err)) return -1;
    const char *at = out.data ? out.data : "";
    char key[1025] = "", id[1024], trunc[16] = "false";
    int stop = 0, got = 0;
    char one[8192];
    while (!stop && (got = next_entry(c, &at, "Upload", one, sizeof one, err)) > 0) {
      if (s3_xml_next(one, NULL, "Key", key, sizeof key) || s3_xml_next(one, NULL, "UploadId", id, sizeof id)) {
        got = no_field(c, "Upload", "<Key> or <UploadId>", err);
        break;
      }
      stop = each(key, id, user);
    }
    if (got < 0) {
      s3_buf_free(&out);
      return -1;
    }
    s3_xml_next(out.data ? out.data : "", NULL, "IsTruncated", trunc, sizeof trunc);
    /* Some stores (SeaweedFS) leave NextKeyMarker out: the last key stands in. */
    int more = !stop && !strcmp(trunc, "true");
    if (more && s3_xml_next(out.data, NULL, "NextKeyMarker", key_marker, sizeof key_marker)) {
      snprintf(key_marker, sizeof key_marker, "%s", key);
      more = key[0] != 0;
    }
    if (more && s3_xml_next(out.data, NULL, "NextUploadIdMarker", id_marker, sizeof id_marker)) id_marker[0] = 0;
    s3_buf_free(&out);
    if (!more) return 0;
  }
}
