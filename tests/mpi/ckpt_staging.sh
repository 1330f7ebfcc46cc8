#!/usr/bin/env bash
# ckpt.staging_limit (bounded staging): checkpoints written through a ring
# smaller than the state hold exactly the state of their step -- the same
# checksums as the unlimited run's, the same losses after them, a resume
# from them equal bit for bit (decoded straight into the arenas, and
# through the staging ring as on a GPU) -- on one rank, on dp=2 and tp=2,
# and with synchronous saves; bad limits get one line naming the key.
source "$(dirname "$0")/ckpt_common.bash"
make_data

CONST=(--set train.min_lr_ratio=1 --set ckpt.every=2 --set train.steps=6)
final=step_00000006.h5

same_state() { # tag dir_a dir_b: every checkpoint B holds equals A's of its step
  local f n=0
  for f in "$3"/step_*.h5; do
    f=$(basename "$f")
    checksums "$2/$f" >"$tmp/$1.a.sum"
    checksums "$3/$f" >"$tmp/$1.b.sum"
    [ -s "$tmp/$1.a.sum" ] || fail "$1: no checksums in $2/$f"
    cmp -s "$tmp/$1.a.sum" "$tmp/$1.b.sum" ||
      fail "$1: $f differs from the unlimited run's: $(diff "$tmp/$1.a.sum" "$tmp/$1.b.sum" | head -4)"
    n=$((n + 1))
  done
  [ -f "$3/$final" ] && [ $n -ge 1 ] || fail "$1: no $final in $3"
}
same_losses() { # tag a.jsonl b.jsonl
  losses "$2" >"$tmp/$1.a.loss"
  losses "$3" >"$tmp/$1.b.loss"
  cmp -s "$tmp/$1.a.loss" "$tmp/$1.b.loss" || fail "$1: losses differ: $(diff "$tmp/$1.a.loss" "$tmp/$1.b.loss" | head -4)"
}

# ---- bad values: one line naming the key -----------------------------------
for bad in -5 abc 0 12Q 10%% "" -25% nan 1e400 0x; do
  if train 0 "$tmp/bad.log" --set train.steps=1 --set ckpt.dir="$tmp/bad" --set ckpt.staging_limit="$bad"; then
    fail "ckpt.staging_limit='$bad' was accepted"
  fi
  [ "$(grep -c . "$tmp/bad.log")" = 1 ] && grep -q "ckpt.staging_limit" "$tmp/bad.log" ||
    fail "ckpt.staging_limit='$bad': expected one line naming the key: $(tail -3 "$tmp/bad.log")"
done
# A limit below the largest band (a byte, a thousandth of a percent, 1K) is
# refused at the start, before any step, with one line naming the key and
# the least limit that works, in bytes and in percent; both work, a byte
# less does not.
least_re="the smallest limit that works on this layout is \([0-9]*\) ([0-9]*K) or \([0-9.]*\)%\$"
for small in 1 0.001% 1K; do
  train 0 "$tmp/small.log" --set train.steps=1 --set ckpt.dir="$tmp/small" --set ckpt.staging_limit="$small" &&
    fail "ckpt.staging_limit=$small was accepted"
  [ "$(grep -c '^boost-train:' "$tmp/small.log")" = 1 ] &&
    grep -q "^boost-train: ckpt.staging_limit=.* is too small: .*; $least_re" "$tmp/small.log" ||
    fail "ckpt.staging_limit=$small: expected one line naming the key and the least limit: $(grep -v '^  ' "$tmp/small.log")"
  grep -q "^step " "$tmp/small.log" && fail "ckpt.staging_limit=$small: training started"
done
least_bytes=$(sed -n "s/.*$least_re/\1/p" "$tmp/small.log")
least_pct=$(sed -n "s/.*$least_re/\2/p" "$tmp/small.log")
for lim in "$least_bytes" "$least_pct%"; do
  train 0 "$tmp/least.log" --set train.steps=1 --set ckpt.dir="$tmp/least$lim" --set ckpt.staging_limit="$lim" ||
    fail "the least limit the message gave ($lim) does not work: $(grep -v '^  ' "$tmp/least.log" | tail -3)"
  grep -q "staging in a ring" "$tmp/least.log" || fail "$lim: no ring reported"
