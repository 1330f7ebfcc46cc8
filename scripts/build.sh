#!/usr/bin/env bash
# Configures and builds boost into ${BOOST_BUILD_DIR:-build}.
# BOOST_SANITIZE=1 builds the ASan/UBSan configuration instead (into build-asan).
# The bf16 GEMMs' oneDNN: the one scripts/fetch-onednn3.sh put in
# .cache/onednn3 (or BOOST_ONEDNN_DIR) when there is one, else Debian's;
# BOOST_ONEDNN=debian asks for Debian's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
onednn=${BOOST_ONEDNN_DIR:-}  # named: that one (CMake says so when it is not there)
if [ "${BOOST_ONEDNN:-auto}" = debian ]; then
  onednn=""
elif [ -z "$onednn" ] && [ -f "$root/.cache/onednn3/lib/libdnnl.so.3" ]; then
  onednn=$root/.cache/onednn3
fi
if [ "${BOOST_SANITIZE:-0}" = 1 ]; then
  build=${BOOST_BUILD_DIR:-$root/build-asan}
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Debug -DBOOST_SANITIZE=ON -DBOOST_ONEDNN_DIR="$onednn" >/dev/null
else
  build=${BOOST_BUILD_DIR:-$root/build}
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBOOST_ONEDNN_DIR="$onednn" >/dev/null
fi
cmake --build "$build" -j"$(nproc)"
