/* Counter-based random numbers: a value is a pure function of (key, index),
 * so a tensor sharded any way is initialised to the same global values. */
#ifndef BOOST_RNG_H
#define BOOST_RNG_H

#include <math.h>
#include <stdint.h>

static inline uint64_t rng_mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* FNV-1a of a string, for keying by tensor name. */
static inline uint64_t rng_hash_str(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

/* Uniform in (0, 1). */
static inline double rng_uniform(uint64_t key, uint64_t index) {
  uint64_t z = rng_mix64(key ^ rng_mix64(index));
  return ((double)(z >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Standard normal (Box-Muller on two counter draws). */
static inline double rng_normal(uint64_t key, uint64_t index) {
  double u1 = rng_uniform(key, 2 * index), u2 = rng_uniform(key, 2 * index + 1);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
