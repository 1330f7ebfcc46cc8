/* boost-export: the safetensors files. Format: an 8-byte little-endian
 * header length, a JSON header (padded with spaces to a multiple of 8)
 * mapping each tensor name to dtype, shape and [begin, end) byte offsets
 * into the data that follows, plus "__metadata__": {"format": "pt"}; the
 * data is every tensor in C order, contiguous, in header order.
 *
 * Memory: one source dataset at a time (the largest is the peak: a grouped
 * tensor or the embedding) plus a 1 MiB block that rows are permuted and
 * converted through; the checksum each dataset carries is verified on the
 * values read, so a damaged checkpoint is refused, not exported. */
#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_h5.h"
#include "ckpt_hash.h"
#include "export.h"
#include "util.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian: the writer copies native floats"
#endif

#define BLOCK_BYTES (1u << 20)

typedef struct {
  const exp_plan *p;
  const ckr_ckpt *c;
  int quiet;
  char src[96]; /* the source dataset held in buf */
  float *buf;
  size_t n;
  float *block;
  size_t block_floats;
  uint64_t done;
  double t0;
  int last_pct, last_tenth;
} writer;

/* A bar redrawn in place on a terminal; in a log (not a TTY) a line per
 * tenth once the export has taken 5 s, as boost-reshard does. */
static void progress(writer *w) {
  if (w->quiet) return;
  const uint64_t total = w->p->total_bytes;
  const int pct = total ? (int)(100 * w->done / total) : 100;
  if (pct == w->last_pct) return;
  w->last_pct = pct;
  const double el = boost_now_s() - w->t0;
  if (isatty(STDERR_FILENO)) {
    char bar[41];
    const int fill = pct * 40 / 100;
    for (int i = 0; i < 40; i++) bar[i] = i < fill ? '#' : '.';
    bar[40] = 0;
    fprintf(stderr, "\rboost-export: [%s] %3d%% %.1f/%.1f MB %.0f s", bar, pct, (double)w->done / 1e6,
            (double)total / 1e6, el);
    if (pct == 100) fputc('\n', stderr);
  } else if (pct / 10 > w->last_tenth && el >= 5) {
    w->last_tenth = pct / 10;
    fprintf(stderr, "boost-export: %3d%% (%.1f/%.1f MB, %.0f s)\n", pct, (double)w->done / 1e6, (double)total / 1e6, el);
  }
}

/* Makes /model/<src> the dataset in w->buf (read once, checksum verified). */
static int load_source(writer *w, const char *src, boost_status *err) {
  if (w->buf && !strcmp(w->src, src)) return 0;
  free(w->buf);
  w->buf = NULL;
  char path[128];
  snprintf(path, sizeof path, "/model/%s", src);
  const ckr_dset *d = ckr_find(w->c, path);
  size_t esz;
  if (!d) return boost_err(err, "tensor %s is missing", path);
  w->buf = ckr_read(w->c, d, &w->n, &esz, err);
  if (!w->buf) return -1;
  if (d->has_checksum) {
    const uint64_t sum = ckpt_hash_run32(w->buf, w->n, 0);
    if (sum != d->checksum)
      return boost_err(err, "tensor %s: checksum mismatch (stored %016llx, computed %016llx)", path,
                       (unsigned long long)d->checksum, (unsigned long long)sum);
  }
  snprintf(w->src, sizeof w->src, "%s", src);
  return 0;
}

/* Source row of output row j: HF's rotate-half order puts, within each head
 * of hd rows, the first element of every interleaved pair first (rows
 * 0, 2, 4, ...) and the second ones after (1, 3, 5, ...). */
static int64_t source_row(const exp_tensor *t, int64_t j) {
  if (t->rope_heads <= 0) return j;
  const int64_t hd = t->shape[0] / t->rope_heads, half = hd / 2;
  const int64_t h = j / hd, w = j % hd;
  return h * hd + 2 * (w % half) + w / half;
}

static int write_tensor(writer *w, int fd, const exp_tensor *t, const char *file, boost_status *err) {
  if (load_source(w, t->src, err) != 0) return -1;
  const int64_t rows = t->ndim == 2 ? t->shape[0] : 1, cols = t->ndim == 2 ? t->shape[1] : t->shape[0];
  const float *base = w->buf + (t->slice >= 0 ? (size_t)t->slice * (size_t)(rows * cols) : 0);
  if ((size_t)((base - w->buf) + rows * cols) > w->n) return boost_err(err, "tensor /model/%s: short read", t->src);
  const int64_t per_block = (int64_t)w->block_floats / cols;
  for (int64_t r0 = 0; r0 < rows; r0 += per_block) {
    const int64_t nr = rows - r0 < per_block ? rows - r0 : per_block;
    for (int64_t j = 0; j < nr; j++)
      memcpy(w->block + j * cols, base + source_row(t, r0 + j) * cols, (size_t)cols * sizeof(float));
    size_t n = (size_t)(nr * cols), bytes = n * sizeof(float);
    if (w->p->dtype == EXP_BF16) {
      ckpt_round_bf16(w->block, n); /* boost-reshard --bf16's rule */
      uint16_t *half = (uint16_t *)w->block;
      for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &w->block[i], sizeof u);
        half[i] = (uint16_t)(u >> 16);
      }
      bytes = n * 2;
    }
    if (exp_write_all(fd, w->block, bytes, file, err) != 0) return -1;
    w->done += bytes;
    progress(w);
  }
  return 0;
}

