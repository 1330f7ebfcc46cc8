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
#include "ckpt_stage.h"
#include "util.h"

void ckpt_load_begin(ckpt_stager *st) {
  const size_t nkeys = (size_t)st->plan->nent * CKPT_NUM_CATEGORIES;
  boost_free(st->lring.key);
  boost_free(st->lring.at);
  st->lring.key = boost_calloc(nkeys ? nkeys : 1, sizeof *st->lring.key);
  st->lring.at = boost_calloc(nkeys ? nkeys : 1, sizeof *st->lring.at);
  st->lring.n = 0;
  st->lring.used = 0;
}

void ckpt_load_end(ckpt_stager *st) {
  boost_free(st->lring.key);
  boost_free(st->lring.at);
  st->lring.key = NULL;
  st->lring.at = NULL;
  st->lring.n = 0;
}

int ckpt_load_flush(ckpt_stager *st, ckpt_chunk_reader *cr, boost_status *err) {
  if (ckpt_chunk_reader_wait(cr, err) != 0) return -1;
  boost_backend *be = st->store->be;
  for (int k = 0; k < st->lring.n; k++) {
    const ckpt_entry *e = &st->plan->ents[st->lring.key[k] / CKPT_NUM_CATEGORIES];
    const int c = st->lring.key[k] % CKPT_NUM_CATEGORIES;
    be->mem->upload(be, ckpt_arena_rows(st->store, e, c, e->r0[c]), st->stage + st->lring.at[k],
                    ckpt_band_rows_floats(e, st->reg, c) * sizeof(float));
  }
  st->lring.n = 0;
  st->lring.used = 0;
  return 0;
}

float *ckpt_load_dst(ckpt_stager *st, ckpt_chunk_reader *cr, int i, int c, boost_status *err) {
  const ckpt_entry *e = &st->plan->ents[i];
  if (!st->load_streamed) return st->stage + e->load_off[c];
  boost_backend *be = st->store->be;
  float *rows = ckpt_arena_rows(st->store, e, c, e->r0[c]);
  if (st->load_host) return be->mem->host_view(be, rows);
  const size_t n = ckpt_band_rows_floats(e, st->reg, c);
  if (st->lring.used + n > st->stage_floats && ckpt_load_flush(st, cr, err) != 0) return NULL;
  BOOST_ASSERT(n <= st->stage_floats); /* ckpt_stager_init sized it */
  st->lring.key[st->lring.n] = i * CKPT_NUM_CATEGORIES + c;
  st->lring.at[st->lring.n++] = st->lring.used;
  float *dst = st->stage + st->lring.used;
  st->lring.used += (n + 15) & ~(size_t)15;
  if (st->lring.used > st->stage_floats) st->lring.used = st->stage_floats;
  return dst;
}
