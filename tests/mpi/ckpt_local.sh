#!/usr/bin/env bash
# The local level (ckpt.local_every, ckpt.local_dir): kill -9 of every rank
# of a 2-rank run mid-training (data-parallel, then tensor-parallel), the
# relaunch resumes from node memory, loses at most one step and
# ends bit for bit where an uninterrupted run ends; a flipped byte in a
# local part is named in one line and the file is used instead, still
# exact; another layout goes through the file; bad settings and a local
# directory without room are refused at start with one line.
source "$(dirname "$0")/ckpt_common.bash"
source "$(dirname "$0")/local_common.bash"
make_data
STEPS=10
LOCAL=(--set ckpt.local_every=1 --set train.steps=$STEPS --set train.lr=3e-3)

# one_layout TAG LAYOUT...: reference, kill -9, relaunch, compare.
one_layout() {
  local tag=$1
  shift
  local ref=$tmp/$tag.ref ck=$tmp/$tag.ck shm=$tmp/$tag.shm
  train 2 "$tmp/$tag.ref.log" "$@" "${LOCAL[@]}" --set ckpt.every=4 --set ckpt.dir="$ref" \
    --set ckpt.local_dir="$tmp/$tag.refshm" --set train.metrics="$ref.jsonl" ||
    fail "$tag: reference run: $(tail -5 "$tmp/$tag.ref.log")"
  grep -q "checkpoint: local level every 1 step in $tmp/$tag.refshm" "$tmp/$tag.ref.log" ||
    fail "$tag: the start does not report the local level: $(grep checkpoint "$tmp/$tag.ref.log" | head -3)"

  local logged
  logged=$(run_and_kill 2 "$tag" 6 "$@" --set ckpt.dir="$ck" --set ckpt.local_dir="$shm" --set train.metrics="$ck.jsonl")
  echo "ok: $tag: killed after step $logged: $(ls "$shm"/rank_00000 | tr '\n' ' ')"

  train 2 "$tmp/$tag.2.log" "$@" "${LOCAL[@]}" --set ckpt.every=4 --set ckpt.dir="$ck" --set ckpt.local_dir="$shm" \
    --set train.metrics="$ck.jsonl" || fail "$tag: relaunch: $(tail -5 "$tmp/$tag.2.log")"
  local got
  got=$(resumed_local_step "$tmp/$tag.2.log")
  [ -n "$got" ] || fail "$tag: did not resume from the local level: $(grep checkpoints: "$tmp/$tag.2.log")"
  # the save of a step is committed while the next step trains: at most one step lost
  [ "$got" -ge $((logged - 1)) ] || fail "$tag: resumed from local step $got, but step $logged had been logged"
  same_losses "$ref.jsonl" "$ck.jsonl" || fail "$tag: losses differ from the uninterrupted run"
  [ "$(checksums "$ref/step_$(printf %08d $STEPS).h5")" = "$(checksums "$ck/step_$(printf %08d $STEPS).h5")" ] ||
    fail "$tag: the final checkpoint differs from the uninterrupted run's"
  [ ! -e "$shm" ] || fail "$tag: the finished run left its local level: $(ls -R "$shm")"
  "$INSPECT" summary "$ck/step_$(printf %08d $STEPS).h5" >"$tmp/$tag.summary" || fail "$tag: boost-inspect summary"
  grep -q "steps 0-.*, a fresh start$" "$tmp/$tag.summary" && grep -q "steps $got-$STEPS .*, from the local level$" "$tmp/$tag.summary" ||
    fail "$tag: boost-inspect summary does not say which level each start came from: $(grep -A3 starts: "$tmp/$tag.summary")"
  echo "ok: $tag: resumed from local step $got (last logged $logged), bit-identical to the uninterrupted run"
}

one_layout dp
one_layout tp --set parallel.tp=2

# ckpt.local_every = auto: the local level's own Young/Daly interval (its
# cost injected, M from ckpt.mtbf, so the printed interval is fixed at about
# two slowed steps); every local save falls on the first step end at least
# that interval after the previous one; kill -9 and the relaunch still
# resumes from the local level and ends exact.
LOCAL=(--set ckpt.local_every=auto --set ckpt.mtbf=8s --set train.steps=$STEPS --set train.lr=3e-3)
export BOOST_CKPT_TEST_DELTA_S=0.05
ck=$tmp/auto.ck
logged=$(run_and_kill 2 auto 6 --set ckpt.dir="$ck" --set ckpt.local_dir="$tmp/auto.shm" --set train.metrics="$ck.jsonl")
[ "$(grep -c "^local checkpoint interval: " "$tmp/auto.1.log")" = 1 ] ||
  fail "auto: the local interval is not printed once: $(grep "interval" "$tmp/auto.1.log")"
