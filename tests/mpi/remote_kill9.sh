#!/usr/bin/env bash
# The remote level when the job dies, against SeaweedFS (or the store
# BOOST_S3_STORE names) on 127.0.0.1:
#  1. kill -9 of every rank (and mpirun) while the upload of a checkpoint is
#     in flight (its parts slowed by BOOST_S3_TEST_PART_DELAY_MS): the
#     machine's disk is gone too (ckpt.dir deleted); the next start aborts
#     the orphaned multipart upload, resumes from the newest COMPLETE remote
#     checkpoint (the one before), and goes on uploading;
#  2. a stop signal (SIGTERM): the final checkpoint is committed and its
#     upload finished within ckpt.remote_grace before exit 75, and the log
#     says so; with a grace too short for it, one line says it did not make
#     it and the remote level keeps the step before.
source "$(dirname "$0")/ckpt_common.bash"
source "$(dirname "$0")/local_common.bash"
source "$(dirname "$0")/remote_common.bash"
make_data
open_store s3://boost-kill/run
R+=(--set train.min_lr_ratio=1 --set model.seq_len=32 --set parallel.dp=2 --set train.batch_size=1)
newest() { rc "$U" newest | cut -d' ' -f1-2; }

# 1. A run whose step 2 is uploaded, killed; its relaunch with every part
# slowed to 3 s, killed while its first checkpoint's upload is in flight.
BOOST_S3_TEST_PART_DELAY_MS=0 train_bg 2 "$tmp/a.log" "${R[@]}" --set train.steps=100000 --set ckpt.every=2 \
  --set ckpt.dir="$tmp/a" --set train.metrics="$tmp/a.jsonl"
mp=$!
CLEANUP="kill -9 $mp 2>/dev/null"
for i in $(seq 1 300); do grep -q "remote step 2 uploaded" "$tmp/a.log" && break; sleep 0.1; done
grep -q "remote step 2 uploaded" "$tmp/a.log" || fail "step 2 was never uploaded: $(tail -5 "$tmp/a.log")"
kill_job $mp
n0=$(newest | cut -d' ' -f2)
[ "$n0" -ge 2 ] || fail "no remote checkpoint after the first run: $(newest)"
# Again, now with slow parts: killed while step 4 (or a later one) is in flight.
BOOST_S3_TEST_PART_DELAY_MS=3000 train_bg 2 "$tmp/b.log" "${R[@]}" --set train.steps=100000 --set ckpt.every=2 \
  --set ckpt.dir="$tmp/a" --set train.metrics="$tmp/b.jsonl"
mp=$!
CLEANUP="kill -9 $mp 2>/dev/null"
first=$(last_step "$tmp/a.jsonl")
wait_step "$tmp/b.jsonl" $((first + 4)) 60 || fail "the relaunch did not get going: $(tail -3 "$tmp/b.log")"
sleep 0.5 # its first checkpoint after the relaunch is committed and its 3 s part in flight
kill_job $mp
grep -q "remote step [0-9]* uploaded" "$tmp/b.log" && fail "an upload finished despite the delay: $(grep remote "$tmp/b.log")"
rm -rf "$tmp/a" # the node's disk is gone with it
expect_line "newest $n0" newest
echo "ok: kill -9 of every rank mid-upload: the remote level still says step $n0"
train 2 "$tmp/c.log" "${R[@]}" --set train.steps=$((n0 + 4)) --set ckpt.every=2 --set ckpt.dir="$tmp/c" \
  --set train.metrics="$tmp/c.jsonl" || fail "restart: $(tail -5 "$tmp/c.log")"
grep -q "unfinished upload.* of an earlier start aborted" "$tmp/c.log" || fail "the orphan was not cleaned: $(grep -i remote "$tmp/c.log")"
grep -q "remote step $n0 is newer than" "$tmp/c.log" || fail "the restart did not resume from the remote step $n0"
[ "$(losses "$tmp/c.jsonl" | head -1 | cut -d' ' -f1)" = $((n0 + 1)) ] || fail "the restart did not begin at step $((n0 + 1))"
expect_line "orphans 0" rc "$U" orphans
expect_line "newest $((n0 + 4))" newest
echo "ok: the restart aborted the orphan, resumed from the remote step $n0, uploaded step $((n0 + 4))"

# 2. SIGTERM: the final checkpoint's upload is awaited (grace 60 s) before
# exit 75, even where ckpt.remote_every would pass it over.
BOOST_TRAIN_TEST_STEP_DELAY_MS=200 train_bg 0 "$tmp/d.log" "${R[@]}" --set parallel.dp=1 --set train.batch_size=2 --set ckpt.remote_every=100 \
  --set train.steps=100000 --set ckpt.every=0 --set ckpt.dir="$tmp/d" --set train.metrics="$tmp/d.jsonl"
pid=$!
CLEANUP="kill -9 $pid 2>/dev/null"
wait_step "$tmp/d.jsonl" 9 60 || fail "the run did not get going"
kill -TERM $pid
st=0
wait $pid || st=$?
[ "$st" = 75 ] || fail "exit $st after SIGTERM: $(tail -3 "$tmp/d.log")"
k=$(grep -o 'preempted by signal [0-9]* at step [0-9]*' "$tmp/d.log" | grep -o '[0-9]*$')
grep -q "remote upload finished before exit (newest remote step $k)" "$tmp/d.log" ||
  fail "no line saying the final upload made it: $(grep -i remote "$tmp/d.log")"
expect_line "newest $k" newest
echo "ok: SIGTERM at step $k: its upload finished before exit 75"
# ... and with a 1 s grace against 3 s parts it does not make it, and says so.
BOOST_S3_TEST_PART_DELAY_MS=3000 BOOST_TRAIN_TEST_STEP_DELAY_MS=200 train_bg 0 "$tmp/e.log" "${R[@]}" --set parallel.dp=1 \
  --set train.batch_size=2 --set train.steps=100000 --set ckpt.every=0 --set ckpt.remote_grace=1 --set ckpt.dir="$tmp/d" \
  --set train.metrics="$tmp/e.jsonl"
pid=$!
CLEANUP="kill -9 $pid 2>/dev/null"
wait_step "$tmp/e.jsonl" $((k + 3)) 60 || fail "the second run did not get going"
kill -TERM $pid
st=0
wait $pid || st=$?
[ "$st" = 75 ] || fail "exit $st after SIGTERM: $(tail -3 "$tmp/e.log")"
grep -q "did not finish within ckpt.remote_grace = 1 s: the remote level stays at step $k " "$tmp/e.log" ||
  fail "no line saying the upload did not make it: $(grep -i remote "$tmp/e.log")"
expect_line "newest $k" newest
echo "ok: with a 1 s grace the upload did not make it, one line says so, the remote level keeps step $k"
echo "remote_kill9: all passed"
