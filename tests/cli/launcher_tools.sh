#!/usr/bin/env bash
# tools/mpirun/boost-mpirun and tools/chaos/boost-chaos on bad input: one line on stderr
# naming the problem, exit 2; --help works; boost-mpirun started with
# SIGINT ignored says in one line that Ctrl-C cannot reach the job.
set -euo pipefail
SRC=${BOOST_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_usage NEEDLE CMD...: exit 2, exactly one stderr line containing NEEDLE, nothing on stdout
expect_usage() {
  local needle=$1 rc=0
  shift
  "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ "$rc" = 2 ] || fail "'$*' exited $rc, expected 2"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || { cat "$tmp/err" >&2; fail "'$*' printed $(wc -l <"$tmp/err") stderr lines, not 1"; }
  grep -qF -- "$needle" "$tmp/err" || fail "'$*': '$(cat "$tmp/err")' does not mention '$needle'"
  [ ! -s "$tmp/out" ] || fail "'$*' printed on stdout"
}

M=$SRC/tools/mpirun/boost-mpirun
help=$("$M" --help) || fail "boost-mpirun --help exit status"
grep -q 'mpirun for preemptible jobs' <<<"$help" || fail "boost-mpirun --help"
expect_usage "--grace needs a whole number" "$M" --grace abc -n 2 true
expect_usage "--grace needs a whole number" "$M" --grace 0 -n 2 true
expect_usage "--grace needs a whole number" "$M" --grace
expect_usage "no program to run" "$M"
MPIRUN_BIN=/nonexistent/mpirun expect_usage "/nonexistent/mpirun not found" "$M" -n 1 true

# started with SIGINT ignored (nohup, a script's background job): one line says Ctrl-C cannot reach the job
printf '#!/bin/sh\nexit 0\n' >"$tmp/mpirun"
chmod +x "$tmp/mpirun"
(trap '' INT && MPIRUN_BIN=$tmp/mpirun exec "$M" -n 1 true) 2>"$tmp/err" || fail "boost-mpirun with SIGINT ignored: exit status"
grep -q 'SIGINT is ignored here.*Ctrl-C cannot stop this job; send SIGTERM' "$tmp/err" ||
  fail "boost-mpirun with SIGINT ignored does not say so: '$(cat "$tmp/err")'"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "boost-mpirun with SIGINT ignored: more than one line: $(cat "$tmp/err")"
ign=$(awk '/^SigIgn:/ {print $2}' /proc/$$/status)
if ! (((16#$ign >> 1) & 1)); then # this test itself can see SIGINT: so does boost-mpirun, silently
  MPIRUN_BIN=$tmp/mpirun "$M" -n 1 true 2>"$tmp/err" || fail "boost-mpirun: exit status"
  [ ! -s "$tmp/err" ] || fail "boost-mpirun with SIGINT caught speaks of it: '$(cat "$tmp/err")'"
fi

if [ -x /usr/bin/python3 ]; then
  C=$SRC/tools/chaos/boost-chaos
  help=$("$C" --help) || fail "boost-chaos --help exit status"
  grep -q 'fault-injection check' <<<"$help" || fail "boost-chaos --help"
  expect_usage "unknown argument '--bogus'" "$C" --bogus
  expect_usage "--faults takes a whole number from 1" "$C" --faults 0
  expect_usage "--faults takes a whole number from 1" "$C" --faults=x
  expect_usage "--seed takes a whole number" "$C" --seed -3
  expect_usage "--faults-kinds: unknown kind 'nope'" "$C" --faults-kinds kill9-all,nope
  expect_usage "--faults-kinds: a kind is named twice" "$C" --faults-kinds flip,flip
  expect_usage "--launcher takes mpirun or srun" "$C" --launcher pbs
  expect_usage "--ranks given twice" "$C" --ranks 2 --ranks 3
  expect_usage "--dir $tmp/missing is not a directory" "$C" --dir "$tmp/missing"
  expect_usage "--steps needs a value" "$C" --steps
  expect_usage "boost-train not found" "$C" --build "$tmp" --dir "$tmp"
fi
echo "launcher_tools: all checks passed"
