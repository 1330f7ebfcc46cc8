/* Writing one checkpoint file (writer thread): its layout -- root
 * attributes, groups, tensors, the training state, activations -- through
 * one of the two write paths (ckpt_write_path.h). */
#ifndef BOOST_CKPT_WRITE_H
#define BOOST_CKPT_WRITE_H

#include "ckpt_jobs.h"
#include "ckpt_write_path.h"
#include "status.h"

/* The raw (uncompressed) bytes of a checkpoint (j NULL: no activations or
 * history), with room for its metadata. */
double ckpt_raw_bytes(const ckpt_file_plan *p, const save_job *j);

/* The whole file, collectively; returns this rank's ok. sums: this rank's
 * checksums of the state sets and activations; the tensors' are taken from
 * the stager as their bands were staged, then all are summed over the ranks
 * (what the read-back compares with). */
int ckpt_write_file(const ckpt_write_setup *ws, save_job *j, const char *path, uint64_t *sums, save_result *r,
                    boost_status *err);

#endif
