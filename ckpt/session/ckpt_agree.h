/* Agreement among the writer threads of all ranks: the control plane's one
 * watched call, over small host values. A leaf: every other part (the
 * session, the writer, the reader, the read-back) agrees through it without
 * calling one another. */
#ifndef BOOST_CKPT_AGREE_H
#define BOOST_CKPT_AGREE_H

#include <mpi.h>
#include <stddef.h>

#include "status.h"

/* The ranks that agree: the writer thread's duplicate of the world. */
typedef struct {
  MPI_Comm comm;
  int rank, size;
} ckpt_team;

/* Every rank learns whether all were ok; if not, `out` gets the message of
 * the lowest failing rank, prefixed with its rank when there are several. */
int ckpt_agree(const ckpt_team *t, int ok, const char *mine, boost_status *out);
int ckpt_all_true(const ckpt_team *t, int v);

#endif
