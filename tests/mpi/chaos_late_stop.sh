#!/usr/bin/env bash
# boost-chaos and the one moment no rank can see: a rank stopped after
# MPI_Finalize returned (the job's last synchronization; every other rank
# exits 0 and the launcher waits for the stopped one). The campaign kills the
# launch and counts the fault as not landed, tried again in later launches
# -- never a hang or a crash, which would fail a campaign on a race no job
# can answer (docs/CHAOS.md). BOOST_CHAOS_TEST_LATE_STOP=1 makes every sigstop
# land there: rank 1 stops itself after MPI_Finalize
# (BOOST_TRAIN_TEST_STOP_IN=finalized:1). About 2 minutes: six launches, each
# ended at its bound. Skips (77) without /usr/bin/python3.
set -euo pipefail
B=${BOOST_BINARY_DIR:?BOOST_BINARY_DIR must point at the build directory}
SRC=${BOOST_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
[ -x /usr/bin/python3 ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/boost_chaos_late.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
rc=0
BOOST_CHAOS_TEST_LATE_STOP=1 "$SRC/tools/chaos/boost-chaos" --faults 1 --faults-kinds sigstop --seed 3 --steps 8 \
  --every 4 --step-ms 30 --stop-timeout 5 --timeout 5 --dir "$tmp" --build "$B" --json >"$tmp/out.json" 2>"$tmp/err" || rc=$?
cat "$tmp/err"
/usr/bin/python3 - "$tmp/out.json" "$rc" <<'PYEOF' || fail "boost-chaos: see above"
import json, sys
d = json.load(open(sys.argv[1]))
t, rc = d["totals"], int(sys.argv[2])
f = d["faults"][0]
print("boost-chaos: %s (exit %d): %s; fault 1: %s %s" % (d["verdict"], rc, t, f["kind"], f.get("outcome")))
if t["hang"] or t["crash"] or f["problems"]:
    sys.exit("a stop after MPI_Finalize was judged a fault of the job: %s" % f["problems"])
if f.get("outcome") != "not-injected" or t["not-injected"] != 1:
    sys.exit("the late stop was not counted as not landed: outcome %s" % f.get("outcome"))
if d["verdict"] != "PASS" or rc != 0:
    sys.exit("verdict %s, exit %d: expected PASS, 0" % (d["verdict"], rc))
PYEOF
echo "PASS: chaos_late_stop"
