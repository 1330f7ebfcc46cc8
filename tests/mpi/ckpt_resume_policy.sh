#!/usr/bin/env bash
# Resume policy (decided before the model is built, trainer/resume_plan.c):
#  - a checkpoint of a different model is refused with one line naming the
#    differing keys (n_layers, n_heads, tie_embeddings, rope_theta, rank);
#  - changed training settings are allowed and listed;
#  - the stored global batch is kept by default when dp changes (the split is
#    re-derived and logged, and the run continues the uninterrupted one), an
#    impossible split is a clear error, ckpt.resume_batch=config overrides;
#  - a directory whose checkpoints all are unreadable stops the run (exit 1,
#    every file listed); ckpt.resume=none starts fresh and keeps those files;
#  - a second job on the same ckpt.dir is refused, naming the holder and
#    since when (UTC ISO 8601, age);
#  - a renamed copy (step 2 as step_00000008.h5) is skipped or refused, never
#    taken for step 8, and the genuine newest is not set aside;
#  - ckpt.timeout during the load at start exits 75 (nothing trained).
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
grep -Eq "ckpt.dir $tmp/lock is in use by another job \(host .* pid $pid since [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z, [0-9]+ s ago\)" "$tmp/l2.log" ||
  fail "second job: the lock's holder and time (UTC ISO 8601 and age) not named: $(grep boost-train: "$tmp/l2.log")"
grep -q "checkpoint committed" "$tmp/l1.log" || fail "the first job did not commit its preemption checkpoint: $(tail -2 "$tmp/l1.log")"
echo "ok: a second job on the same ckpt.dir is refused, naming the first ($(grep -o "(host .*ago)" "$tmp/l2.log"))"

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
grep -q "checkpoint: newer checkpoints of an abandoned run set aside after step 2: set aside step_00000002.h5, step_00000004.h5 as branch 1 (\*.h5.superseded.1)" "$tmp/n1.log" ||
  fail "the set-aside checkpoints are not reported: $(grep 'set aside' "$tmp/n1.log")"
[ "$(md5sum <"$n/step_00000002.h5.superseded.1")" = "$md5_2" ] || fail "the old run's step 2 was replaced, not set aside"
[ -f "$n/step_00000004.h5.superseded.1" ] && [ -f "$n/step_00000002.h5" ] || fail "resume=none left: $(ls "$n")"
echo "ok: ckpt.resume=none keeps the old run's checkpoints (set aside as branch 1, *.superseded.1, reported)"

# ---- a renamed copy is not taken for the step its name says ---------------------------
# step_00000002.h5 copied to step_00000008.h5: skipped with one line, the
# genuine newest (step 4) resumed and never set aside as superseded.
r=$tmp/renamed
train 0 "$tmp/r0.log" "${BASE[@]}" --set train.steps=4 --set ckpt.every=2 --set ckpt.dir="$r" || fail "r0: $(tail -3 "$tmp/r0.log")"
cp "$r/step_00000002.h5" "$tmp/step_00000008.h5"
cp "$r/step_00000002.h5" "$r/step_00000008.h5"
md5_4=$(md5sum <"$r/step_00000004.h5")
train 0 "$tmp/r1.log" "${BASE[@]}" --set train.steps=6 --set ckpt.every=1 --set ckpt.keep_last=10 --set ckpt.dir="$r" ||
  fail "resume next to a renamed copy: $(tail -3 "$tmp/r1.log")"
grep -q "checkpoints: resumed from $r/step_00000004.h5 (step 4" "$tmp/r1.log" ||
  fail "did not resume the genuine step 4: $(grep -i 'resume' "$tmp/r1.log" | grep -v '^  ')"
grep -q "step_00000008.h5 (its name says step 8 but it holds step 2 (a renamed copy?))" "$tmp/r1.log" ||
  fail "the renamed copy is not named with its reason: $(grep -i 'step_00000008' "$tmp/r1.log")"
[ -f "$r/step_00000004.h5" ] && [ "$(md5sum <"$r/step_00000004.h5")" = "$md5_4" ] && [ ! -e "$r/step_00000004.h5.superseded" ] ||
  fail "the genuine step 4 was moved or changed: $(ls "$r")"
rc=0
train 0 "$tmp/r2.log" "${BASE[@]}" --set train.steps=6 --set ckpt.resume="$tmp/step_00000008.h5" || rc=$?
[ "$rc" = 1 ] || fail "ckpt.resume=PATH of a renamed copy: exit $rc, expected 1"
expect_refusal "$tmp/r2.log" "step_00000008.h5: its name says step 8 but it holds step 2" "ckpt.resume=PATH of a renamed copy"
"$INSPECT" verify "$tmp/step_00000008.h5" >"$tmp/r3.log" 2>&1 && fail "boost-inspect verify accepts the renamed copy"
grep -q "its name says step 8 but it holds step 2" "$tmp/r3.log" || fail "verify does not name the renamed copy: $(tail -3 "$tmp/r3.log")"
echo "ok: a copy of step 2 named step 8 is skipped (auto) or refused (PATH, verify) with one line; step 4 resumed, kept"

# ---- the checkpoint watchdog during the load at start: nothing trained, exit 75 ------
# (BOOST_CKPT_TEST_DELAY_MS slows the load past ckpt.timeout=1)
for np in 0 2; do
  rc=0
  BOOST_CKPT_TEST_DELAY_MS=1500 timeout 120 $([ "$np" = 0 ] || echo $MPIRUN -n $np) "$TRAIN" --set data.train="$tmp/f.tok" \
    "${COMMON[@]}" "${BASE[@]}" --set train.steps=6 --set ckpt.dir="$n" --set ckpt.timeout=1 >"$tmp/w$np.log" 2>&1 || rc=$?
  [ "$rc" = 75 ] || fail "ckpt.timeout during the load (np=$np): exit $rc, expected 75 (nothing trained): $(tail -3 "$tmp/w$np.log")"
  grep -q "checkpoint watchdog on rank [0-9]: the checkpoint load has run [0-9]* s, longer than ckpt.timeout=1 s; the job is aborted (exit 75) before training" "$tmp/w$np.log" ||
    fail "np=$np: no watchdog line for the load: $(tail -3 "$tmp/w$np.log")"
  ! grep -q "^step" "$tmp/w$np.log" || fail "np=$np: trained after the watchdog fired"
done
echo "ok: ckpt.timeout during the checkpoint load at start ends the job with 75 (alone and under mpirun)"
echo "PASS: resume policy"
