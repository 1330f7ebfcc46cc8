#!/usr/bin/env bash
# boost-train on bad input: one line on stderr naming the problem, non-zero
# exit, before any training starts. Also: a good short run works, --help.
set -euo pipefail
bin=${BOOST_BINARY_DIR:?}/trainer/boost-train
data=${BOOST_BINARY_DIR}/tools/boost-data
mpirun=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$tmp/txt"
for i in $(seq 1 40); do echo "line $i of a small corpus for the boost trainer tests, repeated text." ; done > "$tmp/txt/a.txt"
"$data" -o "$tmp/d.tok" "$tmp/txt" >/dev/null 2>&1 || fail "boost-data could not make the test shard"
base=(--set data.train="$tmp/d.tok" --set model.seq_len=16 --set train.batch_size=2 --set train.val_batches=0)

# expect_error NEEDLE ARGS...: non-zero exit, exactly one stderr line containing NEEDLE
expect_error() {
  local needle=$1; shift
  local rc=0
  "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ "$rc" -ne 0 ] || fail "'$*' exited 0"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || { cat "$tmp/err" >&2; fail "'$*' printed $(wc -l <"$tmp/err") stderr lines, not 1"; }
  grep -qF -- "$needle" "$tmp/err" || fail "'$*': stderr '$(cat "$tmp/err")' does not mention '$needle'"
  ! grep -q '^step ' "$tmp/out" || fail "'$*' trained before failing"
}

help=$("$bin" --help) || fail "--help exit status"
grep -q 'usage: boost-train' <<<"$help" || fail "--help"
grep -q 'parallel.tp_mode .*' <<<"$help" && grep -q 'default: auto; allowed: auto, btp, vanilla or megatron' <<<"$help" || fail "--help does not show the tp_mode key with its default and values"
"$bin" "${base[@]}" --set train.steps=2 >"$tmp/ok" 2>&1 || { cat "$tmp/ok"; fail "a good run failed"; }
grep -q '^step     2/2' "$tmp/ok" || fail "a good run did not log step 2"

expect_error "model.widht" "$bin" "${base[@]}" --set model.widht=3
expect_error "train.lr" "$bin" "${base[@]}" --set train.lr=fast
expect_error "out of range" "$bin" "${base[@]}" --set train.batch_size=0
expect_error "value -1 for ckpt.keep_set_aside is out of range [0, 1000000]" "$bin" "${base[@]}" --set ckpt.keep_set_aside=-1
expect_error "bad value 'all' for ckpt.keep_set_aside: expected an integer" "$bin" "${base[@]}" --set ckpt.keep_set_aside=all
expect_error "nonexistent.tok" "$bin" --set data.train="$tmp/nonexistent.tok"
# ckpt.local_every = auto: the local level's own Young/Daly interval, refused without what it needs
expect_error "ckpt.local_every=auto needs ckpt.dir" "$bin" "${base[@]}" --set ckpt.local_every=auto
expect_error "bad value 'often' for ckpt.local_every: expected a step count 0..1000000000 or auto" \
  "$bin" "${base[@]}" --set ckpt.dir="$tmp/ck" --set ckpt.local_every=often
expect_error "bad value '0s' for ckpt.mtbf" "$bin" "${base[@]}" --set ckpt.dir="$tmp/ck" --set ckpt.local_every=auto \
  --set ckpt.mtbf=0s
printf 'not a token shard at all, just text' >"$tmp/bad.tok"
expect_error "bad.tok" "$bin" --set data.train="$tmp/bad.tok"
head -c 300 "$tmp/d.tok" >"$tmp/trunc.tok"
expect_error "trunc.tok" "$bin" --set data.train="$tmp/trunc.tok"
expect_error "data.train is not set" "$bin" --set train.steps=1
expect_error "not divisible" "$bin" "${base[@]}" --set model.n_heads=3
expect_error "vocabulary" "$bin" "${base[@]}" --set model.vocab=100
expect_error "--bogus" "$bin" --bogus
expect_error "seq_len" "$bin" --set data.train="$tmp/d.tok" --set model.seq_len=100000
printf '[model]\nd_model = 64\nthis is not ini\n' >"$tmp/bad.ini"
expect_error "bad.ini" "$bin" --config "$tmp/bad.ini"
expect_error "missing.ini" "$bin" --config "$tmp/missing.ini"

# A refused start leaves no metrics file (it is opened only once the start is
# accepted); a resumed run still appends to an existing one.
touch "$tmp/afile"
expect_error "afile" "$bin" "${base[@]}" --set ckpt.dir="$tmp/afile" --set train.metrics="$tmp/refused.jsonl"
[ ! -e "$tmp/refused.jsonl" ] || fail "a refused start (ckpt.dir is a file) created the metrics file"
"$bin" "${base[@]}" --set train.steps=4 --set ckpt.dir="$tmp/ck" --set train.metrics="$tmp/m.jsonl" >"$tmp/out" 2>&1 ||
  fail "a run with checkpoints failed: $(tail -2 "$tmp/out")"
# train.steps below the checkpoint's step: refused with one line, exit 1 (the
# run is past the end it asks for; not "done", nothing trained or written)
expect_error "train.steps=2 is below the resumed checkpoint's step 4: nothing to train" \
  "$bin" "${base[@]}" --set train.steps=2 --set ckpt.dir="$tmp/ck" --set train.metrics="$tmp/m.jsonl"
