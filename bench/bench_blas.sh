#!/usr/bin/env bash
# The step's GEMM shapes on every fp32 BLAS Debian's main archive offers,
# side by side: is there a faster library to link than OpenBLAS?
#
#   bash bench/bench_blas.sh [--min-ms MS]
#
# Builds bench/blas/shapes.c against OpenBLAS (the OpenMP build boost
# links, libopenblas-openmp-dev) and against BLIS (libblis-openmp-dev,
# libblis-pthread-dev) when installed -- this script installs nothing;
# `apt-get install libblis-openmp-dev` adds the BLIS columns, its AVX-512
# kernels too on a CPU that has them. Each library runs single-threaded, as
# inside boost's threads. Prints a table: GFLOP/s per shape, and each
# library over OpenBLAS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --min-ms) [ $# -ge 2 ] || { echo "bench_blas: --min-ms wants a value" >&2; exit 2; }
      args+=(--min-ms "$2"); shift 2 ;;
    *) echo "bench_blas: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d "${TMPDIR:-/tmp}/boost_bench_blas.XXXXXX")
trap 'rm -rf "$work"' EXIT
multiarch=$(gcc -print-multiarch)
lib=/usr/lib/$multiarch inc=/usr/include/$multiarch
names=() bins=() envs=()
add() { # NAME ENV INCLUDE_DIR LIBRARY...
  local name=$1 env=$2 incdir=$3
  shift 3
  # (BLIS's cblas.h defines static functions it does not use)
  gcc -O2 -std=c11 -Wall -Wextra -Wno-unused-function -I"$incdir" "$root/bench/blas/shapes.c" -o "$work/$name" "$@" ||
    { echo "bench_blas: cannot build against $name" >&2; exit 1; }
  names+=("$name") bins+=("$work/$name") envs+=("$env")
}
[ -f "$lib/openblas-openmp/libopenblas.so" ] ||
  { echo "bench_blas: OpenBLAS not found at $lib/openblas-openmp (apt-get install libopenblas-openmp-dev)" >&2; exit 1; }
add openblas "" "$inc/openblas-openmp" "$lib/openblas-openmp/libopenblas.so" -fopenmp
for v in openmp pthread; do
  if [ -f "$lib/blis-$v/libblis.so.4" ] && [ -f "$inc/blis-$v/cblas.h" ]; then
    add "blis-$v" "" "$inc/blis-$v" "$lib/blis-$v/libblis.so.4" -fopenmp -lpthread -lm
    # In a VM BLIS cannot count the AVX-512 FMA units and falls back to its
    # AVX2 'haswell' kernels; BLIS_ARCH_TYPE=0 (BLIS 0.9's id of 'skx')
    # forces the AVX-512 ones.
    if grep -qw avx512f /proc/cpuinfo; then
      add "blis-$v-skx" BLIS_ARCH_TYPE=0 "$inc/blis-$v" "$lib/blis-$v/libblis.so.4" -fopenmp -lpthread -lm
    fi
  fi
done
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), OpenBLAS $(dpkg-query -W -f='${Version}' libopenblas0-openmp 2>/dev/null || echo '?')"
# shape by shape, every library in turn: the ratios compare runs seconds
# apart, not minutes
"${bins[0]}" --list >"$work/shapes" || { echo "bench_blas: cannot list the shapes" >&2; exit 1; }
n_shapes=$(wc -l <"$work/shapes")
outs=()
for n in "${names[@]}"; do outs+=("$work/$n.out"); : >"$work/$n.out"; done
for ((s = 0; s < n_shapes; s++)); do
  for i in "${!bins[@]}"; do
    # shellcheck disable=SC2086 # unquoted: an empty setting must vanish, not be an empty argument
    env OPENBLAS_NUM_THREADS=1 BLIS_NUM_THREADS=1 OMP_NUM_THREADS=1 ${envs[$i]} "${bins[$i]}" --shape "$s" "${args[@]}" \
      >>"$work/${names[$i]}.out" || { echo "bench_blas: ${names[$i]} failed on shape $s" >&2; exit 1; }
  done
done
header="shape (op M N K beta)"
for n in "${names[@]}"; do header+=" | $n GFLOP/s"; done
for n in "${names[@]:1}"; do header+=" | $n/openblas"; done
echo "$header"
awk -v n="${#names[@]}" '
  FNR == 1 { f++ }
  { key[FNR] = $1 " " $2 " " $3 " " $4 " " $5; g[f, FNR] = $6; rows = FNR }
  END {
    for (r = 1; r <= rows; r++) {
      line = key[r]
      for (i = 1; i <= n; i++) line = line sprintf(" | %.1f", g[i, r])
      for (i = 2; i <= n; i++) line = line sprintf(" | %.2fx", g[i, r] / g[1, r])
      print line
    }
  }' "${outs[@]}"
