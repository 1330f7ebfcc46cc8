#!/usr/bin/env bash
# The checkpoint interval from measurement (ckpt.every = auto): with the
# checkpoint's cost injected (BOOST_CKPT_TEST_DELTA_S) and ckpt.mtbf given,
# the run announces Daly's interval for them and two ranks checkpoint at that
# wall-clock interval (never earlier; later only by a step's length and the
# machine's load); a resume adds to the run's history of starts
# (/state/run_starts), which then estimates M; ckpt.every_seconds checkpoints by the clock; bad values get one
# line naming the key.
source "$(dirname "$0")/ckpt_common.bash"
make_data

export BOOST_TRAIN_TEST_STEP_DELAY_MS=250

# Checkpoint times (metrics "time" of the steps whose checkpoint status says
# "staged"; the last step's forced one excluded) and their gaps against tau.
check_gaps() { # tag metrics tau last_step
  "$PY" - "$@" <<'PY' || exit 1
import json, sys
tag, path, tau, last = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
rows = [json.loads(l) for l in open(path)]
staged = [r["time"] for r in rows if "staged" in r["ckpt"] and r["step"] != last]
if len(staged) < 2:
    sys.exit(f"FAIL: {tag}: {len(staged)} clock checkpoints in {len(rows)} steps, expected at least 2 (tau {tau} s)")
# A checkpoint is due at the first step boundary at least tau after the
# previous one: never earlier, and later by at most the longest time between
# two step boundaries (the machine's load stretches those, not the rule).
slack = 0.05
gaps = [b - a for a, b in zip(staged, staged[1:])]
boundary = max(b["time"] - a["time"] for a, b in zip(rows, rows[1:]))
if min(gaps) < tau - slack:
    sys.exit(f"FAIL: {tag}: a checkpoint came {min(gaps):.3f} s after the previous one, before tau {tau:.3f} s: {gaps}")
if max(gaps) > tau + boundary + slack:
    sys.exit(f"FAIL: {tag}: a gap of {max(gaps):.3f} s is longer than tau {tau:.3f} s plus a step ({boundary:.3f} s): {gaps}")
print(f"ok ({tag}): {len(staged)} checkpoints by the clock, gaps {', '.join(f'{g:.2f}' for g in gaps)} s, tau {tau:.3f} s")
PY
}

# ---- auto: Daly's interval from the injected cost and ckpt.mtbf, two ranks ----
BOOST_CKPT_TEST_DELTA_S=0.02 train 2 "$tmp/auto.log" --set train.steps=18 --set ckpt.dir="$tmp/auto" \
  --set ckpt.every=auto --set ckpt.mtbf=50 --set train.metrics="$tmp/auto.jsonl" ||
  fail "auto run: $(tail -5 "$tmp/auto.log")"
tau=$("$PY" -c 'import math
d, M = 0.02, 50.0
x = d / (2 * M)
print("%.3f" % (math.sqrt(2 * d * M) * (1 + math.sqrt(x) / 3 + x / 9) - d))')
line=$(grep "^checkpoint interval:" "$tmp/auto.log" | head -1)
case $line in
  "checkpoint interval: $tau s (Daly;"*"M = 50 s (ckpt.mtbf)"*) echo "ok: announced $line" ;;
  *) fail "expected 'checkpoint interval: $tau s (Daly; ...' with M = 50 s from ckpt.mtbf, got '$line'" ;;
esac
[ "$(grep -c '^checkpoint interval:' "$tmp/auto.log")" = 1 ] ||
  fail "the injected cost does not change, yet the interval was announced again: $(grep '^checkpoint interval:' "$tmp/auto.log")"
check_gaps auto "$tmp/auto.jsonl" "$tau" 18

# ---- a resume: the history grows to two starts and gives M ------------------
BOOST_CKPT_TEST_DELTA_S=0.02 train 0 "$tmp/resume.log" --set train.steps=20 --set ckpt.dir="$tmp/auto" \
  --set ckpt.every=auto || fail "resumed auto run: $(tail -5 "$tmp/resume.log")"
grep -q "^checkpoint interval: .* (2 starts in .* (/state/run_starts))" "$tmp/resume.log" ||
  fail "the resumed run did not estimate M from its two starts: $(grep '^checkpoint interval' "$tmp/resume.log")"
echo "ok: the resume estimated M from the history: $(grep '^checkpoint interval' "$tmp/resume.log")"

# ---- a fixed wall-clock interval ---------------------------------------------
train 0 "$tmp/sec.log" --set train.steps=14 --set ckpt.dir="$tmp/sec" --set ckpt.every_seconds=1.5 \
  --set train.metrics="$tmp/sec.jsonl" || fail "every_seconds run: $(tail -5 "$tmp/sec.log")"
grep -q "^checkpoint interval: every 1.5 s of wall time (ckpt.every_seconds)" "$tmp/sec.log" ||
  fail "every_seconds not announced: $(grep -m1 interval "$tmp/sec.log")"
check_gaps every_seconds "$tmp/sec.jsonl" 1.5 14

# ---- bad values: one line naming the key, nothing trained --------------------
for bad in "ckpt.mtbf=0" "ckpt.mtbf=-3h" "ckpt.mtbf=soon" "ckpt.every=sometimes" "ckpt.every=-1" "ckpt.every=autox" \
  "ckpt.every_seconds=-1" "ckpt.every_seconds=soon"; do
  key=${bad%%=*}
  if train 0 "$tmp/bad.log" --set train.steps=2 --set ckpt.dir="$tmp/bad" --set "$bad"; then
    fail "$bad was accepted"
  fi
  [ "$(grep -c . "$tmp/bad.log")" = 1 ] && grep -q "$key" "$tmp/bad.log" ||
    fail "$bad: expected one line naming $key, got: $(cat "$tmp/bad.log")"
done
if train 0 "$tmp/bad.log" --set train.steps=2 --set ckpt.every=auto --set ckpt.every_seconds=5; then
  fail "ckpt.every=auto with ckpt.every_seconds was accepted"
fi
grep -q "ckpt.every_seconds" "$tmp/bad.log" || fail "auto + every_seconds: $(cat "$tmp/bad.log")"
[ ! -e "$tmp/bad" ] || [ -z "$(ls -A "$tmp/bad")" ] || fail "a refused start wrote into its checkpoint directory"
echo "ok: bad values refused with one line naming the key"
echo PASS
