#!/usr/bin/env bash
# Real text with a standard vocabulary, end to end: the Debian fortunes
# tokenized with GPT-2's BPE vocabulary (boost-data --tokenizer, byte-exact
# with tiktoken), cola-60m trained on them for a few minutes, text generated
# from a text prompt (boost-generate finds the rank file by the hash the
# checkpoint records), the model exported (boost-export --hf: safetensors,
# the CoLA remote code, vocab.json + merges.txt derived from the ranks) and
# loaded in transformers, which answers the same prompt with the same tokens.
#
#   bash examples/gpt2_fortunes.sh [OUT_DIR]          (default runs/gpt2-fortunes)
#
# Needs a build (bash scripts/build.sh) and GPT-2's rank file
# (.cache/tokenizers/gpt2.tiktoken: bash scripts/setup-pyenv.sh fetches it,
# with the transformers the last step uses; BOOST_GPT2_RANKS names another
# copy). STEPS (default 40: about 8 minutes on 2 cores, docs/DATA_FORMAT.md
# records a run: its greedy continuation is still whitespace), PRESET (default
# cola-60m), THREADS and PROMPT change the run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BOOST_BUILD_DIR:-$root/build}
out=${1:-$root/runs/gpt2-fortunes}
ranks=${BOOST_GPT2_RANKS:-$root/.cache/tokenizers/gpt2.tiktoken}
pyenv=${BOOST_PYENV:-$root/.cache/pyenv}
steps=${STEPS:-40}
preset=${PRESET:-cola-60m}
threads=${THREADS:-$(nproc)}
prompt=${PROMPT:-"A computer scientist is"}
[ -x "$build/trainer/boost-train" ] || { echo "gpt2_fortunes: build first: bash scripts/build.sh" >&2; exit 1; }
[ -s "$ranks" ] || { echo "gpt2_fortunes: no GPT-2 rank file at $ranks: bash scripts/setup-pyenv.sh" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
# The rank file next to the checkpoints: boost-generate, boost-eval and
# boost-export find it there by the hash the checkpoint records
# (elsewhere: BOOST_TOKENIZER_PATH, or --tokenizer FILE).
cp "$ranks" "$out/gpt2.tiktoken"

echo "== tokenize: GPT-2 BPE (<|endoftext|> = 50256 before every fortune)"
"$build/tools/boost-data" --tokenizer "$out/gpt2.tiktoken" --pretokenizer gpt2 -o "$out/fortunes-gpt2.tok" \
  /usr/share/games/fortunes
"$build/tools/boost-data" --info "$out/fortunes-gpt2.tok" | grep -E "tokens|vocab|tokenizer"

echo "== train: $preset, GPT-2's 50257 tokens, $steps steps"
"$build/trainer/boost-train" --set model.preset="$preset" --set model.vocab=50257 --set data.train="$out/fortunes-gpt2.tok" \
  --set train.steps="$steps" --set train.batch_size=8 --set train.lr=3e-3 --set train.warmup_steps=20 \
  --set train.val_every=100 --set train.log_every=25 --set train.threads="$threads" \
  --set ckpt.dir="$out/ckpt" --set ckpt.every=100 --set train.metrics="$out/metrics.jsonl"

echo "== generate from \"$prompt\" (greedy)"
"$build/tools/boost-generate" --prompt "$prompt" --temperature 0 --max-new-tokens 24 --json "$out/ckpt" \
  >"$out/generate.json"
python3 -c 'import json,sys; g=json.load(open(sys.argv[1])); print("prompt tokens", g["prompt_tokens"]); print(repr(g["text"]))' \
  "$out/generate.json"

echo "== export: a Hugging Face folder with the GPT-2 tokenizer files"
"$build/tools/boost-export" --hf "$out/hf" "$out/ckpt" --quiet
ls "$out/hf"

if ! "$pyenv/bin/python" -c 'import transformers, torch' 2>/dev/null; then
  echo "gpt2_fortunes: no transformers in $pyenv (bash scripts/setup-pyenv.sh): the folder is $out/hf"
  exit 0
fi
echo "== transformers: AutoTokenizer + AutoModelForCausalLM on the same prompt"
"$pyenv/bin/python" - "$out/hf" "$prompt" "$out/generate.json" <<'PY'
import json, sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
hf, prompt, gen = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))
tok = AutoTokenizer.from_pretrained(hf)
model = AutoModelForCausalLM.from_pretrained(hf, trust_remote_code=True, torch_dtype=torch.float32)
ids = torch.tensor([[tok.eos_token_id] + tok.encode(prompt)])  # <|endoftext|> first, as before every document
out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=len(gen["tokens"]), do_sample=False,
                     pad_token_id=tok.eos_token_id)[0, ids.shape[1]:].tolist()
print("transformers:", repr(tok.decode(out)))
print("same tokens as boost-generate:", out == gen["tokens"] and ids[0].tolist() == gen["prompt_tokens"])
PY
