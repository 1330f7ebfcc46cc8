/* One input through the local level's readers (ckpt/local/ckpt_local_store.h),
 * as a restart meets them: the first byte picks the reader, the rest is
 * what it reads.
 *   0  a manifest file (ckpt_local_parse_manifest, then checked against this
 *      rank's layout and run: ckpt_local_manifest_fits)
 *   1  a state part (ckpt_local_unpack, and ckpt_local_state_agrees with the
 *      manifest the layout expects)
 *   2  a partner's message: its manifest, then its state part, received as
 *      ckpt_partner_exchange does (the manifest checked before a byte of the
 *      state part is taken), then the state part checked as an own one
 * Unless the first byte's top bit is set, the manifest's own checksum (and
 * a partner's state part's) is recomputed first, as anyone who can write
 * the folder can: the fuzzer then reaches the checks beyond the checksums.
 * The layout and run it checks against are fixed (local_fuzz_expected),
 * the ones tools/local_fuzz_files --make-seeds writes its seeds for.
 * Returns 0 when the input is accepted, 1 when refused (why says why). */
#ifndef BOOST_LOCAL_FUZZ_ONE_H
#define BOOST_LOCAL_FUZZ_ONE_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt_local_store.h"

enum { LOCAL_FUZZ_MANIFEST = 0, LOCAL_FUZZ_STATE, LOCAL_FUZZ_PARTNER, LOCAL_FUZZ_NKINDS };

/* The manifest of step 7 that the harness's rank expects (run identity,
 * layout, arena sizes; the state part's size and checksum left 0). */
void local_fuzz_expected(ckpt_local_manifest *m);
int local_fuzz_one(const uint8_t *data, size_t size, boost_status *why);

#endif
