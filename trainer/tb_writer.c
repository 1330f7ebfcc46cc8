/* TensorBoard event files (tb_writer.h).
 *
 * Written here rather than with libraries:
 * - CRC32C: Debian packages no CRC32C library. The SSE4.2 crc32
 *   instruction would tie the file to x86; a table would be 1 KiB to
 *   build once and share between threads. A record is tens of bytes and a
 *   step writes a few hundred, so the bitwise form (8 shifts per byte,
 *   microseconds per step) is plenty, and it needs no state at all.
 * - Protobuf: libprotobuf-c would need protoc-c at build time, generated
 *   code and a .proto copied from TensorFlow, for three messages of one to
 *   three fields. Their wire encoding is a few lines: a key varint
 *   (field << 3 | wire type), then a varint, 8 or 4 little-endian bytes, or
 *   a length varint and the bytes. */
#include "tb_writer.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include "check.h"
#include "util.h"

/* ---- CRC32C and the record framing ---- */

uint32_t tb_crc32c(uint32_t crc, const void *data, size_t n) {
  const uint8_t *p = data;
  crc = ~crc;
  for (size_t i = 0; i < n; i++) {
    crc ^= p[i];
    for (int b = 0; b < 8; b++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u))); /* reflected Castagnoli */
  }
  return ~crc;
}

uint32_t tb_masked_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

static void put_le(uint8_t *out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) out[i] = (uint8_t)(v >> (8 * i));
}

size_t tb_frame(const void *data, size_t n, uint8_t *out) {
  put_le(out, n, 8);
  put_le(out + 8, tb_masked_crc(tb_crc32c(0, out, 8)), 4);
  memcpy(out + 12, data, n);
  put_le(out + 12 + n, tb_masked_crc(tb_crc32c(0, data, n)), 4);
  return n + 16;
}

/* ---- protobuf wire encoding of the Event messages ---- */

typedef struct {
  uint8_t *p;
  size_t len, cap;
  int overflow;
} pb_buf;

static void pb_bytes(pb_buf *b, const void *src, size_t n) {
  if (b->overflow || b->cap - b->len < n) {
    b->overflow = 1;
    return;
  }
  memcpy(b->p + b->len, src, n);
  b->len += n;
}

static void pb_varint(pb_buf *b, uint64_t v) {
  uint8_t tmp[10];
  int n = 0;
  do {
    tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  pb_bytes(b, tmp, (size_t)n);
}

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

static void pb_key(pb_buf *b, int field, int wire) { pb_varint(b, (uint64_t)field << 3 | (uint64_t)wire); }

static void pb_double(pb_buf *b, int field, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  uint8_t le[8];
  put_le(le, bits, 8);
  pb_key(b, field, WIRE_I64);
  pb_bytes(b, le, 8);
}

static void pb_float(pb_buf *b, int field, float v) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  uint8_t le[4];
  put_le(le, bits, 4);
  pb_key(b, field, WIRE_I32);
  pb_bytes(b, le, 4);
}

static void pb_len(pb_buf *b, int field, const void *src, size_t n) {
  pb_key(b, field, WIRE_LEN);
  pb_varint(b, n);
  pb_bytes(b, src, n);
}

enum { EV_WALL_TIME = 1, EV_STEP = 2, EV_FILE_VERSION = 3, EV_SUMMARY = 5, EV_SESSION_LOG = 7 };
enum { SUMMARY_VALUE = 1, VALUE_TAG = 1, VALUE_SIMPLE = 2, SESSION_STATUS = 1, SESSION_START = 1 };

static void event_head(pb_buf *b, double wall_time, int64_t step) {
  pb_double(b, EV_WALL_TIME, wall_time);
  if (step != 0) { /* proto3: a zero is not written */
    pb_key(b, EV_STEP, WIRE_VARINT);
    pb_varint(b, (uint64_t)step);
  }
}

static size_t pb_done(const pb_buf *b) { return b->overflow ? 0 : b->len; }

size_t tb_event_file_version(double wall_time, uint8_t *out, size_t cap) {
  pb_buf b = {out, 0, cap, 0};
  event_head(&b, wall_time, 0);
  static const char version[] = "brain.Event:2";
  pb_len(&b, EV_FILE_VERSION, version, sizeof version - 1);
  return pb_done(&b);
}

size_t tb_event_session_start(double wall_time, int64_t step, uint8_t *out, size_t cap) {
  pb_buf b = {out, 0, cap, 0};
  event_head(&b, wall_time, step);
  const uint8_t log[2] = {SESSION_STATUS << 3 | WIRE_VARINT, SESSION_START};
  pb_len(&b, EV_SESSION_LOG, log, sizeof log);
  return pb_done(&b);
}

