#!/usr/bin/env bash
# A disk that fills in the middle of a checkpoint write, on the layouts that
# used HDF5's collective writer before every layout got chunks with one
# writer each (issue 20, item 4): tensor parallelism (shards that cut the
# global-shape chunks) and dp=2 with ckpt.activations=all (replica rows that
# cut them). No space reservation (BOOST_CKPT_TEST_NO_RESERVE=1, as on a file
# system without fallocate), so ENOSPC comes from the writes themselves. The
# failure must be agreed by every rank within seconds -- never wait for the
# watchdog (ckpt.timeout=60 here) --, leave no temporary, and training must go
# on; once the tmpfs is remounted larger the next checkpoint commits and the
# run ends 0 with its final checkpoint. Needs root to mount (else exit 77:
# skipped).
source "$(dirname "$0")/ckpt_common.bash"
make_data
[ "$(id -u)" = 0 ] || { echo "SKIP: not root: cannot mount a size-limited tmpfs"; exit 77; }
mnt=$tmp/mnt
mkdir -p "$mnt"
mount -t tmpfs -o size=600k tmpfs "$mnt" 2>"$tmp/mount.err" || { echo "SKIP: mount -t tmpfs: $(cat "$tmp/mount.err")"; exit 77; }
CLEANUP="unmount_scratch '$mnt'"

jsonl_field() { # FILE STEP FIELD: a field of the checkpoints.jsonl record of STEP
  "$PY" -c 'import json,sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    if o["step"] == int(sys.argv[2]): print(o.get(sys.argv[3]))' "$1" "$2" "$3"
}

# run NAME args: steps 1-8, a checkpoint every 2; step 2's does not fit
run_case() {
  local name=$1
  shift
  local d=$mnt/$name log=$tmp/$name.log
  mount -o remount,size=600k "$mnt" || fail "remount to 600k"
  local t0
  t0=$(date +%s)
  BOOST_CKPT_TEST_NO_RESERVE=1 BOOST_TRAIN_TEST_STEP_DELAY_MS=500 train_bg 2 "$log" --set ckpt.dir="$d" \
    --set train.steps=8 --set ckpt.every=2 --set ckpt.keep_last=1 --set ckpt.timeout=60 "$@"
  local pid=$!
  local i
  for i in $(seq 1 600); do # the failed checkpoint is recorded
    grep -q '"committed":false' "$d/checkpoints.jsonl" 2>/dev/null && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.05
  done
  mount -o remount,size=20m "$mnt" || fail "$name: remount to 20m"
  local rc=0
  wait $pid || rc=$?
  local t1
  t1=$(date +%s)
  grep -q '"committed":false' "$d/checkpoints.jsonl" 2>/dev/null || fail "$name: no checkpoint failed on the full disk: $(tail -3 "$log")"
  [ "$rc" = 0 ] || fail "$name: exit $rc, expected 0 (the checkpoints after the remount commit): $(grep -v '^  ' "$log" | tail -3)"
  ! grep -q "watchdog" "$log" || fail "$name: a watchdog fired: $(grep watchdog "$log")"
  [ "$(jsonl_field "$d/checkpoints.jsonl" 2 committed)" = False ] || fail "$name: step 2 did not fail"
  grep -q "checkpoint of step 2 FAILED, nothing committed (training continues" "$log" || fail "$name: step 2's failure not reported"
  grep -q "checkpoint of step 2 FAILED.*No space left on device" "$log" || fail "$name: ENOSPC not named: $(grep -m1 'FAILED' "$log")"
  local s
  for s in 4 6 8; do
    [ "$(jsonl_field "$d/checkpoints.jsonl" $s committed)" = True ] || fail "$name: the checkpoint of step $s did not commit"
    [ "$(jsonl_field "$d/checkpoints.jsonl" $s writer)" = direct ] || fail "$name: step $s written by the $(jsonl_field "$d/checkpoints.jsonl" $s writer) writer"
  done
  [ "$(cd "$d" && ls step_* )" = step_00000008.h5 ] || fail "$name: left in the directory: $(ls "$d")"
  [ "$(cat "$d/latest")" = step_00000008.h5 ] || fail "$name: latest = $(cat "$d/latest")"
  "$INSPECT" verify "$d" >"$tmp/$name.v" 2>&1 || fail "$name: step 8 does not verify: $(tail -2 "$tmp/$name.v")"
  local ws
  ws=$(jsonl_field "$d/checkpoints.jsonl" 2 write_s | cut -c1-5)
  "$PY" -c 'import sys; sys.exit(0 if float(sys.argv[1]) < 10 else 1)' "$ws" || fail "$name: the failed write took $ws s to be agreed"
  echo "ok: $name: step 2 failed with ENOSPC, agreed by both ranks in $ws s (no temporary left), steps 4-8 committed after the remount, exit 0 in $((t1 - t0)) s"
  rm -rf "$d"
}

run_case tp2 --set parallel.tp=2
run_case dp2_acts_all --set parallel.dp=2 --set ckpt.activations=all
echo "PASS: ckpt_enospc_layouts"
