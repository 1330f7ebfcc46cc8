#!/usr/bin/env bash
# The remote level when rank 0 cannot link a committed file for its upload
# (ckpt_remote.c, hand_over), against SeaweedFS on 127.0.0.1: a directory
# planted in ckpt.dir under the name of step 4's upload link makes link()
# fail with EEXIST for that step only (the start's clean-up of stale links
# unlinks, and a directory survives that). 2 ranks, a checkpoint every 2
# steps. Rank 0 warns, and its upload thread tells rank 1's at once that
# step 4 is not uploaded: rank 1's thread, which had marked step 4 pending
# and entered that round, goes back to sleep instead of waiting (busy, in
# Open MPI's broadcast) until step 6's round. Checked: the warning; step 4
# not in the store, steps 2, 6 and 8 there, both ranks sending parts of
# step 6 and 8; the run ends with exit 0 in time with the final "upload
# finished before exit" line; and rank 1's upload thread uses no CPU
# between step 4's commit and step 6's (the old code spun there: 32 and 76
# ticks of 1.5 s in two runs). Then a relaunch whose last checkpoint (step
# 10) cannot be linked ends saying the remote level stays at step 8, not
# that the upload finished.
source "$(dirname "$0")/ckpt_common.bash"
source "$(dirname "$0")/remote_common.bash"
make_data
open_store s3://boost-link/run
R+=(--set ckpt.remote_keep=0)
mkdir -p "$tmp/a/.remote-upload-step_00000004.h5" # the name hand_over links step 4 to (ckpt_file_name)

# Slow steps: step 4's commit and step 6's are seconds apart, the window
# in which rank 1's upload thread is watched.
t0=$SECONDS
BOOST_TRAIN_TEST_STEP_DELAY_MS=1500 train_bg 2 "$tmp/a.log" "${R[@]}" --set parallel.dp=2 --set train.steps=8 \
  --set ckpt.every=2 --set ckpt.dir="$tmp/a"
job=$!
CLEANUP='pkill -9 -P $job 2>/dev/null; kill -9 $job 2>/dev/null; wait $job 2>/dev/null' # a failed check mid-run
until grep -q "cannot link .*step_00000004.h5 for its upload" "$tmp/a.log" &&
  grep -q "checkpoint: remote step 2 uploaded" "$tmp/a.log"; do
  kill -0 "$job" 2>/dev/null || fail "the run ended before step 4's link failed: $(grep -i remote "$tmp/a.log")"
  [ $((SECONDS - t0)) -lt 120 ] || fail "no link failure at step 4 in 120 s: $(tail -5 "$tmp/a.log")"
  sleep 0.05
done
# Rank 1's process (its environment names its world rank) and its upload thread's CPU ticks (utime + stime).
rank1=
for p in $(pgrep -P "$job" || true); do # the ranks are mpirun's children
  tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && rank1=$p
done
[ -n "$rank1" ] || fail "rank 1's process not found"
ticks() {
  local t n=0 s
  for t in /proc/"$rank1"/task/*; do
    [ "$(cat "$t/comm" 2>/dev/null)" = boost-upload ] || continue
    s=$(sed 's/^.*) //' "$t/stat") # the fields after the name: utime and stime are the 12th and 13th
    n=$((n + $(echo "$s" | cut -d' ' -f12) + $(echo "$s" | cut -d' ' -f13)))
  done
  echo "$n"
}
[ -n "$(grep -lx boost-upload /proc/"$rank1"/task/*/comm)" ] || fail "rank 1 has no thread named boost-upload"
# It runs below training, as the checkpoint writer does: nice 10 (the 17th field after the name).
up_task=$(dirname "$(grep -lx boost-upload /proc/"$rank1"/task/*/comm | head -1)")
up_nice=$(sed 's/^.*) //' "$up_task/stat" | cut -d' ' -f17)
[ "$up_nice" = 10 ] || fail "rank 1's upload thread runs at nice $up_nice, not 10"
sleep 0.3 # step 4's round (rank 0's word that it is not uploaded) is over
c1=$(ticks)
sleep 1.5
c2=$(ticks)
! grep -q "step 6 committed" "$tmp/a.log" ||
  fail "step 6's round began inside the window: the steps were not slow enough to watch rank 1's thread"
