/* libFuzzer harness over the checkpoint reader and verifier of boost-inspect
 * (in-memory file image through HDF5's core driver). Build: CC=clang cmake
 * -DBOOST_FUZZ=ON; run and corpus: docs/INSPECT.md. */
#include <stddef.h>
#include <stdint.h>

#include "inspect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  ins_verify_image(data, size, NULL);
  return 0;
}