size_t tb_event_scalar(double wall_time, int64_t step, const char *tag, float value, uint8_t *out, size_t cap) {
  uint8_t val[300], summary[310];
  const size_t tag_len = strlen(tag);
  if (tag_len > 256) return 0;
  pb_buf v = {val, 0, sizeof val, 0};
  pb_len(&v, VALUE_TAG, tag, tag_len);
  pb_float(&v, VALUE_SIMPLE, value);
  pb_buf s = {summary, 0, sizeof summary, 0};
  pb_len(&s, SUMMARY_VALUE, val, v.len);
  pb_buf b = {out, 0, cap, v.overflow || s.overflow};
  event_head(&b, wall_time, step);
  pb_len(&b, EV_SUMMARY, summary, s.len);
  return pb_done(&b);
}

/* ---- the file ---- */

struct tb_writer {
  FILE *f;
  int failed; /* a write failed: nothing more is written */
  char path[PATH_MAX];
};

/* mkdir -p */
static int make_dirs(const char *dir, boost_status *err) {
  char p[PATH_MAX];
  if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return boost_err(err, "train.tensorboard %s: path too long", dir);
  for (char *s = p + 1;; s++) {
    const char c = *s;
    if (c != '/' && c != '\0') continue;
    *s = '\0';
    if (mkdir(p, 0777) != 0 && errno != EEXIST)
      return boost_err(err, "cannot create train.tensorboard folder %s: %s", p, strerror(errno));
    *s = c;
    if (!c) break;
  }
  struct stat sb;
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return boost_err(err, "train.tensorboard %s is not a folder: give a folder's path", dir);
  return 0;
}

/* The newest <unix time> among dir's event files (0: none). */
static long long newest_event_time(const char *dir) {
  static const char prefix[] = "events.out.tfevents.";
  long long newest = 0;
  DIR *d = opendir(dir);
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strncmp(e->d_name, prefix, sizeof prefix - 1) != 0) continue;
    const long long t = strtoll(e->d_name + sizeof prefix - 1, NULL, 10);
    if (t > newest) newest = t;
  }
  closedir(d);
  return newest;
}

static int write_record(tb_writer *w, const uint8_t *data, size_t n, boost_status *err) {
  if (w->failed) return -1;
  uint8_t rec[1024];
  if (n == 0 || n + 16 > sizeof rec) return boost_err(err, "a TensorBoard event too large to write");
  const size_t len = tb_frame(data, n, rec);
  if (fwrite(rec, 1, len, w->f) != len) {
    w->failed = 1;
    return boost_err(err, "writing %s failed: %s", w->path, strerror(errno));
  }
  return 0;
}

int tb_writer_open(const char *dir, int64_t first_step, tb_writer **out, boost_status *err) {
  *out = NULL;
  if (make_dirs(dir, err) != 0) return -1;
  char host[256] = "localhost";
  if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "localhost");
  long long t = (long long)boost_unix_s();
  const long long newest = newest_event_time(dir);
  if (t <= newest) t = newest + 1; /* sorts after every file there (a restart within the second) */
  tb_writer *w = boost_calloc(1, sizeof *w);
  if (snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%lld.%s.%ld", dir, t, host, (long)getpid()) >=
      (int)sizeof w->path) {
    boost_free(w);
    return boost_err(err, "train.tensorboard %s: path too long", dir);
  }
  w->f = fopen(w->path, "wbx");
  if (!w->f) {
    boost_err(err, "cannot write in train.tensorboard folder %s: %s", dir, strerror(errno));
    boost_free(w);
    return -1;
  }
  uint8_t ev[128];
  const double now = boost_unix_s();
  if (write_record(w, ev, tb_event_file_version(now, ev, sizeof ev), err) != 0 ||
      write_record(w, ev, tb_event_session_start(now, first_step, ev, sizeof ev), err) != 0 ||
      tb_writer_flush(w, err) != 0) {
    tb_writer_close(w);
    return -1;
  }
  *out = w;
  return 0;
}

int tb_writer_scalar(tb_writer *w, int64_t step, const char *tag, double value, boost_status *err) {
  uint8_t ev[512];
  return write_record(w, ev, tb_event_scalar(boost_unix_s(), step, tag, (float)value, ev, sizeof ev), err);
}

int tb_writer_flush(tb_writer *w, boost_status *err) {
  if (w->failed) return -1;
  if (fflush(w->f) != 0) {
    w->failed = 1;
    return boost_err(err, "writing %s failed: %s", w->path, strerror(errno));
  }
  return 0;
}

const char *tb_writer_path(const tb_writer *w) { return w->path; }

void tb_writer_close(tb_writer *w) {
  if (!w) return;
  if (w->f) fclose(w->f);
  boost_free(w);
}
