#!/usr/bin/env bash
# Puts oneDNN 3.2 (PyPI's onednn-devel-cpu-gomp 2023.2.0: C headers and the
# library, built on GNU OpenMP as boost is) into DIR/include and DIR/lib.
#
#   bash scripts/fetch-onednn3.sh [DIR]     (default: .cache/onednn3 in the repository)
#
# Debian 12's oneDNN is 2.6: on CPUs with AMX tiles it runs most of the
# training step's bf16 GEMMs on AVX512-BF16 code, where 3.x has AMX kernels
# for every layout of those shapes (docs/PERFORMANCE.md). install-deps.sh
# calls this on such CPUs; scripts/build.sh then builds against DIR. Does
# nothing when DIR already holds it; exits 1 with one line when pip cannot
# fetch it (the build then keeps Debian's).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/.cache/onednn3}
version=2023.2.0
if [ -f "$dir/lib/libdnnl.so.3" ] && [ -f "$dir/include/oneapi/dnnl/dnnl.h" ]; then
  exit 0
fi
command -v python3 >/dev/null || { echo "fetch-onednn3: python3 is missing" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fetch_onednn3.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-cache-dir "onednn-devel-cpu-gomp==$version" -d "$tmp/wheels" >"$tmp/pip.log" 2>&1 ||
  { echo "fetch-onednn3: pip could not download onednn-devel-cpu-gomp $version: $(tail -1 "$tmp/pip.log")" >&2; exit 1; }
for w in "$tmp"/wheels/*.whl; do python3 -m zipfile -e "$w" "$tmp/unpacked"; done
mkdir -p "$tmp/out/lib" "$tmp/out/include"
cp -a "$tmp"/unpacked/*.data/data/lib/. "$tmp/out/lib/"
cp -a "$tmp"/unpacked/*.data/data/include/. "$tmp/out/include/"
[ -f "$tmp/out/lib/libdnnl.so.3" ] && [ -f "$tmp/out/include/oneapi/dnnl/dnnl.h" ] ||
  { echo "fetch-onednn3: the wheels hold no lib/libdnnl.so.3 and include/oneapi/dnnl/dnnl.h" >&2; exit 1; }
# in place only once complete: a half-copied folder never looks like a oneDNN
mkdir -p "$(dirname "$dir")"
rm -rf "$dir.tmp"
mv "$tmp/out" "$dir.tmp"
rm -rf "$dir"
mv "$dir.tmp" "$dir"
echo "fetch-onednn3: oneDNN 3.2 ($version) in $dir"
