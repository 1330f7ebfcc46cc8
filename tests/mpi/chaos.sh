#!/usr/bin/env bash
# A short tools/chaos/boost-chaos run (1-2 minutes): every fault kind twice --
# SIGKILL of all ranks and of one, SIGTERM/SIGINT to the launcher, the ranks
# and every process, a byte flip in a committed checkpoint, a full tmpfs
# (as root; skipped otherwise), SIGSTOP of one rank (the watchdogs end the
# job: parallel.timeout and ckpt.timeout 5 s here) -- each followed by a
# resume that must take the newest
# intact checkpoint holding the uninterrupted run's state, with documented
# exit codes, no hang, no leftover process and a final state bit-identical
# to the uninterrupted run's. Skips (77) without /usr/bin/python3.
set -euo pipefail
B=${BOOST_BINARY_DIR:?BOOST_BINARY_DIR must point at the build directory}
SRC=${BOOST_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
[ -x /usr/bin/python3 ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/boost_chaos_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
rc=0
"$SRC/tools/chaos/boost-chaos" --faults 22 --seed 20 --steps 24 --every 4 --step-ms 30 --stop-timeout 5 --dir "$tmp" --build "$B" --json \
  >"$tmp/out.json" 2>"$tmp/err" || rc=$?
cat "$tmp/err"
/usr/bin/python3 - "$tmp/out.json" "$rc" <<'PYEOF' || fail "boost-chaos: see above"
import json, sys
d = json.load(open(sys.argv[1]))
t = d["totals"]
print("boost-chaos: %s, %d faults: %d ok, %d skipped, %d lost, %d accepted-broken, %d hangs, %d crashes" % (
    d["verdict"], t["faults"], t["ok"], t["skipped"], t["lost"], t["accepted-broken"], t["hang"], t["crash"]))
for f in d["faults"]:
    for p in f["problems"]:
        print("  fault %s (%s): %s: %s" % (f["n"], f["kind"], p["kind"], p["what"]))
kinds = set(d["kinds"])
missing = {"kill9-all", "kill9-one", "term-launcher", "int-launcher", "term-ranks", "int-ranks", "term-all",
           "int-all", "sigstop", "flip", "enospc", "nan", "spike", "sdc", "sdc-persistent"} - kinds
if missing:
    sys.exit("kinds never drawn: %s" % sorted(missing))
if d["kinds"]["sigstop"].get("skipped"):
    sys.exit("sigstop skipped: %s" % [f.get("why") for f in d["faults"] if f["kind"] == "sigstop"][:1])
if t["not-injected"]:
    sys.exit("%d fault(s) could not be injected: %s" % (t["not-injected"], [f.get("not_injected") for f in d["faults"]
                                                                              if f.get("not_injected")][:1]))
if d["verdict"] != "PASS" or sys.argv[2] != "0":
    sys.exit("verdict %s, exit status %s" % (d["verdict"], sys.argv[2]))
PYEOF
echo "PASS: chaos"
