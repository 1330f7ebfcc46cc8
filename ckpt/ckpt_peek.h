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

typedef struct {
  char path[PATH_MAX];
  int64_t step;
  int64_t format_version;
  char *config_json; /* malloc'd */
  int layout_dp, layout_tp, layout_pp;
  char skipped[1024]; /* newer files whose attributes could not be read, with why */
} ckpt_peek_info;

/* The checkpoint `resume` (auto | PATH; a directory is searched like auto)
 * names, given ckpt.dir `dir` (may be empty with a PATH): for auto, the
 * newest committed file whose root attributes read. Returns 1 with *out
 * filled, 0 when there is nothing to resume (empty or missing directory:
 * out->skipped says whether unreadable files were passed over), -1 with
 * err when a named PATH cannot be used. */
int ckpt_peek(const char *dir, const char *resume, ckpt_peek_info *out, char *err, size_t errlen);
void ckpt_peek_free(ckpt_peek_info *p);

#endif
