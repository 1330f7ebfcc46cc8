#!/usr/bin/env bash
# train.device = cuda: where no GPU (or no driver, or no CUDA build) is
# there, boost-train refuses with one line naming why, before training, on
# one rank and under mpirun; where a GPU is usable, a short run on it trains.
set -euo pipefail
bin=${BOOST_BINARY_DIR:?}/run/boost-train
data=${BOOST_BINARY_DIR}/tools/boost-data
mpirun=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$tmp/txt"
for i in $(seq 1 40); do echo "line $i of a small corpus for the boost trainer tests, repeated text."; done >"$tmp/txt/a.txt"
"$data" -o "$tmp/d.tok" "$tmp/txt" >/dev/null 2>&1 || fail "boost-data could not make the test shard"
args=(--set data.train="$tmp/d.tok" --set model.seq_len=16 --set train.batch_size=2 --set train.val_batches=0
  --set train.steps=2 --set train.device=cuda)

gpu=0
if [ -x "${BOOST_BINARY_DIR}/tests/gpu/boost-gpu-check" ]; then
  # the GPU check says "SKIP: no CUDA device" (77) exactly when the backend would refuse
  rc=0
  "${BOOST_BINARY_DIR}/tests/gpu/boost-gpu-check" --act f32 --small --no-bench >"$tmp/probe" 2>&1 || rc=$?
  [ "$rc" -ne 77 ] && gpu=1
  want="no CUDA GPU is usable here"
else
  want="built without CUDA"
fi

if [ "$gpu" = 1 ]; then
  "$bin" "${args[@]}" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "a cuda run failed on a machine with a GPU"; }
  grep -q '^device: ' "$tmp/out" || fail "the cuda run does not name its device"
  grep -q '^step     2/2' "$tmp/out" || fail "the cuda run did not train 2 steps"
  echo "train_cuda: a GPU is here; a 2-step cuda run trained"
  exit 0
fi

rc=0
"$bin" "${args[@]}" >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 1 ] || fail "train.device=cuda without a GPU exited $rc, not 1"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || { cat "$tmp/err"; fail "not exactly one stderr line"; }
grep -q "^boost-train: train.device = cuda: .*$want" "$tmp/err" || fail "stderr '$(cat "$tmp/err")' lacks '$want'"
! grep -q '^step ' "$tmp/out" || fail "trained before refusing"

rc=0
$mpirun -n 2 "$bin" "${args[@]}" >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" -ne 0 ] || fail "mpirun -n 2 with train.device=cuda exited 0"
[ "$(grep -c '^boost-train:' "$tmp/err")" -eq 1 ] || { cat "$tmp/err"; fail "not exactly one boost-train: line under mpirun"; }
grep '^boost-train:' "$tmp/err" | grep -q "$want" || fail "mpirun: '$(grep '^boost-train:' "$tmp/err")' lacks '$want'"
! grep -q '^step ' "$tmp/out" || fail "trained before refusing (mpirun)"
echo "train_cuda: refused with one line ($want)"
