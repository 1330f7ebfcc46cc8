#!/usr/bin/env bash
# The whole test suite: builds (scripts/build.sh) and runs ctest.
# BOOST_SANITIZE=1 runs it against the ASan/UBSan build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/build.sh"
if [ "${BOOST_SANITIZE:-0}" = 1 ]; then
  build=${BOOST_BUILD_DIR:-$root/build-asan}
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
  export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tests/lsan.supp:print_suppressions=0}
else
  build=${BOOST_BUILD_DIR:-$root/build}
fi
cd "$build"
ctest --output-on-failure -j2 "$@"
