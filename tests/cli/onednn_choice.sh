#!/usr/bin/env bash
# Choosing the bf16 GEMMs' oneDNN (scripts/fetch-onednn3.sh, BOOST_ONEDNN_DIR):
# a download that fails exits 1 with one line and leaves no folder that
# looks like a oneDNN; a folder that already holds one is not fetched again;
# a BOOST_ONEDNN_DIR without oneDNN stops the configure with its name.
set -euo pipefail
SRC=${BOOST_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/boost_onednn_choice.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# a python3 whose pip cannot reach the index, and which notes every call
mkdir -p "$tmp/bin"
cat >"$tmp/bin/python3" <<PYEOF
#!/bin/sh
echo called >>"$tmp/python3.calls"
echo "ERROR: Could not find a version that satisfies the requirement onednn-devel-cpu-gomp" >&2
exit 1
PYEOF
chmod +x "$tmp/bin/python3"

rc=0
PATH="$tmp/bin:$PATH" bash "$SRC/scripts/fetch-onednn3.sh" "$tmp/dnnl" >"$tmp/out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "a failed download exited $rc: $(cat "$tmp/out")"
[ "$(wc -l <"$tmp/out")" = 1 ] || fail "a failed download said more than one line: $(cat "$tmp/out")"
grep -q "^fetch-onednn3: pip could not download onednn-devel-cpu-gomp .*Could not find a version" "$tmp/out" ||
  fail "the line does not say what failed: $(cat "$tmp/out")"
[ ! -e "$tmp/dnnl" ] && [ ! -e "$tmp/dnnl.tmp" ] || fail "a failed download left $(ls -d "$tmp"/dnnl*)"
echo "ok: a failed download: exit 1, one line, nothing left"

mkdir -p "$tmp/have/lib" "$tmp/have/include/oneapi/dnnl"
: >"$tmp/have/lib/libdnnl.so.3"
: >"$tmp/have/include/oneapi/dnnl/dnnl.h"
rm -f "$tmp/python3.calls"
PATH="$tmp/bin:$PATH" bash "$SRC/scripts/fetch-onednn3.sh" "$tmp/have" || fail "a folder that holds oneDNN 3 was not taken"
[ ! -e "$tmp/python3.calls" ] || fail "a folder that holds oneDNN 3 was fetched again"
echo "ok: a folder that holds it is not fetched again"

rc=0
cmake -S "$SRC" -B "$tmp/cfg" -DBOOST_ONEDNN_DIR="$tmp/none" >"$tmp/cfg.out" 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "a BOOST_ONEDNN_DIR without oneDNN configured"
tr -s ' \n' ' ' <"$tmp/cfg.out" | grep -q "BOOST_ONEDNN_DIR=$tmp/none holds no include/oneapi/dnnl/dnnl.h" ||
  fail "the configure error does not name the folder: $(tail -5 "$tmp/cfg.out")"
echo "ok: a BOOST_ONEDNN_DIR without oneDNN stops the configure, named"
echo "PASS: onednn_choice"
