/* Layout-independent checksums of a tensor's logical content.
 *
 * Definition ("xxh3-64-elemsum-v1", docs/CHECKPOINT_FORMAT.md): for a tensor
 * of N elements with 4-byte IEEE-754 / int32 values, flattened in row-major
 * order of its GLOBAL shape,
 *
 *     checksum = sum over k in [0, N) of XXH3_64bits_withSeed(le32(x_k), 4, k)   (mod 2^64)
 *
 * where le32(x_k) is the element's 4 bytes in little-endian order and the
 * seed k is its global row-major index. (8-byte int64 datasets use the same
 * form with the 8 bytes of each element.)
 *
 * Each term depends only on an element's value and its global position, and
 * the terms are summed, so any partition of the tensor over ranks (data,
 * tensor or pipeline parallel hyperslabs, arbitrary ZeRO-style ranges) gives
 * the same value: every rank sums the terms of the elements it holds and one
 * MPI_Allreduce (MPI_UINT64_T, MPI_SUM) completes the checksum. Any single
 * changed, moved or swapped element changes it (with probability 1 - 2^-64).
 */
#ifndef BOOST_CKPT_HASH_H
#define BOOST_CKPT_HASH_H

#include <stddef.h>
#include <stdint.h>

/* Sum of the terms of n consecutive 4-byte elements with global indices
 * index0, index0 + 1, ... (x need not be aligned). */
uint64_t ckpt_hash_run32(const void *x, size_t n, uint64_t index0);

/* Same for 8-byte elements. */
uint64_t ckpt_hash_run64(const void *x, size_t n, uint64_t index0);

#define CKPT_HASH_MAX_DIMS 8 /* the most dimensions a hyperslab's hash takes */

/* Sum of the terms of a hyperslab of 4-byte elements: data holds the
 * row-major local block of extent lshape at global offset `offset` inside a
 * tensor of global shape gshape (ndim dims). */
uint64_t ckpt_hash_slab32(const void *data, int ndim, const int64_t *gshape, const int64_t *offset,
                          const int64_t *lshape);

/* bfloat16 elements (2 bytes, little-endian: the top half of a float32)
 * hash as the float32 values they widen to, exactly: a bf16 dataset has the
 * checksum of its values read as float32 (docs/CHECKPOINT_FORMAT.md). */
uint64_t ckpt_hash_run_bf16(const void *x, size_t n, uint64_t index0);
uint64_t ckpt_hash_slab_bf16(const void *data, int ndim, const int64_t *gshape, const int64_t *offset,
                             const int64_t *lshape);

/* The reference definition (slow: one XXH3 library call per element); tests
 * compare the fast path with it. */
uint64_t ckpt_hash_run32_reference(const void *x, size_t n, uint64_t index0);

#endif
