/* The run's identity (docs/CHECKPOINT_FORMAT.md, "The run's identity"): 128
 * random bits made at a run's fresh start, written as 32 lowercase hex
 * digits into every checkpoint file (root attribute run_id) and every
 * local-level manifest, so that a restart reads only its own run's state
 * from node-local storage. A relaunch learns it before it looks at the
 * local level: from the newest checkpoint file, or, where the run was
 * killed before its first file, from the marker rank 0 writes into
 * ckpt.dir at the start (ckpt.dir/run.id, one line "boost-run-id <hex>",
 * written to a temporary name, fsynced and renamed). */
#ifndef BOOST_CKPT_RUN_ID_H
#define BOOST_CKPT_RUN_ID_H

#include <mpi.h>
#include <stddef.h>

#include "ckpt.h"
#include "ckpt_meta.h"
#include "status.h"

#define CKPT_RUN_ID_HEX 32  /* hex digits */
#define CKPT_RUN_ID_BYTES 16
#define CKPT_RUN_ID_MARKER "run.id"

/* Whether s is an identity: exactly 32 lowercase hex digits. */
int ckpt_run_id_valid(const char *s);
/* A new identity from getrandom(2) into out (33 bytes); -1 with err. */
int ckpt_run_id_new(char *out, boost_status *err);
/* hex <-> the 16 bytes a manifest holds ("" <-> zeros: none). */
void ckpt_run_id_to_bytes(const char *hex, unsigned char out[CKPT_RUN_ID_BYTES]);
void ckpt_run_id_from_bytes(const unsigned char in[CKPT_RUN_ID_BYTES], char *out);

/* The marker in dir: 1 with out (33 bytes), 0 when there is none or it is
 * not one (out ""). */
int ckpt_run_id_read_marker(const char *dir, char *out);
/* The marker written atomically (temporary name, fsync, rename, the
 * directory fsynced). */
int ckpt_run_id_write_marker(const char *dir, const char *id, boost_status *err);

/* The identity a relaunch expects (rank 0, no MPI): that of newest (the
 * newest checkpoint file's metadata, NULL: none) when it carries one, else
 * the marker's in dir; "" when neither (a fresh run, or files older than
 * the identity). */
void ckpt_run_id_expected(const char *dir, const ckpt_meta *newest, char *out);

/* Collective over world: the step of the newest committed checkpoint file
 * in dir (-1: none; rank 0's ckpt_peek, not verified: the file level's
 * reader verifies what it loads) and into expect (33 bytes) the identity
 * ckpt_run_id_expected gives rank 0, on every rank. */
int64_t ckpt_run_id_newest(MPI_Comm world, const char *dir, const ckpt_from *from, char *expect);

/* Collective over comm: the run goes on with rank 0's `candidate` when it
 * is an identity, else with a new one; every rank gets it in out (33
 * bytes). Rank 0 writes the marker into dir (NULL: none) when it does not
 * already hold it; note gets a failure to (one line, else ""). */
void ckpt_run_id_adopt(MPI_Comm comm, const char *dir, const char *candidate, char *out, char *note, size_t notelen);

#endif
