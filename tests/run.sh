#!/usr/bin/env bash
# The whole test suite: builds (scripts/build.sh) and runs ctest.
# BOOST_SANITIZE=1 runs it against the ASan/UBSan build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/build.sh"
if [ "${BOOST_SANITIZE:-0}" = 1 ]; then
  build=${BOOST_BUILD_DIR:-$root/build-asan}
  # Address and UB errors are fatal. Leak checking is off: Open MPI's
  # components, dlclose()d at MPI_Finalize, leave allocations LSan cannot
  # even symbolise, so every MPI program would "leak".
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
else
  build=${BOOST_BUILD_DIR:-$root/build}
fi
cd "$build"
ctest --output-on-failure -j2 "$@"
