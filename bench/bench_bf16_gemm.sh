#!/usr/bin/env bash
# The training step's GEMMs in bf16 next to today's fp32, library by library:
# which library should run boost's bf16 GEMMs, and what does it gain?
#
#   bash bench/bench_bf16_gemm.sh [BUILD] [--threads LIST] [--configs LIST]
#        [--min-ms MS] [--rounds R] [--wait-idle S] [--max-isa ISA] [--tiny]
#        [--install]
#
# Runs BUILD/bench/bf16-shapes (bench/blas/bf16_shapes.c; BUILD defaults to
# build/, the target is built if missing) once per thread count in LIST
# (default 1,2), each on every GEMM shape of a cola-60m/130m step at B=4,
# T=256 and 1024, plus 2048^3: OpenBLAS fp32 through boost's gemm(), oneDNN
# fp32 and bf16 (fp32 and bf16 outputs), libxsmm bf16 and boost's
# gemm_bf16, interleaved shape by shape, medians of R rounds (3) of >= MS ms
# (100). Prints the CPU and its instruction sets, which instructions
# oneDNN's JIT kernels contain (ONEDNN_JIT_DUMP + objdump), and per thread
# count the harness's tables (GFLOP/s and ratios to OpenBLAS per shape, the
# implementation oneDNN chose, creation cost, the step's GEMM time, per-call
# overhead, and how many cores other processes kept busy meanwhile: on a
# shared machine read only rows near 0). --wait-idle S waits up to S s
# before each shape for the other load to drop below 0.1 core.
# --configs is the harness's (MODEL:T,...,square); --tiny is a
# seconds-long smoke run; --max-isa sets ONEDNN_MAX_CPU_ISA (AVX512_CORE
# shows oneDNN's bf16 emulation). Installs nothing unless --install: then
# apt-get installs libdnnl-dev and libxsmm-dev and reconfigures BUILD.
# Exit status 0, 1 when a run failed, 2 on bad arguments.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build threads="1,2" install=0 max_isa="" args=()
usage_error() { echo "bench_bf16_gemm: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --threads) [ $# -ge 2 ] || usage_error "--threads wants a list like 1,2"
      [[ "$2" =~ ^[1-4](,[1-4])*$ ]] || usage_error "--threads wants thread counts 1-4 separated by commas, got '$2'"
      threads=$2; shift 2 ;;
    --configs | --min-ms | --rounds | --wait-idle) [ $# -ge 2 ] || usage_error "$1 wants a value"
      args+=("$1" "$2"); shift 2 ;;
    --max-isa) [ $# -ge 2 ] || usage_error "--max-isa wants an ISA name (e.g. AVX512_CORE)"
      max_isa=$2; shift 2 ;;
    --tiny) args+=(--configs tiny:64 --min-ms 2 --rounds 1); shift ;;
    --install) install=1; shift ;;
    -*) usage_error "unknown argument '$1' (see --help)" ;;
    *) [ -d "$1" ] || usage_error "no build directory '$1'"
      build=$(cd "$1" && pwd); shift ;;
  esac
done

if [ "$install" = 1 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends libdnnl-dev libxsmm-dev
  cmake -S "$root" -B "$build" >/dev/null
  cmake --build "$build" --target bf16-shapes >/dev/null
fi
bin=$build/bench/bf16-shapes
if [ ! -x "$bin" ]; then
  cmake --build "$build" --target bf16-shapes >/dev/null ||
    { echo "bench_bf16_gemm: cannot build $bin (configure $build first: bash scripts/build.sh)" >&2; exit 1; }
fi
# the harness validates its own arguments (one line, exit 2) before running
"$bin" --list "${args[@]}" >/dev/null

work=$(mktemp -d "${TMPDIR:-/tmp}/boost_bench_bf16.XXXXXX")
trap 'rm -rf "$work"' EXIT
[ -n "$max_isa" ] && export ONEDNN_MAX_CPU_ISA=$max_isa

flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|avx512_vnni|amx_bf16|amx_tile)$' | tr '\n' ' ')
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), family $(lscpu | sed -n 's/^CPU family: *//p' | head -1) model $(lscpu | sed -n 's/^Model: *//p' | head -1); $(nproc) cores; flags: ${flags:-none of avx2/avx512}"
echo "Packages: OpenBLAS $(dpkg-query -W -f='${Version}' libopenblas0-openmp 2>/dev/null || echo '?'), oneDNN $(dpkg-query -W -f='${Version}' libdnnl2 2>/dev/null || echo 'not installed'), libxsmm $(dpkg-query -W -f='${Version}' libxsmm-dev 2>/dev/null || echo 'not installed')${max_isa:+; ONEDNN_MAX_CPU_ISA=$max_isa}"
echo "Date: $(date -u +%Y-%m-%dT%H:%MZ); load average $(cut -d' ' -f1-3 /proc/loadavg)"

# Which instructions oneDNN's JIT kernels really contain: a tiny run dumps
# every generated kernel, objdump counts the bf16 dot products (AVX512_BF16
# vdpbf16ps, AMX tdpbf16ps) against fp32 FMAs.
if command -v objdump >/dev/null; then
  mkdir "$work/jit"
  (cd "$work/jit" && ONEDNN_JIT_DUMP=1 "$bin" --configs tiny:64 --min-ms 1 --rounds 1 --threads 1 >/dev/null 2>&1) || true
  shopt -s nullglob
  dumps=("$work"/jit/dnnl_dump_*.bin)
  if [ ${#dumps[@]} -gt 0 ]; then
    for f in "${dumps[@]}"; do
      kind=$(basename "$f" | sed 's/^dnnl_dump_cpu_//; s/\.[0-9]*\.bin$//')
      ops=$(objdump -D -b binary -mi386:x86-64 "$f" | grep -oE '\b(vdpbf16ps|tdpbf16ps|vcvtne2ps2bf16|vcvtneps2bf16|vfmadd231ps)\b' | sort -u | tr '\n' ' ' || true)
      echo "$kind|${ops:-none of those}"
    done | sort | uniq -c | awk '{ n = $1; $1 = ""; sub(/^ /, ""); split($0, p, "|"); printf "  %3d x %-45s %s\n", n, p[1], p[2] }' >"$work/jit.txt"
    echo "oneDNN JIT kernels of a tiny run and the instructions in them (ONEDNN_JIT_DUMP=1, objdump):"
    cat "$work/jit.txt"
  fi
  shopt -u nullglob
fi

rc=0
for t in ${threads//,/ }; do
  echo
  echo "### $t thread(s)"
  "$bin" --threads "$t" "${args[@]}" 2>"$work/err" || { rc=1; echo "bench_bf16_gemm: the run with $t thread(s) failed: $(tail -n 2 "$work/err")" >&2; }
done
exit $rc