done
train 0 "$tmp/small.log" --set train.steps=1 --set ckpt.dir="$tmp/small" --set ckpt.staging_limit=$((least_bytes - 1)) &&
  fail "a byte below the least limit ($least_bytes) was accepted"
echo "ok: bad and too small limits refused with one line naming the key; the least limit it names works"
# least_limit NP args...: a limit below the largest band is refused with the
# share of the state that band needs; prints that share rounded up (+1 %),
# the least limit that works on this layout.
least_limit() {
  local np=$1 need least
  shift
  train "$np" "$tmp/small.log" --set train.steps=1 --set ckpt.dir="$tmp/small" --set ckpt.staging_limit=1K "$@" &&
    fail "ckpt.staging_limit=1K was accepted"
  grep -q "ckpt.staging_limit=1 KiB is too small: the largest tensor band" "$tmp/small.log" ||
    fail "limit below the largest band: $(tail -3 "$tmp/small.log")"
  need=$(grep -o '([0-9.]*% of the' "$tmp/small.log" | head -1 | tr -dc '0-9.')
  least=$("$PY" -c "import math,sys; print(math.ceil(float(sys.argv[1])) + 1)" "$need")
  [ "$least" -lt 100 ] || fail "the largest band takes $need% of the state: no bounded limit to test"
  echo "$least"
}
least=$(least_limit 0)
# ZeRO-1 moment chunks are not staged through a ring (yet): said, not ignored.
train 2 "$tmp/zero.log" --set train.steps=1 --set ckpt.dir="$tmp/zero" --set ckpt.staging_limit=50% \
  --set parallel.zero=1 --set parallel.dp=2 && fail "a bounded limit with ZeRO-1 was accepted"
grep -q "ckpt.staging_limit=50% is below .* ZeRO-1" "$tmp/zero.log" || fail "ZeRO-1: $(tail -3 "$tmp/zero.log")"

# ---- one rank: unlimited, and the least limit (the ring wraps at every save) ----
train 0 "$tmp/full.log" "${CONST[@]}" --set ckpt.dir="$tmp/full" --set train.metrics="$tmp/full.jsonl" ||
  fail "unlimited run: $(tail -5 "$tmp/full.log")"
grep -q "staging in a ring" "$tmp/full.log" && fail "the unlimited run reports a ring"
# The writer is slowed down (10 ms a dataset), so that the next optimizer
# step comes while the ring is still being filled and has to wait for it.
for lim in "$least%"; do
  tag=lim${lim%\%}
  BOOST_CKPT_TEST_DELAY_MS=10 train 0 "$tmp/$tag.log" "${CONST[@]}" --set ckpt.dir="$tmp/$tag" \
    --set train.metrics="$tmp/$tag.jsonl" --set ckpt.staging_limit="$lim" || fail "$tag: $(tail -5 "$tmp/$tag.log")"
  grep -q "checkpoint: staging in a ring of .* (ckpt.staging_limit; " "$tmp/$tag.log" ||
    fail "$tag: no ring reported: $(grep checkpoint "$tmp/$tag.log" | head -3)"
  [ "$(grep -c '"committed":true' "$tmp/$tag/checkpoints.jsonl")" = 3 ] || fail "$tag: not 3 commits"
  same_state "$tag" "$tmp/full" "$tmp/$tag"
  same_losses "$tag" "$tmp/full.jsonl" "$tmp/$tag.jsonl"
  "$PY" -c 'import json,sys
w = [json.loads(l)["update_wait_s"] for l in open(sys.argv[1])]
sys.exit(0 if max(w) > 0.05 else "no optimizer step waited for the ring: %r" % w)' "$tmp/$tag/checkpoints.jsonl" ||
    fail "$tag: the test did not make training wait for the ring"
  "$INSPECT" verify "$tmp/$tag/$final" >"$tmp/$tag.verify" 2>&1 || fail "$tag: verify: $(tail -3 "$tmp/$tag.verify")"
  echo "ok (limit $lim): 3 checkpoints, state and losses identical to the unlimited run's"
done

