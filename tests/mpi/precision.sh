#!/usr/bin/env bash
# train.precision=bf16 (docs/PRECISION.md) on the CPU backend:
#  1. the tiny preset, 600 steps on fortunes: the bf16 run's final validation
#     loss within 2% of the fp32 run's (the spread between seeds is larger:
#     docs/PRECISION.md);
#  2. two bf16 runs with the same seed and threads are bit-identical (every
#     step's loss and gradient norm, float.hex);
#  3. the guarded backend in bf16 matches the CPU backend bit for bit;
#  4. communication in bf16: tp=2 btp moves the bottleneck all-reduce in bf16
#     (its bytes per step 0.5-0.6x fp32's: half for H, the fp32 norm
#     statistics on top), pp=2 sends half the bytes, dp=2 keeps fp32
#     gradients (same bytes);
#  5. resume across precisions: an fp32 checkpoint resumed in bf16 says so
#     and trains on, and the reverse.
source "$BOOST_SOURCE_DIR/tests/mpi/ckpt_common.bash"
make_data

losses() { # the step losses and grad norms of a metrics file, float.hex each
  "$PY" -c 'import json,sys
for l in open(sys.argv[1]):
    o = json.loads(l); print(o["step"], float(o["loss"]).hex(), float(o["grad_norm"]).hex())' "$1"
}
field() { # the last value of a metrics key ("val_loss") or comm entry ("tp_allreduce")
  "$PY" -c 'import json,sys
v = None
for l in open(sys.argv[1]):
    o = json.loads(l)
    if sys.argv[2] in o: v = o[sys.argv[2]]
    elif sys.argv[2] in o.get("comm", {}): v = o["comm"][sys.argv[2]]["bytes"]
print(v)' "$1" "$2"
}

# 1. accuracy over 600 steps
for p in fp32 bf16; do
  train 0 "$tmp/$p.log" --set train.precision=$p --set train.steps=600 --set train.warmup_steps=30 --set train.lr=3e-3 \
    --set train.val_batches=8 --set train.val_every=0 --set train.metrics="$tmp/$p.jsonl" ||
    fail "$p 600 steps: $(tail -3 "$tmp/$p.log")"
done
v32=$(field "$tmp/fp32.jsonl" val_loss) v16=$(field "$tmp/bf16.jsonl" val_loss)
"$PY" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(b - a) <= 0.02 * a else 1)" "$v32" "$v16" ||
  fail "bf16 final validation loss $v16 is not within 2% of fp32's $v32"
echo "PASS accuracy: 600 steps, validation loss fp32 $v32, bf16 $v16"
grep -q "bf16 over fp32 masters" "$tmp/bf16.log" || fail "the bf16 run's start-up line does not name its precision"

# 2. and 3. repeatability, and the guarded backend
short=(--set train.precision=bf16 --set train.steps=12 --set train.warmup_steps=3 --set train.lr=3e-3)
train 0 "$tmp/a.log" "${short[@]}" --set train.metrics="$tmp/a.jsonl" || fail "bf16 run a: $(tail -3 "$tmp/a.log")"
train 0 "$tmp/b.log" "${short[@]}" --set train.metrics="$tmp/b.jsonl" || fail "bf16 run b: $(tail -3 "$tmp/b.log")"
train 0 "$tmp/g.log" "${short[@]}" --set train.device=guarded --set train.metrics="$tmp/g.jsonl" ||
  fail "bf16 guarded: $(tail -3 "$tmp/g.log")"
[ "$(losses "$tmp/a.jsonl")" = "$(losses "$tmp/b.jsonl")" ] || fail "two bf16 runs with the same seed differ"
[ "$(losses "$tmp/a.jsonl")" = "$(losses "$tmp/g.jsonl")" ] || fail "the guarded backend in bf16 differs from the CPU's"
echo "PASS repeatable: two bf16 runs and the guarded backend give the same bits (12 steps)"

# 4. bytes on the wire
ratio() { "$PY" -c 'import sys; print("%.3f" % (float(sys.argv[2]) / float(sys.argv[1])))' "$1" "$2"; }
for layout in "tp 2 --set parallel.tp=2 --set parallel.tp_mode=btp" "pp 2 --set parallel.pp=2 --set train.grad_accum=2" \
  "dp 2 --set parallel.dp=2"; do
  read -r name np sets <<<"$layout"
  for p in fp32 bf16; do
    # shellcheck disable=SC2086 # sets is a list of --set arguments
    train "$np" "$tmp/$name-$p.log" --set train.precision=$p --set train.steps=2 --set train.metrics="$tmp/$name-$p.jsonl" \
      $sets || fail "$name $p: $(tail -3 "$tmp/$name-$p.log")"
  done
  case $name in tp) key=tp_allreduce lo=0.5 hi=0.6 ;; pp) key=pp_sendrecv lo=0.5 hi=0.5 ;; dp) key=dp_allreduce lo=1 hi=1 ;; esac
  r=$(ratio "$(field "$tmp/$name-fp32.jsonl" $key)" "$(field "$tmp/$name-bf16.jsonl" $key)")
  "$PY" -c "import sys; r = float(sys.argv[1]); sys.exit(0 if $lo - 1e-9 <= r <= $hi + 1e-9 else 1)" "$r" ||
    fail "$name: bf16 moves $r x the bytes of fp32 over $key (expected $lo..$hi)"
  echo "PASS $name: $key bytes bf16/fp32 = $r"
done

# 5. resume across precisions, both ways
train 0 "$tmp/r1.log" --set train.steps=3 --set ckpt.dir="$tmp/c32" || fail "fp32 save: $(tail -3 "$tmp/r1.log")"
train 0 "$tmp/r2.log" --set train.steps=5 --set ckpt.dir="$tmp/c32" --set train.precision=bf16 ||
  fail "bf16 resume of an fp32 checkpoint: $(tail -3 "$tmp/r2.log")"
grep -q "train.precision fp32 -> bf16" "$tmp/r2.log" || fail "the bf16 resume does not say the precision changed"
grep -q "from step 3" "$tmp/r2.log" || fail "the bf16 run did not resume at step 3"
train 0 "$tmp/r3.log" --set train.steps=3 --set ckpt.dir="$tmp/c16" --set train.precision=bf16 || fail "bf16 save"
train 0 "$tmp/r4.log" --set train.steps=5 --set ckpt.dir="$tmp/c16" || fail "fp32 resume of a bf16 checkpoint"
grep -q "train.precision bf16 -> fp32" "$tmp/r4.log" || fail "the fp32 resume does not say the precision changed"
echo "PASS resume across precisions, both ways"
