#!/usr/bin/env bash
# Sixteen ranks (oversubscribed): the tiny preset on dp=4 x tp=2 x pp=2
# saves every 2 steps; kill -9 of every rank while step 4 is being written
# leaves only step 2 committed; the job comes back on another layout of 16
# ranks (dp=2 x tp=4 x pp=2, the global batch kept) and its losses and final
# state equal an uninterrupted run's within fp32 rounding (2e-5: another tp
# sums in another order); boost-reshard rewrites the result for one process
# with the same layout-independent checksums, and both files verify.
source "$(dirname "$0")/ckpt_common.bash"
make_data
RESHARD=$B/tools/boost-reshard
BASE=(--set train.min_lr_ratio=1 --set train.warmup_steps=0 --set ckpt.every=2 --set model.seq_len=32)
A=(--set parallel.dp=4 --set parallel.tp=2 --set parallel.pp=2 --set train.batch_size=1)
Bl=(--set parallel.dp=2 --set parallel.tp=4 --set parallel.pp=2 --set train.batch_size=2)

# ---- the uninterrupted run on A ----------------------------------------------
train 16 "$tmp/ref.log" "${BASE[@]}" "${A[@]}" --set train.steps=6 --set ckpt.dir="$tmp/ref" \
  --set train.metrics="$tmp/ref.jsonl" || fail "uninterrupted 16-rank run: $(tail -5 "$tmp/ref.log")"
echo "ok: 16 ranks (dp=4 tp=2 pp=2) trained 6 steps: $(cd "$tmp/ref" && ls step_* | tr '\n' ' ')"

# ---- the same run killed -9 in the middle of step 4's write -----------------
d=$tmp/ck
BOOST_CKPT_TEST_DELAY_MS=40 $MPIRUN -n 16 "$TRAIN" --set data.train="$tmp/f.tok" "${COMMON[@]}" "${BASE[@]}" "${A[@]}" \
  --set train.steps=1000 --set ckpt.dir="$d" --set train.metrics="$tmp/killed.jsonl" >"$tmp/t1.log" 2>&1 &
mp=$!
CLEANUP="kill -9 \$(pgrep -P $mp) $mp 2>/dev/null"
wait_for "$d/step_00000002.h5" 300 || fail "step 2 was never committed: $(tail -5 "$tmp/t1.log")"
wait_for "$d/step_00000004.h5.tmp" 300 || fail "the write of step 4 never started: $(tail -5 "$tmp/t1.log")"
sleep 0.5
ranks=$(pgrep -P $mp || true)
[ "$(echo "$ranks" | wc -w)" = 16 ] || fail "expected 16 rank processes under mpirun, found: $ranks"
kill -9 $ranks $mp 2>/dev/null || true
wait $mp 2>/dev/null || true
for p in $ranks; do
  for i in $(seq 1 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$p" 2>/dev/null && fail "rank process $p survived kill -9"
done
[ -f "$d/step_00000004.h5.tmp" ] && [ ! -f "$d/step_00000004.h5" ] || fail "the kill missed step 4's write: $(ls "$d")"
[ "$(cat "$d/latest")" = step_00000002.h5 ] || fail "latest = $(cat "$d/latest")"
echo "ok: 16 ranks killed -9 mid-write: $(cd "$d" && ls | tr '\n' ' ')"

# ---- back on another layout of 16 ranks ---------------------------------------
train 16 "$tmp/t2.log" "${BASE[@]}" "${Bl[@]}" --set train.steps=6 --set ckpt.dir="$d" \
  --set train.metrics="$tmp/resumed.jsonl" || fail "resume on dp=2 tp=4 pp=2: $(tail -5 "$tmp/t2.log")"
grep -q "removed 1 temporary left by an interrupted run (step_00000004.h5.tmp)" "$tmp/t2.log" ||
  fail "the temporary was not removed: $(grep checkpoints: "$tmp/t2.log")"
grep -q "checkpoints: resumed from $d/step_00000002.h5 (step 2" "$tmp/t2.log" || fail "did not resume from step 2"
continues_run "$tmp/ref.jsonl" "$tmp/resumed.jsonl" 3 6 || fail "the resumed losses differ from the uninterrupted run's"
"$PY" - "$tmp/ref/step_00000006.h5" "$d/step_00000006.h5" <<'PY' || fail "the final state differs"
import sys
import h5py, numpy as np
worst, where = 0.0, ""
with h5py.File(sys.argv[1], "r") as fa, h5py.File(sys.argv[2], "r") as fb:
    names = []
    fa.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) and n.split("/")[0] in ("model", "optim") else None)
    for n in names:
        a, b = fa[n][()].astype(np.float64), fb[n][()].astype(np.float64)
        if a.shape != b.shape:
            sys.exit(f"{n}: shape {a.shape} vs {b.shape}")
        d = float(np.max(np.abs(a - b))) / max(1.0, float(np.max(np.abs(a))))
        if d > worst:
            worst, where = d, n
print(f"ok: {len(names)} tensors of step 6 equal the uninterrupted run's, worst relative difference {worst:.2e} ({where})")
sys.exit(0 if worst <= 2e-5 else 1)
PY

# ---- boost-reshard to one process; both verify --------------------------------
"$RESHARD" "$d/step_00000006.h5" "$tmp/one.h5" --layout dp=1,tp=1,pp=1 --quiet >"$tmp/reshard.log" 2>&1 ||
  fail "boost-reshard: $(tail -3 "$tmp/reshard.log")"
checksums "$d/step_00000006.h5" >"$tmp/a.sum"
checksums "$tmp/one.h5" >"$tmp/b.sum"
[ -s "$tmp/a.sum" ] && cmp -s "$tmp/a.sum" "$tmp/b.sum" || fail "the resharded checksums differ: $(diff "$tmp/a.sum" "$tmp/b.sum" | head -3)"
"$INSPECT" --verify "$d/step_00000006.h5" >"$tmp/v1.log" 2>&1 || fail "step 6 does not verify: $(tail -3 "$tmp/v1.log")"
"$INSPECT" --verify "$tmp/one.h5" >"$tmp/v2.log" 2>&1 || fail "the resharded file does not verify: $(tail -3 "$tmp/v2.log")"
echo "ok: resharded for one process with identical checksums ($(wc -l <"$tmp/a.sum") tensors); both verify"
echo PASS