[ "$(wc -l <"$tmp/m.jsonl")" = 4 ] || fail "the refused resume changed the metrics file"
"$bin" "${base[@]}" --set train.steps=6 --set ckpt.dir="$tmp/ck" --set train.metrics="$tmp/m.jsonl" >"$tmp/out" 2>&1 ||
  fail "the resumed run failed: $(tail -2 "$tmp/out")"
[ "$(grep -o '"step":[0-9]*' "$tmp/m.jsonl" | cut -d: -f2 | tr '\n' ' ')" = "1 2 3 4 5 6 " ] ||
  fail "the resumed run did not append steps 5-6 to the metrics file: $(cat "$tmp/m.jsonl" | head -c 300)"
"$bin" "${base[@]}" --set train.steps=6 --set ckpt.dir="$tmp/ck" >"$tmp/out" 2>&1 || fail "a finished run resumed at its end did not exit 0"
grep -q '^done: step 6' "$tmp/out" || fail "a finished run resumed at its end did not say done"

# The step guard's keys (docs/GUARD.md): negative windows, thresholds <= 0,
# an unknown policy, skip ranges that overlap, come out of order or run
# backwards, entries that are not batch indices -- each named.
guard_error() { expect_error "$1" "$bin" "${base[@]}" --set "$1=$2"; }
guard_error train.guard sometimes
guard_error train.guard ""
for k in train.guard_window train.guard_warmup train.guard_cluster train.guard_cluster_window train.guard_skip_batches; do
  guard_error $k -1
  guard_error $k 0
  guard_error $k many
done
guard_error train.guard_max_rollbacks -1
for k in train.guard_z_loss train.guard_z_gnorm; do
  guard_error $k 0
  guard_error $k -3
  guard_error $k nan
done
guard_error train.guard_loss_ratio 1
guard_error train.guard_loss_ratio 0
guard_error train.replay_every -1
guard_error train.replay_every often
guard_error train.guard_sdc_limit 0
guard_error train.guard_sdc_limit -2
guard_error train.skip_batches 20-10       # backwards
guard_error train.skip_batches 10-20,15-30 # overlapping
guard_error train.skip_batches 10-20,5     # out of order
guard_error train.skip_batches 10-20,20    # touching the range before
guard_error train.skip_batches -4
guard_error train.skip_batches 3-
guard_error train.skip_batches x
guard_error train.skip_batches 1,,2
# the warm-up needs that many steps in the window
expect_error train.guard_warmup "$bin" "${base[@]}" --set train.guard_window=10 --set train.guard_warmup=20
expect_error train.replay_every "$bin" "${base[@]}" --set train.guard=off --set train.replay_every=5

# good values: accepted, and a skipped range is passed over and said so
"$bin" "${base[@]}" --set train.steps=3 --set train.skip_batches="1-2, 5" --set train.guard=skip >"$tmp/ok" 2>&1 ||
  { cat "$tmp/ok"; fail "good guard keys refused"; }
grep -q "^skip: batches 1-2 (train.skip_batches) passed over at step 1" "$tmp/ok" || fail "no skip line: $(grep -v '^ ' "$tmp/ok")"
grep -q "^step     3/3" "$tmp/ok" || fail "the run with skips did not reach step 3"

# Under mpirun, mpirun adds its own report; ours is one "boost-train:" line
# (rank 0 speaks for all).
expect_mpi_error() {
  local needle=$1; shift
  local rc=0
  "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ "$rc" -ne 0 ] || fail "'$*' exited 0"
  [ "$(grep -c '^boost-train:' "$tmp/err")" -eq 1 ] || { cat "$tmp/err" >&2; fail "'$*': not exactly one boost-train: line"; }
  grep '^boost-train:' "$tmp/err" | grep -qF -- "$needle" || fail "'$*': '$(grep '^boost-train:' "$tmp/err")' lacks '$needle'"
  ! grep -q '^step ' "$tmp/out" || fail "'$*' trained before failing"
}

# Layouts (multi-rank): world size, divisibility, stages, modes.
expect_mpi_error "does not match" $mpirun -n 2 "$bin" "${base[@]}" --set parallel.dp=3
expect_mpi_error "parallel.tp" $mpirun -n 3 "$bin" "${base[@]}" --set parallel.tp=3
expect_mpi_error "model.n_layers" $mpirun -n 2 "$bin" "${base[@]}" --set parallel.pp=2 --set model.n_layers=1
expect_mpi_error "tp_mode=megatron" $mpirun -n 2 "$bin" "${base[@]}" --set parallel.tp=2 --set parallel.tp_mode=megatron
expect_mpi_error "parallel.stages" $mpirun -n 2 "$bin" "${base[@]}" --set parallel.pp=2 --set parallel.stages=1,1

# train.device = cuda where no GPU, driver or CUDA build is there (docs/CUDA.md);
# where a GPU is usable (boost-gpu-check --probe), tests/gpu runs on it instead.
probe=${BOOST_BINARY_DIR}/tests/gpu/boost-gpu-check
if [ ! -x "$probe" ]; then
  expect_error "train.device = cuda: this boost was built without CUDA" "$bin" "${base[@]}" --set train.device=cuda
  expect_mpi_error "built without CUDA" $mpirun -n 2 "$bin" "${base[@]}" --set train.device=cuda
elif ! "$probe" --probe >/dev/null 2>&1; then
  expect_error "train.device = cuda: no CUDA GPU is usable here" "$bin" "${base[@]}" --set train.device=cuda
  expect_mpi_error "no CUDA GPU is usable here" $mpirun -n 2 "$bin" "${base[@]}" --set train.device=cuda
fi
echo "train_errors: all checks passed"
