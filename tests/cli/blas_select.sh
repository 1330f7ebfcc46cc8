#!/usr/bin/env bash
# OpenBLAS kernel selection: a program of ours that finds OpenBLAS on a weaker
# kernel than the CPU supports re-executes itself with the right one; it never
# asks for instructions the CPU lacks and leaves a user's choice alone.
set -euo pipefail
bin=${BOOST_BINARY_DIR:?}/trainer/boost-train
fail() { echo "FAIL: $*" >&2; exit 1; }
core_of() { "$@" --print-config 2>/dev/null | sed -n 's/.*OpenBLAS core \([A-Za-z0-9]*\).*/\1/p'; }

flags=$(grep -m1 '^flags' /proc/cpuinfo)
if echo "$flags" | grep -qw avx512f && echo "$flags" | grep -qw avx512bw && echo "$flags" | grep -qw avx512vl \
   && echo "$flags" | grep -qw avx512dq && echo "$flags" | grep -qw avx512cd; then
  want=SkylakeX
elif echo "$flags" | grep -qw avx2 && echo "$flags" | grep -qw fma; then
  want=Haswell
else
  want=""
fi

(unset OPENBLAS_CORETYPE; core=$(core_of env BOOST_BLAS_PRETEND_CORE=Prescott "$bin")
 if [ -n "$want" ]; then
   [ "$core" = "$want" ] || fail "pretending a Prescott pick, expected a re-exec onto $want, got '$core'"
 else
   [ "$core" != SkylakeX ] && [ "$core" != Haswell ] || fail "selected $core on a CPU without AVX2"
 fi)
# a user's own choice is kept
core=$(core_of env OPENBLAS_CORETYPE=Prescott BOOST_BLAS_PRETEND_CORE=Prescott "$bin")
[ "$core" = Prescott ] || fail "OPENBLAS_CORETYPE=Prescott was overridden ($core)"
# and the check can be turned off
core=$(core_of env -u OPENBLAS_CORETYPE BOOST_BLAS_AUTOSELECT=0 BOOST_BLAS_PRETEND_CORE=Prescott "$bin")
[ -n "$core" ] || fail "no core reported with BOOST_BLAS_AUTOSELECT=0"
echo "blas_select: ok (want '${want:-none}')"