grep -q "local level at the interval of ckpt.local_every=auto in $tmp/auto.shm" "$tmp/auto.1.log" ||
  fail "auto: the start does not report the local level: $(grep checkpoint "$tmp/auto.1.log" | head -3)"
tau=$(sed -n 's/^local checkpoint interval: \([0-9.]*\) s (Daly.*local checkpoint cost of 0.050 s (injected.*M = 8 s (ckpt.mtbf)$/\1/p' \
  "$tmp/auto.1.log")
[ -n "$tau" ] || fail "auto: $(grep "^local checkpoint interval" "$tmp/auto.1.log")"
"$PY" - "$ck.jsonl" "$tau" <<'PYEOF' || fail "auto: the local saves do not follow the interval printed"
import json, sys
rows = {}
for l in open(sys.argv[1]):
    try: o = json.loads(l)
    except ValueError: continue
    rows[o["step"]] = o
tau = float(sys.argv[2])
saves = [s for s in sorted(rows) if "local step" in rows[s]["ckpt"]]
if len(saves) < 2:  # about every other step: several by step 6
    sys.exit("local saves after steps %s of %d (interval %.3f s)" % (saves, len(rows), tau))
for a, b in zip(saves, saves[1:]):
    gap, step = rows[b]["time"] - rows[a]["time"], rows[b]["time"] - rows[b - 1]["time"]
    # due once tau passed, judged at each step's end: not before, and at the first end after
    if not (tau - 0.05 <= gap < tau + step + 0.05):
        sys.exit("local saves after steps %d and %d are %.3f s apart, interval %.3f s, step %.3f s" % (a, b, gap, tau, step))
print("ok: auto: local saves after steps %s, interval %.3f s" % (saves, tau))
PYEOF
unset BOOST_CKPT_TEST_DELTA_S
train 2 "$tmp/auto.2.log" "${LOCAL[@]}" --set ckpt.every=4 --set ckpt.dir="$ck" --set ckpt.local_dir="$tmp/auto.shm" \
  --set train.metrics="$ck.jsonl" || fail "auto: relaunch: $(tail -5 "$tmp/auto.2.log")"
got=$(resumed_local_step "$tmp/auto.2.log")
[ -n "$got" ] || fail "auto: did not resume from the local level: $(grep checkpoints: "$tmp/auto.2.log")"
same_losses "$tmp/dp.ref.jsonl" "$ck.jsonl" || fail "auto: losses differ from the uninterrupted run"
[ "$(checksums "$tmp/dp.ref/step_$(printf %08d $STEPS).h5")" = "$(checksums "$ck/step_$(printf %08d $STEPS).h5")" ] ||
  fail "auto: the final checkpoint differs from the uninterrupted run's"
echo "ok: auto: killed after step $logged, resumed from local step $got, bit-identical to the uninterrupted run"
LOCAL=(--set ckpt.local_every=1 --set train.steps=$STEPS --set train.lr=3e-3)

# A flipped byte in a local part: named in one line, the file used (an
# older step), and the run still ends exact.
ck=$tmp/dp.ck shm=$tmp/dp.shm
logged=$(KILL_AFTER_FILE=$ck.flip:4 run_and_kill 2 flip 5 --set ckpt.dir="$ck.flip" --set ckpt.local_dir="$shm.flip" --set train.metrics="$ck.flip.jsonl")
newest=$(ls "$shm.flip"/rank_00001 | grep -v tmp | tail -1)
part=$shm.flip/rank_00001/$newest/adam_v.bin
[ -f "$part" ] || fail "flip: no $part: $(ls -R "$shm.flip")"
"$PY" -c 'import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[len(b) // 2] ^= 0x10; open(p, "wb").write(b)' "$part"
train 2 "$tmp/flip.1.log" "${LOCAL[@]}" --set ckpt.every=4 --set ckpt.dir="$ck.flip" --set ckpt.local_dir="$shm.flip" \
  --set train.metrics="$ck.flip.jsonl" || fail "flip: relaunch: $(tail -5 "$tmp/flip.1.log")"
line=$(grep "checkpoints: " "$tmp/flip.1.log")
echo "$line" | grep -q "resumed from $ck.flip/step_00000004.h5" || fail "flip: not resumed from the file: $line"
echo "$line" | grep -q "local step $((10#${newest#step_})) is damaged: rank 1: $part: checksum mismatch" ||
  fail "flip: the damaged part is not named: $line"
same_losses "$tmp/dp.ref.jsonl" "$ck.flip.jsonl" || fail "flip: losses differ from the uninterrupted run"
[ "$(checksums "$tmp/dp.ref/step_$(printf %08d $STEPS).h5")" = "$(checksums "$ck.flip/step_$(printf %08d $STEPS).h5")" ] ||
  fail "flip: the final checkpoint differs"
