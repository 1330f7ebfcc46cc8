#!/usr/bin/env bash
# A full disk, for real: checkpoints into a size-limited tmpfs (mounted here;
# needs root, otherwise SKIP). The first checkpoint fits, later ones do not:
# training goes on to the end, nothing more is committed, the reason (ENOSPC)
# is logged, no temporary is left, the committed checkpoint is untouched and
# still resumes; every later checkpoint is tried again. Two data-parallel
# ranks, so the failure is agreed collectively.
source "$(dirname "$0")/ckpt_common.bash"
make_data
if [ "$(id -u)" != 0 ]; then
  echo "SKIP: not root: cannot mount a size-limited tmpfs to fill a real file system (ENOSPC not tested)"
  exit 0
fi
mnt=$tmp/mnt
mkdir -p "$mnt"
if ! mount -t tmpfs -o size=3000k tmpfs "$mnt" 2>"$tmp/mount.err"; then
  echo "SKIP: mount -t tmpfs failed ($(cat "$tmp/mount.err")): ENOSPC not tested"
  exit 0
fi
CLEANUP="umount '$mnt'"
d=$mnt/ck
# tiny: ~1.2 MiB per checkpoint, ~2.1 MiB reserved while writing (raw size)
rc=0
train 2 "$tmp/t1.log" --set ckpt.dir="$d" --set train.steps=8 --set ckpt.every=2 --set ckpt.keep_last=5 \
  --set train.metrics="$tmp/m1.jsonl" || rc=$?
# Training goes on through failed checkpoints, but a run whose final state
# did not commit must not say success: exit 74, not 0.
[ "$rc" = 74 ] || fail "expected exit 74 (final state not committed), got $rc: $(tail -5 "$tmp/t1.log")"
grep -q "finished at step 8, but its final state was NOT committed" "$tmp/t1.log" ||
  fail "the unsaved end is not reported: $(tail -3 "$tmp/t1.log")"
[ "$(losses "$tmp/m1.jsonl" | wc -l)" = 8 ] || fail "metrics do not hold 8 steps"
got=$(cd "$d" && ls)
[ "$got" = "$(printf 'checkpoints.jsonl\nlatest\nstep_00000002.h5')" ] || fail "checkpoint directory holds: $got"
for s in 4 6 8; do
  grep -q "checkpoint of step $s FAILED, nothing committed (training continues; step 2 remains the latest)" "$tmp/t1.log" ||
    fail "step $s: failure not reported: $(grep -i failed "$tmp/t1.log" | head -3)"
done
grep -q "step 4 FAILED: rank 0: cannot reserve [0-9.]* MiB for step_00000004.h5.tmp: No space left on device" "$tmp/t1.log" ||
  fail "the reason (ENOSPC) is not in the log: $(grep -m1 'FAILED' "$tmp/t1.log")"
[ "$(grep -c '"committed":false' "$d/checkpoints.jsonl")" = 3 ] || fail "checkpoints.jsonl does not record 3 failures"
[ "$(cat "$d/latest")" = step_00000002.h5 ] || fail "latest = $(cat "$d/latest")"
md5=$(md5sum <"$d/step_00000002.h5")
"$INSPECT" --verify "$d/step_00000002.h5" >"$tmp/v.txt" || fail "step 2 does not verify after the failures: $(tail -3 "$tmp/v.txt")"
echo "ok: steps 4, 6, 8 failed with ENOSPC, training reached step 8, step 2 intact and verified"

# The committed checkpoint still resumes (and the next attempt fails cleanly again).
rc=0
train 2 "$tmp/t2.log" --set ckpt.dir="$d" --set train.steps=3 || rc=$?
[ "$rc" = 74 ] || fail "resume from the full disk: expected exit 74 (step 3 cannot commit), got $rc: $(tail -5 "$tmp/t2.log")"
grep -q "checkpoints: resumed from $d/step_00000002.h5 (step 2" "$tmp/t2.log" || fail "did not resume from step 2"
grep -q "checkpoint of step 3 FAILED" "$tmp/t2.log" || fail "step 3 was not attempted (and refused)"
[ "$(md5sum <"$d/step_00000002.h5")" = "$md5" ] || fail "step 2 changed"
[ -z "$(cd "$d" && ls | grep -E '\.tmp$' || true)" ] || fail "a temporary was left: $(ls "$d")"
echo "ok: step 2 resumes, step 3 is tried again and refused, no temporaries"
# A failure inside the collective write itself (no reservation, as on a file
# system without fallocate: MPI-IO hits ENOSPC mid-write on one rank) can
# leave the other rank waiting in HDF5 for ever. The watchdog
# (ckpt.timeout) must end the job with one line and a non-zero status
# instead of hanging; the committed checkpoint stays intact and the next
# start cleans up and resumes from it.
umount "$mnt"
mount -t tmpfs -o size=2500k tmpfs "$mnt" || fail "remount"
w=$mnt/wd
t0=$(date +%s)
rc=0
BOOST_CKPT_TEST_NO_RESERVE=1 timeout 120 $MPIRUN -n 2 "$TRAIN" --set data.train="$tmp/f.tok" "${COMMON[@]}" \
  --set ckpt.dir="$w" --set train.steps=8 --set ckpt.every=2 --set ckpt.keep_last=5 --set ckpt.timeout=8 \
  >"$tmp/wd.log" 2>&1 || rc=$?
t1=$(date +%s)
[ "$rc" != 124 ] || fail "watchdog: the job hung until the test's own timeout: $(tail -3 "$tmp/wd.log")"
[ "$rc" != 0 ] || fail "watchdog: a job whose checkpoint write failed inside a collective exited 0"
grep -q "checkpoint watchdog on rank [0-9]: the checkpoint job of step [0-9]* has run [0-9]* s, longer than ckpt.timeout=8 s" "$tmp/wd.log" ||
  fail "watchdog: no watchdog line (exit $rc): $(tail -4 "$tmp/wd.log")"
good=$(cat "$w/latest")
"$INSPECT" --verify "$w/$good" >/dev/null || fail "watchdog: $good does not verify after the abort"
echo "ok: a hung collective write is aborted by the watchdog after $((t1 - t0)) s (exit $rc); $good intact"
echo "PASS: ckpt_enospc"