echo "rank 1's upload thread: $((c2 - c1)) CPU ticks in 1.5 s between step 4's round and step 6's"
[ $((c2 - c1)) -le 5 ] || fail "rank 1's upload thread used $((c2 - c1)) ticks waiting for a round that step 4 never had"
code=0
for _ in $(seq 1 1200); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
kill -0 "$job" 2>/dev/null && { kill -9 "$job"; fail "the run did not end within 120 s of step 4"; }
wait "$job" || code=$?
CLEANUP=
[ "$code" = 0 ] || fail "exit $code: $(tail -5 "$tmp/a.log")"
grep -q "remote: cannot link $tmp/a/step_00000004.h5 for its upload (File exists): step 4 is not uploaded" "$tmp/a.log" ||
  fail "no warning for step 4: $(grep -i remote "$tmp/a.log")"
for s in 6 8; do
  grep -q "checkpoint: remote step $s uploaded .* part.* sent by 2 ranks" "$tmp/a.log" ||
    fail "step $s was not sent by both ranks: $(grep -i remote "$tmp/a.log")"
done
grep -q "checkpoint: remote upload finished before exit (newest remote step 8)" "$tmp/a.log" ||
  fail "no final upload line: $(grep -i remote "$tmp/a.log")"
AWS_ENDPOINT_URL=$BOOST_S3_ENDPOINT "$INSPECT" summary s3://boost-link/run/step_000000000004 >/dev/null 2>"$tmp/err" &&
  fail "step 4 is in the store"
grep -q "step_000000000004/manifest.json: not found" "$tmp/err" || fail "step 4: $(cat "$tmp/err")"
for s in 2 6 8; do
  AWS_ENDPOINT_URL=$BOOST_S3_ENDPOINT "$INSPECT" summary "s3://boost-link/run/step_00000000000$s" >/dev/null 2>&1 ||
    fail "step $s is not in the store"
done
[ -d "$tmp/a/.remote-upload-step_00000004.h5" ] || fail "the planted directory is gone"
[ -z "$(ls -A "$tmp/a" | grep '^\.remote-upload-step_0000000[68]')" ] || fail "upload links left: $(ls -A "$tmp/a")"
echo "ok: step 4 could not be linked: warned, not uploaded; rank 1 was told at once; steps 6 and 8 sent by both ranks"

# The run's last checkpoint cannot be linked: its end must not say the upload finished.
mkdir "$tmp/a/.remote-upload-step_00000010.h5"
timeout 120 $MPIRUN -n 2 "$TRAIN" --set data.train="$tmp/f.tok" "${COMMON[@]}" "${R[@]}" --set parallel.dp=2 \
  --set train.steps=10 --set ckpt.every=2 --set ckpt.dir="$tmp/a" >"$tmp/b.log" 2>&1 ||
  fail "run B: $(tail -5 "$tmp/b.log")"
grep -q "remote: cannot link $tmp/a/step_00000010.h5 for its upload (File exists): step 10 is not uploaded" "$tmp/b.log" ||
  fail "no warning for step 10: $(grep -i remote "$tmp/b.log")"
grep -q "remote: step 10, the newest handed to the remote level, is not in the store at exit (see above): the remote level stays at step 8" \
  "$tmp/b.log" || fail "the end does not say step 10 is missing: $(grep -i remote "$tmp/b.log")"
! grep -q "upload finished before exit" "$tmp/b.log" || fail "the end claims the upload finished: $(grep -i remote "$tmp/b.log")"
expect_line "newest 8" sh -c "\"$RC\" s3://boost-link/run newest | cut -d' ' -f1-2"
echo "ok: the last checkpoint could not be linked: its end says the remote level stays at step 8"
echo "remote_link_fault: all passed"
