#!/usr/bin/env bash
# The step guard on a token shard with a block of random bytes spliced into
# clean text (docs/GUARD.md, "Dirty data"), met the way a corrupted stretch
# of a shard is met: read in stored order (data.order=sequential), so the
# stretch falls on consecutive steps. The corpus is the fortunes, shuffled
# once at the fortune level (a fixed seed) into one document, as a
# pre-shuffled shard is; the dirty copy has 8 KiB of random bytes (1-255, a
# fixed seed) over the text that steps 231-234 read (a step reads 16 x 128
# tokens), after the loss has fallen. The quick start runs three times:
#   clean text, guard on (default): nothing flagged;
#   dirty, train.guard=skip: the guard flags every step that meets the noise
#     and no other (log and the checkpoint's ledger, boost-inspect summary),
#     the run continues, its validation loss within 1 % of the clean run's
#     (skip, not the default rollback: a rollback passes over 200 batches
#     from step 200 into text the clean run never reads, where the guard may
#     rightly flag an odd fortune; docs/GUARD.md has that run);
#   dirty, train.guard=off: the spike is in the log (the loss of the noisy
#     steps far above their neighbours'), in the checkpoint's loss history
#     and in the data boost-inspect plot draws.
source "$(dirname "$0")/ckpt_common.bash"
NOISY_FIRST=231 NOISY_STEPS=4 TOKENS_PER_STEP=$((16 * 128))
"$PY" - "$tmp" $NOISY_FIRST $NOISY_STEPS $TOKENS_PER_STEP <<'PYEOF' || fail "making the corpus"
import glob, os, random, sys
tmp, first, steps, per_step = sys.argv[1], *map(int, sys.argv[2:])
fortunes = []
for path in sorted(glob.glob("/usr/share/games/fortunes/*")):
    if path.endswith((".dat", ".u8")) or not os.path.isfile(path):
        continue
    fortunes += [f.strip(b"\n") for f in open(path, "rb").read().split(b"\n%\n") if f.strip()]
random.Random(34).shuffle(fortunes)
text = b"\n%\n".join(fortunes)
# One document: token 0 is the EOT, byte k is token k + 1. Step s reads the
# windows of tokens [(s - 1) * per_step, s * per_step].
at, n = (first - 1) * per_step, steps * per_step
noise = bytes(random.Random(34).randrange(1, 256) for _ in range(n))  # no NUL: boost-data would skip the file
assert len(text) > at + n + 300 * per_step // 10
for name, data in (("clean", text), ("dirty", text[:at] + noise + text[at + n:])):
    os.mkdir(os.path.join(tmp, name))
    open(os.path.join(tmp, name, "corpus.txt"), "wb").write(data)
PYEOF
for c in clean dirty; do
  "$B/tools/boost-data" --no-fortune-split -o "$tmp/$c.tok" "$tmp/$c" >"$tmp/data.log" 2>&1 ||
    fail "boost-data $c: $(cat "$tmp/data.log")"
done
QS=(--config "$BOOST_SOURCE_DIR/examples/quickstart.ini" --set train.threads=1 --set train.metrics= --set data.order=sequential)
"$TRAIN" "${QS[@]}" --set data.train="$tmp/clean.tok" --set ckpt.dir= >"$tmp/clean.log" 2>&1 ||
  fail "clean: $(tail -3 "$tmp/clean.log")"
"$TRAIN" "${QS[@]}" --set data.train="$tmp/dirty.tok" --set ckpt.dir="$tmp/guard" --set train.guard=skip \
  >"$tmp/guard.log" 2>&1 ||
  fail "guarded: $(tail -3 "$tmp/guard.log")"
"$TRAIN" "${QS[@]}" --set data.train="$tmp/dirty.tok" --set ckpt.dir="$tmp/off" --set train.guard=off \
  >"$tmp/off.log" 2>&1 || fail "off: $(tail -3 "$tmp/off.log")"
grep -q "data.order *= *sequential" "$tmp/clean.log" || fail "the run does not print data.order=sequential: $(head -30 "$tmp/clean.log")"
! grep -q FLAGGED "$tmp/clean.log" || fail "the guard fired on the clean text: $(grep FLAGGED "$tmp/clean.log")"

