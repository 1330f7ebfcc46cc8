#!/usr/bin/env bash
# A GPT-2-vocabulary model end to end: fortunes tokenized with GPT-2's rank
# file, a tiny CoLA model trained on them, boost-generate from a text prompt
# (the tokenizer found next to the checkpoint by its recorded hash),
# boost-export --hf writing vocab.json + merges.txt derived from the ranks;
# then transformers (tests/cli/bpe_tiktoken_check.py hf): AutoTokenizer
# encodes the held corpus as tiktoken does and the prompt as boost-generate
# did, and AutoModelForCausalLM's greedy tokens and text are boost-generate's
# (on a freshly initialised model: 16 tokens, at least 8 distinct). A
# GPT2TokenizerFast made from the export and saved as tokenizer.json encodes
# the held corpus in boost-data as the rank file does.
# boost-eval: --data's bits per byte is the loss over the bytes the scored
# targets decode to under the rank file (recomputed here from the shard),
# --choice encodes text with the checkpoint's tokenizer (the same answers
# with the rank file given). Also: the same checks on an export given the
# rank file with --tokenizer, and another tokenizer's rank file refused with
# one line by boost-export, boost-generate and boost-eval. A model trained on
# llama3-pre-tokenized shards exports a tokenizer.json (a regex Split) that
# AutoTokenizer reads: the corpus as tiktoken under the llama3 pattern.
#
# Skips (77) without tiktoken/transformers (.cache/pyenv) or GPT-2's rank
# file (.cache/tokenizers/gpt2.tiktoken; scripts/setup-pyenv.sh makes both).
set -euo pipefail
source "$BOOST_SOURCE_DIR/tests/mpi/ckpt_common.bash"
DATA=$B/tools/boost-data
GENERATE=$B/tools/boost-generate
EXPORT=$B/tools/boost-export
EVAL=$B/tools/boost-eval
CHECK=$BOOST_SOURCE_DIR/tests/cli/bpe_tiktoken_check.py
PYENV=${BOOST_PYENV:-$BOOST_SOURCE_DIR/.cache/pyenv}
GPT2=${BOOST_GPT2_RANKS:-$BOOST_SOURCE_DIR/.cache/tokenizers/gpt2.tiktoken}
if ! "$PYENV/bin/python" -c 'import tiktoken, transformers, torch' 2>/dev/null; then
  echo "SKIP: tiktoken/transformers/torch not in $PYENV (scripts/setup-pyenv.sh installs them)"
  exit 77
fi
[[ -s $GPT2 ]] || { echo "SKIP: no GPT-2 rank file at $GPT2 (scripts/setup-pyenv.sh fetches it)"; exit 77; }

mkdir "$tmp/run"
cp "$GPT2" "$tmp/run/gpt2.tiktoken" # next to the checkpoints: found by its hash
"$DATA" -q --tokenizer "$tmp/run/gpt2.tiktoken" -o "$tmp/sci.tok" /usr/share/games/fortunes/science >/dev/null ||
  fail "boost-data"
"$TRAIN" "${COMMON[@]}" --set data.train="$tmp/sci.tok" --set model.vocab=50257 --set train.steps=60 \
  --set train.lr=3e-3 --set ckpt.dir="$tmp/run/ck" --set ckpt.every=60 >"$tmp/train.log" 2>&1 ||
  fail "train: $(tail -3 "$tmp/train.log")"
prompt="The scientist said that"
"$GENERATE" --prompt "$prompt" --temperature 0 --max-new-tokens 12 --json "$tmp/run/ck" >"$tmp/gen.json" \
  2>"$tmp/gen.err" || fail "boost-generate: $(cat "$tmp/gen.err")"
"$PY" - "$tmp/gen.json" "$prompt" <<'PYEOF'
import json, sys
g = json.load(open(sys.argv[1]))
g["prompt_text"] = sys.argv[2]
assert g["prompt_tokens"][0] == 50256 and len(g["prompt_tokens"]) > 1, g["prompt_tokens"]
json.dump(g, open(sys.argv[1], "w"))
PYEOF
"$EXPORT" --hf "$tmp/hf" "$tmp/run/ck" --quiet >/dev/null 2>"$tmp/export.err" || fail "boost-export: $(cat "$tmp/export.err")"
[ "$(wc -l <"$tmp/hf/merges.txt")" -eq 50001 ] || fail "merges.txt: $(wc -l <"$tmp/hf/merges.txt") lines, GPT-2 has 50000 merges"
"$PYENV/bin/python" "$CHECK" corpus "$tmp/corpus"

