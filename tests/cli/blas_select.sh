#!/usr/bin/env bash
# OpenBLAS kernel selection: a program of ours that finds OpenBLAS on a weaker
# kernel than the CPU supports re-executes itself with the right one; it never
# asks for instructions the CPU lacks and leaves a user's choice alone. The
# re-executed program keeps its name (/proc/PID/comm: boost-train, or the
# tool's) and its arguments: ps, pkill, batch systems and boost-chaos find it.
set -euo pipefail
bin=${BOOST_BINARY_DIR:?}/trainer/boost-train
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/boost_blas_select.XXXXXX")
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
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

# A running program after the forced re-exec: its name and arguments are its
# own. $1: the name it must have; the rest: the command (started through env,
# which execs it: $! is its PID). Waits until the re-exec happened (the
# process's environment then holds OPENBLAS_CORETYPE; none without AVX2).
name_while_running() {
  local want_name=$1 pid comm i a expect=""
  shift
  for a in "$@"; do [[ -z "$expect" && ( "$a" = env || "$a" == *=* ) ]] || expect+="$a "; done
  env -u OPENBLAS_CORETYPE BOOST_BLAS_PRETEND_CORE=Prescott "$@" >"$tmp/run.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  for ((i = 0; i < 300; i++)); do
    if [ -z "$want" ] || tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -q "^OPENBLAS_CORETYPE=$want$"; then
      break
    fi
    sleep 0.01
  done
  [ "$i" -lt 300 ] || fail "$want_name: no re-exec onto $want within 3 s ($(cat "$tmp/run.log"))"
  comm=$(cat "/proc/$pid/comm" 2>/dev/null) || fail "$want_name ended before its name could be read ($(cat "$tmp/run.log"))"
  [ "$comm" = "$want_name" ] || fail "after the re-exec /proc/$pid/comm is '$comm', not '$want_name'"
  tr '\0' ' ' <"/proc/$pid/cmdline" >"$tmp/cmdline"
  [ "$(cat "$tmp/cmdline")" = "$expect" ] || fail "after the re-exec the arguments are '$(cat "$tmp/cmdline")', not '$expect'"
  wait "$pid" || true
}
# boost-train, held in main by its start-up test delay
name_while_running boost-train env BOOST_TRAIN_TEST_START_DELAY_MS=2000 "$bin" --print-config
grep -q "OpenBLAS core ${want:-}" "$tmp/run.log" || fail "boost-train after the re-exec: $(head -1 "$tmp/run.log")"
# a tool: boost-inspect plot waits for gnuplot (here a stand-in that sleeps)
mkdir "$tmp/bin"
printf '#!/bin/sh\nsleep 2\nexit 1\n' >"$tmp/bin/gnuplot"
chmod +x "$tmp/bin/gnuplot"
"${BOOST_BINARY_DIR}/tools/boost-data" -o "$tmp/f.tok" /usr/share/games/fortunes >"$tmp/data.log" 2>&1 || fail "boost-data: $(cat "$tmp/data.log")"
"$bin" --set data.train="$tmp/f.tok" --set model.preset=tiny --set train.val_batches=0 --set train.threads=1 \
  --set train.batch_size=2 --set train.steps=1 --set ckpt.dir="$tmp/c" >"$tmp/train.log" 2>&1 || fail "train: $(tail -3 "$tmp/train.log")"
name_while_running boost-inspect env PATH="$tmp/bin:$PATH" "${BOOST_BINARY_DIR}/tools/boost-inspect" plot "$tmp/c" -o "$tmp/p.png"
echo "blas_select: ok (want '${want:-none}')"
