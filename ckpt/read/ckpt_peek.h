/* A look at the checkpoint a resume would start from, before the model is
 * built: the stored config and layout decide whether this run may resume it
 * (same model) and how to split the stored global batch over this run's
 * data-parallel degree. Serial HDF5 on the calling process; no MPI, no
 * verification of tensors (the resume itself verifies everything). */
#ifndef BOOST_CKPT_PEEK_H
#define BOOST_CKPT_PEEK_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt_meta.h"
#include "status.h"

#define CKPT_PATH_MAX PATH_MAX

/* Where a resume reads from (the run's ckpt.resume, parsed once): the newest
 * good checkpoint of the checkpoint directory, nothing, or a named file or
 * directory. */
typedef enum { CKPT_FROM_AUTO = 0, CKPT_FROM_NONE, CKPT_FROM_PATH } ckpt_from_kind;
typedef struct {
  ckpt_from_kind kind;
  char path[CKPT_PATH_MAX]; /* CKPT_FROM_PATH */
} ckpt_from;

typedef struct {
  char path[PATH_MAX];
  ckpt_meta meta;     /* its root attributes (ckpt_peek_free) */
  ckpt_layout layout; /* the layout that wrote it */
  char skipped[1024]; /* newer files whose attributes could not be read, with why */
} ckpt_peek_info;

/* The checkpoint `from` names, given the checkpoint directory `dir` (may be
 * empty with a PATH): for auto (or a PATH that is a directory), the newest
 * committed file whose root attributes read. Returns 1 with *out filled, 0
 * when there is nothing to resume (none, an empty or missing directory:
 * out->skipped says whether unreadable files were passed over), -1 with err
 * (naming the path) when a named PATH cannot be used. */
int ckpt_peek(const char *dir, const ckpt_from *from, ckpt_peek_info *out, boost_status *err);
void ckpt_peek_free(ckpt_peek_info *p);

#endif
