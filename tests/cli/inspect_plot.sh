#!/usr/bin/env bash
# The run's histories in the checkpoint and `boost-inspect plot` (docs/INSPECT.md):
# the quick start's job (examples/quickstart.ini, shortened) keeps its three
# validation losses in the checkpoint (/state/val_loss_history) and plot
# hands them to gnuplot with the training loss, the committed checkpoints,
# tokens/s and stalls; a resume in another precision keeps the histories and
# adds a start that plot marks; --compare hands over both runs; summary and
# verify read the histories; no dataset an inspect command reads is left
# unwritten by the trainer (the schema table, ckpt/format/ckpt_meta.h, against a
# trained checkpoint); bad input gets one line.
set -euo pipefail
source "$BOOST_SOURCE_DIR/tests/mpi/ckpt_common.bash"
make_data
QS=(--config "$BOOST_SOURCE_DIR/examples/quickstart.ini" --set data.train="$tmp/f.tok" --set train.steps=30
  --set train.val_every=10 --set train.val_batches=2 --set ckpt.every=10 --set train.batch_size=2 --set model.seq_len=32
  --set train.threads=1 --set ckpt.dir="$tmp/c" --set train.metrics="$tmp/m.jsonl")
"$TRAIN" "${QS[@]}" >"$tmp/t1.log" 2>&1 || fail "quick start job: $(tail -3 "$tmp/t1.log")"
"$INSPECT" verify "$tmp/c" >"$tmp/v" || fail "verify: $(cat "$tmp/v")"
"$INSPECT" summary "$tmp/c" | grep -Eq "validation loss: 3 values, last [0-9.]+ at step 30" ||
  fail "summary does not show the last validation: $("$INSPECT" summary "$tmp/c" | grep -i valid)"

# The data handed to gnuplot (--data-dir without -o: no gnuplot needed).
"$INSPECT" plot "$tmp/c" --data-dir "$tmp/d1" >"$tmp/p.log" || fail "plot --data-dir: $(cat "$tmp/p.log")"
"$PY" - "$tmp/d1" "$tmp/m.jsonl" <<'PYEOF' || fail "the quick start's plot data"
import json, sys
d, metrics = sys.argv[1], sys.argv[2]
rows = lambda n: [list(map(float, l.split())) for l in open("%s/%s_0.dat" % (d, n)) if not l.startswith("#")]
val = {o["step"]: o["val_loss"] for o in map(json.loads, open(metrics)) if "val_loss" in o}
v = rows("val")
assert [r[0] for r in v] == [10, 20, 30], v
assert all(abs(r[2] - val[int(r[0])]) < 1e-6 * val[int(r[0])] for r in v), (v, val)
assert [r[0] for r in rows("ckpt")] == [10, 20, 30], rows("ckpt")
assert len(rows("loss")) == 30 and len(rows("tput")) == 30 and len(rows("stall")) == 3
assert rows("starts") == [[0, 0, 1, 1, 1, 1, 0, 0]], rows("starts")
gp = open(d + "/plot.gp").read()
for want in ("'val_0.dat'", "'ckpt_0.dat'", "'tput_0.dat'", "'stall_0.dat'", "multiplot",
             "start at step 0: 1 rank, dp1 tp1 pp1, none, fp32"):
    assert want in gp, want
print("ok: 3 validation points, 3 checkpoints, 30 tokens/s, 3 stalls, 1 start")
PYEOF

# Resume in bf16 to step 40: the histories go on, a second start with its precision.
"$TRAIN" "${QS[@]}" --set train.steps=40 --set train.precision=bf16 >"$tmp/t2.log" 2>&1 || fail "resume: $(tail -3 "$tmp/t2.log")"
"$INSPECT" verify "$tmp/c" >"$tmp/v" || fail "verify after the resume: $(cat "$tmp/v")"
"$INSPECT" plot "$tmp/c" --data-dir "$tmp/d2" --x tokens >/dev/null || fail "plot after the resume"
"$PY" - "$tmp/d2" <<'PYEOF' || fail "the resumed run's plot data"
import sys
d = sys.argv[1]
rows = lambda n: [list(map(float, l.split())) for l in open("%s/%s_0.dat" % (d, n)) if not l.startswith("#")]
assert [r[0] for r in rows("val")] == [10, 20, 30, 40], rows("val")
s = rows("starts")
assert [r[0] for r in s] == [0, 30] and s[1][1] == 30 * 2 * 32 and s[1][7] == 1, s   # tokens at step 30, bf16
gp = open(d + "/plot.gp").read()
assert "restart 1 at step 30: 1 rank, dp1 tp1 pp1, none, bf16" in gp and "set xlabel 'tokens'" in gp, gp
assert "using 2:3" in gp
print("ok: the resume kept 3 validations and added its own; its start is marked")
PYEOF

# --compare: a second run; both handed over.
"$TRAIN" "${QS[@]}" --set train.steps=20 --set ckpt.dir="$tmp/c2" --set train.lr=1e-3 --set train.metrics= >"$tmp/t3.log" 2>&1 ||
  fail "second run: $(tail -3 "$tmp/t3.log")"
