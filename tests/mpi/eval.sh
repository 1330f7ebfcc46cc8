#!/usr/bin/env bash
# boost-eval on a quick-start run (examples/quickstart.ini, 40 steps, val
# every 20): --val on the checkpoint of step N prints the log's `val` figure
# at step N (same digits; the same float in the metrics file; also for a
# bf16 run validating on data.val with more batches than windows); mpirun
# -n 2 gives the same figures as one process (--val, --data with a partial
# last batch, --choice); a multiple-choice fixture with a known answer key
# scores what it must (acc 4/6, acc_norm 6/6, below); --stored-batch prints
# a JSON `loss`; bad input gets one line and exit 1 (usage: 2).
source "$(dirname "$0")/ckpt_common.bash"
make_data
EVAL=$B/tools/boost-eval
[ -x "$EVAL" ] || fail "$EVAL not built"
cd "$tmp"
"$TRAIN" --config "$BOOST_SOURCE_DIR/examples/quickstart.ini" --set data.train="$tmp/f.tok" --set train.steps=40 \
  --set train.val_every=20 --set train.val_batches=4 --set ckpt.every=20 --set ckpt.dir="$tmp/ck" \
  --set train.metrics="$tmp/m.jsonl" --set ckpt.activations=sample --set train.threads=1 >"$tmp/train.log" 2>&1 ||
  fail "quick-start run: $(tail -3 "$tmp/train.log")"

json_field() { "$PY" -c 'import json,sys; v = json.load(open(sys.argv[1]))[sys.argv[2]]; print(repr(v))' "$1" "$2"; }

for step in 20 40; do
  ck=$tmp/ck/step_000000$step.h5
  logged=$(grep "^step *$step/" "$tmp/train.log" | sed -n 's/.*| val \([0-9.]*\) .*/\1/p')
  [ -n "$logged" ] || fail "no val figure in the log at step $step"
  "$EVAL" "$ck" --val >"$tmp/e$step.txt" 2>&1 || fail "boost-eval --val step $step: $(cat "$tmp/e$step.txt")"
  printed=$(sed -n 's/^loss \([0-9.]*\) .*/\1/p' "$tmp/e$step.txt")
  [ "$printed" = "$logged" ] || fail "step $step: boost-eval --val printed $printed, the log's val is $logged"
  "$EVAL" "$ck" --val --json >"$tmp/e$step.json" 2>"$tmp/err.log" || fail "--val --json: $(cat "$tmp/err.log")"
  metric=$("$PY" -c 'import json,sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    if o["step"] == int(sys.argv[2]): print(repr(o["val_loss"]))' "$tmp/m.jsonl" "$step")
  [ "$(json_field "$tmp/e$step.json" loss)" = "$metric" ] ||
    fail "step $step: JSON loss $(json_field "$tmp/e$step.json" loss), metrics val_loss $metric"
  $MPIRUN -n 2 "$EVAL" "$ck" --val --json >"$tmp/e${step}_2.json" 2>"$tmp/mpi.err" || fail "mpirun -n 2 --val: $(cat "$tmp/mpi.err")"
  [ "$(json_field "$tmp/e${step}_2.json" loss)" = "$metric" ] || fail "step $step: mpirun -n 2 gives $(json_field "$tmp/e${step}_2.json" loss), one process $metric"
  echo "ok: step $step: boost-eval --val $printed = the log's val $logged (bits: $metric), also under mpirun -n 2"
done
CK=$tmp/ck

head -c 20000 /usr/share/games/fortunes/fortunes > "$tmp/small.txt"
"$B/tools/boost-data" -o "$tmp/small.tok" "$tmp/small.txt" >/dev/null 2>&1 || fail "boost-data small"

# A bf16 run validating on a separate file (data.val), 200 batches of 2
# windows of 64 tokens: more than the file's 312, so the trainer's rule
# starts over at the first window; boost-eval follows it, in bf16 (the
# checkpoint's precision by default).
"$TRAIN" --set data.train="$tmp/f.tok" "${COMMON[@]}" --set model.seq_len=64 --set data.val="$tmp/small.tok" --set train.val_batches=200 \
  --set train.steps=4 --set train.precision=bf16 --set ckpt.dir="$tmp/bf" --set train.metrics="$tmp/bf.jsonl" >"$tmp/bf.log" 2>&1 ||
  fail "bf16 run: $(tail -3 "$tmp/bf.log")"
