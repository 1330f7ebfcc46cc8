#!/usr/bin/env bash
# tools/chaos/boost-chaos with the remote level on (--remote, SeaweedFS on
# 127.0.0.1 started by remote_common.bash) and the site-loss kind: every
# rank killed, ckpt.dir emptied and the local level removed, so the restart
# must come from the object store; each relaunch judged by boost-chaos (the
# newest logged upload or newer, in the reference's state of its step,
# every later loss the uninterrupted run's, the final state bit-identical).
# boost-chaos lands each loss after its launch logged an upload finished
# ("checkpoint: remote step N uploaded"), so every one of them must restart
# from the remote level, whatever the machine's load.
source "$(dirname "$0")/ckpt_common.bash"
source "$(dirname "$0")/remote_common.bash"
[ -x /usr/bin/python3 ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
open_store s3://boost-chaos/c
code=0
"$SRC/tools/chaos/boost-chaos" --faults-kinds site-loss --faults 3 --seed 11 --steps 40 --every 4 --step-ms 100 \
  --local-every 2 --remote s3://boost-chaos/c --remote-endpoint "$BOOST_S3_ENDPOINT" --dir "$tmp" --build "$BIN" \
  --json >"$tmp/out.json" 2>"$tmp/err" || code=$?
cat "$tmp/err"
/usr/bin/python3 - "$tmp/out.json" "$code" <<'PYEOF' || fail "boost-chaos: see above"
import json, sys
d = json.load(open(sys.argv[1]))
t = d["totals"]
print("boost-chaos site-loss: %s, %d faults: %d ok, %d lost, %d accepted-broken, %d hangs, %d crashes" % (
    d["verdict"], t["faults"], t["ok"], t["lost"], t["accepted-broken"], t["hang"], t["crash"]))
for f in d["faults"]:
    print("  fault %s: %s, after remote step %s was logged uploaded; restart from %s, %s steps lost" % (
        f["n"], f.get("detail"), f.get("after_upload"), f.get("restart_from"), f.get("steps_lost")))
    for p in f["problems"]:
        print("    %s: %s" % (p["kind"], p["what"]))
if t["not-injected"]:
    sys.exit("%d fault(s) could not be injected" % t["not-injected"])
# Each loss lands after its launch logged an upload finished: every restart must come from the remote level.
for f in d["faults"]:
    if f.get("after_upload") is None:
        sys.exit("fault %s landed before its launch logged an upload" % f["n"])
    if f.get("restart_from") != "remote":
        sys.exit("fault %s (after remote step %s) restarted from %s, not the remote level" % (
            f["n"], f["after_upload"], f.get("restart_from")))
if d["verdict"] != "PASS" or sys.argv[2] != "0":
    sys.exit("verdict %s, exit status %s" % (d["verdict"], sys.argv[2]))
PYEOF
echo "chaos_remote: passed"