# The greedy comparison on a model whose continuation is varied: the trained
# tiny model above only repeats a newline, which any id mix-up still gives.
# A freshly initialised one (one step, init_std 0.5) continues the prompt
# with many distinct tokens, so a tokenizer or id mismatch shows.
"$TRAIN" "${COMMON[@]}" --set data.train="$tmp/sci.tok" --set model.vocab=50257 --set train.steps=1 \
  --set model.init_std=0.5 --set ckpt.dir="$tmp/run/fresh" --set ckpt.every=1 >"$tmp/train.log" 2>&1 ||
  fail "train fresh: $(tail -3 "$tmp/train.log")"
"$GENERATE" --prompt "$prompt" --temperature 0 --max-new-tokens 16 --json "$tmp/run/fresh" >"$tmp/fresh.json" \
  2>"$tmp/gen.err" || fail "boost-generate fresh: $(cat "$tmp/gen.err")"
"$PY" - "$tmp/fresh.json" "$prompt" <<'PYEOF' || fail "the fresh model's continuation is not varied"
import json, sys
g = json.load(open(sys.argv[1]))
g["prompt_text"] = sys.argv[2]
assert len(g["tokens"]) == 16 and len(set(g["tokens"])) >= 8, g["tokens"]
assert all(t != 50256 for t in g["tokens"]), g["tokens"]
json.dump(g, open(sys.argv[1], "w"))
PYEOF
"$EXPORT" --hf "$tmp/hf-fresh" "$tmp/run/fresh" --quiet >/dev/null 2>"$tmp/export.err" ||
  fail "boost-export fresh: $(cat "$tmp/export.err")"
"$PYENV/bin/python" "$CHECK" hf "$tmp/hf-fresh" "$GPT2" "$tmp/corpus" "$tmp/fresh.json" || fail "transformers differs"
# The same vocabulary as a Hugging Face tokenizer.json (GPT2TokenizerFast made
# from the exported vocab.json + merges.txt, saved by transformers): boost-data
# reads it and encodes the held corpus to exactly the rank file's tokens.
"$PYENV/bin/python" - "$tmp/hf" "$tmp/hfjson" <<'PYEOF' || fail "GPT2TokenizerFast from the export"
import sys
from transformers import GPT2TokenizerFast
t = GPT2TokenizerFast(vocab_file=sys.argv[1] + "/vocab.json", merges_file=sys.argv[1] + "/merges.txt")
t.save_pretrained(sys.argv[2])
PYEOF
[ -s "$tmp/hfjson/tokenizer.json" ] || fail "transformers wrote no tokenizer.json"
for tk in "$GPT2" "$tmp/hfjson/tokenizer.json"; do
  "$DATA" -q --no-fortune-split --tokenizer "$tk" -o "$tmp/corpus-$(basename "$tk").tok" "$tmp/corpus" >/dev/null \
    2>"$tmp/data.err" || fail "boost-data --tokenizer $tk: $(cat "$tmp/data.err")"
done
cmp -s <(tail -c +257 "$tmp/corpus-gpt2.tiktoken.tok") <(tail -c +257 "$tmp/corpus-tokenizer.json.tok") ||
  fail "the held corpus: tokenizer.json gives other tokens than the rank file"
# A checkpoint trained on the tokenizer.json's shard records that tokenizer;
# boost-generate finds the tokenizer.json next to it and encodes the prompt
# as the rank file does.
"$TRAIN" "${COMMON[@]}" --set data.train="$tmp/corpus-tokenizer.json.tok" --set model.vocab=50257 --set train.steps=1 \
  --set ckpt.dir="$tmp/hfjson/ck" --set ckpt.every=1 >"$tmp/train.log" 2>&1 || fail "train on the tokenizer.json shard"
"$GENERATE" --prompt "$prompt" --temperature 0 --max-new-tokens 2 --json "$tmp/hfjson/ck" >"$tmp/json-gen.json" \
  2>"$tmp/gen.err" || fail "boost-generate with the tokenizer.json found: $(cat "$tmp/gen.err")"
"$PY" -c 'import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:]); assert a["prompt_tokens"]==b["prompt_tokens"] and a["tokenizer"]=="bpe-gpt2", (a,b)' \
  "$tmp/json-gen.json" "$tmp/gen.json" || fail "the tokenizer.json's prompt tokens differ"

