#!/usr/bin/env bash
# Which oneDNN should run boost's bf16 GEMMs, by measurement: Debian's
# oneDNN (libdnnl-dev, 2.6 on Debian 12; what the build links today)
# against PyPI's onednn-devel-cpu-gomp (oneDNN 3.2, GNU OpenMP, C API) on
# the training step's bf16 shapes, including the transposed weight-gradient
# GEMMs and attention's small per-head blocks (bench/blas/dnnl_versions.c:
# one single-threaded primitive per thread's share, created once, as
# gemm_bf16 runs them).
#
#   bash bench/bench_onednn_versions.sh [ROUNDS]
#
# The wheel's library and headers are in BOOST_ONEDNN3_DIR (default
# .cache/onednn3, where scripts/fetch-onednn3.sh puts them for the build;
# fetched with pip once when absent); the
# two programs are built into a temporary folder and run one after the
# other ROUNDS times (default 2), each printing GFLOP/s per shape and the
# implementation oneDNN picked (its ISA). THREADS (default 2) sets the
# shares. Not run by CI or the tests.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${1:-2}
THREADS=${THREADS:-2}
DIR=${BOOST_ONEDNN3_DIR:-$root/.cache/onednn3}
die() { echo "bench_onednn_versions: $*" >&2; exit 1; }
[ -f /usr/include/oneapi/dnnl/dnnl.h ] || die "Debian's oneDNN headers are missing (apt-get install libdnnl-dev)"
bash "$root/scripts/fetch-onednn3.sh" "$DIR" || die "oneDNN 3.2 could not be fetched into $DIR"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/onednn_versions.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
src=$root/bench/blas/dnnl_versions.c
gcc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -I"$root/kernels/cpu" "$src" -ldnnl -o "$tmp/debian" || die "build against Debian's oneDNN failed"
gcc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -I"$DIR/include" -I"$root/kernels/cpu" "$src" -L"$DIR/lib" -Wl,-rpath,"$DIR/lib" -ldnnl \
  -o "$tmp/pypi" || die "build against $DIR failed"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'); $(grep -o -w -E 'amx_bf16|avx512_bf16|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')"
for r in $(seq "$ROUNDS"); do
  echo "== round $r"
  OMP_NUM_THREADS=$THREADS "$tmp/debian" --threads "$THREADS"
  OMP_NUM_THREADS=$THREADS "$tmp/pypi" --threads "$THREADS"
done
