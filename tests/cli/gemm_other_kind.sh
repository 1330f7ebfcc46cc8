#!/usr/bin/env bash
# The bf16 GEMMs take a path that depends on the CPU: Debian's oneDNN 2.x
# on most machines, oneDNN 3.x (scripts/fetch-onednn3.sh) where the CPU has
# AMX; AMX, AVX512-BF16 or emulated bf16 kernels inside it. CI runs on one
# kind of machine at a time, so this test forces the paths this machine
# would not take by itself, and runs the bf16 kernels' unit tests
# (tests/unit/test_bf16.c: the split shares' bits, the dense copies of
# strided operands, every transpose) on each:
#   1. the ISA capped at AVX512-BF16 (ONEDNN_MAX_CPU_ISA): on an AMX machine,
#      the kernels a Zen 4 runs;
#   2. the ISA capped at AVX512 without bf16, oneDNN forced
#      (BOOST_GEMM_BF16=onednn): bf16 emulated inside oneDNN;
#   3. test_bf16 built against the other oneDNN: 3.2 where this build has
#      Debian's (fetched into ~/.cache/boost/onednn3, outside the
#      repository, so the main build's choice stays), Debian's where it has
#      3.x (BOOST_ONEDNN=debian's library).
# Skips (77) without oneDNN in the build or AVX512 on the CPU; part 3 skips
# with a reason where the other oneDNN cannot be had.
set -euo pipefail
SRC=${BOOST_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
B=${BOOST_BINARY_DIR:-$SRC/build}
fail() { echo "FAIL: $*" >&2; exit 1; }
ldd "$B/tests/test_bf16" | grep -q libdnnl ||
  { echo "skip: this build has no oneDNN (the fp32 fallback is tested in test_bf16)"; exit 77; }
grep -qw avx512f /proc/cpuinfo || { echo "skip: no AVX512 on this CPU: oneDNN has no bf16 path to force here"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/boost_gemm_other.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$B/tools/boost-data" -q -o "$tmp/f.tok" /usr/share/games/fortunes >/dev/null

# The path a run really took, from its start line (the backend's info).
backend_line() {
  env "$@" OMP_NUM_THREADS=1 "$B/trainer/boost-train" --set model.preset=tiny --set data.train="$tmp/f.tok" \
    --set train.steps=1 --set train.val_batches=0 --set train.precision=bf16 2>&1 | grep -m1 '^backend:' || true
}
unit() { # label, env...: test_bf16 under the forced path
  local label=$1
  shift
  env "$@" OMP_NUM_THREADS=1 "$B/tests/test_bf16" --jobs 1 >"$tmp/unit.log" 2>&1 ||
    fail "$label: test_bf16 failed: $(grep -m3 -E 'FAIL|Assertion|Synthesis' "$tmp/unit.log" | tr '\n' ' ')"
  echo "ok: $label: $(grep -m1 Synthesis "$tmp/unit.log" | sed 's/.*Synthesis: //')"
}

if grep -qw avx512_bf16 /proc/cpuinfo; then
  line=$(backend_line ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16)
  echo "$line" | grep -q 'ISA avx512_core_bf16.*bf16 dot-product instructions' ||
    fail "ISA capped at AVX512-BF16: the run did not take that path: $line"
  unit "ISA capped at AVX512-BF16" ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16
fi

line=$(backend_line ONEDNN_MAX_CPU_ISA=AVX512_CORE BOOST_GEMM_BF16=onednn)
echo "$line" | grep -q 'bf16 emulated by oneDNN' || fail "ISA capped at AVX512: the run did not emulate bf16 in oneDNN: $line"
unit "ISA capped at AVX512, bf16 emulated by oneDNN" ONEDNN_MAX_CPU_ISA=AVX512_CORE BOOST_GEMM_BF16=onednn

# 3. the other oneDNN
mine=$(sed -n 's/^BOOST_ONEDNN_DIR:PATH=//p' "$B/CMakeCache.txt")
if [ -z "$mine" ]; then
  other=${BOOST_ONEDNN3_CACHE:-${HOME:-/root}/.cache/boost/onednn3}
  if ! bash "$SRC/scripts/fetch-onednn3.sh" "$other" >"$tmp/fetch.log" 2>&1; then
    echo "skip: oneDNN 3.2 cannot be fetched here ($(tail -1 "$tmp/fetch.log")): parts 1 and 2 passed"
    exit 77
  fi
  want=libdnnl.so.3
else
  [ -f /usr/include/oneapi/dnnl/dnnl.h ] || {
    echo "skip: Debian's oneDNN (libdnnl-dev) is not installed: parts 1 and 2 passed"
    exit 77
  }
  other="" want=libdnnl.so.2
fi
which=${other:-the system one}
ob=${BOOST_OTHER_ONEDNN_BUILD:-$tmp/build}
cmake -S "$SRC" -B "$ob" -DCMAKE_BUILD_TYPE=Release -DBOOST_ONEDNN_DIR="$other" >"$tmp/cfg.log" 2>&1 ||
  fail "configure against the other oneDNN ($which): $(tail -3 "$tmp/cfg.log")"
cmake --build "$ob" --target test_bf16 -j"$(nproc)" >"$tmp/build.log" 2>&1 ||
  fail "build against the other oneDNN: $(grep -m3 -E 'error|Error' "$tmp/build.log")"
ldd "$ob/tests/test_bf16" | grep -q "$want" || fail "test_bf16 of the other build does not load $want: $(ldd "$ob/tests/test_bf16" | grep dnnl)"
B=$ob
unit "built against the other oneDNN ($want)"
echo "PASS: gemm_other_kind"
