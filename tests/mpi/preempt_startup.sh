#!/usr/bin/env bash
# A stop signal before training -- during start-up, data opening, model
# build or the checkpoint load -- is remembered from the first line of main
# and never kills the job: once the state is consistent the run exits 75
# ("nothing trained, nothing to save"), leaves the checkpoint directory as
# it was, and the requeued run continues exactly as if nothing happened.
# (Before, the handlers were installed only after the model was built: the
# same signals killed the ranks, e.g. exit 138 through tools/mpirun/boost-mpirun.)
source "$(dirname "$0")/ckpt_common.bash"
make_data
LAUNCH="${BOOST_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}/tools/mpirun/boost-mpirun"
CFG=(--set train.steps=8 --set ckpt.every=4)

# Waits until process $1 catches SIGTERM (its handler is installed).
wait_handler() {
  local i mask
  for i in $(seq 1 200); do
    mask=$(awk '/^SigCgt:/ {print $2}' "/proc/$1/status" 2>/dev/null) || true
    [ -n "$mask" ] && (((16#$mask >> 14) & 1)) && return 0
    sleep 0.05
  done
  return 1
}

# 1. One process, SIGTERM while it sleeps in start-up (before MPI_Init; the
# hook BOOST_TRAIN_TEST_START_DELAY_MS holds it there): exit 75, nothing
# trained, no checkpoint and no metrics file written.
BOOST_TRAIN_TEST_START_DELAY_MS=30000 train_bg 0 "$tmp/s.log" "${CFG[@]}" --set ckpt.dir="$tmp/s" \
  --set train.metrics="$tmp/s.jsonl"
pid=$!
CLEANUP="kill -9 $pid 2>/dev/null"
wait_handler $pid || fail "start-up: boost-train never installed its SIGTERM handler"
kill -TERM $pid
rc=0
wait $pid || rc=$?
[ "$rc" = 75 ] || fail "start-up: SIGTERM during start-up exited $rc, expected 75: $(tail -3 "$tmp/s.log")"
grep -q '^preempted by signal 15 during start-up: nothing trained, nothing to save; exiting with status 75' "$tmp/s.log" ||
  fail "start-up: no 'preempted ... during start-up' line: $(tail -3 "$tmp/s.log")"
! grep -q '^step ' "$tmp/s.log" || fail "start-up: it trained after the signal"
[ ! -e "$tmp/s.jsonl" ] || fail "start-up: a metrics file was created"
! ls "$tmp/s"/step_* >/dev/null 2>&1 || fail "start-up: a checkpoint was written"
echo "ok (start-up): SIGTERM before MPI_Init -> exit 75, nothing trained or written"

# The reference: 8 steps uninterrupted, checkpoints at 4 and 8.
train 2 "$tmp/a.log" "${CFG[@]}" --set ckpt.dir="$tmp/a" --set train.metrics="$tmp/a.jsonl" ||
  fail "uninterrupted run: $(tail -5 "$tmp/a.log")"

# load_case TAG HOW: a run that resumes step 4 of the reference gets a stop
# signal while the checkpoint loads (BOOST_CKPT_TEST_DELAY_MS: 100 ms per
# tensor), exits 75 with the directory unchanged; the requeued run then
# ends exactly as the reference did (losses of steps 5-8, every tensor).
load_case() {
  local tag=$1 how=$2 d="$tmp/$1" rc=0 pid launcher
  mkdir -p "$d"
  cp "$tmp/a/step_00000004.h5" "$d/"
  head -4 "$tmp/a.jsonl" >"$tmp/$tag.jsonl"
  local before
  before=$(cd "$d" && ls step_* && md5sum step_00000004.h5)
  if [ "$how" = wrapper ]; then launcher="$LAUNCH --allow-run-as-root --oversubscribe"; else launcher=$MPIRUN; fi
  MPIRUN=$launcher BOOST_CKPT_TEST_DELAY_MS=100 train_bg 2 "$tmp/$tag.1.log" "${CFG[@]}" --set ckpt.dir="$d" \
    --set train.metrics="$tmp/$tag.jsonl"
  pid=$!
  CLEANUP="kill -9 $pid 2>/dev/null; pkill -9 -P $pid 2>/dev/null"
  local i
  for i in $(seq 1 200); do
    grep -q '^resume plan: will resume' "$tmp/$tag.1.log" 2>/dev/null && break
    sleep 0.05
  done
  sleep 1 # the load takes over 4 s
  if [ "$how" = wrapper ]; then
    kill -TERM $pid # the launcher: it relays SIGUSR1 through mpirun
  else
    pkill -INT -P $pid # the ranks themselves (mpirun's children), as Ctrl-C would reach a single process
  fi
  wait $pid || rc=$?
  [ "$rc" = 75 ] || fail "$tag: a stop signal during the checkpoint load exited $rc, expected 75: $(tail -4 "$tmp/$tag.1.log")"
  grep -q '^preempted by signal [0-9]* during start-up, before training from step 4: nothing trained' "$tmp/$tag.1.log" ||
    fail "$tag: not stopped after the load: $(grep -v '^  ' "$tmp/$tag.1.log" | tail -4)"
  ! grep -q '^step ' "$tmp/$tag.1.log" || fail "$tag: it trained after the signal"
  [ "$(cd "$d" && ls step_* && md5sum step_00000004.h5)" = "$before" ] || fail "$tag: the checkpoint directory changed"
  [ "$(wc -l <"$tmp/$tag.jsonl")" = 4 ] || fail "$tag: the metrics file changed"
  train 2 "$tmp/$tag.2.log" "${CFG[@]}" --set ckpt.dir="$d" --set train.metrics="$tmp/$tag.jsonl" ||
    fail "$tag: requeued run: $(tail -4 "$tmp/$tag.2.log")"
  grep -q "resumed from $d/step_00000004.h5 (step 4" "$tmp/$tag.2.log" || fail "$tag: the requeued run did not resume step 4"
  losses "$tmp/a.jsonl" >"$tmp/a.loss"
  losses "$tmp/$tag.jsonl" >"$tmp/$tag.loss"
  cmp -s "$tmp/a.loss" "$tmp/$tag.loss" || fail "$tag: losses differ: $(diff "$tmp/a.loss" "$tmp/$tag.loss" | head -4)"
  checksums "$tmp/a/step_00000008.h5" >"$tmp/a.sum"
  checksums "$d/step_00000008.h5" >"$tmp/$tag.sum"
  cmp -s "$tmp/a.sum" "$tmp/$tag.sum" || fail "$tag: final tensors differ"
  echo "ok ($tag): stop signal during the checkpoint load -> exit 75, directory unchanged; requeued run matches the uninterrupted one"
}
load_case wrapper wrapper # SIGTERM to tools/mpirun/boost-mpirun (the issue's case: the ranks died by SIGUSR1)
load_case ranks ranks     # SIGINT to the ranks under plain mpirun
echo "PASS: preempt_startup"
