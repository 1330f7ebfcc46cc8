#include "local_fuzz_one.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "ckpt_run_id.h"

#define FUZZ_RUN_ID "0123456789abcdef0123456789abcdef"
#define FUZZ_STEP 7

void local_fuzz_expected(ckpt_local_manifest *m) {
  memset(m, 0, sizeof *m);
  memcpy(m->magic, LOCAL_MAGIC, sizeof LOCAL_MAGIC);
  ckpt_run_id_to_bytes(FUZZ_RUN_ID, m->run_id);
  m->step = FUZZ_STEP;
  m->shape = (ckpt_local_shape){1, 2, 2, 1, 1, 2, 64, 0, 32, 0x5eed};
  m->bytes[LOCAL_PARAMS] = 64 * sizeof(float);
  m->bytes[LOCAL_ADAM_M] = m->bytes[LOCAL_ADAM_V] = 32 * sizeof(float);
}

/* A state part: it unpacks and agrees with the manifest `man`. */
static int state_part(const uint8_t *p, size_t n, const ckpt_local_manifest *man, boost_status *why) {
  ckpt_meta meta;
  ckpt_state st;
  if (ckpt_local_unpack(p, n, &meta, &st, why) != 0) return 1;
  ckpt_meta_free(&meta);
  ckpt_state_free(&st);
  return ckpt_local_state_agrees(p, n, man, why) != 0;
}

/* The reader `kind` on p[0, n); mlen: the manifest's bytes. */
static int reader(int kind, const uint8_t *p, size_t n, size_t mlen, const ckpt_local_manifest *want,
                  boost_status *why) {
  if (kind == LOCAL_FUZZ_STATE) return state_part(p, n, want, why);
  ckpt_local_manifest m;
  if (ckpt_local_parse_manifest(p, mlen, &m, why) != 0 ||
      ckpt_local_manifest_fits(&m, "manifest", FUZZ_STEP, &want->shape, want->run_id, why) != 0)
    return 1;
  if (kind == LOCAL_FUZZ_MANIFEST) return 0;
  /* the partner's state part: exactly the size and checksum its manifest
   * (checked above, so bounded) announced, then checked as an own one */
  const uint8_t *sp = p + sizeof m;
  const size_t sn = n - sizeof m;
  if (m.bytes[LOCAL_STATE] != sn)
    return boost_err(why, "the state part sent has %zu bytes, its manifest says %llu", sn,
                     (unsigned long long)m.bytes[LOCAL_STATE]) != 0;
  if (XXH3_64bits(sp, sn) != m.sum[LOCAL_STATE])
    return boost_err(why, "the state part sent does not match its checksum") != 0;
  return state_part(sp, sn, &m, why);
}

/* What anyone who can write the folder can do: the manifest's own checksum
 * (and, with a state part after it, that part's) recomputed over what it
 * holds, so that the fuzzer reaches the checks beyond the checksums. */
static void reseal(uint8_t *p, size_t n, size_t mlen) {
  ckpt_local_manifest m;
  if (mlen != sizeof m) return;
  memcpy(&m, p, sizeof m);
  if (n > sizeof m) m.sum[LOCAL_STATE] = XXH3_64bits(p + sizeof m, n - sizeof m);
  m.self_sum = XXH3_64bits(&m, offsetof(ckpt_local_manifest, self_sum));
  memcpy(p, &m, sizeof m);
}

int local_fuzz_one(const uint8_t *data, size_t size, boost_status *why) {
  if (size == 0) return 1;
  const int kind = (data[0] & 0x7f) % LOCAL_FUZZ_NKINDS;
  const size_t n = size - 1;
  uint8_t *p = malloc(n ? n : 1);
  if (!p) return 1;
  memcpy(p, data + 1, n);
  ckpt_local_manifest want;
  local_fuzz_expected(&want);
  const size_t mlen = kind == LOCAL_FUZZ_MANIFEST ? n : (n < sizeof want ? n : sizeof want);
  if (kind != LOCAL_FUZZ_STATE && !(data[0] & 0x80)) reseal(p, kind == LOCAL_FUZZ_PARTNER ? n : mlen, mlen);
  const int rc = reader(kind, p, n, mlen, &want, why);
  free(p);
  return rc;
}