"$INSPECT" plot --json --compare "$tmp/c" "$tmp/c2" --data-dir "$tmp/d3" >"$tmp/cmp.json" || fail "plot --compare"
"$PY" - "$tmp/d3" "$tmp/cmp.json" <<'PYEOF' || fail "the compared runs' plot data"
import json, sys
d = sys.argv[1]
j = json.load(open(sys.argv[2]))
assert [r["steps"] for r in j["runs"]] == [40, 20] and [r["val_points"] for r in j["runs"]] == [4, 2], j
n = lambda f: sum(1 for l in open("%s/%s" % (d, f)) if not l.startswith("#"))
assert n("loss_0.dat") == 40 and n("loss_1.dat") == 20 and n("val_1.dat") == 2
gp = open(d + "/plot.gp").read()
assert "'loss_0.dat'" in gp and "'loss_1.dat'" in gp and "'val_1.dat'" in gp and "multiplot" not in gp
print("ok: --compare hands over both runs")
PYEOF
if command -v gnuplot >/dev/null; then
  for args in "$tmp/c" "--compare $tmp/c $tmp/c2"; do
    # shellcheck disable=SC2086 # args holds the paths
    "$INSPECT" plot $args -o "$tmp/p.png" >/dev/null || fail "plot $args -o"
    [ "$(head -c 4 "$tmp/p.png" | tail -c 3)" = PNG ] || fail "plot $args wrote no PNG"
  done
else
  echo "note: gnuplot not installed, no PNG drawn"
fi

# No dead paths: every state dataset the schema says boost-inspect reads,
# every root attribute a training run writes, and every /state/ name the
# inspect sources spell out, is in the trained checkpoint.
"$PY" - "$BOOST_SOURCE_DIR" "$tmp/c" <<'PYEOF' || fail "a dataset or attribute inspect reads is not written by the trainer"
import glob, os, re, sys
import h5py
src, cdir = sys.argv[1], sys.argv[2]
meta = open(os.path.join(src, "ckpt/format/ckpt_meta.h")).read()
sets = re.findall(r"X\((\w+), F(?:32|64), (?:\d+|CKPT_START_NCOLS), (CKPT_META_[\w |]+)\)", meta)
attrs = re.findall(r"X\(\w+, (\w+), (?:I64|F64|STR), (CKPT_META_[\w |]+), ", meta)
assert len(sets) >= 3 and len(attrs) >= 20, (sets, attrs)
names = set()
for f in glob.glob(os.path.join(src, "tools/inspect_*.c")):
    names |= {a or b for a, b in re.findall(r'/state/(\w+)|CKPT_GROUP_STATE "/(\w+)', open(f).read())}
with h5py.File(os.path.join(cdir, open(os.path.join(cdir, "latest")).read().strip()), "r") as f:
    for n, flags in sets:
        if "CKPT_META_INSPECT" in flags:
            assert "CKPT_META_RUN" in flags and "state/" + n in f, "/state/%s: inspect reads it, the trainer never writes it" % n
    for n in names:
        assert "state/" + n in f, "/state/%s is named in tools/inspect_*.c, the trainer never writes it" % n
    for n, flags in attrs:
        if "CKPT_META_RUN" in flags or "CKPT_META_PACKAGE" in flags:
            assert n in f.attrs, "root attribute %s: in the schema, not in a training checkpoint" % n
print("ok: %d state datasets and %d root attributes of the schema, %d names in the inspect sources, all written"
      % (len(sets), len(attrs), len(names)))
PYEOF

# Bad input: one line, the usage status 2 or 1.
bad() { # STATUS TEXT ARGS...
  local want=$1 text=$2 rc=0
  shift 2
  "$INSPECT" plot "$@" >/dev/null 2>"$tmp/e" || rc=$?
  [ "$rc" = "$want" ] || fail "plot $*: exit $rc, expected $want"
  [ "$(wc -l <"$tmp/e")" = 1 ] && grep -q "$text" "$tmp/e" || fail "plot $*: not one line saying '$text': $(cat "$tmp/e")"
}
bad 2 "two runs or more" --compare "$tmp/c" -o "$tmp/x.png"
bad 2 "step or tokens" "$tmp/c" --x steps -o "$tmp/x.png"
bad 2 "one PATH" "$tmp/c" "$tmp/c2" -o "$tmp/x.png"
bad 2 "not with --compare" --compare "$tmp/c" "$tmp/c2" --metrics "$tmp/m.jsonl" -o "$tmp/x.png"
bad 1 "nonexistent.jsonl" "$tmp/c" --metrics "$tmp/nonexistent.jsonl" -o "$tmp/x.png"
bad 1 "already holds a plot" "$tmp/c" --data-dir "$tmp/d1"
bad 1 "no such\|No such\|not found\|cannot" "$tmp/none" -o "$tmp/x.png"
[ ! -e "$tmp/x.png" ] || fail "a refused plot wrote its PNG"
echo "PASS: inspect_plot"
