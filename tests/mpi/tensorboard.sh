#!/usr/bin/env bash
# train.tensorboard (docs/TENSORBOARD.md), read back with tensorboard's own
# reader (tensorboard_check.py; the venv .cache/pyenv, SKIP without it):
# every scalar of a run equals what its metrics JSONL, checkpoints.jsonl and
# step lines say; a run killed (kill -9) and resumed from an older
# checkpoint shows every step once, the resumed run's values where it
# trained a step again, each file's steps increasing; the same after the
# guard's rollbacks, every flagged step kept; an unwritable folder refused at start with one line
# (a file in its place, a folder another user cannot write); a disk that
# fills during the run (a size-limited tmpfs, root only) said in one line,
# the training going on to the end. Two ranks resumed from the local level:
# the restart's level, rank 0 alone writing.
source "$(dirname "$0")/ckpt_common.bash"
source "$(dirname "$0")/local_common.bash"
TBPY=${BOOST_SOURCE_DIR:?}/.cache/pyenv/bin/python
if ! "$TBPY" -c 'import tensorboard.backend.event_processing.event_accumulator' 2>/dev/null; then
  echo "SKIP: no tensorboard in $TBPY (scripts/setup-pyenv.sh makes the venv): the event files cannot be read back"
  exit 77
fi
check() { "$TBPY" -W ignore "$(dirname "$0")/tensorboard_check.py" "$@" 2>&1; }
make_data

# ---- every scalar as the run logged it ------------------------------------
train 0 "$tmp/a.log" --set train.steps=12 --set ckpt.dir="$tmp/a.ck" --set ckpt.every=4 --set train.val_batches=2 \
  --set train.val_every=5 --set train.metrics="$tmp/a.jsonl" --set train.tensorboard="$tmp/a.tb/run" ||
  fail "run a: $(tail -3 "$tmp/a.log")"
grep -q "^peak for MFU: [0-9.]* TFLOP/s over 1 rank (each rank's backend GEMM measured at start)" "$tmp/a.log" ||
  fail "no peak line: $(grep -i peak "$tmp/a.log")"
check same "$tmp/a.tb/run" "$tmp/a.jsonl" "$tmp/a.ck/checkpoints.jsonl" "$tmp/a.log" || fail "run a's events"

# ---- killed and resumed from an older checkpoint ----------------------------
# Steps slowed to 300 ms: killed once step 12 is logged and the checkpoint
# of step 10 committed (it is written while the next steps train), which
# the resumed run goes on from, training the steps after it again.
BOOST_TRAIN_TEST_STEP_DELAY_MS=300 "$TRAIN" --set data.train="$tmp/f.tok" "${COMMON[@]}" --set train.steps=20 \
  --set ckpt.dir="$tmp/b.ck" --set ckpt.every=5 --set train.metrics="$tmp/b.jsonl" --set train.tensorboard="$tmp/b.tb" \
  >"$tmp/b1.log" 2>&1 &
pid=$!
CLEANUP="kill -9 $pid 2>/dev/null"
for _ in $(seq 1 1200); do
  [ "$(cat "$tmp/b.jsonl" 2>/dev/null | wc -l)" -ge 12 ] && [ "$(cat "$tmp/b.ck/latest" 2>/dev/null)" = step_00000010.h5 ] && break
  sleep 0.1
done
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
CLEANUP=""
n=$(wc -l <"$tmp/b.jsonl")
[ "$n" -ge 12 ] && [ "$n" -lt 20 ] && [ "$(cat "$tmp/b.ck/latest")" = step_00000010.h5 ] ||
  fail "the killed run logged $n steps with $(cat "$tmp/b.ck/latest") the latest; expected 12-19 and step 10"
train 0 "$tmp/b2.log" --set train.steps=20 --set ckpt.dir="$tmp/b.ck" --set ckpt.every=5 \
  --set train.metrics="$tmp/b.jsonl" --set train.tensorboard="$tmp/b.tb" || fail "the resumed run: $(tail -3 "$tmp/b2.log")"
grep -q "^checkpoints: resumed .*step_00000010.h5" "$tmp/b2.log" || fail "not resumed from step 10: $(grep ^checkpoints "$tmp/b2.log")"
check resumed "$tmp/b.tb" "$tmp/b.jsonl" 20 || fail "the resumed run's events"

# ---- two ranks killed and resumed from the local level ----------------------
LOCAL=(--set ckpt.local_every=1 --set train.steps=10)
logged=$(run_and_kill 2 e 5 --set ckpt.dir="$tmp/e.ck" --set ckpt.local_dir="$tmp/e.shm" --set train.metrics="$tmp/e.jsonl" \
  --set train.tensorboard="$tmp/e.tb")
train 2 "$tmp/e.2.log" "${LOCAL[@]}" --set ckpt.every=4 --set ckpt.dir="$tmp/e.ck" --set ckpt.local_dir="$tmp/e.shm" \
  --set train.metrics="$tmp/e.jsonl" --set train.tensorboard="$tmp/e.tb" || fail "run e's relaunch: $(tail -3 "$tmp/e.2.log")"
got=$(resumed_local_step "$tmp/e.2.log")
[ -n "$got" ] || fail "run e did not resume from the local level: $(grep checkpoints: "$tmp/e.2.log")"
check local "$tmp/e.tb" "$tmp/e.jsonl" 10 "$got" || fail "run e's events (killed after step $logged)"