"$EVAL" "$tmp/bf" --val --json >"$tmp/bf.json" 2>"$tmp/err.log" || fail "--val bf16: $(cat "$tmp/err.log")"
metric=$("$PY" -c 'import json,sys; print(repr([json.loads(l) for l in open(sys.argv[1])][-1]["val_loss"]))' "$tmp/bf.jsonl")
[ "$(json_field "$tmp/bf.json" loss)" = "$metric" ] || fail "bf16: boost-eval --val $(json_field "$tmp/bf.json" loss), the run's val $metric"
echo "ok: bf16 run validating on data.val, 200 batches (wrapping): boost-eval --val = the run's val ($metric)"

# Any shard, whole: 156 windows in batches of 6 (the last one partial), one
# process against three.
"$EVAL" "$CK" --data "$tmp/small.tok" --batch-size 6 --json >"$tmp/d1.json" 2>"$tmp/err.log" || fail "--data: $(cat "$tmp/err.log")"
$MPIRUN -n 3 "$EVAL" "$CK" --data "$tmp/small.tok" --batch-size 6 --json >"$tmp/d3.json" 2>"$tmp/mpi.err" || fail "--data mpirun: $(cat "$tmp/mpi.err")"
"$PY" - "$tmp/d1.json" "$tmp/d3.json" <<'PYEOF' || fail "--data: one process and three differ, or the figures do not hang together"
import json, math, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
windows = (20001 - 1) // 128  # the shard: EOT + 20000 bytes
assert a["tokens"] == windows * 128 and a["batches"] == -(-windows // 6), a
for k in ("loss", "perplexity", "bits_per_byte", "tokens", "batches"):
    assert a[k] == b[k], (k, a[k], b[k])
assert abs(a["perplexity"] - math.exp(a["loss"])) < 1e-9 * a["perplexity"]
assert abs(a["bits_per_byte"] - a["loss"] / math.log(2)) < 1e-12, a
print("ok: --data: loss %.4f over %d batches (the last partial), 1 process = 3" % (a["loss"], a["batches"]))
PYEOF

# --tokenizer: an llm.c tokenizer file (version 1, 257 tokens of 2 bytes
# each) halves bits per byte.
"$PY" - "$tmp/tok2.bin" <<'PYEOF'
import struct, sys
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256I", 20240328, 1, 257, *([0] * 253)))
    for i in range(257):
        f.write(bytes([2, i % 256, 32]))
PYEOF
"$EVAL" "$CK" --data "$tmp/small.tok" --batch-size 6 --tokenizer "$tmp/tok2.bin" --json >"$tmp/d2.json" 2>"$tmp/err.log" ||
  fail "--tokenizer: $(cat "$tmp/err.log")"
"$PY" -c 'import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["loss"] == b["loss"] and abs(b["bits_per_byte"] - a["bits_per_byte"] / 2) < 1e-12, (a, b)' "$tmp/d1.json" "$tmp/d2.json" ||
  fail "--tokenizer: bits per byte $(json_field "$tmp/d2.json" bits_per_byte), expected half of $(json_field "$tmp/d1.json" bits_per_byte)"
echo "ok: --tokenizer FILE: bits per byte from the bytes each token stands for"

# Multiple choice with a known answer key on the step-40 model: four items
# whose right ending is English and whose others are strings of rare
# letters or symbols of the same length (acc and acc_norm both right), and
# two whose right ending is long English against two garbage bytes: the
# summed log-likelihood prefers the short one (acc wrong), the per-byte one
# the English (acc_norm right). acc = 4/6, acc_norm = 6/6.
cat >"$tmp/mc.jsonl" <<'EOF'
{"ctx": "The meaning of life is", "endings": [" a question that many people ask.", "qxzjqvkzwqxjzvqkxzqwjxkzqvj", "#}@|~^`{#}@|~^`{#}@|~^`{#}@", "ZQXJKVZQXJKVZQXJKVZQXJKVZQX"], "label": 0}
{"ctx": "You will be", "endings": ["kqxzjvwkqxzjvwkqxz", "}{|~}{|~}{|~}{|~}{", "happy and you will", "QJXZVKQJXZVKQJXZVK"], "label": "2"}

{"context": "He said that the", "endings": ["@#$%^&*@#$%^", "man who was ", "XQZJXQZJXQZJ"], "label": 1}
{"ctx": "", "endings": ["zqxj vkqw", "the other"], "label": 1}
{"ctx": "It is not", "endings": ["zq", "that there is nothing in the world that would make it better"], "label": 1}
{"ctx": "A man", "endings": ["who is in the habit of doing the things that he does", "qx"], "label": 0}
EOF
"$EVAL" "$CK" --choice "$tmp/mc.jsonl" --json >"$tmp/c1.json" 2>"$tmp/err.log" || fail "--choice: $(cat "$tmp/err.log")"
$MPIRUN -n 2 "$EVAL" "$CK" --choice "$tmp/mc.jsonl" --json >"$tmp/c2.json" 2>"$tmp/mpi.err" || fail "--choice mpirun: $(cat "$tmp/mpi.err")"
"$PY" - "$tmp/c1.json" "$tmp/c2.json" <<'PYEOF' || fail "multiple choice: $(cat "$tmp/c1.json")"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert (a["examples"], a["correct"], a["correct_norm"]) == (6, 4, 6), a
assert abs(a["acc"] - 4 / 6) < 1e-12 and a["acc_norm"] == 1.0, a
assert all(a[k] == b[k] for k in ("acc", "acc_norm", "correct", "correct_norm")), (a, b)
print("ok: multiple choice: acc 4/6, acc_norm 6/6 as the answer key says, 1 process = 2")
PYEOF

"$EVAL" "$CK" --stored-batch --json >"$tmp/s.json" 2>"$tmp/err.log" || fail "--stored-batch: $(cat "$tmp/err.log")"
loss=$(json_field "$tmp/s.json" loss)
"$PY" -c "import sys; sys.exit(0 if 0 < $loss < 10 else 1)" || fail "--stored-batch loss $loss"
echo "ok: --stored-batch --json: loss $loss"

# Bad input: one line, exit 1 (2 for usage); nothing written.
expect() { # expect STATUS PATTERN args...
  local want=$1 pat=$2 rc=0
  shift 2
  "$EVAL" "$@" >"$tmp/bad.out" 2>"$tmp/bad.err" || rc=$?
  [ "$rc" = "$want" ] || fail "boost-eval $*: exit $rc, expected $want ($(cat "$tmp/bad.err"))"
  [ "$(wc -l <"$tmp/bad.err")" = 1 ] || fail "boost-eval $*: not one line: $(cat "$tmp/bad.err")"
  grep -q -- "$pat" "$tmp/bad.err" || fail "boost-eval $*: '$(cat "$tmp/bad.err")' lacks '$pat'"
  [ ! -s "$tmp/bad.out" ] || fail "boost-eval $*: printed results on a failure: $(cat "$tmp/bad.out")"
}
mkdir -p "$tmp/empty"
echo "not a checkpoint" >"$tmp/junk.h5"
printf '{"ctx": "a", "endings": ["b", "c"], "label": 5}\n' >"$tmp/badlabel.jsonl"
printf '{"ctx": "a", "endings": ["b", "c"], "label": 0}\nnot json\n' >"$tmp/badline.jsonl"
printf 'garbage tokenizer' >"$tmp/tok.bin"
expect 2 "give one of" "$CK"
expect 2 "give one of" "$CK" --val --choice "$tmp/mc.jsonl"
expect 2 "no checkpoint given" --val
expect 2 "unknown option" "$CK" --val --bogus
expect 2 "whole number" "$CK" --data "$tmp/small.tok" --batches 0
expect 1 "" "$tmp/empty" --val
expect 1 "" "$tmp/junk.h5" --val
expect 1 "$tmp/nope.tok" "$CK" --data "$tmp/nope.tok"
expect 1 "exceeds the model's" "$CK" --data "$tmp/small.tok" --seq-len 4096
expect 1 "line 1: .label. 5 is not an index" "$CK" --choice "$tmp/badlabel.jsonl"
expect 1 "line 2: not a JSON object" "$CK" --choice "$tmp/badline.jsonl"
expect 1 "not an llm.c tokenizer file" "$CK" --data "$tmp/small.tok" --tokenizer "$tmp/tok.bin"
"$TRAIN" --set data.train="$tmp/f.tok" "${COMMON[@]}" --set train.steps=1 --set ckpt.dir="$tmp/noacts" >/dev/null 2>&1 ||
  fail "run without activations"
expect 1 "stores no batch" "$tmp/noacts" --stored-batch
[ "$(ls "$tmp" | grep -c '\.tmp$')" = 0 ] || fail "a temporary was left behind"
echo "ok: bad input: one line each, exit 1 (usage 2)"
