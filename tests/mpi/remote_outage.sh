#!/usr/bin/env bash
# The object store goes away while a training run uploads (issue 42's
# acceptance: "server killed mid-upload and back 10 s later"), with the real
# trainer on 2 ranks against SeaweedFS on 127.0.0.1:
#  - the server is killed (-9) right after step 4's file commits, while its
#    upload is held in flight (BOOST_S3_TEST_PART_DELAY_MS), and started
#    again 10 s later;
#  - training goes on meanwhile: steps keep being taken while the store is
#    down (the upload threads retry with backoff; the training thread never
#    waits on them);
#  - step 4's upload completes by retry, or is given up and a later
#    checkpoint goes up instead; either way never a half checkpoint: the
#    newest committed remote checkpoint at the end is the run's last step,
#    downloads equal to the file in ckpt.dir, and no multipart upload is left.
# The step times inside and outside the outage are printed; what uploads
# cost training is measured by bench/bench_remote_stall.sh, not asserted here.
source "$(dirname "$0")/ckpt_common.bash"
source "$(dirname "$0")/remote_common.bash"
make_data
open_store s3://boost-outage/run
STEPS=90
export BOOST_TRAIN_TEST_STEP_DELAY_MS=150 BOOST_S3_TEST_PART_DELAY_MS=1000
train_bg 2 "$tmp/run.log" --set parallel.dp=2 --set ckpt.every=4 --set model.seq_len=32 \
  --set train.steps=$STEPS --set ckpt.dir="$tmp/c" --set train.metrics="$tmp/m.jsonl" \
  "${R[@]}" --set ckpt.remote_grace=120
run=$!
for _ in $(seq 1 1200); do
  grep -q "step 4 committed" "$tmp/run.log" 2>/dev/null && break
  kill -0 $run 2>/dev/null || fail "the run ended before step 4 committed: $(tail -5 "$tmp/run.log")"
  sleep 0.05
done
grep -q "step 4 committed" "$tmp/run.log" || fail "step 4 did not commit in 60 s"
t_down=$(date +%s.%N)
stop_server 9
sleep 10
t_up=$(date +%s.%N)
start_server
code=0
wait $run || code=$?
[ $code = 0 ] || fail "the run exited $code: $(tail -5 "$tmp/run.log")"
grep -E "remote: |remote step|remote upload" "$tmp/run.log" | sed 's/^/  log: /' | head -12

# Training went on while the store was down.
read -r n_in med_in med_out max_in < <("$PY" - "$tmp/m.jsonl" "$t_down" "$t_up" <<'PYEOF'
import json, statistics, sys
down, up = float(sys.argv[2]), float(sys.argv[3])
inside, outside = [], []
for l in open(sys.argv[1]):
    o = json.loads(l)
    (inside if down <= o["time"] <= up else outside).append(o["step_ms"])
print(len(inside), round(statistics.median(inside or [0]), 1), round(statistics.median(outside or [0]), 1),
      round(max(inside or [0]), 1))
PYEOF
)
echo "steps while the store was down: $n_in (step time median ${med_in} ms inside, ${med_out} ms outside, max ${max_in} ms)"
[ "$n_in" -ge 10 ] || fail "only $n_in steps in the 10 s the store was down: training waited on the upload"

# Step 4's upload: completed by retry, or given up (and said so) for a later one.
if grep -q "checkpoint: remote step 4 uploaded" "$tmp/run.log"; then
  echo "ok: step 4's upload completed across the server's restart"
else
  grep -q "upload of step 4 FAILED" "$tmp/run.log" ||
    fail "step 4's upload neither completed nor failed: $(grep -i remote "$tmp/run.log" | head -5)"
  echo "ok: step 4's upload was given up and said so"
fi
grep -q "checkpoint: remote upload finished before exit (newest remote step $STEPS)" "$tmp/run.log" ||
  fail "the last step did not reach the store: $(grep -i remote "$tmp/run.log" | tail -3)"
name=$(printf 'step_%08d.h5' $STEPS)
expect_line "newest $STEPS" sh -c "\"$RC\" $U fetch \"$tmp/got.h5\" | cut -d' ' -f1-2"
cmp "$tmp/c/$name" "$tmp/got.h5" || fail "the newest remote checkpoint differs from $name"
expect_line "orphans 0" rc "$U" orphans
echo "remote_outage: all passed"
