/* libFuzzer harness over the local level's readers (manifest, state part,
 * partner message: tools/testkit/local_fuzz_one.h). Build: CC=clang cmake
 * -DBOOST_FUZZ=ON; run and seeds: docs/INSPECT.md "Fuzzing". */
#include <stddef.h>
#include <stdint.h>

#include "local_fuzz_one.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  boost_status why = {0};
  local_fuzz_one(data, size, &why);
  return 0;
}
