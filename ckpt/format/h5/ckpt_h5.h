/* Small HDF5 helpers shared by the checkpoint writer/reader and the tools:
 * error capture as one line, typed scalar/string attributes, the chunk shape
 * rule, and the names of the format (docs/CHECKPOINT_FORMAT.md).
 *
 * HDF5 is not thread-safe: in a training process only the checkpoint writer
 * thread calls these; tools call them from their only thread. */
#ifndef BOOST_CKPT_H5_H
#define BOOST_CKPT_H5_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define CKPT_FORMAT_NAME "boost-checkpoint"
#define CKPT_FORMAT_VERSION 1
#define CKPT_CHECKSUM_ALGORITHM "xxh3-64-elemsum-v1"
#define CKPT_ATTR_CHECKSUM "xxh3_elemsum"
#define CKPT_CHUNK_ELEMS ((int64_t)1 << 18) /* 1 MiB of float32 per chunk at most */

/* Groups holding the tensors of each category, in file order. */
#define CKPT_GROUP_MODEL "/model"
#define CKPT_GROUP_ADAM_M "/optim/adam_m"
#define CKPT_GROUP_ADAM_V "/optim/adam_v"
#define CKPT_GROUP_STATE "/state"
#define CKPT_GROUP_ACTS "/activations"

/* Switch off HDF5's automatic error printing for this process. */
void ckpt_h5_quiet(void);

/* One line "what: <innermost HDF5 error> (<function>) <- <next>" from the
 * current HDF5 error stack, which it then clears. */
void ckpt_h5_error(char *out, size_t outlen, const char *what);
/* The same line into err (marked failed); returns -1. */
int ckpt_h5_fail(boost_status *err, const char *what);

/* Attributes on an object (file, group or dataset). Writers create the
 * attribute (replacing none: the object must not have it). Return 0 / -1. */
int ckpt_attr_put_i64(hid_t obj, const char *name, int64_t v);
int ckpt_attr_put_u64(hid_t obj, const char *name, uint64_t v);
int ckpt_attr_put_f64(hid_t obj, const char *name, double v);
int ckpt_attr_put_str(hid_t obj, const char *name, const char *v);
int ckpt_attr_get_i64(hid_t obj, const char *name, int64_t *v);
int ckpt_attr_get_u64(hid_t obj, const char *name, uint64_t *v);
int ckpt_attr_get_f64(hid_t obj, const char *name, double *v);
/* Reads a fixed- or variable-length string attribute into a malloc'd,
 * NUL-terminated string (*v, caller frees). */
int ckpt_attr_get_str(hid_t obj, const char *name, char **v);
/* 1 when the attribute exists, 0 when not, -1 on error. */
int ckpt_attr_exists(hid_t obj, const char *name);

/* The default chunk shape of a dataset, a function of its global shape:
 * whole trailing rows, at most CKPT_CHUNK_ELEMS elements per chunk. */
void ckpt_chunk_dims(int ndim, const int64_t *shape, hsize_t *chunk);
/* The chunk shape of a dataset whose writers' hyperslabs meet at multiples
 * of cut[d] along each dimension d (0: nowhere inside the dimension): the
 * default rule applied to one cell (cut[d], or the whole extent where it is
 * 0), each cut extent then lowered to a divisor of cut[d]. Every writer's
 * hyperslab is then a union of whole chunks, so each chunk has one writer
 * (the direct writer, ckpt_direct.h). All cut[d] 0: ckpt_chunk_dims. */
void ckpt_chunk_dims_cut(int ndim, const int64_t *shape, const int64_t *cut, hsize_t *chunk);
/* The greatest common divisor (of non-negative numbers; gcd(0, b) = b). */
int64_t ckpt_gcd64(int64_t a, int64_t b);
/* Adds to cut[d] (a gcd, 0: none yet) the boundaries of the hyperslab
 * [start, start + count) that lie inside a dataset of shape `shape`. */
void ckpt_chunk_cut_add(int ndim, const int64_t *shape, const int64_t *start, const int64_t *count, int64_t *cut);

/* bfloat16 as an HDF5 float type (sign bit 15, 8 exponent bits at 7, 7
 * mantissa bits, bias 127: the top half of an IEEE float32), so HDF5 and
 * h5py convert it to float32 on read. boost-reshard --bf16 stores exported
 * weights with it; its checksum is the float32 one over the values as read.
 * Caller closes the type. */
hid_t ckpt_bf16_type(void);
/* 1 when a dataset's file type is that bfloat16 layout. */
int ckpt_type_is_bf16(hid_t type);
/* Rounds float32 values to the nearest bfloat16 (ties to even), in place;
 * NaN stays NaN, values beyond bf16's range become infinities. */
void ckpt_round_bf16(float *v, size_t n);

/* Every dataset directly in `group`: its header read, every chunk decoded
 * and its CKPT_ATTR_CHECKSUM recomputed (4-byte elements with the 32-bit
 * rule, 8-byte with the 64-bit one). 0 when all agree, else -1 with the
 * first problem in why. */
int ckpt_check_group(hid_t file, const char *group, boost_status *why);

/* "step_00000040.h5" for a step. */
void ckpt_file_name(char *out, size_t outlen, int64_t step);
/* Parses a committed checkpoint file name; returns the step or -1. */
int64_t ckpt_parse_file_name(const char *name);
/* 0 when the last component of path is not a checkpoint file name or names
 * `step`; -1 with why when it names another step (a renamed copy: a resume
 * must not take it for that step). */
int ckpt_check_file_step(const char *path, int64_t step, boost_status *why);

#endif
