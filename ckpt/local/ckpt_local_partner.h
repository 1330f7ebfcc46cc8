/* The local level's partner copies: each rank's parts also kept by a rank
 * on another node (its `holder`), so that a restart finds them where a
 * node is gone. Nodes come from ckpt_node_split (MPI's shared-memory split
 * or BOOST_RANKS_PER_NODE); node j's i-th rank (in world order) is held by
 * node j+1's i-th rank, cyclically, which needs nodes of equal size.
 *
 * A step moves between two ranks as a stream: the manifest, then each
 * part in chunks over MPI point-to-point; the receiver checks every part
 * against the manifest's checksum as it arrives, and writes it either into
 * a step directory (a save: the holder's copy) or into the arenas (a
 * restore from the holder's copy). Every rank sends to at most one rank and
 * receives from at most one, in one MPI_Sendrecv per chunk, so the ring of
 * transfers cannot deadlock. */
#ifndef BOOST_CKPT_LOCAL_PARTNER_H
#define BOOST_CKPT_LOCAL_PARTNER_H

#include <limits.h>
#include <mpi.h>
#include <stddef.h>

#include "ckpt_local.h"
#include "ckpt_local_store.h"

typedef struct {
  int on;         /* copies are made (two nodes or more, of equal size) */
  int holder;     /* world rank that keeps this rank's copy */
  int held;       /* world rank whose copy this rank keeps */
  char held_dir[PATH_MAX]; /* <local_dir>/partner_<held> */
} ckpt_partner;

/* Every rank learns its holder and whose copy it holds; note says why
 * there are no copies when off (one node, nodes of unequal size).
 * Collective over world. */
void ckpt_partner_plan(MPI_Comm world, const ckpt_node *node, const char *root, ckpt_partner *p, char *note,
                       size_t notelen);

/* Where a received step goes: a directory (its .bin files and manifest,
 * written once every part checked), or this rank's arenas (parts checked
 * against `want`'s sizes) and *blob (the state part, malloc'd). */
typedef struct {
  const char *dir;
  /* What the received manifest must say (ckpt_local_manifest_fits): the
   * step, the layout of the rank it belongs to, the run's identity;
   * anything else is received and dropped, never allocated for. */
  int64_t want_step;
  const ckpt_local_shape *want_shape;
  const unsigned char *run_id;
  const tensor_store *store;
  float *arena[LOCAL_STATE];
  uint64_t want_bytes[LOCAL_STATE];
  unsigned char **blob;
  size_t *bloblen;
} ckpt_partner_sink;

/* Bytes per message of a partner copy and of the state part's broadcast
 * (8 MiB; the test hook BOOST_CKPT_TEST_LOCAL_PIECE=N makes it N, every
 * rank the same, so that a test moves a small state part in many pieces). */
size_t ckpt_local_piece_bytes(void);

/* Sends the step in send_dir to rank `to` and receives one from rank
 * `from` into *sink; either side may be absent (MPI_PROC_NULL, the same on
 * both ends). send_dir NULL with a `to`: a step this rank could not make
 * (the receiver gets none); sink NULL with a `from`: received and dropped.
 * Returns 0, or -1 with why (what this rank sent or received is then not
 * to be trusted; the peers finish the exchange regardless). */
int ckpt_partner_exchange(MPI_Comm comm, const char *send_dir, int to, const ckpt_partner_sink *sink, int from,
                          boost_status *why);

#endif