# (1) The guard flags the noisy steps and only them, in the log and in the
# ledger; the run continues (passes the batches over) to step 300.
"$INSPECT" summary --json "$tmp/guard" >"$tmp/summary.json" || fail "boost-inspect summary on the guarded run"
"$PY" - "$tmp/guard.log" "$tmp/summary.json" $NOISY_FIRST $NOISY_STEPS <<'PYEOF' || fail "the guard on the dirty shard"
import json, re, sys
log, summary, first, steps = open(sys.argv[1]).read(), json.load(open(sys.argv[2])), *map(int, sys.argv[3:])
noisy = set(range(first - 1, first - 1 + steps))  # the global batches the noise fills
flagged = [int(b) for b in re.findall(r"^step +\d+/300 \| FLAGGED batch (\d+):", log, re.M)]
print("guarded run: flagged batches %s (noise in batches %s)" % (flagged, sorted(noisy)))
assert flagged == sorted(noisy), "the guard flagged batches %s, the noise is in %s" % (flagged, sorted(noisy))
assert re.search(r"^step +300/300 \| loss", log, re.M), "the guarded run did not reach step 300"
events = summary["guard"]["events"]
ledger = sorted(int(e["batch"]) for e in events)
assert ledger == flagged, "boost-inspect summary's ledger names batches %s, the log %s" % (ledger, flagged)
PYEOF

# (2) Without the guard the spike is in the log, the loss history and the plot's data.
"$PY" - "$tmp/off.log" $NOISY_FIRST $NOISY_STEPS <<'PYEOF' || fail "the unguarded run's spike"
import re, statistics, sys
log, first, steps = open(sys.argv[1]).read(), *map(int, sys.argv[2:])
loss = {int(s): float(l) for s, l in re.findall(r"^step +(\d+)/300 \| loss ([0-9.]+)", log, re.M)}
before = statistics.median(loss[s] for s in range(first - 10, first))
spike = [loss[s] for s in range(first, first + steps)]
print("unguarded run: loss %.3f before the noise (median of 10 steps), %s on it"
      % (before, " ".join("%.3f" % l for l in spike)))
assert min(spike) > 1.8 * before, "no spike in the unguarded run's log"
PYEOF
"$INSPECT" plot "$tmp/off" -o "$tmp/off.png" --data-dir "$tmp/plot" >"$tmp/plot.log" 2>&1 ||
  fail "boost-inspect plot: $(cat "$tmp/plot.log")"
[ -s "$tmp/off.png" ] || fail "boost-inspect plot wrote no picture"
"$PY" - "$tmp/off.log" "$tmp/plot" $NOISY_FIRST <<'PYEOF' || fail "the spike in the plot's data ($(ls "$tmp/plot"))"
import glob, re, sys
log, plot_dir, first = open(sys.argv[1]).read(), sys.argv[2], int(sys.argv[3])
want = float(re.search(r"^step +%d/300 \| loss ([0-9.]+)" % first, log, re.M).group(1))
for path in glob.glob(plot_dir + "/*.dat"):
    cols = []
    for line in open(path, errors="replace"):
        f = line.split()
        if f and f[0] == "#":
            cols = f[1:]  # the header names the columns: step ... loss ...
        elif "step" in cols and "loss" in cols and len(f) == len(cols):
            step, loss = float(f[cols.index("step")]), float(f[cols.index("loss")])
            if step == first and abs(loss - want) < 1e-3:
                print("plot data: step %d loss %.4f in %s" % (first, loss, path.rsplit("/", 1)[1]))
                sys.exit(0)
sys.exit("step %d's loss %.4f is in none of the plot's data files" % (first, want))
PYEOF

val() { grep "^step   300/300" "$1" | grep -o "val [0-9.]*" | cut -d' ' -f2; }
"$PY" - "$(val "$tmp/clean.log")" "$(val "$tmp/guard.log")" "$(val "$tmp/off.log")" <<'PYEOF' || fail "validation losses"
import sys
clean, guard, off = map(float, sys.argv[1:])
print("validation loss at step 300: clean %.4f, dirty with the guard %.4f (%+.2f %%), dirty without %.4f (%+.2f %%)"
      % (clean, guard, 100 * (guard / clean - 1), off, 100 * (off / clean - 1)))
assert abs(guard / clean - 1) < 0.01, "the guarded run is not within 1 % of the clean one"
PYEOF
echo "ok: dirty shard read in stored order: the guard flagged the noisy steps, validation within 1 %; unguarded: the spike in the log and the plot"
