#!/usr/bin/env bash
# The run's histories (/state/val_loss_history, /state/run_starts) across
# rank changes and boost-reshard, as the elastic demo runs them (shortened):
# three jobs on 2 ranks (dp=2), 2 ranks (tp=2, btp) and 1 rank, each going
# on from the last one's checkpoint. Every checkpoint verifies; the newest
# holds every validation of the three jobs (equal to the metrics file's) and
# one start per job with its layout; `boost-inspect plot` marks the two
# restarts with their layouts in the data it hands to gnuplot; boost-reshard
# carries the histories as they are, and a run resumed from its output
# keeps them and adds its own start.
set -euo pipefail
source "$BOOST_SOURCE_DIR/tests/mpi/ckpt_common.bash"
RESHARD=$B/tools/boost-reshard
make_data
RUN=(--set train.val_every=2 --set train.val_batches=2 --set data.val_fraction=0.05 --set ckpt.dir="$tmp/c" --set ckpt.every=2
  --set train.metrics="$tmp/m.jsonl" --set train.grad_accum=2)
train 2 "$tmp/j1.log" "${RUN[@]}" --set train.steps=4 --set parallel.dp=2 --set train.batch_size=1 ||
  fail "job 1 (dp=2): $(tail -3 "$tmp/j1.log")"
train 2 "$tmp/j2.log" "${RUN[@]}" --set train.steps=8 --set parallel.tp=2 --set parallel.tp_mode=btp ||
  fail "job 2 (tp=2): $(tail -3 "$tmp/j2.log")"
train 0 "$tmp/j3.log" "${RUN[@]}" --set train.steps=12 || fail "job 3 (1 rank): $(tail -3 "$tmp/j3.log")"
for f in "$tmp"/c/step_*.h5; do
  "$INSPECT" verify --no-recompute "$f" >"$tmp/v" || fail "verify $(basename "$f"): $(grep BAD "$tmp/v")"
done
"$INSPECT" plot "$tmp/c" --data-dir "$tmp/d" >/dev/null || fail "plot --data-dir"
"$PY" - "$tmp/c/step_00000012.h5" "$tmp/m.jsonl" "$tmp/d" <<'PYEOF' || fail "the histories across the three jobs"
import json, sys
import h5py
path, metrics, d = sys.argv[1:4]
val = {o["step"]: o["val_loss"] for o in map(json.loads, open(metrics)) if "val_loss" in o}
with h5py.File(path, "r") as f:
    v, s = f["state/val_loss_history"][...], f["state/run_starts"][...]
assert [int(x) for x in v[:, 0]] == [2, 4, 6, 8, 10, 12], v
assert all(abs(x - val[int(st)]) <= 1e-6 * abs(x) for st, x in v), (v, val)
# start_step, last_step, world_size, dp, tp, pp, tp_mode, precision of each job
got = [[int(r[k]) for k in (0, 2, 7, 8, 9, 10, 11, 12)] for r in s]
assert got == [[0, 4, 2, 2, 1, 1, 0, 0], [4, 8, 2, 1, 2, 1, 1, 0], [8, 12, 1, 1, 1, 1, 0, 0]], got
assert all(r[5] == 4 and r[6] == 64 for r in s) and s[1][4] == 4 * 4 * 64, s  # global batch 4 of 64 tokens
gp = open(d + "/plot.gp").read()
for want in ("start at step 0: 2 ranks, dp2 tp1 pp1, none, fp32", "restart 1 at step 4: 2 ranks, dp1 tp2 pp1, btp, fp32",
             "restart 2 at step 8: 1 rank, dp1 tp1 pp1, none, fp32"):
    assert want in gp, (want, gp)
assert sum(1 for l in open(d + "/starts_0.dat") if not l.startswith("#")) == 3
print("ok: 6 validations and 3 starts with their layouts across 2, 2 and 1 ranks; plot marks both restarts")
PYEOF

# boost-reshard carries the histories; a run resumed from its output keeps them.
"$RESHARD" "$tmp/c/step_00000012.h5" "$tmp/r.h5" --layout tp=2 --quiet >"$tmp/r.log" 2>&1 || fail "reshard: $(cat "$tmp/r.log")"
"$INSPECT" verify --no-recompute "$tmp/r.h5" >"$tmp/v" || fail "verify of the reshard: $(grep BAD "$tmp/v")"
train 2 "$tmp/j4.log" "${RUN[@]}" --set train.steps=14 --set parallel.tp=2 --set ckpt.resume="$tmp/r.h5" --set ckpt.dir="$tmp/c4" ||
  fail "resume from the reshard: $(tail -3 "$tmp/j4.log")"
"$PY" - "$tmp/c/step_00000012.h5" "$tmp/r.h5" "$tmp/c4/step_00000014.h5" <<'PYEOF' || fail "the histories through boost-reshard"
import sys
import h5py, numpy as np
a, r, c = (h5py.File(p, "r") for p in sys.argv[1:4])
for n in ("state/loss_history", "state/val_loss_history", "state/run_starts"):
    assert np.array_equal(a[n][...], r[n][...]), n + " changed in boost-reshard"
assert np.array_equal(c["state/val_loss_history"][:6], a["state/val_loss_history"][...]) and c["state/val_loss_history"][6, 0] == 14
s = c["state/run_starts"][...]
assert s.shape == (4, 13) and np.array_equal(s[:3, :2], a["state/run_starts"][:, :2]) and s[3, 0] == 12 and s[3, 9] == 2, s
print("ok: boost-reshard kept the histories; the resumed run has 7 validations and 4 starts")
PYEOF
echo "PASS: ckpt_history"
