#!/usr/bin/env bash
# The tokenizer travels with the model: a checkpoint records the training
# shards' tokenizer (root attribute `tokenizer`, "NAME:HASH"), and resuming
# it on shards of another tokenizer (same vocabulary size, other
# pre-tokenizer: another hash) is refused with one line, exit 1, the
# checkpoint untouched; the same tokenizer resumes. A training set and a
# validation set of two tokenizers are refused, and so are two shards of
# different tokenizers in one data.train.
set -euo pipefail
source "$BOOST_SOURCE_DIR/tests/mpi/ckpt_common.bash"
DATA=$B/tools/boost-data

# A small byte-level BPE vocabulary: the 256 bytes and a few merges.
"$PY" - "$tmp/small.tiktoken" <<'EOF'
import base64, sys
toks = [bytes([b]) for b in range(256)] + [b"th", b"he", b"the", b"in", b" t"]
with open(sys.argv[1], "w") as f:
    for r, t in enumerate(toks):
        f.write("%s %d\n" % (base64.b64encode(t).decode(), r))
EOF
fortunes=/usr/share/games/fortunes/science
"$DATA" -q --tokenizer "$tmp/small.tiktoken" -o "$tmp/gpt2.tok" $fortunes >/dev/null || fail "boost-data gpt2"
"$DATA" -q --tokenizer "$tmp/small.tiktoken" --pretokenizer llama3 -o "$tmp/llama3.tok" $fortunes >/dev/null ||
  fail "boost-data llama3"
"$DATA" -q -o "$tmp/bytes.tok" $fortunes >/dev/null || fail "boost-data bytes"

run() { # LOG DATA args...
  local log=$1 data=$2
  shift 2
  "$TRAIN" "${COMMON[@]}" --set data.train="$data" --set ckpt.dir="$tmp/ck" --set ckpt.every=2 "$@" >"$log" 2>"$log.err"
}
run "$tmp/a.log" "$tmp/gpt2.tok" --set train.steps=2 || fail "train: $(tail -3 "$tmp/a.log.err")"
ck=$tmp/ck/step_00000002.h5
[ -f "$ck" ] || fail "no checkpoint at step 2"
want="bpe-gpt2:$("$DATA" --info --json "$tmp/gpt2.tok" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["tokenizer_hash"])')"
got=$("$PY" -c 'import h5py,sys; v=h5py.File(sys.argv[1],"r").attrs["tokenizer"]; print(v.decode() if isinstance(v,bytes) else v)' "$ck")
[ "$got" = "$want" ] || fail "checkpoint tokenizer \"$got\", expected \"$want\""

sum=$(sha256sum "$ck")
for other in llama3 bytes; do
  if run "$tmp/b.log" "$tmp/$other.tok" --set train.steps=4; then fail "resume on $other shards: exit 0"; fi
  [ "$(wc -l <"$tmp/b.log.err")" -eq 1 ] || fail "resume on $other shards: not one line: $(cat "$tmp/b.log.err")"
  grep -q "was trained on tokenizer $want, data.train's shards are " "$tmp/b.log.err" ||
    fail "resume on $other: $(cat "$tmp/b.log.err")"
  [ "$(sha256sum "$ck")" = "$sum" ] && [ ! -e "$tmp/ck/step_00000004.h5" ] || fail "resume on $other changed the checkpoints"
done
run "$tmp/c.log" "$tmp/gpt2.tok" --set train.steps=4 || fail "resume on the same tokenizer: $(tail -3 "$tmp/c.log.err")"
[ -f "$tmp/ck/step_00000004.h5" ] || fail "no checkpoint at step 4 after the resume"

# Two tokenizers in one run's data.
if run "$tmp/d.log" "$tmp/gpt2.tok" --set ckpt.dir="$tmp/ck2" --set data.val="$tmp/llama3.tok"; then fail "val of another tokenizer: exit 0"; fi
grep -q "data.val's tokenizer bpe-llama3:.* differs from data.train's bpe-gpt2:" "$tmp/d.log.err" || fail "val: $(cat "$tmp/d.log.err")"
if run "$tmp/e.log" "$tmp/gpt2.tok,$tmp/llama3.tok" --set ckpt.dir="$tmp/ck3"; then fail "mixed shards: exit 0"; fi
grep -q "one tokenizer per data set" "$tmp/e.log.err" || fail "mixed shards: $(cat "$tmp/e.log.err")"
echo "PASS: tokenizer_resume"