# boost-eval --data: bits per byte = loss x tokens / ln 2 / the bytes of the
# scored targets (whole shard: windows of seq_len + 1 tokens, stride seq_len).
"$EVAL" "$tmp/run/ck" --data "$tmp/sci.tok" --json >"$tmp/eval.json" 2>"$tmp/eval.err" || fail "boost-eval --data: $(cat "$tmp/eval.err")"
"$PYENV/bin/python" - "$tmp/eval.json" "$tmp/sci.tok" "$GPT2" <<'PYEOF' || fail "bits per byte"
import json, math, struct, sys
from tiktoken.load import load_tiktoken_bpe
e = json.load(open(sys.argv[1]))
raw = open(sys.argv[2], "rb").read()
n = struct.unpack_from("<Q", raw, 24)[0]
tok = struct.unpack_from("<%dH" % n, raw, 256)
size = {r: len(b) for b, r in load_tiktoken_bpe(sys.argv[3]).items()}
T, B = e["seq_len"], e["batch_size"]
windows = (n - 1) // T
assert e["tokens"] == windows * T, e
nbytes = sum(size.get(tok[w * T + t + 1], 0) for w in range(windows) for t in range(T))  # 50256: no text
want = e["loss"] * e["tokens"] / math.log(2) / nbytes
assert abs(e["bits_per_byte"] - want) < 1e-6 * want, (e["bits_per_byte"], want)
print("bits per byte %.4f over %d bytes of %d targets" % (want, nbytes, e["tokens"]))
PYEOF
printf '%s\n' '{"ctx": "The scientist said", "endings": ["that the experiment worked.", "purple"], "label": 0}' \
  '{"ctx": "", "endings": ["A computer", "zzzz qqqq"], "label": 0}' >"$tmp/choice.jsonl"
"$EVAL" "$tmp/run/ck" --choice "$tmp/choice.jsonl" --json >"$tmp/c1.json" 2>"$tmp/eval.err" || fail "--choice: $(cat "$tmp/eval.err")"
"$EVAL" "$tmp/run/ck" --choice "$tmp/choice.jsonl" --tokenizer "$GPT2" --json >"$tmp/c2.json" 2>"$tmp/eval.err" ||
  fail "--choice --tokenizer: $(cat "$tmp/eval.err")"
"$PY" -c 'import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:]); assert a["examples"]==2 and all(a[k]==b[k] for k in ("acc","acc_norm","correct")), (a,b)' \
  "$tmp/c1.json" "$tmp/c2.json" || fail "--choice with the rank file found and given differ"

# --tokenizer FILE: the same folder; another tokenizer's file: refused.
"$EXPORT" --hf "$tmp/hf2" "$tmp/run/ck" --tokenizer "$GPT2" --quiet >/dev/null 2>"$tmp/export.err" ||
  fail "boost-export --tokenizer: $(cat "$tmp/export.err")"
cmp "$tmp/hf/merges.txt" "$tmp/hf2/merges.txt" && cmp "$tmp/hf/vocab.json" "$tmp/hf2/vocab.json" ||
  fail "--tokenizer FILE wrote other tokenizer files"
head -n 1000 "$GPT2" >"$tmp/other.tiktoken"
for tool in export generate eval; do
  case $tool in
  export) cmd=("$EXPORT" --hf "$tmp/hf3" "$tmp/run/ck" --tokenizer "$tmp/other.tiktoken" --quiet) ;;
  generate) cmd=("$GENERATE" --prompt x --tokenizer "$tmp/other.tiktoken" "$tmp/run/ck") ;;
  eval) cmd=("$EVAL" "$tmp/run/ck" --choice "$tmp/choice.jsonl" --tokenizer "$tmp/other.tiktoken") ;;
  esac
  if "${cmd[@]}" >/dev/null 2>"$tmp/err"; then fail "$tool with another tokenizer's file: exit 0"; fi
  [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "the checkpoint was trained on bpe-gpt2:" "$tmp/err" ||
    fail "$tool with another tokenizer's file: $(cat "$tmp/err")"
done
[ ! -e "$tmp/hf3" ] || fail "a refused export left its folder"

mkdir "$tmp/l3" && cp "$GPT2" "$tmp/l3/gpt2.tiktoken"
"$DATA" -q --tokenizer "$tmp/l3/gpt2.tiktoken" --pretokenizer llama3 -o "$tmp/l3.tok" /usr/share/games/fortunes/science \
  >/dev/null || fail "boost-data llama3"
"$TRAIN" "${COMMON[@]}" --set data.train="$tmp/l3.tok" --set model.vocab=50257 --set train.steps=1 \
  --set ckpt.dir="$tmp/l3/ck" --set ckpt.every=1 >"$tmp/train.log" 2>&1 || fail "train llama3: $(tail -3 "$tmp/train.log")"
"$EXPORT" --hf "$tmp/hf-l3" "$tmp/l3/ck" --quiet >/dev/null 2>"$tmp/export.err" || fail "boost-export llama3: $(cat "$tmp/export.err")"
[ -f "$tmp/hf-l3/tokenizer.json" ] || fail "no tokenizer.json for the llama3 pre-tokenizer"
"$PYENV/bin/python" "$CHECK" hf-tokenizer "$tmp/hf-l3" "$GPT2" llama3 "$tmp/corpus" || fail "transformers differs (llama3)"
echo "PASS: bpe_export"