/* The JSON header of one shard, padded with spaces to a multiple of 8. */
static char *shard_header(const exp_plan *p, int shard, size_t *len) {
  cJSON *h = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(h, "__metadata__");
  cJSON_AddStringToObject(meta, "format", "pt");
  for (int i = 0; i < p->n; i++) {
    const exp_tensor *t = &p->t[i];
    if (t->shard != shard) continue;
    cJSON *e = cJSON_AddObjectToObject(h, t->name), *shape = cJSON_AddArrayToObject(e, "shape");
    cJSON_AddStringToObject(e, "dtype", p->dtype == EXP_BF16 ? "BF16" : "F32");
    for (int k = 0; k < t->ndim; k++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[k]));
    cJSON *off = cJSON_AddArrayToObject(e, "data_offsets");
    cJSON_AddItemToArray(off, cJSON_CreateNumber((double)t->begin));
    cJSON_AddItemToArray(off, cJSON_CreateNumber((double)t->end));
  }
  char *text = cJSON_PrintUnformatted(h);
  cJSON_Delete(h);
  if (!text) return NULL;
  size_t n = strlen(text), padded = (n + 7) / 8 * 8;
  char *out = realloc(text, padded + 1);
  if (!out) {
    free(text);
    return NULL;
  }
  memset(out + n, ' ', padded - n);
  out[padded] = 0;
  *len = padded;
  return out;
}

static int write_shard(writer *w, const char *dir, int shard, boost_status *err) {
  char name[64], path[4400];
  exp_shard_name(w->p, shard, name, sizeof name);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  size_t hlen;
  char *header = shard_header(w->p, shard, &hlen);
  if (!header) return boost_err(err, "out of memory");
  const int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  int rc = fd < 0 ? boost_err(err, "%s: cannot create: %s", path, strerror(errno)) : exp_dir_track(name) ? boost_err(err, "%s: too many files", path) : 0;
  unsigned char len8[8];
  for (int k = 0; k < 8; k++) len8[k] = (unsigned char)((uint64_t)hlen >> (8 * k));
  if (rc == 0) rc = exp_write_all(fd, len8, 8, path, err);
  if (rc == 0) rc = exp_write_all(fd, header, hlen, path, err);
  for (int i = 0; rc == 0 && i < w->p->n; i++)
    if (w->p->t[i].shard == shard) rc = write_tensor(w, fd, &w->p->t[i], path, err);
  if (rc == 0 && fsync(fd) != 0) rc = boost_err(err, "%s: fsync failed: %s", path, strerror(errno));
  if (fd >= 0 && close(fd) != 0 && rc == 0) rc = boost_err(err, "%s: close failed: %s", path, strerror(errno));
  free(header);
  return rc;
}

/* model.safetensors.index.json: the total size and each tensor's file. */
static int write_index(const exp_plan *p, const char *dir, boost_status *err) {
  cJSON *o = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(o, "metadata"), *map = cJSON_AddObjectToObject(o, "weight_map");
  cJSON_AddNumberToObject(meta, "total_size", (double)p->total_bytes);
  for (int i = 0; i < p->n; i++) {
    char name[64];
    exp_shard_name(p, p->t[i].shard, name, sizeof name);
    cJSON_AddStringToObject(map, p->t[i].name, name);
  }
  char *text = cJSON_Print(o);
  cJSON_Delete(o);
  if (!text) return boost_err(err, "out of memory");
  const int rc = exp_write_file(dir, "model.safetensors.index.json", text, strlen(text), err);
  free(text);
  return rc;
}

int exp_write_tensors(const exp_plan *p, const ckr_ckpt *c, const char *dir, int quiet, boost_status *err) {
  writer w = {.p = p, .c = c, .quiet = quiet, .t0 = boost_now_s(), .last_pct = -1};
  size_t widest = 1;
  for (int i = 0; i < p->n; i++) {
    const size_t cols = (size_t)(p->t[i].ndim == 2 ? p->t[i].shape[1] : p->t[i].shape[0]);
    if (cols > widest) widest = cols;
  }
  w.block_floats = BLOCK_BYTES / sizeof(float) > widest ? BLOCK_BYTES / sizeof(float) : widest;
  w.block = malloc(w.block_floats * sizeof(float));
  int rc = w.block ? 0 : boost_err(err, "out of memory");
  for (int s = 0; rc == 0 && s < p->shards; s++) rc = write_shard(&w, dir, s, err);
  if (rc == 0 && p->shards > 1) rc = write_index(p, dir, err);
  if (rc != 0 && !quiet && isatty(STDERR_FILENO)) fputc('\n', stderr);
  free(w.buf);
  free(w.block);
  return rc;
}
