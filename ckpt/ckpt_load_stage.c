/* Where a load decodes each band, within the staging bound.
 *
 * Streamed (moments whole, the usual case): a band goes straight into the
 * arenas as it is decoded, with no copy of the state on the host. On a
 * backend whose memory is host memory (the CPU's) the decoders write into
 * the arena rows themselves; on another (CUDA) they write into the staging
 * buffer used as a ring -- ckpt.staging_limit's size, as for a save -- and
 * the ring's bands are uploaded whenever it is full and at the end, so a
 * load holds no more host memory than a save. A candidate that then fails
 * verification has overwritten part of the arenas; the next candidate
 * overwrites all of them, and when none verifies the run stops (never a
 * fresh start over checkpoints that exist), so nothing trains on it.
 *
 * Staged (ZeRO-1 moment chunks, never bounded): every band into the
 * staging buffer at its plan offset, uploaded after verification
 * (ckpt_upload_loaded) as before. */
#include <string.h>

#include "check.h"
#include "ckpt_internal.h"

static size_t band_floats(const ckpt_session *s, const ckpt_entry *e, int c) {
  return (size_t)(e->r1[c] - e->r0[c]) * ckpt_row_floats(&s->reg->tensors[e->local]);
}

size_t ckpt_load_largest_band(const ckpt_session *s) {
  size_t most = 0;
  for (int i = 0; i < s->nent; i++)
    for (int c = 0; c < CKPT_NUM_CATEGORIES; c++) {
      const ckpt_entry *e = &s->ents[i];
      if (e->load_off[c] != CKPT_NO_STAGE && band_floats(s, e, c) > most) most = band_floats(s, e, c);
    }
  return most;
}

void ckpt_load_begin(ckpt_session *s) {
  const size_t nkeys = (size_t)s->nent * CKPT_NUM_CATEGORIES;
  boost_free(s->lring_key);
  boost_free(s->lring_at);
  s->lring_key = boost_calloc(nkeys ? nkeys : 1, sizeof *s->lring_key);
  s->lring_at = boost_calloc(nkeys ? nkeys : 1, sizeof *s->lring_at);
  s->lring_n = 0;
  s->lring_used = 0;
}

void ckpt_load_end(ckpt_session *s) {
  boost_free(s->lring_key);
  boost_free(s->lring_at);
  s->lring_key = NULL;
  s->lring_at = NULL;
  s->lring_n = 0;
}

int ckpt_load_flush(ckpt_session *s, ckpt_chunk_reader *cr, char *err, size_t errlen) {
  if (ckpt_chunk_reader_wait(cr, err, errlen) != 0) return -1;
  boost_backend *be = s->reg->be;
  for (int k = 0; k < s->lring_n; k++) {
    const ckpt_entry *e = &s->ents[s->lring_key[k] / CKPT_NUM_CATEGORIES];
    const int c = s->lring_key[k] % CKPT_NUM_CATEGORIES;
    be->mem->upload(be, ckpt_arena_rows(s, e, c, e->r0[c]), s->stage + s->lring_at[k],
                    band_floats(s, e, c) * sizeof(float));
  }
  s->lring_n = 0;
  s->lring_used = 0;
  return 0;
}

float *ckpt_load_dst(ckpt_session *s, ckpt_chunk_reader *cr, int i, int c, char *err, size_t errlen) {
  const ckpt_entry *e = &s->ents[i];
  if (!s->load_streamed) return s->stage + e->load_off[c];
  boost_backend *be = s->reg->be;
  float *rows = ckpt_arena_rows(s, e, c, e->r0[c]);
  if (s->load_host) return be->mem->host_view(be, rows);
  const size_t n = band_floats(s, e, c);
  if (s->lring_used + n > s->stage_floats && ckpt_load_flush(s, cr, err, errlen) != 0) return NULL;
  BOOST_ASSERT(n <= s->stage_floats); /* ckpt_stage_alloc sized it */
  s->lring_key[s->lring_n] = i * CKPT_NUM_CATEGORIES + c;
  s->lring_at[s->lring_n++] = s->lring_used;
  float *dst = s->stage + s->lring_used;
  s->lring_used += (n + 15) & ~(size_t)15;
  if (s->lring_used > s->stage_floats) s->lring_used = s->stage_floats;
  return dst;
}
