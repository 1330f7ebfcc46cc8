/* Test helper for the local level's identity tests (tests/mpi/
 * ckpt_local_identity.sh): rewrites a local step's manifest as anyone who
 * can write the folder could -- another step number and/or another run's
 * identity -- with its own checksum recomputed, so that only the checks
 * boost makes beyond checksums can tell.
 *   local_forge STEPDIR [--step N] [--run-id HEX32]
 * Exit 0, or 1 with one line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_local_store.h"
#include "ckpt_run_id.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: local_forge STEPDIR [--step N] [--run-id HEX32]\n");
    return 1;
  }
  ckpt_local_manifest m;
  boost_status err = {0};
  if (ckpt_local_read_manifest(argv[1], &m, &err) != 0) {
    fprintf(stderr, "local_forge: %s\n", err.msg);
    return 1;
  }
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--step")) m.step = strtoll(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--run-id") && ckpt_run_id_valid(argv[i + 1])) ckpt_run_id_to_bytes(argv[i + 1], m.run_id);
    else {
      fprintf(stderr, "local_forge: bad argument %s %s\n", argv[i], argv[i + 1]);
      return 1;
    }
  }
  char path[4200];
  snprintf(path, sizeof path, "%s/manifest.bin", argv[1]);
  remove(path);
  if (ckpt_local_write_manifest(argv[1], &m, &err) != 0) {
    fprintf(stderr, "local_forge: %s\n", err.msg);
    return 1;
  }
  char hex[CKPT_RUN_ID_HEX + 1];
  ckpt_run_id_from_bytes(m.run_id, hex);
  printf("%s: step %lld run %s\n", argv[1], (long long)m.step, hex);
  return 0;
}