"$INSPECT" summary --json "$ck.flip/step_$(printf %08d $STEPS).h5" | "$PY" -c 'import json,sys
levels = [r.get("level") for r in json.load(sys.stdin)["run_starts"]]
sys.exit(0 if levels == ["fresh", "file"] else "levels %s" % levels)' || fail "flip: the summary's levels"
echo "ok: flipped byte named ($part), resumed from the file, bit-identical"

# Another layout: the local level is not used, the file is, and it says so;
# the run still ends where the uninterrupted one does. The kill waits for
# step 4's file (a loaded machine can be a step late committing it).
KILL_AFTER_FILE=$ck.lay:4 run_and_kill 2 lay 5 --set ckpt.dir="$ck.lay" --set ckpt.local_dir="$shm.lay" --set train.metrics="$ck.lay.jsonl" >/dev/null
train 2 "$tmp/lay.2.log" "${LOCAL[@]}" --set parallel.tp=2 --set ckpt.every=4 --set ckpt.dir="$ck.lay" \
  --set ckpt.local_dir="$shm.lay" --set train.metrics="$tmp/lay.2.jsonl" || fail "layout: relaunch: $(tail -5 "$tmp/lay.2.log")"
# another layout sums in another order: the losses within fp32 rounding of the uninterrupted run's
continues_run "$tmp/dp.ref.jsonl" "$tmp/lay.2.jsonl" 5 $STEPS || fail "layout: the run does not continue the uninterrupted one"
grep -q "checkpoints: resumed from $ck.lay/step_00000004.h5 (step 4.*the local level in $shm.lay is another layout's: from the file" \
  "$tmp/lay.2.log" || fail "layout: $(grep checkpoints: "$tmp/lay.2.log")"
echo "ok: another layout went through the file and continued the uninterrupted run"

# A local level of another model (no checkpoint file yet): refused like a
# file of another model would be, nothing trained, nothing removed.
run_and_kill 2 model 3 --set ckpt.every=100 --set ckpt.dir="$ck.model" --set ckpt.local_dir="$shm.model" \
  --set train.metrics="$ck.model.jsonl" >/dev/null
held=$(ls "$shm.model/rank_00000")
if train 2 "$tmp/model.2.log" "${LOCAL[@]}" --set model.norm_eps=1e-6 --set ckpt.dir="$ck.model" \
  --set ckpt.local_dir="$shm.model"; then fail "model: a local level of another model was resumed"; fi
grep -q "boost-train: the local level $shm.model/rank_00000/step_[0-9]* holds a different model: model.norm_eps" \
  "$tmp/model.2.log" || fail "model: $(tail -2 "$tmp/model.2.log")"
[ "$(ls "$shm.model/rank_00000")" = "$held" ] || fail "model: the local level changed: $(ls "$shm.model/rank_00000")"
echo "ok: a local level of another model refused in one line"

# Bad settings: one line each, non-zero exit, nothing trained.
bad() {
  local want=$1
  shift
  if train 0 "$tmp/bad.log" --set train.steps=2 "$@"; then fail "accepted: $*"; fi
  # the error is one line, the last one (a start prints its config first)
  tail -1 "$tmp/bad.log" | grep -q -- "$want" || fail "for $*: $(tail -3 "$tmp/bad.log")"
  [ "$(grep -c "$want" "$tmp/bad.log")" = 1 ] || fail "said more than once for $*: $(cat "$tmp/bad.log")"
}
bad "ckpt.local_every" --set ckpt.dir="$tmp/b" --set ckpt.local_every=-1
bad "ckpt.local_every" --set ckpt.dir="$tmp/b" --set ckpt.local_every=often
bad "ckpt.local_every=1 needs ckpt.dir" --set ckpt.local_every=1
bad "ckpt.local_dir 'shm/x' must be an absolute path" --set ckpt.dir="$tmp/b" --set ckpt.local_every=1 --set ckpt.local_dir=shm/x
mkdir -p "$tmp/small"
mount -t tmpfs -o size=64k tmpfs "$tmp/small" || { echo "SKIP part: cannot mount a tmpfs"; echo "PASS: ckpt_local"; exit 0; }
CLEANUP="unmount_scratch $tmp/small"
bad "ckpt.local_dir $tmp/small has .* free .* but the local level needs .* there (2 copies of" \
  --set ckpt.dir="$tmp/b" --set ckpt.local_every=1 --set ckpt.local_dir="$tmp/small"
echo "ok: bad settings and a local directory without room refused with one line"
echo "PASS: ckpt_local"
