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
CLEANUP="unmount_scratch '$mnt'"
d=$mnt/ck
# tiny: ~1.2 MiB per checkpoint. The first reservation is the raw size
# (~2.1 MiB), later ones the previous file's size + 10% (~1.6 MiB), so on
# 3000k two checkpoints fit and then the disk is full.
rc=0
train 2 "$tmp/t1.log" --set ckpt.dir="$d" --set train.steps=8 --set ckpt.every=2 --set ckpt.keep_last=5 \
  --set train.metrics="$tmp/m1.jsonl" || rc=$?
grep -q "boost-train: warning: ckpt.dir $d has room for [0-9.]* MiB of checkpoints, but ckpt.keep_last=5 checkpoints" "$tmp/t1.log" ||
  fail "no warning at start that the disk cannot hold keep_last + 1 checkpoints"
# Training goes on through failed checkpoints, but a run whose final state
# did not commit must not say success: exit 74, not 0.
[ "$rc" = 74 ] || fail "expected exit 74 (final state not committed), got $rc: $(tail -5 "$tmp/t1.log")"
grep -q "finished at step 8, but its final state was NOT committed" "$tmp/t1.log" ||
  fail "the unsaved end is not reported: $(tail -3 "$tmp/t1.log")"
[ "$(losses "$tmp/m1.jsonl" | wc -l)" = 8 ] || fail "metrics do not hold 8 steps"
got=$(cd "$d" && ls)
[ "$got" = "$(printf 'checkpoints.jsonl\nlatest\nrun.id\nstep_00000002.h5\nstep_00000004.h5')" ] || fail "checkpoint directory holds: $got"
for s in 6 8; do
  grep -q "checkpoint of step $s FAILED, nothing committed (training continues; step 4 remains the latest)" "$tmp/t1.log" ||
    fail "step $s: failure not reported: $(grep -i failed "$tmp/t1.log" | head -3)"
done
grep -q "step 6 FAILED: rank 0: cannot reserve [0-9.]* MiB for step_00000006.h5.tmp: No space left on device" "$tmp/t1.log" ||
  fail "the reason (ENOSPC) is not in the log: $(grep -m1 'FAILED' "$tmp/t1.log")"
[ "$(grep -c '"committed":false' "$d/checkpoints.jsonl")" = 2 ] || fail "checkpoints.jsonl does not record 2 failures"
[ "$(cat "$d/latest")" = step_00000004.h5 ] || fail "latest = $(cat "$d/latest")"
md5=$(md5sum <"$d/step_00000004.h5")
"$INSPECT" --verify "$d/step_00000004.h5" >"$tmp/v.txt" || fail "step 4 does not verify after the failures: $(tail -3 "$tmp/v.txt")"
echo "ok: warned at start; steps 2 and 4 committed, 6 and 8 failed with ENOSPC, training reached step 8 (exit 74), step 4 intact"

# The committed checkpoint still resumes (and the next attempt fails cleanly again).
rc=0
train 2 "$tmp/t2.log" --set ckpt.dir="$d" --set train.steps=5 || rc=$?
[ "$rc" = 74 ] || fail "resume from the full disk: expected exit 74 (step 5 cannot commit), got $rc: $(tail -5 "$tmp/t2.log")"
grep -q "checkpoints: resumed from $d/step_00000004.h5 (step 4" "$tmp/t2.log" || fail "did not resume from step 4"
grep -q "checkpoint of step 5 FAILED" "$tmp/t2.log" || fail "step 5 was not attempted (and refused)"
[ "$(md5sum <"$d/step_00000004.h5")" = "$md5" ] || fail "step 4 changed"
[ -z "$(cd "$d" && ls | grep -E '\.tmp$' || true)" ] || fail "a temporary was left: $(ls "$d")"
echo "ok: step 4 resumes, step 5 is tried again and refused, no temporaries"

# A disk that holds two checkpoints keeps working with keep_last=1: each new
# checkpoint reserves about its real size next to the previous one, which
# retention removes after the commit. (A reservation of the raw size made
# every checkpoint after the first fail here.)
k1=$mnt/k1
rm -rf "$d" # room for the next case
train 2 "$tmp/k1.log" --set ckpt.dir="$k1" --set train.steps=8 --set ckpt.every=2 --set ckpt.keep_last=1 ||
  fail "keep_last=1 on a disk for two checkpoints: exit $?: $(grep -m2 FAILED "$tmp/k1.log")"
[ "$(grep -c '"committed":true' "$k1/checkpoints.jsonl")" = 4 ] || fail "keep_last=1: not every checkpoint committed"
[ "$(cd "$k1" && ls step_*)" = step_00000008.h5 ] || fail "keep_last=1 left: $(ls "$k1")"
echo "ok: with keep_last=1 a disk for two checkpoints takes every checkpoint (4 of 4 committed)"
rm -rf "$k1"


# A failure inside the collective write itself (no reservation, as on a file
# system without fallocate: MPI-IO hits ENOSPC mid-write on one rank) can
# leave the other rank waiting in HDF5 for ever. The watchdog
# (ckpt.timeout; 20 s: a healthy write on a loaded machine stays well
# inside it) must end the job with one line and a non-zero status
# instead of hanging; the committed checkpoint stays intact and the next
# start cleans up and resumes from it. The collective writer is forced
# (BOOST_CKPT_DIRECT=0; every layout writes directly otherwise): the direct
# writer's own full disk is in ckpt_direct.sh and ckpt_enospc_layouts.sh.
unmount_scratch "$mnt"
mount -t tmpfs -o size=2500k tmpfs "$mnt" || fail "remount"
w=$mnt/wd
t0=$(date +%s)
rc=0
BOOST_CKPT_DIRECT=0 BOOST_CKPT_TEST_NO_RESERVE=1 timeout 120 $MPIRUN -n 2 "$TRAIN" --set data.train="$tmp/f.tok" "${COMMON[@]}" \
  --set ckpt.dir="$w" --set train.steps=8 --set ckpt.every=2 --set ckpt.keep_last=5 --set ckpt.timeout=20 \
  >"$tmp/wd.log" 2>&1 || rc=$?
t1=$(date +%s)
[ "$rc" != 124 ] || fail "watchdog: the job hung until the test's own timeout: $(tail -3 "$tmp/wd.log")"
[ "$rc" != 0 ] || fail "watchdog: a job whose checkpoint write failed inside a collective exited 0"
grep -q "checkpoint watchdog on rank [0-9]: the checkpoint job of step [0-9]* has run [0-9]* s, longer than ckpt.timeout=20 s" "$tmp/wd.log" ||
  fail "watchdog: no watchdog line (exit $rc): $(tail -4 "$tmp/wd.log")"
[ -f "$w/latest" ] || fail "watchdog: no checkpoint committed before the abort (a write slower than ckpt.timeout under load?): $(grep -m2 checkpoint "$tmp/wd.log")"
good=$(cat "$w/latest")
"$INSPECT" --verify "$w/$good" >/dev/null || fail "watchdog: $good does not verify after the abort"
echo "ok: a hung collective write is aborted by the watchdog after $((t1 - t0)) s (exit $rc); $good intact"
echo "PASS: ckpt_enospc"