# Resume from a checkpoint written under the least limit (step 4), under the
# least limit again and without one: the end state equals the unlimited run's.
train 0 "$tmp/r1.log" "${CONST[@]}" --set train.steps=4 --set ckpt.dir="$tmp/res" --set ckpt.staging_limit="$least%" ||
  fail "first half: $(tail -5 "$tmp/r1.log")"
cp -r "$tmp/res" "$tmp/res2"
cp -r "$tmp/res" "$tmp/res3"
# res3: the load goes through the staging ring as on a GPU (bands uploaded
# whenever the ring of the least limit is full) instead of straight into
# the arenas.
for d in res res2 res3; do
  lim="$least%"
  [ $d = res2 ] && lim=100%
  ring=0
  [ $d = res3 ] && ring=1
  BOOST_CKPT_TEST_LOAD_RING=$ring train 0 "$tmp/$d.log" "${CONST[@]}" --set ckpt.dir="$tmp/$d" --set ckpt.staging_limit="$lim" ||
    fail "resume ($lim, ring $ring): $(tail -5 "$tmp/$d.log")"
  grep -q "resumed from $tmp/$d/step_00000004.h5" "$tmp/$d.log" || fail "resume ($lim): did not resume from step 4"
  same_state "resume-$d" "$tmp/full" "$tmp/$d"
done
echo "ok: resumed from a bounded checkpoint (limit $least% and 100%; into the arenas and through the ring), end state identical"

# Synchronous saves (the trainer waits for the whole save) through the ring.
BOOST_CKPT_SYNC=1 train 0 "$tmp/sync.log" "${CONST[@]}" --set ckpt.dir="$tmp/sync" --set ckpt.staging_limit="$least%" ||
  fail "sync: $(tail -5 "$tmp/sync.log")"
same_state sync "$tmp/full" "$tmp/sync"
echo "ok: synchronous saves through the ring"

# ---- two ranks: dp=2 and tp=2, against their unlimited runs ------------------
for lay in "dp2 --set parallel.dp=2" "tp2 --set parallel.tp=2"; do
  set -- $lay
  tag=$1
  shift
  train 2 "$tmp/$tag.f.log" "${CONST[@]}" "$@" --set ckpt.dir="$tmp/$tag.f" --set train.metrics="$tmp/$tag.f.jsonl" ||
    fail "$tag unlimited: $(tail -5 "$tmp/$tag.f.log")"
  least=$(least_limit 2 "$@")
  train 2 "$tmp/$tag.l.log" "${CONST[@]}" "$@" --set ckpt.dir="$tmp/$tag.l" --set train.metrics="$tmp/$tag.l.jsonl" \
    --set ckpt.staging_limit="$least%" || fail "$tag limited: $(tail -5 "$tmp/$tag.l.log")"
  grep -q "staging in a ring" "$tmp/$tag.l.log" || fail "$tag: no ring reported"
  same_state "$tag" "$tmp/$tag.f" "$tmp/$tag.l"
  same_losses "$tag" "$tmp/$tag.f.jsonl" "$tmp/$tag.l.jsonl"
  # A resume from step 4 (the replicas' bands gathered after the load),
  # through the ring and straight into the arenas.
  for ring in 0 1; do
    rm -rf "$tmp/$tag.r$ring"
    cp -r "$tmp/$tag.l" "$tmp/$tag.r$ring"
    rm -f "$tmp/$tag.r$ring/$final"
    BOOST_CKPT_TEST_LOAD_RING=$ring train 2 "$tmp/$tag.r$ring.log" "${CONST[@]}" "$@" --set ckpt.dir="$tmp/$tag.r$ring" \
      --set ckpt.staging_limit="$least%" || fail "$tag resume (ring $ring): $(tail -5 "$tmp/$tag.r$ring.log")"
    grep -q "resumed from $tmp/$tag.r$ring/step_00000004.h5" "$tmp/$tag.r$ring.log" || fail "$tag: did not resume from step 4"
    same_state "$tag-resume-ring$ring" "$tmp/$tag.f" "$tmp/$tag.r$ring"
  done
  echo "ok ($tag): limit $least%, state and losses identical to the unlimited run's, and after a resume"
done
echo PASS
