/* bf16 <-> fp32 on the CPU: the upper 16 bits of an IEEE float. Widening is
 * exact; narrowing rounds to nearest even, a NaN stays a (quiet) NaN. */
#ifndef BOOST_KERNELS_CPU_BF16_H
#define BOOST_KERNELS_CPU_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef uint16_t bf16_t;

static inline float bf16_to_f32(bf16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline bf16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16_t)((u >> 16) | 0x40u);
  return (bf16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* Arrays (OpenMP over large n; element-wise, so deterministic). */
void bf16_from_f32(bf16_t *dst, const float *src, size_t n);
void bf16_to_f32_array(float *dst, const bf16_t *src, size_t n);

#endif
