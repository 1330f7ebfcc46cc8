#!/usr/bin/env bash
# The step guard on a token shard with a block of random bytes spliced into
# clean text (docs/GUARD.md, "Dirty data"): the quick start on the fortunes
# corpus, once clean, once with 16 KiB of random bytes (a fixed seed) in the
# middle of one file, with the guard (default) and without. Both dirty runs
# end within 1 % of the clean run's validation loss; the guard never rolls
# back there, and whatever step it flags, the unguarded run applied with the
# same gradient norm (the verdict came before the update). What it measured
# is printed: with samples drawn in a shuffled order, the noise meets the
# byte-level model one 128-byte window at a time, which it recognises in
# context; it raises a batch's loss by about as much as ordinary batches
# differ (docs/GUARD.md).
source "$(dirname "$0")/ckpt_common.bash"
mkdir -p "$tmp/clean" "$tmp/dirty"
for f in /usr/share/games/fortunes/*; do
  case $f in *.dat | *.u8) continue ;; esac
  [ -f "$f" ] && cp "$f" "$tmp/clean/" && cp "$f" "$tmp/dirty/"
done
"$PY" - "$tmp/clean/computers" "$tmp/dirty/computers" <<'PYEOF'
import random, sys
text = open(sys.argv[1], "rb").read()
noise = bytes(random.Random(34).randrange(1, 256) for _ in range(16384))  # no NUL: boost-data would skip the file
half = len(text) // 2
open(sys.argv[2], "wb").write(text[:half] + noise + text[half:])
PYEOF
for c in clean dirty; do
  "$B/tools/boost-data" -o "$tmp/$c.tok" "$tmp/$c" >"$tmp/data.log" 2>&1 || fail "boost-data $c: $(cat "$tmp/data.log")"
done
QS=(--config "$BOOST_SOURCE_DIR/examples/quickstart.ini" --set train.threads=1 --set ckpt.dir= --set train.metrics=)
"$TRAIN" "${QS[@]}" --set data.train="$tmp/clean.tok" >"$tmp/clean.log" 2>&1 || fail "clean: $(tail -3 "$tmp/clean.log")"
"$TRAIN" "${QS[@]}" --set data.train="$tmp/dirty.tok" >"$tmp/guard.log" 2>&1 || fail "guarded: $(tail -3 "$tmp/guard.log")"
"$TRAIN" "${QS[@]}" --set data.train="$tmp/dirty.tok" --set train.guard=off >"$tmp/off.log" 2>&1 || fail "off: $(tail -3 "$tmp/off.log")"
! grep -q FLAGGED "$tmp/clean.log" || fail "the guard fired on the clean text: $(grep FLAGGED "$tmp/clean.log")"
! grep -q "^guard: rollback" "$tmp/guard.log" || fail "the dirty shard made the guard roll back: $(grep '^guard' "$tmp/guard.log")"
val() { grep "^step   300/300" "$1" | grep -o "val [0-9.]*" | cut -d' ' -f2; }
"$PY" - "$(val "$tmp/clean.log")" "$(val "$tmp/guard.log")" "$(val "$tmp/off.log")" <<'PYEOF' || fail "validation losses"
import sys
clean, guard, off = map(float, sys.argv[1:])
print("validation loss: clean %.4f, dirty with the guard %.4f (%+.2f %%), dirty without %.4f (%+.2f %%)"
      % (clean, guard, 100 * (guard / clean - 1), off, 100 * (off / clean - 1)))
assert abs(guard / clean - 1) < 0.01, "the guarded run is not within 1 % of the clean one"
assert abs(off / clean - 1) < 0.01, "the unguarded run is not within 1 % of the clean one"
PYEOF
# A flagged step, as the unguarded run logged it: the same gradient norm, applied.
if first=$(grep -m1 FLAGGED "$tmp/guard.log"); then
  step=$(sed -E 's/^step +([0-9]+)\/.*/\1/' <<<"$first")
  gn=$(sed -E 's/.*\| gnorm ([0-9.e+]+) \|.*/\1/' <<<"$first")
  line=$(grep -E "^step +$step/300 " "$tmp/off.log") || fail "the unguarded run did not log step $step"
  off_gn=$(sed -E 's/.*\| gnorm ([0-9.e+]+) \|.*/\1/' <<<"$line")
  "$PY" -c "import sys; sys.exit(abs($off_gn / $gn - 1) > 2e-3)" ||
    fail "the unguarded run's step $step does not show gradient norm $gn: $line"
fi
echo "ok: dirty shard: $(grep -c FLAGGED "$tmp/guard.log") step(s) flagged${first:+ ($first)}, no rollback, validation within 1 %"
