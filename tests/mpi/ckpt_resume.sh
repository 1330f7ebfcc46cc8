#!/usr/bin/env bash
# Run N+M steps vs run N, stop, resume, run M: identical losses (metrics JSON
# lines) and identical final parameters and moments (checksums of the final
# checkpoints), on one process and on two ranks in every layout (dp, tp, pp,
# ZeRO-1). The LR is
# constant (min_lr_ratio 1) so that stopping at N with train.steps=N is the
# same run as the first N steps of train.steps=N+M. Also: retention
# (keep_last, keep_every), the `latest` pointer, the recorded state.
source "$(dirname "$0")/ckpt_common.bash"
make_data

check_same_run() { # tag dir_a dir_b final_step
  local tag=$1 a=$2 b=$3 n=$4 f
  f=$(printf 'step_%08d.h5' "$n")
  losses "$tmp/$tag.a.jsonl" >"$tmp/$tag.a.loss"
  losses "$tmp/$tag.b.jsonl" >"$tmp/$tag.b.loss"
  [ "$(wc -l <"$tmp/$tag.a.loss")" -eq "$n" ] || fail "$tag: uninterrupted run logged $(wc -l <"$tmp/$tag.a.loss") steps, expected $n"
  cmp -s "$tmp/$tag.a.loss" "$tmp/$tag.b.loss" ||
    fail "$tag: losses differ between the uninterrupted and the resumed run:$(diff "$tmp/$tag.a.loss" "$tmp/$tag.b.loss" | head -6)"
  [ -f "$a/$f" ] && [ -f "$b/$f" ] || fail "$tag: final checkpoint $f missing"
  checksums "$a/$f" >"$tmp/$tag.a.sum"
  checksums "$b/$f" >"$tmp/$tag.b.sum"
  [ -s "$tmp/$tag.a.sum" ] || fail "$tag: no checksums in $a/$f"
  cmp -s "$tmp/$tag.a.sum" "$tmp/$tag.b.sum" ||
    fail "$tag: final parameters/moments differ: $(diff "$tmp/$tag.a.sum" "$tmp/$tag.b.sum" | head -4)"
  for k in step data_cursor tokens_seen; do
    [ "$(state "$a/$f" $k)" = "$(state "$b/$f" $k)" ] || fail "$tag: $k differs: $(state "$a/$f" $k) vs $(state "$b/$f" $k)"
  done
  [ "$("$INSPECT" --json --no-tensors "$b/$f" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["loss_history"]["count"])')" = "$n" ] ||
    fail "$tag: the final checkpoint's loss history does not hold $n losses"
  echo "ok ($tag): $n losses identical, $(wc -l <"$tmp/$tag.a.sum") tensor checksums identical, same state"
}

CONST=(--set train.min_lr_ratio=1 --set ckpt.every=2)

# ---- one process: 4 + 4 steps ------------------------------------------------
train 0 "$tmp/p1a.log" "${CONST[@]}" --set train.steps=8 --set ckpt.dir="$tmp/p1a" --set train.metrics="$tmp/p1.a.jsonl" ||
  fail "uninterrupted run: $(tail -5 "$tmp/p1a.log")"
train 0 "$tmp/p1b1.log" "${CONST[@]}" --set train.steps=4 --set ckpt.dir="$tmp/p1b" --set train.metrics="$tmp/p1.b.jsonl" ||
  fail "first half: $(tail -5 "$tmp/p1b1.log")"
train 0 "$tmp/p1b2.log" "${CONST[@]}" --set train.steps=8 --set ckpt.dir="$tmp/p1b" --set train.metrics="$tmp/p1.b.jsonl" ||
  fail "resumed half: $(tail -5 "$tmp/p1b2.log")"
grep -q "checkpoints: resumed from $tmp/p1b/step_00000004.h5 (step 4" "$tmp/p1b2.log" ||
  fail "the second run did not resume from step 4: $(grep checkpoints: "$tmp/p1b2.log")"
