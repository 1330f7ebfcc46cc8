#!/usr/bin/env bash
# bench/trace/sgemm_trace.c: preloaded into a program, it times that
# program's cblas_sgemm calls by shape and prints one row per shape at exit;
# BOOST_SGEMM_TRACE_SKIP leaves out the first seconds.
set -euo pipefail
B=${BOOST_BINARY_DIR:?}
lib=$B/bench/trace/libsgemm-trace.so
peak=$B/bench/sgemm-peak
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -f "$lib" ] || fail "$lib not built"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/boost_trace.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# A sanitizer build's library needs the ASan runtime, which then loads after it.
export ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}verify_asan_link_order=0

run_traced() { # OUT [env...]: sgemm-peak on one 192^3 shape under the trace
  local out=$1
  shift
  env "$@" LD_PRELOAD="$lib" BOOST_SGEMM_TRACE_OUT="$out" BOOST_SGEMM_TRACE_MIN=0 OMP_NUM_THREADS=1 \
    "$peak" --threads 1 --size 192 --square-only --runs 2 --min-ms 20 >"$tmp/peak.json" 2>"$tmp/peak.err" ||
    fail "sgemm-peak under the trace: $(tail -n 2 "$tmp/peak.err")"
}

run_traced "$tmp/all.txt"
head -n 1 "$tmp/all.txt" | grep -q '^sgemm-trace: thread 0 spent ' || fail "no summary line: $(head -n 1 "$tmp/all.txt")"
row=$(awk '$2 == 192 && $3 == 192 && $4 == 192' "$tmp/all.txt")
[ -n "$row" ] || fail "no row for the 192^3 shape: $(cat "$tmp/all.txt")"
calls=$(echo "$row" | awk '{print $6}')
gflops=$(echo "$row" | awk '{print $9}')
[ "$calls" -ge 3 ] || fail "192^3 traced $calls times, sgemm-peak made at least 3 calls"
awk -v g="$gflops" 'BEGIN { exit !(g > 0.5) }' || fail "implausible rate $gflops GFLOP/s"

run_traced "$tmp/skipped.txt" BOOST_SGEMM_TRACE_SKIP=3600
grep -q ' in 0 shapes ' "$tmp/skipped.txt" || fail "calls in the skipped first hour were traced: $(cat "$tmp/skipped.txt")"
echo "PASS: sgemm-trace times calls by shape and skips the first seconds"