# ---- the guard's rollbacks (tests/mpi/guard_exact.sh's faults, twice) ------
# Batches 7, 9, 10 flagged: back to step 4, batches 4-10 skipped; then
# batches 13, 15, 16 flagged on the way: back to step 4 again.
BOOST_TRAIN_TEST_FAULT=loss-spike@7,loss-spike@9,loss-spike@10,loss-spike@13,loss-spike@15,loss-spike@16 \
  train 0 "$tmp/c.log" --set train.steps=16 \
  --set train.min_lr_ratio=1 --set ckpt.every=4 --set train.guard=rollback --set train.guard_cluster=3 \
  --set train.guard_cluster_window=6 --set train.guard_skip_batches=3 --set ckpt.dir="$tmp/c.ck" \
  --set train.metrics="$tmp/c.jsonl" --set train.tensorboard="$tmp/c.tb" || fail "run c: $(tail -3 "$tmp/c.log")"
grep -q "^guard: rollback 1 of 3 to step 4" "$tmp/c.log" && grep -q "^guard: rollback 2 of 3 to step 4" "$tmp/c.log" ||
  fail "run c did not roll back to step 4 twice: $(grep ^guard: "$tmp/c.log")"
check rollback "$tmp/c.tb" "$tmp/c.jsonl" 16 1,5,5 || fail "the rolled-back run's events"
# Resumed from its checkpoint of step 8, whose ledger holds the flagged
# step 9 of the first branch: the new file (from step 9) writes it again.
train 0 "$tmp/c2.log" --set train.steps=16 --set train.min_lr_ratio=1 --set ckpt.every=4 --set train.guard=rollback \
  --set ckpt.dir="$tmp/c.ck" --set ckpt.resume="$tmp/c.ck/step_00000008.h5" --set train.metrics="$tmp/c.jsonl" \
  --set train.tensorboard="$tmp/c.tb" || fail "run c resumed from step 8: $(tail -3 "$tmp/c2.log")"
check rollback "$tmp/c.tb" "$tmp/c.jsonl" 16 1,5,5,9 || fail "the events after a resume past a rollback's flagged steps"

# ---- refused at start: one line, non-zero, nothing trained, no metrics --------
refused() { # NEEDLE RUNNER... boost-train args follow
  local needle=$1 rc=0
  shift
  "$@" --set data.train="$tmp/f.tok" "${COMMON[@]}" --set train.steps=2 --set train.metrics="$tmp/r.jsonl" \
    >"$tmp/r.out" 2>"$tmp/r.err" || rc=$?
  [ "$rc" -ne 0 ] || fail "an unwritable folder was not refused: $(tail -2 "$tmp/r.out")"
  [ "$(wc -l <"$tmp/r.err")" = 1 ] || fail "$(wc -l <"$tmp/r.err") stderr lines, not one: $(cat "$tmp/r.err")"
  grep -qF -- "$needle" "$tmp/r.err" || fail "the line '$(cat "$tmp/r.err")' does not say '$needle'"
  ! grep -q '^step ' "$tmp/r.out" || fail "it trained before refusing"
  [ ! -e "$tmp/r.jsonl" ] || fail "a refused start left a metrics file"
}
touch "$tmp/afile"
refused "train.tensorboard $tmp/afile is not a folder" "$TRAIN" --set train.tensorboard="$tmp/afile"
refused "cannot create train.tensorboard folder $tmp/afile/x" "$TRAIN" --set train.tensorboard="$tmp/afile/x"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  mkdir -p "$tmp/ro" && chmod 755 "$tmp/ro" && chmod 711 "$tmp" && chmod 644 "$tmp/f.tok"
  as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/nonexistent)
  refused "cannot write in train.tensorboard folder $tmp/ro: Permission denied" "${as_nobody[@]}" "$TRAIN" \
    --set train.tensorboard="$tmp/ro"
  ls "$tmp/ro" | grep -q . && fail "the refused run left files in $tmp/ro"
else
  echo "note: not root or no setpriv: the folder another user cannot write is not tested"
fi

# ---- a disk that fills during the run ---------------------------------------
mnt=$tmp/mnt
if [ "$(id -u)" = 0 ] && mkdir -p "$mnt" && mount -t tmpfs -o size=64k tmpfs "$mnt" 2>"$tmp/mount.err"; then
  CLEANUP="unmount_scratch '$mnt'"
  head -c $((60 * 1024)) /dev/zero >"$mnt/fill" 2>/dev/null || true # one 4 KiB page left
  rc=0
  train 0 "$tmp/d.log" --set train.steps=40 --set train.metrics="$tmp/d.jsonl" --set train.tensorboard="$mnt/tb" || rc=$?
  [ "$rc" = 0 ] || fail "a full disk under the events ended the run ($rc): $(tail -3 "$tmp/d.log")"
  [ "$(grep -c 'train.tensorboard: writing .* failed: No space left on device; no more TensorBoard events from this run (training goes on)' "$tmp/d.log")" = 1 ] ||
    fail "not one line for the full disk: $(grep -i tensorboard "$tmp/d.log")"
  grep -q '^step    40/40' "$tmp/d.log" && [ "$(wc -l <"$tmp/d.jsonl")" = 40 ] || fail "training did not go on to step 40"
  "$TBPY" -W ignore -c 'import sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
ea = EventAccumulator(sys.argv[1]); ea.Reload()
steps = [e.step for e in ea.Scalars("train/loss")]
assert steps == list(range(1, len(steps) + 1)) and 0 < len(steps) < 40, steps
print(f"ok: a full disk after step {len(steps)}: the events up to it read back, training went on to 40")' "$mnt/tb" ||
    fail "the events before the disk filled do not read back"
else
  echo "note: not root or no tmpfs mount ($(cat "$tmp/mount.err" 2>/dev/null)): the disk filling during a run is not tested"
fi
echo "ok: tensorboard"
