#!/usr/bin/env bash
# bench/read_bw.c, the decode benchmark's read-bandwidth probe: a positive
# GB/s figure for a small and an odd-sized buffer on one and two threads;
# bad arguments stop it with one line and exit 2.
set -euo pipefail
src=${BOOST_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${BOOST_BINARY_DIR:-$src/build}
fail() { echo "FAIL: $*" >&2; exit 1; }
bin=$build/bench/read-bw
[ -x "$bin" ] || fail "$bin not built"
for t in 1 2; do
  for bytes in 1048576 1000003; do
    out=$("$bin" --bytes "$bytes" --threads "$t" --seconds 0.05) || fail "read-bw --bytes $bytes --threads $t failed"
    echo "$out" | grep -Eq '^[0-9]+\.[0-9]{2}$' || fail "read-bw printed '$out', not one GB/s figure"
    awk -v v="$out" 'BEGIN { exit !(v > 0) }' || fail "read-bw measured $out GB/s"
  done
done
for bad in "--bytes 0" "--bytes x" "--bytes 100 --threads 0" "--frobnicate" ""; do
  set +e
  # shellcheck disable=SC2086
  err=$("$bin" $bad 2>&1 >/dev/null)
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "read-bw $bad: exit $rc, expected 2"
  [ "$(echo "$err" | wc -l)" -eq 1 ] && echo "$err" | grep -q '^read-bw: ' || fail "read-bw $bad: '$err'"
done
echo "read-bw: ok"
