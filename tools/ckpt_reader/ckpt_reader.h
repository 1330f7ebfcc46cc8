/* The checkpoint reader every tool shares (boost-inspect, boost-reshard,
 * boost-generate, boost-eval, boost-export): a checkpoint opened
 * defensively (a file, or a folder's `latest` / newest step), its dataset
 * list, whole-dataset reads, the precision it was written in, the tensors
 * its stored config implies. It returns what went wrong in a boost_status
 * and never prints. docs/INSPECT.md describes the checks. */
#ifndef BOOST_CKPT_READER_H
#define BOOST_CKPT_READER_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt_meta.h"
#include "status.h"

#define CKR_ERR 1024

typedef struct {
  char path[512];
  char category[16]; /* weights | moments | activations | state | other */
  char dtype[16];    /* float32 | float64 | int32 | int64 | uint64 | other */
  int ndim;
  hsize_t dims[8];
  double raw_bytes, stored_bytes;
  int has_checksum;
  uint64_t checksum;
} ckr_dset;

typedef struct {
  hid_t f, fapl;
  char path[4200];
  ckr_dset *d;
  int n, cap;
  int walk_failed; /* H5Lvisit stopped on an error: the list is incomplete */
  char walk_error[CKR_ERR];
  ckpt_meta meta; /* root attributes, through the schema (NULL / -1 when absent or unreadable) */
} ckr_ckpt;

/* Opens PATH (a file, or a directory: its `latest`, else newest step_*.h5),
 * checks that it is a boost checkpoint of a known format version and lists
 * its datasets. Returns 0, or -1 with one line in err. */
int ckr_open(const char *arg, ckr_ckpt *c, boost_status *err);
/* The same on an in-memory file image (fuzzing); buf must outlive c. */
int ckr_open_image(const void *buf, size_t len, ckr_ckpt *c, boost_status *err);
void ckr_close(ckr_ckpt *c);

/* A dataset by name, with or without the leading '/'; NULL when absent. */
const ckr_dset *ckr_find(const ckr_ckpt *c, const char *name);
/* Whole dataset in its own element type (4 or 8 bytes per element); every
 * chunk is decoded. NULL with err on failure. Caller frees. */
void *ckr_read(const ckr_ckpt *c, const ckr_dset *d, size_t *nelem, size_t *esz, boost_status *err);
/* Reads a float dataset (float32 or float64) as doubles. */
double *ckr_read_f64(const ckr_ckpt *c, const ckr_dset *d, size_t *nelem, boost_status *err);
double ckr_numel(const ckr_dset *d);

/* The precision of the run that wrote a checkpoint (root attribute
 * `precision`; files older than it read as fp32): 1 for bf16. Its stored
 * activations have that precision's dtype (bfloat16 or float32). */
int ckr_is_bf16(const ckr_ckpt *c);
const char *ckr_acts_dtype(const ckr_ckpt *c);

/* Expected tensors of the model a stored config describes. */
typedef struct {
  char name[96];
  int ndim;
  int64_t shape[4];
} ckr_tensor;
/* Parses the stored config JSON into the trainer's config and lists the
 * tensors it implies (names under /model without the group). Returns the
 * count, or -1 with err. *out is malloc'd. cfg_out (may be NULL) receives
 * the train_config (opaque here: a struct train_config *). */
int ckr_expected_tensors(const char *config_json, ckr_tensor **out, void *cfg_out, boost_status *err);

/* "2x3x4" (or "scalar"): a dataset's shape as the tools print it. */
void ckr_shape_str(const ckr_dset *d, char *out, size_t outlen);

#endif
