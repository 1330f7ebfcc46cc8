#!/usr/bin/env bash
# Configures and builds boost into ${BOOST_BUILD_DIR:-build}.
# BOOST_SANITIZE=1 builds the ASan/UBSan configuration instead (into build-asan).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "${BOOST_SANITIZE:-0}" = 1 ]; then
  build=${BOOST_BUILD_DIR:-$root/build-asan}
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Debug -DBOOST_SANITIZE=ON >/dev/null
else
  build=${BOOST_BUILD_DIR:-$root/build}
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j"$(nproc)"
