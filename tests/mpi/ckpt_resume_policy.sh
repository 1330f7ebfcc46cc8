#!/usr/bin/env bash
# Resume policy (decided before the model is built, run/resume_plan.c):
#  - a checkpoint of a different model is refused with one line naming the
#    differing keys (n_layers, n_heads, tie_embeddings, rope_theta, rank);
#  - changed training settings are allowed and listed;
#  - the stored global batch is kept by default when dp changes (the split is
#    re-derived and logged, and the run continues the uninterrupted one), an
#    impossible split is a clear error, ckpt.resume_batch=config overrides;
#  - a directory whose checkpoints all are unreadable stops the run (exit 1,
#    every file listed); ckpt.resume=none starts fresh and keeps those files.
source "$(dirname "$0")/ckpt_common.bash"
make_data
BASE=(--set train.min_lr_ratio=1 --set train.warmup_steps=0 --set model.seq_len=32)

expect_refusal() { # log pattern description
  grep -q -- "$2" "$1" || fail "$3: expected '$2' in: $(tail -n 3 "$1")"
  [ "$(grep -c 'boost-train:' "$1")" -eq 1 ] || fail "$3: expected one error line, got: $(grep 'boost-train:' "$1")"
}

# ---- a different model is refused ------------------------------------------------
d=$tmp/model
train 0 "$tmp/m0.log" "${BASE[@]}" --set train.steps=2 --set ckpt.dir="$d" || fail "first run: $(tail -3 "$tmp/m0.log")"
while read -r set want; do
  rc=0
  train 0 "$tmp/m1.log" "${BASE[@]}" --set train.steps=4 --set ckpt.dir="$d" --set "$set" || rc=$?
  [ "$rc" -eq 1 ] || fail "resuming with $set: exit $rc, expected 1 (a different model must be refused)"
  expect_refusal "$tmp/m1.log" "holds a different model: .*$want" "$set"
  echo "ok: $set refused ($(grep -o "$want[^,]*" "$tmp/m1.log" | head -1))"
done <<'CASES'
model.n_layers=2 model.n_layers 4 -> 2
model.n_heads=2 model.n_heads 4 -> 2
model.tie_embeddings=true model.tie_embeddings false -> true
model.rope_theta=500000 model.rope_theta 10000 -> 500000
model.rank_mlp=8 model.rank_mlp 16 -> 8
CASES
ls "$d" | grep -q superseded && fail "a refused resume moved checkpoints aside"

# ---- changed training settings are allowed and listed ------------------------------
train 0 "$tmp/s.log" "${BASE[@]}" --set train.steps=3 --set ckpt.dir="$d" --set train.lr=2e-3 ||
  fail "resume with another lr: $(tail -3 "$tmp/s.log")"
grep -q "settings changed since the checkpoint: .*train.lr 0.00100000005 -> 0.00200000009" "$tmp/s.log" ||
  fail "the changed lr is not listed: $(grep 'resume plan' "$tmp/s.log")"
grep -q "resumed from .*step_00000002.h5" "$tmp/s.log" || fail "did not resume: $(grep checkpoints: "$tmp/s.log")"
echo "ok: changed lr listed and resumed"

# ---- the global batch is kept when dp changes ---------------------------------------
# uninterrupted: dp=2, batch 2 (global 4), 6 steps
train 2 "$tmp/g0.log" "${BASE[@]}" --set train.steps=6 --set ckpt.dir="$tmp/g0" --set train.metrics="$tmp/g0.jsonl" ||
  fail "dp=2 run: $(tail -3 "$tmp/g0.log")"
train 2 "$tmp/g1.log" "${BASE[@]}" --set train.steps=3 --set ckpt.dir="$tmp/g" || fail "dp=2 first half: $(tail -3 "$tmp/g1.log")"
cp -r "$tmp/g" "$tmp/g3"
cp -r "$tmp/g" "$tmp/gc"
# resumed on one rank with the same config (batch_size 2): the plan makes it 4 x 1
train 0 "$tmp/g2.log" "${BASE[@]}" --set train.steps=6 --set ckpt.dir="$tmp/g" --set train.metrics="$tmp/g2.jsonl" ||
  fail "resume on 1 rank: $(tail -3 "$tmp/g2.log")"
grep -q "global batch 4 kept: batch_size 4 x grad_accum 1 per replica over dp 1 (config said 2 x 1)" "$tmp/g2.log" ||
  fail "the kept global batch is not logged: $(grep 'resume plan' "$tmp/g2.log")"
continues_run "$tmp/g0.jsonl" "$tmp/g2.jsonl" 4 6 || fail "the resumed run does not continue the uninterrupted one"
echo "ok: dp 2 -> 1 keeps the global batch of 4 and continues the run"
# impossible: 4 sequences over 3 replicas
rc=0
train 3 "$tmp/g3.log" "${BASE[@]}" --set train.steps=6 --set ckpt.dir="$tmp/g3" || rc=$?
[ "$rc" -ne 0 ] || fail "a global batch of 4 over dp=3 was accepted"
grep -q "cannot keep the checkpoint's global batch of 4 sequences over parallel.dp=3.*ckpt.resume_batch=config" "$tmp/g3.log" ||
  fail "impossible split: $(grep boost-train: "$tmp/g3.log" | head -2)"
echo "ok: an impossible split is refused"
train 0 "$tmp/gc.log" "${BASE[@]}" --set train.steps=6 --set ckpt.dir="$tmp/gc" --set ckpt.resume_batch=config ||
  fail "resume_batch=config: $(tail -3 "$tmp/gc.log")"
