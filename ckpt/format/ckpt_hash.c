#include "ckpt_hash.h"

#include <stdatomic.h>
#include <string.h>
#include <xxhash.h>

/* XXH3_64bits_withSeed for a 4-byte input is XXH3_len_4to8_64b (xxHash
 * 0.8, whose output is frozen): a keyed 64-bit word and the rrmxmx mix. It is
 * written out here in a branch-free form the compiler vectorises; `bitflip0`
 * is (readLE64(kSecret + 8) ^ readLE64(kSecret + 16)) of the default secret.
 * ckpt_hash_run32 checks the transcription against the library once and falls
 * back to the library call if they ever disagree. */
static const uint64_t bitflip0 = 0xc73ab174c5ecd5a2ull;

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t term32(uint32_t v, uint64_t seed) {
  const uint32_t s = (uint32_t)seed;
  const uint32_t bs = (s >> 24) | ((s >> 8) & 0xff00u) | ((s << 8) & 0xff0000u) | (s << 24);
  seed ^= (uint64_t)bs << 32;
  uint64_t h = ((uint64_t)v + ((uint64_t)v << 32)) ^ (bitflip0 - seed);
  h ^= rotl64(h, 49) ^ rotl64(h, 24);
  h *= 0x9FB21C651E98DF25ull;
  h ^= (h >> 35) + 4;
  h *= 0x9FB21C651E98DF25ull;
  return h ^ (h >> 28);
}

static inline uint32_t load_le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t ckpt_hash_run32_reference(const void *x, size_t n, uint64_t index0) {
  const unsigned char *p = x;
  uint64_t s = 0;
  for (size_t j = 0; j < n; j++) {
    unsigned char le[4];
    uint32_t v = load_le32(p + 4 * j);
    le[0] = (unsigned char)v, le[1] = (unsigned char)(v >> 8), le[2] = (unsigned char)(v >> 16), le[3] = (unsigned char)(v >> 24);
    s += XXH3_64bits_withSeed(le, 4, index0 + j);
  }
  return s;
}

static atomic_int fast_path_ok = -1; /* -1 unknown; the first caller decides (idempotent) */

static int check_fast_path(void) {
  static const uint32_t probe[5] = {0u, 1u, 0x3f800000u, 0xdeadbeefu, 0xffffffffu};
  static const uint64_t seeds[5] = {0u, 1u, 0xfffffffeull, 0x100000001ull, 0x123456789abcdefull};
  for (int i = 0; i < 5; i++) {
    unsigned char le[4] = {(unsigned char)probe[i], (unsigned char)(probe[i] >> 8), (unsigned char)(probe[i] >> 16),
                           (unsigned char)(probe[i] >> 24)};
    if (term32(probe[i], seeds[i]) != XXH3_64bits_withSeed(le, 4, seeds[i])) return 0;
  }
  return 1;
}

uint64_t ckpt_hash_run32(const void *x, size_t n, uint64_t index0) {
  if (fast_path_ok < 0) fast_path_ok = check_fast_path();
  if (!fast_path_ok) return ckpt_hash_run32_reference(x, n, index0);
  const unsigned char *p = x;
  uint64_t s = 0;
  uint32_t buf[256];
  /* Copy through an aligned block: the loop below then vectorises. */
  for (size_t j0 = 0; j0 < n; j0 += 256) {
    const size_t m = n - j0 < 256 ? n - j0 : 256;
    memcpy(buf, p + 4 * j0, 4 * m);
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    for (size_t j = 0; j < m; j++) buf[j] = load_le32((const unsigned char *)&buf[j]);
#endif
    const uint64_t base = index0 + j0;
    for (size_t j = 0; j < m; j++) s += term32(buf[j], base + j);
  }
  return s;
}

uint64_t ckpt_hash_run64(const void *x, size_t n, uint64_t index0) {
  const unsigned char *p = x;
  uint64_t s = 0;
  for (size_t j = 0; j < n; j++) {
    unsigned char le[8];
    uint64_t v;
    memcpy(&v, p + 8 * j, 8);
    for (int b = 0; b < 8; b++) le[b] = (unsigned char)(v >> (8 * b));
    s += XXH3_64bits_withSeed(le, 8, index0 + j);
  }
  return s;
}

uint64_t ckpt_hash_run_bf16(const void *x, size_t n, uint64_t index0) {
  const unsigned char *p = x;
  unsigned char wide[4 * 256] = {0}; /* the float32 bytes, little-endian: two zero bytes, then the bf16's two */
  uint64_t s = 0;
  for (size_t j0 = 0; j0 < n; j0 += 256) {
    const size_t m = n - j0 < 256 ? n - j0 : 256;
    for (size_t j = 0; j < m; j++) memcpy(wide + 4 * j + 2, p + 2 * (j0 + j), 2);
    s += ckpt_hash_run32(wide, m, index0 + j0);
  }
  return s;
}

/* The terms of a hyperslab: one run of `run_fn` per local row. */
static uint64_t hash_slab(const void *data, size_t esz, uint64_t (*run_fn)(const void *, size_t, uint64_t), int ndim,
                          const int64_t *gshape, const int64_t *offset, const int64_t *lshape) {
  if (ndim <= 0) return 0;
  int64_t stride[CKPT_HASH_MAX_DIMS];
  stride[ndim - 1] = 1;
  for (int d = ndim - 2; d >= 0; d--) stride[d] = stride[d + 1] * gshape[d + 1];
  const int64_t run = lshape[ndim - 1];
  int64_t nrows = 1;
  for (int d = 0; d < ndim - 1; d++) nrows *= lshape[d];
  if (run <= 0 || nrows <= 0) return 0;
  const unsigned char *p = data;
  uint64_t s = 0;
  int64_t idx[CKPT_HASH_MAX_DIMS] = {0};
  for (int64_t r = 0; r < nrows; r++) {
    int64_t g = offset[ndim - 1];
    for (int d = 0; d < ndim - 1; d++) g += (offset[d] + idx[d]) * stride[d];
    s += run_fn(p + (size_t)(r * run) * esz, (size_t)run, (uint64_t)g);
    for (int d = ndim - 2; d >= 0; d--) { /* next local row */
      if (++idx[d] < lshape[d]) break;
      idx[d] = 0;
    }
  }
  return s;
}

uint64_t ckpt_hash_slab32(const void *data, int ndim, const int64_t *gshape, const int64_t *offset,
                          const int64_t *lshape) {
  return hash_slab(data, 4, ckpt_hash_run32, ndim, gshape, offset, lshape);
}

uint64_t ckpt_hash_slab_bf16(const void *data, int ndim, const int64_t *gshape, const int64_t *offset,
                             const int64_t *lshape) {
  return hash_slab(data, 2, ckpt_hash_run_bf16, ndim, gshape, offset, lshape);
}