grep -q "from step 4" "$tmp/p1b2.log" || fail "the second run does not start at step 4"
check_same_run p1 "$tmp/p1a" "$tmp/p1b" 8
# Resumed with no step left: it trains none and reports the checkpoint's last loss.
train 0 "$tmp/p1b3.log" "${CONST[@]}" --set train.steps=8 --set ckpt.dir="$tmp/p1b" || fail "resumed at the end: $(tail -5 "$tmp/p1b3.log")"
last=$(grep -o "final loss [0-9.]*" "$tmp/p1b2.log")
grep -q "^done: step 8, .*$last," "$tmp/p1b3.log" || fail "resumed at the end: expected '$last': $(tail -1 "$tmp/p1b3.log")"

# ---- two ranks, every parallel layout: 3 + 3 steps -----------------------------
DP=(--set train.min_lr_ratio=1 --set ckpt.every=3 --set train.grad_accum=2)
two_ranks() { # tag layout args...
  local tag=$1
  shift
  train 2 "$tmp/$tag.a.log" "${DP[@]}" "$@" --set train.steps=6 --set ckpt.dir="$tmp/$tag.da" --set train.metrics="$tmp/$tag.a.jsonl" ||
    fail "$tag: uninterrupted run: $(tail -5 "$tmp/$tag.a.log")"
  train 2 "$tmp/$tag.b1.log" "${DP[@]}" "$@" --set train.steps=3 --set ckpt.dir="$tmp/$tag.db" --set train.metrics="$tmp/$tag.b.jsonl" ||
    fail "$tag: first half: $(tail -5 "$tmp/$tag.b1.log")"
  train 2 "$tmp/$tag.b2.log" "${DP[@]}" "$@" --set train.steps=6 --set ckpt.dir="$tmp/$tag.db" --set train.metrics="$tmp/$tag.b.jsonl" ||
    fail "$tag: resumed half: $(tail -5 "$tmp/$tag.b2.log")"
  grep -q "resumed from $tmp/$tag.db/step_00000003.h5" "$tmp/$tag.b2.log" || fail "$tag: did not resume from step 3"
  check_same_run "$tag" "$tmp/$tag.da" "$tmp/$tag.db" 6
}
two_ranks dp2                                            # data parallel
two_ranks tp2 --set parallel.tp=2                        # tensor parallel (btp)
two_ranks pp2 --set parallel.pp=2                        # pipeline (1F1B over the 2 micro-batches)
two_ranks zero2 --set parallel.zero=1                    # ZeRO-1: moment chunks sent to the band writers at each save, back at the load

# ---- retention and the latest pointer ------------------------------------------
train 0 "$tmp/ret.log" --set train.steps=10 --set ckpt.every=2 --set ckpt.keep_last=2 --set ckpt.keep_every=4 \
  --set ckpt.dir="$tmp/ret" || fail "retention run: $(tail -5 "$tmp/ret.log")"
got=$(cd "$tmp/ret" && ls step_*.h5* | tr '\n' ' ')
[ "$got" = "step_00000004.h5 step_00000008.h5 step_00000010.h5 " ] ||
  fail "retention keep_last=2 keep_every=4 of 2,4,6,8,10 left: $got (expected 4 8 10)"
[ "$(cat "$tmp/ret/latest")" = step_00000010.h5 ] || fail "latest = $(cat "$tmp/ret/latest")"
n=$(grep -c '"committed":true' "$tmp/ret/checkpoints.jsonl")
[ "$n" = 5 ] || fail "checkpoints.jsonl records $n commits, expected 5"
# Each record splits write_s into its phases (encode_write, fsync, verify, commit).
"$PY" - "$tmp/ret/checkpoints.jsonl" <<'PYEOF' || fail "checkpoints.jsonl: phases_s missing or not adding up to write_s"
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    ph = r["phases_s"]
    assert set(ph) == {"encode_write", "fsync", "verify", "commit"}, ph
    assert all(v >= 0 for v in ph.values()), ph
    assert abs(sum(ph.values()) - r["write_s"]) <= 1e-3 + 1e-3 * r["write_s"], (ph, r["write_s"])
PYEOF
echo "ok: retention kept steps 4 8 10, latest -> step_00000010.h5, 5 commits logged"
echo "PASS: ckpt_resume"