grep -q "global batch 4 -> 2 (ckpt.resume_batch=config)" "$tmp/gc.log" || fail "override not logged: $(grep 'resume plan' "$tmp/gc.log")"
echo "ok: ckpt.resume_batch=config keeps the config's split and says so"

# ---- ckpt.resume=PATH works without ckpt.dir (and writes nothing) ------------------
f=$(ls "$d"/step_*.h5 | tail -n 1)
train 0 "$tmp/p.log" "${BASE[@]}" --set train.steps=5 --set ckpt.resume="$f" ||
  fail "resume=PATH without ckpt.dir: $(tail -3 "$tmp/p.log")"
grep -q "checkpoints: resumed from $f (step" "$tmp/p.log" || fail "resume=PATH without ckpt.dir did not resume: $(grep -i checkpoint "$tmp/p.log" | head -2)"
grep -q "from step [1-9]" "$tmp/p.log" || fail "resume=PATH without ckpt.dir started at step 0"
echo "ok: ckpt.resume=PATH without ckpt.dir resumes"

# ---- a second job on the same ckpt.dir is refused; the first is not disturbed --------
# the first job runs until the SIGTERM below (steps of >= 10 ms: on a fast
# machine 400 tiny steps were over in 0.5 s, before the second job started)
BOOST_TRAIN_TEST_STEP_DELAY_MS=10 train_bg 0 "$tmp/l1.log" "${BASE[@]}" --set train.steps=100000 --set ckpt.dir="$tmp/lock" --set ckpt.every=50
pid=$!
CLEANUP="kill -9 $pid 2>/dev/null"
for _ in $(seq 1 100); do grep -q "^step" "$tmp/l1.log" 2>/dev/null && break; sleep 0.1; done
rc=0
train 0 "$tmp/l2.log" "${BASE[@]}" --set train.steps=2 --set ckpt.dir="$tmp/lock" --set ckpt.resume=none || rc=$?
kill -TERM $pid
rc1=0
wait $pid || rc1=$?
[ "$rc1" = 75 ] || fail "the first job exited $rc1 after SIGTERM, expected 75: $(tail -2 "$tmp/l1.log")"
[ "$rc" = 1 ] || fail "a second job on a locked ckpt.dir exited $rc, expected 1"
grep -q "ckpt.dir $tmp/lock is in use by another job (host .* pid $pid since" "$tmp/l2.log" ||
  fail "second job: $(grep boost-train: "$tmp/l2.log")"
grep -q "checkpoint committed" "$tmp/l1.log" || fail "the first job did not commit its preemption checkpoint: $(tail -2 "$tmp/l1.log")"
echo "ok: a second job on the same ckpt.dir is refused, naming the first"

# ---- unreadable checkpoints stop an automatic resume ---------------------------------
u=$tmp/unreadable
train 0 "$tmp/u0.log" "${BASE[@]}" --set train.steps=4 --set ckpt.every=2 --set ckpt.dir="$u" || fail "u0: $(tail -3 "$tmp/u0.log")"
for f in "$u"/step_*.h5; do printf 'garbage' | dd of="$f" bs=1 seek=0 conv=notrunc status=none; done
rc=0
train 0 "$tmp/u1.log" "${BASE[@]}" --set train.steps=6 --set ckpt.dir="$u" || rc=$?
[ "$rc" -eq 1 ] || fail "unreadable checkpoints: exit $rc, expected 1 (never a silent fresh start)"
grep -q "holds checkpoints but none can be read: step_00000004.h5 (.*), step_00000002.h5 (.*ckpt.resume=none" "$tmp/u1.log" ||
  fail "unreadable checkpoints not listed: $(grep boost-train: "$tmp/u1.log")"
train 0 "$tmp/u2.log" "${BASE[@]}" --set train.steps=2 --set ckpt.dir="$u" --set ckpt.resume=none ||
  fail "ckpt.resume=none over unreadable checkpoints: $(tail -3 "$tmp/u2.log")"
echo "ok: unreadable checkpoints stop auto-resume; ckpt.resume=none starts fresh"
# ---- ckpt.resume=none over existing checkpoints: nothing lost, nothing moved silently ---
n=$tmp/none
train 0 "$tmp/n0.log" "${BASE[@]}" --set train.steps=4 --set ckpt.every=2 --set ckpt.dir="$n" || fail "n0"
md5_2=$(md5sum <"$n/step_00000002.h5")
train 0 "$tmp/n1.log" "${BASE[@]}" --set train.steps=2 --set ckpt.every=2 --set ckpt.dir="$n" --set ckpt.resume=none ||
  fail "resume=none over checkpoints: $(tail -3 "$tmp/n1.log")"
grep -q "fresh start (ckpt.resume=none); $n holds 2 checkpoints (newest step 4): kept" "$tmp/n1.log" ||
  fail "resume=none does not say what it keeps: $(grep checkpoints: "$tmp/n1.log")"
grep -q "checkpoint: newer checkpoints of an abandoned run set aside after step 2: superseded step_00000004.h5" "$tmp/n1.log" ||
  fail "the superseded checkpoint is not reported"
[ "$(md5sum <"$n/step_00000002.h5.superseded")" = "$md5_2" ] || fail "the old run's step 2 was replaced, not set aside"
[ -f "$n/step_00000004.h5.superseded" ] && [ -f "$n/step_00000002.h5" ] || fail "resume=none left: $(ls "$n")"
echo "ok: ckpt.resume=none keeps the old run's checkpoints (set aside as *.superseded, reported)"
echo "PASS: resume policy"
